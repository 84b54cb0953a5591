"""numpy helpers of the vectorised .pftrace reader: a stable order of small ints,
np.unique's (values, first index, inverse) by one sort or by comparisons when values are few,
and dense codes of values (track uuids) by hash tables, no sort."""

from __future__ import annotations

import numpy as np
import polars as pl


def stable_order(values: np.ndarray, bound: int) -> np.ndarray:
    """np.argsort(values, kind="stable") of non-negative ints below `bound`: a radix sort when
    they fit in 16 bits (numpy's stable sort of uint16)."""
    if bound <= 1 << 16:
        return np.argsort(values.astype(np.uint16), kind="stable")
    return np.argsort(values, kind="stable")


def codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True), the inverse as int32: the distinct values and
    each value's code by Polars' hash tables (one pass each, on every core), no sort of all
    the values (a stable argsort of 2M uint64 track uuids, or a binary search of each among
    the distinct ones, cost 2-3x as much)."""
    if len(values) == 0:
        return np.unique(values), np.zeros(0, dtype=np.int32)
    series = pl.Series(values=values)
    distinct = series.unique().sort()
    code = series.replace_strict(
        distinct, np.arange(len(distinct), dtype=np.int32), return_dtype=pl.Int32
    )
    return distinct.to_numpy(), code.to_numpy()


def unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(values, return_index, return_inverse) by one stable sort (numpy's hash-based
    unique is ~20x slower on 1M uint64s), or by one comparison per distinct value when there
    are few (kinds, lanes)."""
    few = _few_distinct(values)
    if few is not None:
        return few
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    new = np.ones(len(values), dtype=bool)
    new[1:] = ordered[1:] != ordered[:-1]
    group = np.cumsum(new) - 1
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = group
    return ordered[new], order[new], inverse


_FEW = 16
"""At most this many distinct values are found by one comparison each (`_few_distinct`)."""


def _few_distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`unique`'s result when `values` has at most `_FEW` distinct values (else None): each
    one is found as the first value not yet coded, then compared with all."""
    n = len(values)
    if len(np.unique(values[:4096])) > _FEW:  # many already in a sample: not worth trying
        return None
    code = np.full(n, -1, dtype=np.int64)
    firsts: list[int] = []
    at = 0
    while at < n:
        if len(firsts) == _FEW:
            return None
        firsts.append(at)
        code[values == values[at]] = len(firsts) - 1
        uncoded = np.flatnonzero(code[at:] < 0)
        at = at + int(uncoded[0]) if len(uncoded) else n
    first = np.array(firsts, dtype=np.int64)
    order = np.argsort(values[first], kind="stable")  # `unique` gives them sorted
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return values[first][order], first[order], rank[code]
