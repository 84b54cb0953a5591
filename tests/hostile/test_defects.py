"""One test per defect of the hostile-input campaign (issue 12): bad numbers, int64-overflowing
times, huge ranks, long file names, and `convert` reporting what it dropped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hostile_cli import one_error_line, run_cli

from moetrace.commands.numbers import HW_RANGES
from moetrace.trace.io import load

SMALL = ["--ranks", "4", "--tokens", "128"]


def _write(path: Path, events: list[dict[str, Any]], **top: Any) -> Path:
    path.write_text(json.dumps({**top, "traceEvents": events}))
    return path


def _x(name: str, ts: Any, dur: Any = 2, **more: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, **more}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--seed", "-1"], "--seed '-1': must be an integer in 0..2^63-1"),
        (["--seed", str(2**63)], "must be an integer in 0..2^63-1"),
        (["--seed", "1.5"], "--seed '1.5': expected an integer"),
        (
            ["--hw", "link_bw=1"],
            "--hw link_bw '1': must be a finite number in 1e+06..1e+16 bytes/s",
        ),
        (["--hw", "link_bw=nan"], "--hw link_bw 'nan': must be a finite number"),
        (["--hw", "link_bw=-5e9"], "--hw link_bw '-5e9': must be a finite number"),
        (["--hw", "hbm_bw=inf"], "--hw hbm_bw 'inf': must be a finite number"),
        (["--hw", "gemm_eff=1.5"], "in 0.001..1 of peak"),
        (["--hw", "n_aic=2.5"], "expected a whole number of cores"),
        (["--hw", "clock_hz=abc"], "--hw clock_hz 'abc': expected a number"),
    ],
)
def test_bad_executor_numbers_are_one_line_exit_2(args: list[str], expected: str) -> None:
    code, out, err = run_cli(["run", *SMALL, *args])
    assert code == 2 and out == ""
    assert expected in one_error_line(err)


def test_hw_file_values_are_checked_too(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text("link_bw = 1.0\n")
    code, _, err = run_cli(["run", *SMALL, "--hw-file", str(hw)])
    assert code == 2 and "--hw link_bw 1.0: must be a finite number" in one_error_line(err)


def test_every_range_accepts_its_ends_and_link_bw_zero_means_the_tables() -> None:
    from moetrace.commands.numbers import check_hw_overrides

    for key, (low, high, _) in HW_RANGES.items():
        assert check_hw_overrides({key: low}) == {key: low}
        assert check_hw_overrides({key: str(high)}) == {key: str(high)}
    assert check_hw_overrides({"link_bw": "0"}) == {"link_bw": "0"}
    assert check_hw_overrides({"dispatch_bw": "8:1e9"}) == {"dispatch_bw": "8:1e9"}  # executor's


def test_every_numeric_hardware_field_has_a_range_that_fits_every_preset() -> None:
    import dataclasses

    from moetrace.executor.hardware import PRESETS, Hardware

    numeric = [f.name for f in dataclasses.fields(Hardware) if f.type in ("int", "float")]
    assert sorted(numeric) == sorted(HW_RANGES)
    for hw in PRESETS.values():
        for key, (low, high, _) in HW_RANGES.items():
            value = getattr(hw, key)
            assert low <= value <= high or (key == "link_bw" and value == 0), (hw.name, key)


def test_valid_extreme_hw_values_run(tmp_path: Path) -> None:
    code, out, err = run_cli(["run", *SMALL, "--hw", "link_bw=1e6", "--json"])
    assert code == 0, err
    assert json.loads(out)["makespan_ns"] > 0


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf", "1e9"])
def test_peak_tflops_out_of_range(value: str) -> None:
    trace = Path(__file__).resolve().parents[2] / "sample_traces" / "tile_zipf.json.gz"
    code, out, err = run_cli(["metrics", str(trace), "--json", "--peak-tflops", value])
    assert code == 2 and out == ""
    assert "--peak-tflops" in one_error_line(err) and "0.001..1e+06 TFLOP/s" in err


def test_peak_tflops_in_range_changes_mfu_as_expected() -> None:
    trace = Path(__file__).resolve().parents[2] / "sample_traces" / "tile_zipf.json.gz"
    code, out, _ = run_cli(["metrics", str(trace), "--json", "--peak-tflops", "100"])
    assert code == 0
    code2, out2, _ = run_cli(["metrics", str(trace), "--json", "--peak-tflops", "200"])
    assert code2 == 0
    a = json.loads(out)["traces"][0]["summary"]["mfu"]
    b = json.loads(out2)["traces"][0]["summary"]["mfu"]
    assert a == pytest.approx(2 * b)


def test_times_overflowing_int64_ns_are_refused_with_the_event_position(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "t.json",
        [
            _x("ok", 100),
            _x("end_beyond", 4_611_686_018_427_387, 1_000),  # ts fits, ts + dur > 2^62 ns
            _x("huge", 9.2e15),
            _x("neg", -9.2e15),
            {"ph": "C", "name": "c", "pid": 1, "ts": -5e15, "args": {"v": 1}},
        ],
    )
    trace = load(path)
    assert trace.events["name"].to_list() == ["ok"]
    assert trace.counters.height == 0
    (warning,) = [w for w in trace.warnings if "2^62" in w]
    assert warning.startswith("4 event(s) with 'ts' or 'ts'+'dur' beyond ±2^62 ns")
    assert warning.endswith("(first: event #1)")
    window = trace.window()
    assert window is not None and window[1] - window[0] == 2000


def test_times_just_inside_the_range_load_exactly(tmp_path: Path) -> None:
    limit_us = (2**62 - 1) // 1000  # whole microseconds that still fit
    path = _write(tmp_path / "t.json", [_x("lo", -limit_us, 0), _x("hi", limit_us - 5, 5)])
    trace = load(path)
    assert sorted(trace.events["ts"].to_list()) == [-limit_us * 1000, (limit_us - 5) * 1000]
    window = trace.window()
    assert window is not None and window[1] - window[0] == 2 * limit_us * 1000  # no overflow


@pytest.mark.parametrize("rank", [2**31, 2**70, -1, "x", 1.5, True])
def test_distributed_rank_outside_int32_is_a_warning(tmp_path: Path, rank: Any) -> None:
    path = _write(
        tmp_path / "k.json",
        [_x("k", 1, cat="kernel")],
        distributedInfo={"rank": rank},
        schemaVersion=1,
    )
    code, out, err = run_cli(["info", str(path), "--json"])
    assert code == 0, err
    info = json.loads(out)
    assert info["ranks"] == []
    assert any("distributedInfo.rank" in w and "0..2^31-1" in w for w in info["warnings"])


def test_rank_2_31_minus_1_is_kept(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "k.json", [_x("k", 1, cat="kernel")], distributedInfo={"rank": 2**31 - 1}
    )
    assert load(path).ranks == [2**31 - 1]


def test_300_character_file_names(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.json", [_x("a", 1)])
    long_out = tmp_path / ("o" * 300 + ".json")
    code, _, err = run_cli(["convert", str(src), "-o", str(long_out)])
    assert code == 2 and "file name too long (305 characters" in one_error_line(err)
    code, _, err = run_cli(["info", str(tmp_path / ("i" * 300 + ".json"))])
    assert code == 2
    line = one_error_line(err)
    assert "name too long" in line.lower() or "no such file" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]


def test_convert_reports_warnings_and_refuses_an_empty_output(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.json", [_x("a", "x"), _x("b", 1, None)])
    out = tmp_path / "out.json"
    code, stdout, err = run_cli(["convert", str(src), "-o", str(out)])
    assert code == 2 and stdout == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith("warning: 1 event(s) with a non-numeric or out-of-range 'ts'")
    assert lines[1].startswith("warning: 1 event(s) of phase X without 'dur'")
    assert lines[2] == (
        f"moetrace: error: {src}: every event was dropped (see the warnings above); nothing written"
    )
    assert not out.exists()


def test_convert_reports_truncation_and_writes_what_was_kept(tmp_path: Path) -> None:
    src = tmp_path / "cut.json"
    src.write_text('[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2},{"ph":"X","na')
    out = tmp_path / "out.json"
    code, _, err = run_cli(["convert", str(src), "-o", str(out)])
    assert code == 0
    assert err.startswith("warning: truncated at byte 67")
    assert "wrote 1 events" in err
    assert load(out).events["name"].to_list() == ["a"]


def test_convert_of_an_empty_trace_is_fine(tmp_path: Path) -> None:
    src = tmp_path / "empty.json"
    src.write_text("[]")
    code, _, err = run_cli(["convert", str(src), "-o", str(tmp_path / "out.json")])
    assert code == 0 and "wrote 0 events" in err


def test_warnings_with_control_characters_are_shown_escaped(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.json", [_x("ok", 1), {"ph": "\x1b", "ts": 1}])
    code, _, err = run_cli(["convert", str(src), "-o", str(tmp_path / "o.json")])
    assert code == 0
    assert "\x1b" not in err and "\\x1b" in err


def test_convert_refuses_an_unknown_output_format_before_reading(tmp_path: Path) -> None:
    missing = tmp_path / "not_read.json"  # never opened: the format is checked first
    code, _, err = run_cli(["convert", str(missing), "-o", str(tmp_path / "out.txt")])
    assert code == 2 and "unknown output format" in one_error_line(err)


def _levels(value: Any) -> int:
    """Nesting of `[[[...]]]` (iteratively: == on it would hit the recursion limit)."""
    levels = 0
    while isinstance(value, list) and value:
        value, levels = value[0], levels + 1
    assert value == []
    return levels


def test_deeply_nested_top_level_value_survives_the_cache_and_pftrace(tmp_path: Path) -> None:
    """Found by the fuzzing campaign (seed 20261202): a top-level value nested 3,000 deep read
    fine but crashed the cache write (and the .pftrace writer) with a RecursionError."""
    depth = 3000
    src = tmp_path / "deep.json"
    src.write_text(
        '{"deep":' + "[" * depth + "]" * depth + ',"traceEvents":' + json.dumps([_x("k", 1)]) + "}"
    )
    old = src.stat().st_mtime_ns - 10**10  # outside the cache's racy window
    os.utime(src, ns=(old, old))
    for trace in (load(src), load(src)):  # read and cached, then read from the cache
        assert _levels(trace.meta["top"]["deep"]) == depth - 1
        assert trace.events["name"].to_list() == ["k"]
    code, _, err = run_cli(["convert", str(src), "-o", str(tmp_path / "deep.pftrace")])
    assert code == 0, err
    assert _levels(load(tmp_path / "deep.pftrace").meta["top"]["deep"]) == depth - 1
    for command in (["info", str(src)], ["metrics", "--json", str(src)]):
        assert run_cli(command)[0] == 0


def test_pftrace_with_a_corrupt_nested_message_isone_error_line(tmp_path: Path) -> None:
    """Found by the fuzzing campaign (seed 777): a packet whose own fields frame correctly but
    whose track descriptor (field 60) holds corrupt bytes passed the vectorised scan and then
    raised protobuf's DecodeError out of `moetrace info`."""
    packet = b"\xe2\x03\x02\xff\xff"  # field 60, length 2, an unterminated varint
    src = tmp_path / "corrupt.pftrace"
    src.write_bytes(b"\x0a" + bytes([len(packet)]) + packet)
    code, _, err = run_cli(["info", "--no-cache", str(src)])
    assert code == 2
    assert "corrupt.pftrace" in one_error_line(err)


