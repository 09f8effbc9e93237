"""Periodic tasks (issue 20, item 8): task templates with a schedule, and on each task the template and
due time it is an instance of. A new table and two plain columns of `tasks` (no foreign key: SQLite
adds none without rebuilding `tasks`, and an instance outlives its removed template).

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "periodic_templates",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("every_minutes", sa.Integer()),
        sa.Column("cron", sa.String(128)),
        sa.Column("start_at", sa.DateTime(), nullable=False),
        sa.Column("max_active", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("next_due_at", sa.DateTime()),
        sa.Column("last_due_at", sa.DateTime()),
        sa.Column("last_outcome", sa.String(32)),
        sa.Column("last_reason", sa.Text()),
        sa.Column("last_task_id", _ID),
        sa.Column("n_instances", sa.Integer(), nullable=False),
        sa.Column("n_capped", sa.Integer(), nullable=False),
        sa.Column("n_refused", sa.Integer(), nullable=False),
        sa.Column("n_missed", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("created_by", sa.String(128), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_periodic_templates")),
        sa.UniqueConstraint("name", name=op.f("uq_periodic_templates_name")),
        sqlite_autoincrement=True,  # a removed template's id is never reused: its instances keep it
    )
    op.create_index("ix_periodic_templates_status_next_due_at", "periodic_templates", ["status", "next_due_at"])
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("periodic_id", _ID))
        batch.add_column(sa.Column("periodic_due_at", sa.DateTime()))
    op.create_index("ix_tasks_periodic_id", "tasks", ["periodic_id", "periodic_due_at"])


def downgrade() -> None:
    op.drop_index("ix_tasks_periodic_id", table_name="tasks")
    # Plain DROP COLUMN (SQLite >= 3.35), not a batch: a batch rebuilds `tasks` on SQLite (migration 0011).
    op.execute("ALTER TABLE tasks DROP COLUMN periodic_due_at")
    op.execute("ALTER TABLE tasks DROP COLUMN periodic_id")
    op.drop_index("ix_periodic_templates_status_next_due_at", table_name="periodic_templates")
    op.drop_table("periodic_templates")
