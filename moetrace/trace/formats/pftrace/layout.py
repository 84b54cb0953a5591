"""Track layout of a moetrace `.pftrace`: process tracks, lanes, overflow lanes, counters.

One process track per rank (tracks with a null rank grouped by pid), explicitly ordered
under a root ordering descriptor; one named child lane per moetrace track, ordered by
`sort_index` with sibling merging disabled (same-named lanes stay apart); overflow lanes
for slices that overlap partially; one counter track per (track, counter name). Every
lane keeps its moetrace track row as JSON in its TrackDescriptor `description`.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.model import Trace
from moetrace.trace.nesting import overflow_lane_name

SEQUENCE_ID = 1
"""`trusted_packet_sequence_id` of every packet: one writer, one interning scope."""
PROCESS_UUID_BASE = 1 << 40
COUNTER_UUID_BASE = 1 << 41
OVERFLOW_UUID_BASE = 1 << 42
OVERFLOW_LEVELS = 64
"""uuid stride per track: levels 0..63, so at most 63 overflow lanes per track."""
PID_LIMIT = 1 << 31
"""Perfetto pids are int32 in ProcessDescriptor; larger or non-numeric pids get a small int."""
END, BEGIN, INSTANT, COUNTER = 0, 1, 2, 3
"""Hot packet kinds (`PftracePlan.packet_kind`)."""


def group_pids(keys: list[str | None]) -> list[int]:
    """A unique positive int32 pid per process group, given each group's original pid text.

    Decimal pids in [1, 2^31) keep their value when no earlier group took it; the others
    (above 2^31, negative, non-numeric, null) get the smallest free ints, so no two
    groups ever share a Perfetto pid.
    """
    used: set[int] = set()
    chosen: list[int | None] = []
    for key in keys:
        value: int | None = None
        if key is not None and key.strip().isdigit():
            number = int(key)
            if 0 < number < PID_LIMIT and number not in used:
                value = number
                used.add(number)
        chosen.append(value)
    free = 1
    out: list[int] = []
    for value in chosen:
        if value is None:
            while free in used:
                free += 1
            value = free
            used.add(free)
        out.append(value)
    return out


def _lane_name(row: dict[str, Any]) -> str:
    if row["thread_name"]:
        return str(row["thread_name"])
    if row["unit"] is not None and row["tid"] is not None:
        return f"{row['unit']} {row['tid']}"
    if row["tid"] is not None:
        return f"tid {row['tid']}"
    return f"track {row['track']}"


def new_packet(ts: int) -> pb.TracePacket:
    packet = pb.TracePacket()
    packet.timestamp = ts
    packet.trusted_packet_sequence_id = SEQUENCE_ID
    return packet


def stacks_nest(kind: np.ndarray, row: np.ndarray, track: np.ndarray) -> bool:
    """True when, on every track, each END closes its own slice (a cheap exact check that
    no slices overlap partially, so `nesting.overflow_lanes` can be skipped).

    Per track, in packet order, a slice's END must bring the stack depth back to the depth
    its BEGIN found: two open slices always began at different depths, so the END that
    returns to a slice's depth can only close that slice.
    """
    sliced = (kind == BEGIN) | (kind == END)
    k, r = kind[sliced], row[sliced]
    if len(k) == 0:
        return True
    lanes = np.unique(track)  # few: one per track
    dense = np.searchsorted(lanes, np.asarray(track)[r])
    small = np.uint16 if len(lanes) <= 1 << 16 else np.int64  # uint16 sorts by radix
    by_track = np.argsort(dense.astype(small), kind="stable")
    k, r = k[by_track], r[by_track]
    step = np.where(k == BEGIN, 1, -1)
    after = np.cumsum(step)  # every track's stack starts and ends empty: no per-track base
    before = after - step
    begin_depth = np.zeros(len(track), dtype=np.int64)
    end_depth = np.zeros(len(track), dtype=np.int64)
    begin_depth[r[k == BEGIN]] = before[k == BEGIN]
    end_depth[r[k == END]] = after[k == END]
    return bool(np.array_equal(begin_depth, end_depth))


def overflow_uuid(track: int | np.ndarray, level: int | np.ndarray) -> np.ndarray:
    """uuid of a track's overflow lane `level` (>= 1)."""
    return (
        np.uint64(OVERFLOW_UUID_BASE)
        + np.asarray(track, np.uint64) * np.uint64(OVERFLOW_LEVELS)
        + np.asarray(level, np.uint64)
    )


