"""The task graph's data model: task types (in dependency order) and `TaskGraph`, a struct of
arrays with one entry per task plus its data edges. Built by `tiles.build_graph`; read by the
schedules, the timing engine, the fold and the trace writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from moetrace.executor.rowlayout import RowMap
from moetrace.executor.symmetry import Symmetry

# Task types in generation (= dependency) order; ids grow along every edge.
TYPES = (
    "gate",
    "topk",
    "layout",
    "permute",
    "shared_up",
    "shared_act",
    "shared_down",
    "dispatch_issue",
    "dispatch_tx",
    "dispatch_rx",
    "dispatch_done",
    "gemm1",
    "swiglu",
    "gemm2",
    "combine_issue",
    "combine_tx",
    "combine_rx",
    "combine_done",
    "unpermute",
    "launch",
)
T = {name: i for i, name in enumerate(TYPES)}
AIC_TYPES = ("gate", "shared_up", "shared_down", "gemm1", "gemm2")

COLS = (
    "type",
    "rank",
    "expert",
    "row_tile",
    "n_tile",
    "peer",
    "tile",
    "token_tile",
    "chunk",
    "rows",
)
FCOLS = ("flops", "a_bytes", "a_hbm", "w_bytes", "w_hbm", "out_bytes", "comm_bytes")


@dataclass
class TaskGraph:
    """Struct of arrays, one entry per task, plus data edges (src -> dst task ids)."""

    cols: dict[str, np.ndarray]
    edge_src: np.ndarray
    edge_dst: np.ndarray
    seq: np.ndarray  # ordering hint for link lanes: (phase, chunk, round, tile)
    seq_expert: np.ndarray  # the same, expert-major: (phase, chunk, local expert, round, tile)
    make_rows: Callable[[], RowMap]  # the per-row map, computed on demand
    assign: np.ndarray
    expert_rank: np.ndarray
    n_token_tiles: int
    chunks: int
    aiv_comm: bool
    two_sided: bool
    ids: dict[str, np.ndarray] = field(default_factory=dict)  # type -> task ids in object order
    # folded: the graph holds the tasks of ranks 0 .. period-1 of a rotation-symmetric run
    # (`symmetry`), each standing for its copies rotated by every multiple of the period; an
    # edge from a task of another rank (a transfer into the block) comes from its copy in the
    # block. `folded_ranks` is the number of copies (EP / period; 1: not folded).
    folded_ranks: int = 1
    symmetric: Symmetry | None = None

    @property
    def full_tasks(self) -> int:
        """Tasks of the whole run (all ranks), also when the graph is folded."""
        return self.n * self.folded_ranks

    @cached_property
    def rows(self) -> RowMap:
        """Where every row lives (computed on first use: only the functional proof needs it)."""
        return self.make_rows()

    @property
    def n(self) -> int:
        return int(self.cols["type"].size)
