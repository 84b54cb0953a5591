"""Perfetto .pftrace writer and reader: round trips, byte identity of the fast path, layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.testing.compare import assert_trace_equal
from moetrace.testing.pftrace_official import encode_official
from moetrace.testing.pftrace_packets import server_tracks
from moetrace.trace.formats.pftrace.read import read_pftrace
from moetrace.trace.formats.pftrace.write import encode_pftrace, write_pftrace
from moetrace.trace.model import Trace, TraceFormatError


def sample_trace() -> Trace:
    """Nested slices, instants (one at a parent's start), a negative ts, flows of every kind,
    counters, args, flops/bytes, string and >2^32 pids, a rankless host track."""
    return Trace.from_frames(
        events={
            "id": [10, 11, 12, 13, 14, 15, 16, 17],
            "track": [0, 0, 0, 1, 1, 2, 3, 0],
            "name": ["ProfilerStep#1", "forward", "aten::mm", "gemm", "mark", "x", "y", "done"],
            "cat": ["user_annotation", None, "cpu_op", "kernel", None, None, "cat", None],
            "kind": ["marker", "host", "host", "compute", "other", "comm", "memory", "other"],
            "ts": [0, 0, 10, 5, 5, -3, 40, 100],
            "dur": [100, 50, 20, 10, 0, 7, 5, 0],
            "flops": [None, None, 1e9, 2.5e12, None, None, None, None],
            "bytes": [None, 3.0, None, 4096.0, None, None, None, None],
            "args": ['{"a": 1}', None, '{"Input Dims": [[2, 3]]}', None, None, None, "{}", None],
        },
        tracks={
            "track": [0, 1, 2, 3],
            "rank": [0, 0, None, None],
            "pid": ["1234", "0", "4376751100", "Spans"],
            "tid": ["7", "stream 7", "9", "Spans"],
            "process_name": ["python3", "GPU 0", "Ascend Hardware", "Spans"],
            "thread_name": ["main", None, "Stream 9", "Spans"],
            "unit": ["cpu", "stream", "aic", "cpu"],
            "sort_index": [1, 0, None, 5],
        },
        deps={"src": [12, 11, 13], "dst": [13, 15, 16], "kind": ["launch", "data", "sync"]},
        counters={
            "track": [0, 0, 1],
            "name": ["mem", "mem", "util"],
            "ts": [0, 10, 5],
            "value": [1.0, 2.5, 0.5],
        },
        meta={"format": "chrome-json", "flavor": "kineto", "peak_flops": 1e15, "warnings": ["w"]},
        compute_depth=True,
    )


def packets(data: bytes) -> list[pb.TracePacket]:
    return list(pb.Trace.FromString(data).packet)


@pytest.mark.parametrize("official", [False, True])
def test_round_trip_restores_every_frame_and_meta(tmp_path: Path, official: bool) -> None:
    trace = sample_trace()
    assert trace.problems() == []
    path = tmp_path / "t.pftrace"
    if official:  # the oracle's bytes read back the same
        path.write_bytes(encode_official(trace))
    else:
        write_pftrace(trace, path)
    back = read_pftrace(path)
    assert_trace_equal(back, trace, reorder=True)
    assert back.meta["format"] == "pftrace"
    assert back.meta["flavor"] == "kineto"
    assert back.meta["peak_flops"] == 1e15
    assert back.meta["warnings"] == ["w"]
    assert back.meta["source"] == [str(path)]
    assert back.problems() == []


def test_fast_path_is_byte_identical_to_the_official_builder() -> None:
    trace = sample_trace()
    official = encode_official(trace)
    assert encode_pftrace(trace) == official
    # The official bytes are what the builder writes: a Trace message per packet.
    whole = pb.Trace.FromString(official)
    assert b"".join(pb.Trace(packet=[p]).SerializeToString() for p in whole.packet) == official


def test_slices_are_begin_end_pairs_instants_and_interned() -> None:
    data = encode_pftrace(sample_trace())
    pk = packets(data)
    events = [p for p in pk if p.HasField("track_event")]
    types = [p.track_event.type for p in events]
    counters = types.count(pb.TrackEvent.TYPE_COUNTER)
    assert counters == 3
    assert types.count(pb.TrackEvent.TYPE_INSTANT) == 2  # "mark" and "done" (dur 0)
    assert types.count(pb.TrackEvent.TYPE_SLICE_BEGIN) == 6
    assert types.count(pb.TrackEvent.TYPE_SLICE_END) == 6
    interned = pk[0].interned_data
    assert pk[0].sequence_flags == 1
    names = {e.iid: e.name for e in interned.event_names}
    assert sorted(names.values()) == sorted(sample_trace().events["name"].to_list())
    for p in events:
        if p.track_event.type in (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_INSTANT):
            assert not p.track_event.HasField("name")  # only the interned iid travels
            assert p.track_event.name_iid in names
            assert p.sequence_flags == 2


def test_packet_order_at_equal_timestamps() -> None:
    """At ts 0 step (longer) opens before forward; at 50 forward closes; the instant at 5
    follows gemm's BEGIN; packets are sorted by time."""
    pk = [p for p in packets(encode_pftrace(sample_trace())) if p.HasField("track_event")]
    times = [p.timestamp if p.timestamp < 1 << 63 else p.timestamp - (1 << 64) for p in pk]
    assert times == sorted(times)
    te = [p.track_event for p in pk]
    opened = [t.name_iid for t in te if t.type == pb.TrackEvent.TYPE_SLICE_BEGIN]
    names = {
        e.iid: e.name for e in packets(encode_pftrace(sample_trace()))[0].interned_data.event_names
    }
    order = [names[i] for i in opened]
    assert order.index("ProfilerStep#1") < order.index("forward")
    # per track, END closes the innermost open slice: replay the stacks
    stacks: dict[int, list[int]] = {}
    for t in te:
        if t.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            stacks.setdefault(t.track_uuid, []).append(t.name_iid)
        elif t.type == pb.TrackEvent.TYPE_SLICE_END:
            assert stacks[t.track_uuid], "END without an open slice"
            stacks[t.track_uuid].pop()
    assert all(not s for s in stacks.values())


def test_equal_start_and_end_nesting_order() -> None:
    """Two slices share start and end: the model nests the later row inside the earlier one;
    the outer BEGIN comes first and the inner END first."""
    trace = Trace.from_frames(
        events={
            "id": [0, 1, 2],
            "track": [0, 0, 0],
            "name": ["outer", "inner", "tail"],
            "kind": ["host"] * 3,
            "ts": [0, 0, 10],
            "dur": [10, 10, 0],
        },
        tracks={"track": [0], "unit": ["cpu"]},
        compute_depth=True,
    )
    assert trace.events["depth"].to_list() == [0, 1, 0]  # the model: input order breaks ties
    pk = [p for p in packets(encode_pftrace(trace)) if p.HasField("track_event")]
    seq = [(p.track_event.type, p.timestamp) for p in pk]
    b, e, i = (
        pb.TrackEvent.TYPE_SLICE_BEGIN,
        pb.TrackEvent.TYPE_SLICE_END,
        pb.TrackEvent.TYPE_INSTANT,
    )
    assert seq == [(b, 0), (b, 0), (e, 10), (e, 10), (i, 10)]
    back = read_pftrace_bytes(encode_pftrace(trace))
    assert back.events["depth"].to_list() == [0, 1, 0]
    names = {e.iid: e.name for e in packets(encode_pftrace(trace))[0].interned_data.event_names}
    begun = [names[p.track_event.name_iid] for p in pk if p.track_event.type == b]
    assert begun == ["outer", "inner"]
    assert back.events["dur"].to_list() == [10, 10, 0]


def read_pftrace_bytes(data: bytes, tmp: Path | None = None) -> Trace:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.pftrace"
        path.write_bytes(data)
        return read_pftrace(path)


def test_flows_carry_fixed64_ids_from_src_to_dst() -> None:
    trace = sample_trace()
    pk = [p for p in packets(encode_pftrace(trace)) if p.HasField("track_event")]
    out = {}
    into = {}
    for p in pk:
        ident = next(
            (d.uint_value for d in p.track_event.debug_annotations if d.name_iid == 1), None
        )
        for f in p.track_event.flow_ids:
            out[f] = ident
        for f in p.track_event.terminating_flow_ids:
            into[f] = ident
    assert set(out) == set(into)
    pairs = sorted((out[f], into[f]) for f in out)
    assert pairs == sorted(
        zip(trace.deps["src"].to_list(), trace.deps["dst"].to_list(), strict=True)
    )
    assert pb.TrackEvent.DESCRIPTOR.fields_by_name["flow_ids"].type == 6  # TYPE_FIXED64


def test_track_tree_order_merge_and_pids() -> None:
    trace = sample_trace()
    descs = [
        p.track_descriptor for p in packets(encode_pftrace(trace)) if p.HasField("track_descriptor")
    ]
    root = descs[0]
    assert root.uuid == 0
    assert root.process_ordering == pb.TrackDescriptor.PROCESS_ORDERING_EXPLICIT
    procs = [d for d in descs if d.HasField("process")]
    # one process track per rank (rank 0 holds both the host and the GPU track), then one
    # per pid for the rankless tracks, by sort_index (nulls last)
    assert [d.process.process_name for d in procs] == ["rank 0", "Spans", "Ascend Hardware"]
    assert [d.sibling_order_rank for d in procs] == [0, 1, 2]
    assert all(d.child_ordering == pb.TrackDescriptor.EXPLICIT for d in procs)
    pids = [d.process.pid for d in procs]
    assert len(set(pids)) == 3 and all(0 < p < 2**31 for p in pids)
    # rank 0's first lane (GPU 0, pid "0") has no valid Perfetto pid: it gets a free small int
    assert 1234 not in pids and json.loads(procs[0].description)["pid"] == "0"
    lanes = [d for d in descs if d.HasField("parent_uuid") and not d.HasField("counter")]
    rank0 = [d for d in lanes if d.parent_uuid == procs[0].uuid]
    # explicit order by sort_index: GPU stream (0) before the host thread (1)
    assert [
        (d.name, d.sibling_order_rank) for d in sorted(rank0, key=lambda d: d.sibling_order_rank)
    ] == [("stream stream 7", 0), ("main", 1)]
    assert all(
        d.sibling_merge_behavior == pb.TrackDescriptor.SIBLING_MERGE_BEHAVIOR_NONE for d in lanes
    )
    counters = [d for d in descs if d.HasField("counter")]
    assert sorted(d.name for d in counters) == ["mem", "util"]
    stored = json.loads(lanes[0].description)["moetrace_track"]
    assert set(stored) == set(trace.tracks.columns)


def test_big_and_string_pids_map_to_distinct_small_ints_and_come_back(tmp_path: Path) -> None:
    trace = Trace.from_frames(
        events={
            "id": [0, 1, 2],
            "track": [0, 1, 2],
            "name": ["a", "b", "c"],
            "kind": ["host"] * 3,
            "ts": [0, 1, 2],
            "dur": [5, 5, 5],
        },
        tracks={
            "track": [0, 1, 2],
            "pid": ["4376751100", "Spans", "1"],
            "tid": ["1", "2", "3"],
            "unit": ["cpu"] * 3,
        },
        compute_depth=True,
    )
    procs = [
        p.track_descriptor.process
        for p in packets(encode_pftrace(trace))
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")
    ]
    pids = [p.pid for p in procs]
    assert len(pids) == 3 and len(set(pids)) == 3
    assert 1 in pids  # a small numeric pid keeps its value
    assert all(0 < p < 2**31 for p in pids)
    path = tmp_path / "p.pftrace"
    write_pftrace(trace, path)
    back = read_pftrace(path)
    assert back.tracks["pid"].to_list() == ["4376751100", "Spans", "1"]
    assert_trace_equal(back, trace, reorder=True)


def test_writes_to_a_binary_stream_and_path_alike(tmp_path: Path) -> None:
    import io

    buffer = io.BytesIO()
    write_pftrace(sample_trace(), buffer)
    path = tmp_path / "s.pftrace"
    write_pftrace(sample_trace(), str(path))
    assert path.read_bytes() == buffer.getvalue()


def test_empty_trace_round_trips(tmp_path: Path) -> None:
    trace = Trace.from_frames(meta={"flavor": "moetrace"})
    path = tmp_path / "e.pftrace"
    write_pftrace(trace, path)
    back = read_pftrace(path)
    assert back.events.height == 0 and back.tracks.height == 0
    assert path.read_bytes() == encode_official(trace)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty file"),
        (b'[{"ph": "X"}]', "not a Perfetto"),
        (b"\xff\xff\xff", "not a Perfetto"),
    ],
)
def test_bad_files_raise_one_line_format_errors(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = tmp_path / "bad.pftrace"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError) as info:
        read_pftrace(path)
    assert needle in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_values_survive_exactly() -> None:
    """int64 extremes of ts, unicode names and args, NaN-free doubles bit for bit."""
    trace = Trace.from_frames(
        events={
            "id": [4_000_000_000, 7],
            "track": [5, 5],
            "name": ["ü\u2603 \x1b[31m", "[b]"],
            "kind": ["compute", "comm"],
            "ts": [1_700_000_000_123_456_789, -(2**62)],
            "dur": [1, 2**61],
            "flops": [0.1 + 0.2, -0.0],
            "args": ['{"k": "ü"}', None],
        },
        tracks={"track": [5], "rank": [3], "unit": ["link"], "sort_index": [2]},
        compute_depth=True,
    )
    back = read_pftrace_bytes(encode_pftrace(trace))
    assert_trace_equal(back, trace, reorder=True)
    assert np.signbit(back.events.sort("id")["flops"].to_numpy()[0])


