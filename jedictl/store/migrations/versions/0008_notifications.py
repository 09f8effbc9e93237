"""Notifications (issue 20): a task's owner is told when it ends. Five task columns say which end was
notified, how many attempts failed, through which channels, the last error and who is sending now;
an index on `ended_at` bounds the pass's look to the recent ends.

Tasks that ended before this revision count as notified: configuring a channel later mails no old task.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("notified_for", sa.DateTime()))
        batch.add_column(sa.Column("notify_attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("notify_channels", sa.String(64)))
        batch.add_column(sa.Column("notify_error", sa.String(2000)))
        batch.add_column(sa.Column("notify_claimed_until", sa.DateTime()))
        batch.create_index("ix_tasks_ended_at", ["ended_at"])
    op.execute("UPDATE tasks SET notified_for = ended_at WHERE ended_at IS NOT NULL")


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), not a batch: a batch rebuilds `tasks` on SQLite,
    # and dropping the old table cascades to every row that references a task (datasets, jobs ...).
    op.drop_index("ix_tasks_ended_at", table_name="tasks")
    for name in ("notify_claimed_until", "notify_error", "notify_channels", "notify_attempts", "notified_for"):
        op.execute(f"ALTER TABLE tasks DROP COLUMN {name}")
