"""Reading the YAML or JSON documents users hand to jedictl (task specs, catalogs, rules, queues)."""

from __future__ import annotations

import json
from typing import Any

import yaml

from jedictl.errors import BadInput

MAX_DOCUMENT_BYTES = 256 * 1024 * 1024


def parse_text(text: str, source: str) -> Any:
    """JSON (when it looks like JSON) or YAML; a syntax error names the line and column."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise BadInput(f"is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MB", source)
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(f"line {exc.lineno} column {exc.colno}: {exc.msg} (invalid JSON)", source) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        raise BadInput(f"{where}{problem} (invalid YAML)", source) from exc


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
