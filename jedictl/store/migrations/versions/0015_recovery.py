"""Lost-file recovery (issue 20, item 2; seed 000 "Lost file recovery"): a catalog file's availability
(Rucio's: `available`, or `lost` once declared gone), the recovery tasks `jedictl recover-lost` makes and
the lost files each makes again. Existing catalog files are all available.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # A plain ALTER TABLE ... ADD COLUMN on both backends: a batch would rebuild catalog_files on SQLite,
    # and dropping the old table cascades to its replicas.
    op.add_column("catalog_files", sa.Column("availability", sa.String(16), nullable=False, server_default="available"))
    op.create_table(
        "recoveries",
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("original_task_id", _ID, nullable=False),
        sa.Column("dataset_name", sa.String(512), nullable=False),
        sa.Column("requested_by", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_recoveries_task_id_tasks"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["original_task_id"], ["tasks.id"], name=op.f("fk_recoveries_original_task_id_tasks")),
        sa.PrimaryKeyConstraint("task_id", name=op.f("pk_recoveries")),
    )
    op.create_index("ix_recoveries_original_task_id", "recoveries", ["original_task_id"])
    op.create_table(
        "recovered_files",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("task_id", _ID, nullable=False),
        sa.Column("dataset_name", sa.String(512), nullable=False),
        sa.Column("lfn", sa.String(512), nullable=False),
        sa.Column("stream_name", sa.String(64), nullable=False),
        sa.Column("original_job_id", sa.BigInteger(), nullable=False),
        sa.Column("original_record_id", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], name=op.f("fk_recovered_files_task_id_tasks"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recovered_files")),
        sa.UniqueConstraint("task_id", "dataset_name", "lfn", name=op.f("uq_recovered_files_task_id_dataset_name_lfn")),
    )
    op.create_index("ix_recovered_files_name", "recovered_files", ["dataset_name", "lfn"])


def downgrade() -> None:
    op.drop_index("ix_recovered_files_name", table_name="recovered_files")
    op.drop_table("recovered_files")
    op.drop_index("ix_recoveries_original_task_id", table_name="recoveries")
    op.drop_table("recoveries")
    op.execute("ALTER TABLE catalog_files DROP COLUMN availability")
