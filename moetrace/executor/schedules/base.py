"""What a schedule is: the `Schedule` protocol, its options and the pools its lanes belong to.

A schedule decides everything of a run that is not the task graph's physics: its lanes and
pools on each rank, how HBM is split between them, its kernel launches, per-task costs (sync,
GEMM efficiency, L2 intermediates), the ablations it accepts and the planner's candidate plans.
Each one lives in its own module (`sequential.py`, `chunked.py`, `tile.py`) and is found by
name in `registry.py`; `timing.py` and the planner ask it, never its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from moetrace.executor.hardware import Hardware
from moetrace.executor.taskgraph import TaskGraph
from moetrace.executor.workload import Workload

POOL_AIC, POOL_AIV, POOL_AIVC, POOL_TX, POOL_RX, POOL_STEP, POOL_STREAM = range(7)
ABLATIONS = ("one_sided", "l2", "dynamic")  # `ScheduleOptions` fields a schedule may accept off
# their default (True, True, False): --no-one-sided, --no-l2, --dynamic

# launch nodes of a run: rank, dur (ns), pool, seq, op names, edges src, dst
Launches = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]


@dataclass(frozen=True)
class ScheduleOptions:
    """Which schedule and which HyperParallel mechanisms are on."""

    schedule: str = "tile"
    chunks: int = 4
    one_sided: bool = True
    l2: bool = True
    dynamic: bool = False
    order: str = "arrival"  # tile: "arrival" (transfers in rotation order) or "expert"-major
    aic_hbm_bias: float = 1.0  # tile: weight of the AIC pool's bytes when HBM is split (plan)

    def ablations(self) -> set[str]:
        """The `ABLATIONS` these options turn off their default."""
        off = {"one_sided": not self.one_sided, "l2": not self.l2, "dynamic": self.dynamic}
        return {name for name in ABLATIONS if off[name]}


class Schedule(Protocol):
    """One schedule: how a task graph becomes timed work on lanes (see the module docstring)."""

    name: str
    summary: str  # one line: what it is
    ablations: frozenset[str]  # of `ABLATIONS`: the ones it accepts
    comm_aiv: bool  # transfers issued by reserved comm AIV cores (pool POOL_AIVC)
    collectives_alone: bool  # its all-to-alls run alone on the rank: they get all of HBM
    pools_together: bool  # AIC and vector AIV pools run at once: HBM is split between them
    static_orders: bool  # per-core task orders from the offline (list) scheduler
    demo_label: str  # its row in `moetrace demo` ("" if not shown)
    demo_options: Mapping[str, Any]  # the demo's options for it (e.g. chunks)

    def lane_layout(self, hw: Hardware) -> dict[int, tuple[int, int]]:
        """Pool -> (first lane index within the rank, number of lanes)."""
        ...

    def micro_batches(self, opts: ScheduleOptions) -> int:
        """Micro-batches of its task graph (chunks)."""
        ...

    def two_sided(self, opts: ScheduleOptions) -> bool:
        """Transfers wait for a rendezvous (no per-tile arrival signal)."""
        ...

    def l2_intermediates(self, opts: ScheduleOptions) -> bool:
        """GEMM1 -> SwiGLU -> GEMM2 intermediates may stay in L2 (when they fit)."""
        ...

    def bypass_l2(self, opts: ScheduleOptions) -> bool:
        """Every operand read goes to HBM (--no-l2)."""
        ...

    def live_experts(self, wl: Workload, opts: ScheduleOptions) -> int:
        """Experts whose weights are live in L2 at once."""
        ...

    def gemm_eff(self, hw: Hardware) -> float:
        """Share of the cube's peak its GEMM tiles reach."""
        ...

    def sync_ns(self, hw: Hardware) -> float:
        """Per-task synchronisation cost (ns)."""
        ...

    def recv_window(self, hw: Hardware, opts: ScheduleOptions) -> float:
        """Receive buffer (bytes) its transfers land in; inf: no limit."""
        ...

    def transfer_seq(self, graph: TaskGraph, opts: ScheduleOptions) -> np.ndarray:
        """Order hint of every task for FIFO lanes (links, streams)."""
        ...

    def launches(
        self, graph: TaskGraph, wl: Workload, hw: Hardware, opts: ScheduleOptions, n: int
    ) -> Launches:
        """Launch nodes (one per kernel per rank) and their edges; `n`: graph tasks."""
        ...

    def transfer_orders(self, opts: ScheduleOptions) -> tuple[str, ...]:
        """The planner's transfer-order candidates."""
        ...

    def hbm_biases(self, small: bool) -> tuple[float, ...]:
        """The planner's AIC HBM-weight candidates (`small`: a graph of few planned tasks)."""
        ...

    def rival_plans(
        self, graph: TaskGraph, wl: Workload, opts: ScheduleOptions, whole_run_small: bool
    ) -> list[tuple[TaskGraph, ScheduleOptions]]:
        """Other schedules' plans the planner may emit instead (kept only if clearly faster)."""
        ...

    def plan_label(self, cand: ScheduleOptions, order_name: str) -> str:
        """The name of a kept plan (`meta["executor"]["schedule"]["plan"]`)."""
        ...
