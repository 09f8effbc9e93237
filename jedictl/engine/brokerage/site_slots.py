"""A site's caps as WMCore's per-site slot model (peers.md §1.5, seed 002): whether a site may get one
more job of a task's job type now, how many it may get, and which cap says no.

The caps of the resource catalog are the slot model's thresholds: `max_queued` the site's pending
slots, `max_running` its running slots (pending and running jobs together: a queued job may start at
any moment), `job_caps` the same per job type (prodSourceLabel). A job whose priority beats every
pending or running job of its type at the site may overflow the pending limits by 20 % of the slots
(`throttle.wmcore_priority_overflow`); merge jobs are I/O bound and never do. A draining site
(status `brokeroff`) takes no new work. The counts come from `SiteLoad.slots`: now, and at the start
of the pass (WMCore's "pending count at cycle start", which bounds the overflow).
"""

from __future__ import annotations

from jedictl.config import ThrottleSettings
from jedictl.engine.brokerage.model import NO_SLOTS, Site, SlotLoad
from jedictl.engine.shares.throttler import SiteSlotDecision, SiteThresholds, SiteUsage, site_slot_decision

#: The catalog field behind each rule of the slot model (what `explain` names).
_CAP_OF_RULE = {
    "NoPendingSlot": "max_queued",
    "NoRunningSlot": "max_running",
    "NoTaskPendingSlot": "job_caps.{label}.max_queued",
    "NoTaskRunningSlot": "job_caps.{label}.max_running",
    "ZeroThreshold": "job_caps.{label}",
    "Draining": "status brokeroff",
}


def thresholds_of(site: Site, *, preassigned: bool = False) -> SiteThresholds:
    """The site's caps as thresholds; a site the task is pre-assigned to is not draining for it
    (JEDI skips the status check for a pre-assigned site, and brokeroff is a status)."""
    caps = site.job_caps or {}
    return SiteThresholds(
        site=site.name, pending_slots=site.max_queued, running_slots=site.max_running,
        type_pending_slots={label: c["max_queued"] for label, c in caps.items() if c.get("max_queued") is not None},
        type_running_slots={label: c["max_running"] for label, c in caps.items() if c.get("max_running") is not None},
        draining=site.status == "brokeroff" and not preassigned,
    )


def has_caps(site: Site, *, preassigned: bool = False) -> bool:
    return (site.max_queued is not None or site.max_running is not None or bool(site.job_caps)
            or (site.status == "brokeroff" and not preassigned))


def usage_of(now: SlotLoad, at_start: SlotLoad | None = None) -> SiteUsage:
    start = at_start or now
    return SiteUsage(
        pending=sum(now.pending.values()), running=sum(now.running.values()),
        type_pending=now.pending, type_running=now.running, type_highest_priority=now.highest_priority,
        pending_at_start=sum(start.pending.values()), type_pending_at_start=start.pending,
    )


def slot_decision(site: Site, label: str, priority: int, *, merge: bool, settings: ThrottleSettings,
                  now: SlotLoad = NO_SLOTS, at_start: SlotLoad | None = None, preassigned: bool = False) -> SiteSlotDecision:
    """Whether `site` takes one more job of type `label` at `priority`, and how many it takes."""
    return site_slot_decision(thresholds_of(site, preassigned=preassigned), usage_of(now, at_start), label, priority, settings,
                              io_bound=merge)


def cap_message(decision: SiteSlotDecision) -> str:
    """One line naming the cap that stopped the site, e.g. `max_queued: site pending 2 >= 2`."""
    cap = _CAP_OF_RULE.get(decision.rule, decision.rule).format(label=decision.job_type)
    return f"site caps: {cap} ({decision.rule}): {decision.message}"
