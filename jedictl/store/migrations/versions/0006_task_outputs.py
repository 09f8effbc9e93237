"""task_outputs: the output and log dataset names of each task, written at registration.

Submission refused a task whose output dataset another task writes by parsing the submitted document of
every task not refined yet: a store with 2,000 tasks waiting for the refiner took 0.5 s per submission
(2,000 submissions: 8 minutes). The names are now recorded when a task is registered and looked up by
index. Existing refined tasks get theirs from their datasets; tasks still waiting for the refiner when
the store is upgraded are checked by the refiner, which refuses the second writer of a dataset.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "task_outputs",
        sa.Column("task_id", ID, sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(512), primary_key=True),
    )
    op.create_index("ix_task_outputs_name", "task_outputs", ["name"])
    op.execute("INSERT INTO task_outputs (task_id, name) SELECT DISTINCT task_id, name FROM datasets "
               "WHERE type IN ('output', 'log', 'trn_output', 'trn_log') AND name IS NOT NULL")


def downgrade() -> None:
    op.drop_index("ix_task_outputs_name", table_name="task_outputs")
    op.drop_table("task_outputs")
