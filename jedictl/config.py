"""Settings: built-in defaults < config file < environment < command-line flags.

Every agent parameter lives here with JEDI's default and the place in the reference material it comes
from, so policy code receives numbers instead of hiding constants. `load_settings` also records where
each effective value came from, which is what `jedictl config show` prints.

Environment: `JEDICTL_DB`, `JEDICTL_CONFIG`, `JEDICTL_OUTPUT`, `JEDICTL_VERBOSE`, `JEDICTL_NOW`, and any
setting as `JEDICTL_<SECTION>__<KEY>` (e.g. `JEDICTL_WATCHDOG__WAIT_FOR_PICKED_MINUTES=10`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, get_args, get_origin, get_type_hints

import yaml

from jedictl.errors import BadInput

ENV_DB = "JEDICTL_DB"
ENV_CONFIG = "JEDICTL_CONFIG"
ENV_OUTPUT = "JEDICTL_OUTPUT"
ENV_VERBOSE = "JEDICTL_VERBOSE"
ENV_NOW = "JEDICTL_NOW"
ENV_PREFIX = "JEDICTL_"
OUTPUT_FORMATS = ("table", "json", "yaml", "tsv")


def _s(default: Any, help: str, ref: str = "") -> Any:
    """A setting: its default, one line of help, and where JEDI's value comes from."""
    factory = (lambda: list(default)) if isinstance(default, list) else (lambda: dict(default)) if isinstance(default, dict) else None
    metadata = {"help": help, "ref": ref}
    if factory:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class LeaseSettings:
    seconds: int = _s(600, "how long a claimed task stays owned without a heartbeat", "jobgen.lockInterval/10 min locks, §11")


@dataclass(frozen=True)
class RefineSettings:
    limit: int = _s(100, "tasks refined per pass", "")
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "taskrefine: 10 per thread batch")
    default_ram_count: int = _s(2000, "RAM per core (MB) when a task gives none", "GenTaskRefiner default ramCount")
    default_ram_unit: str = _s("MBPerCore", "unit of the default RAM", "GenTaskRefiner")
    default_base_walltime: int = _s(600, "baseWalltime (s) when a task gives none", "extractCommon")
    default_cpu_efficiency: int = _s(90, "cpuEfficiency (%) when a task gives none", "extractCommon")
    memory_compensation: float = _s(0.9, "factor applied to RAM per core before matching resource types", "JobUtils.MEMORY_COMPENSATION")
    analysis_priority: int = _s(1000, "priority of analysis (label user/panda) tasks: their default and, unless privileged, their cap", "insertTaskParamsPanda")
    super_users: list = _s([], "users whose analysis tasks may set any priority (PanDA's 's' privilege)", "seed 000 Special permission")
    super_groups: list = _s([], "working groups whose analysis tasks may set any priority (PanDA's 'g' privilege)", "seed 000 Special permission")


@dataclass(frozen=True)
class FeedSettings:
    limit: int = _s(50, "tasks fed per pass", "")
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "confeeder: 10 tasks per thread batch")
    default_max_attempt: int = _s(3, "file maxAttempt when the task gives none", "ContentsFeeder")
    n_chunks_for_scout: int = _s(10, "chunks released while a task scouts", "ContentsFeeder nChunksForScout")
    n_chunks_to_wait: int = _s(20, "chunks released at once from an open (mutable) input", "split rule NT default")
    check_interval_minutes: int = _s(5, "re-scan interval of open input datasets", "confeeder.checkInterval")
    max_file_records: int = _s(1_000_000_000, "refuse a dataset with more file records than this", "JEDI: 200 000 (raised: jedictl feeds in bulk)")
    seq_number_default: int = _s(10_000, "records of a seq_number dataset when nothing else sizes it", "ContentsFeeder")
    batch_size: int = _s(10_000, "file rows written per statement batch", "performance.md C.4")


