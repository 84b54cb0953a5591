"""Folded simulation of rotation-symmetric tile runs (executor/fold.py: one block of `period`
ranks simulated, the result expanded) against the full simulation of every rank: the same
start, end and lane of every task on every rank, the same trace frames (deps as a set) and the
same meta. Period 1 (every source's rows fill whole row tiles: rank 0 alone) and period > 1 (a
row tile mixes the rows of several sources: a block of 2, 4 or 8 ranks)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest

from moetrace.executor.config import SimulationConfig
from moetrace.executor.run import Run, execute, prepare, simulate, to_trace
from moetrace.executor.symmetry import Symmetry, symmetry
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import make_workload, place, route

SYMMETRIC = [
    dict(ranks=8, tokens=512),  # 16 rows per (source, expert): one row tile per expert
    dict(ranks=4, tokens=256, shared_expert=True),
    dict(ranks=8, tokens=512, one_sided=False),
    dict(ranks=8, tokens=64),
    dict(ranks=8, tokens=512, dynamic=True),
    dict(ranks=8, tokens=512, l2=False),
    dict(ranks=8, tokens=4096),  # 128 rows per (source, expert): a row tile per source
    dict(ranks=8, tokens=4096, hardware="ascend-950", n_tile=1024),
    dict(ranks=16, tokens=4096, hw_overrides={"link_bw": 40e9}),
    dict(ranks=8, tokens=2048, tile_rows=64),  # 64 rows per (source, expert): a tile per source
]

# rotation symmetric with a period above 1 (DeepSeek-V3, top-8 of 256 experts: tokens / 32 rows
# per (source, expert); Qwen3-235B top-8 of 128: tokens / 16; Pangu Ultra MoE top-8 of 256):
# a 128-row tile holds the rows of 128 / rows sources, so only a rotation by that many ranks
# maps row tiles onto row tiles. (params, period by hand); each one the planner keeps a tile
# plan for (asserted), so the folded timing is what is compared
PERIODIC = [
    (dict(ranks=16, tokens=2048), 2),  # 64 rows: 2 sources per tile
    (dict(ranks=8, tokens=1024), 4),  # 32 rows: 4 sources per tile, 2 copies of the block
    (dict(ranks=8, tokens=1024, shared_expert=True), 4),
    (dict(ranks=16, tokens=2048, one_sided=False), 2),  # per-rank "all arrived" tasks
    (dict(ranks=16, tokens=2048, dynamic=True), 2),
    (dict(ranks=8, tokens=2048, tile_rows=256), 4),  # 64 rows in 256-row tiles
    (dict(ranks=16, tokens=2048, l2=False, n_tile=1024), 2),
    (dict(ranks=16, tokens=1536, hw_overrides={"link_bw": 30e9}), 8),  # 48 rows: lcm -> 8
    (dict(ranks=32, tokens=1024, hw_overrides={"link_bw": 20e9}), 4),  # 8 copies of 4 ranks
    (dict(preset="qwen3-235b", ranks=16, tokens=1024), 2),  # 64 rows
    (dict(preset="pangu-ultra-moe", ranks=16, tokens=1024, hw_overrides={"link_bw": 40e9}), 4),
]


def _both(**params: Any) -> tuple[Run, Run]:
    wl, hw, opts, _ = prepare(SimulationConfig.build(**params))
    return execute(wl, hw, opts), execute(wl, hw, opts, fold=True)


@pytest.mark.parametrize(
    "params", SYMMETRIC, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items())
)
def test_folded_run_equals_the_full_simulation_task_by_task(params: dict[str, Any]) -> None:
    full, folded = _both(**params)
    exp = folded.expansion
    assert full.expansion is None
    if exp is None:  # the planner kept a chunked plan: its own graph of every rank
        assert folded.plan.startswith("chunked") and folded.plan == full.plan
        assert np.array_equal(full.start, folded.start) and np.array_equal(full.lane, folded.lane)
        return
    _assert_equal_task_by_task(full, folded)


def _assert_equal_task_by_task(full: Run, folded: Run) -> None:
    exp = folded.expansion
    assert exp is not None and full.expansion is None
    assert folded.graph.n * exp.copies == full.graph.n
    rep, rank = exp.rep, exp.rank
    t, q = full.timed, folded.timed
    assert np.array_equal(t.rank, rank)
    assert np.array_equal(t.type, q.type[rep])
    assert np.array_equal(t.dur, q.dur[rep])
    # every task on every rank starts and ends at the same ns, on the same lane
    assert np.array_equal(full.start, folded.start[rep])
    assert np.array_equal(full.start + t.dur, (folded.start + q.dur)[rep])
    # the block's lanes are numbered from its own ranks on: a copy is (rank - its rank) further
    assert np.array_equal(full.lane, folded.lane[rep] + (rank - q.rank[rep]) * q.lanes_per_rank)
    assert full.plan == folded.plan and full.makespan_ns == folded.makespan_ns


@pytest.mark.parametrize(
    "params,period",
    PERIODIC,
    ids=lambda p: (
        ",".join(f"{k}={v}" for k, v in p.items()) if isinstance(p, dict) else f"period={p}"
    ),
)
def test_block_fold_equals_the_full_simulation_task_by_task(
    params: dict[str, Any], period: int
) -> None:
    full, folded = _both(**params)
    exp = folded.expansion
    assert exp is not None, folded.plan  # a tile plan, timed on the block
    sym = folded.graph.symmetric
    assert sym is not None and sym.period == exp.period == period
    assert folded.graph.folded_ranks == exp.copies == params["ranks"] // period
    # the block: ranks 0 .. period-1, each with its share of the whole run's tasks
    ranks = folded.graph.cols["rank"]
    assert ranks.min() == 0 and ranks.max() == period - 1
    assert np.bincount(ranks).tolist() == [folded.graph.n // period] * period
    _assert_equal_task_by_task(full, folded)


@pytest.mark.parametrize("params", SYMMETRIC[:4] + [PERIODIC[i][0] for i in (1, 2, 3, 9)], ids=str)
def test_folded_trace_equals_the_full_trace(params: dict[str, Any]) -> None:
    full, folded = _both(**params)
    assert folded.expansion is not None or folded.plan.startswith("chunked")
    a, b = to_trace(full), to_trace(folded)
    assert a.events.equals(b.events)  # every column: ts, dur, track, name, args, depth ...
    assert a.tracks.equals(b.tracks)
    assert a.deps.sort("src", "dst").equals(b.deps.sort("src", "dst"))
    assert a.deps.height == b.deps.height == full.timed.src.size
    ma, mb = a.meta["executor"], b.meta["executor"]
    assert ma.keys() == mb.keys()
    for key, value in ma.items():
        if isinstance(value, float):
            assert math.isclose(value, mb[key], rel_tol=1e-12), key
        else:
            assert value == mb[key], key
    assert b.problems() == []


def test_simulate_uses_the_fold_only_where_it_is_exact() -> None:
    # 24 rows per (source, expert) on 8 ranks: an expert's 192 rows are a 128-row tile and a
    # 64-row one, which no rotation short of all 8 ranks maps onto each other: the whole graph
    for params in (
        dict(ranks=8, tokens=768),
        dict(ranks=8, tokens=512, routing="zipf:0.2"),
        dict(ranks=8, tokens=512, schedule="chunked", chunks=2),
        dict(ranks=8, tokens=512, schedule="sequential"),
        dict(ranks=8, tokens=512, placement="balanced", routing="zipf:0.5"),
        # a finite receive window: the credit timing breaks ties by task id (not rotation
        # symmetric), so the folded timing could differ from the full one
        dict(ranks=8, tokens=4096, hw_overrides={"recv_buffer_bytes": 64e6}),
    ):
        wl, hw, opts, _ = prepare(SimulationConfig.build(**params))
        run = execute(wl, hw, opts, fold=True)
        assert run.expansion is None, params
        if "hw_overrides" in params:  # symmetric, a tile plan, yet every rank simulated
            assert run.graph.symmetric is not None and run.plan.startswith("expert/")
    wl, hw, opts, _ = prepare(SimulationConfig(ranks=8, tokens=512))
    assert execute(wl, hw, opts, fold=True).expansion is not None


def test_symmetry_by_hand() -> None:
    # DeepSeek-V3, 8 ranks x 4096 tokens, top-8 of 256 experts: 4096 * 8 / 256 = 128 rows from
    # every source to every expert = one 128-row tile per source; 32 experts per rank, so a
    # (source, destination) stream holds 32 * 128 rows = 32 tiles; an expert 8 row tiles
    wl, cnt, expert_rank = _routed_counts(8, 4096)
    sym = symmetry(wl, cnt, expert_rank, aiv_comm=True)
    assert sym is not None
    assert sym.per_stream == 32 and sym.period == 1
    assert sym.shift.tolist() == [1] * 32 and sym.tiles.tolist() == [8] * 32
    # rotation: tile (src 3 -> dst 5, q 7) is tile (0 -> 2, 7) on rank 0: position 2 * 32 + 7
    assert sym.send_rep(np.array([3]), np.array([5]), np.array([7])).tolist() == [71]
    # received by 5 from 3 = received by 0 from 6 (= 3 - 5 mod 8): position 6 * 32 + 7
    assert sym.recv_rep(np.array([3]), np.array([5]), np.array([7])).tolist() == [199]
    # row tile 2 (source 2's rows) of expert 13 (local 1 on rank 5) = source 5 on rank 0's
    # expert 8 (local 1): position 8 (expert 0's tiles) + 5
    assert sym.row_tile_rep(np.array([13]), np.array([2]), np.array([5])).tolist() == [13]
    assert symmetry(wl, cnt, expert_rank, aiv_comm=False) is None
    skewed = cnt.copy()
    skewed[0, 0, :2] += [1, -1]
    assert symmetry(wl, skewed, expert_rank, aiv_comm=True) is None


def _routed_counts(ranks: int, tokens: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """DeepSeek-V3's workload, rows per (source, chunk, expert) counted from its routing, and
    its placement."""
    wl = make_workload("deepseek-v3", ranks, tokens)
    assign = route(wl)
    cnt = np.zeros((ranks, 1, 256), dtype=np.int64)
    for s in range(ranks):
        cnt[s, 0] = np.bincount(assign[s].ravel(), minlength=256)
    return wl, cnt, place(wl, assign)


def test_folded_graph_holds_rank_zero_only() -> None:
    wl = make_workload("deepseek-v3", 8, 512)
    g = build_graph(wl, fold=True)
    full = build_graph(wl)
    assert g.folded_ranks == 8 and g.full_tasks == full.n
    assert (g.cols["rank"] == 0).all()
    # per type, rank 0's tasks of the full graph: as many, the same columns but their order
    for name in ("gemm1", "dispatch_rx", "combine_tx", "unpermute", "gate"):
        mine = g.ids[name]
        theirs = full.ids[name][full.cols["rank"][full.ids[name]] == 0]
        assert mine.size == theirs.size
        for col in ("rows", "tile", "expert", "row_tile", "n_tile"):
            assert sorted(g.cols[col][mine]) == sorted(full.cols[col][theirs])


def test_simulate_is_the_folded_trace_with_every_rank() -> None:
    trace = simulate(ranks=8, tokens=512)
    ev = trace.events_with_tracks()
    per_rank = ev.group_by("rank").agg(pl.len()).sort("rank")
    assert per_rank["len"].n_unique() == 1 and per_rank.height == 8
    assert trace.meta["executor"]["tasks"] == ev.filter(pl.col("name") != "step 0").height - 8


def test_heap_list_schedule_equals_the_numpy_steps() -> None:
    # the folded graph's few (rank, pool) groups go through a heap per group; the numpy
    # version (many groups) must give the same starts and cores on the same input
    from moetrace.executor.staticsched import (
        FEW_GROUPS,
        _heap_list_schedule,
        ordered_list_schedule,
    )

    rng = np.random.default_rng(7)
    for trial in range(20):
        groups = FEW_GROUPS + 1 + trial
        n = int(rng.integers(1, 400))
        group = rng.integers(0, groups, n)
        group[:groups] = np.arange(groups)[: min(groups, n)]
        release = rng.integers(0, 50, n) * int(rng.integers(1, 4))  # many equal times: ties
        dur = rng.integers(1, 30, n)
        cores = rng.integers(1, 5, int(group.max()) + 1)
        s1, c1 = ordered_list_schedule(group, release, dur, cores)
        s2, c2 = _heap_list_schedule(group, release, dur, cores)
        assert np.array_equal(s1, s2) and np.array_equal(c1, c2)
        assert (c1 < cores[group]).all() and (s1 >= release).all()


def test_period_two_symmetry_by_hand() -> None:
    # DeepSeek-V3, 16 ranks x 2048 tokens: 2048 * 8 / 256 = 64 rows from every source to
    # every expert, so row tile j of an expert holds sources 2j and 2j+1: a rotation by 2 ranks
    # moves each expert's tiles by one (shift 1); 16 x 64 / 128 = 8 tiles per expert; 16
    # experts per rank, a (source, destination) stream of 16 x 64 rows = 8 dispatch tiles
    sym = symmetry(*_routed_counts(16, 2048), aiv_comm=True)
    assert sym is not None
    assert (sym.period, sym.copies, sym.per_stream) == (2, 8, 8)
    assert sym.shift.tolist() == [1] * 16 and sym.tiles.tolist() == [8] * 16
    # tile (src 3 -> dst 5, q 7) rotated back by 2 ranks: (1 -> 3, 7); the block's sent tiles
    # are (src 0 or 1, dst, q): position (1 * 16 + 3) * 8 + 7
    assert sym.send_rep(np.array([3]), np.array([5]), np.array([7])).tolist() == [159]
    # received by 5 from 3, rotated back by 4 ranks: received by 1 from 15 (= 3 - 4 mod 16);
    # the block receives (src, dst 0 or 1, q): position (15 * 2 + 1) * 8 + 7
    assert sym.recv_rep(np.array([3]), np.array([5]), np.array([7])).tolist() == [255]
    # row tile 2 (sources 4, 5) of expert 29 (local 1 on rank 13), rotated back by 12 ranks:
    # expert 17 (local 1 on rank 1), sources 8, 9 = its tile 4; the block's row tiles by
    # expert: 0, 1, 16, 17 (8 tiles each), so 3 * 8 + 4
    assert sym.row_tile_rep(np.array([29]), np.array([2]), np.array([13])).tolist() == [28]


def _brute_period(ep: int, rows: list[int], tr: int) -> tuple[int, list[int]]:
    """The least rotation r (ranks) that maps every expert's row tiles onto row tiles, by
    moving sets of rows, and by how many tiles it moves each expert's (0 for one tile)."""
    shifts: list[int] = []
    for r in range(1, ep + 1):
        shifts = []
        for c in rows:
            n = ep * c
            tiles = [frozenset(range(lo, min(lo + tr, n))) for lo in range(0, n, tr)]
            moved = [frozenset((x + r * c) % n for x in t) for t in tiles]
            if set(moved) != set(tiles):
                break
            shifts.append(tiles.index(moved[0]) if len(tiles) > 1 else 0)
        else:
            return r, shifts
    raise AssertionError("the identity always maps tiles onto tiles")


