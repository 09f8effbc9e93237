"""Messages (issue 20, item 9): the ids of the messages `jedictl listen` has acted on, and the outbox of
task status changes waiting to be published. Two new tables only; nothing else changes, so a store that
never configures a broker has two empty tables.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "processed_messages",
        sa.Column("message_id", sa.String(256), nullable=False),
        sa.Column("msg_type", sa.String(32), nullable=False),
        sa.Column("outcome", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text()),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("processed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("message_id", name=op.f("pk_processed_messages")),
    )
    op.create_index("ix_processed_messages_processed_at", "processed_messages", ["processed_at"])
    op.create_table(
        "message_outbox",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("previous_status", sa.String(32)),
        sa.Column("reason", sa.Text()),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.Column("changed_by", sa.String(128), nullable=False),
        sa.Column("lease_owner", sa.String(128)),
        sa.Column("lease_expires_at", sa.DateTime()),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_outbox")),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("message_outbox")
    op.drop_index("ix_processed_messages_processed_at", table_name="processed_messages")
    op.drop_table("processed_messages")
