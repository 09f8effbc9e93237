"""Telling a task's owner that it ended (JEDI's post processor mails the owner; seed 001): a step at the
end of every finalize pass, after the tasks' final writes have committed, so a notification never holds
a task back and a failed one is only retried.

Channels, each off until configured (settings `notify.*`, docs/notifications.md): a mail through an SMTP
server (not for tasks whose PanDA parameters say `noEmail`, nor for owners without an address), a JSON
POST to a webhook, and a program run with the summary as JSON on stdin. A task is due when it is final
and its end (`ended_at`) is not the one notified; a pass claims it for a while (another pass keeps off),
sends through the channels that have not succeeded for this end yet, and records the outcome: sent;
failed (the task stays due, tried again next pass, given up after `max_attempts`). A process killed
between a send and the record sends that channel again once the claim lapses: at least once, never lost.
"""

from __future__ import annotations

import json
import smtplib
import subprocess
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any

from jedictl.config import NotifySettings, Settings
from jedictl.engine.agent import PassReport, error_line
from jedictl.store import notifications

CHANNELS = ("mail", "webhook", "command")


@dataclass(frozen=True)
class Summary:
    """What the owner is told: the task, how it ended and why, its datasets and its jobs."""

    task_id: int
    name: str
    user: str
    status: str
    reason: str | None
    created_at: str | None
    ended_at: str | None
    datasets: list[dict[str, Any]] = field(default_factory=list)
    jobs: dict[str, int] = field(default_factory=dict)
    no_email: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if key != "no_email"}

    def subject(self) -> str:
        return f"jedictl: task {self.task_id} {self.name} {self.status}"

    def text(self) -> str:
        lines = [f"Task {self.task_id} ({self.name}) of {self.user} ended {self.status} at {self.ended_at} UTC.",
                 f"Reason: {self.reason or '-'}", f"Submitted: {self.created_at} UTC", "", "Datasets:"]
        for d in self.datasets:
            lines.append(f"  {d['type']:<12} {d['name']}  {d['status'] or '-'}  files {d['n_files']}, finished {d['n_files_finished']}, "
                         f"failed {d['n_files_failed']}")
        lines += ["", "Jobs: " + (", ".join(f"{status} {count}" for status, count in self.jobs.items()) or "none"), "",
                  f"jedictl task show {self.task_id}"]
        return "\n".join(lines) + "\n"


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(timespec="seconds") if moment is not None else None


def summary(task: Any, facts: Mapping[str, Any]) -> Summary:
    """The summary of a task row and its facts (store.notifications.facts)."""
    params = facts.get("params") or {}
    return Summary(int(task.id), str(task.name), str(task.user_name), str(task.status), facts.get("reason"), _iso(task.created_at),
                   _iso(task.ended_at), list(facts.get("datasets", [])), dict(facts.get("jobs", {})), bool(params.get("noEmail")))


def recipient(user: str, settings: NotifySettings) -> str | None:
    """The owner's mail address: listed in `addresses`, else the name itself when it is an address, else
    user@mail_domain; None when there is none."""
    listed = (settings.addresses or {}).get(user)
    if listed:
        return str(listed)
    if "@" in user:
        return user
    return f"{user}@{settings.mail_domain}" if settings.mail_domain else None


def channels(settings: NotifySettings, task: Summary) -> list[str]:
    """The configured channels that apply to this task, in order."""
    chosen = []
    if settings.smtp_host and not task.no_email and recipient(task.user, settings):
        chosen.append("mail")
    if settings.webhook_url:
        chosen.append("webhook")
    if settings.command:
        chosen.append("command")
    return chosen


def configured(settings: NotifySettings) -> bool:
    return bool(settings.smtp_host or settings.webhook_url or settings.command)


def send_mail(settings: NotifySettings, task: Summary) -> None:
    message = EmailMessage()
    message["Subject"] = task.subject()
    message["From"] = settings.mail_from
    message["To"] = recipient(task.user, settings) or ""
    message.set_content(task.text())
    with smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=settings.timeout_seconds) as server:
        server.send_message(message)


