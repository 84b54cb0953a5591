"""Previews of a big .pftrace while it is read: the packets of a prefix of the file.

The vectorised reader takes the whole file in one pass (no partial state to show), so the
previews read prefixes first, cut at packet boundaries: the first packet (moetrace's interned
names and descriptors) and `FIRST_FRACTION` of the events after it, then twice as many, while
the bytes read in previews stay within the watch's budget of the file (a read costs about the
same per byte: at 1M events moetrace's first packet is ~2% of the file, so one preview of 2%
of the events fits a budget of 10%, the next one would not). A prefix is a trace when the
track descriptors come before the events (moetrace writes them so; Perfetto's own writers
mostly too); the BEGINs whose END lies beyond the cut are left out of it (slices still open
at the cut are not shown; the vectorised reader takes balanced BEGIN/END only). Only the
vectorised reader is used: a file it does not understand gets no preview.
"""

from __future__ import annotations

import functools
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


def balanced_prefix(data: bytes, end: int) -> bytes:
    """`data[:end]` (whole packets) without the BEGIN packets whose END is not in it, and
    without flows (a flow's two ends may lie on both sides of the cut; the reader takes
    one-to-one flows only): their fields are renamed to `_NO_FLOW` in place."""
    prefix = bytearray(data[:end])
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
    dropped = events.msg[unclosed_begins(kind, uuid)]
    begin = np.concatenate([[0], ends[:-1]])  # a packet with its tag and length
    pieces, at = [], 0
    for packet in dropped.tolist():  # few: the slices open at the cut
        pieces.append(prefix[at : int(begin[packet])])
        at = int(ends[packet])
    pieces.append(prefix[at:])
    return b"".join(pieces)


class NoPreview(ValueError):
    """The vectorised reader does not take this file: no previews (the watch stops)."""


def _read_prefix(path: Path, data: bytes, end: int) -> Trace:
    """The Trace of the packets before byte `end` (no events when every slice in it is still
    open: a longer prefix is tried next)."""
    try:
        trace = read_vectorised(path, balanced_prefix(data, end))
    except Malformed:
        trace = None
    if trace is None:
        raise NoPreview(f"{path}: the vectorised reader does not take this file")
    return trace


def prefix_previews(path: Path, data: bytes) -> None:
    """Show previews of growing prefixes of `data` (the whole file) to this thread's watch,
    if any (see moetrace.trace.formats.partial); the caller then reads the whole file."""
    watch = partial.current()
    if watch is None:
        return
    # The first packet (moetrace's: the interned names and track descriptors, ~2% of the
    # file at 1M events) is in every prefix; the fractions are of the events after it.
    head = max(packet_end(data, 0), 0)
    fraction, spent = FIRST_FRACTION, 0  # spent: bytes read in previews so far
    while True:
        end = packet_boundary(data, head + int((len(data) - head) * fraction), head)
        if not head < end < len(data) or spent + end > watch.budget * len(data):
            return
        read_prefix = functools.partial(_read_prefix, path, data, end)
        watch.deliver("trace", path, read_prefix, end)
        if watch.stopped:
            return
        spent += end
        fraction *= 2
