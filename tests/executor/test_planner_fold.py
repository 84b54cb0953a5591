"""The tile planner prices a candidate by the tasks it times (`planner.planned_tasks`): rank 0's
alone in a rotation-symmetric run, so a large balanced run gets the event-loop plans and every
HBM split on its folded problem. The candidates must depend on the run, not on whether it is
folded: the full and the folded simulation keep the same plan, task by task (the limit is
lowered here so that small runs sit between the folded and the whole run's task counts)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import moetrace.executor.planner as planner
from moetrace.executor.config import SimulationConfig
from moetrace.executor.run import execute, prepare
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import make_workload


def test_planned_tasks_is_rank_zero_of_a_symmetric_run_folded_or_not() -> None:
    wl = make_workload("deepseek-v3", 8, 512)
    full, folded = build_graph(wl), build_graph(wl, fold=True)
    assert full.symmetric is not None and folded.folded_ranks == 8
    # by hand: the folded graph is rank 0's tasks, an eighth of the whole run's
    assert full.n == 8 * folded.n
    assert planner.planned_tasks(full) == planner.planned_tasks(folded) == folded.n
    skewed = build_graph(make_workload("deepseek-v3", 8, 512, routing="zipf:0.5"), fold=True)
    assert skewed.symmetric is None and skewed.folded_ranks == 1
    assert planner.planned_tasks(skewed) == skewed.n  # not symmetric: every rank's tasks
    chunked = build_graph(wl, chunks=2, aiv_comm=False)
    assert planner.planned_tasks(chunked) == chunked.n


@pytest.mark.parametrize(
    "params",
    [
        dict(ranks=8, tokens=512),
        dict(ranks=8, tokens=512, hw_overrides={"link_bw": 20e9}),
        dict(ranks=4, tokens=1024, hw_overrides={"hbm_bw": 0.4e12}),
    ],
    ids=str,
)
def test_limit_between_folded_and_whole_run_keeps_full_and_folded_equal(
    params: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    wl, hw, opts, _ = prepare(SimulationConfig.build(**params))
    whole = build_graph(wl)
    per_rank = planner.planned_tasks(whole)
    assert per_rank < whole.n
    between = (per_rank + whole.n) // 2
    monkeypatch.setattr(planner, "EVENT_PLAN_LIMIT", between)
    monkeypatch.setattr(planner, "CHUNKED_PLAN_LIMIT", between)  # the default: the same limit
    full = execute(wl, hw, opts)
    folded = execute(wl, hw, opts, fold=True)
    assert folded.expansion is not None and full.expansion is None
    assert full.plan == folded.plan
    rep, rank = folded.expansion.rep, folded.expansion.rank
    assert np.array_equal(full.start, folded.start[rep])
    assert np.array_equal(full.lane, folded.lane[rep] + rank * folded.timed.lanes_per_rank)
    assert full.makespan_ns == folded.makespan_ns
    # every per-core order was a candidate (the limit is above the folded problem's size) and
    # the chunked plans were not (their graphs are the whole run's size): the kept plan is the
    # best of the tile candidates an exhaustive search times, no chunked plan among them
    best = planner.best_plan(folded.graph, wl, hw, opts, exhaustive=True)
    assert best.name == folded.plan and not best.name.startswith("chunked")
    monkeypatch.setattr(planner, "EVENT_PLAN_LIMIT", per_rank - 1)  # static orders only
    static_only = execute(wl, hw, opts, fold=True)
    assert "/static/" in static_only.plan
    assert folded.makespan_ns <= static_only.makespan_ns