def send_webhook(settings: NotifySettings, task: Summary) -> None:
    request = urllib.request.Request(settings.webhook_url, data=json.dumps(task.as_dict()).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=settings.timeout_seconds) as response:  # noqa: S310 (an operator's URL)
        if not 200 <= response.status < 300:
            raise OSError(f"the webhook answered HTTP {response.status}")


def run_command(settings: NotifySettings, task: Summary) -> None:
    argv = [str(part) for part in settings.command]
    done = subprocess.run(argv, input=json.dumps(task.as_dict()), text=True, capture_output=True, timeout=settings.timeout_seconds,
                          check=False)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise OSError(f"{argv[0]} exited {done.returncode}" + (f": {said[-1][:200]}" if said else ""))


SENDERS: dict[str, Callable[[NotifySettings, Summary], None]] = {"mail": send_mail, "webhook": send_webhook, "command": run_command}


@dataclass(frozen=True)
class Attempt:
    """One attempt's outcome for one task."""

    done: tuple[str, ...]  # every channel that has succeeded for this end, earlier attempts included
    errors: tuple[str, ...]  # "channel: reason" of the channels that failed now


def attempt(settings: NotifySettings, task: Summary, already: tuple[str, ...], senders: Mapping[str, Callable] = SENDERS) -> Attempt:
    """Send through each applicable channel that has not succeeded yet; a failure is one line, never raised."""
    done, errors = list(already), []
    for name in channels(settings, task):
        if name in done:
            continue
        try:
            senders[name](settings, task)
            done.append(name)
        except Exception as exc:  # noqa: BLE001 -- a channel failing is an outcome, whatever it raised
            errors.append(f"{name}: {error_line(exc)}")
    return Attempt(tuple(done), tuple(errors))


def notify_ended(store: Any, settings: Settings, now: datetime, report: PassReport) -> None:
    """Notify the owners of the tasks due (at most `notify.limit`), adding one item per task to `report`."""
    config = settings.notify
    if not configured(config):
        return
    since = now - timedelta(hours=config.max_age_hours)
    with store.read() as conn:
        due = notifications.due(conn, now, since, config.limit)
    for row in due:
        try:
            _notify_one(store, config, row.id, row.ended_at, now, since, report)
        except Exception as exc:  # noqa: BLE001 -- the store failing for one task: reported, the others go on
            report.add_failure(exc, task_id=row.id)


def _notify_one(store: Any, config: NotifySettings, task_id: int, ended_at: datetime, now: datetime, since: datetime,
                report: PassReport) -> None:
    # Long enough for every channel to time out once, so a slow pass keeps its claim while it sends.
    until = now + timedelta(seconds=config.timeout_seconds * (len(CHANNELS) + 1))
    with store.begin() as conn:
        task = notifications.claim(conn, task_id, ended_at, now, since, until)
        if task is None:
            return  # another pass took it, or it ended again / was sent meanwhile
        facts = notifications.facts(conn, task_id)
    told = summary(task, facts)
    already = tuple(task.notify_channels.split(",")) if task.notify_channels else ()
    outcome = attempt(config, told, already)
    attempts = task.notify_attempts + 1 if outcome.errors else 0
    given_up = bool(outcome.errors) and attempts >= config.max_attempts
    error = "; ".join(outcome.errors)[:2000] or None
    with store.begin() as conn:
        notifications.record(conn, task_id, ended_at, channels=",".join(outcome.done), error=error, attempts=attempts,
                             settled=not outcome.errors or given_up)
    sent = ",".join(outcome.done) or "none applies"
    if not outcome.errors:
        report.add("notified", task_id=task_id, status=told.status, reason=f"sent: {sent}")
    else:
        report.add("notify_given_up" if given_up else "notify_failed", task_id=task_id, status=told.status,
                   reason=f"{error} (attempt {task.notify_attempts + 1} of {config.max_attempts}; sent: {sent})")
