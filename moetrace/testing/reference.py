"""Slow, obviously-correct reference implementations of METRICS.md (plain Python, no numpy).

Everything here works on lists of Python ints, one window at a time, straight from the
definitions; the tests assert that the vectorised analyzer gives the same numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from moetrace.trace.model import Trace

STEP = re.compile(r"^(?:ProfilerStep#|step )(\d+)$")
DEVICE = ("aic", "aiv", "link", "stream")
TOL = 1_000


def late_launch(dep: dict[str, Any], by_id: dict[int, dict[str, Any]]) -> bool:
    """A launch edge whose call starts more than TOL after the work it launched (ignored)."""
    return bool(dep["kind"] == "launch" and by_id[dep["src"]]["ts"] > by_id[dep["dst"]]["ts"] + TOL)


def union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(x for x in iv if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def length(iv: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(iv))


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return union([(max(s, s2), min(e, e2)) for s, e in union(a) for s2, e2 in union(b)])


def minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for s, e in union(a):
        cur = s
        for s2, e2 in union(b):
            if e2 <= cur or s2 >= e:
                continue
            if s2 > cur:
                out.append((cur, s2))
            cur = max(cur, e2)
        if cur < e:
            out.append((cur, e))
    return union(out)


def clip(iv: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(s, lo), min(e, hi)) for s, e in iv if min(e, hi) > max(s, lo)]


@dataclass
class Ref:
    windows: dict[tuple[int, Any], tuple[int, int]] = field(default_factory=dict)
    metrics: dict[tuple[int, Any], dict[str, Any]] = field(default_factory=dict)
    busy: dict[tuple[int, Any, int], int] = field(default_factory=dict)
    gaps: dict[tuple[int, Any, int], list[tuple[int, int, Any, Any, str]]] = field(
        default_factory=dict
    )
    path: dict[tuple[int, Any], list[tuple[Any, int, int]]] = field(default_factory=dict)
    gate: dict[int, int] = field(default_factory=dict)


CPU_COMM = re.compile(r"^(c10d::|gloo:|_c10d_functional::wait|record_param_comms$)")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
WAIT = re.compile(r"(?i)wait|sync")


def reference(trace: Trace, time_range: tuple[int, int] | None = None) -> Ref:
    """All per-window metrics (no device comm-name widening). Without device tracks, host
    threads are the units: c10d::/gloo: calls are comm, host slices containing no comm call
    are compute. With `time_range`, windows are clipped to it (paths are not computed)."""
    tr = {r["track"]: r for r in trace.tracks.iter_rows(named=True)}
    # a queue is the lowest track with the same (rank, pid, tid): overflow lanes joined
    for t in tr.values():
        same = [
            o["track"]
            for o in tr.values()
            if t["pid"] is not None
            and t["tid"] is not None
            and (o["rank"], o["pid"], o["tid"]) == (t["rank"], t["pid"], t["tid"])
        ]
        t["queue"] = min(same) if same else t["track"]
    for t in tr.values():
        t["unit"] = tr[t["queue"]]["unit"]
    cpu_mode = not any(t["unit"] in DEVICE for t in tr.values())
    units = ("cpu",) if cpu_mode else DEVICE
    ev = []
    for i, r in enumerate(trace.events.iter_rows(named=True)):
        t = tr[r["track"]]
        ev.append(
            {
                **r,
                "idx": i,
                "end": r["ts"] + r["dur"],
                "rank": t["rank"] if t["rank"] is not None else -1,
                "unit": t["unit"],
                "queue": t["queue"],
                "device": t["unit"] in units,
            }
        )

    def annotate() -> None:
        for e in ev:
            if STEP.match(e["name"] or "") or (
                e.get("cat") in ANNOTATION_CATS and e["kind"] != "comm"
            ):
                e["kind"] = "marker"

    if cpu_mode:
        for e in ev:
            if e["device"] and e["kind"] != "marker" and CPU_COMM.match(e["name"]):
                e["kind"] = "comm"
        annotate()
        comm_starts = [(e["queue"], e["ts"]) for e in ev if e["device"] and e["kind"] == "comm"]
        for e in ev:
            if e["device"] and e["kind"] in ("host", "compute", "other") and e["end"] > e["ts"]:
                inside = any(q == e["queue"] and e["ts"] <= c < e["end"] for q, c in comm_starts)
                if not inside:
                    e["kind"] = "compute"
    annotate()
    for e in ev:
        device_wait = e["kind"] == "other" and e["unit"] != "cpu" and WAIT.search(e["name"])
        e["work"] = e["device"] and e["kind"] != "marker" and e["end"] > e["ts"] and not device_wait
    by_id = {e["id"]: e for e in ev}
    # steps
    markers: dict[int, dict[int, list[int]]] = {}
    for e in ev:
        m = STEP.match(e["name"])
        if e["kind"] == "marker" and m:
            d = markers.setdefault(e["rank"], {})
            lo_hi = d.setdefault(int(m.group(1)), [e["ts"], e["end"]])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], e["ts"]), max(lo_hi[1], e["end"])

    def step_at(rank: int, t: int) -> Any:
        cands = [(lo, hi, s) for s, (lo, hi) in markers.get(rank, {}).items() if lo <= t]
        if not cands:
            return None
        lo, hi, s = max(cands)
        return s if (t < hi or t == lo) else None

    for e in ev:
        e["step"] = step_at(e["rank"], e["ts"])
    launch_steps: dict[int, list[int]] = {}
    for r in trace.deps.iter_rows(named=True):
        if r["kind"] == "launch" and r["src"] != r["dst"] and not late_launch(r, by_id):
            s = by_id[r["src"]]["step"]
            if s is not None:
                launch_steps.setdefault(r["dst"], []).append(s)
    for e in ev:
        if e["device"] and e["id"] in launch_steps and markers:
            e["step"] = min(launch_steps[e["id"]])
    out = Ref()
    work = [e for e in ev if e["device"] and e["kind"] in ("compute", "comm")]
    keys = set()
    for e in work:
        if e["step"] is not None or e["rank"] not in markers:
            keys.add((e["rank"], e["step"]))
    raw = {}
    for k in keys:
        mine = [e for e in work if (e["rank"], e["step"]) == k]
        raw[k] = (min(e["ts"] for e in mine), max(e["end"] for e in mine))
    # the windows of a rank partition time: in start order, each ends where the next begins
    order = sorted(raw, key=lambda k: (k[0], raw[k][0], k[1] is not None, k[1] or 0))
    following: list[Any] = [*order[1:], None] if order else []
    for a, b in zip(order, following, strict=True):
        lo, hi = raw[a]
        if b is not None and b[0] == a[0]:
            hi = min(hi, raw[b][0])
        if time_range is not None:
            lo, hi = max(lo, time_range[0]), min(hi, time_range[1])
        if hi > lo:
            out.windows[a] = (lo, hi)

    def first_window(e: dict[str, Any]) -> Any:
        """The first window of the event's rank (by start) that it overlaps in time."""
        for k in sorted(out.windows, key=lambda k: out.windows[k]):
            lo, hi = out.windows[k]
            if k[0] == e["rank"] and e["ts"] < hi and (e["end"] > lo or e["ts"] >= lo):
                return k
        return None

    for e in ev:
        e["window"] = first_window(e)
    gates = gating(ev, trace)
    out.gate = gates
    for k, (lo, hi) in out.windows.items():
        # every device event of the rank counts, clipped to the window it runs in
        mine = [e for e in ev if e["device"] and e["rank"] == k[0]]
        C = clip([(e["ts"], e["end"]) for e in mine if e["kind"] == "compute"], lo, hi)
        M = clip([(e["ts"], e["end"]) for e in mine if e["kind"] == "comm"], lo, hi)
        comm, over = length(M), length(intersect(M, C))
        out.metrics[k] = {
            "window_ns": hi - lo,
            "compute_ns": length(C),
            "comm_ns": comm,
            "overlapped_ns": over,
            "exposed_comm_ns": length(minus(M, C)),
            "free_ns": hi - lo - length(C + M),
            "overlap_ratio": over / comm if comm else None,
        }
        for t, row in tr.items():
            rank = row["rank"] if row["rank"] is not None else -1
            if rank != k[0] or row["unit"] not in units or row["queue"] != t:
                continue
            top = [e for e in mine if e["queue"] == t and e["work"]]
            busy = union(clip([(e["ts"], e["end"]) for e in top], lo, hi))
            out.busy[(*k, t)] = length(busy)
            gl = []
            for s, e_ in minus([(lo, hi)], busy):
                before = [
                    x["id"]
                    for x in top
                    if min(x["end"], hi) == s and min(x["end"], hi) > max(x["ts"], lo)
                ]
                after = [
                    x
                    for x in top
                    if max(x["ts"], lo) == e_ and min(x["end"], hi) > max(x["ts"], lo)
                ]
                aft = max(after, key=lambda x: x["id"]) if after else None
                cause = "no-dependency"
                if aft is not None and aft["idx"] in gates:
                    g = ev[gates[aft["idx"]]]
                    if g["queue"] != aft["queue"]:
                        if g["kind"] == "comm":
                            cause = "wait:comm"
                        elif g["kind"] == "memory":
                            cause = "wait:memory"
                        elif g["unit"] == "cpu" or g["kind"] == "host":
                            cause = "wait:host"
                        else:
                            cause = f"wait:{g['unit']}"
                gl.append(
                    (s, e_, max(before) if before else None, aft["id"] if aft else None, cause)
                )
            out.gaps[(*k, t)] = gl
        if time_range is not None:
            continue
        last = max(
            (e for e in mine if e["kind"] in ("compute", "comm") and e["window"] == k),
            key=lambda e: (e["end"], e["idx"]),
        )
        out.path[k] = walk(ev, gates, last["idx"], lo, hi)
    return out


