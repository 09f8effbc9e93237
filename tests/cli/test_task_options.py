"""Task options that change what jedictl does (issue 14 defect 7): each accepted option has an effect
here, on both backends, and each option jedictl has no model for is refused at submission."""

from __future__ import annotations

import json

import pytest
import yaml
from sqlalchemy import update

from jedictl.engine.task.options import BY_NAME, REFUSED
from jedictl.store.schema import files
from tests.cli.test_feed import feed, grid, records  # noqa: F401 - grid is a fixture
from tests.conftest import EXAMPLES
from tests.helpers import row_counts, run_sql

# Files whose events do (b, c, d) and do not (a) fill whole jobs of 100 events.
ALIGN = {"name": "ds.align", "state": "closed", "files": [
    {"lfn": "a.root", "events": 250, "size": 1000}, {"lfn": "b.root", "events": 200, "size": 1000},
    {"lfn": "c.root", "events": 300, "size": 1000}, {"lfn": "d.root", "events": 100, "size": 1000}]}


def spec(name: str, **sections) -> dict:
    document = {"name": name, "label": "user", "command": "run ${IN} ${OUTPUT0}", "inputs": [{"dataset": "ds.align"}],
                "outputs": [{"dataset": f"{name}.out", "file_template": "out.${SN}.root"}]}
    document.update(sections)
    return document


def submit(cli, store, document, code=0):
    result = cli("submit", "-", "-o", "json", db=store, input=yaml.safe_dump(document), code=code)
    return json.loads(result.stdout)["task_id"] if code == 0 else result


@pytest.fixture
def aligned(cli, grid, tmp_path):  # noqa: F811 - pytest fixture injection
    catalog = tmp_path / "align.yaml"
    catalog.write_text(yaml.safe_dump({"datasets": [ALIGN]}))
    cli("data", "import", str(catalog), db=grid)
    return grid


def lfn_order(store, task_id) -> list[str]:
    return list(dict.fromkeys(r[1] for r in records(store, task_id, "IN")))


# ------------------------------------------------------------------------------------- order_input_by

def test_order_input_by_events_alignment_puts_whole_jobs_first(cli, aligned):
    plain = submit(cli, aligned, spec("user.bob.plain", split={"n_events_per_job": 100}))
    ordered = submit(cli, aligned, spec("user.bob.aligned", split={"n_events_per_job": 100, "order_input_by": "eventsAlignment"}))
    feed(cli, aligned)
    assert lfn_order(aligned, plain) == ["a.root", "b.root", "c.root", "d.root"]  # by name
    # JEDI: files whose events are a multiple of nEventsPerJob first, by descending events; then the rest.
    assert lfn_order(aligned, ordered) == ["c.root", "b.root", "d.root", "a.root"]


def test_order_input_by_needs_events_per_job(cli, aligned):
    before = row_counts(aligned)
    result = submit(cli, aligned, spec("user.bob.noevents", split={"order_input_by": "eventsAlignment"}), code=2)
    assert result.stderr.strip().startswith("jedictl: error: split.order_input_by: needs n_events_per_job (files are aligned to whole jobs of events)")
    assert row_counts(aligned) == before


# --------------------------------------------------------------------------------- skip_files_used_by

def _finish(store, task_id, *keys):
    def change(conn):
        for lfn, start in keys:
            where = [files.c.task_id == task_id, files.c.lfn == lfn]
            if start is not None:
                where.append(files.c.start_event == start)
            conn.execute(update(files).where(*where).values(status="finished"))
    run_sql(store, change)


