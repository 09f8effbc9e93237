"""Settings: built-in defaults < config file < environment < command-line flags.

Every agent parameter lives here with JEDI's default and the place in the reference material it comes
from, so policy code receives numbers instead of hiding constants. `load_settings` also records where
each effective value came from, which is what `jedictl config show` prints.

Environment: `JEDICTL_DB`, `JEDICTL_CONFIG`, `JEDICTL_OUTPUT`, `JEDICTL_VERBOSE`, `JEDICTL_NOW`, `JEDICTL_PRIVILEGES`, and any
setting as `JEDICTL_<SECTION>__<KEY>` (e.g. `JEDICTL_WATCHDOG__WAIT_FOR_PICKED_MINUTES=10`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, get_args, get_origin, get_type_hints

import yaml

from jedictl.clock import EARLIEST, LATEST, in_range, parse_time
from jedictl import safe_yaml
from jedictl.errors import BadInput
from jedictl.model.choices import LOG_FORMATS, OUTPUT_FORMATS, closest

ENV_DB = "JEDICTL_DB"
ENV_CONFIG = "JEDICTL_CONFIG"
ENV_OUTPUT = "JEDICTL_OUTPUT"
ENV_VERBOSE = "JEDICTL_VERBOSE"
ENV_NOW = "JEDICTL_NOW"
ENV_PREFIX = "JEDICTL_"


#: Priorities (INTEGER columns, with room for the boosts agents add), and an INTEGER column's largest value.
_PRIORITY = {"low": -(10**9), "high": 10**9}
_INT32 = 2**31 - 1
#: No number in the settings goes beyond the store's widest integer column (BIGINT).
_INT64 = 2**63 - 1


def _s(default: Any, help: str, ref: str = "", *, low: float | None = None, high: float | None = None,
       above: float | None = None) -> Any:
    """A setting: its default, one line of help, where JEDI's value comes from, and for a number its
    range: at least `low`, at most `high`, greater than `above` (a value outside is refused, naming the key)."""
    factory = (lambda: list(default)) if isinstance(default, list) else (lambda: dict(default)) if isinstance(default, dict) else None
    metadata = {"help": help, "ref": ref, "low": low, "high": high, "above": above}
    if factory:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class LeaseSettings:
    seconds: int = _s(600, "how long a claimed task stays owned without a heartbeat", "jobgen.lockInterval/10 min locks, §11", low=1)


@dataclass(frozen=True)
class RefineSettings:
    limit: int = _s(100, "tasks refined per pass", "", low=1)
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "taskrefine: 10 per thread batch", low=1)
    default_ram_count: int = _s(2000, "RAM per core (MB) when a task gives none", "GenTaskRefiner default ramCount", low=0, high=_INT32)
    default_ram_unit: str = _s("MBPerCore", "unit of the default RAM", "GenTaskRefiner")
    default_base_walltime: int = _s(600, "baseWalltime (s) when a task gives none", "extractCommon", low=0, high=_INT32)
    default_cpu_efficiency: int = _s(90, "cpuEfficiency (%) when a task gives none", "extractCommon", low=1, high=100)
    memory_compensation: float = _s(0.9, "factor applied to RAM per core before matching resource types", "JobUtils.MEMORY_COMPENSATION", above=0, high=1)
    base_ram_count: dict = _s({"simul": 1000, "pile": 1500, "reco": 1000},
                              "baseRamCount (MB) by processingType, for a task that gives none (other types: 0)",
                              "seed 000 Memory probe and brokerage: processingType baseramcount")
    analysis_priority: int = _s(1000, "priority of analysis (label user/panda) tasks: their default and, unless privileged (`privileges`), their cap",
                                "insertTaskParamsPanda", **_PRIORITY)


@dataclass(frozen=True)
class FeedSettings:
    limit: int = _s(50, "tasks fed per pass", "", low=1)
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "confeeder: 10 tasks per thread batch", low=1)
    default_max_attempt: int = _s(3, "file maxAttempt when the task gives none", "ContentsFeeder", low=1, high=_INT32)
    n_chunks_for_scout: int = _s(10, "chunks released while a task scouts", "ContentsFeeder nChunksForScout", low=1)
    n_chunks_to_wait: int = _s(20, "chunks released at once from an open (mutable) input", "split rule NT default", low=1)
    check_interval_minutes: int = _s(5, "re-scan interval of open input datasets", "confeeder.checkInterval", low=0)
    seq_number_default: int = _s(10_000, "records of a seq_number dataset when nothing else sizes it", "ContentsFeeder", low=1)
    batch_size: int = _s(10_000, "file rows written per statement batch", "performance.md C.4", low=1)


@dataclass(frozen=True)
class TaskBrokerSettings:
    disk_threshold_tb: float = _s(100.0, "free space a nucleus must keep after the remaining work", "DISK_THRESHOLD", low=0)
    free_disk_cutoff_tb: float = _s(1000.0, "free-space weight saturates here", "FREE_DISK_CUTOFF", above=0)
    input_size_threshold_gb: float = _s(1.0, "inputs above this need INPUT_SIZE_FRACTION at the nucleus", "INPUT_SIZE_THRESHOLD", low=0)
    input_size_fraction: float = _s(0.10, "fraction of input bytes a nucleus must hold", "INPUT_SIZE_FRACTION", low=0, high=1)
    input_num_threshold: int = _s(100, "inputs with more files need INPUT_NUM_FRACTION at the nucleus", "INPUT_NUM_THRESHOLD", low=0)
    input_num_fraction: float = _s(0.10, "fraction of input files a nucleus must hold", "INPUT_NUM_FRACTION", low=0, high=1)
    min_io_intensity_with_local_data: float = _s(200.0, "below this IO intensity the locality check may be waived", "MIN_IO_INTENSITY_WITH_LOCAL_DATA", low=0)
    min_input_size_with_local_data_gb: float = _s(10000.0, "and below this input size", "MIN_INPUT_SIZE_WITH_LOCAL_DATA", low=0)
    max_task_prio_with_local_data: int = _s(800, "tasks at or above this priority skip the locality check", "MAX_TASK_PRIO_WITH_LOCAL_DATA", **_PRIORITY)
    data_location_check_days: int = _s(7, "locality is no longer required after this long in assigning", "DATA_LOCATION_CHECK_PERIOD", low=0)
    max_transfer_queue: int = _s(2000, "output files queued to a nucleus before it is skipped", "seed 000 Task brokerage", low=0)
    tape_weight: float = _s(0.001, "weight factor when part of the input is only on tape", "AtlasProdTaskBroker", low=0, high=1)
    default_cpu_time: float = _s(300.0, "cpuTime assumed for remaining work when a task has none", "RW calculation", low=0)
    retry_minutes: int = _s(10, "a task no nucleus fits is brokered again after this", "taskbroker.loopCycle 600 s", low=0)
    input_files: int = _s(1000, "input files looked at to judge data locality", "", low=1)
    limit: int = _s(50, "tasks brokered per pass", "", low=1)
    claim_batch: int = _s(10, "tasks claimed at a time within a pass", "", low=1)


@dataclass(frozen=True)
class BrokerageSettings:
    max_candidates: int = _s(10, "sites kept for a chunk", "AtlasProdJobBroker", low=1)
    storage_min_free_gb: float = _s(200.0, "free space an output endpoint needs", "STORAGE_MIN_FREE_SIZE", low=0)
    io_intensity_cutoff: float = _s(200.0, "kB/s per core above which input transfers are limited", "IO_INTENSITY_CUTOFF", low=0)
    size_cutoff_to_move_input_gb: float = _s(10.0, "IO-intensive tasks skip sites needing more input than this", "SIZE_CUTOFF_TO_MOVE_INPUT", low=0)
    num_cutoff_to_move_input: int = _s(100, "or more input files than this", "NUM_CUTOFF_TO_MOVE_INPUT", low=0)
    queue_limit_site: int = _s(20, "queued jobs allowed at a site before 2 x running applies", "NQUEUELIMITSITE", low=0)
    transferring_limit: int = _s(2000, "transferring jobs allowed when a site sets no limit", "seed 000", low=0)
    default_output_size_mb: float = _s(1500.0, "output assumed per job when scratch disk is checked", "InputChunk 1.5 GB", low=0)
    scout_priority_floor: int = _s(901, "scout jobs get max(this, task priority + 1)", "JobGenerator", **_PRIORITY)
    bootstrap_max_priority: int = _s(150, "only tasks at or below this priority bootstrap empty sites", "MAX_PRIO_TO_BOOTSTRAP", **_PRIORITY)
    analysis_busy_hours: float = _s(6.0, "an analysis task's data site with a job of the task closed this recently counts as busy",
                                    "seed 000 'Input data transfer' (6h)", above=0)
    # The network weight (seed 000 "Network weight"; engine/brokerage/network.py, docs/sites.md).
    nw_active: bool = _s(True, "apply the network weight and its link rules (off: `explain` shows the weight, brokerage ignores it)",
                         "NW_ACTIVE (off in JEDI's code, on in ATLAS's configuration)")
    nw_queue_importance: float = _s(0.5, "share of the queued-files weight in the network weight; the throughput weight has the rest",
                                    "NW_QUEUE_IMPORTANCE", low=0, high=1)
    nw_threshold: float = _s(1.7, "an urgent or priority >= 1000 task with a nucleus needs a network weight of at least this x "
                                  "nw_weight_multiplier from a satellite", "NW_THRESHOLD", low=0)
    nw_weight_multiplier: float = _s(1.0, "scales nw_threshold", "NW_WEIGHT_MULTIPLIER", low=0)
    nqueued_sat_cap: int = _s(150, "files queued on a link at which brokerage stops using it; the queued weight falls from 2 to 1 on the way",
                              "NQUEUED_SAT_CAP (seed 000: 'max_queued (currently 300)')", low=1)


@dataclass(frozen=True)
class ThrottleSettings:
    threshold: float = _s(2.0, "queued/running ratio above which a queue is throttled", "THROTTLE_THRESHOLD", above=0)
    bunch_min: int = _s(500, "lower bound of a generation bunch", "JobThrottlerBase", low=1)
    bunch_max: int = _s(600, "upper bound of a generation bunch", "JobThrottlerBase", low=1)
    total_walltime_limit_s: float = _s(50_000_000.0, "remaining walltime above which a full queue throttles", "JobThrottlerBase", low=0)
    high_prio_jobs: int = _s(500, "fewer not-running jobs than this let a waiting top-priority task in", "JobThrottlerBase", low=0)
    lack_of_jobs_fraction: float = _s(0.9, "below this fraction of the queue limit the queue lacks jobs", "JobThrottlerBase", low=0, high=1)
    wmcore_priority_overflow: float = _s(0.2, "a job beating all pending priorities may exceed the pending limit by this", "peers.md §1.5", low=0)
    limits: dict = _s({}, "per-queue limits, JEDI's keys: NQUEUELIMIT_<share>[_<resource type>], NRUNNINGCAP_..., NQUEUECAP_...", "prod_job_throttler config")


@dataclass(frozen=True)
class GenerateSettings:
    n_tasks: int = _s(50, "tasks taken per pass", "jobgen.nTasks", low=1)
    n_files: int = _s(5000, "files claimed per task per pass", "jobgen.nFiles", low=1)
    express_priority: int = _s(1500, "tasks at or above this priority form the express lane", "JobUtils.priorityTasksToJumpOver", **_PRIORITY)
    express_ratio: float = _s(0.3, "share of picks given to the express lane", "SUPER_HIGH_PRIO_TASK_RATIO", low=0, high=1)
    merge_priority: int = _s(5000, "priority of merge jobs", "JobGenerator", **_PRIORITY)
    jobs_per_site_round: int = _s(25, "consecutive jobs given to one site", "JobSplitter", low=1)
    scout_jobs_per_site: int = _s(2, "consecutive scout jobs given to one site", "JobSplitter", low=1)
    max_files_per_job: int = _s(200, "files per job when the task sets no limit", "InputChunk MF default", low=1)
    hard_max_files_per_job: int = _s(1000, "files per job never exceeded", "InputChunk", low=1)
    max_files_per_merge_job: int = _s(50, "files per merge job when the task sets no limit", "ZM default", low=1)
    max_gb_per_merge_job: float = _s(5.0, "output per merge job when the task sets no limit", "ZG default", above=0)
    max_size_gb: float = _s(20.0, "input size per job when the task and site set none", "InputChunk", above=0)
    scout_max_input_gb: float = _s(50.0, "direct-IO scout input cap", "InputChunk", above=0)
    max_input_gb: float = _s(500.0, "direct-IO input cap after the avalanche", "InputChunk", above=0)
    batch_size: int = _s(10_000, "files per generation transaction", "performance.md C.4", low=1)
    throttle: bool = _s(True, "apply the job throttler (off: generate whatever is released)", "")
    claim_batch: int = _s(10, "tasks leased at a time within a pass", "", low=1)


@dataclass(frozen=True)
class ScoutSettings:
    min_success_fraction: float = _s(0.5, "finished share of scouts that triggers the early avalanche", "minSuccessScouts 5 tenths", low=0, high=1)
    cputime_rank: int = _s(95, "percentile of HS06 s per event", "SCOUT_CPUTIME_RANK", low=1, high=100)
    cputime_margin: float = _s(1.5, "factor on the cpuTime percentile", "getScoutJobData", above=0)
    ramcount_rank: int = _s(75, "percentile of PSS", "SCOUT_RAMCOUNT_RANK", low=1, high=100)
    ramcount_margin_percent: int = _s(10, "margin on the RAM percentile", "SCOUT_RAMCOUNT_MARGIN", low=0)
    outdisk_rank: int = _s(75, "percentile of output bytes per input byte", "getScoutJobData", low=1, high=100)
    wrong_cputime_threshold: float = _s(2.0, "scout cpuTime above this x requested -> exhausted", "SCOUT_WRONG_CPUTIME_THRESHOLD", above=0)
    ram_exhausted_gb: float = _s(4.0, "RAM per core crossing this -> exhausted", "RAM_THR_EXAUSTED", above=0)
    min_new_jobs_for_checks: int = _s(20, "exhausted checks run only with more expected jobs", "setScoutJobData", low=0)
    assessment_interval_minutes: int = _s(10, "early-avalanche check interval per task", "prepareTasksToBeFinished", low=0)


@dataclass(frozen=True)
class RetrySettings:
    ram_ladder_mb: list = _s([1000, 2000, 3000, 4000, 6000, 8000], "memory steps of increase_memory", "retryModule")
    task_ram_failure_fraction: float = _s(0.3, "share of memory failures that raises the whole task", "seed 000", low=0, high=1)
    task_retry_attempt_increase: int = _s(5, "maxAttempt added by a task retry", "retryTask_JEDI", low=0, high=_INT32)


@dataclass(frozen=True)
class DispatchSettings:
    count: int = _s(1, "jobs handed out per `jobs dispatch` when --count is not given", "", low=1)
    max_count: int = _s(10_000, "most jobs one `jobs dispatch` call may take", "", low=1)
    sloppy_ratio: float = _s(0.1, "share of dispatch calls that ignore global shares and take the oldest jobs", "SLOPPY_DISPATCH_RATIO", low=0, high=1)


@dataclass(frozen=True)
class ReportSettings:
    batch_size: int = _s(500, "job reports applied per transaction (1: one transaction per job)", "performance.md C.4", low=1)
    merge_input_extra_attempts: int = _s(3, "attempts an unmerged output gets as a merge input", "propagateResultToJEDI", low=0, high=_INT32)


@dataclass(frozen=True)
class SimulateSettings:
    failure_rate: float = _s(0.1, "share of simulated jobs that fail", "", low=0, high=1)
    failure_mix: list = _s([
        {"source": "pilot", "code": 1212, "diag": "Payload exceeded memory limit", "weight": 3},
        {"source": "trans", "code": 65, "diag": "Non-zero return code from the payload (65)", "weight": 4},
        {"source": "pilot", "code": 1099, "diag": "Failed to stage-in file", "weight": 2},
        {"source": "jobdispatcher", "code": 100, "diag": "lost heartbeat", "weight": 1},
    ], "errors a failed simulated job reports, drawn by weight", "")
    seconds_per_event: float = _s(10.0, "simulated CPU seconds per input event (per core) of production jobs", "", low=0)
    analysis_seconds_per_event: float = _s(0.2, "simulated CPU seconds per input event (per core) of analysis jobs (prodSourceLabel "
                                           "user/panda: reading derived data, not simulating it)", "", low=0)


@dataclass(frozen=True)
class PilotSettings:
    """`jedictl pilot`: the real executor (PanDA's pilot, reduced to what a cluster needs)."""

    heartbeat_seconds: float = _s(60.0, "seconds between a pilot's heartbeats for its running jobs", "pilot config.Pilot.heartbeat (1800 s); 60 s here", above=0)
    lost_heartbeat_seconds: float = _s(10800.0, "no successful heartbeat for this long: the pilot kills its payloads (error 1317)", "config.Pilot.lost_heartbeat", above=0)
    kill_grace_seconds: float = _s(30.0, "seconds between SIGTERM and SIGKILL when a payload is stopped", "pilot kill_processes: SIGTERM, wait, SIGKILL", low=0)
    poll_seconds: float = _s(5.0, "longest interval between samples of a payload's CPU and memory", "", above=0)
    idle_poll_seconds: float = _s(30.0, "without --once: seconds between dispatch calls while no job is available", "", above=0)
    idle_exit_seconds: float = _s(600.0, "without --once: exit after this long without a job (0: never)", "harvester: pilots that find no work end", low=0)
    workdir: str = _s("", "folder for the jobs' work directories (default: the system's temporary folder)", "")
    cvmfs_root: str = _s("/cvmfs", "where the worker node mounts CernVM-FS: an input at /cvmfs/REPO/... is read at ROOT/REPO/...",
                         "PanDA pilot: cvmfs-resident input is read at /cvmfs, not staged in")


@dataclass(frozen=True)
class JobTimeoutSettings:
    """Seed 000 'Timeout values for production jobs'."""

    defined_hours: float = _s(4.0, "defined jobs", "seed 000", above=0)
    assigned_hours: float = _s(12.0, "assigned jobs", "seed 000", above=0)
    activated_hours: float = _s(48.0, "activated or starting jobs", "seed 000", above=0)
    analy_timeout_hours: float = _s(12.0, "activated analysis jobs (user, panda) that got no CPU", "ANALY_TIMEOUT, seed 000", above=0)
    sent_minutes: float = _s(30.0, "sent jobs", "seed 000", above=0)
    running_days: float = _s(21.0, "running jobs", "seed 000", above=0)
    heartbeat_hours: float = _s(2.0, "running jobs without a heartbeat", "seed 000", above=0)
    holding_hours: float = _s(3.0, "holding jobs", "seed 000", above=0)
    transferring_days: float = _s(2.0, "transferring jobs", "schedconfig.transtimelo", above=0)
    waiting_minutes: float = _s(30.0, "waiting jobs", "seed 000", above=0)
    pending_hours: float = _s(1.0, "pending jobs", "seed 000", above=0)
    throttled_days: float = _s(7.0, "jobs throttled by a user cap (user_caps) that were never released", "seed 000 'Throttled jobs and tasks'",
                               above=0)


@dataclass(frozen=True)
class UserCapSettings:
    """Per-user caps of analysis (seed 000 "Throttled jobs and tasks"; docs/analysis.md). A working
    group's analysis tasks count against the group (its caps), the others against their user."""

    running_user_jobs: int = _s(10_000, "running analysis jobs of a user at which his activated jobs are throttled",
                                "CAP_RUNNING_USER_JOBS (prio_mgr, 10000)", low=1)
    running_user_cores: int = _s(10_000, "running analysis cores of a user at which his activated jobs are throttled",
                                 "CAP_RUNNING_USER_CORES (prio_mgr, 10000)", low=1)
    running_group_jobs: int = _s(10_000, "running jobs of a working group's analysis tasks at which its activated jobs are throttled",
                                 "CAP_RUNNING_GROUP_JOBS (prio_mgr, 10000)", low=1)
    running_group_cores: int = _s(10_000, "running cores of a working group's analysis tasks at which its activated jobs are throttled",
                                  "CAP_RUNNING_GROUP_CORES (prio_mgr, 10000)", low=1)
    release_fraction: float = _s(0.9, "throttled jobs are activated again once running jobs and cores are both below this fraction of the caps",
                                 "AtlasAnalWatchDog: unthrottle below 0.9 x cap", above=0, high=1)
    queued_factor: float = _s(2.0, "no new jobs for a user or group whose queued jobs (or cores) exceed this times the running cap",
                              "AtlasAnalJobBroker: maxFactor 2", above=0)
    max_active_tasks: dict = _s({}, "active tasks one user may have, per label (e.g. {user: 500}); a submission beyond is refused",
                                "MAX_ACTIVE_TASKS_PER_USER_<label> (insertTaskParamsPanda)")
    prestage_limit_gb: float = _s(1024.0, "input of a user's assigned jobs still to be staged from tape above which his tasks are throttled",
                                  "PRESTAGE_LIMIT, seed 000; USER_PRESTAGE_LIMIT (anal_watchdog, 1024 GB)", above=0)
    transfer_limit_gb: float = _s(1024.0, "input of a user's assigned jobs still to be transferred from disk above which his tasks are throttled",
                                  "USER_TRANSFER_LIMIT (anal_watchdog, 1024 GB)", above=0)


@dataclass(frozen=True)
class FinalizeSettings:
    limit: int = _s(50, "tasks finalized per pass", "postprocessor nTasks", low=1)
    # The candidate query looks at every task (scout counts, phase complete): claiming ten at a time made
    # a pass over 10,000 tasks grow with their square (bench/run_all.py: 249 s, x21 for x10 tasks).
    claim_batch: int = _s(50, "tasks claimed at a time within a pass", "postprocessor nTasks", low=1)
    max_scout_jobs: int = _s(1000, "finished jobs sampled for scout statistics", "getScoutJobData: 1000 jobs", low=1)


@dataclass(frozen=True)
class WatchdogSettings:
    limit: int = _s(1000, "tasks each watchdog action looks at per pass", "", low=1)
    wait_for_picked_minutes: int = _s(30, "files picked by a task locked longer than this are rescued", "watchdog.waitForPicked", low=0)
    wait_for_pending_minutes: int = _s(60, "pending tasks are reactivated after this", "watchdog.waitForPending", low=0)
    timeout_for_pending_days: int = _s(7, "pending longer than this -> exhausted", "watchdog.timeoutForPending", low=0)
    wait_for_throttled_minutes: int = _s(120, "throttle backoff unit (x n squared)", "watchdog.waitForThrottled", low=0)
    wait_for_exhausted_hours: int = _s(48, "exhausted tasks move to finishing after this", "watchdog.waitForExhausted", low=0)
    wait_for_achieved_minutes: int = _s(60, "goal check interval per task", "watchdog.waitForAchieved", low=0)
    throttle_attempt_step: int = _s(5, "average failed attempts per throttle step", "throttleTasks_JEDI", low=1)
    boost_done_fraction: float = _s(0.95, "done fraction that earns a priority boost", "seed 000", low=0, high=1)
    boost_max_remaining_jobs: int = _s(100, "at most this many jobs left for a boost", "seed 000", low=0)
    boost_priority: int = _s(900, "priority given by the boost", "seed 000", **_PRIORITY)
    boost_share: str = _s("Express", "global share given by the boost", "seed 000")
    pause_failure_rate: float = _s(0.0, "job failure rate that pauses a task (0 = off)", "MAX_JOB_FAILURE_RATE_TO_PAUSE", low=0, high=1)
    pause_min_jobs: int = _s(1000, "jobs a task needs before it can be auto-paused", "MIN_JOBS_TO_PAUSE", low=0)
    pause_min_remaining_jobs: int = _s(100, "remaining jobs a task needs before it can be auto-paused", "MIN_REMAINING_JOBS_TO_PAUSE", low=0)


@dataclass(frozen=True)
class NotifySettings:
    """Telling a task's owner that it ended (JEDI's post processor mails the owner; seed 001). Every
    channel is off until configured; a failure to notify never holds a task back (docs/notifications.md)."""

    smtp_host: str = _s("", "SMTP server that mails task owners when their task ends (empty: no mail)", "PostProcessorBase.sendMail")
    smtp_port: int = _s(25, "SMTP port", "", low=1, high=65535)
    mail_from: str = _s("jedictl@localhost", "sender address of the mails", "")
    mail_domain: str = _s("", "owner address = user@mail_domain when `addresses` has none (empty: only listed users get mail)", "")
    addresses: dict = _s({}, "owner name -> mail address", "")
    webhook_url: str = _s("", "URL that gets the ended task's summary as a JSON POST (empty: none)", "")
    command: list = _s([], "program (argument vector) run with the ended task's summary as JSON on stdin (empty: none)", "")
    timeout_seconds: float = _s(10.0, "how long one channel may take", "", above=0)
    max_attempts: int = _s(3, "passes that try a failing notification before it is given up", "", low=1)
    max_age_hours: float = _s(72.0, "tasks that ended longer ago are not notified (a channel configured late mails no old tasks)", "", above=0)
    limit: int = _s(100, "notifications sent per finalize pass", "", low=1)


@dataclass(frozen=True)
class HarvestSettings:
    """`jedictl harvest`: PanDA Harvester's submitter and monitor in one pass (docs/executing.md)."""

    batch: str = _s("", "batch system for every site instead of its own sites.batch.system (local | slurm); empty: each site's", "")
    log_dir: str = _s("", "where pilots' batch scripts and logs go (default: the data directory's pilots/); must be shared with the compute nodes", "")
    jobs_per_pilot: int = _s(10, "jobs a pilot takes when the site's batch sets no jobs_per_pilot", "", low=1, high=100_000)
    slots: int = _s(1, "payloads a pilot runs at once when the site's batch sets no slots", "", low=1, high=1024)
    max_failed_pilots: int = _s(5, "a site whose last N pilots all failed before taking work gets pilots_active off (0: never)", "", low=0)
    submit_grace_seconds: int = _s(120, "a pilot the batch system does not list yet is not called lost before this", "", low=0)
    quiet_seconds: int = _s(600, "a pilot that beat within this is never ended on the batch system's word alone", "", low=0)
    limit: int = _s(1000, "pilots submitted per site per pass", "Harvester maxNewWorkersPerCycle", low=0)


@dataclass(frozen=True)
class MessageSettings:
    """`jedictl listen` and the task events (JEDI's Message Processor and pushStatusChanges; docs/messages.md).
    Nothing is consumed or published until `broker_url` is set."""

    broker_url: str = _s("", "AMQP URL of the message broker, amqp://USER:PASSWORD@HOST:PORT/VHOST (empty: no listening, no task events)",
                         "panda_jedi.cfg [mq]")
    queue: str = _s("jedictl.triggers", "durable queue `listen` consumes", "[msgprocessor] queue of the Message Processor")
    dead_letter_queue: str = _s("jedictl.triggers.rejected", "durable queue malformed messages (and those failing max_attempts times) go to, "
                                "the reason in their x-jedictl-reason header", "")
    events_exchange: str = _s("jedictl.events", "durable topic exchange every task status change is published to (routing key task.STATUS)",
                              "pushStatusChanges")
    poll_seconds: float = _s(1.0, "while its queue is empty, `listen` looks again (and publishes waiting events) this often", "", above=0)
    max_attempts: int = _s(3, "attempts of a message whose action fails (not refused: fails) before it is dead-lettered", "", low=1)
    keep_processed_days: float = _s(7.0, "how long the ids of processed messages are kept to recognise a redelivery", "", above=0)
    publish_batch: int = _s(500, "task events a publisher takes from the outbox at a time", "", low=1)
    publish_lease_seconds: float = _s(120.0, "a publisher that died holding outbox rows gives them up after this", "", above=0)
    connect_timeout_seconds: float = _s(10.0, "how long connecting to the broker may take", "", above=0)
    heartbeat_seconds: int = _s(600, "AMQP heartbeat interval: longer than the longest single action (a large batch of job reports)", "",
                                low=0, high=65535)


@dataclass(frozen=True)
class ReassignSettings:
    """Moving queued jobs off sites whose queue is long and does not move (docs/reassignment.md; seed 001
    "reassign jobs if workload distribution becomes unbalanced"; PanDA's fast rebrokerage, copyArchive)."""

    enabled: bool = _s(True, "the watch pass moves queued jobs off overloaded sites (false: it only reports them)", "")
    queue_ratio: float = _s(3.0, "a site x share is overloaded only if its queued jobs exceed this many times its running ones",
                            "FAST_REBRO_THRESHOLD_NQNR_RATIO", above=0)
    min_queue: int = _s(10, "a site x share is overloaded only if its queued jobs exceed this many", "FAST_REBRO_THRESHOLD_NQUEUE (default 10)",
                        low=0)
    queue_fraction: float = _s(0.3, "a site x share is overloaded only if its queued jobs exceed this fraction of the share's queued jobs "
                                    "at every site", "FAST_REBRO_THRESHOLD_NQUEUE_FRAC", low=0, high=1)
    stall_minutes: float = _s(180.0, "a site is overloaded only if it took no job (dispatch) for this many minutes and its oldest queued "
                                     "job waited as long", "rebroker: no recent activity in 3 h", above=0)
    min_queued_minutes: float = _s(180.0, "a job is moved only after waiting this long at its site (a moved job waits again)",
                                   "rebroker: jobs older than 3 h", low=0)
    limit: int = _s(1000, "jobs moved per watch pass at most", "", low=1)


@dataclass(frozen=True)
class JumboSettings:
    """Jumbo jobs of event-service tasks and the jumbo watchdog (seed 000 "Jumbo jobs and co-jumbo jobs",
    "Jumbo job switcher": JEDI's JumboWatchDog and its jumbo_dog parameters; docs/event-service.md)."""

    max_tasks: int = _s(1, "event-service tasks with jumbo jobs enabled at once", "JUMBO_MAX_TASKS", low=0)
    min_events_disable: int = _s(100000, "a task with fewer events left has its jumbo jobs disabled", "JUMBO_MIN_EVENTS_DISABLE", low=0)
    min_events_enable: int = _s(1000000, "a task needs this many events left to have jumbo jobs enabled", "JUMBO_MIN_EVENTS_ENABLE", low=0)
    max_events: int = _s(500000, "jumbo jobs are enabled in more tasks only while their events left total less than this",
                         "JUMBO_MAX_EVENTS", low=0)
    per_task: int = _s(1, "jumbo jobs per task (when the task's nJumboJobs says nothing)", "JUMBO_PER_TASK", low=0)
    per_site: int = _s(1, "jumbo jobs per site for each task (when its maxJumboPerSite says nothing)", "JUMBO_PER_SITE", low=1)
    max_curr_prio: int = _s(500, "tasks at this current priority or above get no jumbo jobs", "JUMBO_MAX_CURR_PRIO", **_PRIORITY)
    ranges_per_dispatch: int = _s(100, "event ranges a jumbo job takes when it is dispatched", "", low=1)


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
    sqlite_busy_timeout_s: float = _s(60.0, "how long a SQLite writer waits for the lock", low=0)
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
    notify: NotifySettings = field(default_factory=NotifySettings)
    user_caps: UserCapSettings = field(default_factory=UserCapSettings)
    privileges: list = _s([], "users and working groups with special permission (seed 000): {user: NAME, permissions: s|g} or "
                              "{group: NAME, permissions: s, share: N}; docs/analysis.md", "seed 000 'Special permission' (GRIDPREF)")
    messages: MessageSettings = field(default_factory=MessageSettings)
    jumbo: JumboSettings = field(default_factory=JumboSettings)
    work_queues: list = _s(_DEFAULT_WORK_QUEUES, "work queue definitions (until queue-shares import)")
    global_shares: list = _s(_DEFAULT_GLOBAL_SHARES, "global share tree (until queue-shares import)")
    resource_types: list = _s(_DEFAULT_RESOURCE_TYPES, "resource types by cores and RAM per core")
    reassign: ReassignSettings = field(default_factory=ReassignSettings)


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    sources: dict[str, str]  # dotted key -> "default" | "file PATH" | "env NAME" | "flag --x"
    config_path: Path | None




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

    # An empty --db or --config (an unset variable in a script) used to mean the default one, silently.
    for value, option, default in ((flags.get("db"), "--db", "store"), (config_path, "--config", "configuration file")):
        if value is not None and not str(value).strip():
            raise BadInput(f"is empty (leave it out to use the default {default})", option)
    path_text = config_path or environ.get(ENV_CONFIG)
    path: Path | None = None
    if path_text:
        path = Path(path_text).expanduser()
        option = "--config" if config_path else ENV_CONFIG
        if path.is_dir():
            raise BadInput(f"{path} is a directory, not a configuration file", option)
        if not path.exists():
            raise BadInput(f"configuration file {path} does not exist", option)
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
        merged[key] = _env_value(text, name) if key not in _TEXT_ENV_KEYS else text
        sources[key] = f"env {name}"

    for key, value in flags.items():
        if value is None:
            continue
        merged[key] = value
        sources[key] = "flag"

    try:
        settings = _build(Settings, _unflatten(merged), "")
        _check_together(settings)
    except BadInput as exc:
        raise _naming_the_source(exc, sources) from None
    if settings.output not in OUTPUT_FORMATS:
        raise BadInput(f"must be one of {', '.join(OUTPUT_FORMATS)}", "output")
    if settings.log_format not in LOG_FORMATS:
        raise BadInput(f"must be one of {', '.join(LOG_FORMATS)}", "log_format")
    if settings.now:
        _check_now(settings.now, {"flag": "--now"}.get(sources.get("now", ""), ENV_NOW if sources.get("now", "").startswith("env") else "now"))
    if not settings.db:
        settings = dataclasses.replace(settings, db=default_store_url())
    else:
        settings = dataclasses.replace(settings, db=normalise_store_url(settings.db))
    for key, _ in _flatten(_as_dict(settings)):
        sources.setdefault(key, "default")
    return LoadedSettings(settings=settings, sources=sources, config_path=path)


def _check_now(text: str, option: str) -> None:
    """A fixed time is checked whatever the command: `task list --now yesterday` used to run regardless."""
    try:
        moment = parse_time(text)
    except ValueError as exc:
        raise BadInput(f"{text!r} is not an ISO-8601 time", option) from exc
    if not in_range(moment):
        raise BadInput(f"must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}", option)


def _naming_the_source(exc: BadInput, sources: Mapping[str, str]) -> BadInput:
    """The error of a setting, with where its value came from (a file, the environment)."""
    parts = (exc.path or "").split("[")[0].split(".")
    source = next((sources[key] for key in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if key in sources), "")
    if not source.startswith(("file ", "env ")):
        return exc
    message = str(exc)[len(exc.path or "") + 2:] if exc.path else str(exc)
    where = f"in {source[5:]}" if source.startswith("file ") else f"from {source[4:]}"
    return BadInput(f"{message} ({where})", exc.path)


def describe(loaded: LoadedSettings) -> list[dict[str, Any]]:
    """Rows for `config show`: every effective value with its source and help text."""
    helps = dict(_helps(Settings, ""))
    rows = []
    for key, value in _flatten(_as_dict(loaded.settings)):
        rows.append({"key": key, "value": value, "source": loaded.sources.get(key, "default"), "help": helps.get(key, "")})
    return rows


_TOP_LEVEL_ENV = {ENV_DB: "db", ENV_OUTPUT: "output", ENV_VERBOSE: "verbose", ENV_NOW: "now",
                  "JEDICTL_LOG_FORMAT": "log_format", "JEDICTL_METRICS_FILE": "metrics_file", "JEDICTL_PRIVILEGES": "privileges"}
#: Taken as written, never parsed as YAML (a path or URL is text, whatever it looks like).
_TEXT_ENV_KEYS = ("db", "now", "log_format", "metrics_file", "messages.broker_url")


def _env_value(text: str, name: str) -> Any:
    """A setting from the environment, read as YAML (`10`, `true`, `[1, 2]`)."""
    try:
        return safe_yaml.load(text)
    except yaml.YAMLError as exc:
        raise BadInput(f"is not a valid value ({getattr(exc, 'problem', None) or 'invalid YAML'})", name) from exc


def _env_key(name: str) -> str | None:
    if name in _TOP_LEVEL_ENV:
        return _TOP_LEVEL_ENV[name]
    if name.startswith(ENV_PREFIX) and "__" in name:
        return ".".join(part.lower() for part in name[len(ENV_PREFIX):].split("__"))
    return None


def _read_yaml_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read the configuration file {path} ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        document = safe_yaml.load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        raise BadInput(f"config file {path}{where} is not valid YAML" + (f": {problem}" if problem else "")) from exc
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise BadInput(f"config file {path} must hold a mapping")
    return document


# Keys whose values are whole lists/mappings: never flattened into sub-keys.
_OPAQUE = {"work_queues", "global_shares", "resource_types", "retry.ram_ladder_mb", "throttle.limits", "simulate.failure_mix", "privileges", "refine.base_ram_count",
           "user_caps.max_active_tasks"}
#: Settings that were replaced: naming one is refused with the new form.
_REPLACED = {
    "refine.super_users": "privileges (a list: - {user: NAME, permissions: s})",
    "refine.super_groups": "privileges (a list: - {group: NAME, permissions: s})",
}


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
        if f"{prefix}{key}" in _REPLACED:
            raise BadInput(f"was replaced by {_REPLACED[f'{prefix}{key}']}", f"{prefix}{key}")
        if key not in names:
            guess = closest(str(key), names)
            raise BadInput("unknown setting" + (f"; did you mean {prefix}{guess}?" if guess else ""), f"{prefix}{key}")
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
            kwargs[f.name] = _in_range(_coerce(kind, value, path), f.metadata, path)
    return cls(**kwargs)


def _in_range(value: Any, limits: Mapping[str, Any], path: str) -> Any:
    """A number within its setting's range (and BIGINT's), else BadInput naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    low, high, above = limits.get("low"), limits.get("high"), limits.get("above")
    low = -_INT64 if low is None else low
    high = _INT64 if high is None else high
    if low <= value <= high and (above is None or value > above):
        return value
    floor = f"greater than {_number(above)}" if above is not None else f"at least {_number(low)}"
    if high != _INT64 and (above is not None or low != -_INT64):
        raise BadInput(f"must be {floor} and at most {_number(high)}" if above is not None
                       else f"must be between {_number(low)} and {_number(high)}", path)
    raise BadInput(f"must be at most {_number(high)}" if value > high else f"must be {floor}", path)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _check_together(settings: Settings) -> None:
    """Settings that bound each other, and the numbers inside lists and mappings."""
    pairs = (("throttle.bunch_min", settings.throttle.bunch_min, "throttle.bunch_max", settings.throttle.bunch_max),
             ("dispatch.count", settings.dispatch.count, "dispatch.max_count", settings.dispatch.max_count),
             ("generate.max_files_per_job", settings.generate.max_files_per_job,
              "generate.hard_max_files_per_job", settings.generate.hard_max_files_per_job))
    for key, value, bound_key, bound in pairs:
        if value > bound:
            raise BadInput(f"must be at most {bound_key} ({bound})", key)
    if settings.pilot.lost_heartbeat_seconds <= settings.pilot.heartbeat_seconds:
        raise BadInput(f"must be longer than pilot.heartbeat_seconds ({_number(settings.pilot.heartbeat_seconds)})",
                       "pilot.lost_heartbeat_seconds")
    ladder = settings.retry.ram_ladder_mb
    for index, step in enumerate(ladder):
        if isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= _INT32:
            raise BadInput(f"must be a whole number of MB between 1 and {_INT32}", f"retry.ram_ladder_mb[{index}]")
        if index and step <= ladder[index - 1]:
            raise BadInput("must be larger than the step before it (the ladder goes up)", f"retry.ram_ladder_mb[{index}]")
    for key, base in settings.refine.base_ram_count.items():
        if isinstance(base, bool) or not isinstance(base, int) or not 0 <= base <= _INT32:
            raise BadInput(f"must be a whole number of MB between 0 and {_INT32}", f"refine.base_ram_count.{key}")
    for key, limit in settings.throttle.limits.items():
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 <= limit <= _INT64 or math.isnan(limit):
            raise BadInput("must be a number of jobs, at least 0", f"throttle.limits.{key}")
    for key, cap in settings.user_caps.max_active_tasks.items():
        if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= _INT32:
            raise BadInput("must be a whole number of tasks, at least 1", f"user_caps.max_active_tasks.{key}")
    check_privileges(settings.privileges)


#: Special permission letters (seed 000; PanDA's GRIDPREF): what each means, and which ones jedictl has
#: a use for -- it serves no key-pairs, proxies or tokens, so k, p, t and a have nothing to act on.
PERMISSIONS = {"s": "super user: analysis tasks (his own and his groups') jump the queue and set any priority",
               "g": "super group: his working groups' analysis tasks jump the queue and set any priority"}
_UNUSED_PERMISSIONS = {"k": "download key-pairs", "p": "retrieve proxies", "t": "retrieve tokens", "a": "asynchronous requests"}
#: A working group's permissions: `s` makes every analysis task of the group privileged (PanDA looks a
#: group up in the users table as it does a user, and only its super-user letter counts).
GROUP_PERMISSIONS = {"s": "privileged group: every analysis task of the group jumps the queue and sets any priority"}


def check_privileges(entries: Any, path: str = "privileges") -> None:
    """The `privileges` list: one mapping per user or working group, each named once, with permission
    letters (s, g for users; s for groups) and, for a group, a share of group production."""
    if not isinstance(entries, list):
        raise BadInput("must be a list of {user: NAME, permissions: LETTERS} or {group: NAME, permissions: s, share: N}", path)
    seen: set[tuple[str, str]] = set()
    for index, entry in enumerate(entries):
        where = f"{path}[{index}]"
        if not isinstance(entry, Mapping):
            raise BadInput("must be a mapping like {user: NAME, permissions: s}", where)
        unknown = sorted(set(entry) - {"user", "group", "permissions", "share"})
        if unknown:
            raise BadInput(f"unknown key {unknown[0]!r} (known: user, group, permissions, share)", f"{where}.{unknown[0]}")
        kinds = [kind for kind in ("user", "group") if kind in entry]
        if len(kinds) != 1:
            raise BadInput("names either a user or a group", where)
        kind = kinds[0]
        name = entry[kind]
        if not isinstance(name, str) or not name.strip() or len(name) > 128:
            raise BadInput("must be a name of 1 to 128 characters", f"{where}.{kind}")
        if (kind, name) in seen:
            raise BadInput(f"{kind} {name} is listed twice", f"{where}.{kind}")
        seen.add((kind, name))
        letters = entry.get("permissions", "")
        if not isinstance(letters, str):
            raise BadInput("must be a string of permission letters (e.g. s)", f"{where}.permissions")
        known = PERMISSIONS if kind == "user" else GROUP_PERMISSIONS
        for letter in letters:
            if letter in known:
                continue
            if letter in _UNUSED_PERMISSIONS:
                raise BadInput(f"{letter!r} ({_UNUSED_PERMISSIONS[letter]}) is a PanDA server permission jedictl has nothing to act on; "
                               f"a {kind} takes {', '.join(known)}", f"{where}.permissions")
            hint = "; a group is privileged with s" if kind == "group" and letter == "g" else ""
            raise BadInput(f"unknown permission {letter!r} (a {kind} takes {', '.join(known)}){hint}", f"{where}.permissions")
        share = entry.get("share")
        if share is not None:
            if kind != "group":
                raise BadInput("a share is given to a working group, not a user", f"{where}.share")
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not math.isfinite(share) or share <= 0:
                raise BadInput("must be a number greater than 0", f"{where}.share")
        if not letters and share is None:
            raise BadInput("gives neither permissions nor a share", where)


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
            number = float(value)
        except ValueError as exc:
            raise BadInput("must be a number", path) from exc
        if not math.isfinite(number):
            raise BadInput("must be a finite number", path)
        return number
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
