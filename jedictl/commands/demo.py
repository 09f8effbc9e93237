"""`jedictl demo`: the whole system on a small grid, in one command, with a live display."""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated, Any, Optional

import typer

from jedictl.commands._common import context

DEFAULT_DB = "jedictl-demo.db"
EXECUTE_DIR = "jedictl-demo-execute"
#: A file the --execute demo leaves in its directory: only a directory that has it is replaced.
EXECUTE_MARK = ".jedictl-demo-execute"


def demo(
    ctx: typer.Context,
    db: Annotated[Optional[str], typer.Option("--db", metavar="PATH", help=f"Build the demo store here (a new SQLite file, or an empty store URL); also read before the command and from JEDICTL_DB. Default: ./{DEFAULT_DB}, replaced on each run.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for brokerage and the pilots' failures: the same seed replays the same run.")] = 1,
    pace: Annotated[Optional[float], typer.Option("--pace", metavar="SECONDS", min=0.0, help="Pause between rounds (default: 0.3 on a terminal, 0 otherwise).")] = None,
    execute: Annotated[bool, typer.Option("--execute", help=f"Run one small task for real instead: real input files, a real payload and real pilot processes started by harvest, in ./{EXECUTE_DIR}/ (replaced on each run).")] = False,
) -> None:
    """Build a small grid with tasks of every kind and run every agent and the pilots until all end.

    Two clouds with one nucleus each and seven sites with disk and tape storage; an analysis task
    given as PanDA task parameters, an event-split production task with scouts, a no-input generation
    task and a child that reads its output, a task with a merge step, and a task whose site fails at
    first -- it fails and the demo retries it. Each round runs refine, feed, broker, generate,
    finalize and watch once, then the pilot simulator; a virtual clock moves 5 minutes per round.
    The store is kept: the summary says how to look inside it.
    """
    from jedictl.errors import BadInput

    db, named_by = _named_store(ctx, db)
    if execute:
        if pace is not None:
            raise BadInput("runs on the wall clock with --execute; leave it out", "--pace")
        _execute(ctx, db, seed, named_by)
        return
    path = db or DEFAULT_DB
    is_url = "://" in path
    if not is_url and os.path.exists(path) and db is not None:
        raise BadInput("exists; the demo builds a new store (remove it or choose another path)", named_by)
    if not is_url:
        for suffix in ("", "-wal", "-shm"):  # the default demo store is the demo's own: replaced
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
    app = context(ctx, db=path)
    from jedictl.engine.sim import demo as demo_engine
    from jedictl.store.migrate import upgrade

    if is_url and demo_engine.holds_tasks(app.settings.db):  # before any migration touches someone's store
        raise BadInput("already holds tasks; the demo needs an empty store", named_by)
    upgrade(app.settings.db, busy_timeout_s=app.settings.sqlite_busy_timeout_s)
    store = app.store()
    start = app.clock.now()
    tasks = demo_engine.build(store, app.settings, start, app.owner)
    live = sys.stderr.isatty() and not app.quiet and app.output == "table"
    pause = pace if pace is not None else (0.3 if live else 0.0)
    started = time.monotonic()
    last = None
    display = _Display(tasks, live, app)
    with display:
        for last in demo_engine.rounds(store, app.settings, app.owner, tasks, start, seed):
            display.update(last, demo_engine.snapshot(store), time.monotonic() - started)
            if pause:
                time.sleep(pause)
    final = demo_engine.snapshot(store)
    finished = demo_engine.all_final(store)
    _summary(app, tasks, final, last, time.monotonic() - started, path, finished, demo_engine.analysis_placement(store, tasks))
    if not finished:
        raise typer.Exit(1)


def _named_store(ctx: typer.Context, db: Optional[str]) -> tuple[Optional[str], str]:
    """The store the operator named for the demo, and how: its own --db, the global one given before
    the command (`jedictl --db X demo`), or JEDICTL_DB; None for the demo's default. A store set only in
    the configuration file is the operator's own, never the demo's."""
    from jedictl.commands._common import given_options
    from jedictl.config import ENV_DB

    if db:
        return db, "--db"
    if given_options(ctx).db:
        return given_options(ctx).db, "--db"
    if os.environ.get(ENV_DB):
        return os.environ[ENV_DB], ENV_DB
    return None, "--db"


