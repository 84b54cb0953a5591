"""Field numbers and enum values of the Perfetto protos that the vectorised readers decode
from raw bytes (`read_vectorised`, and `partial`'s prefix cutter), named once for both.

Values from perfetto's trace_packet.proto, track_event.proto and debug_annotation.proto.
"""

from __future__ import annotations

# TrackEvent.Type
TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
# Wire types
WIRE_VARINT, WIRE_FIXED64, WIRE_LEN = 0, 1, 2
# TracePacket fields
P_TIMESTAMP, P_SEQ, P_EVENT, P_INTERNED, P_FLAGS, P_CLEARED = 8, 10, 11, 12, 13, 41
# TrackEvent fields
E_CAT_IIDS, E_NOTES, E_TYPE, E_NAME_IID, E_UUID = 3, 4, 9, 10, 11
E_CATS, E_NAME, E_INT_VALUE, E_DOUBLE_VALUE = 22, 23, 30, 44
E_FLOW_OUT, E_FLOW_IN, E_FLOW_OUT_OLD, E_FLOW_IN_OLD = 47, 48, 36, 42
FLOW_WIRES = {
    E_FLOW_OUT: WIRE_FIXED64,
    E_FLOW_IN: WIRE_FIXED64,
    E_FLOW_OUT_OLD: WIRE_VARINT,
    E_FLOW_IN_OLD: WIRE_VARINT,
}
"""The flow id fields of a TrackEvent and their wire types (fixed64 ids, older varint ids)."""
# DebugAnnotation fields: name_iid, name; scalar values (bool, uint, int, double, string,
# pointer, legacy JSON); nested values (nested, dict entries, array values).
D_NAME_IID, D_NAME = 1, 10
D_BOOL, D_UINT, D_INT, D_DOUBLE, D_STRING, D_POINTER, D_JSON = 2, 3, 4, 5, 6, 7, 9
D_VALUES = (D_BOOL, D_UINT, D_INT, D_DOUBLE, D_STRING, D_POINTER, D_JSON)
D_NESTED = (8, 11, 12)