def track_descriptors(
    trace: Trace, tracks: pl.DataFrame, t0: int, levels: dict[int, int]
) -> list[pb.TracePacket]:
    """Root ordering descriptor, process tracks, lane tracks (each followed by its overflow
    lanes, if any) and counter tracks."""
    out: list[pb.TracePacket] = []
    root = new_packet(t0)
    root.track_descriptor.uuid = 0
    root.track_descriptor.process_ordering = pb.TrackDescriptor.PROCESS_ORDERING_EXPLICIT
    out.append(root)
    rows = tracks.with_columns(
        pl.when(pl.col("rank").is_not_null())
        .then(pl.format("rank {}", pl.col("rank")))
        .otherwise(pl.format("pid {}", pl.col("pid").fill_null("?")))
        .alias("_group")
    ).sort(
        [pl.col("rank").is_null(), "rank", pl.col("sort_index").is_null(), "sort_index", "track"]
    )
    groups = rows["_group"].unique(maintain_order=True).to_list()
    first = rows.unique("_group", keep="first", maintain_order=True)
    process_uuid = {g: PROCESS_UUID_BASE + i for i, g in enumerate(groups)}
    pids = group_pids(first["pid"].to_list())
    lanes_of: dict[str, int] = {}
    for i, row in enumerate(first.iter_rows(named=True)):
        group = row["_group"]
        packet = new_packet(t0)
        desc = packet.track_descriptor
        desc.uuid = process_uuid[group]
        desc.process.pid = pids[i]
        if row["rank"] is not None:
            desc.process.process_name = group
        else:
            desc.process.process_name = row["process_name"] or group
        desc.child_ordering = pb.TrackDescriptor.EXPLICIT
        desc.sibling_order_rank = i
        desc.description = json.dumps({"group": group, "pid": row["pid"], "rank": row["rank"]})
        out.append(packet)
    track_group: dict[int, str] = {}
    for row in rows.iter_rows(named=True):
        group = row["_group"]
        track_group[row["track"]] = group
        rank_in_group = lanes_of.get(group, 0)
        lanes_of[group] = rank_in_group + 1
        packet = new_packet(t0)
        desc = packet.track_descriptor
        desc.uuid = int(row["track"]) + 1
        desc.parent_uuid = process_uuid[group]
        desc.name = _lane_name(row)
        desc.sibling_order_rank = rank_in_group
        desc.sibling_merge_behavior = pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
        fields = {k: v for k, v in row.items() if not k.startswith("_")}
        desc.description = json.dumps({"moetrace_track": fields}, ensure_ascii=False)
        out.append(packet)
        for level in range(1, levels.get(row["track"], 0) + 1):
            packet = new_packet(t0)
            desc = packet.track_descriptor
            desc.uuid = int(overflow_uuid(row["track"], level))
            desc.parent_uuid = process_uuid[group]
            desc.name = overflow_lane_name(_lane_name(row), level)
            desc.sibling_order_rank = lanes_of[group]
            lanes_of[group] += 1
            desc.sibling_merge_behavior = pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
            desc.description = json.dumps(
                {"moetrace_overflow": {"track": row["track"], "level": level}}
            )
            out.append(packet)
    series = counter_series(trace.counters)
    for i, row in enumerate(series.iter_rows(named=True)):
        group = track_group.get(row["track"])
        packet = new_packet(t0)
        desc = packet.track_descriptor
        desc.uuid = COUNTER_UUID_BASE + i
        if group is not None:
            desc.parent_uuid = process_uuid[group]
            rank_in_group = lanes_of.get(group, 0)
            lanes_of[group] = rank_in_group + 1
            desc.sibling_order_rank = rank_in_group
        desc.name = row["name"] if row["name"] is not None else f"counter {row['track']}"
        desc.sibling_merge_behavior = pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE
        desc.counter.SetInParent()
        desc.description = json.dumps(
            {"moetrace_counter": {"track": row["track"], "name": row["name"]}}, ensure_ascii=False
        )
        out.append(packet)
    return out


def counter_series(counters: pl.DataFrame) -> pl.DataFrame:
    """Distinct (track, name) counter series in the order their tracks get uuids."""
    return (
        counters.select("track", "name")
        .unique(maintain_order=True)
        .sort("track", pl.col("name").is_null(), "name", maintain_order=True)
    )
