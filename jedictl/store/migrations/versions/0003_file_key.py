"""Unique file key per dataset (lfn, start_event, end_event), so no feeder can duplicate a record.

Revision ID: 0003
Revises: 0002
"""

from alembic import op
import sqlalchemy as sa

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "uq_files_key", "files",
        ["dataset_id", "lfn", sa.text("coalesce(start_event, -1)"), sa.text("coalesce(end_event, -1)")],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_files_key", table_name="files")
