"""Every declared task option is read by the engine, or refused at submission (issue 14 defect 7).

An option that is parsed, stored and exported but read nowhere else is a promise jedictl does not keep.
The scan walks the jedictl sources (not the modules that only declare, parse, export or document
options) for reads of an option off an options object: `options.name`, `o.name`, `self.options.name`,
`getattr(options, "name")`, `options.get("name")`, `options["name"]`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jedictl
from jedictl.engine.task.options import REFUSED, SPECS

PACKAGE = Path(jedictl.__file__).resolve().parent
#: Declaring, parsing, exporting, documenting: reading an option there is not giving it an effect.
NOT_USES = {
    "engine/task/options.py", "engine/task/panda_params.py", "engine/task/spec.py", "engine/task/split_rule.py",
    "engine/task/incexec.py", "docgen.py", "manpages.py",
    # `jedictl split` previews what generation would do: an option read only there does nothing to a real task
    "engine/generate/splitters/jedi_preview.py",
}
#: What an options object is called where it is read.
OWNER = re.compile(r"(^|[._])(options|opts|o)$")


def _owner(node: ast.AST) -> bool:
    return bool(OWNER.search(ast.unparse(node)))


def _names_read(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _owner(node.value):
            names.add(node.attr)
        elif isinstance(node, ast.Subscript) and _owner(node.value) and isinstance(node.slice, ast.Constant):
            names.add(str(node.slice.value))
        elif isinstance(node, ast.Call):
            func, args = node.func, node.args
            if isinstance(func, ast.Attribute) and func.attr == "get" and _owner(func.value) \
                    and args and isinstance(args[0], ast.Constant):
                names.add(str(args[0].value))
            elif isinstance(func, ast.Name) and func.id == "getattr" and len(args) >= 2 and _owner(args[0]) \
                    and isinstance(args[1], ast.Constant):
                names.add(str(args[1].value))
    return names


def options_read(package: Path = PACKAGE) -> set[str]:
    read: set[str] = set()
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() in NOT_USES:
            continue
        read |= _names_read(ast.parse(path.read_text(), str(path)))
    return read


def unused(declared: list[str], read: set[str]) -> list[str]:
    return [name for name in declared if name not in read and name not in REFUSED]


def test_every_declared_option_is_read_outside_parsing_and_export_or_refused():
    missing = unused([spec.name for spec in SPECS], options_read())
    assert missing == [], f"declared but read nowhere outside parsing/export, and not refused: {missing}"


def test_refused_options_are_declared():
    assert set(REFUSED) <= {spec.name for spec in SPECS}


def test_the_scan_sees_a_read_and_misses_a_declaration_nobody_reads(tmp_path):
    # The scan can fail: an option only mentioned in a parsing module or as a plain attribute of
    # something else is unused; one read off an options object in an engine module is used.
    (tmp_path / "engine" / "task").mkdir(parents=True)
    (tmp_path / "engine" / "task" / "options.py").write_text("probe_used = options.probe_unused\n")
    (tmp_path / "engine" / "agent.py").write_text(
        "def f(task, o, self):\n    site.probe_unused\n    return o.probe_used or getattr(self.options, 'probe_getattr')\n")
    read = options_read(tmp_path)
    assert unused(["probe_used", "probe_getattr", "probe_unused"], read) == ["probe_unused"]
