"""Real execution (issue 16): storage endpoints get a URL, sites a batch system, a container
runtime and the reason harvest turned their pilots off, and `pilots` records what `jedictl harvest` submitted.

An endpoint without a URL stays catalog-only (the simulator's world); a site without a batch system
gets no pilots from `harvest` and is served by whatever executor comes to it.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("storage_endpoints") as batch:
        batch.add_column(sa.Column("url", sa.String(1024)))
    with op.batch_alter_table("sites") as batch:
        batch.add_column(sa.Column("batch", sa.JSON()))
        batch.add_column(sa.Column("container_runtime", sa.String(16)))
        batch.add_column(sa.Column("pilots_reason", sa.String(255)))
    op.create_table(
        "pilots",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("site", sa.String(64), sa.ForeignKey("sites.name", name="fk_pilots_site_sites", ondelete="CASCADE"), nullable=False),
        sa.Column("batch_system", sa.String(16), nullable=False),
        sa.Column("batch_id", sa.String(64)),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("submitted_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime()),
        sa.Column("ended_at", sa.DateTime()),
        sa.Column("heartbeat_at", sa.DateTime()),
        sa.Column("executor", sa.String(255)),
        sa.Column("n_jobs", sa.Integer(), nullable=False),
        sa.Column("n_finished", sa.Integer(), nullable=False),
        sa.Column("n_failed", sa.Integer(), nullable=False),
        sa.Column("exit_code", sa.Integer()),
        sa.Column("error", sa.Text()),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_pilots_site_state", "pilots", ["site", "state"])


def downgrade() -> None:
    op.drop_index("ix_pilots_site_state", table_name="pilots")
    op.drop_table("pilots")
    with op.batch_alter_table("sites") as batch:
        batch.drop_column("pilots_reason")
        batch.drop_column("container_runtime")
        batch.drop_column("batch")
    with op.batch_alter_table("storage_endpoints") as batch:
        batch.drop_column("url")
