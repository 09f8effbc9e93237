"""The fixed JSON contract of `jedictl split` (issue 5): a fileset in, planned jobs out.

Input  `{"closed": true, "files": [{"lfn": "...", "size": 123, "events": 100, "locations": ["SITE"],
         "runs": {"1": [1, 2, 3]}}]}` -- `runs` maps a run number to its lumi sections. Optional
         per-file keys: `first_event` (WMCore), `insert_time` (epoch seconds, merge waiting),
         `parents` (parent LFNs: include_parents, WMBSMergeBySize), `boundary_id` and `lumi_block`
         (read by `jedi`). `events` may be null (unknown: read as 0, WMCore's file default).
         Anything else is an error naming the field.
Output `{"jobs": [{"files": [...], "first_event": 0, "last_event": 99, "lumis": {"1": [[1, 3]]},
         "locations": ["SITE"], "failed": false, "short": false, "failed_reason": null,
         "failed_code": null, "parents": [], "group": 1}]}` -- see `PlannedJob.as_contract`; the last
         four fields extend the contract of issue 5 (issue 21; `group`: WMCore's job group, null for jedi).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from jedictl.engine.generate.splitters.wmcore_model import Fileset, PlannedJob, WMFile
from jedictl.errors import BadInput

_FILE_KEYS = ("lfn", "size", "events", "locations", "runs", "first_event", "insert_time", "parents", "boundary_id",
              "lumi_block")


def parse_fileset(document: Any) -> Fileset:
    if not isinstance(document, Mapping):
        raise BadInput('must be a JSON object {"closed": ..., "files": [...]}', "input")
    unknown = sorted(set(document) - {"closed", "files"})
    if unknown:
        raise BadInput("unknown field (known: closed, files)", unknown[0])
    closed = document.get("closed", True)
    if not isinstance(closed, bool):
        raise BadInput("must be true or false", "closed")
    raw_files = document.get("files")
    if not isinstance(raw_files, list):
        raise BadInput("must be a list of files", "files")
    files: list[WMFile] = []
    where: dict[str, int] = {}
    for index, raw in enumerate(raw_files):
        file = _parse_file(raw, f"files[{index}]")
        if file.lfn in where:
            raise BadInput(f"duplicate lfn (also files[{where[file.lfn]}])", f"files[{index}].lfn")
        where[file.lfn] = index
        files.append(file)
    return Fileset(tuple(files), closed)


def _parse_file(raw: Any, path: str) -> WMFile:
    if not isinstance(raw, Mapping):
        raise BadInput("must be an object with at least an lfn", path)
    for key in raw:
        if key not in _FILE_KEYS:
            raise BadInput(f"unknown field (known: {', '.join(_FILE_KEYS)})", f"{path}.{key}")
    lfn = raw.get("lfn")
    if not isinstance(lfn, str) or not lfn.strip():
        raise BadInput("must be a non-empty string", f"{path}.lfn")
    locations = raw.get("locations", [])
    if not isinstance(locations, list) or not all(isinstance(site, str) and site for site in locations):
        raise BadInput("must be a list of site names", f"{path}.locations")
    parents = raw.get("parents", [])
    if not isinstance(parents, list) or not all(isinstance(parent, str) and parent.strip() for parent in parents):
        raise BadInput("must be a list of parent LFNs", f"{path}.parents")
    if lfn in parents:
        raise BadInput("a file cannot be its own parent", f"{path}.parents")
    insert_time = raw.get("insert_time")
    if insert_time is not None and (isinstance(insert_time, bool) or not isinstance(insert_time, (int, float))):
        raise BadInput("must be a number of seconds since the epoch", f"{path}.insert_time")
    return WMFile(
        lfn=lfn,
        size=_count(raw.get("size", 0), f"{path}.size"),
        events=_count(0 if raw.get("events") is None else raw["events"], f"{path}.events"),
        locations=tuple(dict.fromkeys(locations)),
        runs=_runs(raw.get("runs", {}), f"{path}.runs"),
        first_event=_count(raw.get("first_event", 0), f"{path}.first_event"),
        insert_time=float(insert_time) if insert_time is not None else None,
        parents=tuple(dict.fromkeys(parents)),
        boundary_id=_count(raw["boundary_id"], f"{path}.boundary_id") if raw.get("boundary_id") is not None else None,
        lumi_block=_count(raw["lumi_block"], f"{path}.lumi_block") if raw.get("lumi_block") is not None else None,
    )


def _count(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadInput("must be a whole number, 0 or more", path)
    return value


def _runs(value: Any, path: str) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """`{"run": [lumi, ...]}` -> runs sorted by number with sorted lumis (WMCore sorts both)."""
    if not isinstance(value, Mapping):
        raise BadInput('must map run numbers to lists of lumi sections, e.g. {"1": [1, 2]}', path)
    runs: dict[int, tuple[int, ...]] = {}
    for key, lumis in value.items():
        try:
            run = int(key)
        except (TypeError, ValueError):
            raise BadInput("run numbers must be whole numbers", f"{path}.{key}") from None
        if run < 0:
            raise BadInput("run numbers must be 0 or more", f"{path}.{key}")
        if not isinstance(lumis, list):
            raise BadInput("must be a list of lumi section numbers", f"{path}.{key}")
        for position, lumi in enumerate(lumis):
            if isinstance(lumi, bool) or not isinstance(lumi, int) or lumi < 1:
                raise BadInput("lumi sections are whole numbers from 1", f"{path}.{key}[{position}]")
        if run in runs:
            raise BadInput("run given twice", f"{path}.{key}")
        runs[run] = tuple(sorted(lumis))
    return tuple(sorted(runs.items()))


def jobs_document(jobs: Iterable[PlannedJob]) -> dict[str, Any]:
    return {"jobs": [job.as_contract() for job in jobs]}


def job_rows(jobs: Iterable[PlannedJob]) -> list[dict[str, Any]]:
    """One row per job for tables: counts and short forms a human scans."""
    rows = []
    for number, job in enumerate(jobs, 1):
        events = None if job.first_event is None else f"{job.first_event}-{job.last_event if job.last_event is not None else ''}"
        lumis = None if job.lumis is None else " ".join(
            f"{run}:" + ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges) for run, ranges in job.lumis)
        status = f"failed: {job.failed_reason}" if job.failed else ("short" if job.short else "ok")
        rows.append({
            "job": number,
            "group": job.group,
            "n_files": len(job.files),
            "files": _compact(job.files),
            "events": events,
            "lumis": lumis,
            "locations": ",".join(job.locations),
            "status": status,
        })
    return rows


def _compact(lfns: tuple[str, ...], keep: int = 3) -> str:
    if len(lfns) <= keep:
        return ",".join(lfns)
    return f"{','.join(lfns[:keep - 1])},...,{lfns[-1]}"
