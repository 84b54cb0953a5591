"""`moetrace search` against an exhaustive sweep of the same space: same best, less time?

DeepSeek-V3 on 64-256 Ascend A3 dies, a global batch split over the EP degree (tokens per rank
= global / EP), schedules sequential, chunked x2/x4 and tile, row tiles 128/256 (24
candidates by default). Both run on the same engine (a spawned process pool of --jobs
workers, nothing reused from a result store): first the exhaustive sweep (every candidate
simulated), then the branch-and-bound search. Prints each one's wall time, simulations and
best configuration, and whether the bests (and Pareto fronts) are the same.
Usage: python benchmarks/bench_search.py [--ranks 64,128,256] [--global-tokens 131072]
       [--schedule sequential,chunked,tile] [--chunks 2,4] [--tile-rows 128,256]
       [--objective tokens_per_s] [--jobs N] [--hw KEY=V1,V2]
"""

from __future__ import annotations

import argparse
import time

from moetrace.commands.search_cmds import engine_evaluator, hw_ranges
from moetrace.executor.search import BASE, Outcome, expand, search
from moetrace.trace.parallel import default_jobs


def _best(outcome: Outcome) -> str:
    row = outcome.best[0]
    c, r = row.config, row.result or {}
    hw = " ".join(f"{k}={v}" for k, v in sorted((c.get("hw_overrides") or {}).items()))
    return (
        f"EP{c['ranks']} x {c['tokens']} tok {c['schedule']}"
        + (f" x{c['chunks']}" if c["schedule"] == "chunked" else "")
        + f" rows {c['tile_rows']} {hw}: {r['makespan_ns'] / 1e6:.3f} ms,"
        f" {r['tokens_per_s'] / 1e6:.2f} M tok/s, MFU {100 * r['mfu']:.1f}%"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="64,128,256")
    ap.add_argument("--global-tokens", type=int, default=131072)
    ap.add_argument("--schedule", default="sequential,chunked,tile")
    ap.add_argument("--chunks", default="2,4")
    ap.add_argument("--tile-rows", default="128,256")
    ap.add_argument("--objective", default="tokens_per_s")
    ap.add_argument("--jobs", type=int, default=default_jobs())
    ap.add_argument("--hw", action="append", default=[])
    args = ap.parse_args()
    base = dict(BASE)  # DeepSeek-V3 on ascend-a3, balanced routing
    axes = {
        "ranks": [int(x) for x in args.ranks.split(",")],
        "schedule": args.schedule.split(","),
        "chunks": [int(x) for x in args.chunks.split(",")],
        "tile_rows": [int(x) for x in args.tile_rows.split(",")],
    }
    configs = expand(base, axes, hw_ranges(args.hw), args.global_tokens)
    print(
        f"{len(configs)} candidates: DeepSeek-V3 on {args.ranks} A3 dies, global batch "
        f"{args.global_tokens} tokens, objective {args.objective}, {args.jobs} workers",
        flush=True,
    )
    outcomes = {}
    for name, exhaustive in (("exhaustive", True), ("search", False)):
        with engine_evaluator("local", args.jobs, None) as evaluator:
            t0 = time.perf_counter()
            out = search(configs, evaluator, args.objective, top=1, exhaustive=exhaustive)
            wall = time.perf_counter() - t0
        outcomes[name] = out
        print(
            f"{name:<10} {wall:8.1f} s  {out.simulated:3d} simulated  {out.pruned:3d} pruned"
            f"  best {_best(out)}",
            flush=True,
        )
    ex, se = outcomes["exhaustive"], outcomes["search"]
    same = ex.best[0].result == se.best[0].result
    front = [r.config for r in ex.pareto] == [r.config for r in se.pareto]
    print(f"same best: {same}; same Pareto front (objective vs ranks): {front}")


if __name__ == "__main__":
    main()
