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
    ids = ev["id"].to_numpy().astype(np.int64)
    order = np.argsort(ids, kind="stable")
    src_row = order[np.searchsorted(ids[order], launch["src"].to_numpy().astype(np.int64))]
    parent = parents(
        ev["track"].to_numpy().astype(np.int64),
        ev["ts"].to_numpy().astype(np.int64),
        ev["end"].to_numpy().astype(np.int64),
        ev["depth"].to_numpy().astype(np.int64),
    )
    annotation = (ev["kind"] == "marker").to_numpy()
    op = parent[src_row]
    depth = ev["depth"].to_numpy()
    for _ in range(int(depth.max()) + 1 if len(depth) else 0):  # climb over annotations
        climb = (op >= 0) & annotation[np.clip(op, 0, None)]
        if not climb.any():
            break
        op = np.where(climb, parent[np.clip(op, 0, None)], op)
    op_id = np.where(op >= 0, ids[np.clip(op, 0, None)], -1)
    return pl.DataFrame(
        {
            "event_id": launch["dst"],
            "launch_id": launch["src"],
            "op_id": pl.Series(op_id).replace(-1, None),
            "step": ev["step"].gather(pl.Series(src_row)),
        }
    ).select([pl.col(k).cast(v) for k, v in schema.items()])


GRAPH_LAUNCH = r"^(?:cuda|hip)GraphLaunch|^cuGraphLaunch|GraphLaunch$"
"""Host calls that replay a captured CUDA/HIP graph (torch_npu's replay call ends the same)."""


def capture_map(replay: Trace, capture: Trace) -> pl.DataFrame:
    """Map graph-replayed kernels back to the ops that launched them at capture time.

    vLLM/SGLang capture their CUDA/HIP graphs under the profiler once (a capture trace, where
    every kernel is launched by an op), then replay them with one graph launch per step. A
    replay's kernels, in time order, repeat a run of the capture's kernels (capture launch
    order): the first run with the same kernel names is taken. One row per replayed kernel
    that was found: event_id (in `replay`), capture_id (the kernel in `capture`), op_id and
    op (the capture op around its launch call; null when none).
    """
    schema = {"event_id": pl.UInt32, "capture_id": pl.UInt32, "op_id": pl.UInt32, "op": pl.String}
    rep_ops = launching_ops(replay)
    names = replay.events.select("id", "name", "ts")
    calls = names.rename({"id": "launch_id", "name": "call", "ts": "call_ts"})
    groups = (
        rep_ops.join(calls, on="launch_id")
        .filter(pl.col("call").str.contains(GRAPH_LAUNCH))
        .join(names.rename({"id": "event_id"}), on="event_id")
        .sort("launch_id", "ts", "event_id")
    )
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
    if groups.height == 0 or cap.height == 0:
        return pl.DataFrame(schema=schema)
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
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).select([pl.col(k).cast(v) for k, v in schema.items()])


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