def _stored_table(n_tracks: int) -> dict[str, Any]:
    """The `moetrace` table moetrace writes for `n_tracks` streams of pid 0 (tid = track)."""
    ids = list(range(n_tracks))
    return {
        "version": 1,
        "tracks": {
            "track": ids,
            "rank": [0] * n_tracks,
            "pid": ["0"] * n_tracks,
            "tid": [str(i) for i in ids],
            "unit": ["stream"] * n_tracks,
            "sort_index": ids,
        },
        "lanes": {"pid": ["0"] * n_tracks, "tid": [str(i) for i in ids], "track": ids},
        "deps": {"src": [0], "dst": [1], "kind": ["launch"]},
    }


@pytest.mark.parametrize(
    "damage",
    [
        ("tracks", "tid", lambda cells: cells[:-1]),  # one cell short
        ("lanes", "track", lambda cells: ["x", *cells[1:]]),  # not a number
        ("deps", "src", lambda cells: [-1]),  # outside UInt32
    ],
)
def test_damaged_stored_track_table_lays_the_tracks_out_instead(
    tmp_path: Path, damage: tuple[str, str, Any]
) -> None:
    """Found by the fuzzing campaign (seed 777): a moetrace file whose stored tables were
    edited (a column one cell short) raised Polars' ShapeError out of every command."""
    table, column, edit = damage
    stored = _stored_table(2)
    stored[table][column] = edit(stored[table][column])
    events = [_x("a", 1, pid=0, tid=0), _x("b", 5, pid=0, tid=1)]
    src = _write(tmp_path / "damaged.json", events, moetrace=stored)
    trace = load(src, cache=False)
    assert sorted(trace.events["name"].to_list()) == ["a", "b"]
    assert trace.tracks.height == 2
    assert any("moetrace track table is damaged" in w for w in trace.meta["warnings"])
    assert run_cli(["metrics", "--json", "--no-cache", str(src)])[0] == 0


