"""`jedictl listen`: JEDI's Message Processor -- messages from an AMQP broker turned into actions
(docs/messages.md)."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer

from jedictl.commands._common import context


def listen(
    ctx: typer.Context,
    broker: Annotated[Optional[str], typer.Option("--broker", metavar="URL", help="AMQP URL of the broker, amqp://USER:PASSWORD@HOST:PORT/VHOST (default: messages.broker_url).")] = None,
    queue: Annotated[Optional[str], typer.Option("--queue", metavar="NAME", help="Queue to consume (default: messages.queue).")] = None,
    once: Annotated[bool, typer.Option("--once", help="Handle the messages waiting now, publish the waiting task events, and exit (for cron).")] = False,
    max_messages: Annotated[Optional[int], typer.Option("--max-messages", metavar="N", min=1, help="Exit after N messages (waiting for them unless --once).")] = None,
) -> None:
    """Consume messages from the broker and act on each: feed, command, report.

    dataset_closed and files_added update the data catalog and feed the tasks that read the dataset
    now; feed_task feeds one task now; task_command kills, finishes, retries, pauses, resumes, ...
    a task with the checks and the record of `jedictl task`; job_reports goes the way of `jobs
    report`. A message is acknowledged only once its action has committed, and a redelivered one does
    nothing twice; a malformed one goes to the dead-letter queue with the reason, and the listener
    goes on. While the queue is empty, the task events waiting in the outbox are published. Runs until
    interrupted, or with --once until the queue is empty. Exit 1 when an action failed (the message
    is tried again).
    """
    import dataclasses

    from jedictl.errors import BadInput

    app = context(ctx)
    from jedictl.engine.messages.broker import check_url

    url = broker or app.settings.messages.broker_url
    if not url:
        raise BadInput("no broker to listen to: give --broker URL or set messages.broker_url", "--broker")
    check_url(url, "--broker" if broker else "messages.broker_url")
    if queue is not None and not queue.strip():
        raise BadInput("is empty", "--queue")
    # The broker given on the line is the broker for everything this process does: the task events of
    # the status changes its messages cause are queued for it too (app.store() reads the setting).
    messages = dataclasses.replace(app.settings.messages, broker_url=url, queue=queue or app.settings.messages.queue)
    app.loaded = dataclasses.replace(app.loaded, settings=dataclasses.replace(app.settings, messages=messages),
                                     sources={**app.loaded.sources, **({"messages.broker_url": "flag"} if broker else {}),
                                              **({"messages.queue": "flag"} if queue else {})})
    from jedictl.commands._agent import check_metrics_file, record_passes, stoppable
    from jedictl.engine.agent import PassReport
    from jedictl.engine.messages.broker import Broker
    from jedictl.engine.messages.listener import Listener

    check_metrics_file(app)
    store = app.store()
    connection = Broker(url, messages)
    errors = 0
    try:
        with stoppable(app):  # SIGINT/SIGTERM: a message in hand goes back to the queue, leases are given back
            listener = Listener(store, app.settings, connection, app.owner, app.clock.now, messages.queue)
            listener.forget_old()
            left = max_messages
            while True:
                started = time.monotonic()
                report = PassReport("listen")
                handled = listener.take(report, left)
                listener.publish(report)
                if left is not None:
                    left -= handled
                if handled or once or report.counts.get("published"):
                    errors += record_passes(app, [(report, time.monotonic() - started)])
                if once or left == 0:
                    break
                if not handled:
                    listener.forget_old()
                    connection.sleep(messages.poll_seconds)
    finally:
        connection.close()
    if errors:
        raise typer.Exit(1)
