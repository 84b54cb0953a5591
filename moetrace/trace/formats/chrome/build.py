"""Chrome semantics on decoded columns: slices, tracks, overflow lanes, flows and counters.

`build` turns typed event columns into the parts of a `Trace` before any flavor meaning:
X / matched B-E / b-e async slices and instants with ids in file order, one track per
(pid, tid) (plus overflow lanes for partially overlapping slices, as Perfetto does), flow
edges bound to slices by the v1 (s/t/f, `bp`) and v2 (`bind_id`) rules, and counters.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import polars as pl

from moetrace.trace.flavors.built import Built, RestoreTracks
from moetrace.trace.formats.chrome.phases import bind_flows, match_begin_end
from moetrace.trace.formats.chrome.values import decode_args
from moetrace.trace.nesting import MAX_OVERFLOW_LANE, overflow_lane_name_expr, overflow_lanes

_SLICE_COLS = [
    "idx",
    "pid",
    "tid",
    "name",
    "cat",
    "ts",
    "dur",
    "args",
    "bind_id",
    "flow_in",
    "flow_out",
    "kind_ext",
    "flops",
    "bytes",
    "ph",
]


def _tkey(pid: str = "pid", tid: str = "tid") -> pl.Expr:
    return pl.concat_str([pl.col(pid), pl.col(tid)], separator="\x00")


def _merge_args(begin: str | None, end: str | None) -> str | None:
    """B args updated by E args (Chrome merges them); kept as JSON text."""
    if not end or end.strip() in ("{}", ""):
        return begin
    try:
        a = msgspec.json.decode(begin) if begin else {}
        b = msgspec.json.decode(end)
    except msgspec.DecodeError:
        return begin
    if isinstance(a, dict) and isinstance(b, dict):
        return msgspec.json.encode({**a, **b}).decode()
    return begin


def _paired(
    frame: pl.DataFrame,
    begin: str,
    end: str,
    key: pl.Expr,
    what: str,
    warnings: list[str],
    trace_end: int,
) -> pl.DataFrame:
    rows = frame.filter(pl.col("ph").is_in([begin, end])).with_columns(
        key.alias("mkey"), (pl.col("ph") == begin).alias("is_begin")
    )
    if rows.height == 0:
        return frame.select(_SLICE_COLS).clear()
    pairs, lone_end, lone_begin = match_begin_end(rows, "mkey")
    if lone_end.height:
        first = int(lone_end["idx"].min())  # type: ignore[arg-type]
        warnings.append(
            f"{lone_end.height} unmatched '{end}' event(s) with no open '{begin}' on {what}, "
            f"skipped (first: event #{first})"
        )
    if lone_begin.height:
        first = int(lone_begin["idx"].min())  # type: ignore[arg-type]
        warnings.append(
            f"{lone_begin.height} unmatched '{begin}' event(s) never ended on {what}: "
            f"closed at the end of the trace (first: event #{first})"
        )
    end_args = rows.filter(~pl.col("is_begin")).select(
        pl.col("idx").alias("end_idx"), pl.col("args").alias("end_args")
    )
    pairs = pairs.join(end_args, on="end_idx", how="left")
    if pairs["end_args"].is_not_null().any():
        merged = [
            _merge_args(a, b)
            for a, b in zip(pairs["args"].to_list(), pairs["end_args"].to_list(), strict=True)
        ]
        pairs = pairs.with_columns(pl.Series("args", merged, dtype=pl.String))
    pairs = pairs.with_columns((pl.col("end_ts") - pl.col("ts")).alias("dur"))
    lone = lone_begin.with_columns(
        pl.max_horizontal(pl.lit(trace_end) - pl.col("ts"), pl.lit(0)).alias("dur")
    )
    out = pl.concat([pairs.select(_SLICE_COLS), lone.select(_SLICE_COLS)])
    return out.with_columns(pl.col("ph").replace({begin: "X" if begin == "B" else "b"}))


def _take_slices(holder: list[pl.DataFrame], exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """X and instant rows (file order kept), one column at a time: each source column is
    dropped as soon as its filtered copy exists, so memory holds the frame plus one column,
    not two frames (~150 MB less at 1M events). `holder` gives up the frame."""
    frame = holder.pop().select(_SLICE_COLS)  # same buffers; the other columns go now
    mask = frame["ph"].is_in(["X", "i", "I", "R", "n"])
    keep_all = bool(mask.all())
    out: dict[str, pl.Series] = {}
    for c in _SLICE_COLS:  # "ph" last: the dur and tid expressions read it (and "cat")
        column = frame.select(exprs[c].alias(c)).to_series()
        out[c] = column if keep_all else column.filter(mask)
        del column
        frame = frame.drop(c)
    return pl.DataFrame(list(out.values()))


def collect_slices(frame: pl.DataFrame | list[pl.DataFrame], warnings: list[str]) -> pl.DataFrame:
    """Every slice and instant, one row each, in file order of the opening event.

    Given the frame inside a one-item list, takes ownership and drops its columns as it goes
    (the common case without B/E or b/e pairs)."""
    holder = frame if isinstance(frame, list) else [frame]
    frame = holder[0]
    ph = pl.col("ph")
    # Streaming: the end of each event is summed and maxed per morsel, not as three
    # 1M-row temporaries next to the decoded frame (the load's high-water, ~16 MB).
    trace_end = (
        frame.lazy()
        .select(
            pl.when(ph.is_in(["X", "B", "E", "b", "e", "i", "I", "R", "n"]))
            .then(pl.col("ts") + pl.col("dur").fill_null(0))
            .max()
        )
        .collect(engine="streaming")
        .item()
    )
    trace_end = int(trace_end or 0)
    # X and instants in one filter: file order is kept, no sort needed.
    # A when/then makes a new 1M-row column even where it changes nothing (16-byte views
    # for tid): only when some row needs it (instants' dur is 0; 'n' rows get async tids).
    exprs = {c: pl.col(c) for c in _SLICE_COLS}
    if not bool((frame["ph"] == "X").all()):
        exprs["dur"] = pl.when(ph == "X").then(pl.col("dur")).otherwise(pl.lit(0, pl.Int64))
    if bool((frame["ph"] == "n").any()):
        exprs["tid"] = (
            pl.when(ph == "n")
            .then(pl.lit("async:") + pl.col("cat").fill_null(""))
            .otherwise(pl.col("tid"))
        )
    if not bool(frame["ph"].is_in(["B", "E", "b", "e"]).any()):
        del frame  # holder keeps the only reference, for _take_slices to release
        return _take_slices(holder, exprs)
    out = frame.filter(ph.is_in(["X", "i", "I", "R", "n"])).select(
        [e.alias(c) for c, e in exprs.items()]
    )
    be = _paired(frame, "B", "E", _tkey(), "their thread", warnings, trace_end)
    async_key = pl.concat_str(
        [
            pl.col("pid"),
            pl.col("cat").fill_null(""),
            pl.coalesce(pl.col("id"), pl.col("id2")).fill_null(""),
        ],
        separator="\x00",
    )
    asy = _paired(frame, "b", "e", async_key, "their async id", warnings, trace_end)
    asy = asy.with_columns((pl.lit("async:") + pl.col("cat").fill_null("")).alias("tid"))
    return pl.concat([out, be, asy], how="vertical_relaxed").sort("idx")


def _metadata(meta_rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """M events -> per-pid (process_name, labels, process_sort) and per-(pid, tid) names/sorts."""

    procs: dict[str, dict[str, Any]] = {}
    threads: dict[tuple[str, str], dict[str, Any]] = {}
    rows = meta_rows.select("name", "pid", "tid", "args").rows()
    decoded = decode_args([r[3] for r in rows])
    for (name, pid, tid, _), a in zip(rows, decoded, strict=True):
        if name == "process_name":
            procs.setdefault(pid, {})["process_name"] = _text(a.get("name"))
        elif name == "process_labels":
            procs.setdefault(pid, {})["labels"] = _text(a.get("labels"))
        elif name == "process_sort_index":
            procs.setdefault(pid, {})["psort"] = _int(a.get("sort_index"))
        elif name == "thread_name":
            threads.setdefault((pid, tid), {})["thread_name"] = _text(a.get("name"))
        elif name == "thread_sort_index":
            threads.setdefault((pid, tid), {})["tsort"] = _int(a.get("sort_index"))
    p = pl.DataFrame(
        {
            "pid": list(procs),
            "process_name": [v.get("process_name") for v in procs.values()],
            "labels": [v.get("labels") for v in procs.values()],
            "psort": [v.get("psort") for v in procs.values()],
        },
        schema={
            "pid": pl.String,
            "process_name": pl.String,
            "labels": pl.String,
            "psort": pl.Int64,
        },
    )
    t = pl.DataFrame(
        {
            "pid": [k[0] for k in threads],
            "tid": [k[1] for k in threads],
            "thread_name": [v.get("thread_name") for v in threads.values()],
            "tsort": [v.get("tsort") for v in threads.values()],
        },
        schema={"pid": pl.String, "tid": pl.String, "thread_name": pl.String, "tsort": pl.Int64},
    )
    return p, t


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and -(2**31) <= int(v) < 2**31 else None
    except (TypeError, ValueError):
        return None


def _numeric_sort(col: str) -> pl.Expr:
    return pl.col(col).cast(pl.Int64, strict=False)


def build(
    holder: list[pl.DataFrame],
    meta_rows: pl.DataFrame,
    top: dict[str, Any],
    warnings: list[str],
    *,
    restore: RestoreTracks | None = None,
) -> Built:
    """Chrome semantics: slices with ids, tracks with overflow lanes, bound flows, counters.

    `holder` holds the decoded event frame; it is emptied once slices, counters and flow
    points are taken from it, so its memory goes before the tracks are laid out. `restore`
    (the moetrace flavor's) rebuilds the tracks from the table a moetrace file stores in its
    top-level `moetrace` key instead of laying them out."""
    frame = holder.pop()
    counters = _counter_rows(frame, warnings)
    points = frame.filter(pl.col("ph").is_in(["s", "t", "f"]))
    holder.append(frame)
    del frame
    slices = collect_slices(holder, warnings)  # empties holder: the frame goes column-wise
    holder.clear()
    slices.insert_column(  # in place (see the end of this function)
        slices.width, pl.int_range(slices.height, dtype=pl.UInt32, eager=True).alias("id")
    )
    stored = top.get("moetrace") if restore and isinstance(top.get("moetrace"), dict) else None
    if restore is not None and stored and isinstance(stored.get("tracks"), dict):
        restored = restore(slices, counters, stored, warnings)
        if restored is not None:
            return restored
    # Lay out tracks: one per (pid, tid), overflow lanes for partially overlapping slices.
    # Threads are numbered from dictionary codes of pid and tid (no 1M-row string keys,
    # concat or join); only the small per-thread table is joined to the metadata.
    base, c_base, base_keys, n_threads = _thread_codes(slices, counters)
    # pid, tid and ph are in `base` now and read by nobody after (the flow points keep their
    # own): dropped before the lanes and the flow binding, the load's memory peak (~50 MB of
    # string views at 1M events). In place: a drop() copies many-chunk columns.
    for column in ("pid", "tid", "ph"):
        slices.drop_in_place(column)
    # ts/dur as Series: the lanes read them a block at a time (no whole-column numpy copies).
    lane, depth = overflow_lanes(base, slices["ts"], slices["dur"], MAX_OVERFLOW_LANE)
    n_moved = int((lane > 0).sum())
    if n_moved:
        warnings.append(
            f"{n_moved} slice(s) overlap an earlier slice on their thread without nesting: "
            f"moved to overflow tracks (as Perfetto does)"
        )
    width = int(max(lane.max() if len(lane) else 0, 0)) + 1
    # (thread, lane) code of every slice, in place (each 1M-row temporary is 8 MB).
    thread_lane = base * width
    thread_lane += lane
    del base, lane
    seen = np.zeros(n_threads * width, dtype=bool)  # the (thread, lane) pairs in use
    seen[thread_lane] = True
    seen[c_base * width] = True
    used_codes = np.flatnonzero(seen)
    used = pl.DataFrame({"base": used_codes // width, "lane": used_codes % width})
    keys = used.join(base_keys, on="base", how="left")
    procs, threads = _metadata(meta_rows)
    tracks = keys.join(procs, on="pid", how="left").join(threads, on=["pid", "tid"], how="left")
    tracks = tracks.with_columns(
        pl.when(pl.col("lane") > 0)
        .then(
            overflow_lane_name_expr(
                pl.coalesce(pl.col("thread_name"), pl.col("tid")), pl.col("lane")
            )
        )
        .when(pl.col("tid").str.starts_with("async:"))
        .then(pl.coalesce(pl.col("thread_name"), pl.col("tid")))
        .otherwise(pl.col("thread_name"))
        .alias("thread_name")
    )
    tracks = tracks.sort(
        [
            pl.col("psort").fill_null(2**40),
            _numeric_sort("pid"),
            "pid",
            pl.col("tsort").fill_null(2**40),
            _numeric_sort("tid"),
            "tid",
            "lane",
        ],
        nulls_last=True,
    ).with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("track"))
    tracks = tracks.with_columns(pl.col("track").cast(pl.Int32).alias("sort_index"))
    # (base, lane) -> track id through a small lookup table.
    table = np.zeros(n_threads * width, dtype=np.uint32)
    codes = tracks["base"].to_numpy() * width + tracks["lane"].to_numpy()
    table[codes] = tracks["track"].to_numpy()
    # In place: an eager with_columns copies the many-chunk columns (~100 MB at 1M events).
    slices.insert_column(slices.width, pl.Series("depth", depth, dtype=pl.UInt16))
    track = pl.Series("track", table[thread_lane], dtype=pl.UInt32)
    del thread_lane
    slices.insert_column(slices.width, track)
    counters = counters.with_columns(pl.Series("track", table[c_base * width], dtype=pl.UInt32))
    tracks = tracks.drop("base")
    flows = bind_flows(points, slices, tracks)
    return Built(slices, tracks, flows, counters.select("track", "name", "ts", "value"))


def _thread_codes(
    slices: pl.DataFrame, counters: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, pl.DataFrame, int]:
    """Dense thread numbers (0..n-1) per slice and per counter row, one per distinct
    (pid, tid), and the (pid, tid, base) table of the threads. Built from the Categorical
    codes of pid and tid (a hash of few distinct values each), combined into one int64 and
    made dense with a presence table, or a sort when the code space is too large."""
    n = slices.height
    pids = pl.concat([slices["pid"], counters["pid"]], rechunk=False)
    tids = pl.concat([slices["tid"], counters["tid"]], rechunk=False)
    if len(pids) == 0:
        keys = pl.DataFrame(schema={"pid": pl.String, "tid": pl.String, "base": pl.Int64})
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, keys, 1
    # In place, from 4-byte codes: each 1M-row int64 temporary is 8 MB, near the load's peak.
    t = tids.cast(pl.Categorical).to_physical().to_numpy()
    pair = pids.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    pair *= int(t.max()) + 1
    pair += t
    del t
    span = int(pair.max()) + 1
    if span <= 4 * len(pair) + 4096:
        seen = np.zeros(span, dtype=bool)
        seen[pair] = True
        code = (np.cumsum(seen) - 1)[pair]
    else:
        code = np.unique(pair, return_inverse=True)[1].reshape(-1)
    del pair
    n_threads = int(code.max()) + 1
    rep = np.empty(n_threads, dtype=np.int64)
    rep[code] = np.arange(len(code))  # any row of a thread names it
    keys = pl.DataFrame(
        {
            "pid": pids.gather(rep),
            "tid": tids.gather(rep),
            "base": np.arange(n_threads, dtype=np.int64),
        }
    )
    return code[:n], code[n:], keys, n_threads


def _counter_rows(frame: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """C events: one sample per numeric arg; series name `name` ("<name> <key>" when the key
    is not `value` and there are several keys, "<name> id: <id> ..." with an id)."""

    c = frame.filter(pl.col("ph") == "C").select("idx", "pid", "tid", "name", "ts", "args", "id")
    out: dict[str, list[Any]] = {"pid": [], "tid": [], "name": [], "ts": [], "value": []}
    bad = 0
    first_bad = -1
    for (idx, pid, tid, name, ts, _a, cid), args in zip(
        c.rows(), decode_args(c["args"].to_list()), strict=True
    ):
        prefix = name or ""
        if cid is not None:
            prefix = f"{prefix} id: {cid}"
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                bad += 1
                first_bad = idx if first_bad < 0 else first_bad
                continue
            series = (
                prefix
                if (key == "value" or (len(args) == 1 and key == name))
                else f"{prefix} {key}"
            )
            out["pid"].append(pid)
            out["tid"].append(tid)
            out["name"].append(series)
            out["ts"].append(ts)
            out["value"].append(float(value))
    if bad:
        warnings.append(f"{bad} non-numeric counter value(s) skipped (first: event #{first_bad})")
    return pl.DataFrame(
        out,
        schema={
            "pid": pl.String,
            "tid": pl.String,
            "name": pl.String,
            "ts": pl.Int64,
            "value": pl.Float64,
        },
    )
