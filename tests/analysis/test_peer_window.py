"""Peer windows (issue 21 item 7): `metrics` states, on every run, the per-rank window HTA's
temporal breakdown and TraceLens's gpu_timeline measure (first to last device activity, copies
included) beside moetrace's own; expected numbers by hand and from TraceLens's CSVs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.analysis import analyze
from moetrace.analysis.peer_window import peer_note
from moetrace.cli import main
from moetrace.trace.model import Trace

from .test_issue8 import _lagging, build

io = pytest.importorskip("moetrace.trace.io")


def _lagging_then_a_copy() -> Trace:
    """test_issue8's lagging GPU (kernels A [30, 60), B [60, 170), C [120, 140), D [170, 230)
    in steps 1-2, E [300, 320) in step 3, after a stall) and a device-to-host copy [330, 350)
    on the first stream after the last step, launched by nothing."""
    t = _lagging()
    copy = t.events.tail(1).with_columns(
        pl.col("id") + 1,
        pl.lit("Memcpy DtoH").alias("name"),
        pl.lit("gpu_memcpy").alias("cat"),
        pl.lit("memory").cast(t.events["kind"].dtype).alias("kind"),
        pl.lit(330, pl.Int64).alias("ts"),
        pl.lit(20, pl.Int64).alias("dur"),
    )
    return Trace(pl.concat([t.events, copy]), t.tracks, t.deps, t.counters, t.meta)


def test_peer_window_by_hand() -> None:
    """By hand: peer window [30, 350) = 320 ns, busy [30, 230) ∪ [300, 320) ∪ [330, 350) = 240,
    idle 80. moetrace's step windows (compute and comm span them): [30, 120) 90, [120, 230)
    110, [300, 320) 20: Σ 220, idle 0; the difference 220 - 320 = -100 ns = -31.25 %."""
    r = analyze(_lagging_then_a_copy())
    assert r.peer_window.height == 1
    got = r.peer_window.row(0, named=True)
    assert (got["rank"], got["start_ns"], got["end_ns"], got["total_ns"]) == (0, 30, 350, 320)
    assert (got["busy_ns"], got["idle_ns"]) == (240, 80)
    assert (got["moetrace_window_ns"], got["moetrace_idle_ns"]) == (220, 0)
    assert got["diff_ns"] == -100 and got["diff_pct"] == pytest.approx(-31.25)
    note = r.meta["peer_note"]
    assert note.startswith("note: peer window") and "-100 ns (-31.25%)" in note
    # the peers' window itself: no difference left
    same = analyze(_lagging_then_a_copy(), window="trace", window_span="work")
    row = same.peer_window.row(0, named=True)
    assert (row["moetrace_window_ns"], row["moetrace_idle_ns"], row["diff_ns"]) == (320, 80, 0)
    assert "equal to it" in str(same.meta["peer_note"])
    assert same.to_dict()["peer_window"]["ranks"][0]["total_ns"] == 320


def test_no_peer_window_on_cpu_only_traces() -> None:
    steps = (0, "ProfilerStep#1", "user_annotation", "host", 0, 100)
    t = build([steps, (0, "aten::mm", "cpu_op", "host", 10, 50)], [(0, "cpu", "1", "1")])
    r = analyze(t)
    assert r.peer_window.height == 0 and r.meta["peer_note"] is None
    assert r.to_dict()["peer_window"] is None
    assert peer_note(r.peer_window) is None


def _tracelens(path: Path) -> dict[str, float]:
    with open(path) as f:
        return {row["type"]: float(row["time ms"]) * 1e6 for row in csv.DictReader(f)}


@pytest.mark.parametrize(
    ("folder", "trace_name", "csv_name"),
    [
        ("mi300x_resnet_rccl", "resnet_act_checkpoint.json.gz", "tracelens_gpu_timeline_include_unlinked.csv"),  # noqa: E501
        ("mi300x_gptoss20b_decode", "graph_execution.json.gz", "tracelens_gpu_timeline.csv"),
    ],
)  # fmt: skip
def test_peer_window_is_tracelens_gpu_timeline(
    real_traces: Path, folder: str, trace_name: str, csv_name: str
) -> None:
    """With the default windows, the peer window's total / busy / idle are TraceLens's
    gpu_timeline (1e-4), and the difference is moetrace's Σ windows minus that total."""
    trace = io.load(real_traces / "kineto_moe" / folder / trace_name)
    want = _tracelens(real_traces / "kineto_moe" / folder / csv_name)
    r = analyze(trace)
    got = r.peer_window.row(0, named=True)
    assert got["total_ns"] == pytest.approx(want["total_time"], rel=1e-4)
    assert got["busy_ns"] == pytest.approx(want["busy_time"], rel=1e-4)
    assert got["idle_ns"] == pytest.approx(want["idle_time"], rel=2e-3)
    assert got["moetrace_window_ns"] == int(r.ranks["window_ns"].sum())
    assert got["diff_ns"] == got["moetrace_window_ns"] - got["total_ns"]


def test_metrics_prints_the_note_and_json_object(real_traces: Path) -> None:
    """gpt-oss decode on MI300X: the default windows leave out the copies at the ends, so the
    note says moetrace's windows are 0.40 % shorter than the peers' (10.700 vs 10.743 ms)."""
    path = real_traces / "kineto_moe" / "mi300x_gptoss20b_decode" / "graph_execution.json.gz"
    res = CliRunner().invoke(main, ["metrics", "--json", str(path)])
    assert res.exit_code == 0, res.output
    notes = [line for line in res.stderr.splitlines() if "peer window" in line]
    assert len(notes) == 1 and "(-0.40%)" in notes[0]
    assert notes[0].startswith("moetrace: note: ")  # a stated difference, not a warning
    doc = json.loads(res.stdout)
    peer = doc["traces"][0]["peer_window"]
    assert "TraceLens gpu_timeline" in peer["definition"]
    assert peer["ranks"][0]["diff_pct"] == pytest.approx(-0.402, abs=0.001)
