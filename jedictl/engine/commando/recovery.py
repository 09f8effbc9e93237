"""Lost-file recovery (seed 000 "Lost file recovery", steps 1-4; docs/recovery.md).

`recover` takes files of an output dataset that the data catalog declares lost and

1. finds the task that wrote each one (the dataset's newest finished record of that name),
2. the job that wrote it, and every output of that job that is lost too,
3. makes a recovery task: a copy of that task's datasets, templates and job parameters whose input
   records are exactly the inputs of those jobs, each marked with its job as boundary, so the task
   re-runs each job once (split rule GB=3: a job ends only where a boundary does),
4. which runs as any task; its jobs register new files in the same output datasets (new serial
   numbers, as JEDI adds files to the existing dataset), each the replacement of a lost one.

When an input of such a job is lost as well, its producer is recovered first, recursively, and the
recovery waits (`registered`, then `pending`, its parent the recovery it waits for) until
`jedictl refine` finds every lost input replaced: it then reads the replacements and goes `ready`.
A lost file that a recovery task not ended, or one that registered its replacement, already takes
care of is not recovered twice (`jedictl check`: `lost_files_recovered_once`).

Everything is decided from reads first (`plan`), so `--dry-run` shows the same plan that `recover`
writes in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from jedictl.errors import BadInput, NotFound
from jedictl.model import TASK_FINAL, TaskStatus
from jedictl.store import datasets as dataset_store
from jedictl.store import recovery as store
from jedictl.store import tasks as task_store

#: task_params.format of a recovery task (its document says what it recovers).
PARAMS_FORMAT = "recovery"
#: How deep a chain of lost inputs is followed (a cycle in a store written by other tools ends here).
MAX_DEPTH = 20
_FINAL = {status.value for status in TASK_FINAL}


@dataclass(frozen=True)
class LostFile:
    """A lost output the recovery makes again: its dataset, name, stream, and who made it."""

    dataset: str
    lfn: str
    stream: str
    job_id: int
    record_id: int


@dataclass
class Unit:
    """One recovery task to write: the jobs of `original_task_id` to re-run."""

    key: int
    original_task_id: int
    original_name: str
    dataset: str
    job_ids: tuple[int, ...]
    files: list[LostFile]
    records: list[dict[str, Any]]
    #: input record id (of the original task) -> (catalog dataset, lfn of the replacement) to read instead
    substitutes: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: what it waits for: ("task", id) of recovery tasks in the store, ("planned", key) of units of this plan
    waits_for: list[tuple[str, int]] = field(default_factory=list)
    lost_inputs: list[str] = field(default_factory=list)
    writes: set[str] = field(default_factory=set)  # the output and log datasets it writes
    task_id: int | None = None

    @property
    def status(self) -> str:
        return TaskStatus.REGISTERED.value if self.waits_for else TaskStatus.READY.value


@dataclass
class Plan:
    dataset: str
    requested: list[str]
    units: list[Unit] = field(default_factory=list)
    #: lfn -> {task_id, status, replacement}: lost files of `dataset` already taken care of
    already: dict[str, dict[str, Any]] = field(default_factory=dict)
    planned: dict[tuple[str, str], int] = field(default_factory=dict)  # (dataset, lfn) -> unit key


def recover(store_: Any, dataset: str, lfns: Sequence[str] | None, *, by: str, now: datetime, dry_run: bool = False) -> dict[str, Any]:
    """Plan (and unless `dry_run`, write) the recovery of lost files of `dataset`; the report as a dict."""
    if dry_run:
        with store_.read() as conn:
            plan = make_plan(conn, dataset, lfns)
        return report(plan, dry_run=True)
    with store_.begin() as conn:
        plan = make_plan(conn, dataset, lfns, lock=True)
        apply(conn, plan, by=by, now=now)
    return report(plan, dry_run=False)


def make_plan(conn: Any, dataset: str, lfns: Sequence[str] | None, *, lock: bool = False) -> Plan:
    row = store.catalog_dataset(conn, dataset, lock=lock)
    if row is None:
        raise NotFound(f"unknown dataset {dataset!r}: it is not in the data catalog")
    if lfns:
        wanted = list(dict.fromkeys(lfns))
        known = store.availability(conn, row.id, wanted)
        for lfn in wanted:
            if lfn not in known:
                raise BadInput(f"file {lfn!r} is not in dataset {dataset}")
            if known[lfn] != store.LOST:
                raise BadInput(f"file {lfn!r} of {dataset} is not lost (mark it with `jedictl data mark-lost`)")
    else:
        wanted = store.lost_files(conn, row.id)
    plan = Plan(dataset=dataset, requested=wanted)
    covers = _Planner(conn, plan, lock).cover(dataset, wanted, depth=0)
    plan.already = {lfn: cover for lfn, cover in covers.items() if "task_id" in cover}
    return plan


class _Planner:
    def __init__(self, conn: Any, plan: Plan, lock: bool = False):
        self.conn, self.plan, self.lock = conn, plan, lock

    def cover(self, dataset: str, lfns: Sequence[str], depth: int) -> dict[str, dict[str, Any]]:
        """lfn -> how it is taken care of: {task_id, status, replacement} (already in the store) or
        {planned: key} (a unit of this plan, made here if needed)."""
        if depth > MAX_DEPTH:
            raise BadInput(f"lost inputs chain more than {MAX_DEPTH} tasks deep at dataset {dataset}")
        if depth and self.lock:
            store.catalog_dataset(self.conn, dataset, lock=True)  # a chain's datasets are held as the first one is
        covers: dict[str, dict[str, Any]] = dict(store.covering(self.conn, dataset, lfns))
        for lfn in lfns:
            if lfn not in covers and (dataset, lfn) in self.plan.planned:
                covers[lfn] = {"planned": self.plan.planned[(dataset, lfn)]}
        rest = [lfn for lfn in lfns if lfn not in covers]
        if not rest:
            return covers
        made = store.producers(self.conn, dataset, rest)
        for lfn in rest:
            if lfn not in made:
                raise BadInput(f"no job produced file {lfn!r} of {dataset}: only files a task wrote can be recovered")
        by_task: dict[int, list[Any]] = {}
        for lfn in rest:
            by_task.setdefault(made[lfn].task_id, []).append(made[lfn])
        for task_id, records in sorted(by_task.items()):
            unit = self._unit(dataset, task_id, records, depth)
            for lost in unit.files:
                self.plan.planned[(lost.dataset, lost.lfn)] = unit.key
            covers.update({record.lfn: {"planned": unit.key} for record in records})
        return covers

    def _unit(self, dataset: str, task_id: int, records: list[Any], depth: int) -> Unit:
        first = records[0]
        if first.task_status not in _FINAL:
            raise BadInput(f"task {task_id}, which wrote {first.lfn} of {dataset}, is still {first.task_status}: "
                           "recover its files once it has ended")
        for record in records:
            if record.job_kind != "normal":
                raise BadInput(f"file {record.lfn!r} of {dataset} was made by {record.job_kind} job {record.job_id}: "
                               "only files of normal jobs can be recovered")
            if record.template_id is not None or (record.attributes or {}).get("per_site"):
                raise BadInput(f"file {record.lfn!r} of {dataset} is in a site's dataset of an output container: not recoverable")
        job_ids = tuple(sorted({record.job_id for record in records}))
        outputs = store.job_outputs(self.conn, job_ids)
        writers = sorted(store.live_writers(self.conn, [o.dataset_name for o in outputs] + [dataset]), key=lambda w: (w.name != dataset, w.id, w.name))
        if writers:
            w = writers[0]
            raise BadInput(f"task {w.id} ({w.status}) is writing {w.name}: recover its lost files once it has ended")
        lost = store.lost_among(self.conn, [(o.dataset_name, o.lfn) for o in outputs])
        # Every lost output of the jobs comes back, but none that another recovery takes care of.
        asked = {(dataset, record.lfn) for record in records}
        covered: set[tuple[str, str]] = set()
        for name in sorted({name for name, _ in lost}):
            covered.update((name, lfn) for lfn in store.covering(self.conn, name, [l for n, l in lost if n == name]))
        files = [LostFile(o.dataset_name, o.lfn, o.stream_name, o.job_id, o.record_id) for o in outputs
                 if (o.dataset_name, o.lfn) in lost and ((o.dataset_name, o.lfn) in asked or (o.dataset_name, o.lfn) not in covered)
                 and (o.dataset_name, o.lfn) not in self.plan.planned]
        inputs = store.job_inputs(self.conn, job_ids)
        for row in inputs:
            if row.master_id is not None and row.dataset_type != "random_seed":
                raise BadInput(f"job {row.job_id}, which made {records[0].lfn} of {dataset}, reads the secondary input {row.dataset_name}: "
                               "jobs with secondary inputs cannot be recovered yet")
        # Random seeds are copied as released seeds: the re-run jobs take the seeds of the jobs they re-run.
        kept = list(inputs)
        unit = Unit(key=len(self.plan.units), original_task_id=task_id, original_name="", dataset=dataset, job_ids=job_ids, files=files,
                    records=[dict(row._mapping) for row in kept])
        # Inputs lost as well: their producers are recovered first (or already are).
        lost_inputs = store.lost_among(self.conn, [(row.dataset_name, row.lfn) for row in kept if row.dataset_type == "input"])
        by_holder: dict[str, list[tuple[int, str]]] = {}
        for row in kept:
            holder = lost_inputs.get((row.dataset_name, row.lfn))
            if holder is not None:
                by_holder.setdefault(holder, []).append((row.id, row.lfn))
        for holder, pairs in sorted(by_holder.items()):
            covers = self.cover(holder, sorted({lfn for _, lfn in pairs}), depth + 1)
            for record_id, lfn in pairs:
                cover = covers[lfn]
                unit.lost_inputs.append(lfn)
                if cover.get("replacement"):
                    unit.substitutes[record_id] = (holder, cover["replacement"])
                else:
                    target = ("planned", cover["planned"]) if "planned" in cover else ("task", cover["task_id"])
                    if target not in unit.waits_for:
                        unit.waits_for.append(target)
        # Two recovery tasks of one plan must not write one dataset: each continues the serial numbers
        # from the same last one (the rule that no live task writes it, within the plan).
        writes = {row.name for row in dataset_store.datasets_of(self.conn, task_id) if row.type in store.OUTPUT_TYPES}
        for other in self.plan.units:
            shared = sorted(writes & other.writes)
            if shared:
                raise BadInput(f"recovering {records[0].lfn} of {dataset} needs two recovery tasks writing {shared[0]}: "
                               f"recover the files of {other.dataset} first, then these once it has ended")
        unit.writes = writes
        unit.key = len(self.plan.units)  # parents were planned first: they come first
        self.plan.units.append(unit)
        return unit


def apply(conn: Any, plan: Plan, *, by: str, now: datetime) -> None:
    """Write the plan's recovery tasks, parents first, in the caller's transaction."""
    for unit in plan.units:
        original = task_store.get_task(conn, unit.original_task_id)
        unit.original_name = original.name
        waits = [target if kind == "task" else plan.units[target].task_id for kind, target in unit.waits_for]
        count = len(store.recoveries_of(conn, unit.original_task_id))
        document = {"recovery_of": unit.original_task_id, "dataset": unit.dataset, "jobs": list(unit.job_ids),
                    "files": [{"dataset": f.dataset, "lfn": f.lfn} for f in unit.files]}
        reason = (f"recovery of {_files(len(unit.files))} of task {unit.original_task_id}"
                  + (f", waiting for recovery task {waits[0]}" if waits else ""))
        unit.task_id = store.insert_recovery_task(
            conn, unit.original_task_id, name=f"{original.name}.recovery.{count + 1}"[:256], options=original.options or {},
            document=document, status=unit.status, parent_id=waits[0] if waits else None, reason=reason, by=by, now=now,
            dataset_name=unit.dataset, params_format=PARAMS_FORMAT)
        output_names = sorted({f.dataset for f in unit.files} | {unit.dataset})
        ids = store.copy_datasets(conn, unit.original_task_id, unit.task_id, store.serial_starts(conn, output_names + _all_outputs(conn, unit)), now)
        store.insert_records(conn, unit.task_id, _ordered(unit.records), ids, now)
        store.insert_recovered(conn, unit.task_id, [(f.dataset, f.lfn, f.stream, f.job_id, f.record_id) for f in unit.files])
        if unit.substitutes:
            _substitute(conn, unit.task_id, unit.substitutes, unit.records)


def _files(n: int) -> str:
    return f"{n} lost file{'s' if n != 1 else ''}"


def _all_outputs(conn: Any, unit: Unit) -> list[str]:
    return [row.name for row in dataset_store.datasets_of(conn, unit.original_task_id) if row.type in store.OUTPUT_TYPES]


def _ordered(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(records, key=lambda r: (r["job_id"], r["id"]))


def _substitute(conn: Any, task_id: int, substitutes: dict[int, tuple[str, str]], records: list[dict[str, Any]]) -> None:
    """The new task's records of inputs already replaced read the replacements."""
    lfn_of = {r["id"]: r["lfn"] for r in records}
    wanted = {lfn_of[record_id]: value for record_id, value in substitutes.items()}
    store.replace_records(conn, [(row.id, *wanted[row.lfn]) for row in store.waiting_inputs(conn, task_id) if row.lfn in wanted])


