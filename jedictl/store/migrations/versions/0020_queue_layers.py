"""Queue layers (issue 21, item 3; seed 002; docs/queue-layers.md): WMCore's WorkQueue as new tables only --
`agents` and their resource control `agent_sites`, `workqueue_elements` (one per input block) and their
`workqueue_history`. Nothing else changes.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("max_jobs_per_owner", sa.Integer()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_agents")),
    )
    op.create_table(
        "agent_sites",
        sa.Column("agent", sa.String(64), nullable=False),
        sa.Column("site", sa.String(64), nullable=False),
        sa.Column("job_type", sa.String(32), nullable=False),
        sa.Column("pending_threshold", sa.Integer(), nullable=False),
        sa.Column("running_threshold", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agents.name"], name=op.f("fk_agent_sites_agent_agents"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent", "site", "job_type", name=op.f("pk_agent_sites")),
    )
    op.create_table(
        "workqueue_elements",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("dataset_id", _ID, nullable=False),
        sa.Column("block", sa.String(512), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("n_files", sa.Integer(), nullable=False),
        sa.Column("n_jobs", sa.Integer(), nullable=False),
        sa.Column("possible_sites", sa.JSON(), nullable=False),
        sa.Column("agent", sa.String(64)),
        sa.Column("site", sa.String(64)),
        sa.Column("reason", sa.Text()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("modified_at", sa.DateTime(), nullable=False),
        sa.Column("locations_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_workqueue_elements_task_id_tasks"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], name=op.f("fk_workqueue_elements_dataset_id_datasets"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workqueue_elements")),
        sa.UniqueConstraint("task_id", "dataset_id", name=op.f("uq_workqueue_elements_task_id_dataset_id")),
    )
    op.create_index("ix_workqueue_elements_status_agent", "workqueue_elements", ["status", "agent"])
    op.create_table(
        "workqueue_history",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("element_id", _ID, nullable=False),
        sa.Column("from_status", sa.String(32)),
        sa.Column("to_status", sa.String(32), nullable=False),
        sa.Column("agent", sa.String(64)),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("changed_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["element_id"], ["workqueue_elements.id"], name=op.f("fk_workqueue_history_element_id_workqueue_elements"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workqueue_history")),
    )
    op.create_index("ix_workqueue_history_element", "workqueue_history", ["element_id"])


def downgrade() -> None:
    op.drop_index("ix_workqueue_history_element", table_name="workqueue_history")
    op.drop_table("workqueue_history")
    op.drop_index("ix_workqueue_elements_status_agent", table_name="workqueue_elements")
    op.drop_table("workqueue_elements")
    op.drop_table("agent_sites")
    op.drop_table("agents")