def test_stored_deps_without_events_areone_error_line(tmp_path: Path) -> None:
    """Found by the fuzzing campaign (seed 777): a moetrace file whose deps name events it
    does not have (all of them cut off) raised an IndexError from the critical path."""
    src = _write(tmp_path / "no_events.json", [], moetrace=_stored_table(2))
    code, _, err = run_cli(["metrics", "--json", "--no-cache", str(src)])
    assert code == 2
    assert "nothing to analyze" in one_error_line(err)


def test_moe_of_a_trace_without_events_isone_error_line(tmp_path: Path) -> None:
    """`moe` printed an empty table (exit 0) for a trace whose events were all cut off;
    like `metrics`, it now says there is nothing to analyze."""
    src = tmp_path / "cut.json"
    src.write_text('{"traceEvents":[')
    for extra in ([], ["--json"]):
        code, out, err = run_cli(["moe", *extra, "--no-cache", str(src)])
        assert code == 2 and out == ""
        errors = [ln for ln in err.splitlines() if not ln.startswith("moetrace: warning: ")]
        assert "nothing to analyze (no events)" in one_error_line("\n".join(errors))


def test_a_files_own_warnings_meta_that_is_not_a_list_is_ignored_with_a_warning(
    tmp_path: Path,
) -> None:
    """A moetrace trace whose stored meta says `"warnings": true` (found by the fuzzer:
    `*True` raised a TypeError in the Chrome reader): read, with one warning saying so."""
    from moetrace.testing.synthetic import synthetic_trace

    path = tmp_path / "t.json"
    synthetic_trace(ranks=1, events_per_lane=3, seed=1).write(path)
    doc = json.loads(path.read_text())
    doc["moetrace"]["meta"]["warnings"] = True
    path.write_text(json.dumps(doc))
    trace = load(path, cache=False)
    assert trace.events.height > 0
    assert "the file's own 'warnings' meta is not a list of text: ignored" in trace.warnings
    assert all(isinstance(w, str) for w in trace.warnings)
