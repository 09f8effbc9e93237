"""`jedictl pilot` speaks the event service (docs/event-service.md): a real pilot runs an event-service
job's payload once per range, stages each range's pre-merged file out and reports it at once, then its
ES merge job merges them into the job's output -- real files, real processes, both backends."""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import func, select

from jedictl.engine.storage.paths import replica_path, replica_scope
from jedictl.store.invariants import check_all
from jedictl.store.schema import events, jobs
from tests.cli import pilot_grid as grid
from tests.helpers import run_sql

ES_PAYLOAD = """\
#!{python}
# An event-service payload: per range, write the range's events to JEDICTL_EVENT_OUTPUT (failing on the
# range named by ES_TEST_FAIL_EVENT); in merge mode, concatenate the pre-merged files into argv[2].
import os, sys
mode = os.environ["JEDICTL_ES_MODE"]
if mode == "range":
    first, last = int(os.environ["JEDICTL_FIRST_EVENT"]), int(os.environ["JEDICTL_LAST_EVENT"])
    if os.environ.get("ES_TEST_FAIL_EVENT") == str(first):
        print("range failed", file=sys.stderr)
        sys.exit(3)
    with open(os.environ["JEDICTL_EVENT_OUTPUT"], "w") as out:
        out.write(f"events {{first}}-{{last}} of {{sys.argv[1]}}\\n")
else:
    with open(sys.argv[2], "w") as out:
        for name in os.environ["JEDICTL_EVENT_FILES"].split(","):
            out.write(open(name).read())
"""


def _payload(tmp_path: Path) -> Path:
    script = tmp_path / "es_payload.py"
    script.write_text(ES_PAYLOAD.format(python=sys.executable))
    script.chmod(0o755)
    return script


def test_a_pilot_processes_ranges_one_by_one_and_merges_them(cli, store, tmp_path):
    disk = grid.make_grid(cli, store, tmp_path, n_files=2, payload=_payload(tmp_path), spec={"events": {"n_events_per_range": 4}})
    code, report, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0, stderr
    kinds = run_sql(store, lambda conn: conn.execute(select(jobs.c.kind, jobs.c.status).order_by(jobs.c.id)).all())
    assert sorted(kinds) == [("es", "finished"), ("es", "finished"), ("esmerge", "finished"), ("esmerge", "finished")], stderr
    statuses = run_sql(store, lambda conn: dict(conn.execute(select(events.c.status, func.count()).group_by(events.c.status)).all()))
    assert statuses == {"merged": 6}  # 10 events per file, 4 per range: 0-3, 4-7, 8-9
    shown = cli.json("data", "show", "pilot.test.1.out", "--files", db=store)["files"]
    assert len(shown) == 2
    merged = sorted(replica_path(f"file://{disk}", replica_scope(None, "pilot.test.1.out"), entry["lfn"]).read_text() for entry in shown)
    # Each output is its file's ranges merged in event order.
    assert merged == ["".join(f"events {a}-{b} of in.00{n}.dat\n" for a, b in ((0, 3), (4, 7), (8, 9))) for n in (1, 2)]
    assert run_sql(store, check_all) == []


def test_a_range_whose_payload_fails_is_reported_failed_and_done_by_the_next_job(cli, store, tmp_path):
    grid.make_grid(cli, store, tmp_path, n_files=1, payload=_payload(tmp_path), spec={"events": {"n_events_per_range": 4}})
    code, _, stderr = grid.run_pilot(store, "--once", "--jobs", "1", "--workdir", str(tmp_path / "work"),
                                     env={"ES_TEST_FAIL_EVENT": "4"})
    assert code == 0, stderr
    ranges = run_sql(store, lambda conn: conn.execute(select(events.c.start_event, events.c.status, events.c.attempt_nr,
                                                             events.c.error_code).order_by(events.c.id)).all())
    assert [tuple(r) for r in ranges] == [(0, "done", 0, None), (4, "ready", 1, 3), (8, "done", 0, None)]
    assert run_sql(store, lambda conn: conn.execute(select(jobs.c.status, jobs.c.sub_status)).one()) == ("closed", "es_retry")
    grid.generate(cli, store)
    code, _, stderr = grid.run_pilot(store, "--once", "--jobs", "10", "--workdir", str(tmp_path / "work"))
    assert code == 0, stderr
    statuses = run_sql(store, lambda conn: sorted(conn.execute(select(events.c.status)).scalars().all()))
    assert statuses == ["merged"] * 3
    assert run_sql(store, check_all) == []
