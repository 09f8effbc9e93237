"""A retry rule (a `retry_rules` row) as the retry module matches it (`engine.jobs.retry_rules`) and the
store keeps it (`store.retry_rules`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

SCOPE_FIELDS = ("vo", "prod_source_label", "architecture", "release", "work_queue")
#: The columns of a rule (and the keys of a rules file).
RULE_KEYS = {"error_source", "error_code", "message_pattern", "action", "parameters", "active", "description",
             "expires_at", *SCOPE_FIELDS}


@dataclass(frozen=True)
class RetryRule:
    """A `retry_rules` row."""

    id: int | None
    error_source: str
    error_code: int
    action: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    message_pattern: str | None = None
    vo: str | None = None
    prod_source_label: str | None = None
    architecture: str | None = None
    release: str | None = None
    work_queue: str | None = None
    active: bool = True
    description: str | None = None
    expires_at: datetime | None = None

    def columns(self) -> dict[str, Any]:
        """Values for INSERT INTO retry_rules (the id is the store's)."""
        values = {name: getattr(self, name) for name in RULE_KEYS}
        values["parameters"] = dict(self.parameters)
        return values

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RetryRule:
        values = {name: row.get(name) for name in RULE_KEYS}
        values["parameters"] = dict(row.get("parameters") or {})
        values["active"] = bool(row.get("active", True))
        return cls(id=row.get("id"), **values)

    def specificity(self) -> int:
        return sum(1 for name in SCOPE_FIELDS if getattr(self, name)) + (1 if self.message_pattern else 0)


def normalise_source(source: str) -> str:
    """`pilotErrorCode` and `pilot` name the same source; `transExitCode` is `trans`."""
    text = source.strip().lower()
    for suffix in ("errorcode", "exitcode", "error"):
        if text.endswith(suffix) and text != suffix:
            return text[: -len(suffix)]
    return text
