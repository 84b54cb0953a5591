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

from moetrace.executor.fold import Expansion, expand_edges
from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules import POOL_STEP, POOL_STREAM, ScheduleOptions, Timed, lane_layout
from moetrace.executor.taskgraph import AIC_TYPES, TYPES, T, TaskGraph
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
_SLICE = 1 << 19  # events per slice of a folded trace's text


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


def _family(typ: np.ndarray) -> np.ndarray:
    """Args family of every task: 0 token tasks, 1 expert tasks, 2 comm tasks, 3 the rest."""
    return np.select(
        [np.isin(typ, _TOKEN_TASKS), np.isin(typ, _EXPERT_TASKS), np.isin(typ, _COMM_TASKS)],
        [0, 1, 2],
        3,
    )


# the two keys of a family that differ from rank to rank (the rest is the same on every rank
# of a rotation-symmetric run): the folded trace fills them in per rank
_RANK_KEYS = {1: ("expert", "row_tile"), 2: ("src", "dst")}


def _args_json(
    coords: dict[str, np.ndarray],
    typ: np.ndarray,
    name_code: np.ndarray,
    pool: np.ndarray,
    names: list[str],
    split: bool = False,
) -> pl.DataFrame:
    """The args JSON text of every task, built column-wise: a templated '{"task":..,"unit":..'
    head per (name, unit), then ',"key":value' for each key of the task's family. chunk, and
    n_tile outside expert tasks, print null when negative. Column `args`; with `split`,
    columns `head` and `tail` instead: the text before the first of the family's two
    `_RANK_KEYS` values and after the second (the text between them is
    '<first>,"<second key>":<second>'; families without such keys: all of it in `tail`)."""
    family = _family(typ)
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
        holes: tuple[str, ...] = _RANK_KEYS.get(fam, ()) if split else ()
        pieces: list[pl.Expr] = [pl.col("_head")]
        cut_at = 0  # pieces before the first rank key's value
        for key in _ARG_KEYS:
            if key in _FAMILY_KEYS[fam]:
                if key in holes:
                    if key == holes[0]:
                        pieces.append(pl.lit(f',"{key}":'))
                        cut_at = len(pieces)
                    continue
                null = key == "chunk" or (key == "n_tile" and fam != 1)
                pieces += [pl.lit(f',"{key}":'), text(key, null)]
        pieces.append(pl.lit("}"))
        block = frame.lazy().slice(lo, hi - lo)
        if not split:
            parts.append(block.select(pl.concat_str(pieces).alias("args")))
        else:
            parts.append(
                block.select(
                    pl.concat_str(pieces[:cut_at] or [pl.lit("")]).alias("head"),
                    pl.concat_str(pieces[cut_at:]).alias("tail"),
                )
            )
    return pl.concat(pl.collect_all(parts))


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


def _columns(
    graph: TaskGraph, timed: Timed, start: np.ndarray, lane: np.ndarray, split: bool
) -> tuple[pl.DataFrame, np.ndarray]:
    """Every task's event columns (track .. bytes, and args: `_args_json`, `split` or not) and
    which tasks are sync/launch nodes ("other": their edges are sync deps)."""
    n, ng = timed.n, timed.n_graph
    typ = timed.type
    other = np.isin(typ, [T["launch"], T["dispatch_done"], T["combine_done"]])
    kind_code = np.where(np.isin(typ, list(_COMPUTE)), 0, np.where(other, 2, 1))
    name_code = typ.copy()
    if n > ng:
        name_code[ng:] = len(TYPES) + timed.seq[ng:]
    launch_names = [f"launch {op}" for op in timed.launch_op]
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
    names = [*TYPES, *launch_names]
    args = _args_json(coords, typ, name_code, timed.pool, names, split)
    events = pl.DataFrame(
        {
            "track": lane.astype(np.uint32),
            "name": _labels(name_code, names),
            "cat": _labels(
                np.where(kind_code == 2, len(_UNIT_OF_POOL), timed.pool), [*_UNIT_OF_POOL, "sync"]
            ),
            "kind": _labels(kind_code, ["compute", "comm", "other"], Kind),
            "ts": start,
            "dur": timed.dur,
            "flops": np.where(is_compute, flops, np.nan),
            "bytes": moved,
        }
    ).with_columns(pl.col("flops").fill_nan(None))
    return pl.concat([events, args], how="horizontal"), other


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
    events, other = _columns(graph, timed, start, lane, split=False)
    events = events.with_columns(pl.Series("id", np.arange(timed.n, dtype=np.uint32)))
    deps = _deps(timed.src, timed.dst, (other[timed.src] | other[timed.dst]).astype(np.int64))
    makespan = int((start + timed.dur).max())
    depth = _known_depth(timed, start, makespan)
    ranks = int(timed.rank.max()) + 1
    if depth is not None:
        events = events.with_columns(pl.Series("depth", depth[: timed.n], dtype=pl.UInt16))
        depth = depth[timed.n :]
    return _assemble(events, ranks, deps, makespan, depth, hw, opts, meta_executor)


