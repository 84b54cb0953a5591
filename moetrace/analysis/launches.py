"""Which host call launched each device event, and inside which host op it was called.

Launch edges are the trace's `launch` deps plus, on Kineto traces, the runtime call with the
same `correlation` (sync_edges.kineto_launch_edges): a CUDA/HIP graph launch
(`cudaGraphLaunch`, `hipGraphLaunch`) shares its correlation id with every kernel it
replays, so each replayed kernel gets an edge to the graph launch, the step of that call and
the op around it. The op is the innermost enclosing slice of the launch call on its thread
that is not an annotation (ProfilerStep, record_function ranges).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.steps import prepare_steps
from moetrace.trace.model import Trace


def parents(track: np.ndarray, ts: np.ndarray, end: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Row of each event's parent (the last earlier event one level up on its track that
    contains it), -1 at depth 0 or when nesting is broken. One binary search per level."""
    n = len(ts)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return out
    pos = np.arange(n, dtype=np.int64)
    for level in range(1, int(depth.max()) + 1):
        child = pos[depth == level]
        up = pos[depth == level - 1]
        if len(child) == 0 or len(up) == 0:
            continue
        up = up[np.lexsort((up, ts[up], track[up]))]
        up_key, child_key = iv.pack_pairs((track[up], ts[up]), (track[child], ts[child]))
        at = np.searchsorted(up_key, child_key, side="right") - 1
        cand = up[np.clip(at, 0, None)]
        ok = (at >= 0) & (track[cand] == track[child]) & (end[cand] >= end[child])
        out[child[ok]] = cand[ok]
    return out


def launching_ops(trace: Trace, comm_patterns: Sequence[str] = ()) -> pl.DataFrame:
    """One row per device event with a launch edge: event_id, launch_id (the host call),
    op_id (the innermost non-annotation slice around the call; null when there is none),
    step (the step of the launch call)."""
    prep = prepare_steps(trace, comm_patterns=comm_patterns)
    ev = prep.ev
    launch = (
        prep.deps.filter(pl.col("kind") == "launch")
        .group_by("dst")
        .agg(pl.col("src").min())
        .sort("dst")
    )
    schema = {"event_id": pl.UInt32, "launch_id": pl.UInt32, "op_id": pl.UInt32, "step": pl.Int64}
    if launch.height == 0:
        return pl.DataFrame(schema=schema)
    src_row, op_id = enclosing_ops(ev, launch["src"])
    return pl.DataFrame(
        {
            "event_id": launch["dst"],
            "launch_id": launch["src"],
            "op_id": op_id,
            "step": ev["step"].gather(pl.Series(src_row)),
        }
    ).select([pl.col(k).cast(v) for k, v in schema.items()])


