"""Benchmark the executor: DeepSeek-V3 layer, 64 ranks, tile schedule, all ranks.

Two figures, each with its ratio to a plain heapq event loop
(`testing.longest_path.heap_longest_path`) over the same scheduled graph (data edges +
per-core order), measured in the same run:
- engine only: `dag.chain_longest_path` (numpy across ranks and tiles, a lane's backlogged run
  of tasks per step) on that graph, i.e. the timing step once the per-core orders are fixed
  (Kahn's sweep `testing.longest_path.longest_path`, one task per lane and step, is timed
  beside it);
- end to end: `simulate()` (routing, graph build, durations, the tile schedule's offline
  planner (its candidate plans: those its lower bound does not rule out are timed by the
  engine), and the trace frames). Balanced routing with round-robin placement is
  rotation-symmetric, so `simulate()` times rank 0's tasks alone and gathers every rank's
  trace from them (executor/fold.py; tests/executor/test_fold.py proves it equal to the full
  simulation); the figure counts the tasks of all ranks, as the trace holds them.
Per stage (from the progress callbacks): routing, task graph (graph + durations), engine
(the planner: static scheduler, engine, port re-timing per candidate), trace (frames).
The verdict (last line) uses the END-TO-END figure: >= 1M tasks/s and >= 10x the heapq loop
(BENCHMARKS.md targets). Engine and heapq runs are interleaved (load swings on a shared
machine hit both); the simulate() runs follow them, best of repeats - 1.
Then one 256-rank tile run (`--big-ranks`, link rate forced to EP128's measured 57 GB/s, since
the measured tables stop at EP128) in a child process: its wall time and peak RSS (the child's
own VmHWM; targets: < 2 s, < 1 GB). The same end-to-end figure with skewed routing (`--skew`,
default zipf:1.0 and the router-like default zipf:0.2: not rotation-symmetric, so every rank is
simulated) follows, wall and CPU time (the machine may be shared), one line per skew:
`end-to-end simulate (skewed zipf:1.0, 64 ranks, tile): N tasks/s (CPU time: M tasks/s)`.
The last line is `end-to-end simulate: N tasks/s` (64 ranks, tile, balanced).
Usage: python benchmarks/bench_simulate.py [--ranks 64] [--tokens 4096] [--repeats 3]
       [--skew zipf:1.0,zipf:0.2] [--big-ranks 256] [--big-tokens 4096]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

from moetrace.executor.config import SimulationConfig
from moetrace.executor.dag import (
    DataEdges,
    chain_longest_path,
    chain_starts,
    lane_order,
)
from moetrace.executor.run import prepare, simulate
from moetrace.executor.schedules import lane_layout, schedule
from moetrace.executor.staticsched import static_schedule
from moetrace.executor.tiles import build_graph
from moetrace.testing.longest_path import heap_longest_path, lane_chain, longest_path


def best_of(repeats: int, func, *args):  # type: ignore[no-untyped-def]
    """(min seconds, last result) over `repeats` calls."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = func(*args)
        best = min(best, time.perf_counter() - t0)
    return best, out


def stage_times(t0: float, marks: list[tuple[str, float]]) -> dict[str, float]:
    """Seconds per stage of simulate() from its progress callbacks (a stage lasts until the
    next one is announced): routing, task graph (graph + durations), engine (static scheduler,
    engine and port re-timing per candidate plan), trace (trace frames)."""
    out: dict[str, float] = {}
    prev_name, prev_t = "setup", t0
    for name, t in marks:
        out[prev_name] = out.get(prev_name, 0.0) + t - prev_t
        prev_name, prev_t = name, t
    return out