def test_skip_files_used_by_skips_what_the_other_task_finished(cli, aligned):
    first = submit(cli, aligned, spec("user.bob.first"))
    ranges = submit(cli, aligned, spec("user.bob.ranges", split={"n_events_per_job": 100}))
    feed(cli, aligned)
    _finish(aligned, first, ("b.root", None))
    _finish(aligned, ranges, ("a.root", 0), ("d.root", 0))
    again = submit(cli, aligned, spec("user.bob.again", dependencies={"skip_files_used_by": str(first)}))
    again_ranges = submit(cli, aligned, spec("user.bob.again.ranges", split={"n_events_per_job": 100},
                                             dependencies={"skip_files_used_by": f"{first}, {ranges}"}))
    cli("refine", db=aligned)  # not feed(): the records finished by hand above have no jobs behind them
    cli("feed", db=aligned)
    assert lfn_order(aligned, again) == ["a.root", "c.root", "d.root"]  # b.root was finished by the first task
    kept = [(r[1], r[6], r[7]) for r in records(aligned, again_ranges, "IN")]
    assert ("a.root", 0, 99) not in kept and not any(lfn in ("b.root", "d.root") for lfn, _, _ in kept)
    assert ("a.root", 100, 199) in kept and len(kept) == 2 + 3  # a: 100-199, 200-249; c: three ranges


@pytest.mark.parametrize("value, message", [
    ("12,x", "dependencies.skip_files_used_by: must be a comma list of task ids"),
    ("99", "skip_files_used_by: task 99 does not exist"),
])
def test_skip_files_used_by_refuses_what_is_not_a_task(cli, aligned, value, message):
    before = row_counts(aligned)
    result = submit(cli, aligned, spec("user.bob.bad", dependencies={"skip_files_used_by": value}), code=2)
    assert result.stderr.strip() == f"jedictl: error: {message}"
    assert row_counts(aligned) == before


# ------------------------------------------------------------------------------------------- refused

def test_options_without_a_model_are_refused_at_submission(cli, store):
    before = row_counts(store)
    for name, reason in REFUSED.items():
        section = BY_NAME[name].section
        value = True if BY_NAME[name].kind is bool else (100 if BY_NAME[name].kind is int else "full")
        result = submit(cli, store, spec(f"user.bob.{name}", **{section: {name: value}}), code=2)
        assert result.stderr.strip() == f"jedictl: error: {section}.{name}: is not supported by jedictl: {reason}", name
        assert len(result.stderr.strip().splitlines()) == 1
    # PanDA's own keys are refused the same way, and a false flag (asking for nothing) is accepted.
    document = json.loads((EXAMPLES / "prun_files.json").read_text())
    result = cli("submit", "-", db=store, input=json.dumps({**document, "avoidVP": True}), code=2)
    assert result.stderr.strip() == f"jedictl: error: avoidVP: is not supported by jedictl: {REFUSED['avoid_vp']}"
    result = cli("submit", "-", db=store, input=json.dumps({**document, "allowInputLAN": "use"}), code=2)
    assert result.stderr.strip().startswith("jedictl: error: allowInputLAN: 'use' is not supported by jedictl")
    assert row_counts(store) == before
    assert cli.json("submit", "-", db=store, input=json.dumps({**document, "avoidVP": False}))["task_id"] == 1


def test_incexec_refuses_them_too():
    from jedictl.engine.task.incexec import incexec_change
    from jedictl.errors import BadInput

    with pytest.raises(BadInput, match="avoidVP: is not supported by jedictl"):
        incexec_change({}, {"avoidVP": True})


# ------------------------------------------------------------------------ retry_ram_offset / step / max