def test_partial_overlaps_go_to_overflow_lanes_and_merge_back() -> None:
    """A[0,10] B[5,15] C[12,20] D[6,8] on one track: B and C overlap partially, which a
    BEGIN/END stack cannot hold; they get overflow lanes and come back on their track."""
    trace = Trace.from_frames(
        events={
            "id": [0, 1, 2, 3],
            "track": [4, 4, 4, 4],
            "name": ["A", "B", "C", "D"],
            "kind": ["compute"] * 4,
            "ts": [0, 5, 12, 6],
            "dur": [10, 10, 8, 2],
        },
        tracks={"track": [4], "rank": [0], "unit": ["stream"], "thread_name": ["s"]},
        compute_depth=True,
    )
    assert any("overlap partially" in p for p in trace.problems())
    data = encode_pftrace(trace)
    assert data == encode_official(trace)
    pk = packets(data)
    lanes = {
        p.track_descriptor.uuid: p.track_descriptor.name
        for p in pk
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("parent_uuid")
    }
    assert sorted(lanes.values()) == ["s", "s (overlap 1)", "s (overlap 2)"]
    # every lane's BEGIN/END now nests: replay the stacks and check durations per lane
    open_at: dict[int, list[int]] = {}
    spans: dict[int, list[tuple[int, int]]] = {}
    for p in pk:
        te = p.track_event
        if not p.HasField("track_event"):
            continue
        if te.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            open_at.setdefault(te.track_uuid, []).append(p.timestamp)
        elif te.type == pb.TrackEvent.TYPE_SLICE_END:
            start = open_at[te.track_uuid].pop()
            spans.setdefault(te.track_uuid, []).append((start, p.timestamp))
    assert sorted(s for v in spans.values() for s in v) == [(0, 10), (5, 15), (6, 8), (12, 20)]
    back = read_pftrace_bytes(data)
    assert_trace_equal(back, trace, reorder=True)
    assert back.tracks.height == 1


