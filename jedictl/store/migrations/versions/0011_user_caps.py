"""Per-user caps (issue 19 item 4): what holds a throttled task. The watchdog's backoff for failing input
leaves `throttle_reason` NULL (released when its wait ends); a task throttled because its user's input
waiting to be staged from tape or transferred is over the limit says `prestaging` or `transfer`, and
is released when that backlog falls back under the limit (engine.shares.user_caps).

Jobs throttled by a user's running-jobs cap are told apart by their `sub_status` (`user_cap`), a column
jobs already have: no change to `jobs`.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("throttle_reason", sa.String(16)))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), not a batch: a batch rebuilds `tasks` on SQLite,
    # and dropping the old table cascades to every row that references a task (datasets, jobs ...).
    op.execute("ALTER TABLE tasks DROP COLUMN throttle_reason")
