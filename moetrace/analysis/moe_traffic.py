"""Token traffic of a MoE layer: bytes each rank sent to each other rank per step and stage,
from all-to-all split sizes (rows x bytes per row) or the executor's transfers, and what each
rank received (the imbalance the MoE view reports)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from moetrace.analysis.collectives import collective_ops, executor_transfers
from moetrace.trace.model import Trace

TRAFFIC_SCHEMA: dict[str, pl.DataType] = {
    "step": pl.Int64(),
    "category": pl.String(),  # dispatch, combine, ... (what the all-to-all was for)
    "src": pl.Int64(),
    "dst": pl.Int64(),
    "bytes": pl.Float64(),
    "rows": pl.Float64(),  # rows (token slots) of the all-to-all splits; null for transfers
}


def traffic(trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
    """Bytes (and rows, for all-to-all splits) sent from src to dst per step and category, from
    all-to-all split sizes (rows x bytes per row) or the executor's transfers."""
    cats = ev.select(pl.col("id").cast(pl.Int64).alias("call_event_id"), "category")
    ops = collective_ops(trace, ev).filter(
        (pl.col("collective") == "all_to_all") & (pl.col("in_splits").list.len() > 0)
    )
    frames = []
    if ops.height:
        # the category of the host call that issued it (gloo), else of the op itself (kernels)
        ops = ops.with_columns(pl.coalesce("call_event_id", "event_id").alias("call_event_id"))
        ops = ops.join(cats, on="call_event_id", how="left")
        pairs = (
            ops.select(
                "step",
                pl.col("category").fill_null("other"),
                pl.col("rank").alias("src"),
                "row_bytes",
                "group_ranks",
                pl.col("in_splits").alias("rows"),
                pl.int_ranges(pl.col("in_splits").list.len()).alias("peer"),
            )
            .explode("rows", "peer")
            .select(
                "step",
                "category",
                "src",
                pl.when(pl.col("group_ranks").list.len() > pl.col("peer"))
                .then(pl.col("group_ranks").list.get(pl.col("peer"), null_on_oob=True))
                .otherwise(pl.col("peer"))
                .alias("dst"),
                (pl.col("rows") * pl.col("row_bytes")).alias("bytes"),
                pl.col("rows").cast(pl.Float64),
            )
        )
        frames.append(pairs)
    tx = executor_transfers(ev).filter(pl.col("is_tx"))
    if tx.height:
        frames.append(
            tx.join(cats.rename({"call_event_id": "event_id"}), on="event_id", how="left").select(
                "step", "category", "src", "dst", "bytes", pl.lit(None, pl.Float64).alias("rows")
            )
        )
    if not frames:
        return pl.DataFrame(schema=TRAFFIC_SCHEMA)
    return (
        pl.concat(frames, how="diagonal_relaxed")
        .group_by("step", "category", "src", "dst")
        .agg(
            pl.col("bytes").sum(),
            pl.when(pl.col("rows").is_not_null().any()).then(pl.col("rows").sum()),
        )
        .sort("step", "category", "src", "dst", nulls_last=False)
        .select([pl.col(k).cast(v) for k, v in TRAFFIC_SCHEMA.items()])
    )


def received(pairs: pl.DataFrame, ranks: Sequence[int]) -> pl.DataFrame:
    """Per (step, category, rank): bytes received (ranks that received nothing get 0) and the
    token imbalance of that step and category = max / mean of received bytes over ranks."""
    if pairs.height == 0:
        return pl.DataFrame(
            schema={
                "step": pl.Int64,
                "category": pl.String,
                "rank": pl.Int64,
                "bytes": pl.Float64,
                "imbalance": pl.Float64,
            }
        )
    got = pairs.group_by("step", "category", pl.col("dst").alias("rank")).agg(pl.col("bytes").sum())
    grid = (
        pairs.select("step", "category")
        .unique()
        .join(pl.DataFrame({"rank": list(ranks)}, schema={"rank": pl.Int64}), how="cross")
    )
    full = grid.join(
        got, on=["step", "category", "rank"], how="left", nulls_equal=True
    ).with_columns(pl.col("bytes").fill_null(0.0))
    return full.with_columns(
        (pl.col("bytes").max() / pl.col("bytes").mean()).over("step", "category").alias("imbalance")
    ).sort("step", "category", "rank", nulls_last=False)
