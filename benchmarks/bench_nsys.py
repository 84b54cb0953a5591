"""Benchmark the Nsight Systems SQLite reader: 1M kernels (and their 1M CUDA runtime calls)
vs the same events as Chrome JSON, and the two bulk-read paths over sqlite3.

A seeded generator writes an nsys-shaped export (CUPTI_ACTIVITY_KIND_KERNEL and _RUNTIME with
correlation ids, StringIds) with `executemany`; moetrace loads it, writes the loaded trace as
Chrome JSON with its own writer and loads that back (cache off both times). Prints both load
times and their ratio (target: nsys <= 2x Chrome JSON, issue 22), then the time of the kernel
query through `cursor.fetchall` -> `pl.DataFrame(orient="row")` (what formats/sqlite.fetch
does) and through `pl.read_database` on the same connection.

Usage: python benchmarks/bench_nsys.py [--kernels 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from moetrace.trace.io import load, write_trace

KERNEL_NAMES = ["gemm_bf16", "flash_attn_fwd", "rms_norm", "ncclDevKernel_AllReduce_Sum_bf16"]


def generate(path: Path, n: int, seed: int = 0) -> None:
    """An nsys-shaped export: n kernels on 4 streams, each launched by one runtime call."""
    rng = np.random.default_rng(seed)
    gpid = 1234 << 24
    gtid = gpid | 1234
    stream = rng.integers(0, 4, n) + 7
    dur = rng.integers(2_000, 50_000, n)
    start = np.cumsum(rng.integers(1_000, 20_000, n)).astype(np.int64) * 2
    api_start = start - 1_500
    names = rng.integers(0, len(KERNEL_NAMES), n) + 1
    conn = sqlite3.connect(path)
    conn.executescript(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,"
        " streamId INT, correlationId INT, globalPid INT, shortName INT, demangledName INT,"
        " gridX INT, gridY INT, gridZ INT, blockX INT, blockY INT, blockZ INT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,"
        " correlationId INT, nameId INT);"
    )
    conn.executemany(
        "INSERT INTO StringIds VALUES (?, ?)",
        [(i + 1, k) for i, k in enumerate(KERNEL_NAMES)] + [(99, "cudaLaunchKernel")],
    )
    corr = np.arange(n)
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,?,?,?,?,?,128,1,1,256,1,1)",
        zip(
            start.tolist(),
            (start + dur).tolist(),
            stream.tolist(),
            corr.tolist(),
            [gpid] * n,
            names.tolist(),
            names.tolist(),
            strict=True,
        ),
    )
    conn.executemany(
        "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,99)",
        zip(
            api_start.tolist(), (api_start + 1_000).tolist(), [gtid] * n, corr.tolist(), strict=True
        ),
    )
    conn.commit()
    conn.close()


def _timed(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-nsys-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "synthetic.sqlite"
    if db.exists():
        db.unlink()
    generate(db, args.kernels)
    trace, t_db = _timed(lambda: load(db, cache=False))
    js = work / "synthetic.json"
    write_trace(trace, js, force=True)
    again, t_js = _timed(lambda: load(js, cache=False))
    ratio = t_db / t_js
    print(
        f"kernels {args.kernels}: events {trace.events.height} (json {again.events.height}); "
        f"nsys sqlite load {t_db:.2f} s, chrome json load {t_js:.2f} s, ratio {ratio:.2f}x "
        f"(target <= 2x): {'PASS' if ratio <= 2 else 'FAIL'}"
    )
    sql = (
        "SELECT start, end, deviceId, streamId, correlationId, globalPid, shortName "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    schema = {c: pl.Int64() for c in ("s", "e", "d", "st", "c", "p", "n")}
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        _, t_rows = _timed(
            lambda: pl.DataFrame(conn.execute(sql).fetchall(), schema=schema, orient="row")
        )
        _, t_pl = _timed(lambda: pl.read_database(sql, conn))
    finally:
        conn.close()
    print(f"kernel query: fetchall -> pl.DataFrame {t_rows:.2f} s; pl.read_database {t_pl:.2f} s")
    return 0 if ratio <= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