@dataclass(frozen=True)
class TaskBrokerSettings:
    disk_threshold_tb: float = _s(100.0, "free space a nucleus must keep after the remaining work", "DISK_THRESHOLD")
    free_disk_cutoff_tb: float = _s(1000.0, "free-space weight saturates here", "FREE_DISK_CUTOFF")
    input_size_threshold_gb: float = _s(1.0, "inputs above this need INPUT_SIZE_FRACTION at the nucleus", "INPUT_SIZE_THRESHOLD")
    input_size_fraction: float = _s(0.10, "fraction of input bytes a nucleus must hold", "INPUT_SIZE_FRACTION")
    input_num_threshold: int = _s(100, "inputs with more files need INPUT_NUM_FRACTION at the nucleus", "INPUT_NUM_THRESHOLD")
    input_num_fraction: float = _s(0.10, "fraction of input files a nucleus must hold", "INPUT_NUM_FRACTION")
    min_io_intensity_with_local_data: float = _s(200.0, "below this IO intensity the locality check may be waived", "MIN_IO_INTENSITY_WITH_LOCAL_DATA")
    min_input_size_with_local_data_gb: float = _s(10000.0, "and below this input size", "MIN_INPUT_SIZE_WITH_LOCAL_DATA")
    max_task_prio_with_local_data: int = _s(800, "tasks at or above this priority skip the locality check", "MAX_TASK_PRIO_WITH_LOCAL_DATA")
    data_location_check_days: int = _s(7, "locality is no longer required after this long in assigning", "DATA_LOCATION_CHECK_PERIOD")
    max_transfer_queue: int = _s(2000, "output files queued to a nucleus before it is skipped", "seed 000 Task brokerage")
    tape_weight: float = _s(0.001, "weight factor when part of the input is only on tape", "AtlasProdTaskBroker")
    default_cpu_time: float = _s(300.0, "cpuTime assumed for remaining work when a task has none", "RW calculation")
    retry_minutes: int = _s(10, "a task no nucleus fits is brokered again after this", "taskbroker.loopCycle 600 s")
    input_files: int = _s(1000, "input files looked at to judge data locality", "")
    limit: int = _s(50, "tasks brokered per pass", "")
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "")


@dataclass(frozen=True)
class BrokerageSettings:
    max_candidates: int = _s(10, "sites kept for a chunk", "AtlasProdJobBroker")
    storage_min_free_gb: float = _s(200.0, "free space an output endpoint needs", "STORAGE_MIN_FREE_SIZE")
    io_intensity_cutoff: float = _s(200.0, "kB/s per core above which input transfers are limited", "IO_INTENSITY_CUTOFF")
    size_cutoff_to_move_input_gb: float = _s(10.0, "IO-intensive tasks skip sites needing more input than this", "SIZE_CUTOFF_TO_MOVE_INPUT")
    num_cutoff_to_move_input: int = _s(100, "or more input files than this", "NUM_CUTOFF_TO_MOVE_INPUT")
    queue_limit_site: int = _s(20, "queued jobs allowed at a site before 2 x running applies", "NQUEUELIMITSITE")
    transferring_limit: int = _s(2000, "transferring jobs allowed when a site sets no limit", "seed 000")
    default_output_size_mb: float = _s(1500.0, "output assumed per job when scratch disk is checked", "InputChunk 1.5 GB")
    scout_priority_floor: int = _s(901, "scout jobs get max(this, task priority + 1)", "JobGenerator")
    bootstrap_max_priority: int = _s(150, "only tasks at or below this priority bootstrap empty sites", "MAX_PRIO_TO_BOOTSTRAP")


@dataclass(frozen=True)
class ThrottleSettings:
    threshold: float = _s(2.0, "queued/running ratio above which a queue is throttled", "THROTTLE_THRESHOLD")
    bunch_min: int = _s(500, "lower bound of a generation bunch", "JobThrottlerBase")
    bunch_max: int = _s(600, "upper bound of a generation bunch", "JobThrottlerBase")
    total_walltime_limit_s: float = _s(50_000_000.0, "remaining walltime above which a full queue throttles", "JobThrottlerBase")
    high_prio_jobs: int = _s(500, "fewer not-running jobs than this let a waiting top-priority task in", "JobThrottlerBase")
    lack_of_jobs_fraction: float = _s(0.9, "below this fraction of the queue limit the queue lacks jobs", "JobThrottlerBase")
    wmcore_priority_overflow: float = _s(0.2, "a job beating all pending priorities may exceed the pending limit by this", "peers.md §1.5")
    limits: dict = _s({}, "per-queue limits, JEDI's keys: NQUEUELIMIT_<share>[_<resource type>], NRUNNINGCAP_..., NQUEUECAP_...", "prod_job_throttler config")


