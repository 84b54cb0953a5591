"""Does the tile schedule lose to its own ablation or to the chunked schedules? A grid.

For each (EP, tokens per rank, link bandwidth factor): makespan of tile (the planner's best
plan), `--dynamic` (its run-time-queue ablation) and chunked with 2, 4 and 8 micro-batches, and
the ratio tile / best rival (> 1.02: tile loses by more than 2%). The link factor scales the
measured DeepEP-Ascend rate of that EP degree (mean of dispatch and combine), forced with
`link_bw`. Balanced routing, DeepSeek-V3 on ascend-a3. Prints one row per cell and a summary.
Every schedule runs as `simulate()` runs it (`execute(fold=True)`): a rotation-symmetric tile
run is timed on one block of `period` ranks alone (executor/fold.py, exact), the others on
every rank. `tile s` is the wall time of the tile run as `simulate()` does it (plan, then the
trace of every rank); `fold` the ranks simulated / EP (EP/EP: not folded).
Usage: python benchmarks/bench_tile_grid.py [--ranks 8,16,32,64,128] [--tokens 512,2048,8192,16384]
       [--link 0.25,0.5,1,2]   (defaults: the issue's full grid, 80 cells; cells run smallest
       first, so a partial run's rows are complete cells; about 35 minutes on a shared machine)
"""

from __future__ import annotations

import argparse
import itertools
import time

from moetrace.executor.config import SimulationConfig
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import PRESETS
from moetrace.executor.run import Run, execute, prepare, to_trace

RIVALS = {
    "dynamic": {"schedule": "tile", "dynamic": True},
    "chunked2": {"schedule": "chunked", "chunks": 2},
    "chunked4": {"schedule": "chunked", "chunks": 4},
    "chunked8": {"schedule": "chunked", "chunks": 8},
}


def _run(**kwargs: object) -> Run:
    """One schedule of one cell, simulated as `simulate()` does (folded where exact)."""
    wl, hw, opts, _ = prepare(SimulationConfig.build(**kwargs))
    return execute(wl, hw, opts, fold=True)


def _fold(run: Run) -> str:
    """Ranks the run simulated / EP: the period of a folded run, else every rank."""
    ep = run.workload.ranks
    return f"{ep // run.graph.folded_ranks}/{ep}"  # folded_ranks: copies of the block (1: none)


def _list(text: str, kind: type) -> list:  # type: ignore[type-arg]
    return [kind(x) for x in text.split(",") if x.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,16,32,64,128")
    parser.add_argument("--tokens", default="512,2048,8192,16384")
    parser.add_argument("--link", default="0.25,0.5,1,2")
    args = parser.parse_args()
    hw = PRESETS["ascend-a3"]
    t0 = time.perf_counter()
    ratios = []
    print(
        "| EP | tokens | link | tile ms | dynamic ms | chunked x2 ms | chunked x4 ms "
        "| chunked x8 ms | tile/best | tile plan | tile s | fold |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cells = sorted(
        itertools.product(_list(args.ranks, int), _list(args.tokens, int), _list(args.link, float)),
        key=lambda c: (c[0] * c[1], c),
    )
    for ep, tokens, factor in cells:
        base = (hw.link_rate("dispatch", ep) + hw.link_rate("combine", ep)) / 2
        common = dict(ranks=ep, tokens=tokens, hw_overrides={"link_bw": factor * base})
        try:
            began = time.perf_counter()
            tile = _run(schedule="tile", **common)
            to_trace(tile)
            tile_s = time.perf_counter() - began
            spans = {k: _run(**v, **common).makespan_ns for k, v in RIVALS.items()}
        except ExecutorInputError as exc:  # e.g. a receive window the plans cannot honour
            print(f"| {ep} | {tokens} | {factor:g}x | refused: {exc} |", flush=True)
            continue
        ratio = tile.makespan_ns / min(spans.values())
        ratios.append(ratio)
        row = " | ".join(f"{spans[k] / 1e6:.2f}" for k in RIVALS)
        flag = " loses" if ratio > 1.02 else ""
        print(
            f"| {ep} | {tokens} | {factor:g}x | {tile.makespan_ns / 1e6:.2f} | {row} "
            f"| {ratio:.3f}{flag} | {tile.plan} | {tile_s:.1f} | {_fold(tile)} |",
            flush=True,
        )
    losing = sum(r > 1.02 for r in ratios)
    print(
        f"cells: {len(ratios)}; tile within 2% of the best rival or better in "
        f"{len(ratios) - losing}, loses by more in {losing} (worst {max(ratios):.3f}x); "
        f"{time.perf_counter() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()
