"""Vectorised `.pftrace` reading: the TrackEvent packets of a whole trace decoded with numpy.

The per-packet reader (`read_packets.read_slow`) builds a protobuf object per packet and reads
its fields in Python, ~40 µs per event. Here the packets are found by protobuf's C parser
(`scan.packet_spans`), their fields and those of their TrackEvents and debug
annotations are decoded in lock step (`scan.scan`), and BEGIN/END pairs, interned
names, ids, flows and counters are joined as columns. The few packets that are not events
(descriptors, interned strings, moetrace's metadata) still go through the protobuf classes.

Anything this reader does not reproduce exactly (interning that changes after the first
event, unmatched BEGIN/END, nested or repeated debug annotations, bytes that do not parse)
returns None, and the caller uses the per-packet reader: same result, just slower.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.formats.pftrace.annotations import THREAD_MIN, event_notes
from moetrace.trace.formats.pftrace.arrays import codes, stable_order
from moetrace.trace.formats.pftrace.plan import FLOW_KIND_BITS
from moetrace.trace.formats.pftrace.protocol import (
    E_CAT_IIDS,
    E_CATS,
    E_DOUBLE_VALUE,
    E_FLOW_IN,
    E_FLOW_IN_OLD,
    E_FLOW_OUT,
    E_FLOW_OUT_OLD,
    E_INT_VALUE,
    E_NAME,
    E_NAME_IID,
    E_NOTES,
    E_TYPE,
    E_UUID,
    FLOW_WIRES,
    P_CLEARED,
    P_EVENT,
    P_FLAGS,
    P_INTERNED,
    P_SEQ,
    P_TIMESTAMP,
    TYPE_BEGIN,
    TYPE_COUNTER,
    TYPE_END,
    TYPE_INSTANT,
    WIRE_FIXED64,
    WIRE_LEN,
    WIRE_VARINT,
)
from moetrace.trace.formats.pftrace.read_packets import (
    PacketReader,
    TrackIds,
    counter_track,
    finish,
)
from moetrace.trace.formats.pftrace.scan import (
    Fields,
    Malformed,
    Scan,
    Unsupported,
    packet_spans,
    pick,
    scan,
)
from moetrace.trace.formats.pftrace.texts import interned, literal_over, span_strings
from moetrace.trace.model import DEP_KINDS, Trace

_PACKET_FIELDS = {P_TIMESTAMP, P_SEQ, P_EVENT, P_INTERNED, P_FLAGS, P_CLEARED}
_EVENT_FIELDS = {
    E_CAT_IIDS,
    E_NOTES,
    E_TYPE,
    E_NAME_IID,
    E_UUID,
    E_CATS,
    E_NAME,
    E_INT_VALUE,
    E_DOUBLE_VALUE,
    *FLOW_WIRES,
}


def read_vectorised(path: Path, data: bytes) -> Trace | None:
    """The `Trace` of a .pftrace file, or None when it needs the per-packet reader."""
    decoded = decode_vectorised(path, data)
    return None if decoded is None else decoded()


def decode_vectorised(path: Path, data: bytes) -> Callable[[], Trace] | None:
    """The columns of a .pftrace file, decoded, and what finishes them into its `Trace`
    (depths, order: it needs none of the file's bytes, so a caller can let them go first);
    None when the file needs the per-packet reader."""
    try:
        return _read(path, data)
    except (Unsupported, Malformed, UnicodeDecodeError, DecodeError):
        return None  # the per-packet reader names what is wrong and where


def _read(path: Path, data: bytes) -> Callable[[], Trace]:
    starts, ends = packet_spans(data)
    buf = np.frombuffer(data, dtype=np.uint8)
    packets = scan(buf, starts, ends, _PACKET_FIELDS)
    n_packets = len(starts)
    event_field = packets.select(P_EVENT, WIRE_LEN)
    is_event = np.zeros(n_packets, dtype=bool)
    is_event[event_field.msg] = True
    # Interning must be settled before the first event: then one table per sequence holds.
    first_event = int(np.argmax(is_event)) if is_event.any() else n_packets
    flags, _ = packets.last(P_FLAGS, WIRE_VARINT, n_packets)
    cleared = packets.last(P_CLEARED, WIRE_VARINT, n_packets)[0] != 0
    interned = np.zeros(n_packets, dtype=bool)
    interned[packets.select(P_INTERNED).msg] = True
    changes = interned | ((flags & np.uint64(1)) != 0) | cleared
    if bool(changes[first_event:].any()):
        raise Unsupported("interned data after the first event")
    del flags, cleared, interned, changes
    reader = PacketReader()
    for index in np.flatnonzero(~is_event).tolist():
        reader.packet(pb.TracePacket.FromString(data[starts[index] : ends[index]]))
    del is_event, starts, ends
    event_packets = event_field.msg  # one TrackEvent per packet (the last one wins)
    if bool((np.diff(event_packets) <= 0).any()):
        raise Unsupported("several track_event fields in a packet")
    ts = packets.last(P_TIMESTAMP, WIRE_VARINT, n_packets)[0].view(np.int64)[event_packets]
    seq = packets.last(P_SEQ, WIRE_VARINT, n_packets)[0][event_packets].astype(np.int64)
    del packets, event_packets
    fields = scan(buf, event_field.off, event_field.off + event_field.length, _EVENT_FIELDS)
    del event_field
    for number, wire in FLOW_WIRES.items():
        if fields.count(number) != len(fields.select(number, wire).msg):
            raise Unsupported("flow ids of an unexpected wire type")
    n = len(ts)
    # the type as one byte (types past 255 are none of those read: 255 stands for them)
    kind = np.minimum(fields.last(E_TYPE, WIRE_VARINT, n)[0], np.uint64(255)).astype(np.uint8)
    uuid = fields.last(E_UUID, WIRE_VARINT, n)[0]
    fields.drop(E_TYPE, E_UUID)
    rows = np.flatnonzero((kind == TYPE_BEGIN) | (kind == TYPE_INSTANT))
    position = np.full(n, -1, dtype=np.int32 if len(rows) < 1 << 31 else np.int64)
    position[rows] = np.arange(len(rows))
    ev_seq = seq[rows]
    del seq
    annotations = _of_rows(fields.select(E_NOTES, WIRE_LEN), position)
    fields.drop(E_NOTES)
    threads = 1 if len(annotations.msg) >= THREAD_MIN else 0  # 0: run in this thread
    with ThreadPoolExecutor(max_workers=threads) if threads else _InPlace() as pool:
        # The annotations (id, kind, flops, bytes, args: a third of the work) are decoded
        # beside the rest: numpy and Polars let go of the GIL in their loops.
        notes_job = pool.submit(event_notes, data, buf, annotations, reader, ev_seq, len(rows))
        del annotations
        unique_uuid, uuid_code = codes(uuid)
        del uuid
        tracks_of = _Tracks(unique_uuid, uuid_code)
        slices = _pair_slices(kind, tracks_of, ts)
        counter_rows = np.flatnonzero(kind == TYPE_COUNTER)
        counter_values = _counter_values(fields, counter_rows, n)
        del kind
        tracks = TrackIds(reader.descriptors)
        columns, flow_ids = _event_columns(
            data, fields, rows, position, ev_seq, reader, tracks, tracks_of
        )
        del fields, position
        notes = notes_job.result()
    events = pl.DataFrame(
        {
            "id": notes["id"],
            "track": columns["track"],
            "name": columns["name"],
            "cat": columns["cat"],
            "kind": notes["kind"],
            "ts": ts[rows],
            "dur": slices[rows] - ts[rows],
            "flops": notes["flops"],
            "bytes": notes["bytes"],
            "args": notes["args"],
        },
        schema_overrides={"ts": pl.Int64, "dur": pl.Int64, "id": pl.Int64},
    )
    del notes, columns, slices
    moetrace = (reader.payload or {}).get("writer") == "moetrace"
    deps = _deps(flow_ids, events, ts[rows], moetrace)
    counters = _counters(counter_rows, counter_values, tracks_of, ts, reader, tracks)
    del ts, rows, tracks_of
    return functools.partial(finish, path, reader, tracks, events, deps, counters)


class _InPlace:
    """A pool that runs each job at once in the calling thread (small traces: a thread would
    cost more than the work it overlaps)."""

    def __enter__(self) -> _InPlace:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, job: Callable[..., Any], *args: Any) -> Future[Any]:
        """`job(*args)` done now, as a finished future (its exception inside, if it raised)."""
        done: Future[Any] = Future()
        try:
            done.set_result(job(*args))
        except Exception as exc:  # the caller's .result() raises it, as a pool's would
            done.set_exception(exc)
        return done


class _Tracks:
    """The track uuid of every event as a dense code (`code`, into `uuids`), and the track ids
    given to them in order of first use."""

    def __init__(self, uuids: np.ndarray, code: np.ndarray) -> None:
        self.uuids = uuids
        self.code = code

    def first_use(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes used by the events `rows`, in order of their first use; code per row)."""
        codes = self.code[rows]
        first = np.full(len(self.uuids), -1, dtype=np.int64)
        first[codes[::-1]] = np.arange(len(rows) - 1, -1, -1)  # the earliest write wins
        used = np.flatnonzero(first >= 0)
        return used[np.argsort(first[used], kind="stable")], codes


def _pair_slices(kind: np.ndarray, tracks_of: _Tracks, ts: np.ndarray) -> np.ndarray:
    """End time of every event (its own ts for all but a BEGIN, which gets its END's).

    Per track uuid, in file order, each END closes the latest open BEGIN. Balanced stacks
    only: an END with nothing open or a BEGIN never closed needs the per-packet reader
    (it words a warning per case)."""
    end = ts.copy()
    is_begin = kind == TYPE_BEGIN
    rows = np.flatnonzero(is_begin | (kind == TYPE_END))
    if len(rows) == 0:
        return end
    n_codes = len(tracks_of.uuids)
    code = tracks_of.code[rows]
    by_track = stable_order(code, n_codes)  # radix sort: file order within a track
    group = code[by_track]
    del code
    step: np.ndarray = is_begin[rows][by_track].view(np.int8) * np.int8(2) - np.int8(1)  # +-1
    level: np.ndarray = np.cumsum(step, dtype=np.int32 if len(rows) < 1 << 31 else np.int64)
    group_start = np.ones(len(rows), dtype=bool)
    np.not_equal(group[1:], group[:-1], out=group_start[1:])
    group_end = np.roll(group_start, -1)
    del group_start
    if bool((level < 0).any()) or bool((level[group_end] != 0).any()):
        raise Unsupported("unbalanced BEGIN/END")
    del group_end
    # Balanced: a BEGIN pushed to level L pairs with the next END popping level L. Sorted by
    # (track, depth), file order within: one radix sort of a (track, depth) key when it fits
    # in 16 bits, else by depth, then stably by track (two radix sorts).
    depth = level
    np.add(depth, step < 0, out=depth)  # an END pops the level it closes: its level after, plus one
    del step
    levels = int(depth.max()) + 1
    if n_codes * levels <= 1 << 16:
        np.add(depth, group * levels, out=depth)
        pairs = by_track[stable_order(depth, n_codes * levels)]
    else:
        by_depth = stable_order(depth, levels)
        pairs = by_track[by_depth[stable_order(group[by_depth], n_codes)]]
        del by_depth
    del depth, group, by_track
    pairs = rows[pairs]
    begins, finals = pairs[0::2], pairs[1::2]
    if not (bool(is_begin[begins].all()) and bool((kind[finals] == TYPE_END).all())):
        raise Unsupported("BEGIN/END pairing")
    end[begins] = ts[finals]
    return end


def _of_rows(f: Fields, position: np.ndarray) -> Fields:
    """The rows of `f` of the events whose `position` (their row in the events frame) is not
    -1, numbered by that position."""
    at = position[f.msg]
    if len(at) == 0 or int(at.min()) >= 0:  # all of them (annotations of BEGINs): no gathers
        return Fields(at, f.field, f.wire, f.value, f.off, f.length)
    picked = np.flatnonzero(at >= 0)
    return Fields(
        at[picked], *(pick(c, picked) for c in (f.field, f.wire, f.value, f.off, f.length))
    )


def _event_columns(
    data: bytes,
    fields: Scan,
    rows: np.ndarray,
    position: np.ndarray,
    ev_seq: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
    tracks_of: _Tracks,
) -> tuple[dict[str, Any], dict[str, Fields]]:
    """track, name and cat of the BEGIN/INSTANT events `rows` (at `position`), and their
    flow ids."""
    n_all = len(position)
    m = len(rows)

    def of_rows(f: Fields) -> Fields:
        return _of_rows(f, position)

    # Name: literal, else interned (missing -> "").
    name = interned(reader.names, ev_seq, fields.last(E_NAME_IID, WIRE_VARINT, n_all)[0][rows], "")
    literal = of_rows(fields.select(E_NAME, WIRE_LEN))
    fields.drop(E_NAME_IID, E_NAME)
    name = literal_over(name, data, literal)
    cat = _categories(
        data,
        of_rows(fields.select(E_CAT_IIDS)),
        of_rows(fields.select(E_CATS)),
        reader,
        ev_seq,
        m,
    )
    fields.drop(E_CAT_IIDS, E_CATS)
    used, codes = tracks_of.first_use(rows)
    track_of = np.zeros(len(tracks_of.uuids), dtype=np.int64)
    for k in used.tolist():  # new tracks in order of first use
        track_of[k] = tracks.track(int(tracks_of.uuids[k]))
    flow_ids = {
        "out": of_rows(fields.select(E_FLOW_OUT, WIRE_FIXED64)),
        "out_old": of_rows(fields.select(E_FLOW_OUT_OLD, WIRE_VARINT)),
        "in": of_rows(fields.select(E_FLOW_IN, WIRE_FIXED64)),
        "in_old": of_rows(fields.select(E_FLOW_IN_OLD, WIRE_VARINT)),
    }
    fields.drop(*FLOW_WIRES)
    return {"track": track_of[codes], "name": name, "cat": cat}, flow_ids


def _categories(
    data: bytes, iids: Fields, literal: Fields, reader: PacketReader, ev_seq: np.ndarray, m: int
) -> pl.Series:
    """`cat`: the event's interned categories then its literal ones, joined by ","."""
    if len(iids.msg) == 0 and len(literal.msg) == 0:
        return pl.Series("cat", [None] * m, dtype=pl.String)
    if iids.msg.size and bool((iids.wire != WIRE_VARINT).any()):
        raise Unsupported("packed category iids")
    count = np.bincount(iids.msg, minlength=m) + np.bincount(literal.msg, minlength=m)
    if int(count.max()) <= 1:
        one_iid = np.zeros(m, dtype=np.uint64)
        one_iid[iids.msg] = iids.value
        text = interned(reader.cats, ev_seq, one_iid, "")
        text = text.scatter(np.flatnonzero(count == 0), None) if (count == 0).any() else text
        if literal.msg.size:
            text = text.scatter(literal.msg, span_strings(data, literal.off, literal.length))
        return text.alias("cat")
    # Several categories on some events: join them per event (rare; only those events).
    parts: dict[int, list[str]] = {}
    seqs = ev_seq.tolist()
    for row, iid in zip(iids.msg.tolist(), iids.value.tolist(), strict=True):
        parts.setdefault(row, []).append(reader.cats[seqs[row]].get(iid, ""))
    for row, text in zip(
        literal.msg.tolist(), span_strings(data, literal.off, literal.length), strict=True
    ):
        parts.setdefault(row, []).append(text)
    out: list[str | None] = [None] * m
    for row, texts in parts.items():
        out[row] = ",".join(texts)
    return pl.Series("cat", out, dtype=pl.String)


def _deps(
    flow_ids: dict[str, Fields], events: pl.DataFrame, event_ts: np.ndarray, moetrace: bool
) -> pl.DataFrame:
    """Dependency edges from flow ids: moetrace's one-to-one flows carry their kind and order
    in the id; others chain their points by (ts, start before end, event id)."""
    ids = events["id"].to_numpy()
    hop_rows: list[np.ndarray] = []
    hop_flow: list[np.ndarray] = []
    hop_role: list[np.ndarray] = []
    for key, role_code in (("out", 0), ("out_old", 0), ("in", 1), ("in_old", 1)):
        points = flow_ids[key]
        hop_rows.append(points.msg)
        hop_flow.append(points.value)
        hop_role.append(np.full(len(points.msg), role_code, dtype=np.int64))
    rows = np.concatenate(hop_rows)
    flow = np.concatenate(hop_flow).astype(np.uint64)
    role = np.concatenate(hop_role)
    event = ids[rows].astype(np.int64)
    hop_ts = event_ts[rows]
    if moetrace and len(rows):
        order = np.lexsort((role, flow))
        fs, rs, es = flow[order], role[order], event[order]
        single = (
            len(fs) % 2 == 0
            and bool((fs[0::2] == fs[1::2]).all())
            and bool((rs[0::2] == 0).all() & (rs[1::2] == 1).all())
            and bool((fs[2::2] != fs[1:-1:2]).all())
        )
        mask = np.uint64((1 << FLOW_KIND_BITS) - 1)
        code = (fs[0::2] & mask).astype(np.int64)
        if not single or bool((code >= len(DEP_KINDS)).any()):
            raise Unsupported("moetrace flows that are not one-to-one")
        written = np.argsort(fs[0::2] >> np.uint64(FLOW_KIND_BITS), kind="stable")
        return pl.DataFrame(
            {
                "src": es[0::2][written],
                "dst": es[1::2][written],
                "kind": np.array(DEP_KINDS, dtype=object)[code[written]].tolist(),
            },
            schema={"src": pl.Int64, "dst": pl.Int64, "kind": pl.String},
        )
    order = np.lexsort((event, role, hop_ts, flow))
    fs, es = flow[order], event[order]
    link = np.flatnonzero(fs[1:] == fs[:-1])
    return pl.DataFrame(
        {"src": es[link], "dst": es[link + 1], "kind": ["flow"] * len(link)},
        schema={"src": pl.Int64, "dst": pl.Int64, "kind": pl.String},
    )


def _counter_values(fields: Scan, rows: np.ndarray, n: int) -> np.ndarray:
    """The value of the counter events `rows`: the double value, else the integer one (0
    when neither)."""
    double, has_double = fields.last(E_DOUBLE_VALUE, WIRE_FIXED64, n)
    integer, _ = fields.last(E_INT_VALUE, WIRE_VARINT, n)
    fields.drop(E_DOUBLE_VALUE, E_INT_VALUE)
    return np.asarray(
        np.where(
            has_double[rows],
            double[rows].view(np.float64),
            integer[rows].view(np.int64).astype(float),
        )
    )


def _counters(
    rows: np.ndarray,
    value: np.ndarray,
    tracks_of: _Tracks,
    ts: np.ndarray,
    reader: PacketReader,
    tracks: TrackIds,
) -> pl.DataFrame:
    """Counter samples of the counter events `rows` with their values."""
    used, codes = tracks_of.first_use(rows)
    track = np.zeros(len(tracks_of.uuids), dtype=np.int64)
    names: list[str | None] = [None] * len(tracks_of.uuids)
    for k in used.tolist():
        info = counter_track(reader.descriptors, tracks, int(tracks_of.uuids[k]))
        track[k], names[k] = info["track"], info["name"]
    return pl.DataFrame(
        {
            "track": track[codes],
            "name": pl.Series(names, dtype=pl.String).gather(codes),
            "ts": ts[rows],
            "value": value,
        },
        schema={"track": pl.Int64, "name": pl.String, "ts": pl.Int64, "value": pl.Float64},
    )
