"""Output datasets per site inside an output container (issue 19 item 2; seed 000 "Workflow for
analysis" step 5): `datasets.template_id` ties the dataset a site's jobs write to the output container
(the task's dataset row named `<outDS>/`) it was made from, as JEDI's templateID does.

Tasks refined before this revision keep writing their container row itself (it is not marked per-site).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (nullable, no constraint): no table rebuild on SQLite, where rebuilding `datasets`
    # would cascade to every file record that references it.
    op.add_column("datasets", sa.Column("template_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite >= 3.35), not a batch (see 0008).
    op.execute("ALTER TABLE datasets DROP COLUMN template_id")
