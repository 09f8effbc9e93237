"""`jedictl jobs list`."""

from __future__ import annotations

from tests.helpers import refused


def test_list_refuses_a_status_that_does_not_exist(cli, store):
    line = refused(cli, store, "jobs", "list", "--status", "activ")
    assert line.startswith("jedictl: error: --status: 'activ' is not a job status (allowed: defined, assigned, activated, ")
    assert line.endswith("did you mean 'activated'?)")
    assert cli.json("jobs", "list", "--status", "activated", "--status", "closed", db=store) == []
