"""Turn a simulated run into a `Trace`: one process per rank, one track per core and port.

Per rank the tracks are, in display order: AIC 0..n-1 (unit aic), AIV 0..m-1 (unit aiv), TX and
RX (unit link), the step track (unit other: a `step 0` marker spanning the run, with the kernel
launches nested in it) and, for the chunked schedule, the comm stream's launches (unit other).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules import POOL_STEP, POOL_STREAM, ScheduleOptions, Timed, lane_layout
from moetrace.executor.tiles import AIC_TYPES, TYPES, T, TaskGraph
from moetrace.trace.model import Trace

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


def _labels(codes: np.ndarray, labels: list[str]) -> pl.Series:
    """String column from integer codes (done in Polars: no Python string per row)."""
    return pl.Series(np.asarray(codes, dtype=np.int64)).replace_strict(
        list(range(len(labels))), labels, return_dtype=pl.String
    )


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
    name = _labels(name_code, [*TYPES, *(f"launch {op}" for op in timed.launch_op)])
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
    unit = _labels(timed.pool, _UNIT_OF_POOL)
    peer = col("peer")
    is_recv_side = np.isin(typ, [T["dispatch_rx"], T["combine_rx"]])
    frame = pl.DataFrame(
        {
            "task": name,
            "unit": unit,
            "expert": col("expert"),
            "row_tile": col("row_tile"),
            "n_tile": col("n_tile"),
            "token_tile": col("token_tile"),
            "chunk": col("chunk"),
            "rows": col("rows"),
            "src": np.where(peer >= 0, np.where(is_recv_side, peer, timed.rank), -1),
            "dst": np.where(peer >= 0, np.where(is_recv_side, timed.rank, peer), -1),
            "tile": col("tile"),
            "hbm_bytes": np.rint(timed.hbm_bytes),
            "l2_bytes": np.rint(timed.l2_bytes),
        }
    )
    # args: only the coordinates that mean something for the task's family
    family = np.select(
        [np.isin(typ, _TOKEN_TASKS), np.isin(typ, _EXPERT_TASKS), np.isin(typ, _COMM_TASKS)],
        [0, 1, 2],
        3,
    )
    keys = {
        0: ["task", "unit", "token_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"],
        1: [
            "task",
            "unit",
            "expert",
            "row_tile",
            "n_tile",
            "chunk",
            "rows",
            "hbm_bytes",
            "l2_bytes",
        ],
        2: ["task", "unit", "src", "dst", "tile", "chunk", "rows"],
        3: ["task", "unit", "chunk"],
    }
    frame = frame.with_columns(
        pl.Series("_row", np.arange(n)),
        pl.Series("_family", family),
        pl.col("hbm_bytes", "l2_bytes").cast(pl.Int64),
        pl.when(pl.col("chunk") >= 0).then(pl.col("chunk")).alias("chunk"),
    )
    parts = []
    for fam, cols in keys.items():
        sub = frame.filter(pl.col("_family") == fam)
        if sub.height:
            if fam != 1:
                sub = sub.with_columns(
                    pl.when(pl.col("n_tile") >= 0).then(pl.col("n_tile")).alias("n_tile")
                )
            parts.append(sub.select("_row", pl.struct(cols).struct.json_encode().alias("args")))
    args = pl.concat(parts).sort("_row")["args"]
    events = pl.DataFrame(
        {
            "id": np.arange(n, dtype=np.uint32),
            "track": lane.astype(np.uint32),
            "name": name,
            "cat": _labels(
                np.where(kind_code == 2, len(_UNIT_OF_POOL), timed.pool), [*_UNIT_OF_POOL, "sync"]
            ),
            "kind": _labels(kind_code, ["compute", "comm", "other"]),
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
            "kind": ["marker"] * ranks,
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
    dep_kind = _labels((other[timed.src] | other[timed.dst]).astype(np.int64), ["data", "sync"])
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
    return Trace.from_frames(events, tracks, deps, None, meta, compute_depth=True)
