"""Hypothesis strategies for what users hand to jedictl: valid documents built from their grammar, and
broken ones made from valid ones by deleting, retyping and renaming fields or by corrupting the text."""

from __future__ import annotations

import json
import string
from typing import Any

import yaml
from hypothesis import strategies as st

from jedictl.engine.task.options import REFUSED, SPECS

INT32 = 2**31 - 1

#: Fragments that try to run code, inject SQL or break a parser; valid text must keep them inert.
HOSTILE = (
    "'; DROP TABLE tasks; --", "\"; DROP TABLE jobs; --", "$(touch PWNED)", "`touch PWNED`", "{{7*7}}", "{0.__class__}",
    "%s%s%n%x", "__import__('os').system('touch PWNED')", "lambda: 0", "a.__class__.__mro__", "|| true", "&& rm -rf .",
    "<script>", "\\", "'", '"', "%", "_", "*", "?", "[", "]", "{", "}", "#", ";", "\t", "é", "名前", "🙂", "\u202e",
)
#: Characters that are not allowed in text fields (control characters, NUL) or that upset line-based output.
NASTY_CHARS = ("\x00", "\x01", "\x1b", "\r", "\n", "\x7f", "\x85", "\u2028", "\ufeff")

NAME_ALPHABET = string.ascii_letters + string.digits + "_.-:/+"
names = st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=40)


def _printable(exclude: str = "") -> st.SearchStrategy[str]:
    return st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters=exclude)


def free_text(max_size: int = 40, exclude: str = "") -> st.SearchStrategy[str]:
    """Printable text with hostile fragments mixed in (no control characters: valid for text fields)."""
    fragments = [f for f in HOSTILE if not any(c in f for c in exclude) and f != "\t"]
    piece = st.one_of(st.text(_printable(exclude), max_size=8), st.sampled_from(fragments))
    return st.lists(piece, max_size=5).map("".join).map(lambda s: s[:max_size])


any_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(HOSTILE + NASTY_CHARS),
    st.lists(st.one_of(st.sampled_from(HOSTILE + NASTY_CHARS), st.text(max_size=5)), max_size=4).map("".join),
)
json_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, INT32, INT32 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    any_text,
)
#: What a store can keep in a JSON column: a valid document may hold any of it in a kept (unknown) key.
storable_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**62), 2**62), st.floats(allow_nan=False, allow_infinity=False),
              st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20)),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(names, children, max_size=3),
    max_leaves=8,
)
#: Values at the edges of what parsers, columns and clocks hold: one of them replaces a field of a valid document.
EDGE_VALUES = (
    None, True, False, 0, -1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, 1e300, -1e300, 1.5, -0.0,
    float("nan"), float("inf"), float("-inf"), "", " ", "0", "-1", "1e999", "nan", "x'; DROP TABLE jobs; --", "\x00", "a\nb", "\ud800",
    "9" * 40, "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-02-30", [], {}, [None], {"a": {"b": [1]}},
)
edge_values = st.sampled_from(EDGE_VALUES)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.one_of(names, any_text), children, max_size=4),
    max_leaves=12,
)


# ------------------------------------------------------------------------------ valid task specs

SAFE_REGEXES = (r"\.root$", r"^f\.0", r"\.log\.tgz(\.\d+)*$", r"_tid\d+_00", r"[0-9]{3}", r"(?i)DAOD")
CATALOG_DATASETS = (
    "ds.in", "mc23_13p6TeV.601229.PhPy8EG_A14_ttbar.evgen.EVNT.e8514",
    "mc23_13p6TeV.601229.PhPy8.DAOD_PHYS.e8514_p6026", "ddo.000001.Atlas.Ideal.DBRelease.v340101",
)
SCALARS = ("SN", "RNDMSEED", "MAXEVENTS", "SKIPEVENTS", "FIRSTEVENT", "JEDITASKID", "ATTEMPTNR", "SURL")
_SKIP_SECTIONS = ("split", "merge", "placement", "dependencies", "events")  # built by hand below (events: tests/cli/test_event_service.py)


