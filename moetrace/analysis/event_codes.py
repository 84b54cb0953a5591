"""Per-event integer codes (a stage, a layer, an expert; -1 = none): from the event's own name,
then inherited from the enclosing event on its track and from the host call that launched it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl


def inherit(
    own: np.ndarray, parent: np.ndarray, depth: np.ndarray, links: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Codes (-1 = none) filled from the enclosing event, then from the launching host call,
    then again from the enclosing event; one vectorised pass per nesting level."""
    code = own.copy()
    levels = range(1, int(depth.max(initial=0)) + 1)
    for level in levels:
        kids = np.flatnonzero((depth == level) & (code < 0) & (parent >= 0))
        code[kids] = code[parent[kids]]
    s, d = links
    if len(s):
        take = code[d] < 0
        code[d[take]] = code[s[take]]
        for level in levels:  # children of a launched kernel (rare) inherit again
            kids = np.flatnonzero((depth == level) & (code < 0) & (parent >= 0))
            code[kids] = code[parent[kids]]
    return code


def own_index(ev: pl.DataFrame, patterns: Sequence[str]) -> np.ndarray:
    """Index (group 1 of the first pattern that matches the event's own name: a layer, an
    expert), else -1."""
    expr: pl.Expr = pl.lit(None, pl.Int64)
    for pattern in reversed(patterns):
        got = pl.col("name").str.extract(pattern, 1).cast(pl.Int64, strict=False)
        expr = pl.when(got.is_not_null()).then(got).otherwise(expr)
    names = ev.select(pl.col("name").unique())
    by_name = names.with_columns(expr.alias("layer"))
    layer = ev.select("name").join(by_name, on="name", how="left", maintain_order="left")["layer"]
    return layer.fill_null(-1).to_numpy().astype(np.int64)


def inherit_down(own: np.ndarray, ev: pl.DataFrame) -> np.ndarray:
    """Codes (-1 = none) filled from the enclosing event on the same track, level by level
    (`ev` from categorize: needs `parent` and `depth`)."""
    none = np.zeros(0, np.int64)
    parent = ev["parent"].to_numpy()
    return inherit(own, parent, ev["depth"].to_numpy().astype(np.int64), (none, none))
