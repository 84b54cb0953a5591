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
    assert pl.read_json  # polars available for the JSON outputs


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
