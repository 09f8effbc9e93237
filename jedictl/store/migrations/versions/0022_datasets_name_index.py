"""An index on `datasets.name` (issue 18): the refiner and the submission check look every output name up
(`store.datasets.output_owners`) and recovery reads datasets by name; without the index each lookup
scanned the whole table, so refining 10,000 tasks on PostgreSQL slowed down with the store's size
(about 6 tasks/s at the end of the bench's 10,000). One index only; nothing else changes.

Revision ID: 0022
Revises: 0021
"""

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_datasets_name", "datasets", ["name"])


def downgrade() -> None:
    op.drop_index("ix_datasets_name", table_name="datasets")
