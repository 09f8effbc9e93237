"""Whole files to event-range records, as the Contents Feeder stores them for event-level splitting
(jedi-inventory.md §4.2 step 4): each file is cut into consecutive ranges of nEventsPerJob events (the
last one shorter), or, with tgtNumEventsPerJob, into ceil(n/target) near-equal ranges.

The Job Generator splits records the feeder already wrote; `jedictl split --algorithm jedi` has only
whole files and uses this to get the same records.
"""

from __future__ import annotations

import math
from typing import Iterable

from jedictl.engine.generate.splitters.jedi_model import InputFile


def expand_event_ranges(
    files: Iterable[InputFile],
    n_events_per_job: int | None,
    tgt_num_events_per_job: int | None = None,
    *,
    n_events_per_input_file: int | None = None,
    skip_short_input: bool = False,
    first_event: int = 1,
) -> list[InputFile]:
    """Records for `files`: ranges when a per-job event count is given and a file's events are known,
    else the file itself. `first_event` starts the task-wide ${FIRSTEVENT} numbering (1 + offset)."""
    records: list[InputFile] = []
    next_id = 0
    for file in files:
        n_events = file.n_events or 0
        if skip_short_input and n_events_per_input_file and n_events < n_events_per_input_file:
            # skipShortInput: a short file keeps only whole jobs' worth of events, or is skipped
            if not n_events_per_job:
                continue
            n_events = n_events // n_events_per_job * n_events_per_job
            if n_events == 0:
                continue
        if not n_events or not (n_events_per_job or tgt_num_events_per_job):
            records.append(file._replace(file_id=next_id, first_event=first_event if file.n_events else None))
            next_id += 1
            first_event += n_events
            continue
        for start, end in event_ranges(n_events, n_events_per_job, tgt_num_events_per_job):
            records.append(file._replace(file_id=next_id, start_event=start, end_event=end, first_event=first_event))
            next_id += 1
            first_event += end - start + 1
    return records


def event_ranges(n_events: int, per_job: int | None, target: int | None = None) -> list[tuple[int, int]]:
    """Inclusive [start, end] ranges covering events 0 .. n_events-1."""
    if target:
        pieces = max(1, math.ceil(n_events / target))
        step = math.ceil(n_events / pieces)
    else:
        step = per_job or n_events
    return [(start, min(start + step, n_events) - 1) for start in range(0, n_events, step)]
