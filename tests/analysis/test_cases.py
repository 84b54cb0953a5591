"""Hand-made traces with known answers: edge cases, step rules, options, JSON shape."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
import pytest

from moetrace.analysis import analyze, compare
from moetrace.trace.model import Trace


def make(
    events: list[tuple[Any, ...]],
    units: list[str],
    deps: Sequence[tuple[int, int, str]] = (),
    ranks: list[int | None] | None = None,
    meta: dict[str, Any] | None = None,
) -> Trace:
    """events: (track, name, kind, ts, dur[, flops]); ids are positions."""
    ev = {
        "id": list(range(len(events))),
        "track": [e[0] for e in events],
        "name": [e[1] for e in events],
        "kind": [e[2] for e in events],
        "ts": [e[3] for e in events],
        "dur": [e[4] for e in events],
        "flops": [e[5] if len(e) > 5 else None for e in events],
    }
    tracks = {
        "track": list(range(len(units))),
        "unit": units,
        "rank": ranks if ranks is not None else [0] * len(units),
    }
    dp = {"src": [d[0] for d in deps], "dst": [d[1] for d in deps], "kind": [d[2] for d in deps]}
    return Trace.from_frames(
        pl.DataFrame(ev, schema_overrides={"flops": pl.Float64}),
        tracks,
        dp,
        meta=meta,
        compute_depth=True,
    )


def row(report, **where: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    frame = report.ranks
    for k, v in where.items():
        frame = frame.filter(pl.col(k).eq_missing(v))
    assert frame.height == 1
    return dict(frame.row(0, named=True))


def test_one_event() -> None:
    r = analyze(make([(0, "k", "compute", 100, 50)], ["aic"]))
    got = row(r)
    assert (got["window_ns"], got["compute_ns"], got["comm_ns"], got["free_ns"]) == (50, 50, 0, 0)
    assert got["overlap_ratio"] is None and got["exposed_ratio"] is None
    assert got["cp_span_ns"] == 50 and got["cp_coverage"] == 1.0
    assert any("no communication" in w for w in r.warnings)
    assert any("no cross-track dependencies" in w for w in r.warnings)


def test_nothing_to_analyze() -> None:
    r = analyze(make([(0, "x", "marker", 0, 10)], ["cpu"]))
    assert r.ranks.height == 0
    assert any("no device tracks" in w for w in r.warnings)
    assert r.to_dict()["ranks"] == []


def test_exposed_and_overlap_known_answer() -> None:
    # compute [0,100) on aic, comm [50,150) on link, compute [120,130) on aiv
    t = make(
        [(0, "mm", "compute", 0, 100), (1, "a2a", "comm", 50, 100), (2, "v", "compute", 120, 10)],
        ["aic", "link", "aiv"],
    )
    got = row(analyze(t))
    assert got["window_ns"] == 150
    assert got["compute_ns"] == 110
    assert got["comm_ns"] == 100
    assert got["overlapped_ns"] == 60
    assert got["exposed_comm_ns"] == 40
    assert got["free_ns"] == 0
    assert got["overlap_ratio"] == pytest.approx(0.6)


def test_gap_waiting_for_comm_and_critical_path_through_it() -> None:
    # aic: g1 [0,40), g2 [110,150) which needs the a2a [40,100) on the link, which needs g1
    t = make(
        [(0, "g1", "compute", 0, 40), (1, "a2a", "comm", 40, 60), (0, "g2", "compute", 110, 40)],
        ["aic", "link"],
        deps=[(0, 1, "data"), (1, 2, "data")],
    )
    r = analyze(t)
    gaps = r.gaps.filter(pl.col("track") == 0)
    assert gaps.select("start_ns", "end_ns", "before_id", "after_id", "cause").rows() == [
        (40, 110, 0, 2, "wait:comm")
    ]
    cp = r.critical_path.sort("seq")
    assert cp.select("segment", "event_id", "start_ns", "end_ns", "category").rows() == [
        ("event", 0, 0, 40, "compute-aic"),
        ("event", 1, 40, 100, "comm"),
        ("wait", None, 100, 110, "wait"),
        ("event", 2, 110, 150, "compute-aic"),
    ]
    got = row(r)
    assert got["cp_span_ns"] == 150 and got["cp_comm_ns"] == 60
    assert got["cp_comm_ratio"] == pytest.approx(1.0)
    assert got["exposed_comm_ns"] == 60


def test_cycle_is_named_and_metrics_still_computed() -> None:
    t = make(
        [(0, "alpha", "compute", 0, 10), (1, "beta", "comm", 5, 10)],
        ["aic", "link"],
        deps=[(0, 1, "data"), (1, 0, "data")],
    )
    r = analyze(t)
    msg = [w for w in r.warnings if w.startswith("dependency cycle")]
    assert msg and "alpha#0" in msg[0] and "beta#1" in msg[0]
    assert row(r)["comm_ns"] == 10


def test_device_work_takes_the_step_of_its_launch() -> None:
    # host: ProfilerStep#0 [0,100), #1 [100,200); launch call at 90 in step 0; kernel at 150
    t = make(
        [
            (0, "ProfilerStep#0", "marker", 0, 100),
            (0, "ProfilerStep#1", "marker", 100, 100),
            (1, "cudaLaunchKernel", "host", 90, 5),
            (2, "late", "compute", 150, 20),
            (2, "own", "compute", 180, 10),
        ],
        ["cpu", "cpu", "stream"],
        deps=[(2, 3, "launch")],
    )
    r = analyze(t)
    assert row(r, step=0)["window_ns"] == 20  # 'late' belongs to step 0 ...
    assert row(r, step=1)["window_ns"] == 10  # ... 'own' (no launch) to step 1 by time
    assert r.gaps.filter(pl.col("step") == 0).height == 0


def test_time_range_clips_windows() -> None:
    t = make([(0, "mm", "compute", 0, 100), (1, "a2a", "comm", 50, 100)], ["aic", "link"])
    got = row(analyze(t, time_range=(60, 120)))
    assert (got["window_start_ns"], got["window_end_ns"]) == (60, 120)
    assert got["compute_ns"] == 40 and got["comm_ns"] == 60 and got["exposed_comm_ns"] == 20


def test_ranks_option_and_null_rank() -> None:
    t = make([(0, "a", "compute", 0, 10), (1, "b", "compute", 0, 30)], ["aic", "aic"], ranks=[0, 1])
    r = analyze(t, ranks=[1])
    assert r.ranks["rank"].to_list() == [1] and row(r)["window_ns"] == 30
    u = analyze(make([(0, "a", "compute", 0, 10)], ["aic"], ranks=[None]))
    assert u.ranks["rank"].to_list() == [None]


def test_comm_patterns_and_collectives() -> None:
    t = make(
        [
            (0, "my_dispatch_tokens", "compute", 0, 10),
            (0, "gemm", "compute", 10, 10),
            (1, "ncclDevKernel_AllReduce_Sum", "comm", 0, 5),
            (1, "custom_x", "compute", 5, 5),
        ],
        ["stream", "stream"],
    )
    r = analyze(t, comm_patterns=["^custom_"])
    assert dict(zip(r.comm["event_id"], r.comm["collective"], strict=True)) == {
        0: "all_to_all",
        2: "all_reduce",
        3: "other",
    }
    # dispatch [0,10) beside the all-reduce [0,5) and custom_x [5,10); gemm [10,20) after them
    got = row(r)
    assert (got["a2a_comm_ns"], got["a2a_exposed_ns"]) == (10, 10)
    assert (got["comm_ns"], got["compute_ns"], got["exposed_comm_ns"]) == (10, 10, 10)
    with pytest.raises(ValueError):
        from moetrace.analysis.classify import check_patterns

        check_patterns(["("])


def test_mfu_from_flops_and_peak() -> None:
    t = make([(0, "mm", "compute", 0, 1000, 4.0e6)], ["aic"], meta={"peak_flops": 8.0e15})
    assert row(analyze(t))["mfu"] == pytest.approx(4.0e6 / (1000e-9 * 8.0e15))
    assert row(analyze(t, peak_tflops=4000))["mfu"] == pytest.approx(4.0e6 / (1000e-9 * 4e15))
    assert row(analyze(make([(0, "mm", "compute", 0, 1000)], ["aic"])))["mfu"] is None


def test_sync_edge_gates_the_end_of_a_blocking_call() -> None:
    # host: sync call [10,100) returns when kernel k [20,90) ends; "after" [100,110) launches
    # k2 [120,130): the path runs k -> end of the sync call -> after -> launch wait -> k2
    t = make(
        [
            (0, "cudaDeviceSynchronize", "host", 10, 90),
            (1, "k", "compute", 20, 70),
            (0, "after", "host", 100, 10),
            (1, "k2", "compute", 120, 10),
        ],
        ["cpu", "stream"],
        deps=[(1, 0, "sync"), (2, 3, "launch")],
    )
    r = analyze(t)
    cp = r.critical_path.sort("seq")
    assert cp.select("event_id", "start_ns", "end_ns", "category").rows() == [
        (1, 20, 90, "compute-stream"),
        (0, 90, 100, "host"),
        (2, 100, 110, "host"),
        (None, 110, 120, "wait"),
        (3, 120, 130, "compute-stream"),
    ]
    assert row(r)["cp_coverage"] == 1.0


def test_to_dict_keys_are_exactly_the_issue() -> None:
    t = make([(0, "mm", "compute", 0, 100), (1, "a2a", "comm", 50, 100)], ["aic", "link"])
    d = analyze(t, peak_tflops=1.0).to_dict()
    item = d["ranks"][0]
    assert set(item) == {
        "rank",
        "step",
        "window_ns",
        "compute_ns",
        "comm_ns",
        "overlapped_ns",
        "exposed_comm_ns",
        "free_ns",
        "busy_ns",
        "idle_ns",
        "overlap_ratio",
        "exposed_ratio",
        "util",
        "critical_path",
    }  # no mfu: flops unknown; busy/idle: device busy per rank (issue 8)
    assert set(item["critical_path"]) == {
        "span_ns",
        "coverage",
        "cp_comm_ns",
        "cp_comm_ratio",
        "breakdown_ns",
    }
    assert set(item["util"]) == {"aic", "link"}
    agg = d["aggregate"][0]
    assert {"sum", "pooled", "min", "mean", "max", "step", "ranks"} <= set(agg)
    assert "overlap_ratio" not in agg["sum"] and agg["pooled"]["overlap_ratio"] == 0.5
    assert agg["mean"]["mfu"] is None  # unknown stays null, never 0


def test_compare_ratios() -> None:
    a = analyze(make([(0, "mm", "compute", 0, 100), (1, "a2a", "comm", 100, 100)], ["aic", "link"]))
    b = analyze(make([(0, "mm", "compute", 0, 100), (1, "a2a", "comm", 50, 100)], ["aic", "link"]))
    c = {m: (x, y, z) for m, x, y, z in compare(a, b).iter_rows()}
    assert c["exposed_comm_ns"] == (100.0, 50.0, 0.5)
    assert c["window_ns"][2] == pytest.approx(150 / 200)
    assert c["util:aic"][0] == pytest.approx(0.5) and c["util:aic"][1] == pytest.approx(100 / 150)


def test_mfu_in_a_time_range_counts_the_flops_inside_it() -> None:
    t = make([(0, "mm", "compute", 0, 1000, 4.0e6)], ["aic"], meta={"peak_flops": 8.0e15})
    half = row(analyze(t, time_range=(0, 500)))
    assert half["window_ns"] == 500
    assert half["mfu"] == pytest.approx(2.0e6 / (500e-9 * 8.0e15))


def test_exposed_all_to_all_is_the_part_not_under_compute() -> None:
    """An all-to-all half hidden under a GEMM: exposed is only the uncovered part, so a bug
    that makes exposed all-to-all equal all of it (the review's planted bug) fails here.
    By hand: gemm [0, 100) on one stream, a dispatch all-to-all [60, 140) on another ->
    a2a 80 ns, of which [100, 140) = 40 ns exposed and [60, 100) = 40 ns overlapped."""
    t = make(
        [
            (0, "gemm", "compute", 0, 100),
            (1, "my_dispatch_tokens", "comm", 60, 80),
        ],
        ["stream", "stream"],
    )
    got = row(analyze(t))
    assert (got["a2a_comm_ns"], got["a2a_exposed_ns"]) == (80, 40)
    assert (got["comm_ns"], got["exposed_comm_ns"], got["overlapped_ns"]) == (80, 40, 40)


def test_critical_path_tie_prefers_the_dependency_over_track_order() -> None:
    """Two predecessors of c end at the same time: a on c's own stream (track order) and b on
    another stream with a dependency b -> c. The dependency explains the wait, so the path
    runs b -> c, not a -> c; swapping the tie-break (the review's planted bug) fails here.
    By hand: a [0, 50) and c [50, 60) on stream 0, b [0, 50) on stream 1, dep b -> c."""
    t = make(
        [
            (0, "a", "compute", 0, 50),
            (1, "b", "compute", 0, 50),
            (0, "c", "compute", 50, 10),
        ],
        ["stream", "stream"],
        deps=[(1, 2, "data")],
    )
    cp = analyze(t).critical_path.sort("seq")
    assert cp.select("event_id", "start_ns", "end_ns").rows() == [(1, 0, 50), (2, 50, 60)]


def test_summary_pools_exposed_and_overlap_ratios_from_their_own_numerators() -> None:
    """Two ranks, comm partly under compute. By hand: rank 0 gemm [0, 100), all-to-all
    [70, 140) -> comm 70, overlapped 30, exposed 40; rank 1 all-to-all [0, 30) alone -> comm 30,
    exposed 30. Pooled: exposed (40 + 30) / 100, overlap 30 / 100 (not a mean of per-rank
    ratios, and not one numerator for the other)."""
    t = make(
        [
            (0, "gemm", "compute", 0, 100),
            (1, "my_dispatch_tokens", "comm", 70, 70),
            (2, "my_dispatch_tokens", "comm", 0, 30),
        ],
        ["stream", "stream", "stream"],
        ranks=[0, 0, 1],
    )
    s = analyze(t).summary()
    assert (s["comm_ns"], s["exposed_comm_ns"], s["overlapped_ns"]) == (100, 70, 30)
    assert s["exposed_ratio"] == pytest.approx(0.7)
    assert s["overlap_ratio"] == pytest.approx(0.3)
