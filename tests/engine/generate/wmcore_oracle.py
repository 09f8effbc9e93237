"""WMCore itself as a test oracle: run WMCore's splitting algorithms in-process on jedictl's filesets.

Test-only. WMCore is never imported at run time and is not a dependency (its own requirements pin
SQLAlchemy 1.4 and need a database client build). To enable the oracle tests:

    .venv/bin/pip install --no-deps wmcore future

WMCore's DataStructs package splits without a database (as its JobSplitting_t tests do); the WMBS-only
WMBSMergeBySize gets the rows of its GetFilesForMerge query from a stand-in DAO. Files are handed to
WMCore in the fileset's order (WMCore's own order comes from a set), in one location group.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass
from typing import Any, Sequence

from jedictl.engine.generate.splitters.wmcore_model import WMFile


def available() -> bool:
    try:
        import WMCore.JobSplitting.SplitterFactory  # noqa: F401
    except Exception:  # noqa: BLE001 - any import problem means no oracle
        return False
    return True


@dataclass(frozen=True)
class OracleJob:
    files: tuple[str, ...]
    first_event: int | None
    last_event: int | None
    lumis: dict[int, list[list[int]]]
    failed: bool
    failed_reason: str | None
    failed_code: int | None
    group: int  # the job's JobGroup, numbered from 1 in the order the JobFactory returned them


def _wm_files(files: Sequence[WMFile]) -> list[Any]:
    from WMCore.DataStructs.File import File
    from WMCore.DataStructs.Run import Run

    made = []
    for file in files:
        wm = File(lfn=file.lfn, size=file.size, events=file.events, locations=set(file.locations))
        for run, lumis in file.runs:
            wm.addRun(Run(run, *lumis))
        wm["first_event"] = file.first_event
        wm["minrun"] = file.min_run  # what WMBS's GetForJobSplittingByID adds (FileBased reads it)
        made.append(wm)
    return made


def wmcore_split(algorithm: str, files: Sequence[WMFile], closed: bool = True, **params: Any) -> list[OracleJob]:
    """WMCore's jobs for `files` (DataStructs package), in WMCore's job order."""
    from WMCore.DataStructs.Fileset import Fileset
    from WMCore.DataStructs.Subscription import Subscription
    from WMCore.DataStructs.Workflow import Workflow
    from WMCore.JobSplitting.SplitterFactory import SplitterFactory

    ordered = _wm_files(files)
    fileset = Fileset(name="oracle")
    for wm in ordered:
        fileset.addFile(wm)
    fileset.commit()
    fileset.open = not closed
    subscription = Subscription(fileset=fileset, workflow=Workflow(), split_algo=algorithm, type="Processing")
    subscription.availableFiles = lambda limit=None, doingJobSplitting=False: list(ordered)[:limit or None]
    factory = SplitterFactory()(package="WMCore.DataStructs", subscription=subscription)
    groups = factory(**params)
    return [_oracle_job(job, number) for number, group in enumerate(groups, 1) for job in group.jobs]


def _oracle_job(job: Any, group: int) -> OracleJob:
    mask = job["mask"]
    return OracleJob(
        files=tuple(job.getFiles(type="lfn")),
        first_event=mask["FirstEvent"],
        last_event=mask["LastEvent"],
        lumis={int(run): [list(pair) for pair in pairs] for run, pairs in mask["runAndLumis"].items()},
        failed=bool(job.get("failedOnCreation", False)),
        failed_reason=job.get("failedReason"),
        failed_code=job.get("failedErrCode"),
        group=group,
    )


class _Rows:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self.rows


class _Nothing:
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return True  # CheckInjectedWorkflow: the workflow is fully injected


def wmcore_wmbs_merge(files: Sequence[WMFile], closed: bool = True, unfinished_parents: Sequence[str] = (),
                      **params: Any) -> list[OracleJob]:
    """WMBSMergeBySize on the rows its GetFilesForMerge query would return for `files`: files with
    parents, runs and a location whose parents are all finished; MIN(parent id) = the lowest LFN."""
    rows = []
    for file in files:
        if not file.parents or not file.runs or not file.lumi_count or not file.locations:
            continue
        if set(unfinished_parents) & set(file.parents):
            continue
        rows.append({**_row(file, len(rows) + 1), "file_parent": min(file.parents), "pnn": frozenset(file.locations)})
    return _run_merge("WMBSMergeBySize", rows, closed, 0.0, params)


def wmcore_parentless_merge(files: Sequence[WMFile], closed: bool = True, now: float = 0.0, **params: Any) -> list[OracleJob]:
    """ParentlessMergeBySize on GetFilesForParentlessMerge's rows: files with runs and a location, one row
    per location (jedictl keeps the first), inserted at `insert_time` (or now)."""
    rows = []
    for file in files:
        if not file.runs or not file.lumi_count or not file.locations:
            continue
        inserted = file.insert_time if file.insert_time is not None else now
        rows.append({**_row(file, len(rows) + 1), "pnn": file.locations[0], "insert_time": inserted})
    return _run_merge("ParentlessMergeBySize", rows, closed, now, params)


def _row(file: WMFile, file_id: int) -> dict[str, Any]:
    return {"file_id": file_id, "file_events": file.events, "file_size": file.size, "file_lfn": file.lfn,
            "file_first_event": file.first_event, "file_run": file.runs[0][0],
            "file_lumi": min(lumis[0] for _run, lumis in file.runs if lumis)}


def _run_merge(algorithm: str, rows: list[dict[str, Any]], closed: bool, now: float, params: dict[str, Any]) -> list[OracleJob]:
    import importlib

    from WMCore.DataStructs.Subscription import Subscription
    from WMCore.DataStructs.Workflow import Workflow

    module = importlib.import_module(f"WMCore.JobSplitting.{algorithm}")

    def dao_factory(**_kwargs: Any) -> Any:
        return lambda classname: _Rows(rows) if classname.startswith("Subscriptions.GetFilesFor") else _Nothing()

    fileset = types.SimpleNamespace(open=not closed, id=1, load=lambda: None)
    workflow = Workflow()
    workflow.name = "oracle"
    subscription = Subscription(fileset=None, workflow=workflow, split_algo=algorithm, type="Merge")
    subscription["fileset"] = fileset
    subscription["id"] = 1
    thread = threading.current_thread()
    saved = {name: getattr(thread, name, None) for name in ("logger", "dbi", "transaction")}
    thread.logger, thread.dbi = None, None  # type: ignore[attr-defined]
    thread.transaction = types.SimpleNamespace(conn=None)  # type: ignore[attr-defined]
    real_dao, real_time = module.DAOFactory, getattr(module, "time", None)
    module.DAOFactory = dao_factory
    if real_time is not None:
        module.time = types.SimpleNamespace(time=lambda: now)
    try:
        factory = getattr(module, algorithm)(package="WMCore.DataStructs", subscription=subscription)
        groups = factory(**params)
    finally:
        module.DAOFactory = real_dao
        if real_time is not None:
            module.time = real_time
        for name, value in saved.items():
            setattr(thread, name, value)
    return [_oracle_job(job, number) for number, group in enumerate(groups, 1) for job in group.jobs]
