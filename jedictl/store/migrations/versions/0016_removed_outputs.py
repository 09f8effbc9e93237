"""removed_outputs: what the finalize pass's output check removed from a task's output and log datasets
in the data catalog (issue 20, item 5; docs/post-processing.md) -- duplicates written by earlier
attempts, files no finished job produced, log entries with no replica -- one row per file, with why.
A new table only: existing stores get an empty one.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "removed_outputs",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("task_id", ID, nullable=False),
        sa.Column("dataset_name", sa.String(512), nullable=False),
        sa.Column("lfn", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("guid", sa.String(64)),
        sa.Column("size", sa.BigInteger()),
        sa.Column("checksum", sa.String(64)),
        sa.Column("job_id", sa.BigInteger()),
        sa.Column("kept_lfn", sa.String(512)),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("removed_at", sa.DateTime(), nullable=False),
        sa.Column("removed_by", sa.String(128), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_removed_outputs_task_id_tasks"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_removed_outputs")),
    )
    op.create_index("ix_removed_outputs_task", "removed_outputs", ["task_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_removed_outputs_task", table_name="removed_outputs")
    op.drop_table("removed_outputs")
