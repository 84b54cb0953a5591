"""The MoE view's comm stages as `metrics` counts comm: its comm events (the same rows and
windows, every thread of a CPU-only rank), each under the MoE stage `moe.categorize` gave it,
so that `moe`'s comm stages add up to metrics' comm_ns on every trace by construction."""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis.comm import device_events, keyed_partition
from moetrace.analysis.prepared import NO_RANK, Prepared

COMM_STAGES = ("dispatch", "combine", "comm")
"""The MoE stages that are communication, in the order a moment two of them share is given."""


def comm_pieces(ev: pl.DataFrame, prep: Prepared, single_rank: bool) -> pl.DataFrame:
    """The comm stages of the MoE view as `metrics` counts comm: its comm events
    (comm.device_events, the same rows and windows), each under the stage and layer
    `categorize` gave it (a comm event whose stage is not a comm stage, such as gloo's worker
    thread on a CPU-only trace, is `comm`), cut so that a moment two stages share counts once
    (dispatch, then combine, then comm; lower layers first). Columns rank, step, layer,
    category, start, end (ns); per (rank, step) their lengths add up to metrics' comm_ns."""
    sel = device_events(prep, "comm").select("id", "gid", "ts", "end")
    labels = ev.select("id", "category", "layer")
    sel = sel.join(labels, on="id", how="left", maintain_order="left").with_columns(
        pl.when(pl.col("category").is_in(list(COMM_STAGES)))
        .then("category")
        .otherwise(pl.lit("comm"))
        .alias("category")
    )
    order = {c: i for i, c in enumerate(COMM_STAGES)}
    combos = (
        sel.select("category", "layer")
        .unique()
        .sort(
            pl.col("category").replace_strict(order, default=len(order)), "layer", nulls_last=True
        )
        .with_row_index("_k")
    )
    sel = sel.join(combos, on=["category", "layer"], how="left", nulls_equal=True)
    pieces, key = keyed_partition(
        prep, sel, sel["_k"].to_numpy().astype(np.int64), max(combos.height, 1)
    )
    windows = prep.windows.select("gid", "rank", "step")
    rank = pl.when(pl.col("rank") == NO_RANK).then(0 if single_rank else None).otherwise("rank")
    return (
        pl.DataFrame(
            {"gid": pieces.group, "_k": key, "start": pieces.start, "end": pieces.end},
            schema={"gid": pl.Int64, "_k": pl.UInt32, "start": pl.Int64, "end": pl.Int64},
        )
        .join(windows, on="gid", how="left")
        .join(combos, on="_k", how="left")
        .select(rank.cast(pl.Int64).alias("rank"), "step", "layer", "category", "start", "end")
    )


def comm_from_metrics(ev: pl.DataFrame, prep: Prepared) -> pl.DataFrame:
    """`ev` with `_comm` (metrics counts the event as comm, in any window: its time comes from
    `comm_pieces`) and the comm stages taken off the other events (a host `moe/dispatch`
    range's own time is packing: topk_permute; an inherited `comm` is other)."""
    is_comm = ev["id"].is_in(
        prep.ev.filter(pl.col("device") & (pl.col("kind") == "comm"))["id"].implode()
    )
    return ev.with_columns(
        is_comm.alias("_comm"),
        pl.when(~is_comm & (pl.col("category") == "comm"))
        .then(pl.lit("other"))
        .when(~is_comm & pl.col("category").is_in(["dispatch", "combine"]))
        .then(pl.lit("topk_permute"))
        .otherwise("category")
        .alias("category"),
    )
