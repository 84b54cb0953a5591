"""Seeded synthetic traces at any size: a regular grid of lanes (no executor needed).

Each rank has cube (aic) and vector (aiv) cores, a link lane of comm events and a step
marker lane; event k of a lane depends on event k of the lane before it (data deps), so the
critical path crosses lanes like an executor trace. Vectorised: 1M events take < 1 s.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.trace.model import Trace

LANE_UNITS = ("aic", "aic", "aiv", "aiv", "link")
NAMES = {"aic": "matmul", "aiv": "swiglu", "link": "all_to_all"}


def synthetic_trace(
    ranks: int = 2,
    events_per_lane: int = 40,
    seed: int = 0,
    units: tuple[str, ...] = LANE_UNITS,
    with_deps: bool = True,
    with_steps: bool = True,
    compute_depth: bool = True,
) -> Trace:
    """A seeded multi-rank trace: `ranks` × `len(units)` lanes of `events_per_lane` events."""
    rng = np.random.default_rng(seed)
    n_lanes = ranks * len(units)
    n = events_per_lane
    durs = rng.integers(2_000, 20_000, size=(ranks, len(units), n))
    waits = rng.integers(0, 8_000, size=(ranks, len(units), n))
    # Lane j's event k waits for lane j-1's event k (a data dep) and for its own previous
    # event: s[k] = max(s[k-1] + d[k-1] + g[k], e_prev_lane[k] + g[k]), solved with a cummax.
    step = waits.copy()
    step[..., 1:] += durs[..., :-1]
    offsets = np.cumsum(step, axis=-1)
    starts = np.empty_like(offsets)
    starts[:, 0] = offsets[:, 0]
    for j in range(1, len(units)):
        ready = starts[:, j - 1] + durs[:, j - 1] + waits[:, j]
        starts[:, j] = offsets[:, j] + np.maximum.accumulate(
            np.maximum(ready - offsets[:, j], 0), axis=-1
        )
    ends = starts + durs
    durs, starts, ends = (x.reshape(n_lanes, n) for x in (durs, starts, ends))
    lane_units = np.array(list(units) * ranks)
    lane_rank = np.repeat(np.arange(ranks), len(units))
    ids = np.arange(n_lanes * n, dtype=np.int64).reshape(n_lanes, n)
    unit_col = np.repeat(lane_units, n)
    kind = np.where(unit_col == "link", "comm", "compute")
    seq = np.tile(np.arange(n), n_lanes)
    base = np.array([NAMES[u] for u in lane_units])
    names = pl.Series(np.repeat(base, n)) + "_" + pl.Series(seq.astype(str))
    events = {
        "id": ids.ravel(),
        "track": np.repeat(np.arange(n_lanes), n),
        "name": names,
        "cat": np.repeat(lane_units, n),
        "kind": kind,
        "ts": starts.ravel(),
        "dur": durs.ravel(),
        "flops": np.where(kind == "compute", durs.ravel() * 1e6, np.nan),
    }
    tracks = {
        "track": np.arange(n_lanes),
        "rank": lane_rank,
        "pid": lane_rank.astype(str),
        "tid": np.arange(n_lanes).astype(str),
        "process_name": [f"rank {r}" for r in lane_rank],
        "thread_name": [f"{u.upper()} {i % len(units)}" for i, u in enumerate(lane_units)],
        "unit": lane_units,
        "sort_index": np.arange(n_lanes),
    }
    ev = pl.DataFrame(events).with_columns(pl.col("flops").fill_nan(None))
    tr = pl.DataFrame(tracks)
    if with_steps:
        step_tracks = np.arange(n_lanes, n_lanes + ranks)
        lo = starts.reshape(ranks, -1).min(axis=1)
        hi = ends.reshape(ranks, -1).max(axis=1)
        ev = pl.concat(
            [
                ev,
                pl.DataFrame(
                    {
                        "id": n_lanes * n + np.arange(ranks),
                        "track": step_tracks,
                        "name": ["step 0"] * ranks,
                        "cat": ["step"] * ranks,
                        "kind": ["marker"] * ranks,
                        "ts": lo,
                        "dur": hi - lo,
                        "flops": [float("nan")] * ranks,
                    }
                ),
            ],
            how="vertical_relaxed",
        )
        tr = pl.concat(
            [
                tr,
                pl.DataFrame(
                    {
                        "track": step_tracks,
                        "rank": np.arange(ranks),
                        "pid": np.arange(ranks).astype(str),
                        "tid": [f"step{r}" for r in range(ranks)],
                        "process_name": [f"rank {r}" for r in range(ranks)],
                        "thread_name": ["steps"] * ranks,
                        "unit": ["other"] * ranks,
                        "sort_index": step_tracks,
                    }
                ),
            ],
            how="vertical_relaxed",
        )
    deps = None
    if with_deps and len(units) > 1:
        per_rank = ids.reshape(ranks, len(units), n)
        src = per_rank[:, :-1, :].ravel()
        dst = per_rank[:, 1:, :].ravel()
        deps = {"src": src, "dst": dst, "kind": ["data"] * len(src)}
    meta = {"format": "executor", "flavor": "moetrace", "source": [], "warnings": []}
    if not compute_depth:  # lanes are disjoint by construction: every depth is 0
        ev = ev.with_columns(pl.lit(0).alias("depth"))
    return Trace.from_frames(ev, tr, deps, meta=meta, compute_depth=compute_depth)


def one_lane_trace(n_events: int, seed: int = 0) -> Trace:
    """`n_events` back-to-back-ish compute events on a single lane (for 10^6-on-one-lane)."""
    rng = np.random.default_rng(seed)
    durs = rng.integers(1, 1_000, size=n_events)
    starts = np.cumsum(durs + rng.integers(0, 500, size=n_events)) - durs
    events = {
        "id": np.arange(n_events),
        "track": np.zeros(n_events, np.int64),
        "name": ["k"] * n_events,
        "kind": ["compute"] * n_events,
        "ts": starts,
        "dur": durs,
        "depth": np.zeros(n_events, np.int64),
    }
    tracks = {
        "track": [0],
        "rank": [0],
        "pid": ["0"],
        "tid": ["0"],
        "thread_name": ["stream 7"],
        "unit": ["stream"],
    }
    return Trace.from_frames(events, tracks, meta={"format": "chrome-json", "flavor": "chrome"})
