"""The pure rules of build jobs and preprocessing (engine.task.build, engine.task.preprocess)."""

from __future__ import annotations

import pytest

from jedictl.engine.task.build import (
    BUILD_MAX_FAILURES,
    build_verdict,
    lib_dataset_name,
    lib_file_name,
    parse_build_spec,
    parse_panda_build_spec,
    render_build_parameters,
    run_job_status,
)
from jedictl.engine.task.preprocess import parse_panda_prepro_spec, parse_preprocess_spec, preprocess_verdict
from jedictl.errors import BadInput


def test_a_build_job_s_parameters_name_the_archive_the_lib_file_and_the_source_url():
    text = render_build_parameters("-i ${IN} -o ${OUT} --sourceURL ${SURL} -t ${JEDITASKID} -p ${PANDAID}", archive="src.tgz",
                                   lib_lfn="lib.tgz", source_url="https://x", task_id=7, job_id=70)
    assert text == "-i src.tgz -o lib.tgz --sourceURL https://x -t 7 -p 70"
    assert lib_dataset_name(7, "SITE_A") == "panda.7.SITE_A.lib"
    assert lib_file_name("panda.7.SITE_A.lib", 12) == "panda.7.SITE_A.lib._000012.lib.tgz"


def test_run_jobs_wait_defined_until_their_lib_file_is_built():
    assert run_job_status(False, False) == "defined" and run_job_status(False, True) == "defined"
    assert run_job_status(True, False) == "activated" and run_job_status(True, True) == "assigned"


def test_three_failed_builds_break_a_scouting_task_only():
    assert build_verdict("scouting", BUILD_MAX_FAILURES - 1) is None
    assert build_verdict("scouting", BUILD_MAX_FAILURES)[0] == "tobroken"
    assert build_verdict("running", 10) is None


@pytest.mark.parametrize("raw, field", [
    ({"command": "${SN}"}, "build.command"), ({"command": "-i ${IN}"}, "build.command"), ({}, "build.command"),
    ({"command": "x", "extra": 1}, "build.extra"), ("text", "build"),
])
def test_bad_build_sections_are_refused_naming_the_field(raw, field):
    with pytest.raises(BadInput) as error:
        parse_build_spec(raw)
    assert error.value.path == field


def test_panda_build_spec():
    build = parse_panda_build_spec({"prodSourceLabel": "panda", "archiveName": "a.tgz", "jobParameters": "-i ${IN} -o ${OUT}"})
    assert (build.archive, build.trans_path, build.job_parameters) == ("a.tgz", None, "-i ${IN} -o ${OUT}")


def test_the_preprocess_job_decides_the_task():
    assert preprocess_verdict("preprocessing", 1, 0, 0) is None  # running or retried
    assert preprocess_verdict("preprocessing", 1, 1, 0) == ("defined", "preprocessing done")
    assert preprocess_verdict("preprocessing", 1, 0, 1)[0] == "tobroken"
    assert preprocess_verdict("topreprocess", 1, 1, 0) is None  # no job made yet: nothing decided


def test_preprocess_sections():
    assert parse_panda_prepro_spec({"transPath": "p", "jobParameters": "${JEDITASKID}"}).trans_path == "p"
    with pytest.raises(BadInput) as error:
        parse_preprocess_spec({"command": "${IN}"})
    assert error.value.path == "preprocess.command"
