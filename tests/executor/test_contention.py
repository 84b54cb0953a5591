"""Shared HBM bandwidth (executor/contention.py) against a brute-force time grid."""

from __future__ import annotations

import numpy as np
import pytest

from moetrace.executor.contention import demand_profile, lex_order
from moetrace.executor.run import simulate_run
from moetrace.executor.taskgraph import T


@pytest.mark.parametrize("seed", range(5))
def test_demand_profile_matches_a_unit_time_grid(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = 60
    rank = rng.integers(0, 3, m)
    start = rng.integers(0, 50, m)
    end = start + rng.integers(0, 20, m)  # zero-length intervals included
    rate = rng.uniform(0.0, 3.0, m)
    b_rank, b_time, demand, _ = demand_profile(rank, start, end, rate)
    # brute force: demand in every unit time slot [u, u+1) of every rank
    grid = np.zeros((3, 80))
    for r, s, e, x in zip(rank, start, end, rate, strict=True):
        grid[r, s:e] += x
    last = np.r_[(b_rank[1:] != b_rank[:-1]) | (b_time[1:] != b_time[:-1]), True]
    for r, t0, d in zip(b_rank[last], b_time[last], demand[last], strict=True):
        assert d == pytest.approx(grid[r, t0], abs=1e-9)


def test_operator_kernel_streams_hbm_at_the_device_rate() -> None:
    """Sequential permute kernel: when more AIV stream than HBM can feed (48 x 58 GB/s > 1.6 TB/s),
    the cores that run together get hbm_bw between them, not 58 GB/s each."""
    run = simulate_run(ranks=8, tokens=4096, schedule="sequential")
    t, hw = run.timed, run.hardware
    permute = (t.type == T["permute"]) & (t.rank == 0)
    start, end = run.start[permute], run.start[permute] + t.dur[permute]
    moment = np.median(start)  # a time in the first wave: every AIV is busy
    busy = (start <= moment) & (end > moment)
    assert busy.sum() == hw.n_aiv
    rate = (t.hbm_bytes[permute] / (t.dur[permute] * 1e-9))[busy]
    assert rate.sum() == pytest.approx(hw.hbm_bw, rel=0.05)
    assert rate.sum() <= hw.hbm_bw
    assert np.all(rate <= hw.hbm_core_rate * 1.0001)


@pytest.mark.parametrize("seed", range(4))
def test_lex_order_equals_numpy_lexsort(seed: int) -> None:
    """The packed-key sort gives lexsort's exact order (ties by index), on both its paths."""
    rng = np.random.default_rng(seed)
    m = 500
    a = rng.integers(-3, 4, m)  # negative keys and many ties
    b = rng.integers(0, 5, m)
    big = rng.integers(0, 2**40, m)  # packing would overflow: lexsort fallback
    assert np.array_equal(lex_order(a, b), np.lexsort((a, b)))
    assert np.array_equal(lex_order(b), np.lexsort((b,)))
    assert np.array_equal(lex_order(big, b, a), np.lexsort((big, b, a)))
    assert lex_order(np.zeros(0, dtype=np.int64)).size == 0
