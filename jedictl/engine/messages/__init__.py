"""JEDI's Message Processor over AMQP (docs/messages.md): `jedictl listen` turns messages from a broker into
actions -- a dataset closed or files added (its tasks fed now), a task command, job reports in bulk --
and task status changes are published for other tools.

formats (pure: what a message says), events (pure: what a task event says), broker (the AMQP
connection: pika, imported only here), actions (one message's action on the store, once), listener (the
consume loop: act, then acknowledge), publisher (the outbox of task events, drained to the broker).
"""
