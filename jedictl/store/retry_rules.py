"""Named operations on `retry_rules`: idempotent import, listing, removal, and loading for the report path.

Rules are few (tens to hundreds), so comparisons are done in Python on whole rows; the report path
loads them once per batch with `load_rules` and matches in memory (`jedictl.engine.jobs.retry_rules`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, String, delete, insert, or_, select

from jedictl.errors import BadInput, NotFound
from jedictl.model.retry import RetryRule, normalise_source
from jedictl.store.schema import retry_rules


def import_rules(conn: Connection, rules: Sequence[RetryRule], replace: bool, source: str = "rules") -> dict[str, int]:
    """Insert `rules`, skipping any identical in every column to a stored one; counts {added, unchanged, removed}.

    With `replace`, the table ends up holding exactly the file's rules: stored rules absent from the
    file are deleted, while identical ones keep their row (and id, which retry decisions refer to).
    Everything runs in the caller's transaction; a rule that does not fit its column is refused
    before anything is written (`source` names the file in that message).
    """
    values = [_values(rule) for rule in rules]
    for index, row in enumerate(values):
        _check_widths(row, f"{source}[{index}]")
    stored: dict[str, int] = {}
    for row in conn.execute(select(retry_rules).order_by(retry_rules.c.id)):
        stored.setdefault(_key(_values(RetryRule.from_row(row._mapping))), row.id)
    kept: set[int] = set()
    seen: set[str] = set()
    new_rows = []
    for row in values:
        key = _key(row)
        if key in stored:
            kept.add(stored[key])
        elif key not in seen:  # a rule listed twice in one file is stored once
            new_rows.append(row)
        seen.add(key)
    removed = 0
    if replace:
        statement = delete(retry_rules)
        if kept:
            statement = statement.where(retry_rules.c.id.not_in(kept))
        removed = conn.execute(statement).rowcount
    if new_rows:
        conn.execute(insert(retry_rules), new_rows)
    return {"added": len(new_rows), "unchanged": len(values) - len(new_rows), "removed": removed}


def list_rules(conn: Connection, source: str | None = None, code: int | None = None,
               action: str | None = None) -> list[RetryRule]:
    """Stored rules, expired ones included, ordered by id.

    `source` matches PanDA's column spelling too (`pilot` finds rules written as `pilotErrorCode`),
    as the matching itself does; that comparison is made here rather than in SQL.
    """
    query = select(retry_rules).order_by(retry_rules.c.id)
    if code is not None:
        if not -(2**31) <= code < 2**31:  # error_code is an INTEGER column: no rule holds a wider code
            return []
        query = query.where(retry_rules.c.error_code == code)
    if action:
        query = query.where(retry_rules.c.action == action)
    rules = [RetryRule.from_row(row._mapping) for row in conn.execute(query)]
    if source:
        wanted = normalise_source(source)
        rules = [rule for rule in rules if normalise_source(rule.error_source) == wanted]
    return rules


def load_rules(conn: Connection, now: datetime) -> tuple[RetryRule, ...]:
    """Every rule not expired at `now`, active and passive (passive rules win their slot but only report)."""
    query = (select(retry_rules)
             .where(or_(retry_rules.c.expires_at.is_(None), retry_rules.c.expires_at > now))
             .order_by(retry_rules.c.id))
    return tuple(RetryRule.from_row(row._mapping) for row in conn.execute(query))


def remove_rules(conn: Connection, ids: Iterable[int]) -> int:
    """Delete rules by id; an unknown id is refused (NotFound naming it) and nothing is removed."""
    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return 0
    found = set(conn.execute(select(retry_rules.c.id).where(retry_rules.c.id.in_(wanted))).scalars())
    missing = [str(rule_id) for rule_id in wanted if rule_id not in found]
    if missing:
        raise NotFound(f"retry rule {missing[0]} does not exist" if len(missing) == 1
                       else f"retry rules {', '.join(missing)} do not exist")
    return conn.execute(delete(retry_rules).where(retry_rules.c.id.in_(wanted))).rowcount


def _values(rule: RetryRule) -> dict[str, Any]:
    return rule.columns()  # expires_at is naive UTC already (retry_rules._load_rule)


def _key(values: dict[str, Any]) -> str:
    """A canonical text of every column, so rows compare whatever order JSON parameters come in."""
    return json.dumps(values, sort_keys=True, default=str)


def _check_widths(values: dict[str, Any], path: str) -> None:
    # The parser allows 256 characters for every scope field, but `vo` and `prod_source_label` are
    # String(32): PostgreSQL would refuse such a row mid-import while SQLite would store it, so both
    # are refused here, before writing, with the field named.
    for column in retry_rules.columns:
        value = values.get(column.name)
        length = getattr(column.type, "length", None) if isinstance(column.type, String) else None
        if length and isinstance(value, str) and len(value) > length:
            raise BadInput(f"must be at most {length} characters", f"{path}.{column.name}")
