"""`moetrace run / sweep / demo`: output, JSON fields, bad input (exit 2, one line, no work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.executor.run import simulate

SMALL = ["--ranks", "4", "--tokens", "128"]


def _run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_run_json_has_the_promised_fields(tmp_path: Path) -> None:
    code, out, _ = _run(["run", *SMALL, "--schedule", "tile", "--json"])
    assert code == 0
    data = json.loads(out)
    for key in (
        "makespan_ns",
        "tasks",
        "util",
        "exposed_ratio",
        "cp_comm_ratio",
        "tokens_per_s",
        "mfu",
    ):
        assert key in data
    assert 0 < data["util"]["aic"] <= 1
    assert data["tokens_per_s"] == pytest.approx(4 * 128 / (data["makespan_ns"] * 1e-9))
    assert 0 < data["mfu"] < 1
    # physics: FLOPs by hand (DeepSeek-V3: 4 ranks x 128 tokens x top-8 rows, 3 GEMMs of H x I,
    # plus the gate GEMM H x 256), peak = 4 ranks x 24 AIC x 8192 FLOP/cycle x 1.91 GHz
    rows = 4 * 128 * 8
    flops = rows * 2 * 3 * 7168 * 2048 + 4 * 128 * 2 * 7168 * 256
    assert data["flops"] == pytest.approx(flops, rel=1e-9)
    assert data["peak_flops"] == pytest.approx(4 * 24 * 8192 * 1.91e9)
    assert data["mfu_makespan"] == pytest.approx(
        flops / (data["peak_flops"] * data["makespan_ns"] * 1e-9)
    )
    assert set(data["floors_ns"]) == {"compute", "hbm", "link"}
    assert all(data["makespan_ns"] >= v > 0 for v in data["floors_ns"].values())
    assert data["hbm_bytes"] > 0


def test_run_seeds_reports_the_spread() -> None:
    code, out, _ = _run(["run", *SMALL, "--routing", "zipf:1.0", "--seeds", "3", "--json"])
    assert code == 0
    spread = json.loads(out)["seeds"]
    assert spread["n"] == 3
    singles = []
    for seed in range(3):
        _, one, _ = _run(["run", *SMALL, "--routing", "zipf:1.0", "--seed", str(seed), "--json"])
        singles.append(json.loads(one)["makespan_ns"] / 1e6)
    assert spread["makespan_ms"]["min"] == pytest.approx(min(singles))
    assert spread["makespan_ms"]["max"] == pytest.approx(max(singles))
    assert spread["makespan_ms"]["max"] > spread["makespan_ms"]["min"]  # seeds do differ


def test_run_writes_a_trace_and_refuses_to_clobber(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    code, text, _ = _run(["run", *SMALL, "--schedule", "sequential", "-o", str(out)])
    assert code == 0 and out.exists()
    assert "makespan" in text and str(out) in text
    code, _, err = _run(["run", *SMALL, "-o", str(out)])
    assert code == 2 and "already exists" in err


def test_hw_override_changes_the_run() -> None:
    base = json.loads(_run(["run", *SMALL, "--json"])[1])
    slow = json.loads(_run(["run", *SMALL, "--json", "--hw", "hbm_bw=0.4e12"])[1])
    assert slow["makespan_ns"] > base["makespan_ns"]


def test_hw_file_is_read(tmp_path: Path) -> None:
    toml = tmp_path / "hw.toml"
    toml.write_text("[hardware]\nlink_bw = 20e9\n")
    base = json.loads(_run(["run", *SMALL, "--json", "--schedule", "sequential"])[1])
    slow = json.loads(
        _run(["run", *SMALL, "--json", "--schedule", "sequential", "--hw-file", str(toml)])[1]
    )
    assert slow["makespan_ns"] > base["makespan_ns"]


def test_beyond_the_link_table_runs_with_a_stated_extrapolation(tmp_path: Path) -> None:
    """EP above the measured table: a run (exit 0) with one `note:` line per extrapolated field,
    and the trace meta names the fields, the method and the rates used."""
    from moetrace.trace.io import load

    out = tmp_path / "ep8.json"
    table = ["--hw", "dispatch_bw=2:100e9,4:50e9", "--hw", "combine_bw=2:100e9,4:80e9"]
    code, stdout, err = _run(
        ["run", "--ranks", "8", "--tokens", "128", *table, "-o", str(out), "--json"]
    )
    assert code == 0
    assert json.loads(stdout)["notes"] == [
        line.removeprefix("moetrace: note: ") for line in err.splitlines() if "note:" in line
    ]
    notes = [line for line in err.splitlines() if line.startswith("moetrace: note:")]
    assert len(notes) == 2 and "EP8 is beyond" in notes[0] and "dispatch_bw" in notes[0]
    ext = load(out).meta["executor"]["link_extrapolation"]
    assert set(ext["fields"]) == {"dispatch_bw", "combine_bw"}
    # one doubling past EP4 at the last doubling's ratio: 50 * (50/100), 80 * (80/100)
    assert ext["fields"]["dispatch_bw"]["bytes_per_s"] == pytest.approx(25e9)
    assert ext["fields"]["combine_bw"]["bytes_per_s"] == pytest.approx(64e9)
    assert "geometric" in ext["method"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--preset", "gpt5"], "unknown preset"),
        (["--hardware", "tpu9"], "unknown hardware"),
        (["--hw", "bogus=1"], "unknown hardware key"),
        (["--hw", "n_aic"], "expected key=value"),
        (["--tokens", "0"], "tokens must be >= 1"),
        (["--ranks", "3"], "must divide"),
        (["--ranks", "x"], "expected an integer"),
        (["--hw", "hbm_bytes=1e6"], "HBM"),
        (["--ranks", "128", "--tokens", "1000000"], "too large"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], needle: str, tmp_path: Path) -> None:
    out = tmp_path / "never.json"
    code, _, err = _run(["run", *SMALL, *args, "-o", str(out)])
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_sweep_writes_one_row_per_combination(tmp_path: Path) -> None:
    out = tmp_path / "grid.csv"
    code, _, _ = _run(
        [
            "sweep",
            "--ranks",
            "2,4",
            "--tokens",
            "64",
            "--schedule",
            "sequential,tile",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    table = pl.read_csv(out)
    assert table.height == 4
    assert sorted(zip(table["ranks"], table["schedule"], strict=True)) == [
        (2, "sequential"),
        (2, "tile"),
        (4, "sequential"),
        (4, "tile"),
    ]
    assert (table["makespan_ns"] > 0).all() and "util_aic" in table.columns


def test_sweep_checks_every_combination_before_running(tmp_path: Path) -> None:
    out = tmp_path / "grid.csv"
    code, _, err = _run(["sweep", "--ranks", "4,3", "--tokens", "64", "-o", str(out)])
    assert code == 2 and "must divide" in err and not out.exists()


def test_demo_writes_both_traces_and_protects_other_directories(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    args = ["demo", "--out", str(target), "--ranks", "4", "--tokens", "128", "--no-view"]
    code, out, _ = _run(args)
    assert code == 0
    for name in ("chunked", "sequential", "tile"):
        assert (target / f"{name}.pftrace").exists()
    # the reference row is the chunked baseline (2 micro-batches) at 1.00x; every speedup is
    # chunked's makespan over the row's, recomputed from the simulations themselves
    extras: dict[str, dict[str, Any]] = {"chunked": {"chunks": 2}, "sequential": {}, "tile": {}}
    spans = {
        name: simulate(ranks=4, tokens=128, schedule=name, **extra).meta["executor"]["makespan_ns"]
        for name, extra in extras.items()
    }
    rows = [line for line in out.splitlines() if " ms " in line]
    assert [r.split()[1] for r in rows] == ["chunked", "sequential", "tile"]
    assert "baseline" in rows[0] and "1.00x" in rows[0]
    for row, name in zip(rows, spans, strict=True):
        assert f"{spans[name] / 1e6:.2f} ms" in row
        assert f"{spans['chunked'] / spans[name]:.2f}x" in row
    assert "vs chunked" in out
    # the headline against the strongest of sequential and chunked x2/x4/x8 (x4 and x8 run
    # summary-only), and the paper-baseline ratio beside it
    for k in (4, 8):
        spans[f"x{k}"] = simulate(ranks=4, tokens=128, schedule="chunked", chunks=k).meta[
            "executor"
        ]["makespan_ns"]
    best = min(v for k, v in spans.items() if k != "tile")
    assert f"tile vs best rival: {best / spans['tile']:.2f}x" in out
    assert f"tile vs paper baseline (chunked x2): {spans['chunked'] / spans['tile']:.2f}x" in out
    assert sorted(p.name for p in target.iterdir() if p.suffix == ".pftrace") == [
        "chunked.pftrace",
        "sequential.pftrace",
        "tile.pftrace",
    ]  # the summary-only rivals write no trace
    first = (target / "tile.pftrace").read_bytes()
    code, out2, _ = _run([*args, "--jobs", "1"])  # rerunning replaces its own files, in-process
    assert code == 0
    assert out2 == out  # the parallel and the in-process demo print the same table
    assert len((target / "tile.pftrace").read_bytes()) == len(first)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    code, _, err = _run(
        ["demo", "--out", str(other), "--ranks", "4", "--tokens", "128", "--no-view"]
    )
    assert code == 2 and "not a moetrace demo directory" in err
    assert (other / "notes.txt").read_text() == "keep me"


def test_sweep_writes_parquet(tmp_path: Path) -> None:
    out = tmp_path / "grid.parquet"
    code, _, _ = _run(
        [
            "sweep",
            "--ranks",
            "2",
            "--tokens",
            "64",
            "--routing",
            "balanced,zipf:1.0",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    table = pl.read_parquet(out)
    assert table["routing"].to_list() == ["balanced", "zipf:1.0"]