def _own_peak() -> int:
    """Peak RSS (bytes) of this process's own memory: VmHWM of /proc/self/status (ru_maxrss
    would also count the parent's pages that the child shared before its exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--skew", default="zipf:1.0,zipf:0.2", help="routings of the skewed figures (a,b,...)"
    )
    parser.add_argument("--big-ranks", type=int, default=256)
    parser.add_argument("--big-tokens", type=int, default=4096)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # the 256-rank run, alone in its process (peak RSS is the process's)
        t0 = time.perf_counter()
        trace = simulate(
            ranks=args.big_ranks,
            tokens=args.big_tokens,
            schedule="tile",
            hw_overrides={"link_bw": 57e9},
        )
        took = time.perf_counter() - t0
        out = {"seconds": took, "tasks": trace.meta["executor"]["tasks"], "peak_rss": _own_peak()}
        print(json.dumps(out))
        return

    wl, hw, opts, _ = prepare(SimulationConfig(ranks=args.ranks, tokens=args.tokens))
    t0 = time.perf_counter()
    graph = build_graph(wl, chunks=1, aiv_comm=True, two_sided=False)
    timed = schedule(graph, wl, hw, opts)
    build_s = time.perf_counter() - t0
    layout = lane_layout(hw, opts)
    plan_s, (key, lane) = best_of(1, static_schedule, timed, layout)
    a, b = lane_chain(lane, key)
    src = np.concatenate([timed.src, a])
    dst = np.concatenate([timed.dst, b])
    w = np.concatenate([timed.w, np.zeros(a.size, dtype=np.int64)])
    n = timed.n
    print(f"graph: {n:,} tasks, {src.size:,} edges (data + lane order), {args.ranks} ranks")
    print(f"build graph + durations: {build_s:.3f} s;  offline static scheduler: {plan_s:.3f} s")

    chains = lane_order(lane, key)
    first = chain_starts(lane, chains)
    # interleave them so that load changes on a shared machine hit all alike
    eng_s = kahn_s = heap_s = float("inf")
    start = kahn_start = heap_start = np.zeros(0, dtype=np.int64)
    for i in range(args.repeats):
        t0 = time.perf_counter()
        edges = DataEdges.build(n, timed.src, timed.dst, timed.w)
        start = chain_longest_path(timed.dur, edges, chains, first)
        eng_s = min(eng_s, time.perf_counter() - t0)
        t0 = time.perf_counter()
        kahn_start = longest_path(n, timed.dur, src, dst, w)
        kahn_s = min(kahn_s, time.perf_counter() - t0)
        if i < max(1, args.repeats - 1):
            t0 = time.perf_counter()
            heap_start = heap_longest_path(n, timed.dur, src, dst, w)
            heap_s = min(heap_s, time.perf_counter() - t0)
    same = bool(np.array_equal(start, heap_start) and np.array_equal(kahn_start, heap_start))
    rate = n / eng_s
    ratio = heap_s / eng_s
    print(f"engine (numpy, lane runs): {eng_s:.3f} s = {rate / 1e6:.2f} M tasks/s")
    print(f"Kahn levels (numpy):       {kahn_s:.3f} s = {n / kahn_s / 1e6:.2f} M tasks/s")
    print(f"heapq event loop:          {heap_s:.3f} s = {n / heap_s / 1e6:.2f} M tasks/s")
    print(f"engine vs heapq: {ratio:.1f}x faster; identical start times: {same}")

    e2e: dict[str, tuple[float, float, int]] = {}
    skews = args.skew.split(",")
    runs = (("sequential", "balanced"), ("tile", "balanced"), *(("tile", r) for r in skews))
    for sched, routing in runs:
        label = sched if routing == "balanced" else f"{sched}, {routing}"
        best = cpu = float("inf")
        tasks = 0
        stages: dict[str, float] = {}
        for _ in range(max(1, args.repeats - 1)):
            marks: list[tuple[str, float]] = []

            def mark(stage: str, _f: float, marks: list[tuple[str, float]] = marks) -> None:
                marks.append((stage, time.perf_counter()))

            t0, c0 = time.perf_counter(), time.process_time()
            trace = simulate(
                ranks=args.ranks, tokens=args.tokens, schedule=sched, routing=routing, progress=mark
            )
            took, cpu_took = time.perf_counter() - t0, time.process_time() - c0
            if took < best:
                best, stages = took, stage_times(t0, marks)
            cpu = min(cpu, cpu_took)
            tasks = trace.meta["executor"]["tasks"]
        e2e[label] = (best, cpu, tasks)
        print(f"  {label} stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in stages.items()))
        print(
            f"simulate() end to end, {label}: {best:.2f} s (CPU {cpu:.2f} s), {tasks:,} tasks "
            f"= {tasks / best / 1e6:.2f} M tasks/s (CPU: {tasks / cpu / 1e6:.2f} M tasks/s)"
            + (
                f"; heapq loop (engine step only) / simulate() = {heap_s / best:.1f}x"
                if label == "tile"
                else ""
            )
        )
    tile_s, _, tile_tasks = e2e["tile"]
    e2e_rate = tile_tasks / tile_s
    e2e_ratio = heap_s / tile_s
    ok = same and e2e_rate >= 1e6 and e2e_ratio >= 10
    print(
        f"engine only: {rate / 1e6:.2f} M tasks/s, {ratio:.1f}x heapq; "
        f"end to end (tile): {e2e_rate / 1e6:.2f} M tasks/s, {e2e_ratio:.1f}x heapq"
    )
    print(
        "PASS" if ok else "FAIL",
        f"(verdict on END-TO-END simulate(), tile: {e2e_rate / 1e6:.2f} M tasks/s >= 1M, "
        f"{e2e_ratio:.1f}x >= 10x heapq)",
    )
    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--big-ranks",
            str(args.big_ranks),
            "--big-tokens",
            str(args.big_tokens),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode == 0:
        big = json.loads(child.stdout.strip().splitlines()[-1])
        rss_gb = big["peak_rss"] / 1e9
        print(
            f"{args.big_ranks} ranks x {args.big_tokens} tokens, tile: {big['seconds']:.2f} s, "
            f"{big['tasks']:,} tasks, peak RSS {rss_gb:.2f} GB (targets < 2 s, < 1 GB: "
            f"{'met' if big['seconds'] < 2 and rss_gb < 1 else 'NOT met'})"
        )
    else:
        print(f"{args.big_ranks}-rank run failed: {child.stderr.strip().splitlines()[-1:]}")
    for skew in skews:
        skew_s, skew_cpu, skew_tasks = e2e[f"tile, {skew}"]
        print(
            f"end-to-end simulate (skewed {skew}, {args.ranks} ranks, tile): "
            f"{skew_tasks / skew_s:,.0f} tasks/s (CPU time: {skew_tasks / skew_cpu:,.0f} tasks/s)"
        )
    print(f"end-to-end simulate: {e2e_rate:,.0f} tasks/s")


if __name__ == "__main__":
    main()
