"""The per-packet `.pftrace` reader, with the `perfetto` protos (`Trace.FromString`): the
fallback (and reference) for files the vectorised reader does not take, and the pieces both
readers share (`PacketReader` for descriptors and interning, `TrackIds`, `finish`).

Exact for files moetrace wrote (track rows from TrackDescriptor descriptions, event ids,
kinds, flops, bytes and args from debug annotations, dep kinds and order from flow ids,
`meta` from the Chrome metadata packet). Other TrackEvent traces load too: lanes from
their descriptors, kind "other", flows chained by time.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.formats.chrome.deep import call_deep
from moetrace.trace.formats.pftrace.plan import FLOW_KIND_BITS, META_NAME
from moetrace.trace.model import DEP_KINDS, Trace, TraceFormatError

_BEGIN = pb.TrackEvent.TYPE_SLICE_BEGIN
_END = pb.TrackEvent.TYPE_SLICE_END
_INSTANT = pb.TrackEvent.TYPE_INSTANT
_COUNTER = pb.TrackEvent.TYPE_COUNTER
_SCALAR_VALUES = (9, 6, 3, 4, 5, 2, 7)
"""DebugAnnotation value fields: legacy_json, string, uint, int, double, bool, pointer."""
_NO_VALUE = object()


def _signed(value: int) -> int:
    """uint64 timestamp -> int64 ns (moetrace writes negative times as two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _annotation_value(note: pb.DebugAnnotation) -> Any:
    which = note.WhichOneof("value")
    if which == "legacy_json_value":
        return note.legacy_json_value
    if which == "nested_value" or which is None:
        if note.dict_entries:
            return {e.name: _annotation_value(e) for e in note.dict_entries}
        if note.array_values:
            return [_annotation_value(e) for e in note.array_values]
        return None
    return getattr(note, which)


def _load(path: Path, data: bytes) -> pb.Trace:
    try:
        message = pb.Trace.FromString(data)
    except DecodeError as exc:
        raise TraceFormatError(path, f"not a Perfetto protobuf trace ({exc})") from None
    if not message.packet:
        raise TraceFormatError(path, "no trace packets found", "byte 0")
    return message


class PacketReader:
    """One pass over the packets, collecting events, counters, descriptors and meta."""

    def __init__(self) -> None:
        self.names: dict[int, dict[int, str]] = defaultdict(dict)
        self.cats: dict[int, dict[int, str]] = defaultdict(dict)
        self.notes: dict[int, dict[int, str]] = defaultdict(dict)
        self.descriptors: dict[int, pb.TrackDescriptor] = {}
        self.payload: dict[str, Any] | None = None
        self.events: list[dict[str, Any]] = []
        self.counters: list[tuple[int, int, float]] = []
        self.stacks: dict[int, list[int]] = defaultdict(list)
        self.warnings: list[str] = []

    def intern(self, seq: int, packet: pb.TracePacket) -> None:
        if packet.sequence_flags & 1 or packet.incremental_state_cleared:
            self.names[seq], self.cats[seq], self.notes[seq] = {}, {}, {}
        if packet.HasField("interned_data"):
            data = packet.interned_data
            self.names[seq].update((e.iid, e.name) for e in data.event_names)
            self.cats[seq].update((e.iid, e.name) for e in data.event_categories)
            self.notes[seq].update((e.iid, e.name) for e in data.debug_annotation_names)

    def event(self, seq: int, ts: int, te: pb.TrackEvent) -> None:
        # One ListFields() call per message is much cheaper than many attribute reads.
        fields = {f.number: v for f, v in te.ListFields()}
        uuid = fields.get(11, 0)
        kind = fields.get(9, 0)
        if kind == _END:
            stack = self.stacks[uuid]
            if stack:
                self.events[stack.pop()]["end"] = ts
            else:
                self.warnings.append(f"END at {ts} ns on track {uuid} without a BEGIN")
            return
        if kind == _COUNTER:
            value = fields[44] if 44 in fields else float(fields.get(30, 0))
            self.counters.append((uuid, ts, value))
            return
        if kind not in (_BEGIN, _INSTANT):
            return
        name = fields[23] if 23 in fields else self.names[seq].get(fields.get(10, 0), "")
        cats = [self.cats[seq].get(i, "") for i in fields.get(3, ())] + list(fields.get(22, ()))
        notes: dict[str, Any] = {}
        names = self.notes[seq]
        for note in fields.get(4, ()):
            parts = {f.number: v for f, v in note.ListFields()}
            key = parts[10] if 10 in parts else names.get(parts.get(1, 0), "")
            value = next((parts[n] for n in _SCALAR_VALUES if n in parts), _NO_VALUE)
            notes[key] = _annotation_value(note) if value is _NO_VALUE else value
        record = {
            "uuid": uuid,
            "ts": ts,
            "end": ts if kind == _INSTANT else None,
            "name": name,
            "cat": ",".join(cats) if cats else None,
            "notes": notes,
            "out": [*fields.get(47, ()), *fields.get(36, ())],
            "in": [*fields.get(48, ()), *fields.get(42, ())],
        }
        self.events.append(record)
        if kind == _BEGIN:
            self.stacks[uuid].append(len(self.events) - 1)

    def packet(self, packet: pb.TracePacket) -> None:
        """Take one packet: interned strings, an event, a track descriptor or the metadata."""
        seq = packet.trusted_packet_sequence_id
        self.intern(seq, packet)
        which = packet.WhichOneof("data")
        if which == "track_event":
            self.event(seq, _signed(packet.timestamp), packet.track_event)
        elif which == "track_descriptor":
            self.descriptors[packet.track_descriptor.uuid] = packet.track_descriptor
        elif which == "chrome_events":
            for entry in packet.chrome_events.metadata:
                if entry.name == META_NAME and entry.HasField("json_value"):
                    # moetrace's meta: may nest deep (see plan.py)
                    self.payload = call_deep(functools.partial(json.loads, entry.json_value))

    def run(self, message: pb.Trace) -> None:
        for packet in message.packet:
            self.packet(packet)
        for uuid, stack in self.stacks.items():
            for index in stack:
                self.events[index]["end"] = self.events[index]["ts"]
            if stack:
                self.warnings.append(f"{len(stack)} slices on track {uuid} never ended (dur 0)")


def _description(desc: pb.TrackDescriptor | None, key: str) -> dict[str, Any] | None:
    if desc is None or not desc.description.startswith("{"):
        return None
    try:
        value = json.loads(desc.description)
    except ValueError:
        return None
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else None


class TrackIds:
    """moetrace track ids of descriptor uuids; foreign lanes get fresh ids."""

    def __init__(self, descriptors: dict[int, pb.TrackDescriptor]) -> None:
        self.descriptors = descriptors
        self.rows: dict[int, dict[str, Any]] = {}
        self.of_uuid: dict[int, int] = {}
        for uuid, desc in descriptors.items():
            row = _description(desc, "moetrace_track")
            if row is not None and "track" in row:
                self.rows[int(row["track"])] = row
                self.of_uuid[uuid] = int(row["track"])
            overflow = _description(desc, "moetrace_overflow")
            if overflow is not None and "track" in overflow:
                self.of_uuid[uuid] = int(overflow["track"])  # merged back into its track

    def track(self, uuid: int) -> int:
        if uuid in self.of_uuid:
            return self.of_uuid[uuid]
        new = max(self.rows, default=-1) + 1
        desc = self.descriptors.get(uuid, pb.TrackDescriptor())
        parent = self.descriptors.get(desc.parent_uuid) if desc.HasField("parent_uuid") else None
        process = desc.process if desc.HasField("process") else None
        if process is None and parent is not None and parent.HasField("process"):
            process = parent.process
        thread = desc.thread if desc.HasField("thread") else None
        pid = thread.pid if thread is not None else process.pid if process is not None else None
        self.rows[new] = {
            "track": new,
            "pid": None if pid is None else str(pid),
            "tid": str(thread.tid) if thread is not None else None,
            "process_name": process.process_name if process is not None else None,
            "thread_name": (thread.thread_name if thread is not None else None) or desc.name,
        }
        self.of_uuid[uuid] = new
        return new


def _deps(events: list[dict[str, Any]], ids: list[int], moetrace: bool) -> dict[str, list[Any]]:
    hops: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # flow -> (ts, role, id)
    for record, event_id in zip(events, ids, strict=True):
        for flow in record["out"]:
            hops[flow].append((record["ts"], 0, event_id))
        for flow in record["in"]:
            hops[flow].append((record["ts"], 1, event_id))
    src: list[int] = []
    dst: list[int] = []
    kind: list[str] = []
    order: list[int] = []
    for flow, hop in hops.items():
        starts = [h[2] for h in hop if h[1] == 0]
        ends = [h[2] for h in hop if h[1] == 1]
        code = flow & ((1 << FLOW_KIND_BITS) - 1)
        if moetrace and len(starts) == 1 and len(ends) == 1 and code < len(DEP_KINDS):
            src.append(starts[0])
            dst.append(ends[0])
            kind.append(DEP_KINDS[code])
            order.append(flow >> FLOW_KIND_BITS)
            continue
        chain = sorted(hop)
        for a, b in itertools.pairwise(chain):
            src.append(a[2])
            dst.append(b[2])
            kind.append("flow")
            order.append(flow)
    rank = np.argsort(np.array(order, dtype=np.uint64), kind="stable").tolist()
    return {
        "src": [src[i] for i in rank],
        "dst": [dst[i] for i in rank],
        "kind": [kind[i] for i in rank],
    }


def read_slow(path: Path, data: bytes) -> Trace:
    """The per-packet reader: protobuf classes for every packet (the reference)."""
    reader = PacketReader()
    reader.run(_load(path, data))
    payload = reader.payload or {}
    moetrace = payload.get("writer") == "moetrace"
    tracks = TrackIds(reader.descriptors)
    notes = [r["notes"] for r in reader.events]
    given = [n.get("id") if isinstance(n.get("id"), int) else None for n in notes]
    next_id = max((i for i in given if i is not None), default=-1) + 1
    ids: list[int] = []
    for value in given:
        if value is None:
            value, next_id = next_id, next_id + 1
        ids.append(value)
    args: list[str | None] = []
    for note in notes:
        if isinstance(note.get("args"), str):
            args.append(note["args"])
        else:
            extra = {k: v for k, v in note.items() if k not in ("id", "kind", "flops", "bytes")}
            args.append(json.dumps(extra, default=str) if extra else None)
    events = {
        "id": ids,
        "track": [tracks.track(r["uuid"]) for r in reader.events],
        "name": [r["name"] for r in reader.events],
        "cat": [r["cat"] for r in reader.events],
        "kind": [n.get("kind") or "other" for n in notes],
        "ts": [r["ts"] for r in reader.events],
        "dur": [r["end"] - r["ts"] for r in reader.events],
        "flops": [n.get("flops") for n in notes],
        "bytes": [n.get("bytes") for n in notes],
        "args": args,
    }
    counter_rows: dict[str, list[Any]] = {"track": [], "name": [], "ts": [], "value": []}
    for uuid, ts, value in reader.counters:
        info = counter_track(reader.descriptors, tracks, uuid)
        counter_rows["track"].append(info["track"])
        counter_rows["name"].append(info["name"])
        counter_rows["ts"].append(ts)
        counter_rows["value"].append(value)
    return finish(
        path,
        reader,
        tracks,
        pl.DataFrame(events, schema_overrides={"ts": pl.Int64, "dur": pl.Int64}),
        _deps(reader.events, ids, moetrace),
        pl.DataFrame(
            counter_rows,
            schema={"track": pl.Int64, "name": pl.String, "ts": pl.Int64, "value": pl.Float64},
        ),
    )


def counter_track(
    descriptors: dict[int, pb.TrackDescriptor], tracks: TrackIds, uuid: int
) -> dict[str, Any]:
    """The moetrace track and counter name of a counter descriptor uuid."""
    info = _description(descriptors.get(uuid), "moetrace_counter")
    if info is None:
        desc = descriptors.get(uuid, pb.TrackDescriptor())
        owner = desc.parent_uuid if desc.HasField("parent_uuid") else uuid
        info = {"track": tracks.track(owner), "name": desc.name or None}
    return info


def finish(
    path: Path,
    reader: PacketReader,
    tracks: TrackIds,
    events: pl.DataFrame,
    deps: dict[str, list[Any]] | pl.DataFrame,
    counters: pl.DataFrame,
) -> Trace:
    """The `Trace` from the read columns: meta from the metadata packet, depths, order."""
    payload = reader.payload or {}
    moetrace = payload.get("writer") == "moetrace"
    meta = dict(payload.get("meta") or {})
    meta["warnings"] = [*meta.get("warnings", []), *reader.warnings]
    meta["format"] = "pftrace"
    meta["source"] = [str(path)]
    meta.setdefault("flavor", "moetrace" if moetrace else "chrome")
    track_rows = [tracks.rows[t] for t in sorted(tracks.rows)]
    track_frame = pl.DataFrame(track_rows, infer_schema_length=None) if track_rows else None
    trace = Trace.from_frames(
        events=events,
        tracks=track_frame,
        deps=deps,
        counters=counters,
        meta=meta,
        compute_depth=True,
    )
    ids = trace.events["id"].to_numpy()
    in_order = bool((ids[1:] > ids[:-1]).all())  # strictly: sorting would change nothing
    return Trace(
        events=trace.events if in_order else trace.events.sort("id"),
        tracks=trace.tracks,
        deps=trace.deps,
        counters=trace.counters.sort(
            "track", pl.col("name").is_null(), "name", "ts", maintain_order=True
        ),
        meta=trace.meta,
    )
