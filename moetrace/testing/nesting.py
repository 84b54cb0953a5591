"""Nesting depth and overflow lanes computed the slow, obvious way (plain Python lists).

`moetrace.trace.model.nesting_depth` and the readers' overflow-lane assignment are vectorised;
these are their definitions, for tests to compare against on arbitrary slices.
"""

from __future__ import annotations


def stack_depth(track: list[int], ts: list[int], dur: list[int]) -> tuple[list[int], list[bool]]:
    """Obvious stack walk per track in (ts, -dur, index) order."""
    n = len(ts)
    order = sorted(range(n), key=lambda i: (track[i], ts[i], -dur[i], i))
    depth = [0] * n
    bad = [False] * n
    stack: list[int] = []
    cur_track = None
    for i in order:
        if track[i] != cur_track:
            stack, cur_track = [], track[i]
        while stack and ts[stack[-1]] + dur[stack[-1]] <= ts[i]:
            stack.pop()
        depth[i] = len(stack)
        if stack and ts[stack[-1]] + dur[stack[-1]] < ts[i] + dur[i]:
            bad[i] = True
        stack.append(i)
    return depth, bad


def definition_depth(
    track: list[int], ts: list[int], dur: list[int]
) -> tuple[list[int], list[bool]]:
    """Per track in (ts, longest first, input order): depth = earlier events ending after my
    start; bad = the last earlier event one level up is missing or ends before me."""
    n = len(ts)
    order = sorted(range(n), key=lambda i: (track[i], ts[i], -dur[i], i))
    depth, bad = [0] * n, [False] * n
    for k, i in enumerate(order):
        before = [j for j in order[:k] if track[j] == track[i]]
        depth[i] = sum(1 for j in before if ts[j] + dur[j] > ts[i])
        if depth[i]:
            parents = [j for j in before if depth[j] == depth[i] - 1]
            bad[i] = not parents or ts[parents[-1]] + dur[parents[-1]] < ts[i] + dur[i]
    return depth, bad


def definition_lanes(
    track: list[int], ts: list[int], dur: list[int], max_lanes: int = 64
) -> tuple[list[int], list[int]]:
    """Move the badly nested slices one lane up until every (track, lane) nests."""
    lane = [0] * len(ts)
    depth = [0] * len(ts)
    for _ in range(max_lanes):
        key = [t * (max_lanes + 1) + la for t, la in zip(track, lane, strict=True)]
        depth, bad = definition_depth(key, ts, dur)
        if not any(bad):
            break
        lane = [la + b for la, b in zip(lane, bad, strict=True)]
    return lane, depth
