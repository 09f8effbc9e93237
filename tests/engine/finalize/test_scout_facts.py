"""What a scout measurement writes on the task (engine.finalize.scout_facts) and how finalize counts outputs."""

from __future__ import annotations

from types import SimpleNamespace

from jedictl.config import Settings
from jedictl.engine.task.final_status import DatasetRecord
from jedictl.engine.task.options import TaskOptions
from jedictl.engine.finalize.postprocessor import _outputs_counted
from jedictl.engine.finalize.scouts import ScoutAssessment, ScoutStatistics
from jedictl.engine.finalize.scout_facts import scout_request, task_values

SETTINGS = Settings()


def task(**values) -> SimpleNamespace:
    base = {"walltime_unit": None, "core_count": 1, "ram_unit": "MBPerCore", "base_ram_count": 0, "resource_type": "SCORE",
            "options": {"n_files_per_job": 2, "goal": 90.0}, "ram_count": 2000, "cpu_time_unit": None, "walltime": 0,
            "base_walltime": 600, "cpu_efficiency": 90, "out_disk_unit": None, "work_disk_count": 0}
    base.update(values)
    return SimpleNamespace(**base)


def test_out_disk_per_mb_is_stored_as_bytes_per_byte():
    stats = ScoutStatistics(walltime=7, walltime_unit="kSI2kseconds", out_disk_count=512, out_disk_unit="kB")
    values = task_values(task(), TaskOptions(), stats, SETTINGS)
    assert (values["out_disk_count"], values["out_disk_unit"]) == (0.5, "B")  # 512 kB per MB of input
    per_event = task_values(task(), TaskOptions(), ScoutStatistics(out_disk_count=30, out_disk_unit="kBPerEvent"), SETTINGS)
    assert (per_event["out_disk_count"], per_event["out_disk_unit"]) == (30, "kBPerEvent")


def test_a_measurement_marks_the_walltime_measured_even_without_cpu_figures():
    assert task_values(task(), TaskOptions(), ScoutStatistics(), SETTINGS) == {"walltime_unit": "kSI2kseconds"}
    assert task_values(task(walltime_unit="ava"), TaskOptions(), ScoutStatistics(), SETTINGS) == {"walltime_unit": "ava"}


def test_new_ram_recomputes_the_resource_type():
    values = task_values(task(), TaskOptions(), ScoutStatistics(ram_count=3000, ram_unit="MBPerCore"), SETTINGS)
    assert (values["ram_count"], values["resource_type"]) == (3000, "SCORE_HIMEM")  # 3000 x 0.9 > 2000 per core
    values = task_values(task(), TaskOptions(), ScoutStatistics(ram_count=1500, ram_unit="MBPerCore"), SETTINGS)
    assert values["resource_type"] == "SCORE"


def test_the_short_jobs_fix_rewrites_the_split_options():
    assessment = ScoutAssessment("scouted", None, ScoutStatistics(), split_rule_changes={"n_files_per_job": None, "n_max_files_per_job": 200})
    values = task_values(task(), TaskOptions(), ScoutStatistics(), SETTINGS, assessment)
    assert values["options"] == {"goal": 90.0, "n_max_files_per_job": 200}


def test_the_request_is_what_the_user_asked_for():
    request = scout_request(task(ram_count=1289), TaskOptions(ram_count=2000, cpu_time=50.0, scout_success_rate=5, skip_scout=True))
    assert (request.ram_count, request.cpu_time, request.scout_success_rate, request.uses_scouts) == (2000, 50.0, 5, False)
    assert scout_request(task(ram_count=1289), TaskOptions()).ram_count == 1289


def test_outputs_of_a_done_task_count_as_complete_others_count_their_failures():
    out = DatasetRecord(3, "output", "running", n_files=0, n_files_finished=12, n_files_failed=2)
    inp = DatasetRecord(1, "input", "done", n_files=25, n_files_finished=25)
    assert [d.n_files for d in _outputs_counted("done", [inp, out])] == [25, 12]
    assert [d.n_files for d in _outputs_counted("finished", [inp, out])] == [25, 14]
