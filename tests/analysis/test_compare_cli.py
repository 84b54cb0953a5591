"""`moetrace compare`'s MoE diff: per-stage and per-family tables, CSV/JSON equal the API,
bad input one line with exit status 2."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.analysis.diff import diff_side, kernel_diff, stage_diff
from moetrace.cli import main
from moetrace.trace.io import load
from moetrace.trace.model import Trace


def _write(path: Path, gemm: list[tuple[int, int]], dispatch_ns: int) -> Path:
    """Rank 0, one step: gemm1 tiles (ts, dur) on alternating cores, a dispatch_tx [0, d)."""
    n = len(gemm)
    Trace.from_frames(
        {
            "id": list(range(n + 2)),
            "track": [i % 2 for i in range(n)] + [2, 3],
            "name": ["gemm1"] * n + ["dispatch_tx", "step 0"],
            "kind": ["compute"] * n + ["comm", "marker"],
            "ts": [g[0] for g in gemm] + [0, 0],
            "dur": [g[1] for g in gemm] + [dispatch_ns, 1_000_000],
        },
        {
            "track": [0, 1, 2, 3],
            "rank": [0, 0, 0, 0],
            "unit": ["aic", "aic", "link", "cpu"],
            "pid": ["0"] * 4,
            "tid": ["a", "b", "c", "d"],
        },
        compute_depth=True,
    ).write(path)
    return path


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """A: gemm1 [0, 100 µs) and [50, 150 µs) (union 150 µs), dispatch 40 µs.
    B: gemm1 [0, 100 µs), dispatch 200 µs. By hand: dispatch +160 µs first, GEMM -50 µs."""
    a = _write(tmp_path / "a.json", [(0, 100_000), (50_000, 100_000)], 40_000)
    b = _write(tmp_path / "b.json", [(0, 100_000)], 200_000)
    return a, b


def test_compare_json_has_the_stage_and_kernel_diffs(pair: tuple[Path, Path]) -> None:
    a, b = pair
    code, out, _ = run("compare", str(a), str(b), "--json")
    assert code == 0
    doc = json.loads(out)
    stages = [(r["stage"], r["a_ns"], r["b_ns"], r["delta_ns"]) for r in doc["stages"]]
    assert stages == [("dispatch", 40_000, 200_000, 160_000), ("expert_gemm", 150_000, 100_000,
                                                               -50_000)]  # fmt: skip
    sa, sb = diff_side(load(a)), diff_side(load(b))
    assert doc["kernels"] == kernel_diff(sa, sb).to_dicts()
    assert "metrics" in doc


def test_compare_csv_tables_and_breakdown(pair: tuple[Path, Path]) -> None:
    a, b = pair
    code, out, _ = run("compare", str(a), str(b), "--csv", "--table", "stages", "--by", "rank")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == ["rank", "stage", "a_ns", "b_ns", "delta_ns", "ratio"]
    assert (rows[0]["stage"], rows[0]["delta_ns"], float(rows[0]["ratio"])) == (
        "dispatch", "160000", 5.0)  # fmt: skip
    code, out, _ = run("compare", str(a), str(b), "--csv", "--table", "kernels")
    rows = list(csv.DictReader(io.StringIO(out)))
    want = kernel_diff(diff_side(load(a)), diff_side(load(b)))
    assert [r["kernel_a"] for r in rows] == want["kernel_a"].to_list()
    code, out, _ = run("compare", str(a), str(b), "--csv")
    assert out.splitlines()[0].startswith("metric,")  # totals stay the default CSV


def test_compare_table_names_the_most_moved_stage(pair: tuple[Path, Path]) -> None:
    a, b = pair
    code, out, _ = run("compare", str(a), str(b))
    assert code == 0
    assert "time moved most in stage dispatch: A 40,000 ns -> B 200,000 ns" in out
    assert "(delta +160,000 ns, B/A 5.000x)" in out
    assert out.index("dispatch_tx") > out.index("per kernel family")
    want = stage_diff(diff_side(load(a)), diff_side(load(b)))
    assert want.filter(pl.col("stage") == "expert_gemm")["ratio"].item() == pytest.approx(2 / 3)
    assert "0.667x" in out


def test_compare_bad_input_is_one_line_exit_2(pair: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = pair
    bad = tmp_path / "bad.toml"
    bad.write_text('framework = "x"\n[[rule]]\ncategory = "gemm"\npatterns = ["a"]\n')
    for args in (
        ["--rules", str(bad)],
        ["--json", "--csv"],
        ["--by", "expert"],
    ):
        code, out, err = run("compare", str(a), str(b), *args)
        assert code == 2, (args, out, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_compare_gloo_runs_json_equals_the_api(real_traces: Path) -> None:
    """The shared balanced vs skewed gloo jobs (directories, 4 ranks each): the CLI's stage
    rows are the API's, most moved first."""
    a, b = (real_traces / "torch_gloo_moe" / v for v in ("balanced", "skewed"))
    code, out, _ = run("compare", str(a), str(b), "--json")
    assert code == 0
    stages = json.loads(out)["stages"]
    files = [sorted(str(p) for p in d.glob("rank*.pt.trace.json.gz")) for d in (a, b)]
    want = stage_diff(diff_side(load(files[0])), diff_side(load(files[1])))
    assert stages == want.to_dicts()
    assert abs(stages[0]["delta_ns"]) == max(abs(r["delta_ns"]) for r in stages)
