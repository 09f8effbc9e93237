"""The notification rules as pure functions: who gets a mail, which channels apply, what a summary
says, and an attempt that sends through the channels not yet done and never raises."""

from __future__ import annotations

from jedictl.config import NotifySettings
from jedictl.engine.finalize.notify import Summary, attempt, channels, recipient

TASK = Summary(7, "user.alice.ana", "alice", "finished", "18/20 input files processed", "2030-01-01T00:00:00", "2030-01-01T05:00:00",
               [{"name": "ds.in", "type": "input", "status": "finished", "n_files": 20, "n_files_finished": 18, "n_files_failed": 2}],
               {"failed": 2, "finished": 18})


def test_the_owner_address_comes_from_the_list_then_the_name_then_the_domain():
    settings = NotifySettings(addresses={"alice": "alice@cern.ch"}, mail_domain="example.org")
    assert recipient("alice", settings) == "alice@cern.ch"
    assert recipient("bob@lab.org", settings) == "bob@lab.org"
    assert recipient("carol", settings) == "carol@example.org"
    assert recipient("carol", NotifySettings()) is None


def test_channels_apply_only_when_configured_and_mail_only_with_an_address_and_without_no_email():
    assert channels(NotifySettings(), TASK) == []
    everything = NotifySettings(smtp_host="mail", mail_domain="example.org", webhook_url="http://hook", command=["notify"])
    assert channels(everything, TASK) == ["mail", "webhook", "command"]
    assert channels(NotifySettings(smtp_host="mail"), TASK) == []  # nobody to mail
    quiet = Summary(**{**TASK.__dict__, "no_email": True})
    assert channels(everything, quiet) == ["webhook", "command"]  # PanDA's noEmail stops the mail only


def test_the_summary_says_how_the_task_ended_with_its_datasets_and_jobs():
    text = TASK.text()
    assert TASK.subject() == "jedictl: task 7 user.alice.ana finished"
    assert "ended finished at 2030-01-01T05:00:00 UTC" in text and "Reason: 18/20 input files processed" in text
    assert "files 20, finished 18, failed 2" in text and "Jobs: failed 2, finished 18" in text
    assert "no_email" not in TASK.as_dict() and TASK.as_dict()["status"] == "finished"


def test_an_attempt_skips_the_channels_done_and_turns_a_failure_into_a_line():
    sent = []

    def ok(settings, task):
        sent.append("webhook")

    def down(settings, task):
        raise ConnectionRefusedError(111, "Connection refused")

    settings = NotifySettings(smtp_host="mail", mail_domain="example.org", webhook_url="http://hook", command=["notify"])
    outcome = attempt(settings, TASK, ("command",), {"mail": down, "webhook": ok, "command": ok})
    assert sent == ["webhook"]  # the command had succeeded before: not run again
    assert outcome.done == ("command", "webhook")
    assert len(outcome.errors) == 1 and outcome.errors[0].startswith("mail: ") and "Connection refused" in outcome.errors[0]
