"""Who makes whom wait: stragglers, and exposed communication split into waiting vs moving bytes.

On one clock (see clocks.py), every rank of a collective instance waits from its arrival to
the last arrival: wait = last_arrival − arrival. The last-arriving rank caused all of it:
caused_wait_ns(r) = Σ over instances r arrived last at (with skew > 0) of Σ the others' waits;
late_count(r) = the number of those instances. A rank's exposed communication (M \\ C, from
the per-rank report) splits into exposed_wait_ns = the part inside its own wait intervals
[arrival, last arrival] and exposed_transfer_ns = the rest.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv

STRAGGLER_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "caused_wait_ns": pl.Int64(),  # time the other ranks waited for this rank
    "late_count": pl.Int64(),  # instances this rank arrived last at
    "wait_ns": pl.Int64(),  # time this rank waited for late peers
    "exposed_comm_ns": pl.Int64(),
    "exposed_wait_ns": pl.Int64(),  # exposed comm spent waiting for a late peer
    "exposed_transfer_ns": pl.Int64(),  # exposed comm spent moving bytes
}


def waits(ops: pl.DataFrame, instances: pl.DataFrame) -> pl.DataFrame:
    """ops (aligned) with last_arrival_ns, last_rank, skew_ns and wait_ns of their instance."""
    return ops.join(
        instances.select("group", "seq", "last_arrival_ns", "last_rank", "skew_ns"),
        on=["group", "seq"],
        how="left",
    ).with_columns((pl.col("last_arrival_ns") - pl.col("arrival_ns")).alias("wait_ns"))


def stragglers(
    waited: pl.DataFrame,
    offsets: pl.DataFrame,
    exposed: pl.DataFrame | None = None,
    exposed_totals: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per (rank, step): `STRAGGLER_SCHEMA`.

    waited: `waits(...)` output. offsets: `clocks.clock_offsets`. exposed: intervals of exposed
    comm per rank and step on each rank's own clock (rank, step, start_ns, end_ns), e.g.
    `Report.exposed`; exposed_totals: (rank, step, exposed_comm_ns), e.g. from `Report.ranks`.
    """
    if waited.height == 0:
        return pl.DataFrame(schema=STRAGGLER_SCHEMA)
    waited = waited.with_columns(pl.col("step").fill_null(-1))
    caused = (
        waited.filter(pl.col("skew_ns") > 0)
        .group_by("group", "seq", "last_rank", "step")
        .agg(pl.col("wait_ns").sum().alias("caused"))
        .group_by(pl.col("last_rank").alias("rank"), "step")
        .agg(pl.col("caused").sum().alias("caused_wait_ns"), pl.len().alias("late_count"))
    )
    own = waited.group_by("rank", "step").agg(pl.col("wait_ns").sum())
    keys = pl.concat([own.select("rank", "step"), caused.select("rank", "step")]).unique()
    out = (
        keys.join(caused, on=["rank", "step"], how="left")
        .join(own, on=["rank", "step"], how="left")
        .with_columns(pl.col("caused_wait_ns", "late_count", "wait_ns").fill_null(0))
    )
    if exposed is not None and exposed.height:
        split = _exposed_wait(waited, offsets, exposed)
        out = out.join(split, on=["rank", "step"], how="full", coalesce=True)
        if exposed_totals is not None:
            tot = exposed_totals.select(
                pl.col("rank").cast(pl.Int64),
                pl.col("step").cast(pl.Int64).fill_null(-1),
                "exposed_comm_ns",
            )
            out = out.join(tot, on=["rank", "step"], how="full", coalesce=True)
    for col in ("exposed_comm_ns", "exposed_wait_ns"):
        if col not in out.columns:
            out = out.with_columns(pl.lit(None, pl.Int64).alias(col))
    out = out.with_columns(
        pl.col("caused_wait_ns", "late_count", "wait_ns").fill_null(0),
        (pl.col("exposed_comm_ns") - pl.col("exposed_wait_ns").fill_null(0)).alias(
            "exposed_transfer_ns"
        ),
        pl.when(pl.col("exposed_comm_ns").is_not_null())
        .then(pl.col("exposed_wait_ns").fill_null(0))
        .alias("exposed_wait_ns"),
        pl.when(pl.col("step") >= 0).then("step").alias("step"),
    )
    return out.sort("rank", "step", nulls_last=False).select(
        [pl.col(k).cast(v) for k, v in STRAGGLER_SCHEMA.items()]
    )


def _exposed_wait(
    waited: pl.DataFrame, offsets: pl.DataFrame, exposed: pl.DataFrame
) -> pl.DataFrame:
    """Σ |exposed ∩ wait intervals| per (rank, step), on each rank's own clock."""
    exp = exposed.select(
        pl.col("rank").cast(pl.Int64),
        pl.col("step").cast(pl.Int64).fill_null(-1),
        "start_ns",
        "end_ns",
    ).filter(pl.col("rank").is_not_null())
    w = (
        waited.filter(pl.col("wait_ns") > 0)
        .join(offsets.select("rank", "offset_ns"), on="rank", how="left")
        .select(
            "rank",
            (pl.col("arrival_ns") + pl.col("offset_ns")).alias("start_ns"),
            (pl.col("last_arrival_ns") + pl.col("offset_ns")).alias("end_ns"),
        )
    )
    keys = exp.select("rank", "step").unique().sort("rank", "step").with_row_index("gid")
    if keys.height == 0 or w.height == 0:
        return keys.select("rank", "step", pl.lit(0, pl.Int64).alias("exposed_wait_ns"))
    exp = exp.join(keys, on=["rank", "step"]).sort("gid", "start_ns")
    # a wait interval counts for every step of its rank; the exposed side keeps steps apart
    w = w.join(keys, on="rank")
    a = iv.union(
        iv.make(exp["gid"].to_numpy(), exp["start_ns"].to_numpy(), exp["end_ns"].to_numpy())
    )
    b = iv.union(iv.make(w["gid"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()))
    both = iv.intersection(a, b)
    per = iv.lengths_by_group(both, keys.height)
    return keys.with_columns(pl.Series("exposed_wait_ns", np.asarray(per, dtype=np.int64))).select(
        "rank", "step", "exposed_wait_ns"
    )


def job_stragglers(per_step: pl.DataFrame) -> pl.DataFrame:
    """Totals over the job per rank, sorted by caused_wait_ns (largest first), then rank."""
    cols = [c for c in STRAGGLER_SCHEMA if c not in ("rank", "step")]
    return (
        per_step.group_by("rank")
        .agg([pl.col(c).sum() for c in cols])
        .sort(["caused_wait_ns", "rank"], descending=[True, False])
    )