def test_random_intervals_with_overlaps_round_trip() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(1, 40))
        trace = Trace.from_frames(
            events={
                "id": np.arange(n),
                "track": rng.integers(0, 2, n),
                "name": [f"e{i}" for i in range(n)],
                "kind": ["other"] * n,
                "ts": rng.integers(0, 50, n),
                "dur": rng.integers(0, 30, n),
            },
            tracks={"track": [0, 1], "unit": ["aic", "link"]},
            compute_depth=True,
        )
        data = encode_pftrace(trace)
        assert data == encode_official(trace)
        assert_trace_equal(read_pftrace_bytes(data), trace, reorder=True)


def test_nesting_precheck_agrees_with_the_model() -> None:
    """`stacks_nest` (the cheap check that skips overflow lanes) says "nests" exactly when
    the model's nesting_depth finds no partially overlapping slice."""
    from moetrace.trace.formats.pftrace.layout import stacks_nest
    from moetrace.trace.formats.pftrace.plan import packet_order
    from moetrace.trace.nesting import nesting_depth

    rng = np.random.default_rng(11)
    seen = set()
    for _ in range(300):
        n = int(rng.integers(1, 12))
        track = rng.integers(0, 3, n)
        ts = rng.integers(0, 20, n)
        dur = rng.integers(0, 12, n)
        kind, row = packet_order(ts, dur, np.zeros(0, np.int64))
        _, bad = nesting_depth(track, ts, dur)
        assert stacks_nest(kind, row, track) == (not bad.any())
        seen.add(bool(bad.any()))
    assert seen == {True, False}


