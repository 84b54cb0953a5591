"""Kineto launch links at read time: a kernel / memcpy / memset and the runtime call that
launched it share the `correlation` arg. Kineto's `ac2g` flows miss many of them: a CUDA/HIP
graph replay writes one flow id (the graph launch's correlation) with an `f` at the launch
call and an `f` at every replayed kernel and no `s`, so no flow binds; sampled traces carry
no flows. The links are rebuilt from the correlation ids here, so `Trace.deps` holds a
`launch` row for every device event whose call was recorded (graph replays included), and
flows bound to the wrong (overlapping) kernel are dropped.
"""

from __future__ import annotations

from typing import Any

import polars as pl

RUNTIME_CALL = r"^(?:cuda|hip|cu)[A-Z]"
"""Host runtime / driver calls that launch device work (cudaLaunchKernel, hipGraphLaunch,
cuLaunchKernelEx, cudaMemcpyAsync ...): the `correlation` side on the host."""

MISCORRELATED = (
    "{} launch flow(s) bound to a device event of another correlation id (an overlapping "
    "kernel's flow ends on its neighbour): relinked by correlation"
)


def arg_int(name: str) -> pl.Expr:
    """An integer arg from the JSON args text (null when absent)."""
    return pl.col("args").str.extract(rf'"{name}"\s*:\s*(-?\d+)', 1).cast(pl.Int64, strict=False)


def drop_miscorrelated_launches(ev: pl.DataFrame, deps: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Launch deps whose call and device event both carry a `correlation` arg and disagree
    are mis-bound flows: a flow's end is bound to the slice enclosing its time, and when a
    kernel overlaps the previous one on its stream (programmatic dependent launch) and was
    moved to an overflow lane, that slice is the previous kernel. They are dropped (the
    correlation rule then links the kernel to its real call). Returns (deps, how many)."""
    launch = deps.with_row_index("_row").filter(pl.col("kind") == "launch")
    if launch.height == 0:
        return deps, 0
    ends = pl.concat([launch["src"], launch["dst"]]).unique().implode()
    corr = ev.filter(pl.col("id").is_in(ends)).select(
        pl.col("id"), arg_int("correlation").alias("corr")
    )
    corr = corr.drop_nulls("corr")
    bad = (
        launch.join(corr.rename({"id": "src", "corr": "c_src"}), on="src")
        .join(corr.rename({"id": "dst", "corr": "c_dst"}), on="dst")
        .filter(pl.col("c_src") != pl.col("c_dst"))
    )
    if bad.height == 0:
        return deps, 0
    keep = deps.with_row_index("_row").filter(~pl.col("_row").is_in(bad["_row"].implode()))
    return keep.drop("_row"), bad.height


def correlation_launches(ev: pl.DataFrame, deps: pl.DataFrame) -> pl.DataFrame | None:
    """`launch` deps (src host call, dst device event) by correlation, for device events that
    have none yet; None when there are none to add. `ev` needs id, rank, unit, kind, name,
    args. A graph launch shares its correlation with every kernel it replays, so each of
    them gets an edge to it."""
    has_launch = deps.filter(pl.col("kind") == "launch")["dst"]
    device = (
        ev.filter(
            (pl.col("unit") == "stream")
            & pl.col("kind").is_in(["compute", "comm", "memory"])
            & pl.col("args").is_not_null()
            & ~pl.col("id").is_in(has_launch.implode())
        )
        .select("rank", pl.col("id").alias("dst"), arg_int("correlation").alias("corr"))
        .drop_nulls("corr")
    )
    if device.height == 0:
        return None
    host = (
        ev.filter(
            (pl.col("unit") == "cpu")
            & pl.col("name").str.contains(RUNTIME_CALL)
            & pl.col("args").is_not_null()
        )
        .select("rank", pl.col("id").alias("src"), arg_int("correlation").alias("corr"))
        .drop_nulls("corr")
        .unique(subset=["rank", "corr"], keep="first")
    )
    found = device.join(host, on=["rank", "corr"], how="inner", nulls_equal=True)
    if found.height == 0:
        return None
    return found.select(
        pl.col("src").cast(pl.UInt32), pl.col("dst").cast(pl.UInt32), pl.lit("launch").alias("kind")
    )


def kineto_links(
    events: pl.DataFrame, tracks: pl.DataFrame, deps: pl.DataFrame, meta: dict[str, Any]
) -> pl.DataFrame:
    """The flows' deps with mis-bound launch flows dropped (a warning in `meta`) and the
    launches by correlation added (one file: one rank, the tracks' units)."""
    unit = pl.col("track").replace_strict(
        tracks["track"], tracks["unit"], default=None, return_dtype=pl.String
    )
    ev = events.select("id", "name", "kind", "args", unit.alias("unit"), pl.lit(0).alias("rank"))
    deps, miscorrelated = drop_miscorrelated_launches(ev, deps)
    if miscorrelated:
        meta.setdefault("warnings", []).append(MISCORRELATED.format(miscorrelated))
    extra = correlation_launches(ev, deps)
    if extra is None:
        return deps
    return pl.concat([deps, extra.cast(deps.schema)])
