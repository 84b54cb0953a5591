"""Hand-built Perfetto TrackEvent descriptors for .pftrace reader tests."""

from __future__ import annotations

from collections.abc import Callable

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb


def server_tracks(packet: Callable[[int], pb.TracePacket]) -> None:
    """Descriptors of process 42 "server" (uuid 10), its thread 43 "worker" (uuid 11) and a
    counter track "queue" (uuid 12), each in a packet of its own."""
    proc = packet(0).track_descriptor
    proc.uuid, proc.process.pid, proc.process.process_name = 10, 42, "server"
    thread = packet(0).track_descriptor
    thread.uuid, thread.parent_uuid = 11, 10
    thread.thread.pid, thread.thread.tid, thread.thread.thread_name = 42, 43, "worker"
    counter = packet(0).track_descriptor
    counter.uuid, counter.parent_uuid, counter.name = 12, 10, "queue"
    counter.counter.SetInParent()
