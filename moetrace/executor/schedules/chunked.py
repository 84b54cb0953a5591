"""`chunked`: the sequential schedule's kernels per micro-batch on a compute and a comm stream.

Chunk c's dispatch overlaps chunk c-1's GEMMs (coarse overlap, MindSpeed/DualPipe style); with
2 micro-batches it is the validation's baseline. Everything else is `sequential`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules.base import POOL_STREAM, ScheduleOptions
from moetrace.executor.schedules.sequential import COMPUTE_OPS, EXPERT_OPS, Kernel, Sequential
from moetrace.executor.taskgraph import TaskGraph


class Chunked(Sequential):
    """Operator kernels per micro-batch, the all-to-alls on their own stream."""

    name = "chunked"
    summary = "the operator kernels per micro-batch (--chunks) on a compute and a comm stream"
    collectives_alone = False  # they overlap compute: the link ports get their share of HBM
    demo_label = "chunked x2 (baseline)"
    demo_options: Mapping[str, Any] = {"chunks": 2}

    def lane_layout(self, hw: Hardware) -> dict[int, tuple[int, int]]:
        """Sequential's lanes plus the comm stream."""
        out = super().lane_layout(hw)
        out[POOL_STREAM] = (hw.n_aic + hw.n_aiv + 3, 1)
        return out

    def micro_batches(self, opts: ScheduleOptions) -> int:
        """`--chunks` micro-batches."""
        return opts.chunks

    def kernel_label(self, op: str, chunk: int) -> str:
        """A launch node's op name with its micro-batch, e.g. `gemm1 c0`."""
        return f"{op} c{chunk}"

    def kernels(self, graph: TaskGraph) -> list[Kernel]:
        """Kernels in launch order: compute stream 0, all-to-alls on stream 1, each waiting
        for its producer micro-batch on the other stream."""
        shared = "shared_up" in graph.ids
        pre = [op for op in COMPUTE_OPS if shared or not op.startswith("shared")]
        out: list[Kernel] = []
        k = graph.chunks
        for ch in range(k):
            out += [(op, ch, 0, []) for op in pre]
        for ch in range(k):
            out.append(("dispatch", ch, 1, [("permute", ch)]))
        for ch in range(k):
            out.append(("gemm1", ch, 0, [("dispatch", ch)]))
            out += [(op, ch, 0, []) for op in EXPERT_OPS[1:]]
        for ch in range(k):
            out.append(("combine", ch, 1, [("gemm2", ch)]))
        for ch in range(k):
            out.append(("unpermute", ch, 0, [("combine", ch)]))
        return out


CHUNKED = Chunked()
