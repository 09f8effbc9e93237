"""What TAB offers for an option's or argument's value: the allowed values, not file names.

One table, keyed by command path and parameter name, says where each value set comes from: the status
vocabularies of `jedictl.model` (task, job, file and dataset statuses, resource types), the fixed sets
the commands accept (site statuses, data kinds, retry-rule actions, split algorithms, agents), and
names from the store (sites, clouds, nuclei, endpoints) when that is cheap. Choices Typer knows itself
(`--output`, `--label`, `--shell`) and file parameters keep Typer's own completion.

Store look-ups only read a SQLite file that already exists, through the standard library's sqlite3
in read-only mode with a short timeout: completion never imports SQLAlchemy, never creates, migrates
or writes a store, and offers nothing for a PostgreSQL store (a network round trip per TAB is not
cheap). Any failure offers nothing.

The fixed sets come from `jedictl.model.choices`, which the commands validate against too (and which
the settings already import, so a TAB imports nothing more); the few sets only the engine defines are
copied here so that a TAB does not import the engine (the retry rules alone take 0.4 s to import):
tests/cli/test_completion_values.py checks that each copy equals the engine's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

from jedictl.model.choices import AGENTS, BATCH_SYSTEMS, HEARTBEAT_STATUSES, PILOT_STATES, RETRY_ACTIONS, SITE_STATUSES
from jedictl.model.choices import CATALOG_KINDS as DATA_KINDS
from jedictl.model.choices import CATALOG_STATES as DATA_STATES
from jedictl.model.choices import TRANSFER_MODES as TRANSFERS

#: The error sources of PanDA's job record (engine.jobs.reports: pilotErrorCode -> pilot, ...) and the payload's.
ERROR_SOURCES = ("pilot", "exe", "ddm", "jobdispatcher", "taskbuffer", "sup", "trans")
#: engine.generate.splitters.registry.NAMES
SPLIT_ALGORITHMS = ("FileBased", "MinFileBased", "EventBased", "LumiBased", "EventAwareLumiBased", "SizeBased", "RunBased",
                    "ParentlessMergeBySize", "WMBSMergeBySize", "SiblingProcessingBased", "Harvest", "jedi")


def _enum(name: str) -> Callable[[Any], list[str]]:
    def values(ctx: Any) -> list[str]:
        import jedictl.model as model

        return [str(member.value) for member in getattr(model, name)]

    return values


def _fixed(values: Iterable[str]) -> Callable[[Any], list[str]]:
    return lambda ctx: list(values)


def _from_store(query: str) -> Callable[[Any], list[str]]:
    return lambda ctx: store_names(ctx, query)


_SITES = _from_store("SELECT name FROM sites ORDER BY name")
_CLOUDS = _from_store("SELECT DISTINCT cloud FROM sites WHERE cloud IS NOT NULL ORDER BY cloud")
_NUCLEI = _from_store("SELECT name FROM nuclei ORDER BY name")
_ENDPOINTS = _from_store("SELECT name FROM storage_endpoints ORDER BY name")
_PLACES = _from_store("SELECT name FROM sites UNION SELECT name FROM nuclei ORDER BY name")  # a network link's ends
_LOG_FORMATS = _fixed(("text", "json"))

#: (command path, parameter name) -> its values. A path of one word also covers that group's commands;
#: "" covers every command (looked up last).
VALUES: dict[tuple[str, str], Callable[[Any], list[str]]] = {
    ("task", "status"): _enum("TaskStatus"),
    ("jobs", "status"): _enum("JobStatus"),
    ("jobs heartbeat", "status"): _fixed(HEARTBEAT_STATUSES),
    ("jobs dispatch", "resource_type"): _enum("ResourceType"),
    ("sites", "status"): _fixed(SITE_STATUSES),
    ("sites", "name"): _SITES,
    ("pilots", "state"): _fixed(PILOT_STATES),
    ("data", "kind"): _fixed(DATA_KINDS),
    ("data", "state"): _fixed(DATA_STATES),
    ("data import", "transfer"): _fixed(TRANSFERS),
    ("data import", "endpoint"): _ENDPOINTS,
    ("network", "source"): _PLACES,
    ("network", "destination"): _PLACES,
    ("retry-rules", "action"): _fixed(RETRY_ACTIONS),
    ("retry-rules", "source"): _fixed(ERROR_SOURCES),
    ("split", "algorithm"): _fixed(SPLIT_ALGORITHMS),
    ("run", "agents"): lambda ctx: list(AGENTS),  # a comma list: see _complete_list
    ("run", "log_format"): _LOG_FORMATS,
    ("harvest", "batch"): _fixed(BATCH_SYSTEMS),
    ("", "site"): _SITES,
    ("", "sites"): _SITES,
    ("", "cloud"): _CLOUDS,
    ("", "nucleus"): _NUCLEI,
    ("", "resource_type"): _enum("ResourceType"),
    ("", "task_status"): _enum("TaskStatus"),
    ("", "job_status"): _enum("JobStatus"),
    ("", "file_status"): _enum("FileStatus"),
    ("", "dataset_status"): _enum("DatasetStatus"),
}
#: Parameters whose value is a comma-separated list of the values.
COMMA_LISTS = {("run", "agents")}


def values_for(path: str, name: str, spelling: str | None = None) -> Callable[[Any], list[str]] | None:
    """Where the values of parameter `name` (written `spelling` on the command line: `--status`,
    `STATUS`) of the command at `path` come from, if anywhere."""
    declared = _declared_choices().get((path, spelling or ""))
    if declared is not None:
        return _fixed(declared)
    group = path.split(" ", 1)[0]
    for key in ((path, name), (group, name), ("", name)):
        if key in VALUES:
            return VALUES[key]
    return None


def _declared_choices() -> dict[tuple[str, str], tuple[str, ...]]:
    """The sets the commands themselves enforce, where the model declares them (`jedictl.model.choices`,
    keyed by command path and `--option` or ARGUMENT): those win over the table above."""
    try:
        from jedictl.model.choices import OPTION_CHOICES  # type: ignore[import-not-found]
    except ImportError:
        return {}
    return OPTION_CHOICES


def _spelling(param: Any) -> str:
    if param.param_type_name == "argument":
        return str(param.metavar or param.name or "").upper()
    longs = [opt for opt in param.opts if opt.startswith("--")]
    return longs[0] if longs else (param.opts[0] if param.opts else "")


def complete(ctx: Any, param: Any, incomplete: str) -> list[str]:
    """Typer's completion hook: the values starting with what was typed (nothing when none is known)."""
    from jedictl.commands._help import command_path

    path = command_path(ctx)
    source = values_for(path, param.name or "", _spelling(param))
    if source is None:
        return []
    try:
        values = source(ctx)
    except Exception:  # noqa: BLE001 - a TAB must never fail loudly
        return []
    if (path, param.name) in COMMA_LISTS or (path.split(" ", 1)[0], param.name) in COMMA_LISTS:
        return _complete_list(values, incomplete)
    return [value for value in values if value.startswith(incomplete)]