@dataclass(frozen=True)
class GenerateSettings:
    n_tasks: int = _s(50, "tasks taken per pass", "jobgen.nTasks")
    n_files: int = _s(5000, "files claimed per task per pass", "jobgen.nFiles")
    typical_n_files_per_job: int = _s(5, "files per job assumed when a task says nothing", "getTasksToBeProcessed")
    express_priority: int = _s(1500, "tasks at or above this priority form the express lane", "JobUtils.priorityTasksToJumpOver")
    express_ratio: float = _s(0.3, "share of picks given to the express lane", "SUPER_HIGH_PRIO_TASK_RATIO")
    merge_priority: int = _s(5000, "priority of merge jobs", "JobGenerator")
    jobs_per_site_round: int = _s(25, "consecutive jobs given to one site", "JobSplitter")
    scout_jobs_per_site: int = _s(2, "consecutive scout jobs given to one site", "JobSplitter")
    max_files_per_job: int = _s(200, "files per job when the task sets no limit", "InputChunk MF default")
    hard_max_files_per_job: int = _s(1000, "files per job never exceeded", "InputChunk")
    max_files_per_merge_job: int = _s(50, "files per merge job when the task sets no limit", "ZM default")
    max_gb_per_merge_job: float = _s(5.0, "output per merge job when the task sets no limit", "ZG default")
    max_size_gb: float = _s(20.0, "input size per job when the task and site set none", "InputChunk")
    scout_max_input_gb: float = _s(50.0, "direct-IO scout input cap", "InputChunk")
    max_input_gb: float = _s(500.0, "direct-IO input cap after the avalanche", "InputChunk")
    batch_size: int = _s(10_000, "files per generation transaction", "performance.md C.4")
    throttle: bool = _s(True, "apply the job throttler (off: generate whatever is released)", "")
    claim_batch: int = _s(10, "tasks leased at a time within a pass", "")


@dataclass(frozen=True)
class ScoutSettings:
    min_success_fraction: float = _s(0.5, "finished share of scouts that triggers the early avalanche", "minSuccessScouts 5 tenths")
    cputime_rank: int = _s(95, "percentile of HS06 s per event", "SCOUT_CPUTIME_RANK")
    cputime_margin: float = _s(1.5, "factor on the cpuTime percentile", "getScoutJobData")
    ramcount_rank: int = _s(75, "percentile of PSS", "SCOUT_RAMCOUNT_RANK")
    ramcount_margin_percent: int = _s(10, "margin on the RAM percentile", "SCOUT_RAMCOUNT_MARGIN")
    outdisk_rank: int = _s(75, "percentile of output bytes per input byte", "getScoutJobData")
    wrong_cputime_threshold: float = _s(2.0, "scout cpuTime above this x requested -> exhausted", "SCOUT_WRONG_CPUTIME_THRESHOLD")
    ram_exhausted_gb: float = _s(4.0, "RAM per core crossing this -> exhausted", "RAM_THR_EXAUSTED")
    min_new_jobs_for_checks: int = _s(20, "exhausted checks run only with more expected jobs", "setScoutJobData")
    assessment_interval_minutes: int = _s(10, "early-avalanche check interval per task", "prepareTasksToBeFinished")


@dataclass(frozen=True)
class RetrySettings:
    ram_ladder_mb: list = _s([1000, 2000, 3000, 4000, 6000, 8000], "memory steps of increase_memory", "retryModule")
    task_ram_failure_fraction: float = _s(0.3, "share of memory failures that raises the whole task", "seed 000")
    task_retry_attempt_increase: int = _s(5, "maxAttempt added by a task retry", "retryTask_JEDI")


@dataclass(frozen=True)
class DispatchSettings:
    count: int = _s(1, "jobs handed out per `jobs dispatch` when --count is not given", "")
    max_count: int = _s(10_000, "most jobs one `jobs dispatch` call may take", "")
    sloppy_ratio: float = _s(0.1, "share of dispatch calls that ignore global shares and take the oldest jobs", "SLOPPY_DISPATCH_RATIO")


@dataclass(frozen=True)
class ReportSettings:
    batch_size: int = _s(500, "job reports applied per transaction (1: one transaction per job)", "performance.md C.4")
    merge_input_extra_attempts: int = _s(3, "attempts an unmerged output gets as a merge input", "propagateResultToJEDI")


