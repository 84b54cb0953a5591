"""METRICS.md invariants (hypothesis) and vectorised == slow reference on random traces."""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moetrace.analysis import analyze
from moetrace.testing.builders import asap_trace, random_trace
from moetrace.testing.reference import reference

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**32 - 1)


def _key(rank: int | None, step: int | None) -> tuple[int, int | None]:
    return (-1 if rank is None else rank, step)


@SETTINGS
@given(seed=seeds, steps=st.booleans(), backward=st.booleans())
def test_invariants(seed: int, steps: bool, backward: bool) -> None:
    r = analyze(random_trace(seed, steps=steps, backward=backward))
    for row in r.ranks.iter_rows(named=True):
        assert 0 <= row["overlapped_ns"] <= row["comm_ns"]
        assert row["exposed_comm_ns"] + row["overlapped_ns"] == row["comm_ns"]
        assert row["compute_ns"] + row["exposed_comm_ns"] + row["free_ns"] == row["window_ns"]
        assert row["window_ns"] == row["window_end_ns"] - row["window_start_ns"] > 0
        assert 0 <= row["cp_span_ns"] <= row["window_ns"]
        assert 0 <= row["a2a_exposed_ns"] <= row["a2a_comm_ns"] <= row["comm_ns"]
        assert row["a2a_exposed_ns"] <= row["exposed_comm_ns"]
        if row["comm_ns"]:
            assert row["overlap_ratio"] == pytest.approx(row["overlapped_ns"] / row["comm_ns"])
    assert r.tracks["util"].is_between(0, 1).all()
    assert r.units["util"].is_between(0, 1).all()
    # critical-path segments are contiguous and sum to the span
    for (rank, step), seg in r.critical_path.group_by("rank", "step"):
        seg = seg.sort("seq")
        row = r.ranks.filter((pl.col("rank") == rank) & (pl.col("step").eq_missing(step))).row(
            0, named=True
        )
        assert seg["dur_ns"].sum() == row["cp_span_ns"]
        assert (seg["start_ns"].shift(-1).drop_nulls() == seg["end_ns"].head(-1)).all()
        assert (seg["dur_ns"] > 0).all()
    # idle attribution: per (rank, step, unit) the gap causes sum to the idle time
    idle_by_unit = r.tracks.group_by("rank", "step", "unit").agg(pl.col("idle_ns").sum())
    gaps = r.gaps.join(
        r.tracks.select("rank", "step", "track", "unit"),
        on=["rank", "step", "track"],
        nulls_equal=True,
    )
    gap_sum = gaps.group_by("rank", "step", "unit").agg(pl.col("dur_ns").sum())
    both = idle_by_unit.join(gap_sum, on=["rank", "step", "unit"], how="left", nulls_equal=True)
    assert (both["idle_ns"] == both["dur_ns"].fill_null(0)).all()


def _check_against_reference(trace, time_range=None) -> None:  # type: ignore[no-untyped-def]
    r = analyze(trace, time_range=time_range)
    ref = reference(trace, time_range=time_range)
    got = {_key(row["rank"], row["step"]): row for row in r.ranks.iter_rows(named=True)}
    assert set(got) == set(ref.windows)
    for k, m in ref.metrics.items():
        assert (got[k]["window_start_ns"], got[k]["window_end_ns"]) == ref.windows[k]
        for col, val in m.items():
            if val is None:
                assert got[k][col] is None
            else:
                assert got[k][col] == pytest.approx(val), (k, col)
    busy = {
        (*_key(x["rank"], x["step"]), x["track"]): x["busy_ns"]
        for x in r.tracks.iter_rows(named=True)
    }
    assert busy == ref.busy
    gaps: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {k: [] for k in ref.gaps}
    for x in r.gaps.sort("start_ns").iter_rows(named=True):
        gaps[(*_key(x["rank"], x["step"]), x["track"])].append(
            (x["start_ns"], x["end_ns"], x["before_id"], x["after_id"], x["cause"])
        )
    assert gaps == ref.gaps
    for k, segs in ref.path.items():
        rows = r.critical_path.filter(
            (pl.col("rank").fill_null(-1) == k[0]) & pl.col("step").eq_missing(k[1])
        ).sort("seq")
        assert list(zip(rows["event_id"], rows["start_ns"], rows["end_ns"], strict=True)) == segs


