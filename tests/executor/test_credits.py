"""Sender/receiver credit coupling: a sender cannot send into a full receive buffer; credits
come back when the receiver's readers of those rows finish (executor/credits.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from moetrace.executor.credits import CreditDeadlock, retime_with_credits
from moetrace.executor.engine import run_schedule
from moetrace.executor.floors import floors
from moetrace.executor.run import simulate_run
from moetrace.executor.schedules import POOL_AIC, POOL_RX, POOL_TX, Timed

TX_NS, RX_NS, READ_NS, LAT_NS, TILE_BYTES = 10, 10, 50, 5, 100


def _three_transfers(buffer: float) -> Timed:
    """Rank 0 sends three 100-byte tiles to rank 1 (TX 10 ns, RX 10 ns, latency 5 ns); one
    cube core of rank 1 reads each tile for 50 ns. Ids: TX 0-2, RX 3-5, readers 6-8."""
    n = 9
    pool = np.array([POOL_TX] * 3 + [POOL_RX] * 3 + [POOL_AIC] * 3)
    rank = np.array([0] * 3 + [1] * 6)
    dur = np.array([TX_NS] * 3 + [RX_NS] * 3 + [READ_NS] * 3, dtype=np.int64)
    src = np.array([0, 1, 2, 3, 4, 5])
    dst = np.array([3, 4, 5, 6, 7, 8])
    # RX starts one latency after its TX started: start[rx] >= end[tx] + LAT - TX
    w = np.array([LAT_NS - TX_NS] * 3 + [0] * 3, dtype=np.int64)
    is_comm = pool != POOL_AIC
    zeros = np.zeros(n)
    return Timed(
        n=n,
        rank=rank,
        type=np.zeros(n, dtype=np.int64),
        dur=dur,
        src=src,
        dst=dst,
        w=w,
        pool=pool,
        seq=np.array([0, 1, 2, 0, 1, 2, 0, 1, 2]),
        launch_op=[],
        n_graph=n,
        lanes_per_rank=3,
        l2_intermediates=False,
        hbm_bytes=zeros,
        l2_bytes=zeros,
        list_scheduled=True,
        traffic_bytes=np.where(is_comm, float(TILE_BYTES), 0.0),
        hbm_bw=1e12,
        flops=zeros,
        is_aic=pool == POOL_AIC,
        port_rate_bytes=zeros,
        remote=is_comm,
        recv_buffer_bytes=buffer,
        credit_ns=LAT_NS,
    )


LAYOUT = {POOL_AIC: (0, 1), POOL_TX: (1, 1), POOL_RX: (2, 1)}


def test_credit_limit_changes_the_makespan_by_the_hand_derived_amount() -> None:
    # unlimited buffer: TX back to back at 0/10/20, RX at 5/15/25, reads 15-65, 65-115,
    # 115-165: the reader is the bottleneck, makespan 15 + 3 x 50 = 165 ns
    free_start, _, _ = run_schedule(_three_transfers(float("inf")), LAYOUT)
    free_end = free_start + _three_transfers(float("inf")).dur
    assert int(free_end.max()) == 15 + 3 * READ_NS == 165
    # buffer of ONE tile: tile k+1 may be sent only when tile k's read has ended and the credit
    # has travelled back (5 ns); then TX 10 ns, RX starts 5 ns after TX start and takes 10 ns,
    # the read 50 ns: one tile every 50 + 5 + 15 = 70 ns instead of every 50 ns after the first
    # read ends at 65: makespan 65 + 2 x 70 = 205 ns, 40 ns = 2 x (5 + 15) more than unlimited
    t = _three_transfers(float(TILE_BYTES))
    start, _, _ = run_schedule(t, LAYOUT)
    assert start.tolist()[:3] == [0, 70, 140]  # TX: the sender waits for each credit
    assert start.tolist()[3:6] == [5, 75, 145]  # RX
    assert start.tolist()[6:] == [15, 85, 155]  # reads
    assert int((start + t.dur).max()) == 205 == 165 + 2 * (LAT_NS + LAT_NS + RX_NS)
    # two tiles of buffer: tile 2 waits for tile 0's read (TX at 65 + 5 = 70), but the
    # reader is still busy with tile 1 until 115, so the makespan stays 165
    t2 = _three_transfers(2.0 * TILE_BYTES)
    start2, _, _ = run_schedule(t2, LAYOUT)
    assert start2[2] == 70 and int((start2 + t2.dur).max()) == 165


def test_a_tile_larger_than_the_buffer_is_refused() -> None:
    t = _three_transfers(TILE_BYTES / 2)
    lane = np.array([1, 1, 1, 5, 5, 5, 3, 3, 3])
    with pytest.raises(CreditDeadlock, match="does not fit"):
        retime_with_credits(t, lane, np.array([0, 10, 20, 5, 15, 25, 15, 65, 115]))


def _buffer_violations(run, credit_ns: int) -> int:  # type: ignore[no-untyped-def]
    """Slow reference: for every remote transfer, when its sender starts it, the bytes its
    receiver's window holds for other transfers (started earlier; freed once their RX and all
    their readers have ended and the credit got back) plus its own must fit the window.
    Returns the count of transfers that broke it."""
    t, start = run.timed, run.start
    end = start + t.dur
    rx_ids = [i for i in range(t.n) if t.pool[i] == POOL_RX and t.remote[i]]
    freed_at = {i: int(end[i]) for i in rx_ids}
    sender: dict[int, int] = {}
    for s, d in zip(t.src.tolist(), t.dst.tolist(), strict=True):
        if s in freed_at:
            freed_at[s] = max(freed_at[s], int(end[d]))
        if d in freed_at and t.pool[s] == POOL_TX:
            sender[d] = s
    bad = 0
    for k in rx_ids:
        sent = (int(start[sender[k]]), k)
        held = sum(
            float(t.traffic_bytes[i])
            for i in rx_ids
            if i != k
            and t.rank[i] == t.rank[k]
            and (int(start[sender[i]]), i) < sent
            and freed_at[i] + credit_ns > sent[0]
        )
        bad += held + float(t.traffic_bytes[k]) > t.recv_buffer_bytes
    return bad


@pytest.mark.parametrize("ranks,tokens,mib", [(8, 384, 24)])
def test_small_buffer_is_honoured_and_slows_the_run(ranks: int, tokens: int, mib: int) -> None:
    # an explicit order: the planner keeps tile plans (no chunked candidates)
    common: dict[str, Any] = dict(
        ranks=ranks, tokens=tokens, routing="zipf:0.5", seed=3, order="arrival"
    )
    free = simulate_run(**common, hw_overrides={"recv_buffer_bytes": 1e15})
    tight = simulate_run(**common, hw_overrides={"recv_buffer_bytes": mib * 2**20})
    assert tight.options.schedule == "tile" and free.options.schedule == "tile"
    credit = round(tight.hardware.link_latency_ns)
    assert _buffer_violations(tight, credit) == 0
    # the reference must be able to fail: the unlimited run overfills that window
    free.timed.recv_buffer_bytes = mib * 2**20
    assert _buffer_violations(free, credit) > 0
    assert tight.makespan_ns > free.makespan_ns
    f = floors(tight.timed, tight.hardware, ranks)["floors_ns"]
    assert tight.makespan_ns >= max(f.values())


def test_a_buffer_too_small_for_the_plans_is_one_clear_error() -> None:
    # a GEMM row tile reads rows of several senders' tiles at once; with a window of a few tiles
    # the credit-unaware static orders would deadlock, and the run is refused (not mis-timed)
    with pytest.raises(CreditDeadlock, match="receive buffer"):
        simulate_run(ranks=8, tokens=384, order="arrival", hw_overrides={"recv_buffer_bytes": 4e6})
