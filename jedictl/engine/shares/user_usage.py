"""Loading what the per-user caps and the group shares weigh: each analysis account's jobs now
(engine.shares.user_caps) and the HS06 each working group given a share executes (group shares,
engine.generate.task_order), measured as the shares measure it. Thin: the figures come from the store, the decisions are elsewhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from jedictl.engine.shares.user_caps import ANALYSIS_LABELS, Account, Load, account_of
from jedictl.store import queue_shares as share_store
from jedictl.store import user_caps as store


def load_accounts(conn: Any) -> dict[Account, Load]:
    """Every account with analysis jobs now, and its load."""
    figures: dict[Account, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in store.account_job_counts(conn, ANALYSIS_LABELS):
        counts = figures[account_of(row.user_name, row.working_group)]
        jobs, cores = int(row.jobs), int(row.cores or 0)
        if row.kind == "running":
            counts["running_jobs"] += jobs
            counts["running_cores"] += cores
            continue
        counts["queued_jobs"] += jobs
        counts["queued_cores"] += cores
        if row.kind in ("activated", "capped"):
            counts[row.kind] += jobs
    return {account: Load(**counts) for account, counts in figures.items()}


def group_usage(conn: Any, shares: Mapping[str, float]) -> dict[str, float]:
    """Per working group given a share: the HS06 its jobs execute now per unit of its share (lower:
    further below its share)."""
    if not shares:
        return {}
    executing = share_store.executing_by_group(conn, sorted(shares))
    return {group: executing.get(group, 0) / share for group, share in shares.items()}
