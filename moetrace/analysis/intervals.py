"""Vectorised interval-set algebra over many groups at once (numpy, times in ns).

An interval set is an `Intervals` triple of equal-length int64 arrays (group, start, end):
half-open intervals [start, end) tagged with a dense group id (e.g. one per rank and step).
Every operation works on all groups in one pass: sort once, then cumulative sums / running
maxima; no Python loop per interval or per group. `union` returns, per group, disjoint
sorted intervals; the binary operations expect their inputs to be unions already.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

I64 = np.int64


class Intervals(NamedTuple):
    """Half-open intervals [start, end) in ns, each tagged with a dense group id."""

    group: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


def make(group: object, start: object, end: object) -> Intervals:
    """Build an `Intervals` from array-likes, as int64."""
    return Intervals(
        np.asarray(group, dtype=I64), np.asarray(start, dtype=I64), np.asarray(end, dtype=I64)
    )


def empty() -> Intervals:
    """An empty interval set."""
    z = np.zeros(0, dtype=I64)
    return Intervals(z, z.copy(), z.copy())


def pack_pairs(*pairs: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """Pack (group, time) pairs into single int64 keys that sort like the pairs.

    Each argument is a (group, time) pair of equal-length arrays; all are packed with the
    same scheme: `group * span + (time - t_min)` when that fits in int64, otherwise dense
    ranks of the times (exact for epoch-sized ns values either way).
    """
    nonempty = [t for _, t in pairs if len(t)]
    if not nonempty:
        return [np.zeros(0, dtype=I64) for _ in pairs]
    alltimes = np.concatenate(nonempty)
    lo, hi = int(alltimes.min()), int(alltimes.max())
    span = hi - lo + 1
    gmax = max((int(g.max()) for g, _ in pairs if len(g)), default=0) + 1
    if span * (gmax + 1) < 2**62:
        base, width = np.int64(lo), np.int64(span)
        return [g * width + (t - base) for g, t in pairs]
    uniq = np.unique(alltimes)
    width = np.int64(len(uniq) + 1)
    return [g * width + np.searchsorted(uniq, t).astype(I64) for g, t in pairs]


def union(iv: Intervals) -> Intervals:
    """Per group, the union as disjoint intervals sorted by start; touching ones merge.

    Empty intervals (end <= start) are dropped.
    """
    keep = iv.end > iv.start
    g, s, e = iv.group[keep], iv.start[keep], iv.end[keep]
    if len(s) == 0:
        return empty()
    ps, pe = pack_pairs((g, s), (g, e))
    if len(ps) > 1 and not bool((ps[1:] >= ps[:-1]).all()):
        order = np.argsort(ps, kind="stable")
        g, s, e, ps, pe = g[order], s[order], e[order], ps[order], pe[order]
    run_max = np.maximum.accumulate(pe)
    new = np.ones(len(s), dtype=bool)
    new[1:] = ps[1:] > run_max[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(s)) - 1
    # the end of a merged interval is the running max of ends at its last member
    ends_packed = run_max[last]
    return Intervals(g[first], s[first], e[first] + (ends_packed - pe[first]))


def lengths_by_group(iv: Intervals, n_groups: int) -> np.ndarray:
    """Σ (end - start) per group id 0..n_groups-1 (ns); meaningful on disjoint sets."""
    if len(iv) == 0:
        return np.zeros(n_groups, dtype=I64)
    out = np.bincount(iv.group, weights=(iv.end - iv.start).astype(np.float64), minlength=n_groups)
    return np.rint(out).astype(I64)


def _sweep(a: Intervals, b: Intervals, levels: tuple[int, ...]) -> Intervals:
    """Pieces where the coverage level (1 for a, 2 for b, 3 for both) is in `levels`.

    `a` and `b` must each be disjoint per group (unions). Result is a union.
    """
    n = len(a) + len(b)
    if n == 0:
        return empty()
    g = np.concatenate([a.group, a.group, b.group, b.group])
    t = np.concatenate([a.start, a.end, b.start, b.end])
    d = np.concatenate(
        [
            np.full(len(a), 1, I64),
            np.full(len(a), -1, I64),
            np.full(len(b), 2, I64),
            np.full(len(b), -2, I64),
        ]
    )
    (key,) = pack_pairs((g, t))
    order = np.argsort(key, kind="stable")
    g, t, d = g[order], t[order], d[order]
    level = np.cumsum(d)  # every group closes all its intervals, so no reset is needed
    same = g[:-1] == g[1:]
    positive = t[1:] > t[:-1]
    sel = same & positive & np.isin(level[:-1], levels)
    idx = np.flatnonzero(sel)
    return union(Intervals(g[idx], t[idx], t[idx + 1]))


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """A ∩ B per group (inputs disjoint per group)."""
    return _sweep(a, b, (3,))


def difference(a: Intervals, b: Intervals) -> Intervals:
    """A \\ B per group (inputs disjoint per group)."""
    return _sweep(a, b, (1,))


def complement(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> Intervals:
    """Per group g, [lo[g], hi[g]) minus the intervals of g (`iv` must be a union inside
    the windows). One pass: the gap before each interval, plus the tail gap of each group."""
    n = len(lo)
    lo = np.asarray(lo, I64)
    hi = np.asarray(hi, I64)
    g, s, e = iv.group, iv.start, iv.end
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    prev_end = np.empty(len(g), dtype=I64)
    if len(g):
        prev_end[1:] = e[:-1]
        prev_end[first] = lo[g[first]]
    last_end = lo.copy()
    if len(g):
        last = np.ones(len(g), dtype=bool)
        last[:-1] = g[1:] != g[:-1]
        last_end[g[last]] = e[last]
    gg = np.concatenate([g, np.arange(n, dtype=I64)])
    gs = np.concatenate([prev_end, last_end])
    ge = np.concatenate([s, hi])
    keep = ge > gs
    gg, gs, ge = gg[keep], gs[keep], ge[keep]
    (key,) = pack_pairs((gg, gs))
    order = np.argsort(key, kind="stable")
    return Intervals(gg[order], gs[order], ge[order])


def union2(a: Intervals, b: Intervals) -> Intervals:
    """A ∪ B per group."""
    return union(
        Intervals(
            np.concatenate([a.group, b.group]),
            np.concatenate([a.start, b.start]),
            np.concatenate([a.end, b.end]),
        )
    )


def clip(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> Intervals:
    """Clip every interval to its group's window [lo[g], hi[g]); empty pieces are dropped."""
    if len(iv) == 0:
        return empty()
    s = np.maximum(iv.start, lo[iv.group])
    e = np.minimum(iv.end, hi[iv.group])
    keep = e > s
    return Intervals(iv.group[keep], s[keep], e[keep])


