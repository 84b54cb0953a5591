"""`moetrace info` and `moetrace convert` through click's CliRunner: output, exit codes,
one-line errors, no overwrite without --force, `-o -` to stdout."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from moetrace.cli import main
from moetrace.trace.io import load

SMALL = [
    {
        "ph": "M",
        "name": "thread_name",
        "pid": 1,
        "tid": 2,
        "args": {"name": "[bold]main[/bold]\x1b[31m"},
    },
    {
        "ph": "X",
        "name": "ProfilerStep#3",
        "pid": 1,
        "tid": 2,
        "ts": 10,
        "dur": 100,
        "cat": "user_annotation",
    },
    {
        "ph": "X",
        "name": "ncclKernel_AllReduce",
        "pid": 0,
        "tid": 7,
        "ts": 20,
        "dur": 30,
        "cat": "kernel",
    },
    {"ph": "X", "name": "gemm", "pid": 0, "tid": 7, "ts": 60, "dur": 30, "cat": "kernel"},
]


def _write(tmp_path: Path, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"distributedInfo": {"rank": 5}, "traceEvents": SMALL}))
    return path


def test_info_json_is_stable_and_exact(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["info", "--json", str(_write(tmp_path))])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["format"] == "chrome-json" and info["flavor"] == "kineto"
    assert info["events"] == 3 and info["ranks"] == [5]
    assert info["kinds"] == {"comm": 1, "compute": 1, "marker": 1}
    assert info["units"] == {"cpu": 1, "stream": 1}
    assert info["window_ns"] == {"start": 10_000, "end": 110_000, "duration": 100_000}
    assert list(info) == [
        "source",
        "format",
        "flavor",
        "events",
        "tracks",
        "ranks",
        "units",
        "kinds",
        "window_ns",
        "deps",
        "counters",
        "unclassified_share",
        "unclassified_top_ns",
        "warnings",
    ]
    assert 0.0 <= info["unclassified_share"] <= 1.0


def test_info_table_for_people(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["info", str(_write(tmp_path))])
    assert result.exit_code == 0
    assert "ranks" in result.output and "5" in result.output and "kineto" in result.output
    assert "\x1b" not in result.output


def test_info_bad_input_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\x00\x01\x02binary")
    result = CliRunner().invoke(main, ["info", str(bad)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "bad.json" in lines[0] and "binary" in lines[0]
    assert "Traceback" not in result.output


def test_info_missing_file_and_empty_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["info", str(tmp_path / "nope.json")])
    assert result.exit_code == 2 and "nope.json" in result.output
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(main, ["info", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no traces" in result.output


def test_convert_refuses_overwrite_without_force(tmp_path: Path) -> None:
    src = _write(tmp_path)
    out = tmp_path / "out.json.gz"
    runner = CliRunner()
    assert runner.invoke(main, ["convert", str(src), "-o", str(out)]).exit_code == 0
    before = out.read_bytes()
    again = runner.invoke(main, ["convert", str(src), "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output and "--force" in again.output
    assert out.read_bytes() == before
    forced = runner.invoke(main, ["convert", str(src), "-o", str(out), "--force"])
    assert forced.exit_code == 0
    assert load(out).frames_equal(load(src))


def test_convert_to_stdout(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["convert", str(_write(tmp_path)), "-o", "-"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "X"] == [
        "ProfilerStep#3",
        "ncclKernel_AllReduce",
        "gemm",
    ]


def test_convert_merges_ranks(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.json")
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"distributedInfo": {"rank": 6}, "traceEvents": SMALL}))
    out = tmp_path / "job.json"
    result = CliRunner().invoke(main, ["convert", str(a), str(b), "-o", str(out)])
    assert result.exit_code == 0, result.output
    job = load(out)
    assert job.ranks == [5, 6] and job.events.height == 6


def test_convert_unknown_extension(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["convert", str(_write(tmp_path)), "-o", str(tmp_path / "x.txt")]
    )
    assert result.exit_code == 2 and "unknown output format" in result.output


def test_help_has_examples() -> None:
    for cmd in ("info", "convert"):
        result = CliRunner().invoke(main, [cmd, "--help"])
        assert result.exit_code == 0 and "Examples:" in result.output
