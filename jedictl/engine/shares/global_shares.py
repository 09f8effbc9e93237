"""The global-share tree (panda-server.md §3, jedi-inventory.md §12.2): definitions, normalisation and
which leaf a task belongs to.

Each node's value is a share of its parent, normalised over its siblings, so leaf values become
absolute percentages. A task goes to the share it names (if that is a leaf) or to the first leaf, in
tree order, whose regex attributes all match it (`re.fullmatch`; a missing working group is compared as
a single space, as PanDA does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from jedictl.engine.input import fields
from jedictl.engine.input.regexes import compile_pattern
from jedictl.errors import BadInput

REGEX_ATTRIBUTES = ("prodsourcelabel", "workinggroup", "campaign", "processingtype", "transpath")


@dataclass(frozen=True)
class Share:
    name: str
    value: float
    children: tuple["Share", ...] = ()
    patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False)
    rtype: str | None = None
    vo: str | None = None
    throttled: bool = True

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self) -> Iterator["Share"]:
        yield self
        for child in self.children:
            yield from child.walk()

    def leaves(self) -> list["Share"]:
        return [node for node in self.walk() if node.is_leaf and node.name != ROOT]

    def matches(self, attributes: Mapping[str, Any]) -> bool:
        for key, pattern in self.patterns.items():
            value = attributes.get(key)
            if key == "workinggroup" and not value:
                value = " "
            if value is None or not pattern.fullmatch(str(value)):
                return False
        return True


ROOT = "__root__"


def load_shares(definitions: Sequence[Mapping[str, Any]], path: str = "global_shares") -> Share:
    """Build the tree from nested definitions (`children` lists) under a root of value 100."""
    names: set[str] = set()
    children = tuple(_node(raw, f"{path}[{i}]", names) for i, raw in enumerate(definitions))
    if not children:
        raise BadInput("at least one share is required", path)
    return Share(name=ROOT, value=100.0, children=children)


def _node(raw: Any, where: str, names: set[str]) -> Share:
    body = fields.mapping(raw, where)
    allowed = {"name", "value", "children", "rtype", "vo", "throttled", *REGEX_ATTRIBUTES}
    for key in body:
        if key not in allowed:
            raise BadInput(f"unknown share attribute (known: {', '.join(sorted(allowed))})", f"{where}.{key}")
    name = fields.text(body.get("name"), f"{where}.name", required=True, max_length=64) or ""
    if name in names:
        raise BadInput(f"share {name!r} is defined twice", f"{where}.name")
    names.add(name)
    patterns = {}
    for key in REGEX_ATTRIBUTES:
        text = fields.text(body.get(key), f"{where}.{key}", max_length=256)
        if text is not None:
            patterns[key] = compile_pattern(text, f"{where}.{key}", max_length=256)
    kids = tuple(_node(child, f"{where}.children[{i}]", names) for i, child in enumerate(fields.sequence(body.get("children"), f"{where}.children")))
    return Share(
        name=name, value=fields.number(body.get("value"), f"{where}.value", minimum=0) or 0.0, children=kids,
        patterns=patterns, rtype=fields.text(body.get("rtype"), f"{where}.rtype", max_length=32),
        vo=fields.text(body.get("vo"), f"{where}.vo", max_length=32),
        throttled=body.get("throttled", True) is not False,
    )


def normalise(root: Share) -> dict[str, float]:
    """Absolute percentage of every node: value x parent's / sum of siblings' values."""
    result: dict[str, float] = {}

    def visit(node: Share, absolute: float) -> None:
        result[node.name] = absolute
        total = sum(child.value for child in node.children)
        for child in node.children:
            visit(child, absolute * child.value / total if total else 0.0)

    visit(root, 100.0)
    result.pop(ROOT, None)
    return result


def match_share(root: Share, attributes: Mapping[str, Any], requested: str | None = None) -> Share | None:
    leaves = root.leaves()
    if requested:
        return next((leaf for leaf in leaves if leaf.name == requested), None)
    return next((leaf for leaf in leaves if leaf.matches(attributes)), None)
