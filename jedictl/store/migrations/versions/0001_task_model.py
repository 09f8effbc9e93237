"""Task model: tasks, parameters, history, commands, datasets, files, templates, jobs, queues, shares.

Revision ID: 0001
Revises: None
"""

from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('global_shares',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('parent_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('prodsourcelabel', sa.String(length=256), nullable=True),
    sa.Column('workinggroup', sa.String(length=256), nullable=True),
    sa.Column('campaign', sa.String(length=256), nullable=True),
    sa.Column('processingtype', sa.String(length=256), nullable=True),
    sa.Column('transpath', sa.String(length=256), nullable=True),
    sa.Column('rtype', sa.String(length=32), nullable=True),
    sa.Column('vo', sa.String(length=32), nullable=True),
    sa.Column('throttled', sa.Boolean(), nullable=False),
    sa.Column('sort_order', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['parent_id'], ['global_shares.id'], name=op.f('fk_global_shares_parent_id_global_shares')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_global_shares')),
    sa.UniqueConstraint('name', name=op.f('uq_global_shares_name'))
    )
    op.create_table('job_retry_history',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('old_job_id', sa.BigInteger(), nullable=False),
    sa.Column('new_job_id', sa.BigInteger(), nullable=False),
    sa.Column('relation_type', sa.String(length=16), nullable=False),
    sa.Column('origin_job_id', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_retry_history')),
    sa.UniqueConstraint('old_job_id', 'new_job_id', 'relation_type', name=op.f('uq_job_retry_history_old_job_id_new_job_id_relation_type'))
    )
    with op.batch_alter_table('job_retry_history', schema=None) as batch_op:
        batch_op.create_index('ix_job_retry_history_task', ['task_id'], unique=False)

    op.create_table('tasks',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=256), nullable=False),
    sa.Column('user_name', sa.String(length=128), nullable=False),
    sa.Column('unique_name_key', sa.String(length=400), nullable=True),
    sa.Column('vo', sa.String(length=32), nullable=False),
    sa.Column('prod_source_label', sa.String(length=32), nullable=False),
    sa.Column('task_type', sa.String(length=64), nullable=False),
    sa.Column('processing_type', sa.String(length=64), nullable=True),
    sa.Column('working_group', sa.String(length=64), nullable=True),
    sa.Column('country_group', sa.String(length=32), nullable=True),
    sa.Column('campaign', sa.String(length=64), nullable=True),
    sa.Column('req_id', sa.BigInteger(), nullable=True),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('old_status', sa.String(length=32), nullable=True),
    sa.Column('error_dialog', sa.Text(), nullable=True),
    sa.Column('task_priority', sa.Integer(), nullable=False),
    sa.Column('current_priority', sa.Integer(), nullable=False),
    sa.Column('parent_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('work_queue', sa.String(length=64), nullable=True),
    sa.Column('gshare', sa.String(length=64), nullable=True),
    sa.Column('resource_type', sa.String(length=32), nullable=True),
    sa.Column('cloud', sa.String(length=64), nullable=True),
    sa.Column('site', sa.String(length=256), nullable=True),
    sa.Column('nucleus', sa.String(length=64), nullable=True),
    sa.Column('core_count', sa.Integer(), nullable=True),
    sa.Column('ram_count', sa.Integer(), nullable=True),
    sa.Column('ram_unit', sa.String(length=32), nullable=True),
    sa.Column('base_ram_count', sa.Integer(), nullable=True),
    sa.Column('walltime', sa.Integer(), nullable=True),
    sa.Column('walltime_unit', sa.String(length=32), nullable=True),
    sa.Column('base_walltime', sa.Integer(), nullable=True),
    sa.Column('cpu_time', sa.Float(), nullable=True),
    sa.Column('cpu_time_unit', sa.String(length=32), nullable=True),
    sa.Column('cpu_efficiency', sa.Integer(), nullable=True),
    sa.Column('out_disk_count', sa.Float(), nullable=True),
    sa.Column('out_disk_unit', sa.String(length=32), nullable=True),
    sa.Column('work_disk_count', sa.Integer(), nullable=True),
    sa.Column('work_disk_unit', sa.String(length=32), nullable=True),
    sa.Column('io_intensity', sa.Float(), nullable=True),
    sa.Column('io_intensity_unit', sa.String(length=32), nullable=True),
    sa.Column('disk_io', sa.Float(), nullable=True),
    sa.Column('trans_path', sa.String(length=512), nullable=True),
    sa.Column('trans_home', sa.String(length=256), nullable=True),
    sa.Column('trans_uses', sa.String(length=256), nullable=True),
    sa.Column('architecture', sa.String(length=256), nullable=True),
    sa.Column('container_name', sa.String(length=512), nullable=True),
    sa.Column('source_url', sa.String(length=1024), nullable=True),
    sa.Column('request_type', sa.String(length=64), nullable=True),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('attempt_nr', sa.Integer(), nullable=False),
    sa.Column('num_throttled', sa.Integer(), nullable=True),
    sa.Column('lease_owner', sa.String(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.Column('state_changed_at', sa.DateTime(), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('ended_at', sa.DateTime(), nullable=True),
    sa.Column('frozen_at', sa.DateTime(), nullable=True),
    sa.Column('wait_until', sa.DateTime(), nullable=True),
    sa.Column('assessed_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['parent_id'], ['tasks.id'], name=op.f('fk_tasks_parent_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tasks')),
    sa.UniqueConstraint('unique_name_key', name=op.f('uq_tasks_unique_name_key'))
    )
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.create_index('ix_tasks_parent_id', ['parent_id'], unique=False)
        batch_op.create_index('ix_tasks_status_priority', ['status', 'current_priority'], unique=False)
        batch_op.create_index('ix_tasks_user_name', ['user_name'], unique=False)

    op.create_table('work_queues',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('vo', sa.String(length=32), nullable=False),
    sa.Column('queue_type', sa.String(length=32), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('partition_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('share', sa.Float(), nullable=True),
    sa.Column('queue_order', sa.Integer(), nullable=True),
    sa.Column('criteria', sa.Text(), nullable=False),
    sa.Column('variables', sa.JSON(), nullable=True),
    sa.Column('stretchable', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.ForeignKeyConstraint(['partition_id'], ['work_queues.id'], name=op.f('fk_work_queues_partition_id_work_queues')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_work_queues')),
    sa.UniqueConstraint('name', 'vo', 'queue_type', name=op.f('uq_work_queues_name_vo_queue_type'))
    )
    op.create_table('datasets',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sa.String(length=512), nullable=False),
    sa.Column('container_name', sa.String(length=512), nullable=True),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('state', sa.String(length=32), nullable=True),
    sa.Column('state_checked_at', sa.DateTime(), nullable=True),
    sa.Column('master_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('provenance_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('stream_name', sa.String(length=64), nullable=True),
    sa.Column('attributes', sa.JSON(), nullable=False),
    sa.Column('destination', sa.String(length=128), nullable=True),
    sa.Column('storage_token', sa.String(length=128), nullable=True),
    sa.Column('site', sa.String(length=64), nullable=True),
    sa.Column('n_files', sa.BigInteger(), nullable=False),
    sa.Column('n_files_to_be_used', sa.BigInteger(), nullable=False),
    sa.Column('n_files_used', sa.BigInteger(), nullable=False),
    sa.Column('n_files_finished', sa.BigInteger(), nullable=False),
    sa.Column('n_files_failed', sa.BigInteger(), nullable=False),
    sa.Column('n_files_on_hold', sa.BigInteger(), nullable=False),
    sa.Column('n_files_missing', sa.BigInteger(), nullable=False),
    sa.Column('n_events', sa.BigInteger(), nullable=False),
    sa.Column('n_events_to_be_used', sa.BigInteger(), nullable=False),
    sa.Column('n_events_used', sa.BigInteger(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['master_id'], ['datasets.id'], name=op.f('fk_datasets_master_id_datasets')),
    sa.ForeignKeyConstraint(['provenance_id'], ['datasets.id'], name=op.f('fk_datasets_provenance_id_datasets')),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_datasets_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_datasets'))
    )
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.create_index('ix_datasets_task', ['task_id', 'type'], unique=False)

    op.create_table('job_param_templates',
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('template', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_job_param_templates_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('task_id', 'kind', name=op.f('pk_job_param_templates'))
    )
    op.create_table('jobs',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('task_job_index', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('sub_status', sa.String(length=80), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('is_scout', sa.Boolean(), nullable=False),
    sa.Column('attempt_nr', sa.Integer(), nullable=False),
    sa.Column('max_attempt', sa.Integer(), nullable=True),
    sa.Column('assigned_priority', sa.Integer(), nullable=False),
    sa.Column('current_priority', sa.Integer(), nullable=False),
    sa.Column('site', sa.String(length=64), nullable=True),
    sa.Column('cloud', sa.String(length=64), nullable=True),
    sa.Column('nucleus', sa.String(length=64), nullable=True),
    sa.Column('work_queue', sa.String(length=64), nullable=True),
    sa.Column('gshare', sa.String(length=64), nullable=True),
    sa.Column('resource_type', sa.String(length=32), nullable=True),
    sa.Column('prod_source_label', sa.String(length=32), nullable=True),
    sa.Column('processing_type', sa.String(length=64), nullable=True),
    sa.Column('vo', sa.String(length=32), nullable=True),
    sa.Column('working_group', sa.String(length=64), nullable=True),
    sa.Column('transformation', sa.String(length=512), nullable=True),
    sa.Column('job_parameters', sa.Text(), nullable=True),
    sa.Column('architecture', sa.String(length=256), nullable=True),
    sa.Column('trans_uses', sa.String(length=256), nullable=True),
    sa.Column('trans_home', sa.String(length=256), nullable=True),
    sa.Column('container_name', sa.String(length=512), nullable=True),
    sa.Column('core_count', sa.Integer(), nullable=True),
    sa.Column('min_ram_count', sa.Integer(), nullable=True),
    sa.Column('max_walltime', sa.Integer(), nullable=True),
    sa.Column('max_disk_count', sa.Integer(), nullable=True),
    sa.Column('max_cpu_count', sa.BigInteger(), nullable=True),
    sa.Column('executor', sa.String(length=128), nullable=True),
    sa.Column('command_to_pilot', sa.String(length=32), nullable=True),
    sa.Column('error_source', sa.String(length=32), nullable=True),
    sa.Column('error_code', sa.Integer(), nullable=True),
    sa.Column('error_diag', sa.Text(), nullable=True),
    sa.Column('trans_exit_code', sa.Integer(), nullable=True),
    sa.Column('wall_time', sa.Float(), nullable=True),
    sa.Column('cpu_time', sa.Float(), nullable=True),
    sa.Column('max_pss', sa.BigInteger(), nullable=True),
    sa.Column('max_rss', sa.BigInteger(), nullable=True),
    sa.Column('n_events', sa.BigInteger(), nullable=True),
    sa.Column('n_input_files', sa.Integer(), nullable=True),
    sa.Column('input_bytes', sa.BigInteger(), nullable=True),
    sa.Column('output_bytes', sa.BigInteger(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('modified_at', sa.DateTime(), nullable=False),
    sa.Column('state_changed_at', sa.DateTime(), nullable=False),
    sa.Column('dispatched_at', sa.DateTime(), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=True),
    sa.Column('ended_at', sa.DateTime(), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_jobs_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('task_id', 'task_job_index', name=op.f('uq_jobs_task_id_task_job_index'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status_site', ['status', 'site'], unique=False)

    op.create_table('task_commands',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('command', sa.String(length=32), nullable=False),
    sa.Column('qualifier', sa.String(length=32), nullable=True),
    sa.Column('parameters', sa.JSON(), nullable=True),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('requested_by', sa.String(length=128), nullable=False),
    sa.Column('requested_at', sa.DateTime(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.Column('executed_at', sa.DateTime(), nullable=True),
    sa.Column('executed_by', sa.String(length=128), nullable=True),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_task_commands_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_commands'))
    )
    with op.batch_alter_table('task_commands', schema=None) as batch_op:
        batch_op.create_index('ix_task_commands_status', ['status', 'id'], unique=False)
        batch_op.create_index('ix_task_commands_task', ['task_id', 'id'], unique=False)

    op.create_table('task_params',
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('format', sa.String(length=16), nullable=False),
    sa.Column('document', sa.JSON(), nullable=False),
    sa.Column('unknown_keys', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_task_params_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('task_id', name=op.f('pk_task_params'))
    )
    op.create_table('task_status_history',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('previous_status', sa.String(length=32), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('changed_at', sa.DateTime(), nullable=False),
    sa.Column('changed_by', sa.String(length=128), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_task_status_history_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_status_history'))
    )
    with op.batch_alter_table('task_status_history', schema=None) as batch_op:
        batch_op.create_index('ix_task_status_history_task', ['task_id', 'id'], unique=False)

    op.create_table('files',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('lfn', sa.String(length=512), nullable=False),
    sa.Column('guid', sa.String(length=64), nullable=True),
    sa.Column('scope', sa.String(length=64), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('checksum', sa.String(length=64), nullable=True),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('attempt_nr', sa.Integer(), nullable=False),
    sa.Column('max_attempt', sa.Integer(), nullable=True),
    sa.Column('failed_attempt', sa.Integer(), nullable=False),
    sa.Column('max_failure', sa.Integer(), nullable=True),
    sa.Column('keep_track', sa.Boolean(), nullable=False),
    sa.Column('n_events', sa.BigInteger(), nullable=True),
    sa.Column('start_event', sa.BigInteger(), nullable=True),
    sa.Column('end_event', sa.BigInteger(), nullable=True),
    sa.Column('first_event', sa.BigInteger(), nullable=True),
    sa.Column('boundary_id', sa.BigInteger(), nullable=True),
    sa.Column('lumi_block_nr', sa.BigInteger(), nullable=True),
    sa.Column('job_id', sa.BigInteger(), nullable=True),
    sa.Column('out_job_id', sa.BigInteger(), nullable=True),
    sa.Column('ram_count', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('last_attempt_at', sa.DateTime(), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_files_dataset_id_datasets'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_files'))
    )
    with op.batch_alter_table('files', schema=None) as batch_op:
        batch_op.create_index('ix_files_dataset_status', ['dataset_id', 'status', 'id'], unique=False)
        batch_op.create_index('ix_files_task_status', ['task_id', 'status'], unique=False)

    op.create_table('job_files',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('job_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('file_id', sa.BigInteger(), nullable=True),
    sa.Column('lfn', sa.String(length=512), nullable=False),
    sa.Column('type', sa.String(length=32), nullable=False),
    sa.Column('attempt_nr', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('scope', sa.String(length=64), nullable=True),
    sa.Column('guid', sa.String(length=64), nullable=True),
    sa.Column('size', sa.BigInteger(), nullable=True),
    sa.Column('checksum', sa.String(length=64), nullable=True),
    sa.Column('destination', sa.String(length=128), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_files_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job_files'))
    )
    with op.batch_alter_table('job_files', schema=None) as batch_op:
        batch_op.create_index('ix_job_files_file', ['file_id'], unique=False)
        batch_op.create_index('ix_job_files_job', ['job_id'], unique=False)

    op.create_table('output_templates',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('task_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('dataset_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('filename_template', sa.String(length=512), nullable=False),
    sa.Column('serial_nr', sa.BigInteger(), nullable=False),
    sa.Column('max_serial_nr', sa.BigInteger(), nullable=True),
    sa.Column('stream_name', sa.String(length=64), nullable=False),
    sa.Column('out_type', sa.String(length=32), nullable=False),
    sa.Column('source_name', sa.String(length=512), nullable=True),
    sa.ForeignKeyConstraint(['dataset_id'], ['datasets.id'], name=op.f('fk_output_templates_dataset_id_datasets'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_output_templates_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_output_templates'))
    )
    with op.batch_alter_table('output_templates', schema=None) as batch_op:
        batch_op.create_index('ix_output_templates_task', ['task_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('output_templates', schema=None) as batch_op:
        batch_op.drop_index('ix_output_templates_task')

    op.drop_table('output_templates')
    with op.batch_alter_table('job_files', schema=None) as batch_op:
        batch_op.drop_index('ix_job_files_job')
        batch_op.drop_index('ix_job_files_file')

    op.drop_table('job_files')
    with op.batch_alter_table('files', schema=None) as batch_op:
        batch_op.drop_index('ix_files_task_status')
        batch_op.drop_index('ix_files_dataset_status')

    op.drop_table('files')
    with op.batch_alter_table('task_status_history', schema=None) as batch_op:
        batch_op.drop_index('ix_task_status_history_task')

    op.drop_table('task_status_history')
    op.drop_table('task_params')
    with op.batch_alter_table('task_commands', schema=None) as batch_op:
        batch_op.drop_index('ix_task_commands_task')
        batch_op.drop_index('ix_task_commands_status')

    op.drop_table('task_commands')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_status_site')

    op.drop_table('jobs')
    op.drop_table('job_param_templates')
    with op.batch_alter_table('datasets', schema=None) as batch_op:
        batch_op.drop_index('ix_datasets_task')

    op.drop_table('datasets')
    op.drop_table('work_queues')
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_index('ix_tasks_user_name')
        batch_op.drop_index('ix_tasks_status_priority')
        batch_op.drop_index('ix_tasks_parent_id')

    op.drop_table('tasks')
    with op.batch_alter_table('job_retry_history', schema=None) as batch_op:
        batch_op.drop_index('ix_job_retry_history_task')

    op.drop_table('job_retry_history')
    op.drop_table('global_shares')
