"""The retry module (panda-server §4, jedi-inventory §10.2, seed 000 "Memory increase in job retry")."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest

from jedictl.config import Settings
from jedictl.engine.jobs.resources import SiteResources
from jedictl.engine.jobs.results import (
    FileRecord,
    JobFileRecord,
    JobRecord,
    JobReport,
    propagate,
)
from jedictl.engine.jobs.retry_rules import (
    FailedJob,
    JobError,
    RetryRule,
    TaskRetryState,
    apply_file_changes,
    decide,
    job_errors,
    load_rules,
    parse_rules_text,
    select_rule,
)
from jedictl.errors import BadInput

NOW = datetime(2024, 5, 1, 12, 0)
SETTINGS = Settings()
SITE = SiteResources("SITE", core_count=8, core_power=10.0, max_walltime=86400)
OOM = JobError("pilot", 1305, "Payload exceeded memory limit")


def rule(action: str, rule_id: int = 1, **values) -> RetryRule:
    return RetryRule(id=rule_id, error_source=values.pop("error_source", "pilot"), error_code=values.pop("error_code", 1305),
                     action=action, **values)


def inputs(*attempts: int, max_attempt: int | None = 3) -> list[FileRecord]:
    return [FileRecord(i + 1, 10, "input", "running", attempt_nr=a, max_attempt=max_attempt) for i, a in enumerate(attempts)]


def job(**values) -> FailedJob:
    return FailedJob(**{"id": 100, "attempt_nr": 1, "core_count": 1, **values})


def run(rules, failed: FailedJob, files, task: TaskRetryState | None = None, errors=(OOM,)):
    return decide(rules, failed, errors, files, task or TaskRetryState(), SITE, SETTINGS, NOW)


# ------------------------------------------------------------------------------------- rule files

RULES_YAML = """
- error_source: pilotErrorCode
  error_code: 1305
  action: increase_memory
  description: out of memory
- errorsource: exe
  errorcode: 65
  errordiag: ".*segmentation violation"
  action: no_retry
  label: managed
- error_source: ddm
  error_code: 200
  action: limit_retry
  parameters: maxAttempt=2
  expires_at: "2030-01-01T00:00:00Z"
- error_source: exe
  error_code: 137
  action: reduce_input_per_job
  parameters: {steps: "2,3,5"}
  active: false
