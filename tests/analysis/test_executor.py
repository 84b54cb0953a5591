"""The analyzer on the executor's own traces: span = makespan, reference agreement, and the
schedule comparison the executor predicts (tile raises AIC utilisation, hides comm)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.analysis import analyze, compare
from moetrace.testing.reference import reference

run = pytest.importorskip("moetrace.executor.run")


@pytest.mark.parametrize("schedule", ["sequential", "tile"])
def test_critical_path_span_is_the_makespan(schedule: str) -> None:
    trace = run.simulate(ranks=4, tokens=256, schedule=schedule)
    report = analyze(trace)
    makespan = trace.meta["executor"]["makespan_ns"]
    ranks = report.ranks
    assert ranks.height == 4 and set(ranks["step"]) == {0}
    # every rank's path explains its whole window ...
    assert (ranks["cp_span_ns"] == ranks["window_ns"]).all()
    # ... and, unclipped, the last rank's path runs from the first launch to the end
    last = ranks.sort("window_end_ns").row(-1, named=True)
    assert last["window_end_ns"] - last["cp_start_ns"] == makespan
    assert (ranks["cp_start_ns"] == 0).all()
    for (_, _), seg in report.critical_path.group_by("rank", "step"):
        assert (
            seg["dur_ns"].sum()
            == ranks.filter(pl.col("rank") == seg["rank"][0])["cp_span_ns"].item()
        )
    assert not [w for w in report.warnings if "cycle" in w or "cross-track" in w]


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(
    schedule=st.sampled_from(["sequential", "chunked", "tile"]),
    routing=st.sampled_from(["balanced", "zipf:1.2"]),
    seed=st.integers(0, 1000),
    ranks=st.sampled_from([2, 4]),
)
def test_executor_trace_equals_reference(
    schedule: str, routing: str, seed: int, ranks: int
) -> None:
    # 32 tokens (~6k events): the slow reference is superlinear in events (64 tokens took ~7 s
    # an example, 40 s of CI for six)
    trace = run.simulate(ranks=ranks, tokens=32, schedule=schedule, routing=routing, seed=seed)
    report = analyze(trace)
    ref = reference(trace)
    got = {(r["rank"], r["step"]): r for r in report.ranks.iter_rows(named=True)}
    assert set(got) == set(ref.windows)
    for k, m in ref.metrics.items():
        for col, val in m.items():
            assert got[k][col] == pytest.approx(val), (k, col)
        segs = report.critical_path.filter(pl.col("rank") == k[0]).sort("seq")
        assert (
            list(zip(segs["event_id"], segs["start_ns"], segs["end_ns"], strict=True))
            == (ref.path[k])
        )
    busy = {(x["rank"], x["step"], x["track"]): x["busy_ns"] for x in report.tracks.to_dicts()}
    assert busy == ref.busy


def test_tile_schedule_raises_aic_util_and_hides_comm() -> None:
    """16 EP ranks, 1024 tokens each: the executor's tile schedule overlaps dispatch/combine
    with the expert GEMMs, so AIC utilisation rises and exposed communication falls."""
    seq = analyze(run.simulate(ranks=16, tokens=1024, schedule="sequential"))
    tile = analyze(run.simulate(ranks=16, tokens=1024, schedule="tile"))
    rows = {m: (a, b) for m, a, b, _ in compare(seq, tile).iter_rows()}
    aic_seq, aic_tile = rows["util:aic"]
    exposed_seq, exposed_tile = rows["exposed_comm_ns"]
    assert aic_tile > aic_seq + 0.1
    assert exposed_tile < 0.5 * exposed_seq
    assert rows["overlap_ratio"][1] > rows["overlap_ratio"][0]


def test_same_metrics_after_a_chrome_json_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What users analyze is the written file: every frame must come out the same."""
    io = pytest.importorskip("moetrace.trace.io")
    trace = run.simulate(ranks=4, tokens=128, schedule="tile")
    path = tmp_path / "tile.json"
    trace.write(path)
    direct, loaded = analyze(trace), analyze(io.load(path))
    for name in ("ranks", "units", "tracks", "gaps", "critical_path", "comm", "exposed"):
        assert getattr(direct, name).equals(getattr(loaded, name)), name
