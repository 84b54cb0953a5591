"""Previews of a big .pftrace while it is read: samples of its packets over the whole span.

The vectorised reader takes the whole file in one pass (no partial state to show), so the
previews read samples first (`spread_sample`): the leading packets (track descriptors and
interned names: moetrace writes them before the events) and runs of whole packets spread
evenly from the first event to the last, each run without its unmatched BEGINs and ENDs; as
moetrace writes packets in time order, a preview spans the whole trace at a low resolution
instead of its first moments (a prefix of 2% of the file is 2% of the time). The first holds
`FIRST_FRACTION` of the packets, the next twice as many, while the bytes read in previews stay
within the watch's budget of the file (a read costs about the same per byte). Flows are left
out of previews (renamed to `_NO_FLOW`: one end may be out of the sample); a file whose
descriptors or names come later, or that the vectorised reader does not take, gets none.
`balanced_prefix` is the same balancing for a prefix.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from moetrace.trace.formats import partial
from moetrace.trace.formats.pftrace.protocol import (
    E_TYPE,
    E_UUID,
    FLOW_WIRES,
    P_EVENT,
    TYPE_BEGIN,
    TYPE_END,
    WIRE_LEN,
    WIRE_VARINT,
)
from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised
from moetrace.trace.formats.pftrace.scan import Malformed, packet_spans, scan
from moetrace.trace.model import Trace

FIRST_FRACTION = 0.02
"""The first preview's share of the events' bytes (after the first packet): 20k of 1M events;
its read costs ~5% of the whole file's (the first packet's names and descriptors included)."""


def packet_end(data: bytes, pos: int) -> int:
    """The end (byte) of the `Trace.packet` starting at `pos`, or -1 when `pos` does not
    start one (its tag 0x0a, then the payload's length as a varint)."""
    if pos >= len(data) or data[pos] != 0x0A:  # field 1, length-delimited
        return -1
    length, shift, at = 0, 0, pos + 1
    while at < len(data):
        byte = data[at]
        length |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return at + length
        shift += 7
    return -1


def packet_boundary(data: bytes, limit: int, start: int = 0) -> int:
    """The end (byte) of the last whole packet from `start` (a packet's start) that ends at
    or before `limit`; `start` when none does or the data is not a sequence of packets."""
    pos = start
    while pos < limit:
        end = packet_end(data, pos)
        if end < 0 or end > limit:
            break
        pos = end
    return pos


def unclosed_begins(kind: np.ndarray, uuid: np.ndarray) -> np.ndarray:
    """Rows (events in file order, `kind` TrackEvent types, `uuid` track uuids) of the BEGINs
    that no later END closes: per track, a BEGIN that pushes the stack to level L is closed
    when the level later drops below L."""
    rows = np.flatnonzero((kind == TYPE_BEGIN) | (kind == TYPE_END))
    if len(rows) == 0:
        return rows
    order = rows[np.argsort(uuid[rows], kind="stable")]
    step = np.where(kind[order] == TYPE_BEGIN, 1, -1)
    first = np.ones(len(order), dtype=bool)
    first[1:] = uuid[order][1:] != uuid[order][:-1]
    group = np.cumsum(first) - 1
    total = np.cumsum(step)
    level = total - (total - step)[first][group]  # the stack depth per track after each row
    # The lowest level from each row to its track's end: a minimum running backwards, with the
    # tracks kept apart by offsets larger than any level difference.
    spread = 2 * len(order) + 2
    keyed = level + group * spread
    lowest = np.minimum.accumulate(keyed[::-1])[::-1] - group * spread
    return np.sort(order[(step > 0) & (lowest >= level)])


_NO_FLOW = 1999
"""An unused TrackEvent field number (in its extension range) with a 2-byte tag, like the flow
fields': a flow field renamed to it is skipped by the reader."""


def unopened_ends(kind: np.ndarray, uuid: np.ndarray) -> np.ndarray:
    """Rows of the ENDs that no earlier BEGIN opens (a sample's run starting inside slices):
    `unclosed_begins` of the rows read backwards, BEGIN and END swapped."""
    swapped = np.where(kind == TYPE_BEGIN, TYPE_END, np.where(kind == TYPE_END, TYPE_BEGIN, kind))
    rows = unclosed_begins(swapped[::-1], uuid[::-1])
    return np.sort(len(kind) - 1 - rows)


def balanced_prefix(data: bytes, end: int) -> bytes:
    """`data[:end]` (whole packets) without the BEGIN packets whose END is not in it, and
    without flows (a flow's two ends may lie on both sides of the cut; the reader takes
    one-to-one flows only): their fields are renamed to `_NO_FLOW` in place."""
    return _balanced(bytearray(data[:end]))


def _balanced(prefix: bytearray) -> bytes:
    """Whole packets `prefix` without their unmatched BEGIN and END packets and flows."""
    starts, ends = packet_spans(bytes(prefix))
    buf = np.frombuffer(bytes(prefix), dtype=np.uint8)
    events = scan(buf, starts, ends, {P_EVENT}).select(P_EVENT, WIRE_LEN)
    fields = scan(
        buf, events.off, events.off + events.length, {E_TYPE, E_UUID, *FLOW_WIRES}, spans=True
    )
    raw = np.frombuffer(prefix, dtype=np.uint8)
    for number in FLOW_WIRES:
        flows = fields.select(number)  # `off`: the value; its 2-byte tag is just before it
        tag = (_NO_FLOW << 3) | flows.wire.astype(np.int64)
        raw[flows.off - 2], raw[flows.off - 1] = (tag & 0x7F) | 0x80, tag >> 7
    n = len(events.msg)
    kind = fields.last(E_TYPE, WIRE_VARINT, n)[0].astype(np.int64)
    uuid = fields.last(E_UUID, WIRE_VARINT, n)[0]
    unmatched = np.union1d(unclosed_begins(kind, uuid), unopened_ends(kind, uuid))
    dropped = events.msg[unmatched]
    begin = np.concatenate([[0], ends[:-1]])  # a packet with its tag and length
    pieces, at = [], 0
    for packet in dropped.tolist():  # few: the slices open at the cuts
        pieces.append(prefix[at : int(begin[packet])])
        at = int(ends[packet])
    pieces.append(prefix[at:])
    return b"".join(pieces)


SAMPLE_RUNS = (8, 64)
"""How many runs of packets a sample takes (fewest, most), spread evenly over the file."""
RUN_PACKETS = 4096
"""Packets per run when the sample is big enough (a run must hold whole slices: ~3 packets of
each of 1280 tracks at 256 ranks)."""


def leading_packets(data: bytes, spans: tuple[np.ndarray, np.ndarray]) -> int:
    """How many packets at the start of `data` hold no TrackEvent (descriptors, interned
    names: moetrace writes them first), scanning growing blocks of packets."""
    starts, ends = spans
    buf = np.frombuffer(data, dtype=np.uint8)
    done, block = 0, 1024
    while done < len(ends):
        upto = min(done + block, len(ends))
        found = scan(buf, starts[done:upto], ends[done:upto], {P_EVENT}).select(P_EVENT)
        if len(found.msg):
            return done + int(found.msg.min())
        done, block = upto, 2 * block
    return len(ends)


def spread_sample(data: bytes, spans: tuple[np.ndarray, np.ndarray], fraction: float) -> bytes:
    """The leading packets of `data` (its `packet_spans`; descriptors and names) and about
    `fraction` of the other packets as runs spread evenly from the first event to the last
    (`SAMPLE_RUNS`, `RUN_PACKETS`), each run balanced on its own (a BEGIN cut off from its
    END by a gap must not pair with an END after it): the whole time span at a low
    resolution, read at the cost of the packets taken."""
    ends = spans[1]
    begin = np.concatenate([[0], ends[:-1]])  # packet starts, tag included
    lead = leading_packets(data, spans)
    body = len(ends) - lead
    if body <= 0:
        return bytes(data)
    taken = max(1, int(body * min(fraction, 0.99)))
    fewest, most = SAMPLE_RUNS
    runs = min(max(taken // RUN_PACKETS, fewest), most, body)
    per = max(taken // runs, 1)
    firsts = lead + (np.arange(runs) * (body - per)) // max(runs - 1, 1)
    pieces = [data[: int(begin[lead])]] if lead else []
    for first in firsts.tolist():
        run = data[int(begin[first]) : int(ends[min(first + per, len(ends)) - 1])]
        pieces.append(_balanced(bytearray(run)))
    return b"".join(pieces)


class NoPreview(ValueError):
    """The vectorised reader does not take this file: no previews (the watch stops)."""


def _read_sample(path: Path, sample: Callable[[], bytes]) -> Trace:
    """The Trace of the packets `sample()` gives (no events when every slice in it is cut:
    a bigger sample is tried next)."""
    try:
        trace = read_vectorised(path, sample())
    except Malformed:
        trace = None
    if trace is None:
        raise NoPreview(f"{path}: the vectorised reader does not take this file")
    return trace


def prefix_previews(path: Path, data: bytes) -> None:
    """Show previews of `data` (the whole file) to this thread's watch, if any (see
    moetrace.trace.formats.partial): spread samples of growing size, each over the whole
    time span; the caller then reads the whole file."""
    watch = partial.current()
    if watch is None:
        return
    # The first packet (moetrace's: the interned names and track descriptors, ~2% of the
    # file at 1M events) is in every sample; the fractions are of the events after it.
    head = max(packet_end(data, 0), 0)
    try:
        spans = packet_spans(data)
    except Malformed:
        return
    fraction, spent = FIRST_FRACTION, 0  # spent: bytes read in previews so far
    while fraction < 1:
        size = head + int((len(data) - head) * fraction)
        if spent + size > watch.budget * len(data):
            return
        sample = functools.partial(spread_sample, data, spans, fraction)
        watch.deliver("trace", path, functools.partial(_read_sample, path, sample), size)
        if watch.stopped:
            return
        spent += size
        fraction *= 2
