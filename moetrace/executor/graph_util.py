"""Small numpy helpers for building task graphs: a column builder, counting-based grouping."""

from __future__ import annotations

import numpy as np


class Builder:
    """Accumulates blocks of tasks (columns) and edges; ids grow in the order blocks are added."""

    def __init__(
        self, types: dict[str, int], int_cols: tuple[str, ...], float_cols: tuple[str, ...]
    ) -> None:
        self.types = types
        self.int_cols = int_cols
        self.float_cols = float_cols
        self.parts: dict[str, list[np.ndarray]] = {c: [] for c in (*int_cols, *float_cols, "seq")}
        self.count = 0
        self.edges: list[tuple[np.ndarray, np.ndarray]] = []

    def add(self, kind: str, size: int, **values: np.ndarray | float | int) -> np.ndarray:
        ids = np.arange(self.count, self.count + size, dtype=np.int64)
        self.count += size
        for col in (*self.int_cols, "seq"):
            default = (
                self.types[kind]
                if col == "type"
                else (0 if col in ("chunk", "rows", "seq") else -1)
            )
            self.parts[col].append(
                np.broadcast_to(np.asarray(values.get(col, default), dtype=np.int64), (size,))
            )
        for col in self.float_cols:
            self.parts[col].append(
                np.broadcast_to(np.asarray(values.get(col, 0.0), dtype=np.float64), (size,))
            )
        return ids

    def edge(self, a: np.ndarray, b: np.ndarray) -> None:
        self.edges.append((np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)))


def stable_order(key: np.ndarray) -> np.ndarray:
    """Stable argsort; small non-negative keys go through uint16 (numpy's radix sort)."""
    if key.size and int(key.max()) < 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def cumcount_rows(key: np.ndarray, size: int) -> np.ndarray:
    """For a 2-d array of keys (0 <= key < size): rank of every element among the earlier
    elements of its row with the same key. One radix argsort per row on 8/16-bit keys."""
    m, w = key.shape
    small = np.uint8 if size <= 1 << 8 else np.uint16 if size <= 1 << 16 else np.int64
    row_base = np.arange(m, dtype=np.int64)[:, None]
    flat_key = (row_base * size + key).ravel()  # (row, key): sorted order = row-wise order
    order = (np.argsort(key.astype(small), axis=1, kind="stable") + row_base * w).ravel()
    starts = exclusive_cumsum(np.bincount(flat_key, minlength=m * size))
    out = np.empty(m * w, dtype=np.int64)
    out[order] = np.arange(m * w, dtype=np.int64) - starts[flat_key[order]]
    return out.reshape(m, w)


def exclusive_cumsum(counts: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Sum of the counts before each entry (along `axis`, or over the flattened array)."""
    if axis is None:
        flat = counts.ravel()
        return np.asarray(np.cumsum(flat) - flat)
    return np.asarray(np.cumsum(counts, axis=axis) - counts)


def tiles_of_groups(counts: np.ndarray, tile: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut groups of `counts` rows (in group order) into tiles of `tile` rows.

    Returns (first tile index of every group, group of every tile, index of the tile within
    its group); empty groups get no tile."""
    n_tiles = -(-counts // tile)
    first = exclusive_cumsum(n_tiles)
    group = np.repeat(np.arange(counts.size, dtype=np.int64), n_tiles)
    return first, group, np.arange(group.size, dtype=np.int64) - first[group]
