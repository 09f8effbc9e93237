"""The tables of the whole model (JEDI's tables plus the catalogs PanDA gets from elsewhere).

Conventions:
- Ids alias SQLite's rowid (`ID`) and are BIGSERIAL on PostgreSQL, so a job id can be bulk-fetched from
  its sequence instead of `INSERT ... RETURNING` (performance.md, pitfall 1).
- Times are naive UTC (`jedictl.clock`). No timestamp doubles as a flag: leases, waits and throttling have
  their own columns (`lease_owner`/`lease_expires_at`, `wait_until`, `num_throttled`).
- Typed options are JSON validated by `jedictl.engine.task.options`; the PanDA `splitRule` string is only an
  export format.
- Hot bulk columns (`files.job_id`, `job_files.file_id`) carry no foreign key: the constraint check
  would be paid per row on the feeder/generator paths and the engine writes them in the same
  transaction as the rows they point to.

Changing anything here needs an Alembic revision in `migrations/versions`; a test checks that the
migrations produce exactly these tables.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    func,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# Constraint names are needed so SQLite batch migrations can drop and recreate them.
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = BigInteger().with_variant(Integer(), "sqlite")
NAME = String(256)
LONG_NAME = String(512)
STATUS = String(32)
TIME = DateTime()


def _id() -> Column:
    return Column("id", ID, primary_key=True, autoincrement=True)


def _lease() -> list[Column]:
    return [Column("lease_owner", String(128)), Column("lease_expires_at", TIME)]


# ---------------------------------------------------------------------------------------------- tasks

tasks = Table(
    "tasks",
    metadata,
    _id(),
    Column("name", NAME, nullable=False),
    Column("user_name", String(128), nullable=False),
    # "user\nname" when uniqueTaskName is on; NULL otherwise (NULLs never collide), so the database
    # itself refuses a concurrent duplicate submission.
    Column("unique_name_key", String(400), unique=True),
    Column("vo", String(32), nullable=False),
    Column("prod_source_label", String(32), nullable=False),
    Column("task_type", String(64), nullable=False),
    Column("processing_type", String(64)),
    Column("working_group", String(64)),
    Column("country_group", String(32)),
    Column("campaign", String(64)),
    Column("req_id", BigInteger),
    Column("status", STATUS, nullable=False),
    Column("old_status", STATUS),
    Column("error_dialog", Text),
    Column("task_priority", Integer, nullable=False, default=0),
    Column("current_priority", Integer, nullable=False, default=0),
    Column("parent_id", ID, ForeignKey("tasks.id")),
    Column("work_queue", String(64)),
    Column("gshare", String(64)),
    Column("resource_type", String(32)),
    Column("cloud", String(64)),
    Column("site", String(256)),
    Column("nucleus", String(64)),
    # Resource model: requested by the user, then refined by scouts (finalize).
    Column("core_count", Integer),
    Column("ram_count", Integer),
    Column("ram_unit", String(32)),
    Column("base_ram_count", Integer),
    Column("walltime", Integer),
    Column("walltime_unit", String(32)),
    Column("base_walltime", Integer),
    Column("cpu_time", Float),
    Column("cpu_time_unit", String(32)),
    Column("cpu_efficiency", Integer),
    Column("out_disk_count", Float),
    Column("out_disk_unit", String(32)),
    Column("work_disk_count", Integer),
    Column("work_disk_unit", String(32)),
    Column("io_intensity", Float),
    Column("io_intensity_unit", String(32)),
    Column("disk_io", Float),
    # Payload.
    Column("trans_path", String(512)),
    Column("trans_home", String(256)),
    Column("trans_uses", String(256)),
    Column("architecture", String(256)),
    Column("container_name", LONG_NAME),
    Column("source_url", String(1024)),
    Column("request_type", String(64)),
    Column("options", JSON, nullable=False),
    Column("attempt_nr", Integer, nullable=False, default=0),
    Column("num_throttled", Integer),
    # What holds a `throttled` task (migration 0011): NULL -- its input keeps failing (the watchdog's
    # backoff, released at wait_until) -- or its user's backlog of input to move, `prestaging` or
    # `transfer` (engine.shares.user_caps, released when the backlog falls under the limit).
    Column("throttle_reason", String(16)),
    *_lease(),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
    Column("state_changed_at", TIME, nullable=False),
    Column("started_at", TIME),
    Column("ended_at", TIME),
    Column("frozen_at", TIME),  # entered pending (for the pending timeout)
    Column("wait_until", TIME),  # do not act on the task before this (pending re-check, throttling)
    Column("assessed_at", TIME),  # last scout assessment (early avalanche checks)
    # The scouts have run (set at the avalanche; JEDI's postScout): a task sent back to `defined` later
    # (incexec, a growing input) is not scouted again and gets its whole input released.
    Column("scouts_done", Boolean, nullable=False, default=False),
    # The owner told of the end (engine/finalize/notify.py): a task is due when it is final and its
    # `ended_at` is not the one `notified_for` holds, so a task that ends again is told again.
    Column("notified_for", TIME),
    Column("notify_attempts", Integer, nullable=False, default=0),
    Column("notify_channels", String(64)),  # the channels that succeeded for this end (a retry skips them)
    Column("notify_error", String(2000)),
    Column("notify_claimed_until", TIME),  # a pass is sending it: others keep off until then
    # The periodic template this task is an instance of, and the due time it was made for (migration
    # 0014, docs/periodic-tasks.md). No foreign key: removing a template leaves its instances, which
    # keep the id; `check` holds one instance per template and due time (periodic_instances_once).
    Column("periodic_id", ID),
    Column("periodic_due_at", TIME),
    Index("ix_tasks_status_priority", "status", "current_priority"),
    Index("ix_tasks_ended_at", "ended_at"),
    Index("ix_tasks_user_name", "user_name"),
    Index("ix_tasks_parent_id", "parent_id"),
    Column("use_jumbo", Boolean),  # jumbo jobs enabled by the jumbo watchdog (JEDI useJumbo; migration 0018); NULL: never decided
    Index("ix_tasks_periodic_id", "periodic_id", "periodic_due_at"),
)

task_params = Table(
    "task_params",
    metadata,
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("format", String(16), nullable=False),  # "panda" | "spec"
    Column("document", JSON, nullable=False),  # the submitted document, parsed
    Column("unknown_keys", JSON, nullable=False),  # keys kept but not understood
)

#: The output and log dataset names a task writes, recorded when it is registered: an output dataset
#: belongs to one task, and this answers "who writes it?" with one indexed lookup instead of parsing the
#: documents of every task not refined yet (migration 0006).
task_outputs = Table(
    "task_outputs",
    metadata,
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("name", LONG_NAME, primary_key=True),
    Index("ix_task_outputs_name", "name"),
)

task_status_history = Table(
    "task_status_history",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("status", STATUS, nullable=False),
    Column("previous_status", STATUS),
    Column("reason", Text),
    Column("changed_at", TIME, nullable=False),
    Column("changed_by", String(128), nullable=False),
    Index("ix_task_status_history_task", "task_id", "id"),
)

task_commands = Table(
    "task_commands",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("command", String(32), nullable=False),
    Column("qualifier", String(32)),
    Column("parameters", JSON),
    Column("comment", Text),
    Column("requested_by", String(128), nullable=False),
    Column("requested_at", TIME, nullable=False),
    Column("status", String(16), nullable=False),  # model.CommandStatus
    Column("outcome", Text),
    Column("executed_at", TIME),
    Column("executed_by", String(128)),
    Index("ix_task_commands_status", "status", "id"),
    Index("ix_task_commands_task", "task_id", "id"),
)

# ------------------------------------------------------------------------------------------ datasets

datasets = Table(
    "datasets",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("name", LONG_NAME, nullable=False),
    Column("container_name", LONG_NAME),
    Column("type", STATUS, nullable=False),  # model.DatasetType
    Column("status", STATUS, nullable=False),
    Column("state", STATUS),  # model.DatasetState: the catalog's view
    Column("state_checked_at", TIME),
    Column("master_id", ID, ForeignKey("datasets.id")),  # NULL: master; else the master it serves
    Column("provenance_id", ID, ForeignKey("datasets.id")),  # output -> its unmerged twin
    # A site's dataset inside an output container -> the container's row it was made from (JEDI's
    # templateID). No foreign key: added by a plain ALTER TABLE (migration 0010), which SQLite cannot
    # give a constraint without rebuilding the table.
    Column("template_id", ID),
    Column("stream_name", String(64)),
    Column("attributes", JSON, nullable=False),  # engine.datasets.DatasetAttributes
    Column("destination", String(128)),
    Column("storage_token", String(128)),
    Column("site", String(64)),
    Column("n_files", BigInteger, nullable=False, default=0),
    Column("n_files_to_be_used", BigInteger, nullable=False, default=0),
    Column("n_files_used", BigInteger, nullable=False, default=0),
    Column("n_files_finished", BigInteger, nullable=False, default=0),
    Column("n_files_failed", BigInteger, nullable=False, default=0),
    Column("n_files_on_hold", BigInteger, nullable=False, default=0),
    Column("n_files_missing", BigInteger, nullable=False, default=0),
    Column("n_events", BigInteger, nullable=False, default=0),
    Column("n_events_to_be_used", BigInteger, nullable=False, default=0),
    Column("n_events_used", BigInteger, nullable=False, default=0),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
    Index("ix_datasets_task", "task_id", "type"),
    Index("ix_datasets_name", "name"),  # output names looked up at refine and submit (migration 0022)
)

# JEDI's dataset contents: one row per file (or per event range of a file) per dataset of a task.
files = Table(
    "files",
    metadata,
    _id(),
    Column("task_id", ID, nullable=False),
    Column("dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("lfn", LONG_NAME, nullable=False),
    Column("guid", String(64)),
    Column("scope", String(64)),
    Column("size", BigInteger),
    Column("checksum", String(64)),
    Column("type", STATUS, nullable=False),
    Column("status", STATUS, nullable=False),
    Column("attempt_nr", Integer, nullable=False, default=0),
    Column("max_attempt", Integer),
    Column("failed_attempt", Integer, nullable=False, default=0),
    Column("max_failure", Integer),
    Column("keep_track", Boolean, nullable=False, default=True),
    Column("n_events", BigInteger),
    Column("start_event", BigInteger),
    Column("end_event", BigInteger),
    Column("first_event", BigInteger),
    Column("boundary_id", BigInteger),
    Column("lumi_block_nr", BigInteger),
    Column("job_id", BigInteger),  # the job using it (input) -- no FK, see module docstring
    Column("out_job_id", BigInteger),  # the job that produced it (output)
    Column("ram_count", Integer),  # per-file RAM override from the retry module
    Column("created_at", TIME, nullable=False),
    Column("last_attempt_at", TIME),
    Index("ix_files_dataset_status", "dataset_id", "status", "id"),
    Index("ix_files_task", "task_id"),  # no status: status changes are the hot path (migration 0004)
)
# JEDI's feeder key (lfn, start, end): a file or event range is recorded once per dataset, enforced by
# the database so that even racing feeders cannot duplicate it (NULL ranges compare as -1).
FILE_KEY_INDEX = Index(
    "uq_files_key", files.c.dataset_id, files.c.lfn, func.coalesce(files.c.start_event, -1), func.coalesce(files.c.end_event, -1),
    unique=True,
)

output_templates = Table(
    "output_templates",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("filename_template", LONG_NAME, nullable=False),
    Column("serial_nr", BigInteger, nullable=False, default=1),  # the next serial number to hand out
    Column("max_serial_nr", BigInteger),
    Column("stream_name", String(64), nullable=False),
    Column("out_type", STATUS, nullable=False),
    Column("source_name", LONG_NAME),
    Index("ix_output_templates_task", "task_id"),
)

job_param_templates = Table(
    "job_param_templates",
    metadata,
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("kind", String(16), primary_key=True),  # "job" | "merge"
    Column("template", Text, nullable=False),
)

# ---------------------------------------------------------------------------------------------- jobs

jobs = Table(
    "jobs",
    metadata,
    _id(),  # PanDA's PandaID
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("task_job_index", Integer, nullable=False),  # "12.3" is job 3 of task 12
    Column("status", STATUS, nullable=False),
    Column("sub_status", String(80)),
    Column("kind", String(16), nullable=False, default="normal"),  # normal | merge
    Column("is_scout", Boolean, nullable=False, default=False),
    Column("attempt_nr", Integer, nullable=False, default=1),
    Column("max_attempt", Integer),
    Column("assigned_priority", Integer, nullable=False, default=0),
    Column("current_priority", Integer, nullable=False, default=0),
    Column("site", String(64)),
    Column("cloud", String(64)),
    Column("nucleus", String(64)),
    Column("work_queue", String(64)),
    Column("gshare", String(64)),
    Column("resource_type", String(32)),
    Column("prod_source_label", String(32)),
    Column("processing_type", String(64)),
    Column("vo", String(32)),
    Column("working_group", String(64)),
    Column("transformation", String(512)),
    Column("job_parameters", Text),
    Column("architecture", String(256)),
    Column("trans_uses", String(256)),
    Column("trans_home", String(256)),
    Column("container_name", LONG_NAME),
    Column("core_count", Integer),
    Column("min_ram_count", Integer),  # MB, for the whole job
    Column("max_walltime", Integer),  # s
    Column("max_disk_count", Integer),  # MB
    Column("max_cpu_count", BigInteger),
    Column("executor", String(128)),  # who took it with `jobs dispatch`
    Column("command_to_pilot", String(32)),
    Column("error_source", String(32)),
    Column("error_code", Integer),
    Column("error_diag", Text),
    Column("trans_exit_code", Integer),
    Column("wall_time", Float),
    Column("cpu_time", Float),
    Column("max_pss", BigInteger),
    Column("max_rss", BigInteger),
    Column("n_events", BigInteger),
    Column("n_input_files", Integer),
    Column("input_bytes", BigInteger),
    Column("output_bytes", BigInteger),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
    Column("state_changed_at", TIME, nullable=False),
    Column("dispatched_at", TIME),
    Column("started_at", TIME),
    Column("ended_at", TIME),
    Column("heartbeat_at", TIME),
    UniqueConstraint("task_id", "task_job_index"),
    Index("ix_jobs_status_site", "status", "site"),
)

job_files = Table(
    "job_files",
    metadata,
    _id(),
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", ID, nullable=False),
    Column("dataset_id", ID, nullable=False),
    Column("file_id", BigInteger),  # -- no FK, see module docstring
    Column("lfn", LONG_NAME, nullable=False),
    Column("type", STATUS, nullable=False),  # input | pseudo_input | output | log
    Column("attempt_nr", Integer, nullable=False, default=0),
    Column("status", STATUS, nullable=False),
    Column("scope", String(64)),
    Column("guid", String(64)),
    Column("size", BigInteger),
    Column("checksum", String(64)),
    Column("destination", String(128)),
    Index("ix_job_files_job", "job_id"),
    Index("ix_job_files_file", "file_id"),
)

job_retry_history = Table(
    "job_retry_history",
    metadata,
    _id(),
    Column("task_id", ID, nullable=False),
    Column("old_job_id", BigInteger, nullable=False),
    Column("new_job_id", BigInteger, nullable=False),
    Column("relation_type", String(16), nullable=False),  # retry | merge
    Column("origin_job_id", BigInteger),
    Column("created_at", TIME, nullable=False),
    UniqueConstraint("old_job_id", "new_job_id", "relation_type"),
    Index("ix_job_retry_history_task", "task_id"),
)

# ------------------------------------------------------------------------------- queues and shares

work_queues = Table(
    "work_queues",
    metadata,
    _id(),
    Column("name", String(64), nullable=False),
    Column("vo", String(32), nullable=False),
    Column("queue_type", String(32), nullable=False),  # the prodSourceLabel it serves
    Column("kind", String(16), nullable=False),  # normal | partition | sub
    Column("partition_id", ID, ForeignKey("work_queues.id")),
    Column("share", Float),
    Column("queue_order", Integer),
    Column("criteria", Text, nullable=False, default=""),  # parsed by engine.input.expressions, never executed
    Column("variables", JSON),
    Column("stretchable", Boolean, nullable=False, default=False),
    Column("status", String(16), nullable=False, default="active"),
    UniqueConstraint("name", "vo", "queue_type"),
)

global_shares = Table(
    "global_shares",
    metadata,
    _id(),
    Column("name", String(64), nullable=False, unique=True),
    Column("parent_id", ID, ForeignKey("global_shares.id")),
    Column("value", Float, nullable=False, default=0),
    Column("prodsourcelabel", String(256)),
    Column("workinggroup", String(256)),
    Column("campaign", String(256)),
    Column("processingtype", String(256)),
    Column("transpath", String(256)),
    Column("rtype", String(32)),
    Column("vo", String(32)),
    Column("throttled", Boolean, nullable=False, default=True),
    Column("sort_order", Integer, nullable=False, default=0),
)

# ------------------------------------------------------------------------------ resource catalog
# PanDA's schedconfig/CRIC, filled by `jedictl sites import`.

nuclei = Table(
    "nuclei",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("status", String(16), nullable=False, default="active"),
    Column("cloud", String(64)),
    Column("attributes", JSON, nullable=False),
    Column("modified_at", TIME, nullable=False),
)

storage_endpoints = Table(
    "storage_endpoints",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("kind", String(8), nullable=False),  # disk | tape
    Column("nucleus", String(64), ForeignKey("nuclei.name")),
    Column("free_gb", Float, nullable=False, default=0),
    Column("total_gb", Float, nullable=False, default=0),
    Column("blacklisted_read", Boolean, nullable=False, default=False),
    Column("blacklisted_write", Boolean, nullable=False, default=False),
    # Where the endpoint's files are: file:///srv/data/DATADISK (docs/executing.md). None: catalog only,
    # as for the simulator. A replica lives at a deterministic path under it (engine/storage/paths.py).
    Column("url", String(1024)),
    Column("attributes", JSON, nullable=False),
    Column("modified_at", TIME, nullable=False),
)

sites = Table(
    "sites",
    metadata,
    Column("name", String(64), primary_key=True),  # a PanDA queue
    Column("status", String(16), nullable=False),  # online | brokeroff | offline | test
    Column("cloud", String(64)),
    Column("tier", Integer),
    Column("nucleus", String(64), ForeignKey("nuclei.name")),
    Column("core_count", Integer),
    Column("core_power", Float),  # HS06 per core
    Column("min_memory", Integer),  # MB
    Column("max_memory", Integer),
    Column("min_walltime", Integer),  # s
    Column("max_walltime", Integer),
    Column("max_scratch_mb", Integer),
    Column("processing_types", JSON),  # allowed; null = any
    Column("excluded_processing_types", JSON),
    Column("releases", JSON),
    Column("containers", JSON),
    Column("max_running", Integer),
    Column("max_queued", Integer),
    Column("job_caps", JSON),  # per job type: {"managed": {"max_running": .., "max_queued": ..}}
    Column("pilots_active", Boolean, nullable=False, default=True),
    # Why pilots_active is false when `jedictl harvest` turned it off (its pilots kept failing before
    # taking work); None when it was not harvest. Harvest turns back on only what it turned off.
    Column("pilots_reason", String(255)),
    Column("direct_io", Boolean, nullable=False, default=False),
    Column("transferring_limit", Integer),
    # The batch system `jedictl harvest` submits this site's pilots to: {"system": "slurm", ...}
    # (docs/executing.md); None: nobody submits pilots here, executors come on their own.
    Column("batch", JSON),
    Column("container_runtime", String(16)),  # apptainer | docker: the pilot runs a job's container with it
    # Its worker nodes mount CernVM-FS (PanDA's is_cvmfs): it can read cvmfs-resident datasets.
    Column("cvmfs", Boolean, nullable=False, default=False),
    Column("attributes", JSON, nullable=False),
    Column("modified_at", TIME, nullable=False),
)

site_storage = Table(
    "site_storage",
    metadata,
    Column("site", String(64), ForeignKey("sites.name", ondelete="CASCADE"), primary_key=True),
    Column("endpoint", String(128), ForeignKey("storage_endpoints.name"), primary_key=True),
    Column("role", String(8), primary_key=True),  # read | write
)

# The network matrix (PanDA's network weather service and CRIC closeness), filled by `jedictl network
# import`: one row per directed link between two places of the catalog -- a site or a nucleus, by name
# (no foreign key: an end may be either). Job brokerage weighs sites by it (engine/brokerage/network.py).
network_matrix = Table(
    "network_matrix",
    metadata,
    Column("source", String(64), primary_key=True),
    Column("destination", String(64), primary_key=True),
    Column("queued", Integer),  # files queued on the link
    Column("mbps_1h", Float),  # FTS throughput (MB/s) over the last hour, day, week
    Column("mbps_1d", Float),
    Column("mbps_1w", Float),
    Column("closeness", Integer),  # CRIC closeness: 0 best .. 11 worst
    Column("blocked", Boolean, nullable=False, default=False),
    Column("modified_at", TIME, nullable=False),
)

# PanDA Harvester's workers: one row per pilot `jedictl harvest` submitted to a batch system.
pilots = Table(
    "pilots",
    metadata,
    _id(),
    Column("site", String(64), ForeignKey("sites.name", ondelete="CASCADE"), nullable=False),
    Column("batch_system", String(16), nullable=False),  # slurm | local
    Column("batch_id", String(64)),  # the batch system's id (Slurm: 1234 or 1234_7); None until submitted
    Column("state", String(16), nullable=False),  # submitted | running | finished | failed | cancelled | lost
    Column("submitted_at", TIME, nullable=False),
    Column("started_at", TIME),  # the pilot process said it started
    Column("ended_at", TIME),
    Column("heartbeat_at", TIME),  # the pilot process's last sign of life
    Column("executor", String(255)),  # host:pid of the pilot process
    Column("n_jobs", Integer, nullable=False, default=0),  # jobs it took
    Column("n_finished", Integer, nullable=False, default=0),
    Column("n_failed", Integer, nullable=False, default=0),
    Column("exit_code", Integer),
    Column("error", Text),
    Column("modified_at", TIME, nullable=False),
    Index("ix_pilots_site_state", "site", "state"),
)

# ---------------------------------------------------------------------------------- data catalog
# JEDI's DDM (Rucio), filled by `jedictl data import`.

catalog_datasets = Table(
    "catalog_datasets",
    metadata,
    _id(),
    Column("name", LONG_NAME, nullable=False, unique=True),
    Column("scope", String(64)),
    Column("kind", String(16), nullable=False),  # dataset | container
    Column("state", String(16), nullable=False),  # open | closed
    # The cvmfs directory its files are read from (/cvmfs/REPO/...): no replica, no stage-in. None: on storage.
    Column("cvmfs_path", String(1024)),
    Column("attributes", JSON, nullable=False),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
)

catalog_container_members = Table(
    "catalog_container_members",
    metadata,
    Column("container_id", ID, ForeignKey("catalog_datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("dataset_id", ID, ForeignKey("catalog_datasets.id", ondelete="CASCADE"), primary_key=True),
)

catalog_files = Table(
    "catalog_files",
    metadata,
    _id(),
    Column("dataset_id", ID, ForeignKey("catalog_datasets.id", ondelete="CASCADE"), nullable=False),
    Column("scope", String(64)),
    Column("lfn", LONG_NAME, nullable=False),
    Column("guid", String(64)),
    Column("size", BigInteger),
    Column("checksum", String(64)),
    Column("n_events", BigInteger),
    Column("run", BigInteger),
    Column("lumi_blocks", JSON),
    Column("created_at", TIME, nullable=False),
    # Rucio's DID availability (migration 0015): `available`, or `lost` -- declared gone by `data mark-lost`
    # until a job of a recovery task writes it again (docs/recovery.md).
    Column("availability", String(16), nullable=False, server_default="available"),
    UniqueConstraint("dataset_id", "lfn"),
)

catalog_replicas = Table(
    "catalog_replicas",
    metadata,
    Column("dataset_id", ID, ForeignKey("catalog_datasets.id", ondelete="CASCADE"), primary_key=True),
    Column("endpoint", String(128), ForeignKey("storage_endpoints.name"), primary_key=True),
    Column("complete", Boolean, nullable=False, default=True),
)

# Files present at an endpoint whose dataset replica is incomplete.
catalog_file_replicas = Table(
    "catalog_file_replicas",
    metadata,
    Column("file_id", ID, ForeignKey("catalog_files.id", ondelete="CASCADE"), primary_key=True),
    Column("endpoint", String(128), ForeignKey("storage_endpoints.name"), primary_key=True),
)

# --------------------------------------------------------------------------------------- retry rules
# PanDA's retryerrors/retryactions.

retry_rules = Table(
    "retry_rules",
    metadata,
    _id(),
    Column("error_source", String(32), nullable=False),
    Column("error_code", Integer, nullable=False),
    Column("message_pattern", Text),
    Column("action", String(32), nullable=False),
    Column("parameters", JSON, nullable=False),
    Column("vo", String(32)),
    Column("prod_source_label", String(32)),
    Column("architecture", String(256)),
    Column("release", String(256)),
    Column("work_queue", String(64)),
    Column("active", Boolean, nullable=False, default=True),
    Column("description", Text),
    Column("expires_at", TIME),
    Index("ix_retry_rules_error", "error_source", "error_code"),
)

# ------------------------------------------------------------------------------------------ messages
# `jedictl listen` and the task events (docs/messages.md, migration 0013).

#: Every message `jedictl listen` has acted on, by its id: a redelivered message is found here and not
#: acted on again. Written in the action's transaction (task commands, dataset triggers); after the
#: reports' own transactions for job reports, whose guards already make a second report a duplicate.
processed_messages = Table(
    "processed_messages",
    metadata,
    Column("message_id", String(256), primary_key=True),
    Column("msg_type", String(32), nullable=False),
    Column("outcome", STATUS, nullable=False),  # applied | refused | error (not final: tried again when redelivered)
    Column("detail", Text),
    Column("attempts", Integer, nullable=False, default=0),  # failed attempts so far
    Column("received_at", TIME, nullable=False),
    Column("processed_at", TIME, nullable=False),
    Index("ix_processed_messages_processed_at", "processed_at"),
)

#: Task status changes waiting to be published (the transactional outbox): written in the status
#: change's own transaction when a broker is configured, taken by a publisher under a lease, deleted
#: once the broker has confirmed them. AUTOINCREMENT on SQLite: an id is never reused once its row is
#: gone, so the event ids consumers deduplicate by stay unique.
message_outbox = Table(
    "message_outbox",
    metadata,
    _id(),
    Column("task_id", ID, nullable=False),
    Column("status", STATUS, nullable=False),
    Column("previous_status", STATUS),
    Column("reason", Text),
    Column("changed_at", TIME, nullable=False),
    Column("changed_by", String(128), nullable=False),
    *_lease(),
    sqlite_autoincrement=True,
)

# ------------------------------------------------------------------------------------------ periodic
# Periodic tasks (docs/periodic-tasks.md, migration 0014).

#: A task template with a schedule: `jedictl periodic instantiate` (a pass of `jedictl run`) submits its
#: document as a task when `next_due_at` has passed, unless `max_active` of its instances are still
#: active. A pass takes a due time by moving `next_due_at` on with one guarded UPDATE (`WHERE
#: next_due_at = <the time it read>`), so two passes never act on the same due time.
periodic_templates = Table(
    "periodic_templates",
    metadata,
    _id(),
    Column("name", NAME, nullable=False, unique=True),
    Column("user_name", String(128), nullable=False),  # the owner of every instance
    Column("format", String(16), nullable=False),  # "panda" | "spec"
    Column("document", JSON, nullable=False),  # the task document, with ${DUE} where the due time goes
    Column("every_minutes", Integer),  # an interval schedule ...
    Column("cron", String(128)),  # ... or a cron expression (UTC)
    Column("start_at", TIME, nullable=False),  # no due time before this
    Column("max_active", Integer, nullable=False),
    Column("status", STATUS, nullable=False),  # active | paused
    Column("next_due_at", TIME),  # NULL: the schedule has no further time
    Column("last_due_at", TIME),
    Column("last_outcome", STATUS),  # instantiated | capped | refused
    Column("last_reason", Text),
    Column("last_task_id", ID),
    Column("n_instances", Integer, nullable=False, default=0),
    Column("n_capped", Integer, nullable=False, default=0),
    Column("n_refused", Integer, nullable=False, default=0),
    Column("n_missed", Integer, nullable=False, default=0),
    Column("created_at", TIME, nullable=False),
    Column("created_by", String(128), nullable=False),
    Column("modified_at", TIME, nullable=False),
    Index("ix_periodic_templates_status_next_due_at", "status", "next_due_at"),
    # AUTOINCREMENT on SQLite: a removed template's id is never given to a new one, whose instances its
    # old ones (which keep the id) would otherwise seem to be.
    sqlite_autoincrement=True,
)

# ---------------------------------------------------------------------------------------- recovery
# Lost-file recovery (seed 000 "Lost file recovery", docs/recovery.md, migration 0015).

#: A recovery task: a task made by `jedictl recover-lost` to re-run the jobs of `original_task_id` that
#: produced files now lost in `dataset_name`.
recoveries = Table(
    "recoveries",
    metadata,
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("original_task_id", ID, ForeignKey("tasks.id"), nullable=False),
    Column("dataset_name", LONG_NAME, nullable=False),
    Column("requested_by", String(128), nullable=False),
    Column("created_at", TIME, nullable=False),
    Index("ix_recoveries_original_task_id", "original_task_id"),
)

#: The lost files a recovery task makes again: each output (dataset, lfn) of the job that made it, the
#: stream it is written by, and the record of the original task that recorded it (now `lost`).
recovered_files = Table(
    "recovered_files",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_name", LONG_NAME, nullable=False),
    Column("lfn", LONG_NAME, nullable=False),
    Column("stream_name", String(64), nullable=False),
    Column("original_job_id", BigInteger, nullable=False),
    Column("original_record_id", BigInteger, nullable=False),
    UniqueConstraint("task_id", "dataset_name", "lfn"),
    Index("ix_recovered_files_name", "dataset_name", "lfn"),
)

# ------------------------------------------------------------------------------------ post-processing
# What the finalize pass's output check removed from a task's output and log datasets in the data
# catalog (docs/post-processing.md, migration 0016): one row per catalog file removed, so an operator
# sees in `task show` what went and why. Written in the final step's transaction, with the removal.

removed_outputs = Table(
    "removed_outputs",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_name", LONG_NAME, nullable=False),  # the catalog dataset it was removed from
    Column("lfn", LONG_NAME, nullable=False),
    Column("kind", STATUS, nullable=False),  # duplicate | stray | incomplete_log (engine.finalize.post_check)
    Column("guid", String(64)),
    Column("size", BigInteger),
    Column("checksum", String(64)),
    Column("job_id", BigInteger),  # the job (attempt) that wrote it, when the task knows it
    Column("kept_lfn", LONG_NAME),  # a duplicate: the file kept for the same input
    Column("reason", Text, nullable=False),
    Column("removed_at", TIME, nullable=False),
    Column("removed_by", String(128), nullable=False),
    Index("ix_removed_outputs_task", "task_id", "id"),
)

# Subjob operations (docs/subjobs.md, migration 0019).

#: One row per job resubmitted with `jedictl jobs resubmit` (Ganga's `subjob.resubmit()`): the job's
#: primary key, so a job is resubmitted at most once even when two commands race -- the second INSERT
#: fails and that command reports the job as already resubmitted. Written in the transaction that gives
#: the job's input its one more attempt (and reopens an ended task).
job_resubmissions = Table(
    "job_resubmissions",
    metadata,
    Column("job_id", ID, primary_key=True),  # no FK, as files.job_id: the jobs table is the hot path
    Column("task_id", ID, nullable=False),
    Column("job_status", STATUS, nullable=False),  # failed | cancelled | closed, when it was resubmitted
    Column("task_status", STATUS, nullable=False),  # the task's status before (an ended task is reopened)
    Column("n_files", Integer, nullable=False),  # input records given one more attempt
    Column("resubmitted_by", String(128), nullable=False),
    Column("resubmitted_at", TIME, nullable=False),
    Index("ix_job_resubmissions_task", "task_id"),
)

#: Tables of each migration step, in creation order (used by the migrations and their test).
TASK_MODEL_TABLES = [
    tasks, task_params, task_status_history, task_commands, datasets, files, output_templates,
    job_param_templates, jobs, job_files, job_retry_history, work_queues, global_shares, task_outputs, recoveries, recovered_files,
]
CATALOG_TABLES = [
    nuclei, storage_endpoints, sites, site_storage, pilots, catalog_datasets, catalog_container_members,
    catalog_files, catalog_replicas, catalog_file_replicas, retry_rules, network_matrix,
]
MESSAGE_TABLES = [processed_messages, message_outbox]
PERIODIC_TABLES = [periodic_templates]
POST_PROCESSING_TABLES = [removed_outputs]

# Job reassignment (docs/reassignment.md, migration 0017).

#: Every move of a queued job from one site to another: by the watch pass when its site's queue is long
#: and nothing moves there (PanDA's fast rebrokerage), or by `jedictl jobs reassign`. Written in the
#: move's own transaction, so a job's moves form a chain from its first site to its current one
#: (`jedictl check`: reassignments_chain).
job_reassignments = Table(
    "job_reassignments",
    metadata,
    _id(),
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("task_id", ID, nullable=False),
    Column("attempt_nr", Integer, nullable=False),
    Column("from_site", String(64), nullable=False),
    Column("to_site", String(64), nullable=False),
    Column("from_status", STATUS, nullable=False),
    Column("to_status", STATUS, nullable=False),
    Column("reason", Text, nullable=False),
    Column("moved_by", String(128), nullable=False),  # jedictl watch | jedictl jobs reassign (user)
    Column("owner", String(128), nullable=False),  # the process that moved it
    Column("moved_at", TIME, nullable=False),
    Index("ix_job_reassignments_job", "job_id"),
    Index("ix_job_reassignments_task", "task_id"),
)

REASSIGNMENT_TABLES = [job_reassignments]

# Event service (issue 20, item 1; seed 000 "The JEDI_Events table", migration 0018).

#: Event ranges of event-service tasks: one row per (input record, range of its events). `job_id` is
#: the event-service job that holds the range now (PanDA's PandaID column: the job a range is handed
#: to, reattached to the next job when its record is retried); `processed_by` the job whose executor
#: processed it (an event-service or a jumbo job). No foreign keys, as files.job_id: a bulk column.
events = Table(
    "events",
    metadata,
    _id(),
    Column("task_id", ID, nullable=False),
    Column("dataset_id", ID, nullable=False),
    Column("file_id", ID, nullable=False),
    Column("job_id", BigInteger),
    Column("start_event", BigInteger, nullable=False),  # def_min_eventID
    Column("end_event", BigInteger, nullable=False),  # def_max_eventID (inclusive)
    Column("status", STATUS, nullable=False),
    Column("attempt_nr", Integer, nullable=False, default=0),
    Column("max_attempt", Integer, nullable=False),
    Column("processed_by", BigInteger),
    Column("is_jumbo", Boolean, nullable=False, default=False),
    Column("output_lfn", LONG_NAME),  # the pre-merged file the executor wrote for the range
    Column("output_size", BigInteger),
    Column("error_code", Integer),
    Column("error_diag", Text),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
    Index("ix_events_job_status", "job_id", "status"),
    Index("ix_events_file", "file_id"),
    Index("ix_events_task_status", "task_id", "status"),
)

EVENT_TABLES = [events]
TASK_MODEL_TABLES.append(job_resubmissions)  # migration 0019

# Queue layers (issue 21, item 3; seed 002; docs/queue-layers.md, migration 0020).

#: WMCore's WMAgents as jedictl sees them: an agent (one per host or cluster) takes work-queue elements
#: for its sites from the global queue. `max_jobs_per_owner`: its schedd's MAX_JOBS_PER_OWNER -- no
#: element of an owner is pulled once that owner has this many jobs at the agent's sites.
agents = Table(
    "agents",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("max_jobs_per_owner", Integer),  # None: no cap
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
)

#: An agent's resource control (wmagent-resource-control): pending and running thresholds per site and job
#: type (the task's prodSourceLabel), and the site's state for the agent: normal | drain | down.
agent_sites = Table(
    "agent_sites",
    metadata,
    Column("agent", String(64), ForeignKey("agents.name", ondelete="CASCADE"), primary_key=True),
    Column("site", String(64), primary_key=True),  # a sites row when added; no FK, so `sites import --replace` keeps it
    Column("job_type", String(32), primary_key=True),
    Column("pending_threshold", Integer, nullable=False),
    Column("running_threshold", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("modified_at", TIME, nullable=False),
)

#: WMCore's WorkQueue elements: one per input block (a master input dataset row of a task). Available in
#: the global queue; Negotiating (taken by an agent: `agent`, `site` set by one guarded statement) ->
#: Acquired (in the agent's local queue) -> Running (released to `generate`) -> Done | Failed; Canceled
#: when the task was killed or aborted. `n_jobs` is the estimate the slots are charged with.
workqueue_elements = Table(
    "workqueue_elements",
    metadata,
    _id(),
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    Column("dataset_id", ID, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False),
    Column("block", LONG_NAME, nullable=False),
    Column("status", STATUS, nullable=False),
    Column("n_files", Integer, nullable=False),
    Column("n_jobs", Integer, nullable=False),
    Column("possible_sites", JSON, nullable=False),  # sites holding the block (and pile-up), within the task's lists
    Column("agent", String(64)),
    Column("site", String(64)),  # the site the element's jobs were charged to when it was matched
    Column("reason", Text),
    Column("created_at", TIME, nullable=False),
    Column("modified_at", TIME, nullable=False),
    Column("locations_at", TIME, nullable=False),
    UniqueConstraint("task_id", "dataset_id"),
    Index("ix_workqueue_elements_status_agent", "status", "agent"),
)

#: Every status change of an element, with the agent it was for: `check` holds that an element was taken
#: from the global queue by one agent only.
workqueue_history = Table(
    "workqueue_history",
    metadata,
    _id(),
    Column("element_id", ID, ForeignKey("workqueue_elements.id", ondelete="CASCADE"), nullable=False),
    Column("from_status", STATUS),
    Column("to_status", STATUS, nullable=False),
    Column("agent", String(64)),
    Column("owner", String(128), nullable=False),  # the process
    Column("changed_at", TIME, nullable=False),
    Index("ix_workqueue_history_element", "element_id"),
)

QUEUE_LAYER_TABLES = [agents, agent_sites, workqueue_elements, workqueue_history]
TASK_MODEL_TABLES.extend(QUEUE_LAYER_TABLES)  # migration 0020
# WMCore splitting for real tasks (docs/splitting.md "WMCore splitting for real tasks", migration 0021).

#: The WMCore algorithm a task is split by (its spec's `splitting` block) with its WMCore-named
#: parameters as given, and what the algorithm keeps between generate passes (Harvest: when its last
#: job was made). No row: the task is split by JEDI's rules.
task_splitting = Table(
    "task_splitting",
    metadata,
    Column("task_id", ID, ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    Column("algorithm", String(64), nullable=False),
    Column("params", JSON, nullable=False),
    Column("state", JSON),
    Column("updated_at", TIME),
)

#: A WMCore job's mask (WMCore's Mask: FirstEvent/LastEvent, FirstLumi/LastLumi, FirstRun/LastRun and
#: the run -> lumi ranges it processes); one row per job of a WMCore-split task that has a mask.
job_masks = Table(
    "job_masks",
    metadata,
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("task_id", ID, nullable=False),
    Column("first_event", BigInteger),
    Column("last_event", BigInteger),
    Column("first_run", BigInteger),
    Column("last_run", BigInteger),
    Column("first_lumi", BigInteger),
    Column("last_lumi", BigInteger),
    Column("lumis", JSON),  # {"run": [[first, last], ...]}
    Index("ix_job_masks_task", "task_id"),
)

#: Parentage in the data catalog (Rucio/DBS file parents): a file and the LFN of each file it was made from.
catalog_file_parents = Table(
    "catalog_file_parents",
    metadata,
    Column("file_id", ID, ForeignKey("catalog_files.id", ondelete="CASCADE"), primary_key=True),
    Column("parent_lfn", LONG_NAME, primary_key=True),
)

WMCORE_TABLES = [task_splitting, job_masks, catalog_file_parents]