def enclosing_ops(ev: pl.DataFrame, call_ids: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """For each host call id: its row in `ev` (id, track, ts, end, depth, kind) and the id of
    the innermost slice around it that is not an annotation (null when there is none)."""
    ids = ev["id"].to_numpy().astype(np.int64)
    order = np.argsort(ids, kind="stable")
    row = order[np.searchsorted(ids[order], call_ids.to_numpy().astype(np.int64))]
    parent = parents(
        ev["track"].to_numpy().astype(np.int64),
        ev["ts"].to_numpy().astype(np.int64),
        ev["end"].to_numpy().astype(np.int64),
        ev["depth"].to_numpy().astype(np.int64),
    )
    annotation = (ev["kind"] == "marker").to_numpy()
    op = parent[row]
    depth = ev["depth"].to_numpy()
    for _ in range(int(depth.max()) + 1 if len(depth) else 0):  # climb over annotations
        climb = (op >= 0) & annotation[np.clip(op, 0, None)]
        if not climb.any():
            break
        op = np.where(climb, parent[np.clip(op, 0, None)], op)
    op_id = np.where(op >= 0, ids[np.clip(op, 0, None)], -1)
    return row, pl.Series("op_id", op_id).replace(-1, None)


GRAPH_LAUNCH = r"^(?:cuda|hip)GraphLaunch|^cuGraphLaunch|GraphLaunch$"
"""Host calls that replay a captured CUDA/HIP graph (torch_npu's replay call ends the same)."""


CAPTURE_BEGIN = r"StreamBeginCapture"
CAPTURE_END = r"StreamEndCapture"
"""The runtime calls that open and close a stream capture (cudaStreamBeginCapture,
hipStreamEndCapture ...): TraceLens's capture roots (AMD-AGI/TraceLens,
TraceLens/Trace2Tree/trace_capture_merge.py, merge_capture_trace_into_graph)."""

CAPTURED_CALL = r"Launch|Memcpy|Memset"
"""Runtime calls inside a capture that add a node to the graph (TraceLens filters the
capture's cuda_runtime / cuda_driver events by "Launch" and "Memcpy"; memsets are nodes
too)."""

CAPTURE_SCHEMA = {
    "event_id": pl.UInt32,
    "capture_id": pl.UInt32,
    "op_id": pl.UInt32,
    "op": pl.String,
}


def capture_map(replay: Trace, capture: Trace) -> pl.DataFrame:
    """Map graph-replayed kernels back to the ops that launched them at capture time.

    vLLM/SGLang capture their CUDA/HIP graphs under the profiler once (a capture trace),
    then replay them with one graph launch per step. While a stream captures, nothing runs:
    Kineto records the launch calls (their kernel's name in `args.kernel`), between a
    `*StreamBeginCapture` and a `*StreamEndCapture`, and no kernels. As TraceLens does
    (Trace2Tree/trace_capture_merge.py), the replayed device events of one graph launch, in
    time order, are the launch calls of one capture window in call order, one for one
    (`capture_id` is the call, `op` the op around it). The window is the first whose calls
    name the same kernels in the same order; failing that, the first with as many calls
    (names unchecked: ROCm renames some); failing that, the i-th window for the i-th graph
    launch (TraceLens's zip), only where the names agree. A capture trace without windows
    whose kernels ran (an eager warm-up) is matched by kernel-name runs instead
    (`capture_id` is then the kernel). One row per replayed kernel found (CAPTURE_SCHEMA).
    """
    groups = _replay_groups(replay)
    if groups.height == 0:
        return pl.DataFrame(schema=CAPTURE_SCHEMA)
    calls = _captured_calls(capture)
    if calls.height:
        return _map_by_calls(groups, calls)
    return _map_by_runs(groups, capture)


def _replay_groups(replay: Trace) -> pl.DataFrame:
    """Replayed device events: launch_id (the graph launch), event_id, name, in launch then
    time order."""
    names = replay.events.select("id", "name", "ts")
    calls = names.rename({"id": "launch_id", "name": "call", "ts": "call_ts"})
    return (
        launching_ops(replay)
        .join(calls, on="launch_id")
        .filter(pl.col("call").str.contains(GRAPH_LAUNCH))
        .join(names.rename({"id": "event_id"}), on="event_id")
        .sort("call_ts", "launch_id", "ts", "event_id")
        .select("launch_id", "event_id", "name")
    )


def _captured_calls(capture: Trace) -> pl.DataFrame:
    """The launch calls of every capture window: window (0, 1, ...), capture_id, kernel
    (`args.kernel`, else the call's name), op_id, op; in window then call order."""
    ev = capture.events.join(capture.tracks.select("track", "unit"), on="track")
    host = ev.filter(pl.col("unit") == "cpu")
    begin = host.filter(pl.col("name").str.contains(CAPTURE_BEGIN)).sort("ts")
    end = host.filter(pl.col("name").str.contains(CAPTURE_END)).sort("ts")
    schema = {"window": pl.Int64, "capture_id": pl.UInt32, "kernel": pl.String}
    if begin.height == 0 or end.height == 0:
        return pl.DataFrame(schema={**schema, "op_id": pl.UInt32, "op": pl.String})
    # each window: from the end of a begin call to the start of the first end call after it
    b_end = (begin["ts"] + begin["dur"]).to_numpy()
    e_ts = end["ts"].to_numpy()
    at = np.searchsorted(e_ts, b_end, side="left")
    ok = at < len(e_ts)
    windows = pl.DataFrame(
        {"lo": b_end[ok], "hi": e_ts[at[ok]]}, schema={"lo": pl.Int64, "hi": pl.Int64}
    ).with_row_index("window")
    launch = host.filter(
        pl.col("name").str.contains(CAPTURED_CALL)
        & ~pl.col("name").str.contains(CAPTURE_BEGIN + "|" + CAPTURE_END + "|" + GRAPH_LAUNCH)
    ).sort("ts", "id")
    lo = windows["lo"].to_numpy()
    pos = np.searchsorted(lo, launch["ts"].to_numpy(), side="right") - 1
    inside = pos >= 0
    hi = windows["hi"].to_numpy()
    inside[inside] = launch["ts"].to_numpy()[inside] <= hi[pos[inside]]
    cand = launch.with_columns(pl.Series("window", pos, dtype=pl.Int64)).filter(pl.Series(inside))
    kernel = pl.col("args").str.json_path_match("$.kernel")
    picked = cand.select(
        "window",
        pl.col("id").alias("capture_id"),
        pl.coalesce(kernel, pl.col("name")).alias("kernel"),
    )
    ops = _ops_of_calls(capture, picked["capture_id"])
    return (
        picked.join(ops, on="capture_id", how="left", maintain_order="left")
        .join(
            capture.events.select(pl.col("id").alias("op_id"), pl.col("name").alias("op")),
            on="op_id",
            how="left",
            maintain_order="left",
        )
        .with_columns(pl.col("window").cast(pl.Int64), pl.col("capture_id").cast(pl.UInt32))
    )


def _ops_of_calls(trace: Trace, call_ids: pl.Series) -> pl.DataFrame:
    """capture_id, op_id: the innermost non-annotation slice around each host call."""
    ev = trace.events.with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
    _, op_id = enclosing_ops(ev, call_ids)
    return pl.DataFrame({"capture_id": call_ids, "op_id": op_id}).select(
        pl.col("capture_id").cast(pl.UInt32), pl.col("op_id").cast(pl.UInt32)
    )


def _map_by_calls(groups: pl.DataFrame, calls: pl.DataFrame) -> pl.DataFrame:
    """One graph launch's kernels onto one capture window's calls, position for position."""
    by_window = {int(w): part for (w,), part in calls.group_by("window", maintain_order=True)}
    seqs = {w: tuple(p["kernel"].to_list()) for w, p in by_window.items()}
    parts = []
    for i, ((_,), group) in enumerate(groups.group_by("launch_id", maintain_order=True)):
        names = tuple(group["name"].to_list())
        same = [w for w, s in seqs.items() if s == names]
        sized = [w for w, s in seqs.items() if len(s) == len(names)]
        if same or sized:
            hit = by_window[(same or sized)[0]]
            keep = pl.repeat(True, len(names), eager=True)
        elif i in by_window:  # TraceLens's zip: the i-th window, where the names agree
            hit = by_window[i].head(len(names))
            group = group.head(hit.height)
            keep = group["name"] == hit["kernel"]
        else:
            continue
        parts.append(
            pl.DataFrame(
                {
                    "event_id": group["event_id"],
                    "capture_id": hit["capture_id"],
                    "op_id": hit["op_id"],
                    "op": hit["op"],
                }
            ).filter(keep)
        )
    if not parts:
        return pl.DataFrame(schema=CAPTURE_SCHEMA)
    return pl.concat(parts).select([pl.col(k).cast(v) for k, v in CAPTURE_SCHEMA.items()])


def _map_by_runs(groups: pl.DataFrame, capture: Trace) -> pl.DataFrame:
    """A capture whose kernels ran: a replay's kernels, in time order, repeat a run of the
    capture's kernels (launch order); the first run with the same names is taken."""
    cap_ops = launching_ops(capture)
    cap = (
        cap_ops.join(
            capture.events.select(pl.col("id").alias("event_id"), "name", "ts"), on="event_id"
        )
        .join(
            capture.events.select(pl.col("id").alias("launch_id"), pl.col("ts").alias("c_ts")),
            on="launch_id",
        )
        .sort("c_ts", "ts", "event_id")
        .join(
            capture.events.select(pl.col("id").alias("op_id"), pl.col("name").alias("op")),
            on="op_id",
            how="left",
            maintain_order="left",
        )
    )
    if cap.height == 0:
        return pl.DataFrame(schema=CAPTURE_SCHEMA)
    vocab = pl.concat([cap["name"], groups["name"]]).unique().sort()
    code = {n: i for i, n in enumerate(vocab.to_list())}
    cap_codes = (
        cap["name"].replace_strict(vocab, pl.int_range(vocab.len(), eager=True)).to_numpy()
    ).astype(np.int64)
    found: dict[tuple[int, ...], int] = {}
    parts = []
    for (_,), group in groups.group_by("launch_id", maintain_order=True):
        seq = tuple(code[n] for n in group["name"].to_list())
        if seq not in found:
            found[seq] = _find_run(cap_codes, np.array(seq, dtype=np.int64))
        at = found[seq]
        if at < 0:
            continue
        hit = cap.slice(at, len(seq))
        parts.append(
            pl.DataFrame(
                {
                    "event_id": group["event_id"],
                    "capture_id": hit["event_id"],
                    "op_id": hit["op_id"],
                    "op": hit["op"],
                }
            )
        )
    if not parts:
        return pl.DataFrame(schema=CAPTURE_SCHEMA)
    return pl.concat(parts).select([pl.col(k).cast(v) for k, v in CAPTURE_SCHEMA.items()])


def _find_run(haystack: np.ndarray, needle: np.ndarray) -> int:
    """First position where `needle` occurs in `haystack` as a contiguous run; -1 if none.
    Candidates are the positions of its first element; each is checked in one numpy pass."""
    n, m = len(haystack), len(needle)
    if m == 0 or m > n:
        return -1
    cand = np.flatnonzero(haystack[: n - m + 1] == needle[0])
    for chunk in np.array_split(cand, max(1, len(cand) * m // 1_000_000 + 1)):
        if len(chunk) == 0:
            continue
        ok = (haystack[chunk[:, None] + np.arange(m)] == needle).all(axis=1)
        if ok.any():
            return int(chunk[np.argmax(ok)])
    return -1
