"""`moetrace metrics / compare / query`: machine output equals the API, errors are one line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.analysis import analyze
from moetrace.cli import main
from moetrace.trace.model import Trace

pytest.importorskip("moetrace.trace.io")


def _write(path: Path, comm_start: int, name: str = "mm") -> Path:
    t = Trace.from_frames(
        {
            "id": [0, 1, 2],
            "track": [0, 1, 2],
            "name": [name, "ncclDevKernel_AllToAll", "step 0"],
            "kind": ["compute", "comm", "marker"],
            "ts": [0, comm_start, 0],
            "dur": [100_000, 100_000, 300_000],
            "flops": [1e9, None, None],
        },
        {
            "track": [0, 1, 2],
            "rank": [0, 0, 0],
            "unit": ["aic", "link", "cpu"],
            "pid": ["0", "0", "0"],
            "tid": ["a", "b", "c"],
        },
        compute_depth=True,
    )
    t.write(path)
    return path


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_metrics_json_equals_api(tmp_path: Path) -> None:
    from moetrace.trace.io import load

    p = _write(tmp_path / "a.json", 50_000)
    code, out, _ = run("metrics", str(p), "--json", "--peak-tflops", "100")
    assert code == 0
    doc = json.loads(out)
    item = doc["traces"][0]["ranks"][0]
    want = analyze(load(p), peak_tflops=100).ranks.row(0, named=True)
    for k in ("window_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "free_ns"):
        assert item[k] == want[k]
    assert item["exposed_comm_ns"] == 50_000
    assert item["mfu"] == pytest.approx(1e9 / (150_000e-9 * 100e12))
    assert doc["traces"][0]["source"] == str(p)


def test_metrics_csv_by_unit_and_table(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.json", 50_000, name="[bold red]boom[/]")
    code, out, _ = run("metrics", str(p), "--csv", "--by", "unit")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["unit"]: float(r["util"]) for r in rows} == pytest.approx(
        {"aic": 100 / 150, "link": 100 / 150}
    )
    code, out, _ = run("metrics", str(p))
    assert code == 0
    # window 0.150 ms, exposed 0.050 ms, overlap 50 %, util of aic 66.67 %
    assert all(x in out for x in ("0.150", "0.050", "50.00%", "66.67%", "util aic")), out


def test_query_prints_names_literally(tmp_path: Path) -> None:
    p = _write(tmp_path / "a.json", 0, name="[bold red]boom[/]")
    code, out, _ = run("query", str(p), "SELECT name, dur FROM events ORDER BY ts, name")
    assert code == 0
    assert "[bold red]boom[/]" in out
    code, out, _ = run("query", str(p), "SELECT count(*) AS n FROM events", "--csv")
    assert out.splitlines() == ["n", "3"]
    code, out, _ = run("query", str(p), "SELECT name FROM deps_nope")
    assert code == 2


def test_compare_side_by_side(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.json", 100_000)  # comm after compute: all exposed
    b = _write(tmp_path / "b.json", 50_000)
    code, out, _ = run("compare", str(a), str(b), "--json")
    assert code == 0
    m = {r["metric"]: r for r in json.loads(out)["metrics"]}
    assert m["exposed_comm_ns"]["a"] == 100_000 and m["exposed_comm_ns"]["b"] == 50_000
    assert m["exposed_comm_ns"]["ratio"] == pytest.approx(0.5)
    code, out, _ = run("compare", str(a), str(b))
    assert code == 0 and "0.500x" in out


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    empty = Trace.from_frames(
        {"id": [0], "track": [0], "name": ["x"], "kind": ["marker"], "ts": [0], "dur": [5]},
        {"track": [0], "unit": ["cpu"], "pid": ["1"], "tid": ["1"]},
    )
    p = tmp_path / "empty.json"
    empty.write(p)
    for args in (
        ["metrics", str(p)],
        ["metrics", str(tmp_path / "missing.json")],
        ["metrics", str(_write(tmp_path / "ok.json", 0)), "--comm-pattern", "("],
        ["query", str(p), "SELEC nonsense"],
    ):
        code, _out, err = run(*args)
        assert code == 2, args
        assert len(err.strip().splitlines()) == 1 and err.startswith("moetrace: error:"), err
        assert "Traceback" not in err
    assert callable(pl.read_json)  # polars available for the JSON outputs


def test_one_bad_trace_among_several_is_skipped(tmp_path: Path) -> None:
    good = _write(tmp_path / "a.json", 50_000)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "ts": "nope"')
    code, out, err = run("metrics", str(good), str(bad), "--json")
    assert code == 0
    assert len(json.loads(out)["traces"]) == 1
    assert "skipped" in err and "bad.json" in err
    code, _out, err = run("metrics", str(bad), str(tmp_path / "missing.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def _rank_file(path: Path, rank: int, comm_start: int) -> Path:
    """A Kineto-style rank file: one step, compute [0, 100) µs, comm [comm_start, +100)."""
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"rank": rank},
        "traceEvents": [
            {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0,
             "dur": 400, "pid": 1, "tid": 1},
            {"ph": "X", "name": "gemm", "cat": "kernel", "ts": 0, "dur": 100, "pid": 0,
             "tid": 7, "args": {"stream": 7}},
            {"ph": "X", "name": "ncclDevKernel_AllToAll", "cat": "kernel", "ts": comm_start,
             "dur": 100, "pid": 0, "tid": 8, "args": {"stream": 8}},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(doc))
    return path


def test_a_directory_is_one_job_with_cross_rank_aggregates(tmp_path: Path) -> None:
    """Two ranks in a folder: ONE report with both; per step min/mean/max across ranks. By
    hand: rank 0 exposed 50 µs (comm at 50), rank 1 exposed 100 µs (comm at 100); windows
    150 and 200 µs; pooled overlap 50 / 200."""
    job = tmp_path / "profiler_output"
    job.mkdir()
    _rank_file(job / "r0.pt.trace.json", 0, 50)
    _rank_file(job / "r1.pt.trace.json", 1, 100)
    (job / "run_meta.json").write_text("{}")  # side file, not a rank
    code, out, err = run("metrics", str(job), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["traces"]) == 1
    ranks = {r["rank"]: r for r in doc["traces"][0]["ranks"]}
    assert (ranks[0]["exposed_comm_ns"], ranks[1]["exposed_comm_ns"]) == (50_000, 100_000)
    agg = doc["traces"][0]["aggregate"][0]
    assert agg["ranks"] == 2 and agg["step"] == 1
    assert (agg["min"]["exposed_comm_ns"], agg["mean"]["exposed_comm_ns"]) == (50_000, 75_000)
    assert (agg["max"]["exposed_comm_ns"], agg["sum"]["exposed_comm_ns"]) == (100_000, 150_000)
    assert agg["pooled"]["overlap_ratio"] == pytest.approx(50 / 200)
    assert "overlap_ratio" not in agg["sum"]
    # the same two files named one by one are the same job; --separate keeps them apart
    files = [str(job / "r0.pt.trace.json"), str(job / "r1.pt.trace.json")]
    code, out2, _ = run("metrics", *files, "--json")
    assert json.loads(out2)["traces"][0]["ranks"] == doc["traces"][0]["ranks"]
    code, out3, _ = run("metrics", *files, "--json", "--separate")
    assert [len(t["ranks"]) for t in json.loads(out3)["traces"]] == [1, 1]
    # people: the per (rank, step) table and the cross-rank table
    code, text, _ = run("metrics", str(job))
    assert code == 0 and "per step across ranks" in text and "exposed_comm:max" in text
    # --by rank: one whole-trace row per rank; --by step: the aggregate rows
    code, out4, _ = run("metrics", str(job), "--csv", "--by", "rank")
    rows = list(csv.DictReader(io.StringIO(out4)))
    assert [(r["rank"], r["step"], r["window_ns"]) for r in rows] == [
        ("0", "", "150000"),
        ("1", "", "200000"),
    ]
    code, out5, _ = run("metrics", str(job), "--csv", "--by", "step")
    step_rows = list(csv.DictReader(io.StringIO(out5)))
    assert step_rows[0]["exposed_comm_ns:max"] == "100000"


def test_query_and_compare_take_directories(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for r in (0, 1):
        _rank_file(a / f"r{r}.pt.trace.json", r, 100)  # all comm exposed
        _rank_file(b / f"r{r}.pt.trace.json", r, 50)
    code, out, _ = run(
        "query",
        str(a),
        "SELECT t.rank, count(*) AS n FROM events e JOIN tracks t ON e.track = t.track "
        "GROUP BY t.rank ORDER BY t.rank",
        "--csv",
    )
    assert code == 0 and out.splitlines() == ["rank,n", "0,3", "1,3"]
    code, out, _ = run("compare", str(a), str(b), "--json")
    assert code == 0
    m = {r["metric"]: r for r in json.loads(out)["metrics"]}
    assert (m["exposed_comm_ns"]["a"], m["exposed_comm_ns"]["b"]) == (200_000, 100_000)


def test_window_option_errors_are_one_line(tmp_path: Path) -> None:
    p = _rank_file(tmp_path / "r0.pt.trace.json", 0, 50)
    for args in (["--window", "steps"], ["--by", "rank", "--window", "annotation:x"]):
        code, _out, err = run("metrics", str(p), *args)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    code, out, _ = run("metrics", str(p), "--json", "--window", "annotation:ProfilerStep#1")
    assert code == 0 and json.loads(out)["traces"][0]["ranks"][0]["window_ns"] == 150_000


def test_job_lines_name_the_straggler_and_missing_ranks() -> None:
    from moetrace.commands.report_tables import job_lines, ranges

    assert ranges([7, 2, 3, 4, 9]) == "2-4, 7, 9"
    job = {
        "stragglers": [
            {"rank": 5, "caused_wait_ns": 3_000_000, "late_count": 4},
            {"rank": 1, "caused_wait_ns": 500_000, "late_count": 1},
        ],
        "critical_path": {"span_ns": 10_000_000, "comm_share": 0.25, "ns_by_rank": {"5": 8e6}},
        "missing_ranks": [2, 3],
    }
    lines = job_lines(job)
    assert lines[0].startswith("straggler: rank 5 made the others wait 3.0 ms")
    assert "last to arrive 4 times" in lines[0] and "next: rank 1 0.5 ms" in lines[0]
    assert "10.000 ms across ranks, communication 25.0%" in lines[1]
    assert lines[2] == "partial job: ranks 2-3 missing"
    # nobody waited: no straggler is named
    calm = {**job, "stragglers": [{"rank": 0, "caused_wait_ns": 0, "late_count": 0}]}
    assert not any(line.startswith("straggler") for line in job_lines(calm))


def test_metrics_names_the_gloo_straggler(real_traces: Path) -> None:
    """The skewed gloo job routes most tokens to rank 0: plain `metrics` names it."""
    folder = real_traces / "torch_gloo_moe" / "skewed"
    result = CliRunner().invoke(main, ["metrics", str(folder)])
    assert result.exit_code == 0, result.output
    assert "straggler: rank 0 made the others wait" in result.output
