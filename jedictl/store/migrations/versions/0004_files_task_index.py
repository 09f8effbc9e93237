"""The files' task index without the status column.

Every status change of a record rewrote an entry of (task_id, status); nothing reads files by task and
status (per-task counts go through the task's few datasets and ix_files_dataset_status), so the index
keeps only task_id -- still there for the task foreign key's cascades -- and the generator's claim and
every job report update one index fewer.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_files_task_status", table_name="files")
    op.create_index("ix_files_task", "files", ["task_id"])


def downgrade() -> None:
    op.drop_index("ix_files_task", table_name="files")
    op.create_index("ix_files_task_status", "files", ["task_id", "status"])
