"""Chrome JSON writer: object form, metadata first, µs with 3 decimals from exact integer ns.

Every line is built with Polars string expressions (no per-event Python). The file carries a
top-level `"moetrace"` object with the tracks table (unit, rank, sort_index), the (pid, tid)
lane of every track, the dependency edges and the trace's `meta`, so reading it back gives
the same frames exactly; the events themselves carry their `kind` (and flops/bytes) as extra
keys that other tools ignore.

Dependencies are also written as flow events so Perfetto draws arrows. Flow v2 (`bind_id` on
the slice itself) is exact but allows one in- and one out-edge per event, so an edge goes to
v2 when it is the first out-edge of its source and the first in-edge of its destination (the
edges then form chains sharing one bind_id); the rest of a fan-in/fan-out DAG is written as
v1 `s`/`f` pairs with `bp: "e"` at the source's and destination's start.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np
import polars as pl

from moetrace.trace.atomic import atomic_write
from moetrace.trace.formats.chrome.deep import call_deep
from moetrace.trace.formats.chrome.write_flows import (
    hex_ids,
    id_json,
    json_str,
    split_flow_edges,
    us_text,
    v1_flow_lines,
)
from moetrace.trace.model import Trace
from moetrace.trace.nesting import MAX_OVERFLOW_LANE, overflow_lane_name_expr, overflow_lanes

_BATCH = 200_000


def _float_json(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr.is_finite()).then(expr.cast(pl.String)).otherwise(pl.lit("null"))


def _opt(key: str, value: pl.Expr, present: pl.Expr) -> pl.Expr:
    return pl.when(present).then(pl.lit(f',"{key}":') + value).otherwise(pl.lit(""))


def _lanes(trace: Trace) -> tuple[pl.DataFrame, np.ndarray]:
    """Output (pid, tid) per (track, lane): unique across tracks, overflow lanes for any
    partially overlapping slices of one track. Returns the lanes table and each event's lane."""
    ev = trace.events
    lane, _ = overflow_lanes(
        ev["track"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy(), MAX_OVERFLOW_LANE
    )
    used = pl.DataFrame({"track": ev["track"], "lane": lane}).unique()
    base = trace.tracks.select("track", "pid", "tid", "sort_index").with_columns(
        pl.lit(0, pl.Int64).alias("lane")
    )
    extra = used.filter(pl.col("lane") > 0).join(
        trace.tracks.select("track", "pid", "tid", "sort_index"), on="track"
    )
    lanes = pl.concat([base, extra.select(base.columns)]).sort(
        "sort_index", "track", "lane", nulls_last=True
    )
    lanes = lanes.with_columns(
        pl.col("pid").fill_null("0"),
        pl.when(pl.col("lane") > 0)
        .then(overflow_lane_name_expr(pl.col("tid").fill_null(""), pl.col("lane")))
        .otherwise(pl.col("tid").fill_null(pl.col("pid").fill_null("0")))
        .alias("out_tid"),
    )
    # Tracks sharing (pid, tid) (e.g. ranks merged from files with equal pids) get a suffix.
    lanes = lanes.with_columns(pl.int_range(pl.len()).over(["pid", "out_tid"]).alias("dup"))
    lanes = lanes.with_columns(
        pl.when(pl.col("dup") > 0)
        .then(pl.concat_str([pl.col("out_tid"), pl.lit(" #"), pl.col("dup").cast(pl.String)]))
        .otherwise(pl.col("out_tid"))
        .alias("out_tid")
    )
    return lanes.drop("dup"), lane


def _stored(trace: Trace, lanes: pl.DataFrame) -> dict[str, Any]:
    ids = trace.events["id"]
    dense = bool(ids.len() == 0 or (ids.to_numpy() == np.arange(ids.len())).all())
    tracks = {
        c: trace.tracks[c].cast(pl.String if c == "unit" else trace.tracks[c].dtype).to_list()
        for c in trace.tracks.columns
    }
    return {
        "version": 1,
        "meta": trace.meta,
        "tracks": tracks,
        "lanes": {
            "pid": lanes["pid"].to_list(),
            "tid": lanes["out_tid"].to_list(),
            "track": lanes["track"].to_list(),
        },
        "event_ids": None if dense else ids.to_list(),
        "deps": {
            "src": trace.deps["src"].to_list(),
            "dst": trace.deps["dst"].to_list(),
            "kind": trace.deps["kind"].cast(pl.String).to_list(),
        },
    }


def _metadata_lines(trace: Trace, lanes: pl.DataFrame) -> list[str]:
    tr = lanes.join(
        trace.tracks.select("track", "process_name", "thread_name", "rank"), on="track", how="left"
    )
    procs = tr.group_by("pid", maintain_order=True).agg(
        pl.col("process_name").drop_nulls().first(),
        pl.col("sort_index").min(),
        pl.col("rank").drop_nulls().first(),
    )
    out: list[str] = []
    p_json = id_json(pl.col("pid"))
    for row in procs.select(
        p_json.alias("p"),
        json_str(pl.col("process_name")).alias("n"),
        pl.col("sort_index"),
        pl.col("rank"),
    ).iter_rows():
        p, n, sort, rank = row
        if n != "null":
            out.append(
                f'{{"ph":"M","name":"process_name","pid":{p},"tid":0,"args":{{"name":{n}}}}}'
            )
        if rank is not None:
            out.append(
                f'{{"ph":"M","name":"process_labels","pid":{p},"tid":0,'
                f'"args":{{"labels":"rank {rank}"}}}}'
            )
        if sort is not None:
            out.append(
                f'{{"ph":"M","name":"process_sort_index","pid":{p},"tid":0,"args":{{"sort_index":{sort}}}}}'
            )
    names = (
        pl.when(pl.col("lane") > 0)
        .then(
            overflow_lane_name_expr(
                pl.coalesce(pl.col("thread_name"), pl.col("tid")), pl.col("lane")
            )
        )
        .otherwise(pl.col("thread_name"))
    )
    for p, t, n, sort in tr.select(
        p_json.alias("p"),
        id_json(pl.col("out_tid")).alias("t"),
        json_str(names).alias("n"),
        pl.col("sort_index"),
    ).iter_rows():
        if n != "null":
            out.append(
                f'{{"ph":"M","name":"thread_name","pid":{p},"tid":{t},"args":{{"name":{n}}}}}'
            )
        if sort is not None:
            out.append(
                f'{{"ph":"M","name":"thread_sort_index","pid":{p},"tid":{t},"args":{{"sort_index":{sort}}}}}'
            )
    return out


def event_lines(trace: Trace) -> tuple[list[str], pl.DataFrame, dict[str, Any]]:
    """(metadata lines, one-column frame of event JSON lines in id order, stored tables)."""
    lanes, lane = _lanes(trace)
    stored = _stored(trace, lanes)
    ev = trace.events.with_columns(
        pl.Series("lane", lane, dtype=pl.Int64), pl.int_range(pl.len()).alias("row")
    )
    ev = ev.join(
        lanes.select("track", "lane", "pid", "out_tid"),
        on=["track", "lane"],
        how="left",
        maintain_order="left",
    )
    bind, v1 = split_flow_edges(trace, ev)
    ev = ev.join(bind, on="id", how="left", maintain_order="left")
    line = pl.concat_str(
        [
            pl.lit('{"ph":"X","name":'),
            json_str(pl.col("name").fill_null("")),
            _opt("cat", json_str(pl.col("cat")), pl.col("cat").is_not_null()),
            pl.lit(',"pid":'),
            id_json(pl.col("pid")),
            pl.lit(',"tid":'),
            id_json(pl.col("out_tid")),
            pl.lit(',"ts":'),
            us_text(pl.col("ts")),
            pl.lit(',"dur":'),
            us_text(pl.col("dur")),
            pl.lit(',"kind":"'),
            pl.col("kind").cast(pl.String),
            pl.lit('"'),
            _opt("flops", _float_json(pl.col("flops")), pl.col("flops").is_not_null()),
            _opt("bytes", _float_json(pl.col("bytes")), pl.col("bytes").is_not_null()),
            _opt(
                "bind_id",
                pl.concat_str(
                    [
                        pl.lit('"0x'),
                        pl.col("bind").map_batches(hex_ids, return_dtype=pl.String),
                        pl.lit('"'),
                    ]
                ),
                pl.col("bind").is_not_null(),
            ),
            _opt("flow_in", pl.lit("true"), pl.col("fin").fill_null(False)),
            _opt("flow_out", pl.lit("true"), pl.col("fout").fill_null(False)),
            _opt("args", pl.col("args"), pl.col("args").is_not_null()),
            pl.lit("}"),
        ]
    )
    events = ev.select(line.alias("line"))
    flows = v1_flow_lines(v1, ev)
    counters = _counter_lines(trace, lanes)
    return _metadata_lines(trace, lanes), pl.concat([events, flows, counters]), stored


def _counter_lines(trace: Trace, lanes: pl.DataFrame) -> pl.DataFrame:
    c = trace.counters.join(
        lanes.filter(pl.col("lane") == 0).select("track", "pid", "out_tid"),
        on="track",
        how="left",
        maintain_order="left",
    )
    line = pl.concat_str(
        [
            pl.lit('{"ph":"C","name":'),
            json_str(pl.col("name").fill_null("")),
            pl.lit(',"pid":'),
            id_json(pl.col("pid").fill_null("0")),
            pl.lit(',"tid":'),
            id_json(pl.col("out_tid").fill_null("0")),
            pl.lit(',"ts":'),
            us_text(pl.col("ts")),
            pl.lit(',"args":{"value":'),
            _float_json(pl.col("value")),
            pl.lit("}}"),
        ]
    )
    return c.select(line.alias("line"))


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, pl.DataFrame):
        return obj.to_dicts()
    return str(obj)


