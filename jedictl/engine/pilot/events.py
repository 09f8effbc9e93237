"""Event-service jobs in the pilot (docs/event-service.md, "Who speaks it").

An event-service job (`kind` es) runs its payload once per event range, in the job's work directory,
with the range in the environment (PanDA's pilot feeds AthenaMP the same way, one range at a time):

    JEDICTL_ES_MODE=range  JEDICTL_EVENT_ID  JEDICTL_FIRST_EVENT  JEDICTL_LAST_EVENT
    JEDICTL_SKIP_EVENTS (= first)  JEDICTL_MAX_EVENTS (= last - first + 1)  JEDICTL_EVENT_OUTPUT (the file to write)

A range whose payload exits 0 having written its file has that pre-merged file staged out to the
site's write endpoint (scope `jedictl.es`) and is reported finished with it, at once (`jobs events
report`); otherwise it is reported failed with the payload's error. The ranges are reported one by one
as they end, so a pilot that dies midway loses only the range it was on. The job itself then reports
finished, with no outputs: its ES merge job writes them.

An ES merge job (`kind` esmerge) stages its ranges' pre-merged files in from that endpoint and runs
its payload once with `JEDICTL_ES_MODE=merge` and `JEDICTL_EVENT_FILES` (the files, comma-separated, in
event order); its outputs are staged out and reported as any job's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from jedictl.engine.jobs.event_outcomes import ingest_event_reports
from jedictl.engine.jobs.event_reports import EventReport
from jedictl.engine.pilot.codes import STAGE_IN_FAILED, STAGE_OUT_FAILED, Failure, PilotError
from jedictl.engine.pilot.context import PilotContext
from jedictl.engine.pilot.report import Metrics
from jedictl.engine.storage import transfer
from jedictl.engine.storage.errors import StorageError
from jedictl.engine.storage.paths import endpoint_root, replica_path
from jedictl.store import execution as execution_store

#: The scope pre-merged files are kept under on the site's write endpoint.
ES_SCOPE = "jedictl.es"


def premerged_name(payload: Mapping[str, Any], item: Mapping[str, Any]) -> str:
    return f"{payload['task_id']}.{item['event_id']}.{item['start_event']}-{item['end_event']}.es"


def range_environment(item: Mapping[str, Any], output: str) -> dict[str, str]:
    first, last = int(item["start_event"]), int(item["end_event"])
    return {"JEDICTL_ES_MODE": "range", "JEDICTL_EVENT_ID": str(item["event_id"]), "JEDICTL_FIRST_EVENT": str(first),
            "JEDICTL_LAST_EVENT": str(last), "JEDICTL_SKIP_EVENTS": str(first), "JEDICTL_MAX_EVENTS": str(last - first + 1),
            "JEDICTL_EVENT_OUTPUT": output}


def _write_url(ctx: PilotContext) -> str:
    if ctx.write_endpoint is None:
        raise PilotError(STAGE_OUT_FAILED, f"site {ctx.site} has no write endpoint for pre-merged event files")
    with ctx.store.read() as conn:
        url = execution_store.endpoint_urls(conn, {ctx.write_endpoint}).get(ctx.write_endpoint)
    if not url:
        raise PilotError(STAGE_OUT_FAILED, f"endpoint {ctx.write_endpoint} has no URL for pre-merged event files")
    return url


def run_ranges(ctx: PilotContext, payload: Mapping[str, Any], control: Any, workdir: Path, job_log: Any,
               execute: Callable[..., tuple[Metrics, Failure | None]]) -> tuple[Metrics, Failure | None]:
    """Every range of an event-service job, each reported as it ends; the job's metrics (summed) and
    the failure that stopped the job (a kill, a signal, the store or storage gone), None otherwise."""
    url = _write_url(ctx)
    wall = cpu = 0.0
    rss = pss = 0
    started_at = ctx.now()
    for item in payload.get("event_ranges", ()):
        if control.stopped:
            break
        name = premerged_name(payload, item)
        metrics, failure = execute(extra_env=range_environment(item, name))
        wall, cpu = wall + (metrics.wall_time or 0.0), cpu + (metrics.cpu_time or 0.0)
        rss, pss = max(rss, metrics.max_rss or 0), max(pss, metrics.max_pss or 0)
        if control.stopped:
            break
        produced = workdir / name
        if failure is None and not produced.is_file():
            failure = Failure("pilot", STAGE_OUT_FAILED, f"the payload wrote no {name} for event range {item['event_id']}")
        report = EventReport(0, item["event_id"], payload["job_id"], "failed", payload.get("attempt_nr"))
        if failure is None:
            try:
                size, _ = transfer.stage_out(produced, replica_path(url, ES_SCOPE, name), root=endpoint_root(url))
            except StorageError as exc:
                raise PilotError(exc.code, exc.diag) from exc
            report = report._replace(status="finished", output_lfn=name, output_size=size)
            job_log("event range %s (%s-%s) finished: %s", item["event_id"], item["start_event"], item["end_event"], name)
        else:
            report = report._replace(error_code=failure.code, error_diag=failure.diag[:4000])
            job_log("event range %s failed: %s %s", item["event_id"], failure.code, failure.diag)
        ingest_event_reports(ctx.store, [report], ctx.now())
    return Metrics(wall_time=wall, cpu_time=cpu, max_rss=rss, max_pss=pss or None, started_at=started_at, ended_at=ctx.now()), None


def stage_in_premerged(ctx: PilotContext, payload: Mapping[str, Any], workdir: Path) -> dict[str, str]:
    """An ES merge job's pre-merged files into its work directory; the payload's environment for the merge."""
    url = _write_url(ctx)
    names = []
    for item in payload.get("event_ranges", ()):
        name = item.get("output_lfn")
        if not name:
            raise PilotError(STAGE_IN_FAILED, f"event range {item['event_id']} has no pre-merged file to merge")
        try:
            transfer.stage_in(replica_path(url, ES_SCOPE, name), workdir / name, size=item.get("output_size"), checksum=None, link=False)
        except StorageError as exc:
            raise PilotError(exc.code, exc.diag) from exc
        names.append(name)
    return {"JEDICTL_ES_MODE": "merge", "JEDICTL_EVENT_FILES": ",".join(names)}
