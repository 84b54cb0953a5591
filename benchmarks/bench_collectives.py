"""Benchmark the job view on an executor trace of many ranks: matching, clocks, stragglers and
the job critical path (analyze_job), and the MoE view (moe_view), against the load time.

Simulates one MoE layer (sequential schedule, zipf routing) on RANKS ranks, writes it as
Chrome JSON, loads it back and times load, analyze_job and moe_view (best of --repeat).
Prints one line per stage with its ratio to the load time.

A second part builds a synthetic job of RANKS ranks x --collectives NCCL kernels with Kineto
args (random arrivals, per-rank clock offsets) and times analyze_job on it against loading the
same trace from Chrome JSON: many instances and a long job critical path.

Usage: python benchmarks/bench_collectives.py [--ranks 64] [--tokens 2048] [--collectives 2000]
                                      [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.job import analyze_job
from moetrace.analysis.moe import moe_view
from moetrace.executor.run import simulate
from moetrace.trace.io import load
from moetrace.trace.model import Trace

ARGS = (
    '{"Collective name": "allreduce", "In msg nelems": 1048576, "dtype": "Float", '
    '"Process Group Name": "0"}'
)


def synthetic_job(ranks: int, collectives: int, seed: int = 0) -> Trace:
    """ranks x collectives compute+NCCL kernel pairs; rank r's clock is off by r x 1 ms."""
    rng = np.random.default_rng(seed)
    work = rng.integers(10_000, 200_000, (collectives, ranks))  # compute before each one
    start = np.zeros(ranks, dtype=np.int64)
    ts, dur, kind, track = [], [], [], []
    for i in range(collectives):  # build-time loop over instances, not part of the timing
        arrive = start + work[i]
        end = arrive.max() + 50_000
        ts += [start, arrive]
        dur += [work[i], end - arrive]
        kind += [np.full(ranks, 0), np.full(ranks, 1)]
        track += [np.arange(ranks)] * 2
        start = np.full(ranks, end)
    rank = np.concatenate(track)
    frame = pl.DataFrame(
        {
            "id": np.arange(rank.size),
            "track": rank,
            "name": np.where(np.concatenate(kind) == 1, "ncclDevKernel_AllReduce", "gemm"),
            "kind": np.where(np.concatenate(kind) == 1, "comm", "compute"),
            "ts": np.concatenate(ts) + rank * 1_000_000,
            "dur": np.concatenate(dur),
        }
    ).with_columns(pl.when(pl.col("kind") == "comm").then(pl.lit(ARGS)).alias("args"))
    tracks = pl.DataFrame(
        {"track": np.arange(ranks), "rank": np.arange(ranks), "pid": "0", "unit": "stream"}
    )
    return Trace.from_frames(frame, tracks, compute_depth=True)


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Shortest wall time of `repeat` calls (s) and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--collectives", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trace = simulate(
        ranks=args.ranks, tokens=args.tokens, routing="zipf:1.2", schedule="sequential"
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.json.gz"
        trace.write(path)
        t_load, loaded = best(lambda: load(path), args.repeat)
    t_job, job = best(lambda: analyze_job(loaded), args.repeat)
    t_moe, _ = best(lambda: moe_view(loaded), args.repeat)
    n = loaded.events.height
    print(f"{args.ranks} ranks, {n} events, {job.collectives.height} collective instances")
    print(f"load        {t_load:8.3f} s")
    print(f"analyze_job {t_job:8.3f} s  {t_job / t_load:6.2f}x load")
    print(f"moe_view    {t_moe:8.3f} s  {t_moe / t_load:6.2f}x load")
    top = job.to_dict()["stragglers"][0]
    most = (
        loaded.events_with_tracks()
        .filter(pl.col("name") == "dispatch_rx")
        .group_by("rank")
        .agg(pl.col("bytes").sum())
        .sort("bytes", descending=True)["rank"][0]
    )
    print(f"rank receiving the most dispatch bytes: {most}")
    cp = job.to_dict()["critical_path"]
    print(f"straggler rank {top['rank']}, job path {cp['span_ns'] / 1e6:.3f} ms, comm share "
          f"{cp['comm_share']:.3f}")  # fmt: skip
    syn = synthetic_job(args.ranks, args.collectives)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "syn.json.gz"
        syn.write(path)
        t_load, loaded = best(lambda: load(path), args.repeat)
    t_job, job = best(lambda: analyze_job(loaded), args.repeat)
    cp = job.to_dict()["critical_path"]
    print(
        f"synthetic: {args.ranks} ranks x {args.collectives} all-reduces, "
        f"{loaded.events.height} events, {job.collectives.height} instances, "
        f"path {cp['segments']} segments"
    )
    print(f"load        {t_load:8.3f} s")
    print(f"analyze_job {t_job:8.3f} s  {t_job / t_load:6.2f}x load")


if __name__ == "__main__":
    main()