@dataclass(frozen=True)
class SimulateSettings:
    failure_rate: float = _s(0.1, "share of simulated jobs that fail", "")
    failure_mix: list = _s([
        {"source": "pilot", "code": 1212, "diag": "Payload exceeded memory limit", "weight": 3},
        {"source": "trans", "code": 65, "diag": "Non-zero return code from the payload (65)", "weight": 4},
        {"source": "pilot", "code": 1099, "diag": "Failed to stage-in file", "weight": 2},
        {"source": "jobdispatcher", "code": 100, "diag": "lost heartbeat", "weight": 1},
    ], "errors a failed simulated job reports, drawn by weight", "")
    seconds_per_event: float = _s(10.0, "simulated CPU seconds per input event (per core)", "")


@dataclass(frozen=True)
class PilotSettings:
    """`jedictl pilot`: the real executor (PanDA's pilot, reduced to what a cluster needs)."""

    heartbeat_seconds: float = _s(60.0, "seconds between a pilot's heartbeats for its running jobs", "pilot config.Pilot.heartbeat (1800 s); 60 s here")
    lost_heartbeat_seconds: float = _s(10800.0, "no successful heartbeat for this long: the pilot kills its payloads (error 1317)", "config.Pilot.lost_heartbeat")
    kill_grace_seconds: float = _s(30.0, "seconds between SIGTERM and SIGKILL when a payload is stopped", "pilot kill_processes: SIGTERM, wait, SIGKILL")
    poll_seconds: float = _s(5.0, "longest interval between samples of a payload's CPU and memory", "")
    idle_poll_seconds: float = _s(30.0, "without --once: seconds between dispatch calls while no job is available", "")
    idle_exit_seconds: float = _s(600.0, "without --once: exit after this long without a job (0: never)", "harvester: pilots that find no work end")
    workdir: str = _s("", "folder for the jobs' work directories (default: the system's temporary folder)", "")


@dataclass(frozen=True)
class JobTimeoutSettings:
    """Seed 000 'Timeout values for production jobs'."""

    defined_hours: float = _s(4.0, "defined jobs", "seed 000")
    assigned_hours: float = _s(12.0, "assigned jobs", "seed 000")
    activated_hours: float = _s(48.0, "activated or starting jobs", "seed 000")
    sent_minutes: float = _s(30.0, "sent jobs", "seed 000")
    running_days: float = _s(21.0, "running jobs", "seed 000")
    heartbeat_hours: float = _s(2.0, "running jobs without a heartbeat", "seed 000")
    holding_hours: float = _s(3.0, "holding jobs", "seed 000")
    transferring_days: float = _s(2.0, "transferring jobs", "schedconfig.transtimelo")
    waiting_minutes: float = _s(30.0, "waiting jobs", "seed 000")
    pending_hours: float = _s(1.0, "pending jobs", "seed 000")


@dataclass(frozen=True)
class FinalizeSettings:
    limit: int = _s(50, "tasks finalized per pass", "postprocessor nTasks")
    # The candidate query looks at every task (scout counts, phase complete): claiming ten at a time made
    # a pass over 10,000 tasks grow with their square (bench/run_all.py: 249 s, x21 for x10 tasks).
    claim_batch: int = _s(50, "tasks claimed at a time within a pass", "postprocessor nTasks")
    max_scout_jobs: int = _s(1000, "finished jobs sampled for scout statistics", "getScoutJobData: 1000 jobs")


