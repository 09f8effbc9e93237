"""The network matrix (issue 19, item 6): files queued, FTS throughput and CRIC closeness between sites
and nuclei, which job brokerage turns into its network weight. A new table only: an upgraded store has
no links, and brokerage without links weighs sites as before.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "network_matrix",
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("destination", sa.String(64), nullable=False),
        sa.Column("queued", sa.Integer()),
        sa.Column("mbps_1h", sa.Float()),
        sa.Column("mbps_1d", sa.Float()),
        sa.Column("mbps_1w", sa.Float()),
        sa.Column("closeness", sa.Integer()),
        sa.Column("blocked", sa.Boolean(), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("source", "destination", name=op.f("pk_network_matrix")),
    )


def downgrade() -> None:
    op.drop_table("network_matrix")