def test_retry_ram_options_replace_the_memory_ladder_and_cap_it(cli, store, tmp_path):
    from sqlalchemy import select

    from jedictl.store.schema import jobs
    from tests.cli.test_jobs_report import RULES, _consistent, _dispatch_all, _failed, _files, _report, _task

    _task(cli, store, tmp_path, retryRamOffset=500, retryRamStep=1500, retryRamMax=3500)
    cli("retry-rules", "import", "-", db=store, input=RULES)
    job = _dispatch_all(cli, store)[0]
    # The default ladder would give 3000; the task's is 500 + n x 1500: 2000, 3500, ... capped at 3500.
    result = _report(cli, store, _failed(job, code=1212, diag="Payload exceeded memory limit", max_pss=2_100 * 1024))
    assert result["items"][0]["retry"] == "RAM of 2 input file(s) raised to 3500 MB per core"
    assert {f["ram_count"] for f in _files(store, [i["lfn"] for i in job["inputs"]]).values()} == {3500}
    cli("generate", "--seed", "5", db=store)
    newest = run_sql(store, lambda conn: conn.execute(select(jobs.c.id, jobs.c.min_ram_count).order_by(jobs.c.id.desc())).first())
    assert newest.min_ram_count == 3150  # 3500 x 0.9
    again = next(j for j in _dispatch_all(cli, store) if j["job_id"] == newest.id)
    result = _report(cli, store, _failed(again, code=1212, max_pss=3_400 * 1024))
    assert result["items"][0]["retry"] == "already at the top of retry_ram_max (3500 MB per core)"
    _consistent(store)


# ------------------------------------------------------------------------- max_core_count, allow_input_lan

EXTRA_SITES = {"sites": [
    {"name": "BIG16", "cloud": "CERN", "tier": 1, "nucleus": "CERN-PROD", "core_count": 16, "core_power": 10, "max_memory": 64000,
     "max_walltime": 172800, "max_scratch_mb": 320000, "read_endpoints": ["CERN-PROD_DATADISK"], "write_endpoints": ["CERN-PROD_DATADISK"]},
    {"name": "DIRECT1", "cloud": "CERN", "tier": 1, "nucleus": "CERN-PROD", "core_count": 1, "core_power": 10, "max_memory": 4000,
     "max_walltime": 172800, "max_scratch_mb": 40000, "direct_io": True, "read_endpoints": ["CERN-PROD_DATADISK"],
     "write_endpoints": ["CERN-PROD_DATADISK"]},
]}


@pytest.fixture
def placed(cli, store, tmp_path):
    from tests.cli.test_generate import _grid

    _grid(cli, store, tmp_path)
    extra = tmp_path / "extra-sites.yaml"
    extra.write_text(yaml.safe_dump(EXTRA_SITES))
    cli("sites", "import", str(extra), db=store)
    return store


def own_outputs(name: str, **params) -> str:
    """The worked example as task `name` with output and log datasets of its own (an output dataset
    belongs to one task)."""
    from tests.cli.test_generate import WORKED_EXAMPLE

    text = json.dumps({**WORKED_EXAMPLE, "taskName": name, **params})
    return text.replace("ds.out", f"{name}.out").replace("ds.log", f"{name}.log")


def _sites_of(cli, store, **params) -> tuple[str, set[str]]:
    from tests.cli.test_generate import _pipeline

    name = f"placed.{len(params)}.{abs(hash(json.dumps(params, sort_keys=True)))}"
    task_id = cli.json("submit", "-", db=store, input=own_outputs(name, skipScout=True, **params))["task_id"]
    _pipeline(cli, store)
    task = cli.json("task", "show", str(task_id), db=store)
    jobs = cli.json("jobs", "list", "--task", str(task_id), "--limit", "1000", db=store)
    return task["status"] + ": " + (task["error_dialog"] or ""), {j["site"] for j in jobs}


def test_max_core_count_keeps_jobs_off_wider_slots(cli, placed):
    status, sites = _sites_of(cli, placed, coreCount=8, includedSite=["BIG16", "DESY-HH"])
    assert "BIG16" in sites  # 16-core slots take an 8-core task ...
    status, sites = _sites_of(cli, placed, coreCount=8, maxCoreCount=8, includedSite=["BIG16"])
    assert sites == set() and status.startswith("assigning: no nucleus fits")  # ... but not one that uses at most 8
    explained = {row["site"]: row["message"] for row in cli.json("explain", "task", "2", db=placed)["brokerage"]}
    assert explained["BIG16"] == "core count: site slots have 16 cores, above the task's max_core_count 8"
    status, sites = _sites_of(cli, placed, coreCount=8, maxCoreCount=8, includedSite=["BIG16", "DESY-HH"])
    assert sites == {"DESY-HH"}