@dataclass(frozen=True)
class WatchdogSettings:
    limit: int = _s(1000, "tasks each watchdog action looks at per pass", "")
    wait_for_picked_minutes: int = _s(30, "files picked by a task locked longer than this are rescued", "watchdog.waitForPicked")
    wait_for_pending_minutes: int = _s(60, "pending tasks are reactivated after this", "watchdog.waitForPending")
    timeout_for_pending_days: int = _s(7, "pending longer than this -> exhausted", "watchdog.timeoutForPending")
    wait_for_throttled_minutes: int = _s(120, "throttle backoff unit (x n squared)", "watchdog.waitForThrottled")
    wait_for_exhausted_hours: int = _s(48, "exhausted tasks move to finishing after this", "watchdog.waitForExhausted")
    wait_for_achieved_minutes: int = _s(60, "goal check interval per task", "watchdog.waitForAchieved")
    throttle_attempt_step: int = _s(5, "average failed attempts per throttle step", "throttleTasks_JEDI")
    boost_done_fraction: float = _s(0.95, "done fraction that earns a priority boost", "seed 000")
    boost_max_remaining_jobs: int = _s(100, "at most this many jobs left for a boost", "seed 000")
    boost_priority: int = _s(900, "priority given by the boost", "seed 000")
    boost_share: str = _s("Express", "global share given by the boost", "seed 000")
    pause_failure_rate: float = _s(0.0, "job failure rate that pauses a task (0 = off)", "MAX_JOB_FAILURE_RATE_TO_PAUSE")
    pause_min_jobs: int = _s(1000, "jobs a task needs before it can be auto-paused", "MIN_JOBS_TO_PAUSE")
    pause_min_remaining_jobs: int = _s(100, "remaining jobs a task needs before it can be auto-paused", "MIN_REMAINING_JOBS_TO_PAUSE")


@dataclass(frozen=True)
class HarvestSettings:
    """`jedictl harvest`: PanDA Harvester's submitter and monitor in one pass (docs/executing.md)."""

    batch: str = _s("", "batch system for every site instead of its own sites.batch.system (local | slurm); empty: each site's", "")
    log_dir: str = _s("", "where pilots' batch scripts and logs go (default: the data directory's pilots/); must be shared with the compute nodes", "")
    jobs_per_pilot: int = _s(10, "jobs a pilot takes when the site's batch sets no jobs_per_pilot", "")
    slots: int = _s(1, "payloads a pilot runs at once when the site's batch sets no slots", "")
    max_failed_pilots: int = _s(5, "a site whose last N pilots all failed before taking work gets pilots_active off (0: never)", "")
    submit_grace_seconds: int = _s(120, "a pilot the batch system does not list yet is not called lost before this", "")
    quiet_seconds: int = _s(600, "a pilot that beat within this is never ended on the batch system's word alone", "")
    limit: int = _s(1000, "pilots submitted per site per pass", "Harvester maxNewWorkersPerCycle")


_DEFAULT_WORK_QUEUES: list[dict[str, Any]] = [
    {"name": "evgensimul", "vo": "*", "queue_type": "managed", "order": 10, "share": 40, "criteria": "processingType IN ('evgen', 'simul')"},
    {"name": "group", "vo": "*", "queue_type": "managed", "order": 20, "share": 10, "criteria": "workingGroup LIKE 'GP_%'"},
    {"name": "mcore", "vo": "*", "queue_type": "managed", "order": 30, "share": 20, "criteria": "coreCount > 1"},
    {"name": "managed", "vo": "*", "queue_type": "managed", "order": 90, "share": 30, "criteria": ""},
    {"name": "user", "vo": "*", "queue_type": "user", "order": 10, "criteria": ""},
    {"name": "test", "vo": "*", "queue_type": "test", "order": 10, "criteria": ""},
]

_DEFAULT_GLOBAL_SHARES: list[dict[str, Any]] = [
    {"name": "Express", "value": 10, "processingtype": "urgent|express"},
    {"name": "Test", "value": 5, "prodsourcelabel": "test|prod_test|ptest"},
    {"name": "Production", "value": 60, "children": [
        {"name": "MC Simulation", "value": 50, "prodsourcelabel": "managed", "processingtype": "simul|evgen"},
        {"name": "Group production", "value": 10, "prodsourcelabel": "managed", "workinggroup": "GP_.*"},
        {"name": "Production default", "value": 40, "prodsourcelabel": "managed"},
    ]},
    {"name": "Analysis", "value": 25, "prodsourcelabel": "user|panda"},
    {"name": "Default", "value": 0},
]

_DEFAULT_RESOURCE_TYPES: list[dict[str, Any]] = [
    {"name": "SCORE", "min_core": 1, "max_core": 1, "min_ram_per_core": None, "max_ram_per_core": 2000},
    {"name": "MCORE", "min_core": 2, "max_core": None, "min_ram_per_core": None, "max_ram_per_core": 2000},
    {"name": "SCORE_HIMEM", "min_core": 1, "max_core": 1, "min_ram_per_core": 2001, "max_ram_per_core": None},
    {"name": "MCORE_HIMEM", "min_core": 2, "max_core": None, "min_ram_per_core": 2001, "max_ram_per_core": None},
]