def _option_value(spec) -> st.SearchStrategy[Any]:  # noqa: ANN001 - an OptionSpec
    if spec.choices:
        return st.sampled_from(spec.choices)
    if spec.kind is bool:
        return st.booleans()
    if spec.kind is int:
        low = int(spec.minimum) if spec.minimum is not None else -1000
        return st.integers(min_value=low, max_value=int(spec.maximum) if spec.maximum is not None else INT32)
    if spec.kind is float:
        low = spec.minimum if spec.minimum is not None else 0.0
        return st.floats(min_value=low, max_value=spec.maximum if spec.maximum is not None else 1e6, allow_nan=False)
    return None  # type: ignore[return-value]


# Options jedictl refuses (REFUSED) are not valid in a valid spec; the broken-spec strategies meet them.
_GENERIC_OPTIONS = [s for s in SPECS if s.section not in _SKIP_SECTIONS and s.name not in REFUSED and _option_value(s) is not None]


@st.composite
def option_sections(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """retry, scouts, completion and resources options with values inside their limits."""
    chosen = draw(st.lists(st.sampled_from(_GENERIC_OPTIONS), max_size=6, unique_by=lambda s: s.name))
    sections: dict[str, dict[str, Any]] = {}
    for spec in chosen:
        sections.setdefault(spec.section, {})[spec.name] = draw(_option_value(spec))
    completion = sections.get("completion", {})
    if completion.get("fail_when_goal_unreached") and completion.get("use_exhausted"):
        del completion["use_exhausted"]
    retry = sections.get("retry", {})
    if "retry_ram_offset" in retry and "retry_ram_step" not in retry:  # the ladder is offset + n x step
        retry["retry_ram_step"] = draw(_option_value(next(s for s in SPECS if s.name == "retry_ram_step")))
    resources = sections.get("resources", {})
    if resources.get("max_core_count") is not None and resources.get("core_count") is not None:
        resources["max_core_count"] = max(resources["max_core_count"], resources["core_count"])
    return sections


def command_text(streams: list[str]) -> st.SearchStrategy[str]:
    """A job-parameter template: literal text (hostile but inert) and placeholders that name something."""
    decorated = [f"${{{s}}}" for s in streams] + [f"${{{s}/L}}" for s in streams if s.startswith("IN")] + [f"${{{s}}}" for s in SCALARS]
    piece = st.one_of(st.sampled_from(decorated), free_text(30, exclude="$"))
    return st.lists(piece, min_size=1, max_size=8).map(" ".join).filter(lambda s: s.strip())


def file_template() -> st.SearchStrategy[str]:
    part = st.text(alphabet=NAME_ALPHABET, max_size=12)
    return st.tuples(part, st.sampled_from(["${SN}", "${SN/P}"]), part).map("".join)


@st.composite
def task_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A jedictl task spec that is valid: submit must take it."""
    spec: dict[str, Any] = {"name": "fz." + draw(names)}
    for key, limit in (("label", 32), ("processing_type", 64), ("working_group", 32), ("campaign", 64), ("transformation", 512),
                       ("release", 256), ("architecture", 256), ("vo", 32)):
        if draw(st.booleans()):
            spec[key] = draw(st.sampled_from(["managed", "user", "test"]) if key == "label" else free_text(limit))
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-(10**9), max_value=10**9))
    if draw(st.booleans()):
        spec["unique_name"] = draw(st.booleans())
    streams: list[str] = []
    no_input = draw(st.booleans())
    sections = draw(option_sections())
    if no_input:
        spec["no_input"] = True
        sections["split"] = draw(st.sampled_from([
            {"n_events": 100, "n_events_per_job": 10}, {"n_files": 3}, {"n_events": 1000, "n_events_per_job": 1000},
        ]))
        streams.append("IN")
    else:
        master: dict[str, Any] = {"dataset": draw(st.sampled_from(CATALOG_DATASETS) | names)}
        if draw(st.booleans()):
            master["include" if draw(st.booleans()) else "exclude"] = draw(st.lists(st.sampled_from(SAFE_REGEXES), min_size=1, max_size=2))
        if draw(st.booleans()):
            master["offset"] = draw(st.integers(0, 10))
        if draw(st.booleans()):
            master["random_order"] = True
        spec["inputs"] = [master]
        streams.append("IN")
        for index in range(draw(st.integers(0, 2))):
            stream = f"SEC{index}"
            secondary: dict[str, Any] = {"dataset": draw(st.sampled_from(CATALOG_DATASETS) | names), "stream": stream}
            secondary.update(draw(st.sampled_from([{"ratio": 2}, {"nosplit": True, "repeat": True}, {"files_per_job": 1, "repeat": True}, {}])))
            spec["inputs"].append(secondary)
            streams.append(stream)
        sections["split"] = draw(st.sampled_from([{}, {"n_files_per_job": 1}, {"n_files_per_job": 3}, {"n_gb_per_job": 2.5},
                                                  {"n_events_per_job": 50, "n_events_per_input_file": 100}, {"n_files": 4}]))
    if sections["split"].get("n_files_per_job") or sections["split"].get("n_events_per_job"):
        sections.get("scouts", {}).pop("tgt_max_output_for_ng", None)  # it sets n_gb_per_job: not with those
    spec["outputs"] = [{"dataset": draw(names), "file_template": draw(file_template())} for _ in range(draw(st.integers(1, 2)))]
    streams += [f"OUTPUT{index}" for index in range(len(spec["outputs"]))]
    if draw(st.booleans()):
        spec["log"] = {"dataset": draw(names), "file_template": draw(file_template())}
    spec["command"] = draw(command_text(streams))
    if draw(st.booleans()):
        sections["placement"] = {"excluded_sites": draw(st.lists(st.sampled_from(["MWT2", "AGLT2*", "*TEST*", "x'; DROP TABLE sites; --"]), max_size=2))}
    spec.update({section: values for section, values in sections.items() if values})
    return spec


@st.composite
def panda_params(draw: st.DrawFn) -> dict[str, Any]:
    """PanDA task parameters that are valid: submit must take them."""
    label = draw(st.sampled_from(["managed", "user", "test"]))
    document: dict[str, Any] = {"taskName": "fz." + draw(names), "vo": draw(st.sampled_from(["atlas", "wlcg"])), "prodSourceLabel": label}
    items: list[dict[str, Any]] = [{"type": "constant", "value": draw(free_text(30, exclude="$"))} for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        document["noInput"] = True
        document["nEvents"], document["nEventsPerJob"] = 20, 5
    else:
        items.append({"type": "template", "param_type": "input", "dataset": draw(st.sampled_from(CATALOG_DATASETS) | names),
                      "value": draw(st.sampled_from(["--in=${IN}", "-i \"${IN/T}\"", "${IN/L}"]))})
        document["nFilesPerJob"] = draw(st.integers(1, 10))
    items.append({"type": "template", "param_type": "output", "dataset": draw(names), "value": "--out=" + draw(file_template())})
    draw(st.randoms()).shuffle(items)
    document["jobParameters"] = items
    if draw(st.booleans()):
        document["log"] = {"type": "template", "param_type": "log", "dataset": draw(names), "value": draw(file_template())}
    for key, value in draw(st.dictionaries(st.sampled_from(["maxAttempt", "coreCount", "ramCount", "skipScout", "taskPriority", "walltime"]),
                                           st.integers(1, 1000), max_size=3)).items():
        document[key] = bool(value % 2) if key == "skipScout" else value
    if draw(st.booleans()):
        document[draw(st.sampled_from(["cliParams", "someFutureKey", "usePrefetcher"]))] = draw(storable_values)
    return document


# ---------------------------------------------------------------------------------- broken documents

def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, prefix + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, prefix + (index,))
    return found


def _parent(document: Any, path: tuple) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


@st.composite
def mutated(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> Any:
    """A document with one to three fields deleted, retyped, renamed, duplicated or replaced by junk."""
    document = json.loads(json.dumps(draw(documents)))  # a deep copy
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(document) if p]
        if not paths:
            return draw(json_values)
        path = draw(st.sampled_from(paths))
        parent, key = _parent(document, path), path[-1]
        action = draw(st.sampled_from(["delete", "replace", "retype", "rename", "add", "nasty"]))
        if action == "delete":
            del parent[key]
        elif action == "replace":
            parent[key] = draw(json_values)
        elif action == "retype":
            value = parent[key]
            parent[key] = draw(st.sampled_from([str(value), [value], {"value": value}, None, True, 0, -1, 1.5, ""]))
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.one_of(names, any_text))] = parent.pop(key)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.one_of(names, any_text))] = draw(json_values)
        elif action == "nasty" and isinstance(parent[key], str):
            position = draw(st.integers(0, len(parent[key])))
            parent[key] = parent[key][:position] + draw(st.sampled_from(HOSTILE + NASTY_CHARS)) + parent[key][position:]
        else:
            parent[key] = draw(json_values)
    return document


def serialise(draw: st.DrawFn, document: Any) -> str:
    """JSON or YAML text of `document`."""
    if draw(st.booleans()):
        return json.dumps(document, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    return yaml.safe_dump(document, allow_unicode=draw(st.booleans()), default_flow_style=draw(st.sampled_from([None, False, True])))


def with_a_key_twice(text: str) -> str:
    """The text of a document whose first key is given a second time (YAML and JSON readers would keep
    the second silently; jedictl must refuse the document). Text without a first key comes back as it is."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            first = next(iter(json.loads(stripped)), None)
        except (ValueError, TypeError):
            first = None
        if isinstance(first, str):
            return "{" + json.dumps(first) + ": null, " + stripped[1:]
        return text
    line = text.split("\n", 1)[0]
    if ":" in line and not line.startswith((" ", "-", "#")):
        return text.rstrip("\n") + "\n" + line.split(":", 1)[0] + ": null\n"
    return text


@st.composite
def corrupted_text(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> str:
    """The text of a valid document with bytes cut, inserted or swapped: syntax errors, mostly."""
    text = serialise(draw, draw(documents))
    position = draw(st.integers(0, len(text)))
    action = draw(st.sampled_from(["truncate", "insert", "delete", "repeat"]))
    if action == "truncate":
        return text[:position]
    if action == "repeat":
        return with_a_key_twice(text)
    if action == "insert":
        return text[:position] + draw(st.sampled_from(['"', "{", "[", ":", "\n  - ", "\t", "\\u", "\\ud800", "&a", "*a", "!!python/object:os.system", "\x00"])) + text[position:]
    return text[:position] + text[position + draw(st.integers(1, 20)):]


@st.composite
def broken_documents(draw: st.DrawFn, documents: st.SearchStrategy[Any]) -> str:
    """Text that is probably not a valid document of its kind: mutated, corrupted, or random."""
    kind = draw(st.sampled_from(["mutated", "mutated", "mutated", "corrupted", "random", "junk"]))
    if kind == "mutated":
        return serialise(draw, draw(mutated(documents)))
    if kind == "corrupted":
        return draw(corrupted_text(documents))
    if kind == "random":
        return serialise(draw, draw(json_values))
    return draw(st.one_of(st.text(max_size=200), st.sampled_from([
        "", "   ", "null", "[]", "{}", "- a\n- b", "a: [", "{\"a\": NaN}", "{\"a\": Infinity}", "{\"a\": 1e999}",
        "{\"a\": \"\\ud800\"}", "a: \"\\ud800\"", "a: !!binary AAAA", "a: !!python/object/apply:os.system ['touch PWNED']",
        "&a [*a, *a]", "a: &x [*x]", "a: " + "[" * 5000, "{" * 5000, "a: 0x7fffffffffffffffffff", "\ufeff{\"a\": 1}",
    ])))
