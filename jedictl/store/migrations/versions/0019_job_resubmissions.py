"""Subjob operations (issue 21, item 4): `job_resubmissions`, one row per job resubmitted with
`jedictl jobs resubmit`, keyed by the job so that a job is resubmitted at most once. One new table
only; nothing else changes.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "job_resubmissions",
        sa.Column("job_id", _ID, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("job_status", sa.String(32), nullable=False),
        sa.Column("task_status", sa.String(32), nullable=False),
        sa.Column("n_files", sa.Integer(), nullable=False),
        sa.Column("resubmitted_by", sa.String(128), nullable=False),
        sa.Column("resubmitted_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_resubmissions")),
    )
    op.create_index("ix_job_resubmissions_task", "job_resubmissions", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_job_resubmissions_task", table_name="job_resubmissions")
    op.drop_table("job_resubmissions")