@dataclass(frozen=True)
class Settings:
    db: str = _s("", "store URL or SQLite path (default: the data directory)")
    output: str = _s("table", "output format: table, json, yaml, tsv")
    verbose: int = _s(0, "verbosity (-v count minus -q)")
    now: str = _s("", "fixed 'now' for every pass (ISO-8601 UTC), for tests and replays")
    sqlite_busy_timeout_s: float = _s(60.0, "how long a SQLite writer waits for the lock")
    log_format: str = _s("text", "how passes report on stderr: text, or json (one JSON object per line, for log shippers)")
    metrics_file: str = _s("", "write Prometheus text-format metrics here after every pass (node_exporter textfile collector)")
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    refine: RefineSettings = field(default_factory=RefineSettings)
    feed: FeedSettings = field(default_factory=FeedSettings)
    task_broker: TaskBrokerSettings = field(default_factory=TaskBrokerSettings)
    brokerage: BrokerageSettings = field(default_factory=BrokerageSettings)
    throttle: ThrottleSettings = field(default_factory=ThrottleSettings)
    generate: GenerateSettings = field(default_factory=GenerateSettings)
    scouts: ScoutSettings = field(default_factory=ScoutSettings)
    finalize: FinalizeSettings = field(default_factory=FinalizeSettings)
    retry: RetrySettings = field(default_factory=RetrySettings)
    job_timeouts: JobTimeoutSettings = field(default_factory=JobTimeoutSettings)
    dispatch: DispatchSettings = field(default_factory=DispatchSettings)
    report: ReportSettings = field(default_factory=ReportSettings)
    simulate: SimulateSettings = field(default_factory=SimulateSettings)
    pilot: PilotSettings = field(default_factory=PilotSettings)
    watchdog: WatchdogSettings = field(default_factory=WatchdogSettings)
    harvest: HarvestSettings = field(default_factory=HarvestSettings)
    work_queues: list = _s(_DEFAULT_WORK_QUEUES, "work queue definitions (until queue-shares import)")
    global_shares: list = _s(_DEFAULT_GLOBAL_SHARES, "global share tree (until queue-shares import)")
    resource_types: list = _s(_DEFAULT_RESOURCE_TYPES, "resource types by cores and RAM per core")


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    sources: dict[str, str]  # dotted key -> "default" | "file PATH" | "env NAME" | "flag --x"
    config_path: Path | None


LOG_FORMATS = ("text", "json")


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "jedictl"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jedictl" / "config.yaml"


def default_store_url() -> str:
    return f"sqlite:///{default_data_dir() / 'jedictl.db'}"


def normalise_store_url(value: str) -> str:
    """A bare path means a SQLite file; `postgresql://` means psycopg 3 whatever SQLAlchemy's default."""
    text = value.strip()
    if re.match(r"^postgres(ql)?://", text):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    return text


def load_settings(
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: str | None = None,
) -> LoadedSettings:
    """Merge the four layers. `flags` holds only options given on the command line (dotted keys)."""
    environ = os.environ if environ is None else environ
    flags = dict(flags or {})
    sources: dict[str, str] = {}
    merged: dict[str, Any] = {}

    path_text = config_path or environ.get(ENV_CONFIG)
    path: Path | None = None
    if path_text:
        path = Path(path_text).expanduser()
        if not path.is_file():
            raise BadInput(f"config file {path} does not exist", "config")
    elif default_config_path().is_file():
        path = default_config_path()
    if path is not None:
        document = _read_yaml_mapping(path)
        for key, value in _flatten(document):
            merged[key] = value
            sources[key] = f"file {path}"

    for name, text in environ.items():
        key = _env_key(name)
        if key is None:
            continue
        merged[key] = yaml.safe_load(text) if key not in _TEXT_ENV_KEYS else text
        sources[key] = f"env {name}"

    for key, value in flags.items():
        if value is None:
            continue
        merged[key] = value
        sources[key] = "flag"

    settings = _build(Settings, _unflatten(merged), "")
    if settings.output not in OUTPUT_FORMATS:
        raise BadInput(f"must be one of {', '.join(OUTPUT_FORMATS)}", "output")
    if settings.log_format not in LOG_FORMATS:
        raise BadInput(f"must be one of {', '.join(LOG_FORMATS)}", "log_format")
    if not settings.db:
        settings = dataclasses.replace(settings, db=default_store_url())
    else:
        settings = dataclasses.replace(settings, db=normalise_store_url(settings.db))
    for key, _ in _flatten(_as_dict(settings)):
        sources.setdefault(key, "default")
    return LoadedSettings(settings=settings, sources=sources, config_path=path)


