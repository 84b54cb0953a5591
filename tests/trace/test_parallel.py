"""Several files on several processes (and on a local Ray cluster) give the same `Trace` as
one process reading them in turn."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import polars as pl
import pytest

from moetrace.testing.compare import assert_trace_equal
from moetrace.trace.io import load
from moetrace.trace.model import Trace, TraceFormatError
from moetrace.trace.parallel import call_on_trace, map_files

OLD_NS = 1_700_000_000_000_000_000


def _rank_file(path: Path, rank: int, n: int) -> Path:
    """A Kineto-like rank file: nested CPU ops and a stream of kernels, rank in the file."""
    events: list[dict[str, object]] = []
    for i in range(n):
        ts = i * 20 + rank
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"aten::op{i % 5}",
                "pid": 7,
                "tid": 1,
                "ts": ts,
                "dur": 15,
                "args": {"rank": rank},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::inner",
                "pid": 7,
                "tid": 1,
                "ts": ts + 2,
                "dur": 5,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"k{(i + rank) % 3}",
                "pid": 0,
                "tid": 7,
                "ts": ts + 4,
                "dur": 9,
            }
        )
    doc = {"distributedInfo": {"rank": rank, "world_size": 4}, "traceEvents": events}
    path.write_text(json.dumps(doc))
    os.utime(path, ns=(OLD_NS, OLD_NS))
    return path


@pytest.fixture
def rank_files(tmp_path: Path) -> list[Path]:
    return [_rank_file(tmp_path / f"rank{r}.json", r, 40 + 7 * r) for r in range(4)]


def _busy_ns(trace: Trace) -> dict[str, int]:
    """A per-rank figure (total kernel time) computed where the rank was loaded."""
    kernels = trace.events.filter(pl.col("cat") == "kernel")
    return {"events": trace.events.height, "kernel_ns": int(kernels["dur"].sum())}


def test_parallel_load_equals_serial(rank_files: list[Path]) -> None:
    serial = load(rank_files, jobs=1, cache=False)
    parallel = load(rank_files, jobs=2, cache=False)
    assert_trace_equal(serial, parallel, meta=True)
    assert serial.ranks == [0, 1, 2, 3]
    assert serial.events.height == 3 * (40 + 47 + 54 + 61)


def test_parallel_load_through_cache_equals_serial(rank_files: list[Path]) -> None:
    serial = load(rank_files, jobs=1, cache=False)
    assert_trace_equal(serial, load(rank_files, jobs=2), meta=True)  # workers write the entries
    assert_trace_equal(serial, load(rank_files, jobs=2), meta=True)  # workers read them


def test_worker_error_is_raised_as_itself(rank_files: list[Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", ')
    with pytest.raises(TraceFormatError) as info:
        load([*rank_files, bad], jobs=2, cache=False)
    assert str(bad) in str(info.value)


def test_per_rank_results_in_workers(rank_files: list[Path]) -> None:
    func = functools.partial(call_on_trace, _busy_ns, cache=False)
    serial = [func(p) for p in rank_files]
    assert map_files(func, rank_files, jobs=2) == serial
    assert [s["kernel_ns"] for s in serial] == [9000 * n for n in (40, 47, 54, 61)]


def test_ray_local_cluster_equals_local_engine(rank_files: list[Path]) -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'moetrace[ray]')")
    ray.init(
        num_cpus=2, object_store_memory=200 * 2**20, include_dashboard=False, log_to_driver=False
    )
    # Ray workers cannot import this test module: ship _busy_ns by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        local = load(rank_files, jobs=1, cache=False)
        on_ray = load(rank_files, engine="ray", cache=False)
        assert_trace_equal(local, on_ray, meta=True)
        func = functools.partial(call_on_trace, _busy_ns, cache=False)
        assert map_files(func, rank_files, engine="ray") == [func(p) for p in rank_files]
        bad = rank_files[0].with_name("bad.json")
        bad.write_text("[{")
        with pytest.raises(TraceFormatError):
            load([rank_files[0], bad], engine="ray", cache=False)
    finally:
        ray.shutdown()


def test_small_inputs_stay_in_process(
    rank_files: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an explicit job count, a few small files are not worth starting workers."""
    import concurrent.futures

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process pool was started")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    assert load(rank_files, cache=False).frames_equal(load(rank_files, jobs=1, cache=False))
    with pytest.raises(AssertionError, match="process pool"):
        load(rank_files, jobs=2, cache=False)