# ------------------------------------------------------------------------- the gate of `refine`

@dataclass(frozen=True)
class Gate:
    action: str  # proceed | wait | break
    reason: str | None = None


def gate(conn: Any, task_id: int) -> Gate:
    """Whether a recovery task waiting for lost inputs may run: every input lost in the catalog has a
    replacement (its records are switched to it, and the task proceeds), or some is still being
    recovered (wait), or one has no recovery that could replace it (break)."""
    inputs = store.waiting_inputs(conn, task_id)
    lost = store.lost_among(conn, [(row.dataset_name, row.lfn) for row in inputs])
    if not lost:
        return Gate("proceed")
    changes, waiting = [], set()
    by_holder: dict[str, set[str]] = {}
    for (_, lfn), holder in lost.items():
        by_holder.setdefault(holder, set()).add(lfn)
    covers = {(holder, lfn): cover for holder, lfns in by_holder.items() for lfn, cover in store.covering(conn, holder, sorted(lfns)).items()}
    for row in inputs:
        holder = lost.get((row.dataset_name, row.lfn))
        if holder is None:
            continue
        cover = covers.get((holder, row.lfn))
        if cover is None:
            return Gate("break", f"input {row.lfn} of {holder} is lost and no recovery task makes it again")
        if cover["replacement"]:
            changes.append((row.id, holder, cover["replacement"]))
        else:
            waiting.add(cover["task_id"])
    if waiting:
        tasks = ", ".join(str(t) for t in sorted(waiting))
        return Gate("wait", f"waiting for recovery task {tasks} to make lost inputs again")
    store.replace_records(conn, changes)
    return Gate("proceed", f"{len(changes)} lost input{'s' if len(changes) != 1 else ''} read from {'their replacements' if len(changes) != 1 else 'its replacement'}")