def gating(ev: list[dict[str, Any]], trace: Trace) -> dict[int, int]:
    """Gating predecessor (row -> row): latest end not after the start (+ TOL); for data and
    sync edges, not after the end."""
    nodes = [e for e in ev if e["kind"] != "marker"]
    idx_of = {e["id"]: e["idx"] for e in nodes}
    preds: dict[int, list[tuple[int, int]]] = {}
    for b in nodes:  # track order: the latest end not after my start on my queue
        if b["end"] > b["ts"]:
            before = [
                (a["end"], -a["idx"])
                for a in nodes
                if a["queue"] == b["queue"] and a["end"] > a["ts"] and a["end"] <= b["ts"]
            ]
            if before:
                preds.setdefault(b["idx"], []).append((-max(before)[1], 0))
    by_id = {e["id"]: e for e in ev}
    for r in trace.deps.iter_rows(named=True):
        if late_launch(r, by_id):
            continue
        if r["src"] in idx_of and r["dst"] in idx_of and r["src"] != r["dst"]:
            preds.setdefault(idx_of[r["dst"]], []).append(
                (idx_of[r["src"]], 2 if r["kind"] in ("sync", "data") else 1)
            )
    gates = {}
    for d, ps in preds.items():
        ok = [
            (ev[s]["end"], 1 if et else 0, -s)
            for s, et in ps
            if ev[s]["end"] <= ev[d]["ts"] + TOL or (et == 2 and ev[s]["end"] <= ev[d]["end"])
        ]
        if ok:
            gates[d] = -max(ok)[2]
    return gates


def walk(
    ev: list[dict[str, Any]], gates: dict[int, int], start: int, lo: int, hi: int
) -> list[tuple[Any, int, int]]:
    """Segments (event id or None for a wait, start, end), earliest first."""
    segs = []
    cursor = min(ev[start]["end"], hi)
    node, seen = start, set()
    while node not in seen:
        seen.add(node)
        seg_end = min(ev[node]["end"], cursor)
        if node not in gates:
            s = max(min(ev[node]["ts"], seg_end), lo)
            if seg_end > s:
                segs.append((ev[node]["id"], s, seg_end))
            break
        g_end = ev[gates[node]]["end"]
        s = max(min(max(ev[node]["ts"], g_end), seg_end), lo)
        if seg_end > s:
            segs.append((ev[node]["id"], s, seg_end))
        w = max(min(g_end, s), lo)
        if s > w:
            segs.append((None, w, s))
        cursor = w
        if cursor <= lo:
            break
        node = gates[node]
    return segs[::-1]
