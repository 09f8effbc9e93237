"""Options that take one of a fixed set of values (jedictl.model.choices): anything else is bad input,
refused before the store is opened, with the allowed values and the closest one in the message."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jedictl.errors import BadInput
from jedictl.model.choices import refusal


def check_choice(value: str | None, allowed: Iterable[str], option: str, noun: str) -> str | None:
    """`value` when it is one of `allowed` (or None); else BadInput naming `option`."""
    options = tuple(allowed)
    if value is not None and value not in options:
        raise BadInput(refusal(value, options, noun), option)
    return value


def check_choices(values: Sequence[str] | None, allowed: Iterable[str], option: str, noun: str) -> tuple[str, ...]:
    """Every value of a repeatable option checked as `check_choice` does."""
    options = tuple(allowed)
    for value in values or ():
        check_choice(value, options, option, noun)
    return tuple(values or ())
