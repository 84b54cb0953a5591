"""Viewer speed on a 1M-event trace, headless: first frame after load, key -> repaint.

Targets (BENCHMARKS.md / issue 5): first frame ≤ 1 s after the trace is in memory (metrics
running in their worker at the same time); median key press -> repaint ≤ 50 ms over 30
zoom/pan keys. Prints one line per figure and PASS or FAIL last.
Run: /work/venv/bin/python benchmarks/bench_tui.py [--events N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from moetrace.tui.app import MoetraceApp
from moetrace.tui.synthetic import synthetic_trace

KEYS = ["w"] * 10 + ["d"] * 5 + ["a"] * 5 + ["s"] * 10
FIRST_FRAME_S = 1.0
REPAINT_MS = 50.0


async def wait_paint(app: MoetraceApp, pilot: object, before: int, timeout: float = 5.0) -> float:
    """Wait until the timeline has drawn lane rows after `before`; return the paint time."""
    tl = app.timeline
    deadline = time.perf_counter() + timeout
    while tl.lane_paints <= before and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    return tl.last_paint


async def run(events: int, metrics: bool) -> tuple[float, list[float], list[float], int]:
    ranks, lanes = 8, 5
    per_lane = events // (ranks * lanes)
    trace = synthetic_trace(
        ranks=ranks, events_per_lane=per_lane, seed=0, with_deps=False, compute_depth=False
    )
    start = time.perf_counter()
    app = MoetraceApp(trace, metrics=metrics)
    async with app.run_test(size=(208, 45)) as pilot:
        first = await wait_paint(app, pilot, 0, timeout=30)
        first_frame = first - start
        await app.workers.wait_for_complete()  # steady state: metrics done, keys only
        await pilot.pause()
        latencies, cpu = [], []
        for key in KEYS:
            before = app.timeline.lane_paints
            t, c = time.perf_counter(), time.process_time()
            await pilot.press(key)
            painted = await wait_paint(app, pilot, before)
            await pilot.pause(0)
            cpu.append((time.process_time() - c) * 1000)
            latencies.append((painted - t) * 1000)
    return first_frame, latencies, cpu, trace.events.height


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--no-metrics", action="store_true", help="do not run the analysis worker")
    args = parser.parse_args()
    first, lat, cpu, n = asyncio.run(run(args.events, not args.no_metrics))
    median = statistics.median(lat)
    print(f"events: {n}")
    print(f"first frame after load: {first * 1000:.0f} ms (target ≤ {FIRST_FRAME_S * 1000:.0f} ms)")
    print(
        f"key -> repaint over {len(lat)} zoom/pan keys: median {median:.1f} ms, "
        f"p90 {sorted(lat)[int(0.9 * len(lat))]:.1f} ms, max {max(lat):.1f} ms "
        f"(target median ≤ {REPAINT_MS:.0f} ms)"
    )
    print(
        f"CPU time per key (press, bin, compose, repaint): median {statistics.median(cpu):.1f} ms"
    )
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ok = first <= FIRST_FRAME_S and median <= REPAINT_MS
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
