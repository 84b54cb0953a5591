"""Random traces for the analyzer's property tests (seeded numpy; hypothesis draws the seeds)."""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.trace.model import Trace

DEVICE_UNITS = ["aic", "aiv", "link", "stream"]


def random_trace(
    seed: int,
    *,
    n_ranks: int = 2,
    max_tracks: int = 4,
    max_events: int = 12,
    steps: bool = True,
    deps: int = 20,
    backward: bool = True,
    cpu_only: bool = False,
    annotations: bool = False,
) -> Trace:
    """A small multi-rank trace: device tracks with nested slices, a host thread with launch
    calls, optional ProfilerStep markers and random dependency edges of every kind. With
    `annotations`: Kineto-style annotation ranges over the work (gpu_user_annotation on
    device tracks, user_annotation on host threads) and overflow lanes (a second track with
    the same pid/tid) holding work that overlaps its stream's."""
    rng = np.random.default_rng(seed)
    tracks: dict[str, list[object]] = {k: [] for k in ("track", "rank", "pid", "tid", "unit")}
    ev: dict[str, list[object]] = {
        k: [] for k in ("id", "track", "name", "cat", "kind", "ts", "dur", "flops")
    }
    t_id = 0

    def add(
        track: int,
        name: str,
        kind: str,
        ts: int,
        dur: int,
        flops: float | None,
        cat: str | None = None,
    ) -> None:
        ev["id"].append(len(ev["id"]))
        ev["track"].append(track)
        ev["name"].append(name)
        ev["cat"].append(cat)
        ev["kind"].append(kind)
        ev["ts"].append(int(ts))
        ev["dur"].append(int(dur))
        ev["flops"].append(flops)

    for rank in range(n_ranks):
        units = rng.choice(DEVICE_UNITS, size=int(rng.integers(1, max_tracks + 1))).tolist()
        if cpu_only:  # a gloo job: main thread + gloo worker threads, no device at all
            units = ["cpu"] * len(units)
        for unit in [*units, "cpu"]:
            tracks["track"].append(t_id)
            tracks["rank"].append(rank)
            tracks["pid"].append(str(rank))
            tracks["tid"].append(str(t_id))
            tracks["unit"].append(unit)
            t = int(rng.integers(0, 50))
            for _ in range(int(rng.integers(0, max_events + 1))):
                dur = int(rng.choice([0, int(rng.integers(1, 60))], p=[0.1, 0.9]))
                if unit == "cpu":
                    kind = str(rng.choice(["host", "host", "other"]))
                    if cpu_only and rng.random() < 0.3:
                        name = str(rng.choice(["c10d::allreduce_", "gloo:all_reduce"]))
                        add(t_id, name, kind, t, dur, None)
                        t += dur + int(rng.integers(0, 40))
                        continue
                else:
                    kind = str(rng.choice(["compute", "compute", "comm", "memory", "other"]))
                flops = float(rng.integers(0, 1000)) if kind == "compute" else None
                add(t_id, f"{kind}{len(ev['id'])}", kind, t, dur, flops)
                if dur >= 4 and rng.random() < 0.3:  # a nested child
                    c0 = t + int(rng.integers(0, dur // 2))
                    ckind = "host" if unit == "cpu" else str(rng.choice(["compute", "comm"]))
                    cname = "c10d::wait" if cpu_only and rng.random() < 0.5 else "child"
                    add(
                        t_id,
                        f"{cname}{len(ev['id'])}" if cname == "child" else cname,
                        ckind,
                        c0,
                        int(rng.integers(0, dur // 2)),
                        None,
                    )
                t += dur + int(rng.choice([0, int(rng.integers(0, 40))]))
            if annotations:
                lo, hi = sorted(int(x) for x in rng.integers(0, max(t, 1) + 1, 2))
                cat = "user_annotation" if unit == "cpu" else "gpu_user_annotation"
                kind = "host" if unit == "cpu" else str(rng.choice(["marker", "other"]))
                add(t_id, f"annotation{len(ev['id'])}", kind, lo, hi - lo, None, cat)
            t_id += 1
            if annotations and unit != "cpu" and rng.random() < 0.5:
                # an overflow lane: same pid/tid, work overlapping the stream's
                tracks["track"].append(t_id)
                tracks["rank"].append(rank)
                tracks["pid"].append(str(rank))
                tracks["tid"].append(str(t_id - 1))
                tracks["unit"].append(unit)
                for _ in range(int(rng.integers(1, 4))):
                    kind = str(rng.choice(["compute", "comm", "memory"]))
                    start = int(rng.integers(0, max(t, 1)))
                    add(t_id, f"{kind}{len(ev['id'])}", kind, start, int(rng.integers(1, 60)), None)
                t_id += 1
        if steps:
            tracks["track"].append(t_id)
            tracks["rank"].append(rank)
            tracks["pid"].append(str(rank))
            tracks["tid"].append("steps")
            tracks["unit"].append("cpu")
            lo = int(rng.integers(0, 30))
            for step in range(int(rng.integers(1, 4))):
                length = int(rng.integers(100, 400))
                add(t_id, f"ProfilerStep#{step + 5}", "marker", lo, length, None)
                lo += length + int(rng.integers(0, 3)) * 20
            t_id += 1
    n = len(ev["id"])
    dsrc: list[int] = []
    ddst: list[int] = []
    dkind: list[str] = []
    if n >= 2:
        ts = np.array(ev["ts"])
        for _ in range(int(rng.integers(0, deps + 1))):
            a, b = (int(x) for x in rng.integers(0, n, 2))
            if a == b:
                continue
            if not backward and ts[a] > ts[b]:
                a, b = b, a
            dsrc.append(a)
            ddst.append(b)
            dkind.append(str(rng.choice(["data", "launch", "sync", "flow"])))
    return Trace.from_frames(
        pl.DataFrame(ev, schema_overrides={"flops": pl.Float64, "cat": pl.String}),
        tracks,
        {"src": dsrc, "dst": ddst, "kind": dkind},
        compute_depth=True,
    )


def asap_trace(seed: int, *, n_tasks: int = 40, n_tracks: int = 4, n_ranks: int = 1) -> Trace:
    """A task graph scheduled as soon as possible: each task starts when its track is free
    and its dependencies are done (like the executor). Its makespan is the longest path."""
    rng = np.random.default_rng(seed)
    units = ["aic", "aiv", "link"]
    n_tr = n_tracks * n_ranks
    track_of = rng.integers(0, n_tr, n_tasks)
    dur = rng.integers(1, 50, n_tasks)
    preds: list[list[int]] = [[] for _ in range(n_tasks)]
    for i in range(1, n_tasks):
        for j in rng.choice(i, size=min(i, int(rng.integers(0, 3))), replace=False):
            preds[i].append(int(j))
    free = np.zeros(n_tr, dtype=np.int64)
    ts = np.zeros(n_tasks, dtype=np.int64)
    for i in range(n_tasks):
        ready = max([int(ts[j] + dur[j]) for j in preds[i]], default=0)
        ts[i] = max(ready, int(free[track_of[i]]))
        free[track_of[i]] = ts[i] + dur[i]
    kinds = ["comm" if units[t % n_tracks % 3] == "link" else "compute" for t in track_of]
    events = {
        "id": list(range(n_tasks)),
        "track": track_of.tolist(),
        "name": [f"task{i}" for i in range(n_tasks)],
        "kind": kinds,
        "ts": ts.tolist(),
        "dur": dur.tolist(),
    }
    tracks = {
        "track": list(range(n_tr)),
        "rank": [t // n_tracks for t in range(n_tr)],
        "unit": [units[t % n_tracks % 3] for t in range(n_tr)],
    }
    src = [j for i in range(n_tasks) for j in preds[i]]
    dst = [i for i in range(n_tasks) for _ in preds[i]]
    return Trace.from_frames(
        events, tracks, {"src": src, "dst": dst, "kind": ["data"] * len(src)}, compute_depth=True
    )
