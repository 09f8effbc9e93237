"""An index on `datasets.name` (issue 18): the refiner and the submission check look every output name up
(`store.datasets.output_owners`) and recovery reads datasets by name; without the index each lookup scans
the whole table, a cost that grows with the store. Measured on PostgreSQL (2,000 one-file tasks, load 5-8):
refine took 109.4 s without it and 104.7 s with it (client CPU 29.6 s and 25.9 s) -- at that size the
lookups are not what limits refine; the index keeps them from growing with the store's datasets.
One index only; nothing else changes.

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
