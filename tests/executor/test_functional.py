"""The simulated task graph computes the MoE layer: numpy buffers vs a dense reference."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from moetrace.executor.engine import run_schedule
from moetrace.executor.run import Run, simulate_run
from moetrace.executor.schedules import lane_layout
from moetrace.executor.taskgraph import T
from moetrace.executor.workload import MoEShape
from moetrace.testing.dense_moe import (
    PlacementError,
    execute,
    make_weights,
    placement_errors,
    reference,
)

TINY = MoEShape(
    "tiny", hidden=32, intermediate=16, experts=8, top_k=2, shared_experts=1, source="test"
)
BASE: dict[str, Any] = dict(preset=TINY, ranks=4, tokens=24, tile_rows=4, n_tile=8)


def _check(run: Run) -> None:
    w = make_weights(run, seed=1)
    got = execute(run, w)
    want = reference(run, w)
    assert np.isfinite(got).all(), "NaN reached the output: a task ran before its producer"
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("schedule", ["sequential", "chunked", "tile"])
@pytest.mark.parametrize("routing", ["balanced", "zipf:1.2"])
@pytest.mark.parametrize("placement", ["round-robin", "balanced"])
def test_every_schedule_routing_and_placement_computes_the_layer(
    schedule: str, routing: str, placement: str
) -> None:
    run = simulate_run(**BASE, schedule=schedule, routing=routing, placement=placement, chunks=3)
    _check(run)


@pytest.mark.parametrize("ablation", [dict(one_sided=False), dict(l2=False), dict(dynamic=True)])
def test_ablations_compute_the_layer(ablation: dict[str, Any]) -> None:
    _check(simulate_run(**BASE, schedule="tile", routing="zipf:1.0", **ablation))


def test_shared_expert_and_bf16_dispatch() -> None:
    _check(simulate_run(**BASE, schedule="tile", shared_expert=True, dispatch_dtype="bf16"))
    _check(simulate_run(**BASE, schedule="sequential", shared_expert=True))


def _without(run: Run, cuts: list[tuple[str, str]]) -> Run:
    """The run after deleting every (src type -> dst type) dependency and rescheduling."""
    t = run.timed
    drop = np.zeros(t.src.size, dtype=bool)
    for src_type, dst_type in cuts:
        hit = (t.type[t.src] == T[src_type]) & (t.type[t.dst] == T[dst_type])
        assert hit.any()
        drop |= hit
    cut = dataclasses.replace(t, src=t.src[~drop], dst=t.dst[~drop], w=t.w[~drop])
    layout = lane_layout(run.hardware, run.options)
    start, lane, timed = run_schedule(cut, layout, run.options.dynamic)
    return dataclasses.replace(run, timed=timed, start=start, lane=lane)


@pytest.mark.parametrize(
    ("schedule", "cuts"),
    [
        ("tile", [("dispatch_rx", "gemm1")]),
        ("tile", [("swiglu", "gemm2")]),
        ("tile", [("combine_rx", "unpermute")]),
        ("tile", [("layout", "permute")]),
        # operator kernels: the data edges and the all-to-all's completion (its TX and RX tasks
        # gate the next kernel's launch) both order the GEMMs after the arrivals
        (
            "chunked",
            [("dispatch_rx", "gemm1"), ("dispatch_rx", "launch"), ("dispatch_tx", "launch")],
        ),
        (
            "sequential",
            [("dispatch_rx", "gemm1"), ("dispatch_rx", "launch"), ("dispatch_tx", "launch")],
        ),
    ],
)
def test_a_removed_dependency_breaks_the_result(schedule: str, cuts: list[tuple[str, str]]) -> None:
    # zero launch cost, so that nothing but the dependencies orders the kernels
    fast = {"launch_ns": 0, "collective_ns": 0}
    run = simulate_run(**BASE, schedule=schedule, chunks=3, hw_overrides=fast)
    w = make_weights(run, seed=1)
    want = reference(run, w)
    np.testing.assert_allclose(execute(run, w), want, rtol=1e-9, atol=1e-9)
    broken = execute(_without(run, cuts), w)
    assert not np.allclose(broken, want, equal_nan=False)


def _moved(run: Run, task: int, to_rank: int, lane_too: bool = True) -> Run:
    """The run with one task moved to another rank (its rank column and, optionally, its lane)."""
    cols = dict(run.graph.cols)
    cols["rank"] = cols["rank"].copy()
    cols["rank"][task] = to_rank
    graph = dataclasses.replace(run.graph, cols=cols)
    lane = run.lane.copy()
    if lane_too:
        per = run.timed.lanes_per_rank
        lane[task] = to_rank * per + lane[task] % per
    return dataclasses.replace(run, graph=graph, lane=lane)


@pytest.mark.parametrize("schedule", ["sequential", "chunked", "tile"])
def test_placement_holds_for_every_schedule(schedule: str) -> None:
    run = simulate_run(**BASE, schedule=schedule, routing="zipf:1.2", placement="balanced")
    assert placement_errors(run) == []
    # the expert GEMMs really are spread over ranks (the check is not vacuous)
    gemm = run.graph.cols["type"] == T["gemm1"]
    assert np.unique(run.graph.cols["rank"][gemm]).size == run.workload.ranks


@pytest.mark.parametrize("kind", ["gemm1", "gemm2"])
def test_moving_one_gemm_to_another_rank_fails_the_proof(kind: str) -> None:
    run = simulate_run(**BASE, schedule="tile")
    task = int(run.graph.ids[kind][3])
    home = int(run.graph.cols["rank"][task])
    moved = _moved(run, task, (home + 1) % run.workload.ranks)
    errors = placement_errors(moved)
    assert any("off their expert's rank" in e for e in errors)
    assert any("data edge(s) cross ranks" in e for e in errors)
    with pytest.raises(PlacementError):
        execute(moved, make_weights(moved, seed=1))
    # only its core moved (a core of another rank runs it): caught as well
    core_only = dataclasses.replace(
        run, lane=_moved(run, task, (home + 1) % run.workload.ranks).lane
    )
    assert any("another rank's lane" in e for e in placement_errors(core_only))
