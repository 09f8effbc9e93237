"""CernVM-FS (issue 19, item 7): a site says whether its worker nodes mount /cvmfs (PanDA's queue
attribute `is_cvmfs`), and a catalog dataset may be resident on cvmfs -- the directory its files are
read from, with no replica and no stage-in (docs/data-catalog.md, docs/sites.md).

Sites imported before this revision have no cvmfs until an import says so: a job reading a cvmfs
dataset is never sent to a site nobody said can read it.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sites", sa.Column("cvmfs", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("catalog_datasets", sa.Column("cvmfs_path", sa.String(1024)))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), not a batch: a batch rebuilds the table on
    # SQLite, and dropping the old one cascades to the rows that reference it (site_storage, pilots;
    # catalog files, replicas and container members).
    op.execute("ALTER TABLE catalog_datasets DROP COLUMN cvmfs_path")
    op.execute("ALTER TABLE sites DROP COLUMN cvmfs")