class _Display:
    """A rich Live view on a terminal; one plain line per round elsewhere (cron, pipes, CI logs)."""

    def __init__(self, tasks: Any, live: bool, app: Any):
        self.tasks, self.app = tasks, app
        self.live = None
        if live:
            from rich.live import Live

            from jedictl.commands._help import console

            self.live = Live(console=console(stderr=True), refresh_per_second=8, transient=False, vertical_overflow="visible")

    def __enter__(self) -> _Display:
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, round_: Any, snap: Any, elapsed: float) -> None:
        if self.live is not None:
            self.live.update(self._render(round_, snap, elapsed))
            return
        statuses: dict[str, int] = {}
        for task in snap.tasks:
            statuses[task["status"]] = statuses.get(task["status"], 0) + 1
        jobs: dict[str, int] = {}
        for counts in snap.sites.values():
            for status, n in counts.items():
                jobs[status] = jobs.get(status, 0) + n
        line = (f"round {round_.number:>2} ({round_.now:%H:%M} virtual): tasks " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
                + "; jobs " + ", ".join(f"{n} {s}" for s, n in sorted(jobs.items())))
        self.app.note(line + (f"; {round_.action}" if round_.action else ""))

    def _render(self, round_: Any, snap: Any, elapsed: float) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        tasks = Table(title=f"jedictl demo -- round {round_.number}, {round_.now:%H:%M} virtual time, {elapsed:.0f} s")
        tasks.add_column("task", justify="right")
        tasks.add_column("kind", no_wrap=True)
        tasks.add_column("status", no_wrap=True, min_width=9)
        tasks.add_column("progress", no_wrap=True)
        tasks.add_column("files", no_wrap=True)
        tasks.add_column("jobs", no_wrap=True)
        for task in snap.tasks:
            total = max(task["files"], 1)
            jobs = task["jobs"]
            tasks.add_row(str(task["id"]), self.tasks.roles.get(task["id"], ""), task["status"],
                          ProgressBar(total=total, completed=task["done"] + task["failed"], width=12),
                          f"{task['done']}/{task['files']}" + (f" ({task['failed']} failed)" if task["failed"] else ""),
                          f"{sum(jobs.values())} ({jobs.get('failed', 0)} failed)")
        sites = Table(title="jobs per site")
        statuses = ("activated", "running", "finished", "failed", "closed", "cancelled")
        sites.add_column("site")
        for status in statuses:
            sites.add_column(status, justify="right")
        for site, counts in sorted(snap.sites.items()):
            sites.add_row(site, *(str(counts.get(s, 0)) for s in statuses))
        shares = Table(title="global shares (jobs)")
        shares.add_column("share")
        for status in ("activated", "running", "finished", "failed"):
            shares.add_column(status, justify="right")
        for share, counts in sorted(snap.shares.items()):
            shares.add_row(share, *(str(counts.get(s, 0)) for s in ("activated", "running", "finished", "failed")))
        parts: list[Any] = [tasks, sites, shares]
        if round_.action:
            parts.append(f"operator: {round_.action}")
        return Group(*parts)