def windows(lo: np.ndarray, hi: np.ndarray) -> Intervals:
    """One interval [lo[g], hi[g]) per group g (empty windows dropped)."""
    g = np.arange(len(lo), dtype=I64)
    keep = hi > lo
    return Intervals(g[keep], np.asarray(lo, I64)[keep], np.asarray(hi, I64)[keep])


def covered_length(
    sets: Intervals, q_group: np.ndarray, q_start: np.ndarray, q_end: np.ndarray
) -> np.ndarray:
    """For each query [q_start, q_end) of group q_group, |query ∩ sets[q_group]| in ns.

    `sets` must be a union (disjoint, sorted per group). Prefix sums + binary search:
    O((n + q) log n).
    """
    q_group = np.asarray(q_group, I64)
    q_start = np.asarray(q_start, I64)
    q_end = np.maximum(np.asarray(q_end, I64), q_start)
    if len(q_start) == 0 or len(sets) == 0:
        return np.zeros(len(q_start), dtype=I64)
    ps, qa, qb = pack_pairs((sets.group, sets.start), (q_group, q_start), (q_group, q_end))
    lengths = sets.end - sets.start
    before = np.concatenate([[0], np.cumsum(lengths)])  # covered ns before interval i

    def cov(key: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Covered ns of all set intervals (any group) up to (group, t) in packed order."""
        i = np.searchsorted(ps, key, side="right") - 1
        ic = np.clip(i, 0, None)
        same = (i >= 0) & (sets.group[ic] == q_group)
        # an interval of an earlier group lies wholly before the query time
        inside = np.where(same, np.clip(t - sets.start[ic], 0, lengths[ic]), lengths[ic])
        return np.where(i >= 0, before[ic] + inside, 0)

    return np.asarray(cov(qb, q_end) - cov(qa, q_start))
