"""The vectorised job view equals a slow, obvious pure-Python reference on random jobs:
clock offsets, skews, last ranks, caused waits, late counts and the job critical path."""

from __future__ import annotations

import statistics
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.analysis.job import analyze_job
from moetrace.trace.model import Trace

ARGS = '{"Collective name": "allreduce", "In msg nelems": 256, "dtype": "Float", "Process Group Name": "0"}'  # noqa: E501


@st.composite
def jobs(draw: st.DrawFn) -> tuple[int, list[list[int]], list[list[int]], list[int]]:
    """(ranks, arrivals[k][r], ends[k][r], shift[r]) in true time; ends >= last arrival."""
    n = draw(st.integers(2, 5))
    k = draw(st.integers(1, 10))
    prev = [0] * n
    arrivals, ends = [], []
    for _ in range(k):
        a = [prev[r] + draw(st.integers(1, 10_000)) for r in range(n)]
        last = max(a)
        e = [last + draw(st.integers(1, 3_000)) + draw(st.integers(0, 200)) for _ in range(n)]
        arrivals.append(a)
        ends.append(e)
        prev = e
    shift = [0] + [draw(st.integers(-5_000_000, 5_000_000)) for _ in range(n - 1)]
    return n, arrivals, ends, shift


def build(n: int, arrivals: list[list[int]], ends: list[list[int]], shift: list[int]) -> Trace:
    rows = [
        {"id": i * n + r, "track": r, "name": "ncclDevKernel_AllReduce", "kind": "comm",
         "ts": arrivals[i][r] + shift[r], "dur": ends[i][r] - arrivals[i][r], "args": ARGS}
        for i in range(len(arrivals))
        for r in range(n)
    ]  # fmt: skip
    tracks = pl.DataFrame(
        {"track": range(n), "rank": range(n), "pid": [str(r) for r in range(n)], "unit": "stream"}
    )
    return Trace.from_frames(pl.DataFrame(rows), tracks, compute_depth=True)


def reference(
    n: int, arr: list[list[int]], end: list[list[int]], shift: list[int]
) -> dict[str, Any]:
    """Plain Python over the rank-local times, following docs/metrics.md literally."""
    a = [[arr[i][r] + shift[r] for r in range(n)] for i in range(len(arr))]
    e = [[end[i][r] + shift[r] for r in range(n)] for i in range(len(arr))]
    offsets: list[float] = [0]
    for r in range(1, n):
        lower = max(a[i][r] - e[i][0] for i in range(len(a)))
        upper = min(e[i][r] - a[i][0] for i in range(len(a)))
        mid = statistics.median(e[i][r] - e[i][0] for i in range(len(a)))
        if lower <= 0 <= upper:  # one clock as far as causality can tell
            offsets.append(0)
        else:
            offsets.append(min(max(mid, lower), upper) if lower <= upper else mid)
    caused, late, skews, last_ranks = [0.0] * n, [0] * n, [], []
    for i in range(len(a)):
        al = [a[i][r] - offsets[r] for r in range(n)]
        last = max(range(n), key=lambda r: (al[r], r))
        skew = max(al) - min(al)
        skews.append(skew)
        last_ranks.append(last)
        if skew > 0:
            caused[last] += sum(al[last] - al[r] for r in range(n))
            late[last] += 1
    return {"offsets": offsets, "skews": skews, "last": last_ranks, "caused": caused, "late": late}


def reference_path(
    n: int, a: list[list[int]], e: list[list[int]], last: list[int]
) -> list[tuple[int, str, int, int]]:
    """The backward walk of docs/metrics.md over aligned times, by brute force."""
    k = len(a)
    lo = [min(a[i][r] for i in range(k)) for r in range(n)]
    hi = [max(e[i][r] for i in range(k)) for r in range(n)]
    rank = max(range(n), key=lambda r: (hi[r], -r))
    t = hi[rank]
    segs = []
    while True:
        cands = [i for i in range(k) if e[i][rank] <= t and a[i][rank] < t]
        if not cands:
            break
        i = max(cands, key=lambda i: (e[i][rank], a[i][rank]))
        if e[i][rank] <= lo[rank]:
            break
        gate = min(max(a[i][q] for q in range(n)), e[i][rank])
        segs += [(rank, "work", e[i][rank], t), (rank, "comm", gate, e[i][rank])]
        rank, t = last[i], gate
    segs.append((rank, "work", min(lo[rank], t), t))
    return [s for s in reversed(segs) if s[3] > s[2]]


def path_rows(job: object) -> list[tuple[int, str, int, int]]:
    frame = job.critical_path  # type: ignore[attr-defined]
    return [tuple(r) for r in frame.select("rank", "category", "start_ns", "end_ns").rows()]


@settings(max_examples=40, deadline=None)
@given(jobs())
def test_job_view_equals_the_slow_reference(job: tuple[Any, ...]) -> None:
    n, arrivals, ends, shift = job
    got = analyze_job(build(n, arrivals, ends, shift))
    ref = reference(n, arrivals, ends, shift)
    tol = 1.0  # the median of an even count may fall on a half nanosecond
    offsets = got.offsets.sort("rank")["offset_ns"].to_list()
    assert all(abs(o - x) <= tol for o, x in zip(offsets, ref["offsets"], strict=True))
    inst = got.collectives.sort("seq")
    assert all(abs(s - x) <= 2 * tol for s, x in zip(inst["skew_ns"], ref["skews"], strict=True))
    if offsets == ref["offsets"]:
        assert inst["last_rank"].to_list() == ref["last"]
        per = got.stragglers.group_by("rank").agg(pl.col("caused_wait_ns", "late_count").sum())
        per_rank = {r: (c, k) for r, c, k in per.rows()}
        for r in range(n):
            c, k = per_rank.get(r, (0, 0))
            assert c == ref["caused"][r] and k == ref["late"][r]
        # aligned = local - offset = true time + shift - offset
        k = len(arrivals)
        al = [[arrivals[i][r] + shift[r] - offsets[r] for r in range(n)] for i in range(k)]
        el = [[ends[i][r] + shift[r] - offsets[r] for r in range(n)] for i in range(k)]
        want = reference_path(n, al, el, ref["last"])
        assert path_rows(got) == want
    path = got.critical_path
    # the job path: contiguous segments that sum to its span
    assert (path["start_ns"].to_list()[1:] == path["end_ns"].to_list()[:-1]) or path.height <= 1
    span = path.select(pl.col("dur_ns").sum(), pl.col("end_ns").max() - pl.col("start_ns").min())
    assert int(span.item(0, 0)) == int(span.item(0, 1))
