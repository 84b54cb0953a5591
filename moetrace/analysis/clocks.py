"""Clock offsets between ranks, estimated from the collectives themselves.

A blocking collective (all-reduce, all-gather, reduce-scatter, all-to-all, barrier) cannot
end on any rank before its last rank arrived. With o_r = rank r's clock minus the reference
rank's clock (the lowest rank), every instance both take part in bounds the offset:
    a_r - end_ref  <=  o_r  <=  end_r - a_ref        (a = arrival, end = end, own clocks)
Within the tightest bounds [max (a_r - end_ref), min (end_r - a_ref)] the offset is the
median of end_r - end_ref (the ends of a blocking collective are nearly simultaneous),
clipped into the bounds. `uncertainty_ns` is half the bounds' width, and `residual_ns` =
median |end_r - end_ref - o_r| says how simultaneous the ends are once aligned. Bounds
that cross (lower > upper) mean no constant offset is consistent (drift, or a collective
that is not blocking): reported as a negative uncertainty. Shifting one rank's clock by D
moves both bounds and the median by exactly D, so every aligned figure is unchanged.

Ranks on one clock (one host) satisfy the bounds with offset 0 by causality, but the
median of the ends is not 0 (a rank that leaves a collective later is not a rank whose
clock is ahead). So when the causal bounds include 0 the offset is 0 (`one_clock` true):
the data cannot tell that rank's clock from the reference's, and inventing an offset
inside the bounds would move its events by up to the bounds' width for no evidence.
`lower_ns`/`upper_ns` keep the bounds so every estimate can be checked.
"""

from __future__ import annotations

import polars as pl

BLOCKING = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier")
"""Collectives whose every rank waits for every other rank's arrival."""

OFFSET_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "offset_ns": pl.Int64(),  # this rank's clock minus the reference rank's clock
    "uncertainty_ns": pl.Int64(),  # half the width of the feasible offsets
    "residual_ns": pl.Int64(),  # median |end_r - end_ref - offset| over shared instances
    "instances": pl.Int64(),  # shared blocking instances the estimate used
    "reference": pl.Int64(),
    "lower_ns": pl.Int64(),  # causal bounds of the offset: max(a_r - end_ref) ...
    "upper_ns": pl.Int64(),  # ... min(end_r - a_ref); null without shared instances
    "one_clock": pl.Boolean(),  # the bounds include 0: taken as the reference's clock
    "mid_ns": pl.Int64(),  # median of end_r - end_ref (the estimate before the bounds)
}


def clock_offsets(ops: pl.DataFrame) -> pl.DataFrame:
    """Per rank: offset_ns, uncertainty_ns, residual_ns, instances (`OFFSET_SCHEMA`).

    Ranks that share no blocking collective with the reference get offset 0, null
    uncertainty/residual and instances 0 (they cannot be aligned; say so to the user)."""
    if ops.height == 0:
        return pl.DataFrame(schema=OFFSET_SCHEMA)
    reference = int(ops["rank"].min())  # type: ignore[arg-type]
    blocking = ops.filter(pl.col("collective").is_in(list(BLOCKING)))
    ref = blocking.filter(pl.col("rank") == reference).select(
        "group", "seq", pl.col("end_ns").alias("ref_end"), pl.col("arrival_ns").alias("ref_arr")
    )
    pairs = blocking.join(ref, on=["group", "seq"], how="inner")
    est = (
        pairs.group_by("rank")
        .agg(
            (pl.col("arrival_ns") - pl.col("ref_end")).max().alias("lower"),
            (pl.col("end_ns") - pl.col("ref_arr")).min().alias("upper"),
            pl.len().alias("instances"),
            (pl.col("end_ns") - pl.col("ref_end")).median().round(0).cast(pl.Int64).alias("mid"),
        )
        .with_columns(
            pl.when(pl.col("rank") == reference)
            .then(0)
            .when((pl.col("lower") <= 0) & (pl.col("upper") >= 0))
            .then(0)
            .when(pl.col("lower") <= pl.col("upper"))
            .then(pl.col("mid").clip(pl.col("lower"), pl.col("upper")))
            .otherwise(pl.col("mid"))
            .alias("offset_ns"),
            pl.when(pl.col("rank") == reference)
            .then(0)
            .otherwise((pl.col("upper") - pl.col("lower")) // 2)
            .alias("uncertainty_ns"),
            (
                (pl.col("rank") == reference) | ((pl.col("lower") <= 0) & (pl.col("upper") >= 0))
            ).alias("one_clock"),
            pl.col("lower").alias("lower_ns"),
            pl.col("upper").alias("upper_ns"),
            pl.col("mid").alias("mid_ns"),
        )
    )
    resid = (
        pairs.join(est.select("rank", "offset_ns"), on="rank")
        .group_by("rank")
        .agg(
            (pl.col("end_ns") - pl.col("ref_end") - pl.col("offset_ns"))
            .abs()
            .median()
            .round(0)
            .alias("residual_ns")
        )
    )
    ranks = ops.select(pl.col("rank").unique())
    return (
        ranks.join(est, on="rank", how="left")
        .join(resid, on="rank", how="left")
        .with_columns(
            pl.col("offset_ns").fill_null(0),
            pl.col("instances").fill_null(0),
            pl.lit(reference).alias("reference"),
            (pl.col("one_clock").fill_null(False) | (pl.col("rank") == reference)),
        )
        .sort("rank")
        .select([pl.col(k).cast(v) for k, v in OFFSET_SCHEMA.items()])
    )


def align(frame: pl.DataFrame, offsets: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """`frame` with each of `columns` (ns, rank-local clock) moved to the reference clock."""
    joined = frame.join(offsets.select("rank", "offset_ns"), on="rank", how="left")
    return joined.with_columns(
        [(pl.col(c) - pl.col("offset_ns").fill_null(0)).alias(c) for c in columns]
    ).drop("offset_ns")
