"""Reading the YAML or JSON documents users hand to jedictl (task specs, catalogs, rules, queues)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from jedictl.errors import BadInput
from jedictl.safe_yaml import UniqueKeyLoader

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
#: The safe loader that refuses duplicate keys (jedictl.safe_yaml), on libyaml's parser where PyYAML was
#: built with it; every document goes through the checks below before construction.
SAFE_LOADER = UniqueKeyLoader


def parse_text(text: str, source: str) -> Any:
    """JSON (when it looks like JSON) or YAML; a syntax error names the line and column."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise BadInput(f"is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB", source)
    if text.lstrip().startswith(("{", "[")):
        try:
            return parse_json(text, source)
        except BadInput as json_error:
            try:  # YAML's flow style (`{name: x, inputs: [...]}`) looks like JSON too
                return _yaml(text, source)
            except BadInput:
                raise json_error from None
    return _yaml(text, source)


def parse_json(text: str, source: str) -> Any:
    """JSON only; an error names the line and column."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise BadInput(f"line {exc.lineno} column {exc.colno}: {exc.msg} (invalid JSON)", source) from exc
    except RecursionError as exc:
        raise BadInput("is nested too deeply", source) from exc
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise BadInput(f"{_first_line(exc)} (invalid JSON)", source) from exc


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing one that holds a key twice (json keeps the last one without a word)."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {twice!r} in an object")
    return document


def _yaml(text: str, source: str) -> Any:
    loader = None
    try:
        loader = SAFE_LOADER(text)  # reads the stream: a character YAML refuses is an error here already
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or _first_line(exc)
        if "maximum nesting depth" in problem:  # libyaml's own limit: the same refusal as PyYAML's RecursionError
            raise BadInput("is nested too deeply", source) from exc
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        raise BadInput(f"{where}{problem} (invalid YAML)", source) from exc
    except RecursionError as exc:
        raise BadInput("is nested too deeply", source) from exc
    except (ValueError, OverflowError) as exc:  # a value the constructor cannot build: 2024-13-45, a 5000-digit int
        raise BadInput(f"{_first_line(exc)} (invalid YAML)", source) from exc
    finally:
        if loader is not None:
            loader.dispose()


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse anchors and aliases that refer to themselves, or that multiply a small text into a huge
    document (the "billion laughs"): both would hang or crash whatever walks the document later."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the path from the root to the node being visited
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = node.value if isinstance(node, yaml.SequenceNode) else (
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else [])
        if finished:
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            open_nodes.discard(key)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise BadInput("an alias refers to the node that contains it (invalid YAML)", source)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    if sizes[id(root)] > 10 * len(sizes) + 100_000:
        raise BadInput(f"its aliases expand {len(sizes)} YAML nodes into {sizes[id(root)]} (refused)", source)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def load_document(text: str, source: str) -> dict[str, Any]:
    """A document that must be a mapping (task specs, catalogs)."""
    document = parse_text(text, source)
    if not isinstance(document, dict):
        raise BadInput("must hold a mapping", source)
    return document


def load_list(text: str, source: str, key: str = "files") -> list[Any]:
    """A document that is a list, or a mapping holding one under `key`."""
    document = parse_text(text, source)
    if isinstance(document, dict) and isinstance(document.get(key), list):
        return document[key]
    if not isinstance(document, list):
        raise BadInput(f"must hold a list (or a mapping with a `{key}` list)", source)
    return document
