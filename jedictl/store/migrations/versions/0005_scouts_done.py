"""tasks.scouts_done: the scouts of a task have run (JEDI's postScout).

The feeder and the generator decided "scouting" from the task's status, so a task sent back to
`defined` (incexec, a growing input under run_until_closed) was released the scouts' few chunks again
and ended with part of its input never processed. Scouting happens once per task: this flag is set at
the avalanche. Existing tasks that passed `scouted` get it from their status history.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("scouts_done", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute("UPDATE tasks SET scouts_done = TRUE WHERE EXISTS (SELECT 1 FROM task_status_history h "
               "WHERE h.task_id = tasks.id AND h.status = 'scouted')")


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("scouts_done")
