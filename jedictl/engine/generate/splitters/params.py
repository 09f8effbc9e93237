"""Parameter values of the splitting algorithms as their declared types. Values given in Python keep
their type (and are checked); text from `--param k=v` is parsed: true/false, numbers, JSON for lists and
objects, or a list separated by commas (the parameter may name another separator).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, get_args, get_origin

from jedictl.errors import BadInput


def coerce(value: Any, hint: Any, metadata: Mapping[str, Any], path: str) -> Any:
    """A parameter value as its declared type; text from the command line is parsed."""
    optional = type(None) in get_args(hint)
    if optional:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none")):
            return None
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    base = get_origin(hint) or hint
    if base is bool:
        return _bool(value, path)
    if base in (int, float):
        number = _number(value, base, path)
        minimum = metadata.get("minimum")
        if minimum is not None and number < minimum:
            raise BadInput(f"must be at least {minimum:g}", path)
        return number
    if base is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise BadInput("must be a string", path)
        return str(value)
    if base is tuple:
        (item,) = get_args(hint)[:1]
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                value = _json(text, path)
            else:
                value = [part.strip() for part in text.split(metadata.get("separator", ",")) if part.strip()]
        if not isinstance(value, (list, tuple)):
            raise BadInput("must be a list", path)
        return tuple(coerce(entry, item, {}, path) for entry in value)
    if base is dict:
        if isinstance(value, str):
            value = _json(value, path)
        if not isinstance(value, Mapping):
            raise BadInput('must be a JSON object, e.g. {"timePerEvent": 10}', path)
        return dict(value)
    return value


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise BadInput("must be true or false", path)


def _number(value: Any, kind: type, path: str) -> int | float:
    what = "a whole number" if kind is int else "a number"
    if isinstance(value, bool):
        raise BadInput(f"must be {what}", path)
    try:
        number = kind(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise BadInput(f"must be {what}", path) from None
    if kind is int and isinstance(number, float):
        if not number.is_integer():
            raise BadInput(f"must be {what}", path)
        number = int(number)
    if not isinstance(number, (int, float)):
        raise BadInput(f"must be {what}", path)
    return number


def _json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"is not valid JSON ({exc.msg})", path) from None
