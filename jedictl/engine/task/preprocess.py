"""Preprocessing, as pure rules (docs/preprocessing.md; jedi-inventory.md §3 "Preprocessing", §6.13, split
rule UP; seed 000's task statuses `topreprocess` and `preprocessing`).

A task whose parameters ask for a preprocess job (PanDA's `preproSpec`, the spec's `preprocess:`
section) is refined to `topreprocess` with, besides its datasets, a `pp_input` master holding one
pseudo record (`pseudo_lfn`, three attempts). The generator makes the one preprocess job from it
(kind `preprocess`, no outputs) and the task waits `preprocessing`. The job's outcome decides: finished,
the task goes on as any refined task (`defined`: its input is fed, brokered and made into jobs);
failed, the record goes back to the pool and the generator makes the job again; when its three
attempts are used the task is broken.
"""

from __future__ import annotations

from typing import Any

from jedictl.engine.input import fields
from jedictl.engine.task.definition import PreprocessDef, check_fixed_placeholders
from jedictl.errors import BadInput
from jedictl.model import DatasetStatus, TaskStatus

#: The preprocess record's attempts (JEDI: the pp_input pseudo file's maxAttempt).
PREPROCESS_MAX_ATTEMPTS = 3
PSEUDO_LFN = "pseudo_lfn"
PREPROCESS_PLACEHOLDERS = ("SURL", "JEDITASKID", "PANDAID")
#: Task statuses of a task waiting for its preprocess job.
WAITING = (TaskStatus.TOPREPROCESS.value, TaskStatus.PREPROCESSING.value)
_SPEC_KEYS = {"transformation": "program of the preprocess job (default: the task's)",
              "command": "job-parameter template of the preprocess job: ${SURL}, ${JEDITASKID}, ${PANDAID} (required)"}


def parse_preprocess_spec(raw: Any, path: str = "preprocess") -> PreprocessDef:
    """jedictl's `preprocess:` section: transformation, command."""
    body = fields.mapping(raw, path)
    for key in body:
        if key not in _SPEC_KEYS:
            raise BadInput("unknown field", f"{path}.{key}")
    return _checked(PreprocessDef(
        trans_path=fields.text(body.get("transformation"), f"{path}.transformation", max_length=512),
        job_parameters=fields.text(body.get("command"), f"{path}.command", required=True, max_length=65536) or "",
    ), f"{path}.command")


def parse_panda_prepro_spec(raw: Any, path: str = "preproSpec") -> PreprocessDef:
    """PanDA's preproSpec: {transPath, jobParameters}; other keys are kept, not used."""
    body = fields.mapping(raw, path)
    return _checked(PreprocessDef(
        trans_path=fields.text(body.get("transPath"), f"{path}.transPath", max_length=512),
        job_parameters=fields.text(body.get("jobParameters"), f"{path}.jobParameters", required=True, max_length=65536) or "",
    ), f"{path}.jobParameters")


def spec_keys() -> dict[str, str]:
    """The keys of the spec's `preprocess:` section and what each means (docs/task-spec.md)."""
    return dict(_SPEC_KEYS)


def _checked(preprocess: PreprocessDef, path: str) -> PreprocessDef:
    check_fixed_placeholders(preprocess.job_parameters, PREPROCESS_PLACEHOLDERS, "preprocess", path)
    return preprocess


def preprocess_verdict(task_status: str, n_files: int, n_finished: int, n_failed: int) -> tuple[str, str] | None:
    """(new task status, reason) once the preprocess job decided, else None (still running, or retried):
    its record finished -> `defined` (the task goes on to its normal jobs); failed for good (its attempts
    used) -> `tobroken`."""
    if task_status != TaskStatus.PREPROCESSING.value or n_files == 0:
        return None
    if n_finished >= n_files:
        return TaskStatus.DEFINED.value, "preprocessing done"
    if n_finished + n_failed >= n_files:
        return TaskStatus.TOBROKEN.value, f"the preprocess job failed {PREPROCESS_MAX_ATTEMPTS} times"
    return None


#: The status the pp_input dataset is given when the preprocess job decided.
DONE_STATUS = {TaskStatus.DEFINED.value: DatasetStatus.DONE.value, TaskStatus.TOBROKEN.value: DatasetStatus.FAILED.value}