def _complete_list(values: list[str], incomplete: str) -> list[str]:
    """`refine,fe<TAB>` -> `refine,feed`: the last item of a comma list, the items before kept."""
    done, _, last = incomplete.rpartition(",")
    taken = set(done.split(",")) if done else set()
    prefix = f"{done}," if done else ""
    return [prefix + value for value in values if value.startswith(last) and value not in taken]


def attach(param: Any) -> None:
    """Give `param` this module's completion, unless Typer completes it already (choices, files)."""
    if getattr(param, "_custom_shell_complete", None) is not None:
        return
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and (descriptor.is_choice or descriptor.is_file or descriptor.is_path):
        return
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return
    param._custom_shell_complete = complete


# ------------------------------------------------------------------------------------ the store

def store_names(ctx: Any, query: str, limit: int = 500) -> list[str]:
    """The first column of `query` on the store of this command line, if it is an existing SQLite file."""
    import sqlite3

    path = _sqlite_store(ctx)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return []
    # Read-only, never creating anything: with no write-ahead log beside it no process has the store open
    # for writing, and `immutable` reads the file without the lock files a WAL reader would leave
    # (-shm, -wal); with a log, `mode=ro` reads it consistently (those files exist already).
    wal = path.with_name(path.name + "-wal")
    options = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{options}", uri=True, timeout=0.2)
    except sqlite3.Error:
        return []
    try:
        return [str(row[0]) for row in conn.execute(f"{query} LIMIT {int(limit)}") if row[0] is not None]
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def _sqlite_store(ctx: Any) -> Path | None:
    """The store the command would use, as `jedictl.config` resolves it, when it is a SQLite file."""
    from jedictl.commands._common import given_options
    from jedictl.config import ENV_DB, load_settings

    given = given_options(ctx)
    url = given.db or os.environ.get(ENV_DB)
    if not url:
        try:
            url = load_settings({}, config_path=given.config).settings.db  # the configuration's, else the default
        except Exception:  # noqa: BLE001 - a broken configuration: complete nothing from the store
            return None
    url = url.strip()
    if "://" not in url:
        return Path(url).expanduser()
    scheme, _, rest = url.partition("://")
    if not scheme.startswith("sqlite") or not rest.startswith("/"):
        return None
    location = rest[1:].split("?", 1)[0]  # sqlite:///relative/path, sqlite:////absolute/path
    return Path(location) if location not in ("", ":memory:") else None
