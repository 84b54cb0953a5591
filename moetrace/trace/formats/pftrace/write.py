"""Perfetto protobuf (`.pftrace`): write a `Trace`.

The head packets (descriptors, interning) are built with the `perfetto` package's protobuf
classes; the hot BEGIN/END/INSTANT/COUNTER packets are hand-encoded with numpy (`encode`),
both following the layout of `plan`. The output is byte-identical to the official
`StreamingTraceProtoBuilder` writing every packet, which is kept as a test oracle in
`moetrace.testing.pftrace_official` (tests compare the two).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO, cast

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from moetrace.trace.atomic import atomic_write
from moetrace.trace.formats.pftrace.encode import encode_hot_packets
from moetrace.trace.formats.pftrace.plan import PftracePlan, make_plan
from moetrace.trace.model import Trace

__all__ = ["encode_pftrace", "write_pftrace"]


def encode_pftrace(trace: Trace) -> bytes:
    """The `.pftrace` bytes of `trace` (see `write_pftrace`)."""
    buffer = io.BytesIO()
    write_pftrace(trace, buffer)
    return buffer.getvalue()


def write_pftrace(trace: Trace, out: str | Path | BinaryIO, *, force: bool = True) -> None:
    """Write `trace` as a Perfetto protobuf trace to a path or a binary stream; a path is
    written atomically (complete or not at all) and replaced only with `force`."""
    plan = make_plan(trace)
    if isinstance(out, str | Path):
        with atomic_write(out, force=force) as stream:
            _write(plan, cast(BinaryIO, stream))
    else:
        _write(plan, out)


def _write(plan: PftracePlan, out: BinaryIO) -> None:
    """The head packets (one `Trace` message each), then the hand-encoded hot packets."""
    for packet in plan.head:
        wrapper = pb.Trace()
        wrapper.packet.append(packet)
        out.write(wrapper.SerializeToString())
    out.write(encode_hot_packets(plan))
