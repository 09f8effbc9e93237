"""Build jobs and lib files, as pure rules (docs/build-jobs.md; jedi-inventory.md §6.13 "Build", split
rule UB; seed 000 "Broken tasks").

An analysis task that ships sources (PanDA's `buildSpec`, jedictl's `build:` section) gets one build
job per site before its run jobs there. The build job turns the source archive into the site's lib
file (`lib.tgz`, a file of the task's lib dataset at that site); the run jobs at the site read that
file (`${LIB}` in their parameters) and wait, `defined`, until the build job finished. A build job
that fails closes the run jobs waiting for it (their input goes back to the pool with an attempt
used) and the next generate pass makes a new build job; a task still scouting whose build jobs failed
three times is broken.

Everything here is a function of plain values; the generator (engine.generate.build_jobs) and the
report path (engine.jobs.builds) apply it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.definition import BuildDef, check_fixed_placeholders
from jedictl.errors import BadInput
from jedictl.model import JobStatus, TaskStatus

#: Seed 000, "Broken tasks": "Build job failed three times when task are in the scouting state".
BUILD_MAX_FAILURES = 3
#: Placeholders a build job's parameters may use: the source archive, the lib file it writes, the
#: source URL, the task and the job.
BUILD_PLACEHOLDERS = ("IN", "OUT", "SURL", "JEDITASKID", "PANDAID")
#: Where a build job's transformation is not named (PanDA's buildGen).
DEFAULT_BUILD_TRANSFORMATION = "buildGen"
#: The error a run job is closed with when the build job it waited for failed (PanDA: "upstream job failed").
UPSTREAM_FAILED = ("jedi", 1105, "its site's build job failed")
_BRACED = re.compile(r"\$\{([^}]*)\}")
_SPEC_KEYS = {"transformation": "program of the build jobs (default buildGen)",
              "command": "job-parameter template of build jobs: ${IN} the source archive, ${OUT} the lib file, ${SURL} (required)",
              "archive": "the source archive the build job reads (${IN})"}
_PANDA_KEYS = ("transPath", "jobParameters", "archiveName", "prodSourceLabel")


def parse_build_spec(raw: Any, path: str = "build") -> BuildDef:
    """jedictl's `build:` section: transformation, command, archive."""
    body = fields.mapping(raw, path)
    for key in body:
        if key not in _SPEC_KEYS:
            raise BadInput("unknown field", f"{path}.{key}")
    return _checked(BuildDef(
        trans_path=fields.text(body.get("transformation"), f"{path}.transformation", max_length=512),
        job_parameters=fields.text(body.get("command"), f"{path}.command", required=True, max_length=65536) or "",
        archive=fields.text(body.get("archive"), f"{path}.archive", max_length=255),
    ), f"{path}.command")


def parse_panda_build_spec(raw: Any, path: str = "buildSpec") -> BuildDef:
    """PanDA's buildSpec: {transPath, jobParameters, archiveName, prodSourceLabel}; other keys are kept, not used."""
    body = fields.mapping(raw, path)
    return _checked(BuildDef(
        trans_path=fields.text(body.get("transPath"), f"{path}.transPath", max_length=512),
        job_parameters=fields.text(body.get("jobParameters"), f"{path}.jobParameters", required=True, max_length=65536) or "",
        archive=fields.text(body.get("archiveName"), f"{path}.archiveName", max_length=255),
    ), f"{path}.jobParameters")


def spec_keys() -> Mapping[str, str]:
    """The keys of the spec's `build:` section and what each means (docs/task-spec.md)."""
    return dict(_SPEC_KEYS)


def _checked(build: BuildDef, path: str) -> BuildDef:
    check_fixed_placeholders(build.job_parameters, BUILD_PLACEHOLDERS, "build", path)
    if "${IN}" in build.job_parameters and not build.archive:
        raise BadInput("uses ${IN} but names no source archive", path)
    return build


def lib_dataset_name(task_id: int, site: str) -> str:
    """The task's lib dataset at a site (one per site, as PanDA makes a libDS per site)."""
    return f"panda.{task_id}.{site}.lib"


def lib_file_name(dataset_name: str, record_id: int) -> str:
    """A lib file's name: its dataset's, numbered by the file record (unique, so a rebuild never reuses one)."""
    return f"{dataset_name}._{record_id:06d}.lib.tgz"


def render_build_parameters(template: str, *, archive: str | None, lib_lfn: str, source_url: str | None, task_id: int,
                            job_id: int) -> str:
    """A build job's parameters: its placeholders are checked when the task is submitted (`_checked`)."""
    values = {"IN": archive or "", "OUT": lib_lfn, "SURL": source_url or "", "JEDITASKID": str(task_id), "PANDAID": str(job_id)}
    return _BRACED.sub(lambda match: values.get(match.group(1), match.group(0)), template)


def run_job_status(lib_built: bool, waits_for_transfer: bool) -> str:
    """Where a new run job starts: `defined` until its site's lib file is built, then as any job
    (`assigned` while input is to be transferred, else `activated`)."""
    if not lib_built:
        return JobStatus.DEFINED.value
    return JobStatus.ASSIGNED.value if waits_for_transfer else JobStatus.ACTIVATED.value


def build_verdict(task_status: str, n_failed_builds: int, max_failures: int = BUILD_MAX_FAILURES) -> tuple[str, str] | None:
    """(new task status, reason) when the task's failed build jobs break it, else None: a task still
    scouting whose build jobs failed `max_failures` times is broken (seed 000). Later, a failed build
    job only closes the run jobs waiting for it; their input's attempts bound the retries."""
    if task_status == TaskStatus.SCOUTING.value and n_failed_builds >= max_failures:
        return TaskStatus.TOBROKEN.value, f"build job failed {n_failed_builds} times while the task was scouting"
    return None
