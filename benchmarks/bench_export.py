"""Benchmark: 1M slices -> .pftrace, vectorised fast path vs the official streaming builder.

The official baseline is `moetrace.testing.pftrace_official.write_official` (a test oracle):
every packet built with the perfetto protobuf classes and written with
`StreamingTraceProtoBuilder.write_packet` (one Trace
message per packet). Both runs use the same seeded input in the same process, start to
end (layout included), and must produce byte-for-byte equal files.

Usage: python benchmarks/bench_export.py [n_slices]   (default 1_000_000; target >= 5x)
"""

from __future__ import annotations

import hashlib
import io
import sys
import time

import numpy as np
import polars as pl

from moetrace.testing.pftrace_official import write_official
from moetrace.trace.formats.pftrace.plan import make_plan
from moetrace.trace.formats.pftrace.write import write_pftrace
from moetrace.trace.model import Trace

TARGET = 5.0
TRACKS = 8
PER_GROUP = 4  # a parent slice and three nested children


def generated_trace(n_slices: int, seed: int = 0) -> Trace:
    """`n_slices` slices over 8 tracks (4 ranks x aic/link), nested 2 deep, with args on the
    parents, categories, ~5% cross-track data flows and a counter per rank."""
    rng = np.random.default_rng(seed)
    groups = n_slices // PER_GROUP
    track = np.arange(groups) % TRACKS
    index = np.arange(groups) // TRACKS
    jitter = rng.integers(0, 50, groups)
    start = index * 1_200 + jitter
    parent_dur = 1_000 + rng.integers(0, 100, groups)
    offsets = np.array([100, 400, 700])
    child_dur = rng.integers(50, 250, (groups, 3))
    ts = np.concatenate([start, (start[:, None] + offsets).ravel()])
    dur = np.concatenate([parent_dur, child_dur.ravel()])
    tracks = np.concatenate([track, np.repeat(track, 3)])
    n = len(ts)
    names = np.array([f"op_{i}" for i in range(48)], dtype=object)
    kinds = np.array(["compute", "comm", "memory"], dtype=object)
    args = np.full(n, None, dtype=object)
    args[:groups] = [f'{{"step": {i}, "tile": [{i % 7}, {i % 5}]}}' for i in range(groups)]
    flops = np.where(rng.random(n) < 0.5, rng.random(n) * 1e9, np.nan)
    child_ids = np.arange(groups, n)
    src = rng.choice(child_ids, n // 20, replace=False)
    dst = np.minimum(src + 3 * TRACKS + 1, n - 1)
    ranks = np.arange(TRACKS) // 2
    counter_ts = np.arange(0, int(ts.max()), 5_000)
    return Trace.from_frames(
        events={
            "id": np.arange(n),
            "track": tracks,
            "name": names[rng.integers(0, len(names), n)],
            "cat": np.where(np.arange(n) < groups, "step", "kernel"),
            "kind": kinds[rng.integers(0, 3, n)],
            "ts": ts,
            "dur": dur,
            "flops": pl.Series(flops).fill_nan(None),
            "args": pl.Series(args.tolist(), dtype=pl.String),
        },
        tracks={
            "track": np.arange(TRACKS),
            "rank": ranks,
            "pid": [str(r) for r in ranks],
            "tid": [str(t) for t in range(TRACKS)],
            "unit": ["aic" if t % 2 == 0 else "link" for t in range(TRACKS)],
            "sort_index": np.arange(TRACKS),
        },
        deps={"src": src, "dst": dst, "kind": ["data"] * len(src)},
        counters={
            "track": np.repeat(np.arange(0, TRACKS, 2), len(counter_ts)),
            "name": ["busy"] * (len(counter_ts) * (TRACKS // 2)),
            "ts": np.tile(counter_ts, TRACKS // 2),
            "value": rng.random(len(counter_ts) * (TRACKS // 2)),
        },
        meta={"flavor": "moetrace"},
        compute_depth=True,
    )


def timed_write(trace: Trace, fast: bool) -> tuple[float, bytes]:
    buffer = io.BytesIO()
    start = time.perf_counter()
    if fast:
        write_pftrace(trace, buffer)
    else:
        write_official(make_plan(trace), buffer)
    return time.perf_counter() - start, buffer.getvalue()


def main() -> int:
    n_slices = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    # Warm both paths up on a small trace first, so one-time costs (lazy imports, the
    # allocator growing its heap) are not charged to whichever path runs first.
    small = generated_trace(min(n_slices, 20_000), seed=1)
    timed_write(small, fast=True)
    timed_write(small, fast=False)
    trace = generated_trace(n_slices)
    packets = 2 * int((trace.events["dur"] > 0).sum()) + trace.counters.height
    print(
        f"input: {trace.events.height} slices, {trace.deps.height} flows, "
        f"{trace.counters.height} counter samples, {trace.tracks.height} tracks"
    )
    start = time.perf_counter()
    make_plan(trace)
    layout = time.perf_counter() - start
    fast_s, fast_bytes = timed_write(trace, fast=True)
    official_s, official_bytes = timed_write(trace, fast=False)
    equal = fast_bytes == official_bytes
    ratio = official_s / fast_s
    print(f"layout (shared by both paths): {layout:.2f} s")
    print(f"fast path: {fast_s:.2f} s ({packets / fast_s / 1e6:.2f} M packets/s)")
    print(
        f"official StreamingTraceProtoBuilder: {official_s:.2f} s "
        f"({packets / official_s / 1e3:.0f} k packets/s)"
    )
    print(f"speedup (official / fast, end to end): {ratio:.1f}x")
    print(
        f"encode-only speedup (layout excluded): {(official_s - layout) / (fast_s - layout):.1f}x"
    )
    print(
        f"output: {len(fast_bytes) / 1e6:.1f} MB, "
        f"{len(fast_bytes) / max(packets, 1):.1f} B/packet, "
        f"sha1 {hashlib.sha1(fast_bytes).hexdigest()[:12]}"
    )
    print(f"byte-for-byte equal: {equal}")
    ok = equal and ratio >= TARGET
    print(
        f"{'PASS' if ok else 'FAIL'}: {ratio:.1f}x vs target >= {TARGET:.0f}x, bytes equal={equal}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
