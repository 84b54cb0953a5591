"""The layout of a moetrace `.pftrace`, shared by the official and the vectorised encoder.

A `PftracePlan` fixes everything both encoders must agree on byte for byte: the descriptor
packets (built with the `perfetto` protos), the interning tables, the per-event field arrays
and the global packet order (time, then END before BEGIN, parent BEGIN before child BEGIN,
child END before parent END). The two encoders only differ in how they serialise the hot
BEGIN/END/INSTANT/COUNTER packets.

The track tree is laid out by `layout`. Each moetrace track's row is kept as JSON
in its TrackDescriptor `description` (it sits on the track it describes and the UI shows it
as the track's description); the trace `meta` is kept in a Chrome metadata packet
(`chrome_events.metadata`, shown by Perfetto's metadata page, no fake track or event
needed). Events keep id, kind, flops, bytes and args as interned debug annotations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.formats.chrome.deep import call_deep
from moetrace.trace.formats.pftrace.layout import (
    BEGIN,
    COUNTER,
    COUNTER_UUID_BASE,
    END,
    INSTANT,
    OVERFLOW_LEVELS,
    counter_series,
    new_packet,
    overflow_uuid,
    stacks_nest,
    track_descriptors,
)
from moetrace.trace.model import DEP_KINDS, Trace
from moetrace.trace.nesting import overflow_lanes

SEQ_INCREMENTAL_STATE_CLEARED = 1
SEQ_NEEDS_INCREMENTAL_STATE = 2
META_NAME = "moetrace"
"""Name of the Chrome metadata entry that holds the writer tag and the trace `meta`."""
FORMAT_VERSION = 1
ANNOTATION_NAMES = ("id", "kind", "flops", "bytes", "args")
"""Debug annotations of every slice, interned with iids 1..5 in this order."""
FLOW_KIND_BITS = 3
"""A flow id is (dep row + 1) << 3 | dep kind code: direction and kind survive the trip."""


@dataclass
class PftracePlan:
    """Everything needed to encode a trace; arrays are per event / per counter row."""

    head: list[pb.TracePacket]
    # events, in frame row order (events on tracks missing from `tracks` get a lane too)
    ts: np.ndarray  # uint64 view of int64 ns
    end: np.ndarray  # uint64 view of ts + dur
    lane_uuid: np.ndarray  # uint64
    name_iid: np.ndarray  # uint64
    cat_iid: np.ndarray  # uint64, 0 = no category
    event_id: np.ndarray  # uint64
    kind: pl.Series  # String, nullable
    flops: np.ndarray  # float64
    flops_set: np.ndarray  # bool
    bytes_: np.ndarray  # float64
    bytes_set: np.ndarray  # bool
    args: pl.Series  # String, nullable
    out_row: np.ndarray  # event row of each outgoing flow, sorted by (row, flow id)
    out_flow: np.ndarray  # uint64 flow ids
    in_row: np.ndarray
    in_flow: np.ndarray
    # counters, in frame row order
    counter_ts: np.ndarray  # uint64
    counter_uuid: np.ndarray  # uint64
    counter_value: np.ndarray  # float64
    # hot packets in file order
    packet_kind: np.ndarray  # int8: END, BEGIN, INSTANT, COUNTER
    packet_row: np.ndarray  # event row (END/BEGIN/INSTANT) or counter row (COUNTER)


def _as_u64(values: np.ndarray) -> np.ndarray:
    """int64 ns -> uint64 two's complement, how the uint64 `timestamp` field stores them."""
    return np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)


def _intern(values: pl.Series) -> tuple[list[str], np.ndarray]:
    """Distinct non-null strings (sorted, iids 1..n) and each row's iid (0 for null)."""
    table = sorted(values.drop_nulls().unique().to_list())
    if not table:
        return table, np.zeros(len(values), dtype=np.uint64)
    codes = values.cast(pl.Enum(table)).to_physical().cast(pl.Int64) + 1
    return table, codes.fill_null(0).to_numpy().astype(np.uint64)


def _meta_packet(trace: Trace, t0: int) -> pb.TracePacket:
    packet = new_packet(t0)
    entry = packet.chrome_events.metadata.add()
    entry.name = META_NAME
    payload = {"writer": "moetrace", "version": FORMAT_VERSION, "meta": trace.meta}
    entry.json_value = call_deep(  # meta may hold a deeply nested top-level JSON value
        lambda: json.dumps(payload, default=str, ensure_ascii=False, skipkeys=True)
    )
    return packet