def is_recovery(conn: Any, task_id: int) -> bool:
    return store.recovery_of(conn, task_id) is not None


# ------------------------------------------------------------------------------------- reporting

def report(plan: Plan, *, dry_run: bool) -> dict[str, Any]:
    return {
        "dataset": plan.dataset,
        "dry_run": dry_run,
        "lost_files": list(plan.requested),
        "already_recovering": [{"lfn": lfn, **{k: cover[k] for k in ("task_id", "status", "replacement")}}
                               for lfn, cover in sorted(plan.already.items())],
        "recoveries": [{
            "task_id": unit.task_id,
            "original_task_id": unit.original_task_id,
            "status": unit.status,
            "parent_id": (unit.waits_for[0][1] if unit.waits_for[0][0] == "task" else plan.units[unit.waits_for[0][1]].task_id)
            if unit.waits_for else None,
            "jobs": list(unit.job_ids),
            "inputs": len(unit.records),
            "files": [{"dataset": f.dataset, "lfn": f.lfn, "job_id": f.job_id} for f in unit.files],
            "lost_inputs": sorted(set(unit.lost_inputs)),
        } for unit in plan.units],
    }


def relation(conn: Any, task_id: int) -> dict[str, Any]:
    """What `task show` says of recovery: the task this one recovers (`recovery_of`) and the lost files it
    makes again with their replacements once registered, and the recovery tasks made for this one."""
    row = store.recovery_of(conn, task_id)
    found: dict[str, Any] = {"recovery_of": row.original_task_id if row is not None else None, "recovered_files": [], "recovered_by": []}
    if row is not None:
        rows = store.recovered_by_task(conn, [task_id]).get(task_id, [])
        replaced = store.replacements(conn, store.rows_as_keys(rows))
        found["recovered_files"] = [{"dataset": r.dataset_name, "lfn": r.lfn, "job_id": r.original_job_id, "replacement": replaced.get(r.id)}
                                    for r in rows]
    found["recovered_by"] = [{"task_id": r.task_id, "status": r.status, "dataset": r.dataset_name} for r in store.recoveries_of(conn, task_id)]
    return found