def _summary(app: Any, tasks: Any, snap: Any, last: Any, elapsed: float, path: str, finished: bool, placement: list[str]) -> None:
    rows = [{"task": t["id"], "kind": tasks.roles.get(t["id"], ""), "status": t["status"], "files": t["files"], "files_done": t["done"],
             "files_failed": t["failed"], "jobs": sum(t["jobs"].values()), "failed_jobs": t["jobs"].get("failed", 0)} for t in snap.tasks]
    if app.output in ("json", "yaml"):  # numbers stay numbers for scripts: files, files_done, files_failed
        app.emit({"store": path, "rounds": last.number if last else 0, "seconds": round(elapsed, 1), "all_final": finished,
                  "retries": snap.retries, "tasks": rows})
        return
    if app.output == "table":  # for people: "done/all", as the live display shows it
        rows = [{**row, "files": f"{row['files_done']}/{row['files']}"} for row in rows]
    app.emit(rows, columns=["task", "kind", "status", "files", "jobs", "failed_jobs"] if app.output == "table" else
             ["task", "kind", "status", "files", "files_done", "files_failed", "jobs", "failed_jobs"])
    total_jobs = sum(sum(c.values()) for c in snap.sites.values())
    where = path if "://" in path else os.path.abspath(path)
    app.note(f"\n{'Every task is final' if finished else 'Stopped before every task was final'} after "
             f"{last.number if last else 0} rounds ({elapsed:.1f} s): {total_jobs} jobs, {snap.retries} retried.")
    for line in placement:  # analysis brokerage follows the data: show that it did
        app.note(line)
    store = path if "://" in path else where
    app.note(f"The store is kept in {where}. Look inside with:\n"
             f"  jedictl --db {store} task list\n"
             f"  jedictl --db {store} task show 1\n"
             f"  jedictl --db {store} jobs list --task 5\n"
             f"  jedictl --db {store} explain task 6\n"
             f"  jedictl --db {store} check")


def _execute(ctx: typer.Context, db: Optional[str], seed: int, named_by: str = "--db") -> None:
    """`demo --execute`: docs/executing.md, "Try it in five minutes"."""
    import shutil
    from pathlib import Path

    from jedictl.errors import BadInput

    root = Path(EXECUTE_DIR).resolve()
    if root.exists():
        if not (root / EXECUTE_MARK).exists():
            raise BadInput(f"{root} exists and is not a demo directory (remove it or run elsewhere)")
        shutil.rmtree(root)
    root.mkdir()
    (root / EXECUTE_MARK).write_text("made by jedictl demo --execute; replaced by the next run\n")
    path = db or f"sqlite:///{root / 'jedictl.db'}"
    app = context(ctx, db=path)
    from jedictl.engine.sim import execute_demo
    from jedictl.store.migrate import upgrade

    if "://" in path and db is not None and execute_demo.holds_tasks(app.settings.db):
        raise BadInput("already holds tasks; the demo needs an empty store", named_by)
    upgrade(app.settings.db, busy_timeout_s=app.settings.sqlite_busy_timeout_s)
    store = app.store()
    workspace = execute_demo.Workspace(root)
    task_id = execute_demo.build(store, app.settings, app.clock.now(), app.owner, workspace, seed)
    started = time.monotonic()
    last = None
    for last in execute_demo.rounds(store, app.settings, app.owner, app.clock.now, seed):
        app.note(execute_demo.progress_line(store, task_id, last, time.monotonic() - started))
        time.sleep(1.0)  # real pilots run between rounds
    execute_demo.wait_for_pilots(store, timeout_s=60)
    outputs = execute_demo.outputs(store, workspace)
    status = execute_demo.task_status(store, task_id)
    rows = [{"lfn": o.lfn, "size": o.size_on_disk, "checksum": o.checksum_on_disk, "registered": o.registered_checksum,
             "matches": o.matches, "path": str(o.path)} for o in outputs]
    elapsed = time.monotonic() - started
    if app.output in ("json", "yaml"):
        app.emit({"store": path, "directory": str(root), "task": task_id, "status": status, "seconds": round(elapsed, 1),
                  "retries": execute_demo.retry_count(store), "outputs": rows})
    else:
        app.emit(rows, columns=["lfn", "size", "checksum", "matches", "path"])
        app.note(f"\nTask {task_id} is {status} after {elapsed:.0f} s: {len(outputs)} files on disk, each with the checksum the "
                 f"catalog registered: {'yes' if outputs and all(o.matches for o in outputs) else 'NO'}; "
                 f"{execute_demo.retry_count(store)} job(s) retried after the injected failure.")
        app.note(f"Everything is kept in {root}. Look inside with:\n"
                 f"  jedictl --db {path} jobs list --task {task_id}\n"
                 f"  jedictl --db {path} pilots list\n"
                 f"  jedictl --db {path} data show {execute_demo.OUTPUT} --files\n"
                 f"  jedictl --db {path} check")
    if status not in ("done", "finished") or not outputs or not all(o.matches for o in outputs):
        raise typer.Exit(1)