def _flows(trace: Trace, ids: np.ndarray) -> tuple[np.ndarray, ...]:
    """Outgoing and incoming flow (event row, flow id) pairs, sorted by row then id.

    Deps whose ends are not written (missing events) are dropped: they cannot be drawn.
    """
    deps = trace.deps
    empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    if deps.height == 0 or len(ids) == 0:
        return (*empty, *empty)
    top = int(ids.max())
    if int(ids.min()) >= 0 and top < 4 * len(ids) + 1024:  # dense ids: direct lookup table
        lookup = np.full(top + 2, -1, dtype=np.int64)
        lookup[ids] = np.arange(len(ids))

        def rows_of(col: str) -> tuple[np.ndarray, np.ndarray]:
            wanted = deps[col].to_numpy().astype(np.int64)
            found = lookup[np.clip(wanted, 0, top + 1)]
            return np.maximum(found, 0), found >= 0

    else:
        order = np.argsort(ids, kind="stable")
        sorted_ids = ids[order]

        def rows_of(col: str) -> tuple[np.ndarray, np.ndarray]:
            wanted = deps[col].to_numpy().astype(np.int64)
            pos = np.clip(np.searchsorted(sorted_ids, wanted), 0, len(ids) - 1)
            return order[pos], sorted_ids[pos] == wanted

    src, src_ok = rows_of("src")
    dst, dst_ok = rows_of("dst")
    ok = src_ok & dst_ok
    code = deps["kind"].to_physical().fill_null(DEP_KINDS.index("flow")).to_numpy()
    flow = ((np.arange(deps.height, dtype=np.uint64) + 1) << FLOW_KIND_BITS) | code.astype(
        np.uint64
    )
    src, dst, flow = src[ok], dst[ok], flow[ok]
    o = np.lexsort((flow, src))
    i = np.lexsort((flow, dst))
    return src[o], flow[o], dst[i], flow[i]


def make_plan(trace: Trace) -> PftracePlan:
    """Lay out `trace` as Perfetto packets (see the module docstring)."""
    ev = trace.events
    known = trace.tracks["track"]
    orphans = ev.filter(~pl.col("track").is_in(known.implode()))["track"].unique().sort()
    tracks = pl.concat(
        [trace.tracks, pl.DataFrame({"track": orphans}).cast({"track": pl.UInt32})],
        how="diagonal_relaxed",
    ).cast(trace.tracks.schema)
    ts64 = ev["ts"].to_numpy().astype(np.int64)
    dur64 = ev["dur"].to_numpy().astype(np.int64)
    counters = trace.counters
    all_times = np.concatenate([ts64, counters["ts"].to_numpy().astype(np.int64)])
    t0 = int(_as_u64(all_times.min(keepdims=True))[0]) if len(all_times) else 0
    names, name_iid = _intern(ev["name"].fill_null(""))
    cats, cat_iid = _intern(ev["cat"])
    interned = new_packet(t0)
    interned.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED
    for iid, cat in enumerate(cats, start=1):
        entry = interned.interned_data.event_categories.add()
        entry.iid, entry.name = iid, cat
    for iid, name in enumerate(names, start=1):
        entry = interned.interned_data.event_names.add()
        entry.iid, entry.name = iid, name
    for iid, name in enumerate(ANNOTATION_NAMES, start=1):
        entry = interned.interned_data.debug_annotation_names.add()
        entry.iid, entry.name = iid, name
    track_ids = ev["track"].to_numpy().astype(np.int64)
    packet_kind, packet_row = packet_order(ts64, dur64, counters["ts"].to_numpy())
    if stacks_nest(packet_kind, packet_row, track_ids):
        level = np.zeros(len(track_ids), dtype=np.int64)
    else:
        level, _ = overflow_lanes(track_ids, ts64, dur64, max_lane=OVERFLOW_LEVELS - 1)
    lane_uuid = np.where(
        level > 0, overflow_uuid(track_ids, level), (track_ids + 1).astype(np.uint64)
    )
    top = pl.DataFrame({"track": track_ids, "level": level}).group_by("track").agg(pl.max("level"))
    levels = {int(t): int(v) for t, v in top.filter(pl.col("level") > 0).iter_rows()}
    head = [interned, *track_descriptors(trace, tracks, t0, levels), _meta_packet(trace, t0)]

    ids = ev["id"].to_numpy().astype(np.int64)
    out_row, out_flow, in_row, in_flow = _flows(trace, ids)
    series = counter_series(counters)
    counter_uuid = counters.select("track", "name").join(
        series.with_row_index("_i"),
        on=["track", "name"],
        how="left",
        nulls_equal=True,
        maintain_order="left",
    )["_i"].to_numpy().astype(np.uint64) + np.uint64(COUNTER_UUID_BASE)
    flops, bytes_ = ev["flops"], ev["bytes"]
    plan = PftracePlan(
        head=head,
        ts=_as_u64(ts64),
        end=_as_u64(ts64 + dur64),
        lane_uuid=lane_uuid,
        name_iid=name_iid,
        cat_iid=cat_iid,
        event_id=ids.astype(np.uint64),
        kind=ev["kind"].cast(pl.String),
        flops=flops.fill_null(0.0).to_numpy().astype(np.float64),
        flops_set=flops.is_not_null().to_numpy(),
        bytes_=bytes_.fill_null(0.0).to_numpy().astype(np.float64),
        bytes_set=bytes_.is_not_null().to_numpy(),
        args=ev["args"],
        out_row=out_row,
        out_flow=out_flow,
        in_row=in_row,
        in_flow=in_flow,
        counter_ts=_as_u64(counters["ts"].to_numpy().astype(np.int64)),
        counter_uuid=counter_uuid,
        counter_value=counters["value"].fill_null(float("nan")).to_numpy().astype(np.float64),
        packet_kind=np.zeros(0, dtype=np.int8),
        packet_row=np.zeros(0, dtype=np.int64),
    )
    plan.packet_kind, plan.packet_row = packet_kind, packet_row
    return plan


