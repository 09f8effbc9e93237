"""WMCore splitting for real tasks (issue 21, items 1-2): `task_splitting` (the algorithm a task is split
by, its parameters and the state it keeps between generate passes), `job_masks` (each WMCore job's
event/run/lumi mask) and `catalog_file_parents` (the data catalog's parentage, for include_parents).
Three new tables only; nothing else changes.

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "task_splitting",
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("algorithm", sa.String(64), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_task_splitting_task_id_tasks"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_task_splitting")),
    )
    op.create_table(
        "job_masks",
        sa.Column("job_id", _ID, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("first_event", sa.BigInteger(), nullable=True),
        sa.Column("last_event", sa.BigInteger(), nullable=True),
        sa.Column("first_run", sa.BigInteger(), nullable=True),
        sa.Column("last_run", sa.BigInteger(), nullable=True),
        sa.Column("first_lumi", sa.BigInteger(), nullable=True),
        sa.Column("last_lumi", sa.BigInteger(), nullable=True),
        sa.Column("lumis", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_masks_job_id_jobs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_masks")),
    )
    op.create_index("ix_job_masks_task", "job_masks", ["task_id"])
    op.create_table(
        "catalog_file_parents",
        sa.Column("file_id", _ID, nullable=False),
        sa.Column("parent_lfn", sa.String(512), nullable=False),
        sa.ForeignKeyConstraint(["file_id"], ["catalog_files.id"], name=op.f("fk_catalog_file_parents_file_id_catalog_files"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("file_id", "parent_lfn", name=op.f("pk_catalog_file_parents")),
    )


def downgrade() -> None:
    op.drop_table("catalog_file_parents")
    op.drop_index("ix_job_masks_task", table_name="job_masks")
    op.drop_table("job_masks")
    op.drop_table("task_splitting")
