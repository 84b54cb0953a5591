"""Small numpy helpers for building task graphs: a column builder and sort-based grouping."""

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


def group_positions(keys_sorted: np.ndarray) -> np.ndarray:
    """Position of every element within its run of equal keys (keys sorted)."""
    n = keys_sorted.size
    starts = np.r_[True, keys_sorted[1:] != keys_sorted[:-1]] if n else np.zeros(0, bool)
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    return np.arange(n) - first


def unique(key: np.ndarray) -> np.ndarray:
    """Sorted distinct values (sort based: faster than hashing for millions of int64)."""
    s = np.sort(key)
    return s[np.r_[True, s[1:] != s[:-1]]] if s.size else s


def pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (a, b) pairs, sorted by (a, b)."""
    width = int(b.max()) + 1 if b.size else 1
    key = unique(a.astype(np.int64) * width + b)
    return key // width, key % width


def stable_order(key: np.ndarray) -> np.ndarray:
    """Stable argsort; small non-negative keys go through uint16 (numpy's radix sort)."""
    if key.size and int(key.max()) < 1 << 16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")