def test_reads_a_trace_moetrace_did_not_write(tmp_path: Path) -> None:
    """Plain TrackEvent protos (thread track, literal names, a 3-hop flow, an int counter,
    an END without BEGIN and a BEGIN never closed) load with warnings, not errors."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    builder = TraceProtoBuilder()

    def packet(ts: int) -> pb.TracePacket:
        p = builder.add_packet()
        p.timestamp = ts
        p.trusted_packet_sequence_id = 7
        return p

    server_tracks(packet)
    for ts, kind, name, flows, ends in [
        (100, pb.TrackEvent.TYPE_SLICE_BEGIN, "outer", [5], []),
        (110, pb.TrackEvent.TYPE_SLICE_BEGIN, "inner", [5], []),
        (120, pb.TrackEvent.TYPE_SLICE_END, "", [], []),
        (130, pb.TrackEvent.TYPE_INSTANT, "ping", [], [5]),
        (140, pb.TrackEvent.TYPE_SLICE_END, "", [], []),
        (150, pb.TrackEvent.TYPE_SLICE_END, "", [], []),  # nothing open any more
        (160, pb.TrackEvent.TYPE_SLICE_BEGIN, "dangling", [], []),  # never closed
    ]:
        te = packet(ts).track_event
        te.type, te.track_uuid = kind, 11
        if name:
            te.name = name
            te.categories.append("c")
            note = te.debug_annotations.add()
            note.name, note.int_value = "n", ts
        te.flow_ids.extend(flows)
        te.terminating_flow_ids.extend(ends)
    for ts, value in [(100, 3), (200, 1)]:
        te = packet(ts).track_event
        te.type, te.track_uuid, te.counter_value = pb.TrackEvent.TYPE_COUNTER, 12, value
    path = tmp_path / "foreign.pftrace"
    path.write_bytes(builder.serialize())
    back = read_pftrace(path)
    ev = back.events
    assert ev["name"].to_list() == ["outer", "inner", "ping", "dangling"]
    assert ev["dur"].to_list() == [40, 10, 0, 0]
    assert ev["depth"].to_list() == [0, 1, 1, 0]  # ping comes after inner closed
    assert ev["kind"].to_list() == ["other"] * 4
    assert ev["cat"].to_list() == ["c"] * 4
    assert json.loads(ev["args"][0]) == {"n": 100}
    row = back.tracks.row(0, named=True)
    assert (row["pid"], row["tid"], row["thread_name"], row["process_name"]) == (
        "42",
        "43",
        "worker",
        "server",
    )
    # the 3-hop flow becomes two deps, chained by time
    assert list(zip(back.deps["src"], back.deps["dst"], strict=True)) == [(0, 1), (1, 2)]
    assert back.counters["value"].to_list() == [3.0, 1.0]
    assert back.counters["name"].to_list() == ["queue", "queue"]
    warnings = " ".join(back.meta["warnings"])
    assert "without a BEGIN" in warnings and "never ended" in warnings
    assert back.meta["format"] == "pftrace"


def test_arg_sort_matches_lexsort_packed_and_polars_paths() -> None:
    """The packet order's sort packs small key ranges into one int64 and falls back to
    polars for wide ones (epoch times x long durations); both must equal np.lexsort with
    row order breaking ties."""
    from moetrace.trace.formats.pftrace.plan import _arg_sort

    rng = np.random.default_rng(3)
    n = 2000
    for scale in (5, 2**40, 2**62):
        a = rng.integers(-scale, scale, n)
        b = rng.integers(-scale, scale, n)
        a[::7], b[::11] = a[0], b[0]  # ties on both keys
        assert np.array_equal(_arg_sort([a, b]), np.lexsort((np.arange(n), b, a)))
