"""Splitting: turning released input into jobs, by JEDI's rules or by WMCore's algorithms (issue 5).

Pure policy over frozen values; no store, no CLI. Modules:

  jedi_model     InputFile records, InputChunk, JobLimits, SubChunk, SplitCursor, SplitResult
  jedi_limits    task options + site -> JobLimits (JobSplitter's table, scouts, merges); SplitDefaults
  jedi           next_sub_chunk / split_at_site / split_chunk (InputChunk.getSubChunk), O(n) records
  events         whole files -> event-range records, as the feeder writes them
  wmcore_model   WMFile, Fileset, PlannedJob, location groups, lumi masks, site lists
  wmcore_files   FileBased, MinFileBased, SizeBased, RunBased, SiblingProcessingBased, EventBased
  wmcore_lumis   LumiBased, EventAwareLumiBased
  wmcore_merge   ParentlessMergeBySize, WMBSMergeBySize, Harvest
  registry       algorithm names -> functions and parameters; split_fileset(), the CLI's entry point
  jedi_preview   `split --algorithm jedi`: task options -> records -> sub-chunks -> PlannedJob
  contract       the JSON contract of `jedictl split`
  params         parameter text -> typed values

The Job Generator uses `job_limits`, `sub_chunks_per_site` and `split_at_site` per chosen site.
"""

from jedictl.engine.generate.splitters.jedi import next_sub_chunk, split_at_site, split_chunk, unused_master
from jedictl.engine.generate.splitters.jedi_limits import (
    DEFAULTS,
    SiteLimits,
    SplitDefaults,
    job_limits,
    site_limits,
    sub_chunks_per_site,
)
from jedictl.engine.generate.splitters.jedi_model import (
    START,
    InputChunk,
    InputFile,
    JobLimits,
    SecondaryInput,
    SplitCursor,
    SplitResult,
    SubChunk,
)
from jedictl.engine.generate.splitters.registry import NAMES, split_fileset
from jedictl.engine.generate.splitters.wmcore_model import Fileset, PlannedJob, WMFile, wm_file

__all__ = [
    "DEFAULTS", "NAMES", "START", "Fileset", "InputChunk", "InputFile", "JobLimits", "PlannedJob", "SecondaryInput",
    "SiteLimits", "SplitCursor", "SplitDefaults", "SplitResult", "SubChunk", "WMFile", "job_limits", "next_sub_chunk",
    "site_limits", "split_at_site", "split_chunk", "split_fileset", "sub_chunks_per_site", "unused_master", "wm_file",
]
