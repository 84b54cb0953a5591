"""Seeded trace builders for tests (numpy; a hypothesis test draws the seeds).

`random_trace`: small random multi-rank traces for the analyzer's properties; `asap_trace`: a
task graph scheduled as soon as possible (makespan = longest path); `executor_like` and
`kineto_like`: realistic shapes for the file formats' round trips. Times are ns.
"""

from __future__ import annotations

from typing import Any

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


def executor_like(ranks: int = 16, tiles: int = 40, seed: int = 1) -> Trace:
    """Per rank: a step marker lane, 4 aic + 2 aiv cores and 2 links; tile tasks back to back
    per lane, data deps fanning out from each aic tile to aiv/link tasks and back in."""
    rng = np.random.default_rng(seed)
    lanes = [("marker", "cpu")] + [(f"aic {i}", "aic") for i in range(4)]
    lanes += [(f"aiv {i}", "aiv") for i in range(2)] + [(f"link {i}", "link") for i in range(2)]
    track_rows: dict[str, list[Any]] = {
        k: []
        for k in (
            "track",
            "rank",
            "pid",
            "tid",
            "thread_name",
            "unit",
            "sort_index",
            "process_name",
        )
    }
    ev: dict[str, list[Any]] = {
        k: [] for k in ("id", "track", "name", "kind", "ts", "dur", "flops", "bytes")
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}
    for rank in range(ranks):
        for index, (lane, unit) in enumerate(lanes):
            track = rank * len(lanes) + index
            for key, value in (
                ("track", track),
                ("rank", rank),
                ("pid", str(rank)),
                ("tid", str(index)),
                ("thread_name", lane),
                ("unit", unit),
                ("sort_index", index),
                ("process_name", f"rank {rank}"),
            ):
                track_rows[key].append(value)
            if unit == "cpu":
                continue
            durs = rng.integers(100, 1000, tiles)
            starts = np.concatenate([[0], np.cumsum(durs)[:-1]])
            for t in range(tiles):
                ev["id"].append(len(ev["id"]))
                ev["track"].append(track)
                ev["name"].append(f"{unit} tile {t}")
                ev["kind"].append("comm" if unit == "link" else "compute")
                ev["ts"].append(int(starts[t]))
                ev["dur"].append(int(durs[t]))
                ev["flops"].append(float(durs[t]) * 1e6 if unit != "link" else None)
                ev["bytes"].append(float(durs[t]) * 64 if unit == "link" else None)
        end = max(e + d for e, d in zip(ev["ts"], ev["dur"], strict=True))
        ev["id"].append(len(ev["id"]))
        ev["track"].append(rank * len(lanes))
        ev["name"].append("step 0")
        ev["kind"].append("marker")
        ev["ts"].append(0)
        ev["dur"].append(end)
        ev["flops"].append(None)
        ev["bytes"].append(None)
    n = len(ev["id"])
    src = rng.integers(0, n, 3 * n)
    fan_out = np.repeat(src[: n // 4], 3)  # each of these sources feeds three tasks
    fan_in_dst = np.repeat(rng.integers(0, n, n // 4), 3)  # ...and these wait for three
    deps["src"] = np.concatenate([fan_out, rng.integers(0, n, len(fan_in_dst))]).tolist()
    deps["dst"] = np.concatenate([rng.integers(0, n, len(fan_out)), fan_in_dst]).tolist()
    deps["kind"] = ["data"] * len(deps["src"])
    meta = {
        "format": "executor",
        "flavor": "moetrace",
        "peak_flops": 3.5e14,
        "executor": {"workload": {"experts": 256}, "schedule": "tile"},
    }
    return Trace.from_frames(ev, track_rows, deps, None, meta, compute_depth=True)


def kineto_like() -> Trace:
    """Host thread with ProfilerStep#N > aten ops > cudaLaunchKernel, GPU kernels on a
    stream (launch flows), a gpu_user_annotation marker lane, a "Spans" pid, an Ascend-style
    pid above 2^32, and a memory counter."""
    steps = 3
    ev: dict[str, list[Any]] = {
        k: [] for k in ("id", "track", "name", "cat", "kind", "ts", "dur", "args")
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}

    def add(
        track: int, name: str, cat: str, kind: str, ts: int, dur: int, args: str | None = None
    ) -> int:
        ev["id"].append(len(ev["id"]))
        for key, value in (
            ("track", track),
            ("name", name),
            ("cat", cat),
            ("kind", kind),
            ("ts", ts),
            ("dur", dur),
            ("args", args),
        ):
            ev[key].append(value)
        return int(ev["id"][-1])

    base = 1_700_000_000_000_000_000
    for step in range(steps):
        t = base + step * 10_000
        add(0, f"ProfilerStep#{step}", "user_annotation", "marker", t, 9_000)
        add(0, "aten::linear", "cpu_op", "host", t + 100, 3_000, '{"Input Dims": [[8, 16]]}')
        add(0, "aten::addmm", "cpu_op", "host", t + 100, 2_000)
        launch = add(
            0, "cudaLaunchKernel", "cuda_runtime", "host", t + 500, 200, '{"correlation": 7}'
        )
        kernel = add(
            1,
            "ampere_sgemm_128x64",
            "kernel",
            "compute",
            t + 1_000,
            4_000,
            '{"stream": 7, "grid": [1, 2, 3]}',
        )
        add(2, "forward", "gpu_user_annotation", "marker", t + 900, 5_000)
        add(3, "ncclDevKernel_AllReduce", "kernel", "comm", t + 5_500, 1_000)
        add(4, "span", "python_function", "host", t, 50)
        deps["src"].append(launch)
        deps["dst"].append(kernel)
        deps["kind"].append("launch")
    tracks = {
        "track": [0, 1, 2, 3, 4],
        "rank": [0, 0, 0, 0, None],
        "pid": ["2718", "0", "0", "4376751100", "Spans"],
        "tid": ["2718", "stream 7", "stream 7 annotations", "stream 13", "Spans"],
        "process_name": ["python3", "GPU 0", "GPU 0", "HCCL", "Spans"],
        "thread_name": ["python3", "stream 7", "stream 7 annotations", "stream 13", None],
        "unit": ["cpu", "stream", "stream", "stream", "cpu"],
        "sort_index": [0, 10, 11, 12, None],
    }
    counters = {
        "track": [1] * 4,
        "name": ["Memory"] * 4,
        "ts": [base + i * 5_000 for i in range(4)],
        "value": [1.0, 2e9, 3.5, 0.0],
    }
    meta = {
        "format": "chrome-json",
        "flavor": "kineto",
        "source": ["x.json"],
        "distributedInfo": {"rank": 0, "world_size": 8},
    }
    return Trace.from_frames(ev, tracks, deps, counters, meta, compute_depth=True)
