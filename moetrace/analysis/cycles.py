"""Find and name a dependency cycle (deps + track order), without paying for it on DAGs.

Events are totally ordered by (end, start, row). An edge that goes forward in that order
cannot close a cycle on its own: every cycle contains at least one "backward" edge. Real
dependencies (and track order) end before their successor starts, so they are forward and
the check is one sort. Only when backward edges exist does an iterative depth-first search
run, started from their destinations (any cycle passes through one), and name one cycle.
"""

from __future__ import annotations

import numpy as np

from moetrace.analysis.critical_path import Edges
from moetrace.analysis.prepared import Prepared

MAX_NAMED = 8
"""Events named in the message before the cycle is elided."""


def find_cycle(prep: Prepared, edge_set: Edges) -> str | None:
    """A readable description of one cycle ("name#id -> ... -> name#id"), or None."""
    if edge_set.height == 0:
        return None
    ts = prep.ev["ts"].to_numpy()
    end = prep.ev["end"].to_numpy()
    src, dst = edge_set.src, edge_set.dst
    order = np.lexsort((np.arange(len(ts)), ts, end))
    position = np.empty(len(ts), dtype=np.int64)
    position[order] = np.arange(len(ts))
    backward = position[src] >= position[dst]
    if not backward.any():
        return None
    cycle = _dfs_cycle(prep.ev.height, src, dst, np.unique(dst[backward]))
    if cycle is None:
        return None
    names = prep.ev["name"].to_list()
    ids = prep.ev["id"].to_list()
    shown = [f"{names[i]}#{ids[i]}" for i in cycle[:MAX_NAMED]]
    if len(cycle) > MAX_NAMED:
        shown.append(f"... ({len(cycle) - MAX_NAMED} more)")
    shown.append(f"{names[cycle[0]]}#{ids[cycle[0]]}")
    return " -> ".join(shown)


def _dfs_cycle(n: int, src: np.ndarray, dst: np.ndarray, roots: np.ndarray) -> list[int] | None:
    """Nodes of one directed cycle in order, or None (iterative three-colour DFS from
    `roots`, which must include a node of every cycle)."""
    order = np.argsort(src, kind="stable")
    s_sorted, d_sorted = src[order], dst[order]
    starts = np.searchsorted(s_sorted, np.arange(n + 1))
    succ = d_sorted.tolist()
    first = starts.tolist()
    color = bytearray(n)  # 0 new, 1 on stack, 2 done
    parent = [-1] * n
    for root in roots.tolist():
        if color[root]:
            continue
        stack = [(root, first[root])]
        color[root] = 1
        while stack:
            node, pos = stack[-1]
            if pos < first[node + 1]:
                stack[-1] = (node, pos + 1)
                nxt = succ[pos]
                if color[nxt] == 0:
                    color[nxt] = 1
                    parent[nxt] = node
                    stack.append((nxt, first[nxt]))
                elif color[nxt] == 1:
                    path = [node]
                    while path[-1] != nxt:
                        path.append(parent[path[-1]])
                    return path[::-1]
            else:
                color[node] = 2
                stack.pop()
    return None
