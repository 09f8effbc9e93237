"""Periodic tasks (issue 20, item 8; seed 000 "Periodical task execution", HammerCloud-style): a task
template with a schedule that `jedictl periodic instantiate` (and `jedictl run`) turns into tasks when
due, with a cap on the instances still active (docs/periodic-tasks.md)."""
