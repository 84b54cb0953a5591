"""The official `.pftrace` writer, a test oracle: every packet through the `perfetto`
package's protobuf classes and `StreamingTraceProtoBuilder` (one `Trace` message per packet).

Production writes with `moetrace.trace.formats.pftrace.write` (head packets via protobuf, hot
packets hand-encoded with numpy); tests assert its bytes equal these.
"""

from __future__ import annotations

import io
from typing import BinaryIO

import numpy as np
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

from moetrace.trace.formats.pftrace.layout import BEGIN, COUNTER, END, SEQUENCE_ID
from moetrace.trace.formats.pftrace.plan import SEQ_NEEDS_INCREMENTAL_STATE, PftracePlan, make_plan
from moetrace.trace.model import Trace


def encode_official(trace: Trace) -> bytes:
    """The `.pftrace` bytes of `trace` as the official builder writes them."""
    buffer = io.BytesIO()
    write_official(make_plan(trace), buffer)
    return buffer.getvalue()


def write_official(plan: PftracePlan, out: BinaryIO) -> None:
    """Every packet of `plan` through the protobuf classes and `StreamingTraceProtoBuilder`."""
    builder = StreamingTraceProtoBuilder(out)
    for packet in plan.head:
        builder.write_packet(packet)
    n = len(plan.ts)
    rows = np.arange(n)
    out_lo = np.searchsorted(plan.out_row, rows, "left").tolist()
    out_hi = np.searchsorted(plan.out_row, rows, "right").tolist()
    in_lo = np.searchsorted(plan.in_row, rows, "left").tolist()
    in_hi = np.searchsorted(plan.in_row, rows, "right").tolist()
    out_flow, in_flow = plan.out_flow.tolist(), plan.in_flow.tolist()
    ts, end, lane = plan.ts.tolist(), plan.end.tolist(), plan.lane_uuid.tolist()
    name_iid, cat_iid, ids = plan.name_iid.tolist(), plan.cat_iid.tolist(), plan.event_id.tolist()
    kind, args = plan.kind.to_list(), plan.args.to_list()
    flops, flops_set = plan.flops.tolist(), plan.flops_set.tolist()
    nbytes, bytes_set = plan.bytes_.tolist(), plan.bytes_set.tolist()
    c_ts, c_uuid = plan.counter_ts.tolist(), plan.counter_uuid.tolist()
    c_value = plan.counter_value.tolist()
    for k, r in zip(plan.packet_kind.tolist(), plan.packet_row.tolist(), strict=True):
        packet = builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        event = packet.track_event
        if k == END:
            packet.timestamp = end[r]
            event.type = pb.TrackEvent.TYPE_SLICE_END
            event.track_uuid = lane[r]
        elif k == COUNTER:
            packet.timestamp = c_ts[r]
            event.type = pb.TrackEvent.TYPE_COUNTER
            event.track_uuid = c_uuid[r]
            event.double_counter_value = c_value[r]
        else:
            packet.timestamp = ts[r]
            packet.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE
            event.type = (
                pb.TrackEvent.TYPE_SLICE_BEGIN if k == BEGIN else pb.TrackEvent.TYPE_INSTANT
            )
            event.track_uuid = lane[r]
            event.name_iid = name_iid[r]
            if cat_iid[r]:
                event.category_iids.append(cat_iid[r])
            note = event.debug_annotations.add()
            note.name_iid, note.uint_value = 1, ids[r]
            if kind[r] is not None:
                note = event.debug_annotations.add()
                note.name_iid, note.string_value = 2, kind[r]
            if flops_set[r]:
                note = event.debug_annotations.add()
                note.name_iid, note.double_value = 3, flops[r]
            if bytes_set[r]:
                note = event.debug_annotations.add()
                note.name_iid, note.double_value = 4, nbytes[r]
            if args[r] is not None:
                note = event.debug_annotations.add()
                note.name_iid, note.legacy_json_value = 5, args[r]
            if out_hi[r] > out_lo[r]:
                event.flow_ids.extend(out_flow[out_lo[r] : out_hi[r]])
            if in_hi[r] > in_lo[r]:
                event.terminating_flow_ids.extend(in_flow[in_lo[r] : in_hi[r]])
        builder.write_packet(packet)
