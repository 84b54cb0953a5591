"""Regenerate the malformed-trace corpus: `python tests/data/malformed/_make.py`.

Each file is one way a trace can be broken (or odd but valid); tests/trace/test_malformed.py
holds the table of what moetrace must say about each.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
X = {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 10, "dur": 5}
Y = {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 20, "dur": 5}


def ev(**kw: object) -> dict[str, object]:
    return {**X, **kw}


def arr(*events: object) -> str:
    return json.dumps(list(events))


FILES: dict[str, bytes | str] = {
    "empty.json": b"",
    "whitespace_only.json": "  \n\t \n",
    "not_json.json": "hello, this is not a trace\n",
    "binary.json": bytes(range(256)),
    "not_utf8.json": b"\xff\xfe\xfd garbage \xc3\x28",
    "corrupt.json.gz": b"\x1f\x8b\x08\x00" + b"\x00garbage-not-deflate" * 4,
    "top_level_number.json": "42",
    "top_level_string.json": '"traceEvents"',
    "object_without_trace_events.json": json.dumps({"foo": 1, "bar": [1, 2]}),
    "trace_events_not_array.json": json.dumps({"traceEvents": {"ph": "X"}}),
    "truncated_in_first_event.json": '[{"ph": "X", "name": "a", "ts": 1',
    "syntax_error_mid_array.json": arr(X)[:-1]
    + ', {"ph": "X" "name": "b"}, '
    + json.dumps(Y)
    + "]",
    "nan_timestamp.json": '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": NaN, "dur": 1}]',
    "control_char_in_name.json": (
        '[{"ph": "X", "name": "a\x01b", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]'
    ),
    # partial problems: the trace loads, with a warning
    "array_not_closed.json": arr(X, Y)[:-1],
    "array_trailing_comma.json": arr(X, Y)[:-1] + ",\n",
    "array_trailing_comma_closed.json": arr(X, Y)[:-1] + ",]",
    "object_truncated_mid_event.json": json.dumps({"traceEvents": [X, Y]})[:-2]
    + ', {"ph": "X", "na',
    "object_array_not_closed.json": json.dumps({"traceEvents": [X, Y]})[:-2],
    "elements_not_objects.json": arr(X, 5, "text", [1], Y),
    "missing_ph.json": arr(X, {k: v for k, v in Y.items() if k != "ph"}),
    "ph_wrong_type.json": arr(X, ev(ph=5)),
    "missing_ts.json": arr(X, {k: v for k, v in Y.items() if k != "ts"}),
    "ts_not_numeric.json": arr(X, ev(ts="soon")),
    "ts_object.json": arr(X, ev(ts={"us": 5})),
    "ts_out_of_range.json": '[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1e400, "dur": 1},'
    + json.dumps(Y)
    + "]",
    "x_without_dur.json": arr(X, {k: v for k, v in Y.items() if k != "dur"}),
    "dur_not_numeric.json": arr(X, ev(dur="long")),
    "negative_dur.json": arr(X, ev(dur=-3)),
    "name_not_string.json": arr(X, ev(name=123)),
    "missing_pid.json": arr(X, {k: v for k, v in Y.items() if k != "pid"}),
    "pid_wrong_type.json": arr(X, ev(pid=[1, 2])),
    "args_not_object.json": arr(X, ev(args=[1, 2])),
    "unmatched_end.json": arr(X, {"ph": "E", "pid": 1, "tid": 9, "ts": 30}),
    "unmatched_begin.json": arr(X, {"ph": "B", "name": "open", "pid": 1, "tid": 9, "ts": 30}),
    "unknown_phases.json": arr(X, ev(ph="O"), ev(ph="Q"), ev(ph="O")),
    "counter_non_numeric.json": arr(
        X, {"ph": "C", "name": "mem", "pid": 1, "ts": 5, "args": {"v": "high"}}
    ),
    "overlapping_slices.json": arr(X, ev(name="c", ts=12, dur=10)),
    "dangling_flow_end.json": arr(
        X,
        {
            "ph": "f",
            "id": 7,
            "pid": 1,
            "tid": 1,
            "ts": 10,
            "bp": "e",
            "cat": "ac2g",
            "name": "ac2g",
        },
    ),
    # odd but valid: loads without warnings
    "utf8_bom.json": "\ufeff" + arr(X, Y),
    "pid_beyond_int64.json": arr(ev(pid=2**70), Y),
    "empty_array.json": "[]",
}


def main() -> None:
    for name, content in FILES.items():
        data = content.encode("utf-8") if isinstance(content, str) else content
        (HERE / name).write_bytes(data)
    varied = [{**X, "name": f"op{i * 7919 % 1000}", "ts": i * 13, "dur": i % 7} for i in range(400)]
    whole = gzip.compress(json.dumps({"traceEvents": varied}).encode(), mtime=0)
    (HERE / "gzip_truncated.json.gz").write_bytes(whole[: len(whole) // 2])
    empty_dir = HERE / "directory_without_traces"
    empty_dir.mkdir(exist_ok=True)
    (empty_dir / "notes.txt").write_text("no traces here\n")
    (empty_dir / "communication.json").write_text("{}\n")


if __name__ == "__main__":
    main()
