"""`sequential`: one kernel per operator on one stream.

Each kernel waits for the previous one on its rank (device barrier) and pays a launch; the
all-to-all is an HCCL collective (no AIV), so GEMMs start only after every tile has arrived;
intermediates go through HBM; GEMMs at `gemm_eff`. Its operator kernels and their launches are
shared with `chunked` (which subclasses it).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules.base import (
    POOL_AIC,
    POOL_AIV,
    POOL_RX,
    POOL_STEP,
    POOL_STREAM,
    POOL_TX,
    Launches,
    ScheduleOptions,
)
from moetrace.executor.taskgraph import TYPES, T, TaskGraph
from moetrace.executor.workload import Workload

COMPUTE_OPS = ("gate", "topk", "layout", "permute", "shared_up", "shared_act", "shared_down")
EXPERT_OPS = ("gemm1", "swiglu", "gemm2")
# a kernel in launch order: (op, chunk, stream, producer kernels on another stream)
Kernel = tuple[str, int, int, list[tuple[str, int]]]


class Sequential:
    """Operator kernels on one stream (see the module docstring)."""

    name = "sequential"
    summary = "one kernel per operator on one stream; HCCL all-to-all collectives"
    ablations: frozenset[str] = frozenset()
    comm_aiv = False
    collectives_alone = True
    pools_together = False
    static_orders = False
    demo_label = "sequential (context)"
    demo_options: Mapping[str, Any] = {}

    def lane_layout(self, hw: Hardware) -> dict[int, tuple[int, int]]:
        """Pool -> (first lane index within the rank, number of lanes)."""
        link = hw.n_aic + hw.n_aiv
        return {
            POOL_AIC: (0, hw.n_aic),
            POOL_AIV: (hw.n_aic, hw.n_aiv),
            POOL_TX: (link, 1),
            POOL_RX: (link + 1, 1),
            POOL_STEP: (link + 2, 1),
        }

    def micro_batches(self, opts: ScheduleOptions) -> int:
        """One batch: the whole layer."""
        return 1

    def two_sided(self, opts: ScheduleOptions) -> bool:
        """Collectives, not tile transfers: no rendezvous per transfer."""
        return False

    def l2_intermediates(self, opts: ScheduleOptions) -> bool:
        """Operator kernels write their outputs to HBM."""
        return False

    def bypass_l2(self, opts: ScheduleOptions) -> bool:
        """Weights may still hit L2 (no --no-l2 here)."""
        return False

    def live_experts(self, wl: Workload, opts: ScheduleOptions) -> int:
        """A grouped GEMM walks the experts one after another: one expert live."""
        return 1

    def gemm_eff(self, hw: Hardware) -> float:
        """Operator GEMM kernels at `gemm_eff`."""
        return hw.gemm_eff

    def sync_ns(self, hw: Hardware) -> float:
        """No per-task sync (the kernel boundary is the barrier)."""
        return 0.0

    def recv_window(self, hw: Hardware, opts: ScheduleOptions) -> float:
        """HCCL collectives: no receive window modelled (inf)."""
        return float("inf")

    def transfer_seq(self, graph: TaskGraph, opts: ScheduleOptions) -> np.ndarray:
        """Transfers in the graph's (arrival rotation) order."""
        return graph.seq.copy()

    def transfer_orders(self, opts: ScheduleOptions) -> tuple[str, ...]:
        """One candidate: the order asked for (auto: arrival)."""
        return ("arrival" if opts.order == "auto" else opts.order,)

    def hbm_biases(self, small: bool) -> tuple[float, ...]:
        """No HBM split between pools to plan."""
        return (1.0,)

    def rival_plans(
        self, graph: TaskGraph, wl: Workload, opts: ScheduleOptions, whole_run_small: bool
    ) -> list[tuple[TaskGraph, ScheduleOptions]]:
        """None: an operator schedule is what it says."""
        return []

    def plan_label(self, cand: ScheduleOptions, order_name: str) -> str:
        """E.g. `sequential x1`, `chunked x2`."""
        return f"{cand.schedule} x{cand.chunks}"

    def kernel_label(self, op: str, chunk: int) -> str:
        """A launch node's op name."""
        return op

    def kernels(self, graph: TaskGraph) -> list[Kernel]:
        """Kernels in launch order: every operator once, on the compute stream."""
        shared = "shared_up" in graph.ids
        pre = [op for op in COMPUTE_OPS if shared or not op.startswith("shared")]
        return [(op, 0, 0, []) for op in (*pre, "dispatch", *EXPERT_OPS, "combine", "unpermute")]

    def launches(
        self, graph: TaskGraph, wl: Workload, hw: Hardware, opts: ScheduleOptions, n: int
    ) -> Launches:
        """Launch nodes (one per kernel per rank) and their edges."""
        ep = wl.ranks
        typ, rank, chunk = graph.cols["type"], graph.cols["rank"], graph.cols["chunk"]
        kernels = self.kernels(graph)
        op_types = {op: [T[op]] for op in TYPES}
        op_types["dispatch"] = [T["dispatch_tx"], T["dispatch_rx"]]
        op_types["combine"] = [T["combine_tx"], T["combine_rx"]]
        nk = len(kernels)
        kernel_of = np.full(n, -1, dtype=np.int64)
        index = {(op, ch): i for i, (op, ch, _, _) in enumerate(kernels)}
        for i, (op, ch, _, _) in enumerate(kernels):
            kernel_of[np.isin(typ, op_types[op]) & (chunk == ch)] = i
        # launch node id of (rank r, kernel i) = n + r * nk + i
        l_rank = np.repeat(np.arange(ep), nk)
        l_kernel = np.tile(np.arange(nk), ep)
        comm = np.array([op in ("dispatch", "combine") for op, _, _, _ in kernels])
        l_dur = np.where(comm[l_kernel], int(hw.collective_ns) or 1, int(hw.launch_ns) or 1).astype(
            np.int64
        )
        streams = np.array([s for _, _, s, _ in kernels])
        l_pool = np.where(streams[l_kernel] == 1, POOL_STREAM, POOL_STEP)
        tasks = np.flatnonzero(kernel_of >= 0)
        e_src = [n + rank[tasks] * nk + kernel_of[tasks]]
        e_dst = [tasks]
        # task of kernel i -> launch of the next kernel on its stream and of cross-stream consumers
        nxt = np.full(nk, -1)
        for s in (0, 1):
            idx = [i for i in range(nk) if streams[i] == s]
            for a, b in itertools.pairwise(idx):
                nxt[a] = b
        consumers: list[list[int]] = [[] for _ in range(nk)]
        for i, (_, _, _, producers) in enumerate(kernels):
            for prod in producers:
                consumers[index[prod]].append(i)
            if nxt[i] >= 0:
                consumers[i].append(int(nxt[i]))
        kt = kernel_of[tasks]
        for i in range(nk):
            mine = tasks[kt == i]
            for j in consumers[i]:
                e_src.append(mine)
                e_dst.append(n + rank[mine] * nk + j)
            if not mine.size and nxt[i] >= 0:  # empty kernel: chain its launch to the next one
                e_src.append(n + np.arange(ep) * nk + i)
                e_dst.append(n + np.arange(ep) * nk + nxt[i])
        # launch i -> next launch on the same stream (keeps the stream lane well ordered)
        for i in range(nk):
            if nxt[i] >= 0:
                e_src.append(n + np.arange(ep) * nk + i)
                e_dst.append(n + np.arange(ep) * nk + nxt[i])
        ops = [self.kernel_label(op, ch) for op, ch, _, _ in kernels]
        return (
            l_rank,
            l_dur,
            l_pool,
            l_kernel.astype(np.int64),
            ops,
            np.concatenate(e_src).astype(np.int64),
            np.concatenate(e_dst).astype(np.int64),
        )


SEQUENTIAL = Sequential()
