"""Bandwidth a trace's transfers achieved, measured from the trace alone (bytes/s).

For traces whose transfer events carry `bytes` and `src`/`dst` args (the executor's
`dispatch_tx`/`dispatch_rx`, `combine_tx`/`combine_rx`): what a benchmark such as DeepEP's
reports, so a simulated run can be compared with measured all-to-all figures.
"""

from __future__ import annotations

import polars as pl

from moetrace.trace.model import Trace


def transfer_bandwidth(trace: Trace, what: str) -> float:
    """Mean over ranks of remote bytes a rank sends in `what` (dispatch/combine) divided by the
    span of its own transfers (first TX start to last RX end on that rank), in bytes/s."""
    ev = trace.events_with_tracks().filter(pl.col("name").is_in([f"{what}_tx", f"{what}_rx"]))
    coords = ev.select(
        "rank",
        "name",
        "ts",
        "dur",
        "bytes",
        pl.col("args").str.json_path_match("$.src").cast(pl.Int64).alias("src"),
        pl.col("args").str.json_path_match("$.dst").cast(pl.Int64).alias("dst"),
    ).filter(pl.col("src") != pl.col("dst"))
    per_rank = coords.group_by("rank").agg(
        pl.col("bytes").filter(pl.col("name") == f"{what}_tx").sum().alias("sent"),
        pl.col("ts").min().alias("lo"),
        (pl.col("ts") + pl.col("dur")).max().alias("hi"),
    )
    rate = per_rank.select((pl.col("sent") / ((pl.col("hi") - pl.col("lo")) * 1e-9)).mean())
    return float(rate.item())
