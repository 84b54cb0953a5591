"""`tile` (HyperParallel-MoE): one kernel, a static per-core task order generated offline.

`comm_aiv` AIV cores issue one-sided writes that release the dependent GEMMs on arrival;
GEMM1 -> SwiGLU -> GEMM2 intermediates in L2 when they fit; per-task `tile_sync_ns`; GEMMs at
`tile_gemm_eff`. Ablations: one_sided=False (two-sided: a rendezvous before each transfer and no
per-tile arrival signal, so GEMMs wait until all of a rank's dispatch has arrived), l2=False
(every read from HBM), dynamic=True (a run-time ready queue: a dequeue per task). Its planner
candidates: two transfer orders x the HBM split between the AIC and vector pools
(`HBM_BIASES`) and, as rivals, the chunked operator-level plans (`CHUNKED_PLANS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules.base import (
    ABLATIONS,
    POOL_AIC,
    POOL_AIV,
    POOL_AIVC,
    POOL_RX,
    POOL_STEP,
    POOL_TX,
    Launches,
    ScheduleOptions,
)
from moetrace.executor.schedules.chunked import CHUNKED
from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.tiles import build_graph
from moetrace.executor.workload import Workload

# weight of the AIC pool's bytes when the planner splits HBM between AIC and vector AIV
# (below 1 favours the HBM-bound vector work: permute, unpermute); fewer on large graphs
HBM_BIASES = (0.25, 0.5, 1.0)
HBM_BIASES_LARGE = (1.0,)
# graphs up to the planner's EVENT_PLAN_LIMIT tasks: the chunked schedules with these
# micro-batch counts are candidate plans too. Where the static per-pool HBM split of the tile
# kernel costs more than its overlap gains (a few hundred tokens per rank, weight-read bound),
# the offline planner emits the chunked plan; docs/executor.md lists where that happens
CHUNKED_PLANS = (2, 4, 8)


class Tile:
    """The tile-level schedule (see the module docstring)."""

    name = "tile"
    summary = "one kernel; offline per-core task orders; AIV-issued one-sided tile transfers"
    ablations = frozenset(ABLATIONS)
    comm_aiv = True
    collectives_alone = False
    pools_together = True
    static_orders = True
    demo_label = "tile"
    demo_options: Mapping[str, Any] = {}

    def lane_layout(self, hw: Hardware) -> dict[int, tuple[int, int]]:
        """Pool -> (first lane, lanes): `comm_aiv` of the AIV cores set aside for transfers."""
        vec = hw.n_aiv - hw.comm_aiv
        link = hw.n_aic + hw.n_aiv
        return {
            POOL_AIC: (0, hw.n_aic),
            POOL_AIV: (hw.n_aic, vec),
            POOL_TX: (link, 1),
            POOL_RX: (link + 1, 1),
            POOL_STEP: (link + 2, 1),
            POOL_AIVC: (hw.n_aic + vec, hw.comm_aiv),
        }

    def micro_batches(self, opts: ScheduleOptions) -> int:
        """One batch: rows flow tile by tile."""
        return 1

    def two_sided(self, opts: ScheduleOptions) -> bool:
        """--no-one-sided."""
        return not opts.one_sided

    def l2_intermediates(self, opts: ScheduleOptions) -> bool:
        """Intermediates in L2 unless --no-l2."""
        return opts.l2

    def bypass_l2(self, opts: ScheduleOptions) -> bool:
        """--no-l2: every read goes to HBM."""
        return not opts.l2

    def live_experts(self, wl: Workload, opts: ScheduleOptions) -> int:
        """Arrival order interleaves every local expert's row tiles; expert-major keeps the
        expert being computed and the next one live."""
        return min(2 if opts.order == "expert" else wl.experts_per_rank, wl.experts_per_rank)

    def gemm_eff(self, hw: Hardware) -> float:
        """GEMM tiles at `tile_gemm_eff`."""
        return hw.tile_gemm_eff

    def sync_ns(self, hw: Hardware) -> float:
        """`tile_sync_ns` per task."""
        return hw.tile_sync_ns

    def recv_window(self, hw: Hardware, opts: ScheduleOptions) -> float:
        """One-sided writes land in `recv_buffer_bytes` (credits.py); two-sided: no limit."""
        return hw.recv_buffer_bytes if opts.one_sided else float("inf")

    def transfer_seq(self, graph: TaskGraph, opts: ScheduleOptions) -> np.ndarray:
        """The arrival rotation, or expert-major with --order expert."""
        return (graph.seq_expert if opts.order == "expert" else graph.seq).copy()

    def launches(
        self, graph: TaskGraph, wl: Workload, hw: Hardware, opts: ScheduleOptions, n: int
    ) -> Launches:
        """One kernel launch per rank, before every root task of that rank."""
        ep = wl.ranks
        rank = graph.cols["rank"]
        indeg = np.bincount(graph.edge_dst, minlength=n)
        l_ids = n + np.arange(ep)
        roots = np.flatnonzero(indeg == 0)
        return (
            np.arange(ep),
            np.full(ep, int(hw.launch_ns) or 1, dtype=np.int64),
            np.full(ep, POOL_STEP),
            np.zeros(ep, dtype=np.int64),
            ["kernel"],
            l_ids[rank[roots]],
            roots,
        )

    def transfer_orders(self, opts: ScheduleOptions) -> tuple[str, ...]:
        """auto: both the arrival and the expert-major order; else the one asked for."""
        return ("arrival", "expert") if opts.order == "auto" else (opts.order,)

    def hbm_biases(self, small: bool) -> tuple[float, ...]:
        """`HBM_BIASES` on small graphs, else `HBM_BIASES_LARGE`."""
        return HBM_BIASES if small else HBM_BIASES_LARGE

    def rival_plans(
        self, graph: TaskGraph, wl: Workload, opts: ScheduleOptions, whole_run_small: bool
    ) -> list[tuple[TaskGraph, ScheduleOptions]]:
        """The chunked plans (`CHUNKED_PLANS`) of the same routed tokens, when the planner
        picks the order and no ablation is on (their graphs: the whole run's tasks)."""
        if not (whole_run_small and opts.order == "auto" and not opts.ablations()):
            return []
        return [
            (
                build_graph(wl, chunks=k, aiv_comm=False, two_sided=False, assign=graph.assign),
                ScheduleOptions(schedule=CHUNKED.name, chunks=k),
            )
            for k in CHUNKED_PLANS
        ]

    def plan_label(self, cand: ScheduleOptions, order_name: str) -> str:
        """E.g. `arrival/static/hbm-bias 0.25`."""
        return f"{cand.order}/{order_name}/hbm-bias {cand.aic_hbm_bias:g}"


TILE = Tile()
