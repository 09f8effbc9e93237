"""Readers for fields of a submitted document: each checks one value and names its path on failure."""

from __future__ import annotations

import math
import re
from typing import Any

from jedictl.errors import BadInput

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")  # control characters but tab and newline
#: The store's widest integer column (BIGINT); a larger value is refused here, not by the driver.
INT64_MAX = 2**63 - 1
#: An INTEGER column (PostgreSQL's int4): the bound for values stored in one.
INT32_MAX = 2**31 - 1
#: How deeply a free-form value (attributes, kept keys) may nest.
MAX_DEPTH = 32


def unicode_error(value: str) -> str | None:
    """Why `value` cannot be stored as text (a NUL or a lone surrogate), or None."""
    if "\x00" in value:
        return "must not contain NUL characters"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must be valid Unicode text (a lone surrogate cannot be stored)"
    return None


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
    problem = unicode_error(result)
    if problem:
        raise BadInput(problem, path)
    return result


#: Characters free text is never stored with as they are: C0/C1 controls and DEL, lone surrogates,
#: line and paragraph separators, and the bidirectional overrides and isolates ("Trojan Source").
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escaped(value: str, keep: str = "") -> str:
    """Free text (a comment, a reason, an error message) as it is stored and shown: every character of
    `_UNSAFE` but those in `keep` written as its escape (`\\x1b`, `\\n`, `\\u202e`), so text printed on a
    terminal can never move the cursor, change colours or reorder what follows it."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii")
                       if m.group() not in keep else m.group(), value)


def free_text(value: Any, path: str, max_length: int = 4000, keep: str = "", truncate: bool = False) -> str | None:
    """A free-text field: any string, stored with its control characters escaped (`escaped`); longer
    than `max_length` once escaped, it is refused -- or with `truncate`, cut, its last character "…"."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadInput("must be a string", path)
    result = escaped(str(value), keep)
    if len(result) > max_length:
        if not truncate:
            raise BadInput(f"must be at most {max_length} characters", path)
        result = result[: max_length - 1] + "…"
    return result


#: Sites (PanDA queues), nuclei, storage endpoints and clouds: letters, digits and . _ -, starting with a
#: letter or digit. They name folders (pilot logs, replicas) and go into commands, so never a "/", "..",
#: a space, a quote or shell syntax (`../../etc`, `X; DROP TABLE sites` were taken as site names).
CATALOG_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")


def catalog_name(value: Any, path: str, what: str = "name", required: bool = False, max_length: int = 64) -> str | None:
    """A site, nucleus, storage endpoint or cloud name (`CATALOG_NAME_RE`), at most `max_length` long."""
    name = text(value, path, required=required, max_length=max_length)
    if name is not None and not CATALOG_NAME_RE.match(name):
        raise BadInput(f"{what} must be letters, digits and . _ - (starting with a letter or digit)", path)
    return name


def integer(value: Any, path: str, minimum: int | None = -INT64_MAX, maximum: int | None = INT64_MAX) -> int | None:
    """An integer (also from an integral float or a string of digits), by default within BIGINT's range."""
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
    if not math.isfinite(value) or abs(value) > 1e300:
        raise BadInput("must be a finite number", path)
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
        items = [item.strip() for item in value.split(",") if item.strip()]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = list(value)
    else:
        raise BadInput("must be a string or a list of strings", path)
    for index, item in enumerate(items):
        text(item, f"{path}[{index}]")  # each name is text a store can keep
    return items


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


def free_form(value: Any, path: str) -> dict[str, Any]:
    """A free-form mapping kept as it is (attributes, unknown keys): anything JSON can hold and a store
    can keep -- no NUL or lone surrogate in a text, no NaN or infinity, string keys, at most MAX_DEPTH
    levels deep."""
    result = mapping(value, path)
    check_storable(result, path)
    return result


def check_storable(value: Any, path: str) -> None:
    """Refuse what JSON columns cannot hold, naming the place (iterative: no depth is too deep to check)."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BadInput(f"nests more than {MAX_DEPTH} levels deep", where)
        if isinstance(item, str):
            problem = unicode_error(item)
            if problem:
                raise BadInput(problem, where)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadInput("must be a finite number", where)
        elif isinstance(item, int) and not isinstance(item, bool):
            if abs(item) > INT64_MAX:
                raise BadInput("is too large a number", where)
        elif isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise BadInput(f"key {key!r} must be a string", where)
                problem = unicode_error(key)
                if problem:
                    raise BadInput(f"a key {problem}", where)
                stack.append((child, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{index}]", depth + 1) for index, child in enumerate(item))
        elif item is not None and not isinstance(item, bool):
            raise BadInput(f"holds a {type(item).__name__}, which JSON cannot", where)