@SETTINGS
@given(seed=seeds, steps=st.booleans(), backward=st.booleans())
def test_equals_reference(seed: int, steps: bool, backward: bool) -> None:
    _check_against_reference(random_trace(seed, steps=steps, backward=backward))


@SETTINGS
@given(seed=seeds, steps=st.booleans())
def test_cpu_only_equals_reference(seed: int, steps: bool) -> None:
    """No device tracks: host threads are the units, c10d::/gloo: calls are the comm."""
    trace = random_trace(seed, steps=steps, cpu_only=True)
    r = analyze(trace)
    assert any("CPU-only" in w for w in r.warnings)
    _check_against_reference(trace)


@SETTINGS
@given(seed=seeds, steps=st.booleans(), a=st.integers(0, 600), width=st.integers(1, 600))
def test_time_range_equals_reference(seed: int, steps: bool, a: int, width: int) -> None:
    """An area selection: every window clipped to [a, a + width), same metrics as clipping
    by hand; the invariants still hold."""
    trace = random_trace(seed, steps=steps)
    _check_against_reference(trace, time_range=(a, a + width))
    for row in analyze(trace, time_range=(a, a + width)).ranks.iter_rows(named=True):
        assert a <= row["window_start_ns"] < row["window_end_ns"] <= a + width
        assert row["compute_ns"] + row["exposed_comm_ns"] + row["free_ns"] == row["window_ns"]
        assert 0 <= row["cp_span_ns"] <= row["window_ns"]


@SETTINGS
@given(seed=seeds, n_tasks=st.integers(1, 60), n_ranks=st.integers(1, 3))
def test_critical_path_is_longest_path_on_asap_schedules(
    seed: int, n_tasks: int, n_ranks: int
) -> None:
    """On an as-soon-as-possible schedule (the executor's), span = makespan = networkx's
    longest path over deps + track order with node weights = durations."""
    trace = asap_trace(seed, n_tasks=n_tasks, n_ranks=n_ranks)
    r = analyze(trace)
    ev = trace.events
    g = nx.DiGraph()
    g.add_node("S")
    for i, d in zip(ev["id"], ev["dur"], strict=True):
        g.add_edge("S", i, w=d)
    for s, d in zip(trace.deps["src"], trace.deps["dst"], strict=True):
        g.add_edge(s, d, w=int(ev["dur"][d]))
    lanes = ev.sort("track", "ts", "id").group_by("track", maintain_order=True).agg("id")
    for ids in lanes["id"]:
        for a, b in itertools.pairwise(ids):
            g.add_edge(a, b, w=int(ev["dur"][b]))
    longest = nx.dag_longest_path_length(g, weight="w")
    makespan = int(ev.select((pl.col("ts") + pl.col("dur")).max() - pl.col("ts").min()).item())
    assert longest == makespan
    spans = r.ranks.sort("window_end_ns")
    last = spans.row(-1, named=True)
    # the rank that ends last: its path explains its window; the window starts at 0 when
    # the path reaches back to a task without predecessors
    assert last["cp_span_ns"] == last["window_ns"]
    path = r.critical_path.filter(pl.col("rank") == last["rank"])
    assert (path.filter(pl.col("segment") == "wait")["dur_ns"].sum()) == 0
    if last["window_start_ns"] == 0:
        assert last["cp_span_ns"] == makespan


