"""The vectorised .pftrace reader gives exactly what the per-packet reader gives, on files
moetrace writes and on TrackEvent traces others write; what it does not reproduce it hands
back (None), and `read_pftrace` then uses the per-packet reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

from moetrace.testing.compare import assert_trace_equal
from moetrace.testing.pftrace_packets import server_tracks
from moetrace.trace.formats.pftrace.read import read_pftrace
from moetrace.trace.formats.pftrace.read_packets import read_slow
from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised
from moetrace.trace.io import load, write_trace
from moetrace.trace.model import Trace


def _both(path: Path) -> tuple[Trace | None, Trace]:
    data = path.read_bytes()
    return read_vectorised(path, data), read_slow(path, data)


def _same(fast: Trace | None, slow: Trace) -> None:
    assert fast is not None
    assert_trace_equal(fast, slow, meta=True)


def test_moetrace_written_real_traces(real_trace_files: list[Path], tmp_path: Path) -> None:
    checked = 0
    for source in real_trace_files[:12]:
        out = tmp_path / (source.name.split(".")[0] + ".pftrace")
        write_trace(load(source, cache=False), out, force=True)
        fast, slow = _both(out)
        _same(fast, slow)
        checked += slow.events.height
    assert checked > 1000


def test_executor_trace_with_deps_and_counters(tmp_path: Path) -> None:
    from moetrace.executor.run import simulate

    trace = simulate(ranks=4, tokens=256, schedule="tile")
    out = tmp_path / "sim.pftrace"
    write_trace(trace, out)
    fast, slow = _both(out)
    _same(fast, slow)
    assert slow.deps.height == trace.deps.height > 0
    assert slow.frames_equal(trace)


def _foreign(path: Path, *, unbalanced: bool = False) -> Path:
    """A TrackEvent trace in the style of other writers: literal and interned names, several
    categories, annotations of every scalar type, a 3-hop flow, int and double counters."""
    builder = TraceProtoBuilder()

    def packet(ts: int, seq: int = 7) -> pb.TracePacket:
        p = builder.add_packet()
        p.timestamp = ts
        p.trusted_packet_sequence_id = seq
        return p

    head = packet(0)
    head.sequence_flags = 1
    head.interned_data.event_names.add(iid=1, name="interned op")
    head.interned_data.event_categories.add(iid=1, name="gpu")
    head.interned_data.debug_annotation_names.add(iid=1, name="bytes_moved")
    server_tracks(packet)
    other = packet(0).track_descriptor
    other.uuid, other.name = 20, "custom lane"
    BEGIN, END, INSTANT = (
        pb.TrackEvent.TYPE_SLICE_BEGIN,
        pb.TrackEvent.TYPE_SLICE_END,
        pb.TrackEvent.TYPE_INSTANT,
    )
    plan = [
        (100, BEGIN, 11, "outer", [5], []),
        (105, BEGIN, 20, None, [], []),  # interned name, on another lane
        (110, BEGIN, 11, "inner", [5], []),
        (120, END, 11, "", [], []),
        (130, INSTANT, 11, "ping", [], [5]),
        (135, END, 20, "", [], []),
        (140, END, 11, "", [], []),
    ]
    if unbalanced:
        plan.append((150, END, 11, "", [], []))
    for ts, kind, uuid, name, flows, ends in plan:
        te = packet(ts).track_event
        te.type, te.track_uuid = kind, uuid
        if name:
            te.name = name
            te.categories.extend(["c", "d"] if name == "outer" else ["c"])
            for key, field, value in [
                ("i", "int_value", -ts),
                ("u", "uint_value", ts),
                ("b", "bool_value", True),
                ("d", "double_value", ts / 3),
                ("s", "string_value", f"text {ts} \u00e9"),
            ]:
                note = te.debug_annotations.add()
                note.name = key
                setattr(note, field, value)
        elif kind != END:
            te.name_iid = 1
            te.category_iids.append(1)
            note = te.debug_annotations.add()
            note.name_iid, note.uint_value = 1, 4096
        te.flow_ids.extend(flows)
        te.terminating_flow_ids.extend(ends)
    for ts, value in [(100, 3), (200, 1)]:
        te = packet(ts).track_event
        te.type, te.track_uuid, te.counter_value = pb.TrackEvent.TYPE_COUNTER, 12, value
    te = packet(300).track_event
    te.type, te.track_uuid, te.double_counter_value = pb.TrackEvent.TYPE_COUNTER, 12, 2.5
    path.write_bytes(builder.serialize())
    return path


def test_foreign_track_events(tmp_path: Path) -> None:
    fast, slow = _both(_foreign(tmp_path / "f.pftrace"))
    _same(fast, slow)
    ev = slow.events
    assert ev["name"].to_list() == ["outer", "interned op", "inner", "ping"]
    assert ev["cat"].to_list() == ["c,d", "gpu", "c", "c"]
    assert slow.counters["value"].to_list() == [3.0, 1.0, 2.5]
    assert slow.deps.height == 2


def test_unsupported_input_falls_back_to_the_per_packet_reader(tmp_path: Path) -> None:
    path = _foreign(tmp_path / "u.pftrace", unbalanced=True)
    fast, slow = _both(path)
    assert fast is None  # an END with nothing open: the per-packet reader words the warning
    via_api = read_pftrace(path)
    assert via_api.frames_equal(slow) and via_api.meta == slow.meta
    assert any("without a BEGIN" in w for w in via_api.warnings)


@pytest.mark.parametrize("cut", [1, 7, 100])
def test_truncated_file_is_not_read_by_the_vectorised_reader(tmp_path: Path, cut: int) -> None:
    path = _foreign(tmp_path / "t.pftrace")
    data = path.read_bytes()[:-cut]
    assert read_vectorised(path, data) is None


@pytest.mark.parametrize("sequences", [1, 2])
def test_bigger_foreign_trace_on_every_decoding_path(tmp_path: Path, sequences: int) -> None:
    """~6k random TrackEvents from one or two interning sequences on 40 lanes (more than the
    few-distinct shortcuts take): interned and literal names of 1-60 bytes, interned and
    literal annotation names, string args, flows, counters; the vectorised reader must give
    what the per-packet reader gives."""
    import random

    rng = random.Random(sequences)
    builder = TraceProtoBuilder()
    BEGIN, END, INSTANT, COUNTER = (
        pb.TrackEvent.TYPE_SLICE_BEGIN,
        pb.TrackEvent.TYPE_SLICE_END,
        pb.TrackEvent.TYPE_INSTANT,
        pb.TrackEvent.TYPE_COUNTER,
    )

    def packet(ts: int, seq: int) -> pb.TracePacket:
        p = builder.add_packet()
        p.timestamp = ts
        p.trusted_packet_sequence_id = seq
        return p

    for seq in range(1, sequences + 1):
        head = packet(0, seq)
        head.sequence_flags = 1
        for iid in range(1, 30):
            head.interned_data.event_names.add(iid=iid, name=f"op{iid * seq}" * (iid % 4 + 1))
        head.interned_data.event_categories.add(iid=1, name=f"cat{seq}")
        head.interned_data.debug_annotation_names.add(iid=1, name="args")
        head.interned_data.debug_annotation_names.add(iid=2, name=f"note{seq}")
    lanes = list(range(100, 140))
    for uuid in lanes:
        descriptor = packet(0, 1).track_descriptor
        descriptor.uuid, descriptor.name = uuid, f"lane {uuid}"
    counter = packet(0, 1).track_descriptor
    counter.uuid, counter.name = 999, "queue"
    counter.counter.SetInParent()
    stacks: dict[int, int] = {u: 0 for u in lanes}
    ts = 1_000
    for _ in range(6000):
        ts += rng.randint(1, 50)
        uuid = rng.choice(lanes)
        seq = rng.randint(1, sequences)
        te = packet(ts, seq).track_event
        te.track_uuid = uuid
        roll = rng.random()
        if stacks[uuid] and roll < 0.4:
            te.type = END
            stacks[uuid] -= 1
            continue
        if roll < 0.45:
            te.type, te.track_uuid, te.double_counter_value = COUNTER, 999, rng.random()
            continue
        te.type = BEGIN if roll < 0.9 else INSTANT
        stacks[uuid] += te.type == BEGIN
        if rng.random() < 0.5:
            te.name_iid = rng.randint(1, 29)
            te.category_iids.append(1)
        else:
            te.name = "x" * rng.randint(1, 60)
            te.categories.append(rng.choice(["a", "bb", "ccc"]))
        if rng.random() < 0.7:
            note = te.debug_annotations.add()
            note.name_iid, note.string_value = 1, f'{{"k": {rng.randint(0, 10**6)}}}'
        if rng.random() < 0.3:
            note = te.debug_annotations.add()
            note.name_iid, note.int_value = 2, rng.randint(-5, 5)
        if rng.random() < 0.2:
            note = te.debug_annotations.add()
            note.name, note.double_value = "lit", rng.random()
        if rng.random() < 0.05:
            te.flow_ids.append(rng.randint(1, 20))
    for uuid, depth in stacks.items():
        for _ in range(depth):
            ts += 1
            te = packet(ts, 1).track_event
            te.type, te.track_uuid = END, uuid
    path = tmp_path / "big.pftrace"
    path.write_bytes(builder.serialize())
    fast, slow = _both(path)
    _same(fast, slow)
    assert slow.events.height > 2000 and slow.counters.height > 100
    assert slow.events["track"].n_unique() > 16
