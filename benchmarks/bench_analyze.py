"""Benchmark `analyze`: all metrics vs the load time of the same trace, and growth with size.

A seeded generator builds a multi-rank device trace (AIC/AIV cores, links, host thread with
ProfilerStep markers) with about one dependency edge per event, writes it as Chrome JSON with
moetrace's writer, loads it back with `moetrace.load` and runs `moetrace.analyze` on it.
Prints one line per size (load s, analyze s, ratio), the n log n growth check and PASS/FAIL:
target analyze <= 1x load at 1M events with 1M edges (BENCHMARKS.md), and time per
n·log2(n) growing by at most 2x from the smallest to the largest size.

Usage: python benchmarks/bench_analyze.py [--sizes 10000,100000,1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from moetrace.trace.model import Trace

RANKS = 8
UNITS = ["aic"] * 4 + ["aiv"] * 4 + ["link"] * 2
STEPS = 4


def generate(n_events: int, seed: int = 0) -> Trace:
    """About n_events device slices on RANKS × len(UNITS) tracks, ~n_events data deps."""
    rng = np.random.default_rng(seed)
    n_tracks = RANKS * len(UNITS)
    per_track = max(1, n_events // n_tracks)
    track = np.repeat(np.arange(n_tracks), per_track)
    dur = rng.integers(1_000, 20_000, track.size)
    gap = rng.integers(0, 5_000, track.size)
    step_len = per_track // STEPS + 1
    # a longer pause between steps so each step is a clear window
    pos = np.tile(np.arange(per_track), n_tracks)
    gap = gap + np.where(pos % step_len == 0, 200_000, 0)
    ts = np.zeros(track.size, dtype=np.int64)
    for t in range(n_tracks):  # one cumsum per track (80 tracks), not per event
        sl = slice(t * per_track, (t + 1) * per_track)
        ts[sl] = np.cumsum(gap[sl] + dur[sl]) - dur[sl]
    unit = np.array(UNITS)[track % len(UNITS)]
    kind = np.where(unit == "link", "comm", "compute")
    rank = track // len(UNITS)
    names = np.where(unit == "link", "dispatch_a2a", np.where(unit == "aic", "gemm", "swiglu"))
    # deps: each event depends on a recent event of its rank on another track that ended
    # before it started
    end = ts + dur
    src = np.full(track.size, -1, dtype=np.int64)
    for r in range(RANKS):
        mine = np.flatnonzero(rank == r)
        order = mine[np.argsort(end[mine], kind="stable")]
        k = np.searchsorted(end[order], ts[mine], side="right")
        pick = k - 1 - rng.integers(0, 64, mine.size)
        ok = pick >= 0
        src[mine[ok]] = order[pick[ok]]
    has = src >= 0
    n = track.size
    # host: one ProfilerStep marker per rank and step, on a cpu track per rank
    step_starts = []
    for r in range(RANKS):
        tr = np.arange(r * len(UNITS), (r + 1) * len(UNITS))
        sel = np.isin(track, tr)
        first = ts[sel].min()
        last = end[sel].max()
        bounds = np.linspace(first, last + 1, STEPS + 1).astype(np.int64)
        for s in range(STEPS):
            step_starts.append(
                (n_tracks + r, f"ProfilerStep#{s}", bounds[s], bounds[s + 1] - bounds[s])
            )
    mk = np.array([m[2] for m in step_starts], dtype=np.int64)
    events = pl.DataFrame(
        {
            "id": np.arange(n + len(step_starts)),
            "track": np.concatenate([track, [m[0] for m in step_starts]]),
            "name": np.concatenate([names, [m[1] for m in step_starts]]),
            "kind": np.concatenate([kind, ["marker"] * len(step_starts)]),
            "ts": np.concatenate([ts, mk]),
            "dur": np.concatenate([dur, [m[3] for m in step_starts]]),
            "flops": np.concatenate(
                [np.where(kind == "compute", dur * 1e6, np.nan), np.full(len(step_starts), np.nan)]
            ),
        }
    ).with_columns(pl.col("flops").fill_nan(None))
    tracks = pl.DataFrame(
        {
            "track": np.arange(n_tracks + RANKS),
            "rank": np.concatenate([np.arange(n_tracks) // len(UNITS), np.arange(RANKS)]),
            "pid": [
                str(r)
                for r in np.concatenate([np.arange(n_tracks) // len(UNITS), np.arange(RANKS)])
            ],
            "tid": [str(t) for t in range(n_tracks + RANKS)],
            "unit": UNITS * RANKS + ["cpu"] * RANKS,
            "thread_name": [f"{u}{t % len(UNITS)}" for t, u in enumerate(UNITS * RANKS)]
            + ["host"] * RANKS,
        }
    )
    deps = pl.DataFrame({"src": src[has], "dst": np.flatnonzero(has), "kind": "data"})
    meta = {"format": "executor", "flavor": "moetrace", "peak_flops": 1e15}
    return Trace.from_frames(events, tracks, deps, meta=meta, compute_depth=True)


def measure(n_events: int, folder: Path, repeats: int) -> tuple[int, int, float, float]:
    """(events, deps, best load s, best analyze s) for a generated trace of n_events."""
    import moetrace
    from moetrace.analysis import analyze

    path = folder / f"bench_{n_events}.json"
    if not path.exists():
        generate(n_events).write(path)
    load_s, an_s = math.inf, math.inf
    trace = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        trace = moetrace.load(path)
        load_s = min(load_s, time.perf_counter() - t0)
    assert trace is not None
    for _ in range(repeats):
        t0 = time.perf_counter()
        report = analyze(trace)
        an_s = min(an_s, time.perf_counter() - t0)
    assert report.ranks.height == RANKS * STEPS, report.ranks.height
    return trace.events.height, trace.deps.height, load_s, an_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--keep", default=None, help="folder for the generated traces")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for n in sizes:
            ev, dp, load_s, an_s = measure(n, folder, args.repeats)
            rows.append((ev, an_s))
            print(
                f"events {ev:>9,}  deps {dp:>9,}  load {load_s:7.3f} s  analyze {an_s:7.3f} s"
                f"  analyze/load {an_s / load_s:5.2f}x"
            )
    big_ratio = an_s / load_s
    per = [t / (n * math.log2(n)) for n, t in rows]
    growth = per[-1] / per[0] if len(per) > 1 else 1.0
    print(f"time per n*log2(n), largest vs smallest size: {growth:.2f}x (n log n growth <= 2x)")
    ok = big_ratio <= 1.0 and growth <= 2.0
    print(f"analyze at {rows[-1][0]:,} events = {big_ratio:.2f}x load (target <= 1.00x)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