"""


def test_rule_file_is_loaded_with_panda_names():
    rules = parse_rules_text(RULES_YAML, "rules.yaml")
    assert [r.action for r in rules] == ["increase_memory", "no_retry", "limit_retry", "reduce_input_per_job"]
    assert rules[1].message_pattern == ".*segmentation violation" and rules[1].prod_source_label == "managed"
    assert rules[2].parameters == {"maxAttempt": 2} and rules[2].expires_at == datetime(2030, 1, 1)
    assert rules[3].parameters == {"excluded_rules": ["nEventsPerJob", "nFilesPerJob"], "steps": [2, 3, 5]}
    assert rules[3].active is False
    columns = rules[2].columns()
    assert columns["error_source"] == "ddm" and columns["parameters"] == {"maxAttempt": 2} and "id" not in columns
    assert RetryRule.from_row({"id": 9, **columns}) == replace(rules[2], id=9)


def test_rule_file_json_and_wrapped_forms():
    assert len(parse_rules_text('[{"error_source": "exe", "error_code": 1, "action": "no_retry"}]')) == 1
    assert len(load_rules({"rules": [{"error_source": "exe", "error_code": 1, "action": "no_retry"}]})) == 1


@pytest.mark.parametrize("item,path,message", [
    ({"error_code": 1, "action": "no_retry"}, "f[0].error_source", "is required"),
    ({"error_source": "exe", "action": "no_retry"}, "f[0].error_code", "is required"),
    ({"error_source": "exe", "error_code": "x", "action": "no_retry"}, "f[0].error_code", "integer"),
    ({"error_source": "exe", "error_code": 1, "action": "retry_harder"}, "f[0].action", "must be one of"),
    ({"error_source": "exe", "error_code": 1, "action": "no_retry", "colour": 1}, "f[0].colour", "unknown key"),
    ({"error_source": "exe", "error_code": 1, "action": "no_retry", "message_pattern": "(("}, "f[0].message_pattern", "regular expression"),
    ({"error_source": "exe", "error_code": 1, "action": "limit_retry"}, "f[0].parameters.maxAttempt", "required"),
    ({"error_source": "exe", "error_code": 1, "action": "limit_retry", "parameters": {"maxAttempt": 0}}, "f[0].parameters.maxAttempt", "at least 1"),
    ({"error_source": "exe", "error_code": 1, "action": "no_retry", "parameters": "maxAttempt=2"}, "f[0].parameters.maxAttempt", "unknown parameter"),
    ({"error_source": "exe", "error_code": 1, "action": "reduce_input_per_job", "parameters": {"steps": [4, 2, 7]}}, "f[0].parameters.steps", "must increase"),
    ({"error_source": "exe", "error_code": 1, "action": "no_retry", "expires_at": "soon"}, "f[0].expires_at", "ISO-8601"),
    ({"error_source": "exe", "error_code": 1, "action": "no_retry", "active": "maybe"}, "f[0].active", "true or false"),
])
def test_bad_rule_files_name_the_field(item, path, message):
    with pytest.raises(BadInput) as error:
        load_rules([item], "f")
    assert error.value.path == path and message in str(error.value)


@pytest.mark.parametrize("text", ["", "{}", "- [1, 2", "just text"])
def test_not_a_rule_list(text):
    with pytest.raises(BadInput) as error:
        parse_rules_text(text, "rules.yaml")
    assert error.value.path == "rules.yaml"


# ---------------------------------------------------------------------------------------- matching

def test_most_specific_rule_wins_and_ties_take_the_smallest_max_attempt():
    generic = rule("limit_retry", 1, parameters={"maxAttempt": 5})
    specific = rule("limit_retry", 2, parameters={"maxAttempt": 7}, release="Athena,24.0.1")
    twin = rule("limit_retry", 3, parameters={"maxAttempt": 4}, release="Athena,24.0.1")
    failed = job(release="Athena,24.0.1")
    assert select_rule([generic, specific], failed, [OOM], NOW)[0].id == 2
    assert select_rule([generic, specific, twin], failed, [OOM], NOW)[0].id == 3
    assert select_rule([generic, specific], job(release="other"), [OOM], NOW)[0].id == 1
    assert select_rule([generic, rule("no_retry", 4)], failed, [OOM], NOW)[0].action == "no_retry"


def test_message_pattern_scope_and_expiry():
    pattern = rule("no_retry", 1, message_pattern=".*memory")
    anchored = rule("no_retry", 2, message_pattern="memory")  # re.match: anchored at the start, as PanDA
    assert select_rule([anchored], job(), [OOM], NOW) is None
    assert select_rule([pattern], job(), [OOM], NOW)[0].id == 1
    assert select_rule([rule("no_retry", vo="atlas")], job(vo="wlcg"), [OOM], NOW) is None
    assert select_rule([rule("no_retry", expires_at=datetime(2024, 1, 1))], job(), [OOM], NOW) is None
    assert select_rule([rule("no_retry", error_source="pilotErrorCode")], job(), [OOM], NOW) is not None


def test_only_the_first_error_with_a_rule_is_acted_on():
    errors = job_errors("exe", 65, "boom", trans_exit_code=137)
    assert errors == (JobError("exe", 65, "boom"), JobError("trans", 137, "boom"))
    on_trans = rule("no_retry", 1, error_source="transExitCode", error_code=137)
    on_exe = rule("limit_retry", 2, error_source="exe", error_code=65, parameters={"maxAttempt": 2})
    chosen, error = select_rule([on_trans, on_exe], job(), errors, NOW)
    assert (chosen.id, error.source) == (2, "exe")
    assert run([rule("no_retry", error_code=1)], job(), inputs(0)) is None  # no rule: no decision


# --------------------------------------------------------------------------------------- actions

def test_no_retry_makes_propagation_fail_the_files():
    files = inputs(0, 1)
    decision = run([rule("no_retry")], job(attempt_nr=2), files)
    assert [(c.file_id, c.max_attempt) for c in decision.file_changes] == [(1, 1), (2, 2)]
    assert decision.retry_relation is None
    job_files = [JobFileRecord(f.id, 10, f"f{f.id}", "input", f.attempt_nr) for f in files]
    result = propagate(JobRecord(100, "running", 2), JobReport(100, "failed"), job_files,
                       {f.id: f for f in apply_file_changes(files, decision)})
    assert [u.status for u in result.file_updates] == ["failed", "failed"]
    assert result.deltas()[0].n_files_failed == 2 and result.deltas()[0].n_files_used == 0


def test_limit_retry_lowers_but_never_raises():
    files = [FileRecord(1, 10, "input", "running", max_attempt=5), FileRecord(2, 10, "input", "running", max_attempt=1),
             FileRecord(3, 10, "input", "running", max_attempt=None)]
    decision = run([rule("limit_retry", parameters={"maxAttempt": 2})], job(), files)
    assert [(c.file_id, c.max_attempt) for c in decision.file_changes] == [(1, 2), (3, 2)]
    assert decision.retry_relation == "retry"


def test_memory_ladder_one_step_per_failure():
    """2000 -> 3000 -> 4000 -> 6000 -> 8000 -> nothing above 8000 (MB per core, single core)."""
    task = TaskRetryState(ram_count=2000, ram_unit="MBPerCore", n_input_files=100)
    files, seen = (FileRecord(1, 10, "input", "running"),), []
    for pss_mb in (2100, 3100, 3500, 6500, 9000):
        min_ram = int(max(2000, files[0].ram_count or 0) * 0.9)  # what the generator wrote for the job
        decision = run([rule("increase_memory")], job(min_ram_count=min_ram, max_pss=pss_mb * 1024), files, task)
        files = apply_file_changes(files, decision)
        seen.append(decision.file_changes[0].ram_count if decision.file_changes else decision.message)
    assert seen == [3000, 4000, 6000, 8000, "already at the top of the memory ladder (9000 MB per core)"]
    assert files[0].ram_count == 8000


def test_memory_step_above_max_pss_per_core():
    task = TaskRetryState(ram_count=2000, ram_unit="MBPerCore", base_ram_count=1000, n_input_files=10)
    # 8 cores: the job had (2000 x 8 + 1000) x 0.9 = 15300 MB; PSS 25000 MB = (25000 - 1000) / 8 = 3000 per core
    failed = job(core_count=8, min_ram_count=15300, max_pss=25000 * 1024)
    decision = run([rule("increase_memory")], failed, [FileRecord(1, 10, "input", "running"), FileRecord(2, 10, "input", "running")], task)
    assert [(c.file_id, c.ram_count) for c in decision.file_changes] == [(1, 4000), (2, 4000)]
    assert decision.task_change is None


def test_memory_for_the_whole_task_when_more_than_30_percent_needed_more():
    files = [FileRecord(1, 10, "input", "running")]
    many = TaskRetryState(ram_count=2000, ram_unit="MBPerCore", n_input_files=10, n_input_files_above_task_ram=4)
    decision = run([rule("increase_memory")], job(min_ram_count=1800), files, many)
    assert decision.task_change.ram_count == 3000 and decision.file_changes == ()
    exactly = replace(many, n_input_files_above_task_ram=3)  # 30 % is not more than 30 %
    assert run([rule("increase_memory")], job(min_ram_count=1800), files, exactly).task_change is None


def test_memory_whole_job_units_and_fixed():
    task = TaskRetryState(ram_count=3500, ram_unit="MB", n_input_files=10)
    decision = run([rule("increase_memory")], job(min_ram_count=3150, max_pss=3000 * 1024), inputs(0), task)
    assert decision.file_changes[0].ram_count == 4000
    fixed = replace(task, ram_unit="MBPerCoreFixed")
    decision = run([rule("increase_memory")], job(min_ram_count=3150), inputs(0), fixed)
    assert decision.file_changes == () and decision.task_change is None and "fixed" in decision.message


def test_increase_cputime():
    task = TaskRetryState(cpu_time=5, cpu_time_unit="HS06sPerEvent")
    decision = run([rule("increase_cputime")], job(core_count=8, n_events=1000), inputs(0), task)
    assert decision.task_change.cpu_time == 10368  # 86400 s x 10 HS06 x 8 cores / 1000 events x 1.5
    later = replace(task, has_finished_jobs=True)
    assert run([rule("increase_cputime")], job(core_count=8, n_events=1000), inputs(0), later).task_change.recalculate


@pytest.mark.parametrize("attempt,files_per_job,gb_per_job", [(1, None, None), (2, 100, 5.0), (3, 100, 5.0),
                                                               (4, 50, 2.5), (7, 1, 1), (9, 1, 1)])
def test_reduce_input_per_job(attempt, files_per_job, gb_per_job):
    task = TaskRetryState(n_gb_per_job=10.0, n_max_files_per_job=200)
    decision = run([rule("reduce_input_per_job", parameters={"excluded_rules": ["nEventsPerJob", "nFilesPerJob"],
                                                             "steps": [2, 4, 7]})], job(attempt_nr=attempt), inputs(0), task)
    if files_per_job is None:
        assert decision.task_change is None
        return
    assert dict(decision.task_change.options) == {"n_max_files_per_job": files_per_job, "n_gb_per_job": gb_per_job}
    assert dict(decision.task_change.base_options) == {"n_max_files_per_job": 200, "n_gb_per_job": 10.0}


def test_reduce_input_uses_recorded_bases_and_skips_nf_tasks():
    reduced = TaskRetryState(n_gb_per_job=5.0, n_max_files_per_job=100, base_n_gb_per_job=10.0, base_n_max_files_per_job=200)
    reduce = rule("reduce_input_per_job", parameters={"excluded_rules": ["nFilesPerJob"], "steps": [2, 4, 7]})
    decision = run([reduce], job(attempt_nr=4), inputs(0), reduced)
    assert dict(decision.task_change.options) == {"n_max_files_per_job": 50, "n_gb_per_job": 2.5}
    assert dict(decision.task_change.base_options) == {}
    nf_task = TaskRetryState(n_files_per_job=2)
    assert "nFilesPerJob" in run([reduce], job(attempt_nr=4), inputs(0), nf_task).message


def test_a_passive_rule_reports_but_changes_nothing():
    decision = run([rule("no_retry", active=False)], job(), inputs(0))
    assert not decision.active and decision.file_changes == () and decision.message.startswith("passive rule")
    assert apply_file_changes(inputs(0), decision) == tuple(inputs(0))
