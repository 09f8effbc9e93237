"""Readers for fields of a submitted document: each checks one value and names its path on failure."""

from __future__ import annotations

import re
from typing import Any

from jedictl.errors import BadInput

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")  # control characters but tab and newline


def text(value: Any, path: str, required: bool = False, max_length: int = 1024) -> str | None:
    if value is None or value == "":
        if required:
            raise BadInput("is required", path)
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadInput("must be a string", path)
    result = str(value)
    if len(result) > max_length:
        raise BadInput(f"must be at most {max_length} characters", path)
    if _CONTROL.search(result):
        raise BadInput("must not contain control characters", path)
    return result


def integer(value: Any, path: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        else:
            raise BadInput("must be an integer", path)
    if minimum is not None and value < minimum:
        raise BadInput(f"must be at least {minimum}", path)
    if maximum is not None and value > maximum:
        raise BadInput(f"must be at most {maximum}", path)
    return value


def number(value: Any, path: str, minimum: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput("must be a number", path)
    if minimum is not None and value < minimum:
        raise BadInput(f"must be at least {minimum:g}", path)
    return float(value)


def flag(value: Any, path: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if value in (0, 1):
        return bool(value)
    raise BadInput("must be true or false", path)


def names(value: Any, path: str) -> list[str]:
    """A list of strings, or a comma-separated string, as a list (empty when absent)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise BadInput("must be a string or a list of strings", path)


def mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput("must be a mapping", path)
    return value


def sequence(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInput("must be a list", path)
    return value
