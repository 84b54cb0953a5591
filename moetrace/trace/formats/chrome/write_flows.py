"""Dependencies as Chrome flow events, so Perfetto draws arrows.

Flow v2 (`bind_id`, `flow_in`, `flow_out` on the slice itself) binds exactly but allows one
in- and one out-edge per event: an edge is written as v2 when it is its source's first
out-edge and its destination's first in-edge (those edges form chains sharing a bind_id,
the chain's first event id, found by pointer doubling). The other edges of a fan-in/fan-out
DAG become v1 `s`/`f` pairs with `bp: "e"` at the source's and destination's start.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.trace.model import Trace


def json_str(expr: pl.Expr) -> pl.Expr:
    """JSON string literal of a String expression (escaped by Polars' serializer); null -> null."""
    encoded = pl.struct(expr.alias("v")).struct.json_encode()
    return encoded.str.slice(5, encoded.str.len_chars() - 6)


CANONICAL_INT = r"^(0|-?[1-9][0-9]*)$"
"""Text that is an integer as a JSON reader prints it back (no leading zeros, no "+", no "-0")."""


def id_json(expr: pl.Expr) -> pl.Expr:
    """pid/tid text -> a JSON integer when it is one as written (any size: the reader keeps
    big ones as text), else a JSON string: "07", "00", "-07" stay strings, so they read back
    as themselves and the file stays valid JSON."""
    return pl.when(expr.str.contains(CANONICAL_INT)).then(expr).otherwise(json_str(expr))


def us_text(expr: pl.Expr) -> pl.Expr:
    """Integer ns -> microseconds text with exactly 3 decimals (exact, no float)."""
    mag = expr.abs()
    sign = pl.when(expr < 0).then(pl.lit("-")).otherwise(pl.lit(""))
    return pl.concat_str(
        [
            sign,
            (mag // 1000).cast(pl.String),
            pl.lit("."),
            (mag % 1000).cast(pl.String).str.zfill(3),
        ]
    )


def split_flow_edges(trace: Trace, ev: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split deps into v2 chain edges and v1 edges; return (per-event bind fields, v1 edges)."""
    deps = trace.deps.with_columns(pl.int_range(pl.len()).alias("edge"))
    order = ev.select(pl.col("id"), pl.col("ts"), pl.col("row"))
    d = deps.join(
        order.rename({"id": "src", "ts": "s_ts", "row": "s_row"}), on="src", how="left"
    ).join(order.rename({"id": "dst", "ts": "d_ts", "row": "d_row"}), on="dst", how="left")
    first_out = pl.col("edge") == pl.col("edge").min().over("src")
    first_in = pl.col("edge") == pl.col("edge").min().over("dst")
    forward = (pl.col("s_ts") < pl.col("d_ts")) | (
        (pl.col("s_ts") == pl.col("d_ts")) & (pl.col("s_row") < pl.col("d_row"))
    )
    d = d.with_columns(
        (first_out & first_in & forward & (pl.col("src") != pl.col("dst")))
        .fill_null(False)
        .alias("v2")
    )
    chain = d.filter(pl.col("v2"))
    # Chain id = the first event of the path: follow predecessor pointers by doubling.
    if chain.height:
        ids = ev["id"].to_numpy().astype(np.int64)
        pos = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
        pos[ids] = np.arange(len(ids))
        pred = np.arange(len(ids))
        pred[pos[chain["dst"].to_numpy().astype(np.int64)]] = pos[
            chain["src"].to_numpy().astype(np.int64)
        ]
        for _ in range(64):
            nxt = pred[pred]
            if np.array_equal(nxt, pred):
                break
            pred = nxt
        head = ids[pred]
        has_in = np.zeros(len(ids), dtype=bool)
        has_out = np.zeros(len(ids), dtype=bool)
        has_in[pos[chain["dst"].to_numpy().astype(np.int64)]] = True
        has_out[pos[chain["src"].to_numpy().astype(np.int64)]] = True
        bind = pl.DataFrame({"id": ev["id"], "bind": head, "fin": has_in, "fout": has_out}).filter(
            pl.col("fin") | pl.col("fout")
        )
    else:
        bind = pl.DataFrame(
            schema={"id": pl.UInt32, "bind": pl.Int64, "fin": pl.Boolean, "fout": pl.Boolean}
        )
    return bind, d.filter(~pl.col("v2"))


def hex_ids(s: pl.Series) -> pl.Series:
    return pl.Series(
        [format(int(v), "x") if v is not None else None for v in s.to_list()], dtype=pl.String
    )


def v1_flow_lines(v1: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """Flow v1 `s`/`f` lines (one pair per edge) for the deps flow v2 cannot carry."""
    if v1.height == 0:
        return pl.DataFrame(schema={"line": pl.String})
    pos = ev.select("id", "pid", "out_tid", "ts")
    d = v1.join(
        pos.rename({"id": "src", "pid": "sp", "out_tid": "st", "ts": "sts"}), on="src", how="left"
    ).join(
        pos.rename({"id": "dst", "pid": "dp", "out_tid": "dt", "ts": "dts"}), on="dst", how="left"
    )
    d = d.filter(pl.col("sts").is_not_null() & pl.col("dts").is_not_null())
    common = [
        pl.lit(',"cat":"moetrace.dep","name":"'),
        pl.col("kind").cast(pl.String),
        pl.lit('","id":'),
        pl.col("edge").cast(pl.String),
    ]

    def flow_line(ph: str, pid: str, tid: str, ts: str) -> pl.Expr:
        """One v1 flow point (start `s` or end `f`), bound to the enclosing slice (bp e)."""
        return pl.concat_str(
            [
                pl.lit(f'{{"ph":"{ph}"'),
                *common,
                pl.lit(',"pid":'),
                id_json(pl.col(pid)),
                pl.lit(',"tid":'),
                id_json(pl.col(tid)),
                pl.lit(',"ts":'),
                us_text(pl.col(ts)),
                pl.lit(',"bp":"e"}'),
            ]
        )

    s = flow_line("s", "sp", "st", "sts")
    f = flow_line("f", "dp", "dt", "dts")
    return pl.concat([d.select(s.alias("line")), d.select(f.alias("line"))])
