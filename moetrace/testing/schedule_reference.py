"""The executor's timing steps as they were first written, kept as the references that the
faster versions must reproduce exactly (tests/executor/test_engine.py):

- `ordered_list_schedule_steps`: the tile planner's per-pool list schedule, one numpy step per
  task position across all (rank, pool) groups (`staticsched.ordered_list_schedule` now places
  a batch of tasks per group and step);
- the longest path of data edges plus lane order as one graph (Kahn's sweep one task per lane
  and step, and a heapq event loop) is in `moetrace.testing.longest_path`.
"""

from __future__ import annotations

import numpy as np

from moetrace.executor.contention import lex_order

_BIG = np.iinfo(np.int64).max // 4


def ordered_list_schedule_steps(
    group: np.ndarray, release: np.ndarray, dur: np.ndarray, cores: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(start, core index within its group) of tasks given in priority order (index order):
    group g has `cores[g]` identical cores; each task, in index order within its group, goes to
    the core that frees first (lowest index on ties) and starts at max(that time, release)."""
    n = group.size
    start = np.zeros(n, dtype=np.int64)
    core_of = np.zeros(n, dtype=np.int64)
    if n == 0:
        return start, core_of
    n_groups = int(group.max()) + 1
    order = lex_order(group)  # task positions grouped, priority order within each group
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
    sizes = bounds[1:] - bounds[:-1]
    # groups by size, largest first: at step i the active groups are a prefix of that list
    by_size = np.argsort(-sizes, kind="stable")
    first = bounds[:-1][by_size]
    n_active = np.searchsorted(-sizes[by_size], -np.arange(int(sizes.max())), side="left")
    width = int(cores.max())
    core_free = np.where(np.arange(width)[None, :] < cores[by_size, None], 0, _BIG)
    core_free = core_free.astype(np.int64)
    rel, dur_o = release[order], dur[order]
    start_o = np.zeros(n, dtype=np.int64)
    core_o = np.zeros(n, dtype=np.int64)
    rows = np.arange(n_groups)
    for i, k in enumerate(n_active.tolist()):
        free = core_free[:k]
        core = free.argmin(axis=1)
        pos = first[:k] + i
        t = np.maximum(free[rows[:k], core], rel[pos])
        start_o[pos] = t
        core_o[pos] = core
        free[rows[:k], core] = t + dur_o[pos]
    start[order] = start_o
    core_of[order] = core_o
    return start, core_of