def describe(loaded: LoadedSettings) -> list[dict[str, Any]]:
    """Rows for `config show`: every effective value with its source and help text."""
    helps = dict(_helps(Settings, ""))
    rows = []
    for key, value in _flatten(_as_dict(loaded.settings)):
        rows.append({"key": key, "value": value, "source": loaded.sources.get(key, "default"), "help": helps.get(key, "")})
    return rows


_TOP_LEVEL_ENV = {ENV_DB: "db", ENV_OUTPUT: "output", ENV_VERBOSE: "verbose", ENV_NOW: "now",
                  "JEDICTL_LOG_FORMAT": "log_format", "JEDICTL_METRICS_FILE": "metrics_file"}
#: Taken as written, never parsed as YAML (a path or URL is text, whatever it looks like).
_TEXT_ENV_KEYS = ("db", "now", "log_format", "metrics_file")


def _env_key(name: str) -> str | None:
    if name in _TOP_LEVEL_ENV:
        return _TOP_LEVEL_ENV[name]
    if name.startswith(ENV_PREFIX) and "__" in name:
        return ".".join(part.lower() for part in name[len(ENV_PREFIX):].split("__"))
    return None


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise BadInput(f"config file {path}{where} is not valid YAML") from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise BadInput(f"config file {path} must hold a mapping")
    return document


# Keys whose values are whole lists/mappings: never flattened into sub-keys.
_OPAQUE = {"work_queues", "global_shares", "resource_types", "retry.ram_ladder_mb", "throttle.limits", "simulate.failure_mix"}


def _flatten(document: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in document.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and dotted not in _OPAQUE:
            items.extend(_flatten(value, dotted + "."))
        else:
            items.append((dotted, value))
    return items


def _unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for dotted, value in flat.items():
        node = nested
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise BadInput("is a value, not a section", ".".join(parts[:-1]))
        node[parts[-1]] = value
    return nested


def _as_dict(obj: Any) -> dict[str, Any]:
    return {f.name: (_as_dict(getattr(obj, f.name)) if dataclasses.is_dataclass(getattr(obj, f.name)) else getattr(obj, f.name))
            for f in dataclasses.fields(obj)}


def _helps(cls: type, prefix: str) -> list[tuple[str, str]]:
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.extend(_helps(hints[f.name], f"{prefix}{f.name}."))
        else:
            out.append((f"{prefix}{f.name}", f.metadata.get("help", "")))
    return out


def _build(cls: type, values: Mapping[str, Any], prefix: str) -> Any:
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in values:
        if key not in names:
            raise BadInput("unknown setting", f"{prefix}{key}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        kind = hints[f.name]
        value = values[f.name]
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(kind):
            if not isinstance(value, Mapping):
                raise BadInput("must be a mapping", path)
            kwargs[f.name] = _build(kind, value, path + ".")
        else:
            kwargs[f.name] = _coerce(kind, value, path)
    return cls(**kwargs)


def _coerce(kind: Any, value: Any, path: str) -> Any:
    base = get_origin(kind) or kind
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise BadInput("must be true or false", path)
    if base is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise BadInput("must be an integer", path)
        try:
            return int(value)
        except ValueError as exc:
            raise BadInput("must be an integer", path) from exc
    if base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise BadInput("must be a number", path)
        try:
            return float(value)
        except ValueError as exc:
            raise BadInput("must be a number", path) from exc
    if base is str:
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise BadInput("must be a string", path)
        return str(value)
    if base is list:
        if not isinstance(value, list):
            raise BadInput("must be a list", path)
        return value
    if base is dict:
        if not isinstance(value, Mapping):
            raise BadInput("must be a mapping", path)
        return dict(value)
    if get_args(kind):
        return value
    return value
