"""Catalogs: nuclei, storage endpoints, sites, the data catalog, and retry rules.

Revision ID: 0002
Revises: 0001
"""

from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('catalog_datasets',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=512), nullable=False),
    sa.Column('scope', sa.String(length=64), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_catalog_datasets')),
    sa.UniqueConstraint('name', name=op.f('uq_catalog_datasets_name'))
    )
    op.create_table('nuclei',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('cloud', sa.String(length=64), nullable=True),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_nuclei'))
    )
    op.create_table('retry_rules',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('error_source', sa.String(length=32), nullable=False),
    sa.Column('error_code', sa.Integer(), nullable=False),
    sa.Column('message_pattern', sa.Text(), nullable=True),
    sa.Column('action', sa.String(length=32), nullable=False),
    sa.Column('parameters', sa.JSON(), nullable=False),
    sa.Column('vo', sa.String(length=32), nullable=True),
    sa.Column('prod_source_label', sa.String(length=32), nullable=True),
    sa.Column('architecture', sa.String(length=256), nullable=True),
    sa.Column('release', sa.String(length=256), nullable=True),
    sa.Column('work_queue', sa.String(length=64), nullable=True),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('expires_at', sa.DateTime(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_retry_rules'))
    )
    with op.batch_alter_table('retry_rules', schema=None) as batch_op:
        batch_op.create_index('ix_retry_rules_error', ['error_source', 'error_code'], unique=False)

    op.create_table('catalog_container_members',
    sa.Column('container_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.ForeignKeyConstraint(['container_id'], ['catalog_datasets.id'], name=op.f('fk_catalog_container_members_container_id_catalog_datasets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['dataset_id'], ['catalog_datasets.id'], name=op.f('fk_catalog_container_members_dataset_id_catalog_datasets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('container_id', 'dataset_id', name=op.f('pk_catalog_container_members'))
    )
    op.create_table('catalog_files',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('scope', sa.String(length=64), nullable=True),
    sa.Column('lfn', sa.String(length=512), nullable=False),
    sa.Column('guid', sa.String(length=64), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('checksum', sa.String(length=64), nullable=True),
    sa.Column('n_events', sa.BigInteger(), nullable=True),
    sa.Column('run', sa.BigInteger(), nullable=True),
    sa.Column('lumi_blocks', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['catalog_datasets.id'], name=op.f('fk_catalog_files_dataset_id_catalog_datasets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_catalog_files')),
    sa.UniqueConstraint('dataset_id', 'lfn', name=op.f('uq_catalog_files_dataset_id_lfn'))
    )
    op.create_table('sites',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('cloud', sa.String(length=64), nullable=True),
    sa.Column('tier', sa.Integer(), nullable=True),
    sa.Column('nucleus', sa.String(length=64), nullable=True),
    sa.Column('core_count', sa.Integer(), nullable=True),
    sa.Column('core_power', sa.Float(), nullable=True),
    sa.Column('min_memory', sa.Integer(), nullable=True),
    sa.Column('max_memory', sa.Integer(), nullable=True),
    sa.Column('min_walltime', sa.Integer(), nullable=True),
    sa.Column('max_walltime', sa.Integer(), nullable=True),
    sa.Column('max_scratch_mb', sa.Integer(), nullable=True),
    sa.Column('processing_types', sa.JSON(), nullable=True),
    sa.Column('excluded_processing_types', sa.JSON(), nullable=True),
    sa.Column('releases', sa.JSON(), nullable=True),
    sa.Column('containers', sa.JSON(), nullable=True),
    sa.Column('max_running', sa.Integer(), nullable=True),
    sa.Column('max_queued', sa.Integer(), nullable=True),
    sa.Column('job_caps', sa.JSON(), nullable=True),
    sa.Column('pilots_active', sa.Boolean(), nullable=False),
    sa.Column('direct_io', sa.Boolean(), nullable=False),
    sa.Column('transferring_limit', sa.Integer(), nullable=True),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['nucleus'], ['nuclei.name'], name=op.f('fk_sites_nucleus_nuclei')),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_sites'))
    )
    op.create_table('storage_endpoints',
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('kind', sa.String(length=8), nullable=False),
    sa.Column('nucleus', sa.String(length=64), nullable=True),
    sa.Column('free_gb', sa.Float(), nullable=False),
    sa.Column('total_gb', sa.Float(), nullable=False),
    sa.Column('blacklisted_read', sa.Boolean(), nullable=False),
    sa.Column('blacklisted_write', sa.Boolean(), nullable=False),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['nucleus'], ['nuclei.name'], name=op.f('fk_storage_endpoints_nucleus_nuclei')),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_storage_endpoints'))
    )
    op.create_table('catalog_file_replicas',
    sa.Column('file_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('endpoint', sa.String(length=128), nullable=False),
    sa.ForeignKeyConstraint(['endpoint'], ['storage_endpoints.name'], name=op.f('fk_catalog_file_replicas_endpoint_storage_endpoints')),
    sa.ForeignKeyConstraint(['file_id'], ['catalog_files.id'], name=op.f('fk_catalog_file_replicas_file_id_catalog_files'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('file_id', 'endpoint', name=op.f('pk_catalog_file_replicas'))
    )
    op.create_table('catalog_replicas',
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('endpoint', sa.String(length=128), nullable=False),
    sa.Column('complete', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['dataset_id'], ['catalog_datasets.id'], name=op.f('fk_catalog_replicas_dataset_id_catalog_datasets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['endpoint'], ['storage_endpoints.name'], name=op.f('fk_catalog_replicas_endpoint_storage_endpoints')),
    sa.PrimaryKeyConstraint('dataset_id', 'endpoint', name=op.f('pk_catalog_replicas'))
    )
    op.create_table('site_storage',
    sa.Column('site', sa.String(length=64), nullable=False),
    sa.Column('endpoint', sa.String(length=128), nullable=False),
    sa.Column('role', sa.String(length=8), nullable=False),
    sa.ForeignKeyConstraint(['endpoint'], ['storage_endpoints.name'], name=op.f('fk_site_storage_endpoint_storage_endpoints')),
    sa.ForeignKeyConstraint(['site'], ['sites.name'], name=op.f('fk_site_storage_site_sites'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('site', 'endpoint', 'role', name=op.f('pk_site_storage'))
    )


def downgrade() -> None:
    op.drop_table('site_storage')
    op.drop_table('catalog_replicas')
    op.drop_table('catalog_file_replicas')
    op.drop_table('storage_endpoints')
    op.drop_table('sites')
    op.drop_table('catalog_files')
    op.drop_table('catalog_container_members')
    with op.batch_alter_table('retry_rules', schema=None) as batch_op:
        batch_op.drop_index('ix_retry_rules_error')

    op.drop_table('retry_rules')
    op.drop_table('nuclei')
    op.drop_table('catalog_datasets')