@pytest.mark.parametrize("ep", [2, 4, 8, 16])
@pytest.mark.parametrize("tr", [16, 32, 48, 128])
def test_period_is_the_least_rotation_that_maps_tiles_onto_tiles(ep: int, tr: int) -> None:
    rng = np.random.default_rng(ep * 1000 + tr)
    wl = make_workload("deepseek-v3", ep, 64, tile_rows=tr)
    local = 256 // ep
    for _ in range(12):
        rows = rng.choice([0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128], size=2)
        per_local = np.resize(rows, local)  # two counts, alternating over local experts
        cnt = np.broadcast_to(np.repeat(per_local, ep), (ep, 1, 256)).copy()
        sym = symmetry(wl, cnt, np.arange(256) % ep, aiv_comm=True)
        period, shifts = _brute_period(ep, rows.tolist(), tr)
        if sym is None:
            assert period == ep, (rows, tr)  # only the identity: nothing to fold
            continue
        assert isinstance(sym, Symmetry)
        assert sym.period == period, (rows, tr)
        one = ep * rows <= tr
        tiles = np.where(one, rows > 0, ep * rows // tr)
        assert sym.tiles[:2].tolist() == tiles.tolist()
        # tiles moved per rotation by the period (modulo the expert's tiles)
        assert (sym.shift[:2] % np.maximum(tiles, 1)).tolist() == shifts, (rows, tr)
