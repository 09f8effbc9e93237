"""Job reassignment (issue 20, item 7): one row per move of a queued job to another site, by the watch
pass (a long queue with no progress) or by `jedictl jobs reassign`. One new table; nothing else changes.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "job_reassignments",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("job_id", _ID, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("attempt_nr", sa.Integer(), nullable=False),
        sa.Column("from_site", sa.String(64), nullable=False),
        sa.Column("to_site", sa.String(64), nullable=False),
        sa.Column("from_status", sa.String(32), nullable=False),
        sa.Column("to_status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("moved_by", sa.String(128), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("moved_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_reassignments_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_reassignments")),
    )
    op.create_index("ix_job_reassignments_job", "job_reassignments", ["job_id"])
    op.create_index("ix_job_reassignments_task", "job_reassignments", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_job_reassignments_task", table_name="job_reassignments")
    op.drop_index("ix_job_reassignments_job", table_name="job_reassignments")
    op.drop_table("job_reassignments")