def packet_order(
    ts: np.ndarray, dur: np.ndarray, counter_ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Kinds and rows of the hot packets in file order.

    Sorted by time; at equal times ENDs come first, then BEGINs/INSTANTs, then counters.
    BEGINs follow the model's nesting order (longer first, then row order), ENDs the
    reverse of it, so parents open before and close after their children.
    """
    n = len(ts)
    ts = np.asarray(ts, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    begin_rank = np.empty(n, dtype=np.int64)
    begin_rank[_arg_sort([ts, -dur])] = np.arange(n)
    sliced = np.flatnonzero(dur > 0)
    nc = len(counter_ts)
    time = np.concatenate([ts, (ts + dur)[sliced], np.asarray(counter_ts, np.int64)])
    phase = np.concatenate(
        [np.ones(n, np.int64), np.zeros(len(sliced), np.int64), np.full(nc, 2, np.int64)]
    )
    tie = np.concatenate([begin_rank, -begin_rank[sliced], np.arange(nc, dtype=np.int64)])
    kind = np.concatenate(
        [
            np.where(dur > 0, BEGIN, INSTANT).astype(np.int8),
            np.full(len(sliced), END, np.int8),
            np.full(nc, COUNTER, np.int8),
        ]
    )
    row = np.concatenate([np.arange(n, dtype=np.int64), sliced, np.arange(nc, dtype=np.int64)])
    order = _arg_sort([time, phase * (2 * n + 1) + tie])
    return kind[order], row[order]


def _arg_sort(keys: list[np.ndarray]) -> np.ndarray:
    """Stable indices that sort rows by `keys` (first key first; ties keep row order).

    When the keys' value ranges multiply to < 2^62 they are packed into one int64 and
    sorted by numpy; otherwise polars' multi-column sort (still several times faster than
    `np.lexsort`).
    """
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    bounds = [(int(k.min()), int(k.max())) for k in keys]
    span = 1
    for low, high in bounds:
        span *= high - low + 1
    if span < 1 << 62:
        packed = np.zeros(n, dtype=np.int64)
        for key, (low, high) in zip(keys, bounds, strict=True):
            packed = packed * (high - low + 1) + (key - low)
        return np.argsort(packed, kind="stable")
    frame = pl.DataFrame({f"k{i}": k for i, k in enumerate(keys)})
    order = frame.select(pl.arg_sort_by(frame.columns, maintain_order=True)).to_series()
    return order.to_numpy().astype(np.int64)