@SETTINGS
@given(seed=seeds)
def test_cycle_reported_iff_networkx_finds_one(seed: int) -> None:
    """A cycle in deps + track order is reported exactly when networkx finds one, and the
    named events form a real cycle; the metrics that need no acyclicity are still there."""
    trace = random_trace(seed, backward=True, deps=30)
    r = analyze(trace)
    ev = trace.events.with_row_index("idx")
    g = nx.DiGraph()
    work = ev.filter(pl.col("kind") != "marker")
    g.add_nodes_from(work["id"].to_list())
    ts = dict(zip(ev["id"], ev["ts"], strict=True))
    for s, d, k in zip(trace.deps["src"], trace.deps["dst"], trace.deps["kind"], strict=True):
        late = k == "launch" and ts[s] > ts[d] + 1_000  # ignored: launched after it started
        if s != d and s in g and d in g and not late:
            g.add_edge(s, d)
    # track order: each slice's predecessor is the slice of its track with the latest end
    # not after its start (lowest row on ties), at any depth; instants take no part
    rows = work.filter(pl.col("dur") > 0).to_dicts()
    for b in rows:
        before = [
            (a["ts"] + a["dur"], -a["idx"], a["id"])
            for a in rows
            if a["track"] == b["track"] and a["ts"] + a["dur"] <= b["ts"]
        ]
        if before:
            g.add_edge(max(before)[2], b["id"])
    named = [w for w in r.warnings if w.startswith("dependency cycle: ")]
    assert bool(named) == (not nx.is_directed_acyclic_graph(g))
    if named:
        parts = named[0].split(": ", 1)[1].split(" -> ")
        ids = [int(x.rsplit("#", 1)[1]) if "#" in x else None for x in parts]
        assert ids[0] == ids[-1]
        shown = ids[: ids.index(None)] if None in ids else ids  # long cycles are elided
        assert all(g.has_edge(a, b) for a, b in itertools.pairwise(shown))
        assert r.ranks.height > 0 or trace.events.filter(pl.col("kind") == "compute").height == 0


RATIOS = ("overlap_ratio", "exposed_ratio", "cp_coverage", "cp_comm_ratio")


@SETTINGS
@given(seed=seeds, steps=st.booleans(), cpu_only=st.booleans())
def test_issue8_invariants_with_annotations(seed: int, steps: bool, cpu_only: bool) -> None:
    """Random traces with annotations over the work and overflow lanes: 0 <= busy <= window,
    idle = window - busy, busy covers compute and comm, util <= 1, compute + exposed + free =
    window, a rank's windows are disjoint and sum to at most its whole-trace window, every
    ratio (and every pooled aggregate) in [0, 1], no track is invented (only queues are
    reported) -- and the vectorised figures equal the slow reference."""
    trace = random_trace(seed, steps=steps, cpu_only=cpu_only, annotations=True)
    r = analyze(trace)
    whole = {row["rank"]: row for row in analyze(trace, window="trace").ranks.iter_rows(named=True)}
    for row in r.ranks.iter_rows(named=True):
        assert 0 <= row["busy_ns"] <= row["window_ns"]
        assert row["idle_ns"] == row["window_ns"] - row["busy_ns"]
        assert row["busy_ns"] >= row["compute_ns"] + row["exposed_comm_ns"]
        assert row["compute_ns"] + row["exposed_comm_ns"] + row["free_ns"] == row["window_ns"]
        assert 0 <= row["cp_comm_ns"] <= row["job_comm_ns"]
        for ratio in RATIOS:
            assert row[ratio] is None or 0 <= row[ratio] <= 1, (ratio, row)
    for rank, rows in r.ranks.sort("window_start_ns").group_by("rank"):
        starts, ends = rows["window_start_ns"].to_list(), rows["window_end_ns"].to_list()
        assert all(end <= start for end, start in zip(ends[:-1], starts[1:], strict=True))
        assert rows["window_ns"].sum() <= whole[rank[0]]["window_ns"]
    assert r.tracks["util"].is_between(0, 1).all() and r.units["util"].is_between(0, 1).all()
    lanes = trace.tracks.filter(pl.col("tid").is_duplicated())["track"].to_list()
    queues = trace.tracks.group_by("rank", "pid", "tid").agg(pl.col("track").min())["track"]
    assert set(r.tracks["track"].to_list()) <= set(queues.to_list())
    assert not set(r.tracks["track"].to_list()) & (set(lanes) - set(queues.to_list()))
    for agg in r.aggregate_dicts():
        for ratio in RATIOS:
            value = agg["pooled"][ratio]
            assert value is None or 0 <= value <= 1
    _check_against_reference(trace)
