"""Event service (issue 20, item 1): the `events` table -- event ranges of event-service tasks, one row
per (input record, range), with their own statuses (seed 000 "The JEDI_Events table"). One new table;
event-service jobs are `jobs` rows of kind `es`/`esmerge`/`jumbo` (a plain string column already), so a
store without event-service tasks has an empty table; `tasks.use_jumbo` is the jumbo watchdog's switch.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("dataset_id", _ID, nullable=False),
        sa.Column("file_id", _ID, nullable=False),
        sa.Column("job_id", sa.BigInteger()),
        sa.Column("start_event", sa.BigInteger(), nullable=False),
        sa.Column("end_event", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempt_nr", sa.Integer(), nullable=False),
        sa.Column("max_attempt", sa.Integer(), nullable=False),
        sa.Column("processed_by", sa.BigInteger()),
        sa.Column("is_jumbo", sa.Boolean(), nullable=False),
        sa.Column("output_lfn", sa.String(512)),
        sa.Column("output_size", sa.BigInteger()),
        sa.Column("error_code", sa.Integer()),
        sa.Column("error_diag", sa.Text()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index("ix_events_job_status", "events", ["job_id", "status"])
    op.create_index("ix_events_file", "events", ["file_id"])
    op.create_index("ix_events_task_status", "events", ["task_id", "status"])
    # The jumbo watchdog's switch (JEDI's useJumbo): a plain column, no constraint (SQLite adds none without a rebuild).
    op.add_column("tasks", sa.Column("use_jumbo", sa.Boolean()))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite >= 3.35), not a batch: a batch rebuilds `tasks` on SQLite, and dropping the
    # old table cascades to every table that refers to it (migration 0011; tests/cli/test_db.py).
    op.execute("ALTER TABLE tasks DROP COLUMN use_jumbo")
    op.drop_index("ix_events_task_status", table_name="events")
    op.drop_index("ix_events_file", table_name="events")
    op.drop_index("ix_events_job_status", table_name="events")
    op.drop_table("events")