def test_allow_input_lan_only_uses_direct_io_sites(cli, placed):
    # On an empty grid brokerage prefers CERN-PROD_GRID (see the second task); with only it may not.
    _, sites = _sites_of(cli, placed, allowInputLAN="only", includedSite=["DIRECT1", "CERN-PROD_GRID"])
    assert sites == {"DIRECT1"}
    _, sites = _sites_of(cli, placed, includedSite=["DIRECT1", "CERN-PROD_GRID"])
    assert "CERN-PROD_GRID" in sites


def test_max_core_count_below_core_count_is_refused(cli, store):
    from tests.cli.test_generate import WORKED_EXAMPLE

    before = row_counts(store)
    result = cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "coreCount": 8, "maxCoreCount": 4}), code=2)
    assert result.stderr.strip() == "jedictl: error: coreCount: is larger than maxCoreCount"
    assert row_counts(store) == before


# ---------------------------------------------------------------------------------- tgt_max_output_for_ng

# The reset itself, from the scout that set outDiskCount: tests/cli/test_tgt_max_output.py.


def test_tgt_max_output_for_ng_cannot_be_combined_with_files_per_job(cli, store):
    from tests.cli.test_generate import WORKED_EXAMPLE

    before = row_counts(store)
    result = cli("submit", "-", db=store, input=json.dumps({**WORKED_EXAMPLE, "tgtMaxOutputForNG": 10}), code=2)
    assert result.stderr.strip() == "jedictl: error: tgtMaxOutputForNG: cannot be combined with nFilesPerJob (it sets n_gb_per_job)"
    assert row_counts(store) == before


# ------------------------------------------------------------------------------------ stay_output_on_site

def test_stay_output_on_site_keeps_outputs_at_the_execution_site(cli, store, tmp_path):
    from tests.cli.test_finalize import prepare_grid, run_round, to_ready

    prepare_grid(cli, store, tmp_path)

    def with_destination(name, **params):  # the output item names CERN-PROD_DATADISK as its destination
        document = json.loads(own_outputs(name, **params))
        document["jobParameters"][1]["destination"] = "CERN-PROD_DATADISK"
        return json.dumps(document)

    # The nucleus is CERN-PROD and the output's destination its disk; the jobs run at BNL_PROD, whose
    # storage is BNL-ATLAS_DATADISK.
    placed = dict(nucleus="CERN-PROD", includedSite=["BNL_PROD"], skipScout=True)
    sent = cli.json("submit", "-", db=store, input=with_destination("to.nucleus", **placed))["task_id"]
    stays = cli.json("submit", "-", db=store, input=with_destination("stays", stayOutputOnSite=True, **placed))["task_id"]
    to_ready(cli, store)
    run_round(cli, store, 1, 0.0)

    def endpoints(task_id, name):
        jobs = cli.json("jobs", "list", "--task", str(task_id), "--limit", "1000", db=store)
        assert jobs and {j["site"] for j in jobs} == {"BNL_PROD"}
        shown = cli.json("data", "show", f"{name}.out", db=store)
        return {r["endpoint"] for r in shown["replicas"]}

    assert endpoints(sent, "to.nucleus") == {"CERN-PROD_DATADISK"}
    assert endpoints(stays, "stays") == {"BNL-ATLAS_DATADISK"}
    job = cli.json("jobs", "list", "--task", str(stays), "--limit", "1", db=store)[0]
    outputs = [f for f in cli.json("jobs", "show", job["task_job"], db=store)["files"] if f["type"] == "output"]
    assert {o["destination"] for o in outputs} == {"BNL-ATLAS_DATADISK"}  # what the executor is told
