"""The malformed-trace corpus (tests/data/malformed, made by _make.py): every file gives its
expected one-line error (exit 2 from the CLI, no traceback) or loads with its expected warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.trace.io import load
from moetrace.trace.model import TraceFormatError

CORPUS = Path(__file__).resolve().parent.parent / "data" / "malformed"

# file -> what must be said: an error (with its position) or a warning, and how many events remain
ERRORS: dict[str, tuple[str, str]] = {
    "empty.json": ("empty file", "byte 0"),
    "whitespace_only.json": ("only whitespace", "byte 0"),
    "not_json.json": ("not a JSON trace", "byte 0"),
    "binary.json": ("binary data", "byte 0"),
    "not_utf8.json": ("not UTF-8", "byte 0"),
    "corrupt.json.gz": ("gzip member 1: corrupt data", "compressed byte"),
    "top_level_number.json": ("expected '[' or '{'", "byte 0"),
    "top_level_string.json": ("expected '[' or '{'", "byte 0"),
    "object_without_trace_events.json": ('no "traceEvents" array', "byte 0"),
    "trace_events_not_array.json": ("expected an array of events", "byte 16"),
    "truncated_in_first_event.json": ("no complete event", "byte 33"),
    "syntax_error_mid_array.json": ("invalid JSON", "byte 78"),
    "nan_timestamp.json": ("invalid JSON", "byte 52"),
    "control_char_in_name.json": ("invalid JSON", "byte 23"),
    "directory_without_traces": ("holds no traces", ""),
}

WARNINGS: dict[str, tuple[str, int]] = {
    "array_not_closed.json": ("array not closed at byte 131", 2),
    "array_trailing_comma.json": ("array not closed", 2),
    "object_truncated_mid_event.json": ("truncated at byte 164", 2),
    "object_array_not_closed.json": ("array not closed at byte 147", 2),
    "gzip_truncated.json.gz": ("gzip stream ends early", 183),
    "elements_not_objects.json": (
        "3 array element(s) are not JSON objects, skipped (first: event #1)",
        2,
    ),
    "missing_ph.json": ("without a one-letter string 'ph', skipped (first: event #1)", 1),
    "ph_wrong_type.json": ("without a one-letter string 'ph'", 1),
    "missing_ts.json": ("without 'ts', skipped (first: event #1)", 1),
    "ts_not_numeric.json": ("non-numeric or out-of-range 'ts'", 1),
    "ts_object.json": ("non-numeric or out-of-range 'ts'", 1),
    "ts_out_of_range.json": ("non-numeric or out-of-range 'ts', skipped (first: event #0)", 1),
    "x_without_dur.json": ("phase X without 'dur', skipped", 1),
    "dur_not_numeric.json": ("non-numeric 'dur'", 1),
    "negative_dur.json": ("negative 'dur', skipped (first: event #1)", 1),
    "name_not_string.json": ("non-string 'name' (kept as its JSON text)", 2),
    "missing_pid.json": ("without 'pid' (put on pid 0)", 2),
    "pid_wrong_type.json": ("pid/tid that is neither number nor string", 2),
    "args_not_object.json": ("'args' that is not an object", 2),
    "unmatched_end.json": ("1 unmatched 'E' event(s)", 1),
    "unmatched_begin.json": ("1 unmatched 'B' event(s) never ended", 2),
    "unknown_phases.json": ("skipped 2 event(s) of phase 'O' (object snapshot)", 1),
    "counter_non_numeric.json": ("non-numeric counter value", 1),
    "overlapping_slices.json": ("moved to overflow tracks", 2),
}

CLEAN: dict[str, int] = {
    "array_trailing_comma_closed.json": 2,
    "utf8_bom.json": 2,
    "pid_beyond_int64.json": 2,
    "empty_array.json": 0,
    "dangling_flow_end.json": 1,
}


def test_corpus_is_complete() -> None:
    names = {p.name for p in CORPUS.iterdir() if not p.name.startswith("_")}
    assert names == set(ERRORS) | set(WARNINGS) | set(CLEAN)
    assert len(names) >= 30


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_names_file_position_problem(name: str) -> None:
    problem, position = ERRORS[name]
    with pytest.raises(TraceFormatError) as info:
        load(CORPUS / name)
    message = str(info.value)
    assert "\n" not in message
    assert name in message and problem in message and position in message


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_cli_error_is_one_line_exit_2(name: str) -> None:
    result = CliRunner().invoke(main, ["info", str(CORPUS / name)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("moetrace: error: ") and name in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", sorted(WARNINGS))
def test_partial_problems_are_warnings(name: str) -> None:
    expected, events = WARNINGS[name]
    trace = load(CORPUS / name)
    assert any(expected in w for w in trace.warnings), trace.warnings
    assert trace.events.height == events
    assert trace.problems() == []
    result = CliRunner().invoke(main, ["info", "--json", str(CORPUS / name)])
    assert result.exit_code == 0 and expected.split(" (")[0][:20] in result.output


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_odd_but_valid_loads_without_warnings(name: str) -> None:
    trace = load(CORPUS / name)
    assert trace.warnings == [] and trace.events.height == CLEAN[name]


def test_pid_beyond_int64_kept_as_text() -> None:
    trace = load(CORPUS / "pid_beyond_int64.json")
    assert str(2**70) in trace.tracks["pid"].to_list()
