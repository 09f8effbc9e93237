"""PanDA's `splitRule` string (`NF=4,MF=200,US=2`): an export and import format for TaskOptions.

jedictl stores typed options; this codec exists so operators can compare with PanDA and bring PanDA
tasks over (jedi-inventory.md §3.4). Flags encode as `XX=1`; `LS`, `IL`, `IP`, `IK` and `US` are
derived from several options.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jedictl.engine.task.options import SPECS, TaskOptions
from jedictl.errors import BadInput

_DERIVED = {"LS", "IL", "IP", "IK", "US", "LI"}
_BY_CODE = {spec.code: spec for spec in SPECS if spec.code and spec.code not in _DERIVED}


def encode(options: TaskOptions) -> str:
    tokens: dict[str, str] = {}
    for spec in SPECS:
        value = getattr(options, spec.name)
        if value is None or value is False or not spec.code or spec.code in _DERIVED:
            continue
        tokens[spec.code] = "1" if value is True else _number(value)
    limited = (1 if options.included_sites else 0) + (2 if options.excluded_sites else 0)
    if limited:
        tokens["LS"] = str(limited)
    if options.allow_input_lan:
        tokens["IL"] = "1" if options.allow_input_lan == "use" else "2"
    if options.use_local_io:
        tokens["LI"] = "1"
    if options.ip_connectivity:
        kind, _, stack = options.ip_connectivity.partition("#")
        tokens["IP"] = "1" if kind == "full" else "2"
        if stack:
            tokens["IK"] = "6" if stack.lower() == "ipv6" else "4"
    tokens["US"] = "1" if options.skip_scout else "2"
    return ",".join(f"{code}={value}" for code, value in sorted(tokens.items()))


def decode(rule: str) -> TaskOptions:
    """Options from a splitRule string; codes jedictl does not model are refused by name."""
    values: dict[str, Any] = {}
    for token in filter(None, (part.strip() for part in rule.split(","))):
        code, sep, raw = token.partition("=")
        if not sep:
            raise BadInput(f"token {token!r} is not XX=value", "splitRule")
        if code == "US":
            values["skip_scout"] = raw == "1"
        elif code == "IL":
            values["allow_input_lan"] = "use" if raw == "1" else "only"
        elif code == "LI":
            values["use_local_io"] = raw == "1"
        elif code in _BY_CODE:
            spec = _BY_CODE[code]
            values[spec.name] = True if spec.kind is bool else spec.kind(raw) if spec.kind in (int, float) else raw
        elif code not in ("LS", "IP", "IK"):
            raise BadInput(f"code {code} is not supported by jedictl", "splitRule")
    return dataclasses.replace(TaskOptions(), **values)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