def build_folded_trace(
    graph: TaskGraph,
    timed: Timed,
    start: np.ndarray,
    lane: np.ndarray,
    exp: Expansion,
    hw: Hardware,
    opts: ScheduleOptions,
    meta_executor: dict[str, Any],
) -> Trace:
    """The trace of every rank of a folded run (`executor.fold`): the block's event columns,
    gathered for every task of the whole run from its copy in the block (the same frames as
    `build_trace` of the full simulation; deps in another row order)."""
    sym = graph.symmetric
    assert sym is not None
    ep = exp.ranks
    q_events, other = _columns(graph, timed, start, lane, split=True)
    rep, rank = exp.rep, exp.rank
    # the two rank-dependent args values of each task (`_RANK_KEYS`) as one code per pair of
    # values, computed per (copy, task of the block) and scattered to the whole run's order
    c = graph.cols
    nq = graph.n
    typ = c["type"]
    fam = _family(typ)
    expert0, row0, peer0, rank0 = (
        c[k].astype(np.int32) for k in ("expert", "row_tile", "peer", "rank")
    )
    local = np.maximum(expert0, 0) // ep
    shift = sym.shift[local].astype(np.int32)
    tiles = np.maximum(sym.tiles[local], 1).astype(np.int32)
    recv = np.isin(typ, [T["dispatch_rx"], T["combine_rx"]])
    src0, dst0 = np.where(recv, peer0, rank0), np.where(recv, rank0, peer0)
    experts = int(expert0.max(initial=0)) + ep
    width = max(int(sym.tiles.max(initial=1)), ep)
    m = np.arange(exp.copies, dtype=np.int32)[:, None]  # copy m: rotated by m periods
    r = m * sym.period
    code2d = np.where(
        fam == 1,
        1 + (expert0 + r) * width + (row0 + m * shift) % tiles,
        np.where(fam == 2, 1 + (experts + (src0 + r) % ep) * width + (dst0 + r) % ep, 0),
    )
    code = np.zeros(exp.n, dtype=np.int32)
    code[exp.full_id[:, :nq].ravel()] = code2d.ravel()
    del code2d
    pair = np.arange(2 * experts * width)
    middle = pl.DataFrame({"a": pair // width % experts, "b": pair % width}).select(
        pl.concat_str(
            pl.col("a").cast(pl.String),
            pl.when(pl.Series(pair < experts * width))
            .then(pl.lit(',"row_tile":'))
            .otherwise(pl.lit(',"dst":')),
            pl.col("b").cast(pl.String),
        )
    )
    middle_text = pl.concat([pl.Series([""]), middle.to_series()])
    makespan = int((start + timed.dur).max())
    depth_q = _known_depth(timed, start, makespan)
    if depth_q is not None:
        q_events = q_events.with_columns(pl.Series("depth", depth_q[: timed.n], dtype=pl.UInt16))
    # deps first: their index arrays are freed before the text is built
    src_e, dst_e, edge = expand_edges(exp, graph, timed)
    dep_kind = (other[timed.src] | other[timed.dst]).astype(np.int8)[edge]
    del edge
    deps = _deps(src_e, dst_e, dep_kind)
    del src_e, dst_e, dep_kind
    # in slices, so that only one slice's gathered pieces of text live beside the result
    # lanes of the block are numbered from its own ranks on: a copy is m x period ranks further
    track = (lane[rep] + (rank - timed.rank[rep]) * timed.lanes_per_rank).astype(np.uint32)
    parts = []
    for lo in range(0, exp.n, _SLICE):
        take = pl.Series(rep[lo : lo + _SLICE])
        parts.append(
            q_events.lazy()
            .select(
                pl.all().exclude("track", "head", "tail").gather(take),
                pl.Series("id", np.arange(lo, lo + take.len(), dtype=np.uint32)),
                pl.Series("track", track[lo : lo + _SLICE]),
                pl.concat_str(
                    pl.col("head").gather(take),
                    pl.lit(middle_text.gather(code[lo : lo + _SLICE])),
                    pl.col("tail").gather(take),
                ).alias("args"),
            )
            .collect()
        )
    del code, track
    events = pl.concat(parts, rechunk=False)
    depth = None if depth_q is None else np.zeros(ep, dtype=np.uint16)
    return _assemble(events, ep, deps, makespan, depth, hw, opts, meta_executor)


def _deps(src: np.ndarray, dst: np.ndarray, kind: np.ndarray) -> pl.DataFrame:
    """The deps frame (kind code 1: sync, else data)."""
    return pl.DataFrame(
        {
            "src": src.astype(np.uint32),
            "dst": dst.astype(np.uint32),
            "kind": _labels(kind, ["data", "sync"], DepKind),
        }
    )


def _assemble(
    events: pl.DataFrame,
    ranks: int,
    deps: pl.DataFrame,
    makespan: int,
    step_depth: np.ndarray | None,
    hw: Hardware,
    opts: ScheduleOptions,
    meta_executor: dict[str, Any],
) -> Trace:
    """The Trace: task events (with their depth column, unless `step_depth` is None: then the
    model computes every depth) plus one step marker per rank (depth `step_depth`), tracks,
    deps."""
    names, units = lane_names(hw, opts)
    per = len(names)
    n = events.height
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
    if step_depth is not None:
        steps = steps.with_columns(pl.Series("depth", step_depth, dtype=pl.UInt16))
    events = pl.concat([events.select(steps.columns), steps], how="vertical_relaxed")
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
    meta = {
        "format": "executor",
        "flavor": "moetrace",
        "warnings": [],
        "source": [],
        "peak_flops": hw.peak_flops,
        "executor": {**meta_executor, "makespan_ns": makespan},
    }
    # without known depths the model computes them (it cannot vouch for the nesting)
    return Trace.from_frames(events, tracks, deps, None, meta, compute_depth=step_depth is None)


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
    return np.asarray(np.r_[on_step.astype(np.uint16), np.zeros(ranks, dtype=np.uint16)])