def _top_level(trace: Trace, stored: dict[str, Any]) -> bytes:
    """The object's keys before traceEvents: the source's own top-level keys (so Kineto
    consumers still find distributedInfo etc.), then moetrace's tables."""
    top = trace.meta.get("top") if isinstance(trace.meta.get("top"), dict) else {}
    head = {k: v for k, v in (top or {}).items() if k not in ("traceEvents", "moetrace")}
    head["moetrace"] = stored
    encoded = call_deep(lambda: msgspec.json.encode(head, enc_hook=_enc_hook))  # deep meta
    return encoded[:-1]  # without the closing brace


def write_chrome(trace: Trace, out: str | Path | IO[bytes], *, force: bool = True) -> None:
    """Write `trace` as Chrome JSON to a path (gzip when it ends in .gz) or a binary stream.

    A path is written atomically (trace.atomic): complete or not at all; an existing file
    is replaced only with `force`."""
    meta_lines, events, stored = event_lines(trace)
    if isinstance(out, str | Path):
        path = Path(out)
        with atomic_write(path, force=force) as raw:
            if path.name.endswith(".gz"):
                # mtime=0 and no file name in the header: same trace, same bytes.
                with gzip.GzipFile(
                    filename="", fileobj=raw, mode="wb", compresslevel=5, mtime=0
                ) as fh:
                    _emit(fh, trace, meta_lines, events, stored)  # type: ignore[arg-type]
            else:
                _emit(raw, trace, meta_lines, events, stored)
    else:
        _emit(out, trace, meta_lines, events, stored)


def _emit(
    fh: IO[bytes], trace: Trace, meta_lines: list[str], events: pl.DataFrame, stored: dict[str, Any]
) -> None:
    head = _top_level(trace, stored)
    fh.write(head + (b',\n"traceEvents":[\n' if head != b"{" else b'"traceEvents":[\n'))
    first = True
    if meta_lines:
        fh.write(",\n".join(meta_lines).encode())
        first = False
    for start in range(0, events.height, _BATCH):
        chunk = events["line"].slice(start, _BATCH).str.join(",\n").item()
        fh.write(("" if first else ",\n").encode() + chunk.encode())
        first = False
    fh.write(b"\n]}\n")
