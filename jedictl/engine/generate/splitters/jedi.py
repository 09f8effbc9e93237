"""JEDI's splitter: cut a claimed input chunk into sub-chunks, one per job (jedi-inventory.md §6.6,
`InputChunk.getSubChunk`; §6.11 scouts and §6.12 merges arrive as limits from `jedi_limits`).

A job takes master records in groups -- NF records at a time when nFilesPerJob is set (and respectLB
is not), else one -- plus the secondary records each group brings (nosplit: all; np=k: k with the
first group; else ratio x masters, all of the boundary with GB, or up to the event ratio). The first
group is always taken, so a job exceeds a limit only when one group alone does. Before each further
group the splitter checks that the job would stay within every limit (files, events, size with the
output estimate and the default-output reserve, scratch disk, walltime, output size, the hard 1,000
records) and stops before it otherwise; with NF it stops after one group. A job also ends before a
record with another boundaryID (GB), another lumiblock (respectLB), other LFN fields (AN+UF), or an
event range that does not continue the previous one. A job short of NF files or NE events is flagged
short; with skipShortOutput it is dropped and splitting stops there, as JEDI does.

Per-record work is a handful of additions and every record is looked at at most twice (once more
only when the group is refused), so splitting is O(n) in the records of the chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from jedictl.engine.generate.splitters.jedi_model import (
    BOUNDARY_MANY,
    MB,
    START,
    InputChunk,
    InputFile,
    JobLimits,
    SecondaryInput,
    SplitCursor,
    SplitResult,
    SubChunk,
)


def split_chunk(chunk: InputChunk, limits: JobLimits) -> SplitResult:
    """All sub-chunks of `chunk` under one set of limits (one site, or none)."""
    return split_at_site(chunk, limits)


def split_at_site(
    chunk: InputChunk, limits: JobLimits, cursor: SplitCursor = START, max_sub_chunks: int | None = None,
    refuse: Callable[[SubChunk], str | None] | None = None,
) -> SplitResult:
    """Up to `max_sub_chunks` sub-chunks from `cursor` for the site whose limits are given.

    The generator draws a site, calls this with `sub_chunks_per_site(...)` and goes on from the returned
    cursor with the next site; to undo a site, it simply keeps the previous cursor. `refuse` (the
    site's verdict on one job) stops the split before a sub-chunk the site would refuse -- the first
    group of records is taken whatever it needs, so one group alone may exceed the site's limits.
    """
    found: list[SubChunk] = []
    while max_sub_chunks is None or len(found) < max_sub_chunks:
        step = next_sub_chunk(chunk, limits, cursor)
        if step is None:
            break
        sub_chunk, after = step
        if sub_chunk.short and limits.skip_short_output:
            # JEDI returns nothing for a short chunk and ends the split; the records stay unused.
            return SplitResult(tuple(found), cursor, short_dropped=True)
        reason = refuse(sub_chunk) if refuse is not None else None
        if reason is not None:
            return SplitResult(tuple(found), cursor, refused=reason)
        found.append(sub_chunk)
        cursor = after
    return SplitResult(tuple(found), cursor)


def unused_master(chunk: InputChunk, cursor: SplitCursor) -> tuple[InputFile, ...]:
    """Master records not in any sub-chunk yet (they go back to `ready` after the pass)."""
    return chunk.master[cursor.master:]


def next_sub_chunk(chunk: InputChunk, limits: JobLimits, cursor: SplitCursor = START) -> tuple[SubChunk, SplitCursor] | None:
    """The next job's input from `cursor`, and the cursor after it; None when the master is used up."""
    master = chunk.master
    n_master = len(master)
    start = i = cursor.master
    if i >= n_master:
        return None
    secondaries = chunk.secondaries
    sec_pos = list(cursor.secondaries) if cursor.secondaries else [0] * len(secondaries)

    # Limits as locals: this loop runs once per record of the chunk.
    nf = limits.n_files_per_job
    group = nf if nf and not limits.respect_lb else 1
    max_files, max_events, max_size = limits.max_files, limits.max_events, limits.max_size
    max_disk, max_walltime, max_out = limits.max_disk, limits.max_walltime, limits.max_out_size
    hard_max, min_out = limits.hard_max_files, limits.min_out_size
    gradient, per_event, per_in_size = limits.size_gradient, limits.gradient_per_event, limits.size_gradient_per_in_size
    direct_io = limits.direct_io
    mode = limits.boundary_mode
    split_on_boundary = mode is not None and mode != BOUNDARY_MANY
    respect_lb, fields = limits.respect_lb, limits.split_by_fields
    walltime_per_unit = _walltime_factor(limits)
    use_hs06 = limits.use_hs06

    # The job so far.
    n_files = n_events = input_bytes = walltime = total_files = 0
    size = float(limits.size_intercept)  # the intercept counts once per job
    disk = 0.0
    out_by_dataset = [0.0] * (1 + len(secondaries))  # master first
    if use_hs06 and limits.base_walltime:
        walltime = limits.base_walltime
    # Continuity state after the last accepted record.
    next_start: int | None = None
    current_lfn: str | None = None
    last_lfn: str | None = None
    boundary: int | None = None
    boundary_ids: set[int | None] = set()
    lumi_block: int | None = None
    field_key: tuple[str, ...] | None = None
    sec_files: list[list[InputFile]] = [[] for _ in secondaries]
    sec_count = [0] * len(secondaries)
    sec_events = [0] * len(secondaries)
    first_group = True

    while True:
        # --- scan one group of master records, stopping before a discontinuity
        stop = min(i + group, n_master)
        j = i
        broke = False
        g_events = g_in = 0
        g_out = g_wall = 0.0
        g_next, g_cur, g_last, g_boundary, g_lb, g_key = next_start, current_lfn, last_lfn, boundary, lumi_block, field_key
        g_boundaries: list[int | None] = []
        has_events = False
        while j < stop:
            record = master[j]
            first_event = record.start_event
            ranged = first_event is not None and record.end_event is not None
            if ranged and g_next is not None and (g_next != first_event or (g_next != 0 and record.lfn != g_cur)):
                broke = True  # event jump: never join ranges that do not continue each other
                break
            if split_on_boundary and g_boundary is not None and record.boundary_id != g_boundary:
                broke = True
                break
            if respect_lb and g_lb is not None and record.lumi_block != g_lb:
                broke = True
                break
            if fields is not None:
                key = _field_key(record.lfn, fields)
                if g_key is not None and key != g_key:
                    broke = True
                    break
                g_key = key
            # accepted: add what the record costs
            if ranged:
                events = record.end_event - first_event + 1
                effective = int(record.size * events / record.n_events) if record.n_events else record.size
                g_next = record.end_event + 1
                if g_next == record.n_events:
                    g_next = 0  # the file is finished: the next file's range starting at 0 continues
                g_cur = record.lfn
            else:
                events = record.n_events or 0
                effective = record.size
            if not effective:
                effective = MB  # JEDI's dummy size for pseudo inputs and empty files
            if events:
                has_events = True
            g_events += events
            if gradient:
                g_out += int(gradient * (events if per_event else effective))
            if per_in_size is not None:
                g_out += int(effective * per_in_size)
            if record.lfn != g_last:
                g_in += record.size  # a file's ranges are staged once
                g_last = record.lfn
            if walltime_per_unit:
                g_wall += int(walltime_per_unit * (events if use_hs06 else effective / MB))
            if mode is not None:
                g_boundary = record.boundary_id
                g_boundaries.append(g_boundary)
            if respect_lb:
                g_lb = record.lumi_block
            j += 1
        taken = j - i
        if taken == 0:
            break  # the next record cannot join this job (only after the first group)
        new_n_master = n_files + taken
        new_events = n_events + g_events
        if secondaries:
            plan = _plan_secondaries(secondaries, sec_pos, sec_count, sec_events, new_n_master, new_events,
                                     first_group, split_on_boundary, mode, g_boundary, boundary_ids, g_boundaries,
                                     max_events is not None and not has_events)
            s_size, s_disk, s_files, s_events, s_out = _plan_totals(plan, direct_io, per_in_size, len(secondaries))
            new_out = [out_by_dataset[0] + g_out] + [out_by_dataset[k + 1] + s_out[k] for k in range(len(secondaries))]
            largest_out = max(new_out)
            new_events += s_events
        else:
            plan = []
            s_size = s_disk = 0.0
            s_files = 0
            new_out = [out_by_dataset[0] + g_out]
            largest_out = new_out[0]
        new_size = size + g_in + g_out + s_size
        new_disk = disk + (0 if direct_io else g_in) + g_out + s_disk
        new_wall = walltime + g_wall
        new_total = total_files + taken + s_files
        if not first_group and (
            (max_files is not None and new_n_master > max_files)
            or (max_size is not None and new_size > max_size)
            # keep room for the default output while the estimate is below it
            or (max_size is not None and largest_out < min_out and max_size - min_out < new_size - largest_out)
            or (max_walltime is not None and 0 < max_walltime < new_wall)
            or (max_events is not None and new_events > max_events)
            or (max_out is not None and largest_out > max_out)
            or (max_disk is not None and new_disk > max_disk)
            or new_total > hard_max
        ):
            break
        # --- commit the group
        i = j
        n_files, n_events, size, disk, walltime, total_files = new_n_master, new_events, new_size, new_disk, new_wall, new_total
        input_bytes += g_in
        if plan:
            input_bytes += sum(take[3] for take in plan)
        out_by_dataset = new_out
        next_start, current_lfn, last_lfn, boundary, lumi_block, field_key = g_next, g_cur, g_last, g_boundary, g_lb, g_key
        if g_boundaries:
            boundary_ids.update(g_boundaries)
        for k, position, files, _in_bytes, events, _job_events in plan:
            sec_files[k].extend(files)
            sec_pos[k] = position
            if not secondaries[k].nosplit:
                sec_count[k] += len(files)
            sec_events[k] += events
        first_group = False
        if i >= n_master or broke or (nf and not respect_lb):
            break

    for k, secondary in enumerate(secondaries):
        if secondary.repeat and secondary.files:
            sec_pos[k] %= len(secondary.files)
    nepj = limits.n_events_per_job
    short = bool((nepj and n_events < nepj) or (nf and n_files < nf))
    sub_chunk = SubChunk(
        master=master[start:i],
        secondaries=tuple(tuple(files) for files in sec_files),
        short=short,
        n_events=n_events,
        input_bytes=input_bytes,
        estimated_bytes=int(size),
        disk_bytes=int(disk),
        out_bytes=int(max(out_by_dataset)),
        walltime=int(walltime),
        site=limits.site,
    )
    return sub_chunk, SplitCursor(i, tuple(sec_pos))


def _walltime_factor(limits: JobLimits) -> float:
    """Seconds per unit of input: per event (HS06 s / cores / core power / efficiency) or per MB / cores."""
    if not limits.walltime_gradient:
        return 0.0
    cores = float(limits.core_count or 1)
    if not limits.use_hs06:
        return limits.walltime_gradient / cores
    if not limits.cpu_efficiency:
        return 0.0  # JEDI: no efficiency, no estimate
    factor = limits.walltime_gradient / cores / (limits.cpu_efficiency / 100.0)
    if limits.core_power:
        factor /= limits.core_power
    return factor


def _field_key(lfn: str, fields: tuple[int, ...]) -> tuple[str, ...]:
    parts = lfn.split(".")
    return tuple(parts[n - 1] if 0 < n <= len(parts) else "" for n in fields)


# One secondary's share of a master group: (index, cursor after, records, input bytes, events of the
# records, events the job counts from them).
_Take = tuple[int, int, list[InputFile], int, int, int]


def _plan_secondaries(
    secondaries: tuple[SecondaryInput, ...],
    positions: list[int],
    counts: list[int],
    sec_events: list[int],
    n_master: int,
    master_events: int,
    first_group: bool,
    split_on_boundary: bool,
    mode: str | None,
    boundary: int | None,
    boundary_ids: set[int | None],
    group_boundaries: list[int | None],
    events_from_secondary: bool,
) -> list[_Take]:
    """The secondary records one more master group brings, without taking them yet."""
    plan: list[_Take] = []
    for k, secondary in enumerate(secondaries):
        files = secondary.files
        if secondary.nosplit:
            if first_group and files:
                plan.append((k, positions[k], list(files), sum(f.size for f in files), 0, 0))
            continue
        if secondary.n_files_per_job is not None:
            if not first_group:
                continue
            wanted = secondary.n_files_per_job
        else:
            wanted = _times_ratio(n_master, secondary.ratio) - counts[k]
            if (secondary.event_ratio is not None and master_events > 0) or split_on_boundary:
                wanted = len(files)  # all files of the boundary / up to the event ratio
        position = positions[k]
        if secondary.reusable and position + wanted > len(files):
            position = 0  # rewind a reusable dataset that has too few files left
        taken: list[InputFile] = []
        in_bytes = events = 0
        end = min(position + max(wanted, 0), len(files))
        while position < end:
            record = files[position]
            if mode is not None and boundary is not None and record.boundary_id != boundary \
                    and record.boundary_id not in boundary_ids and record.boundary_id not in group_boundaries:
                break
            if secondary.event_ratio is not None and master_events > 0 \
                    and (sec_events[k] + events) / master_events >= secondary.event_ratio:
                break
            taken.append(record)
            in_bytes += record.size
            events += record.effective_events
            position += 1
        # A master group without events (pseudo input) counts the first secondary's events (JEDI).
        job_events = events if events_from_secondary else 0
        events_from_secondary = False
        plan.append((k, position, taken, in_bytes, events, job_events))
    return plan


def _plan_totals(
    plan: list[_Take], direct_io: bool, per_in_size: float | None, n_secondaries: int
) -> tuple[float, float, int, int, list[float]]:
    """Size, disk, records, job events and output per secondary of a plan."""
    size = disk = 0.0
    files = events = 0
    out = [0.0] * n_secondaries
    for k, _position, taken, in_bytes, _events, job_events in plan:
        size += in_bytes
        if not direct_io:
            disk += in_bytes
        if per_in_size is not None:
            extra = sum(record.size * per_in_size for record in taken)
            size += extra
            disk += extra
            out[k] += extra
        files += len(taken)
        events += job_events
    return size, disk, files, events, out


def _times_ratio(n_master: int, ratio: float) -> int:
    """Secondary files for n master files: n x ratio, a fractional product rounded up (getNumMultByRatio)."""
    if isinstance(ratio, int) or float(ratio).is_integer():
        return n_master * int(ratio)
    return math.ceil(n_master * ratio)
