"""Turn a simulated run into a `Trace`: one process per rank, one track per core and port.

Per rank the tracks are, in display order: AIC 0..n-1 (unit aic), AIV 0..m-1 (unit aiv), TX and
RX (unit link), the step track (unit other: a `step 0` marker spanning the run, with the kernel
launches nested in it) and, for the chunked schedule, the comm stream's launches (unit other).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np
import polars as pl

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules import POOL_STEP, POOL_STREAM, ScheduleOptions, Timed, lane_layout
from moetrace.executor.tiles import AIC_TYPES, TYPES, T, TaskGraph
from moetrace.trace.model import DepKind, Kind, Trace

_COMPUTE = {
    T[x] for x in (*AIC_TYPES, "topk", "layout", "permute", "shared_act", "swiglu", "unpermute")
}
_TOKEN_TASKS = [T[x] for x in ("gate", "topk", "shared_up", "shared_act", "shared_down")]
_EXPERT_TASKS = [T[x] for x in ("gemm1", "swiglu", "gemm2")]
_COMM_TASKS = [
    T[x] for x in TYPES if x.startswith(("dispatch", "combine")) and not x.endswith("done")
]
_COMM_TASKS += [T["permute"], T["unpermute"]]
_UNIT_OF_POOL = ["aic", "aiv", "aiv", "link", "link", "other", "other"]


def _labels(
    codes: np.ndarray, labels: list[str], dtype: pl.DataType | type[pl.DataType] = pl.String
) -> pl.Series:
    """Column of `labels[code]` (String, or an Enum of the schema: no cast later), done in
    Polars: no Python string per row."""
    return pl.Series(labels, dtype=dtype).gather(np.asarray(codes, dtype=np.int64))


# args keys in text order; each family of tasks shows only its own (a subsequence of these)
_ARG_KEYS = (
    "expert",
    "row_tile",
    "token_tile",
    "src",
    "dst",
    "tile",
    "n_tile",
    "chunk",
    "rows",
    "hbm_bytes",
    "l2_bytes",
)
_FAMILY_KEYS = {
    0: {"token_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"},
    1: {"expert", "row_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"},
    2: {"src", "dst", "tile", "chunk", "rows"},
    3: {"chunk"},
}


def _args_json(
    coords: dict[str, np.ndarray],
    typ: np.ndarray,
    name_code: np.ndarray,
    pool: np.ndarray,
    names: list[str],
) -> pl.Series:
    """The args JSON text of every task, built column-wise: a templated '{"task":..,"unit":..'
    head per (name, unit), then ',"key":value' for each key of the task's family. chunk, and
    n_tile outside expert tasks, print null when negative."""
    family = np.select(
        [np.isin(typ, _TOKEN_TASKS), np.isin(typ, _EXPERT_TASKS), np.isin(typ, _COMM_TASKS)],
        [0, 1, 2],
        3,
    )
    n_pools = len(_UNIT_OF_POOL)
    head_code = np.asarray(name_code, dtype=np.int64) * n_pools + pool
    used = np.unique(head_code)  # few distinct (name, unit) pairs
    heads = [
        "{"
        + f'"task":{json.dumps(names[c // n_pools], ensure_ascii=False)},'
        + f'"unit":"{_UNIT_OF_POOL[c % n_pools]}"'
        for c in used.tolist()
    ]
    # integer columns, turned into text by Polars inside each block's concat_str, so a key is
    # formatted only for the tasks whose family shows it
    frame = pl.DataFrame({"_head": _labels(np.searchsorted(used, head_code), heads), **coords})

    def text(key: str, null_if_negative: bool) -> pl.Expr:
        as_text = pl.col(key).cast(pl.String)
        if not null_if_negative:
            return as_text
        return pl.when(pl.col(key) >= 0).then(as_text).otherwise(pl.lit("null"))

    # tasks come in blocks of one type (one family): format each block, no per-row branches
    cut = np.flatnonzero(np.diff(family)) + 1
    bounds = np.r_[0, cut, family.size].tolist()
    parts = []
    for lo, hi in itertools.pairwise(bounds):
        fam = int(family[lo])
        pieces: list[pl.Expr] = [pl.col("_head")]
        for key in _ARG_KEYS:
            if key in _FAMILY_KEYS[fam]:
                null = key == "chunk" or (key == "n_tile" and fam != 1)
                pieces += [pl.lit(f',"{key}":'), text(key, null)]
        pieces.append(pl.lit("}"))
        parts.append(frame.lazy().slice(lo, hi - lo).select(pl.concat_str(pieces).alias("args")))
    return pl.concat(pl.collect_all(parts))["args"]


def lane_names(hw: Hardware, opts: ScheduleOptions) -> tuple[list[str], list[str]]:
    """(name, unit) of every lane of one rank, in lane order."""
    layout = lane_layout(hw, opts)
    names = (
        [f"AIC {i}" for i in range(hw.n_aic)]
        + [f"AIV {i}" for i in range(hw.n_aiv)]
        + ["TX", "RX", "step"]
    )
    units = ["aic"] * hw.n_aic + ["aiv"] * hw.n_aiv + ["link", "link", "other"]
    if POOL_STREAM in layout:
        names.append("comm stream")
        units.append("other")
    return names, units


def build_trace(
    graph: TaskGraph,
    timed: Timed,
    start: np.ndarray,
    lane: np.ndarray,
    hw: Hardware,
    opts: ScheduleOptions,
    meta_executor: dict[str, Any],
) -> Trace:
    """Events, tracks, deps and meta of a finished run."""
    n, ng = timed.n, timed.n_graph
    ranks = int(timed.rank.max()) + 1
    names, units = lane_names(hw, opts)
    per = len(names)
    end = start + timed.dur
    makespan = int(end.max())
    typ = timed.type
    other = np.isin(typ, [T["launch"], T["dispatch_done"], T["combine_done"]])
    kind_code = np.where(np.isin(typ, list(_COMPUTE)), 0, np.where(other, 2, 1))
    name_code = typ.copy()
    if n > ng:
        name_code[ng:] = len(TYPES) + timed.seq[ng:]
    launch_names = [f"launch {op}" for op in timed.launch_op]
    name = _labels(name_code, [*TYPES, *launch_names])
    c = graph.cols

    def col(key: str) -> np.ndarray:
        out = np.full(n, -1, dtype=np.int64)
        out[:ng] = c[key]
        return out

    flops = np.zeros(n)
    flops[:ng] = c["flops"]
    is_compute = kind_code == 0
    moved = timed.hbm_bytes + timed.l2_bytes
    moved[:ng] = np.where(is_compute[:ng], moved[:ng], c["comm_bytes"])
    peer = col("peer")
    is_recv_side = np.isin(typ, [T["dispatch_rx"], T["combine_rx"]])
    coords = {
        "expert": col("expert"),
        "row_tile": col("row_tile"),
        "n_tile": col("n_tile"),
        "token_tile": col("token_tile"),
        "chunk": col("chunk"),
        "rows": col("rows"),
        "src": np.where(peer >= 0, np.where(is_recv_side, peer, timed.rank), -1),
        "dst": np.where(peer >= 0, np.where(is_recv_side, timed.rank, peer), -1),
        "tile": col("tile"),
        "hbm_bytes": np.rint(timed.hbm_bytes).astype(np.int64),
        "l2_bytes": np.rint(timed.l2_bytes).astype(np.int64),
    }
    args = _args_json(coords, typ, name_code, timed.pool, [*TYPES, *launch_names])
    events = pl.DataFrame(
        {
            "id": np.arange(n, dtype=np.uint32),
            "track": lane.astype(np.uint32),
            "name": name,
            "cat": _labels(
                np.where(kind_code == 2, len(_UNIT_OF_POOL), timed.pool), [*_UNIT_OF_POOL, "sync"]
            ),
            "kind": _labels(kind_code, ["compute", "comm", "other"], Kind),
            "ts": start,
            "dur": timed.dur,
            "flops": np.where(is_compute, flops, np.nan),
            "bytes": moved,
            "args": args,
        }
    ).with_columns(pl.col("flops").fill_nan(None))
    step_lane = lane_layout(hw, opts)[POOL_STEP][0]
    steps = pl.DataFrame(
        {
            "id": np.arange(n, n + ranks, dtype=np.uint32),
            "track": (np.arange(ranks) * per + step_lane).astype(np.uint32),
            "name": ["step 0"] * ranks,
            "cat": ["step"] * ranks,
            "kind": pl.Series(["marker"] * ranks, dtype=Kind),
            "ts": np.zeros(ranks, dtype=np.int64),
            "dur": np.full(ranks, makespan, dtype=np.int64),
            "flops": [None] * ranks,
            "bytes": [None] * ranks,
            "args": ['{"task":"step"}'] * ranks,
        },
        schema_overrides={"flops": pl.Float64, "bytes": pl.Float64},
    )
    events = pl.concat([events, steps], how="vertical_relaxed")
    r = np.repeat(np.arange(ranks), per)
    local = np.tile(np.arange(per), ranks)
    tracks = pl.DataFrame(
        {
            "track": (r * per + local).astype(np.uint32),
            "rank": r.astype(np.int32),
            "pid": _labels(r, [str(i) for i in range(ranks)]),
            "tid": _labels(local, names),
            "process_name": _labels(r, [f"rank {i}" for i in range(ranks)]),
            "thread_name": _labels(local, names),
            "unit": _labels(local, units),
            "sort_index": local.astype(np.int32),
        }
    )
    dep_kind = _labels(
        (other[timed.src] | other[timed.dst]).astype(np.int64), ["data", "sync"], DepKind
    )
    deps = pl.DataFrame(
        {"src": timed.src.astype(np.uint32), "dst": timed.dst.astype(np.uint32), "kind": dep_kind}
    )
    meta = {
        "format": "executor",
        "flavor": "moetrace",
        "warnings": [],
        "source": [],
        "peak_flops": hw.peak_flops,
        "executor": {**meta_executor, "makespan_ns": makespan},
    }
    depth = _known_depth(timed, start, makespan)
    if depth is None:  # cannot vouch for the nesting: let the model compute it
        return Trace.from_frames(events, tracks, deps, None, meta, compute_depth=True)
    events = events.with_columns(pl.Series("depth", depth, dtype=pl.UInt16))
    return Trace.from_frames(events, tracks, deps, None, meta)


def _known_depth(timed: Timed, start: np.ndarray, makespan: int) -> np.ndarray | None:
    """Nesting depth of every event (tasks, then one step marker per rank), known without a
    sort: the engine runs one task at a time on every lane (each lane is a chain in its
    graph), so with positive durations no task encloses another; the step marker [0, makespan]
    encloses the tasks of the step lane (depth 1). None when a zero duration or a task as long
    as the step could make the general rule (ts, longest first, input order) differ."""
    on_step = timed.pool == POOL_STEP
    if timed.n and (
        int(timed.dur.min()) <= 0 or bool(np.any(on_step & (start == 0) & (timed.dur >= makespan)))
    ):
        return None
    ranks = int(timed.rank.max()) + 1
    return np.r_[on_step.astype(np.uint16), np.zeros(ranks, dtype=np.uint16)]
