"""Many trace files on all cores, or on a Ray cluster: `map_files` runs one function per file.

The local engine uses a process pool (spawned processes: Polars' thread pool does not survive a
fork); the Ray engine runs the same function as Ray tasks (`pip install moetrace[ray]`), so
only what the function returns travels back. Either way results come back in input order and
are the same as a loop in one process.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from moetrace.trace import progress
from moetrace.trace.formats.registry import read_file_cached
from moetrace.trace.model import Trace, TraceFormatError
from moetrace.trace.options import ENGINES

R = TypeVar("R")

PARALLEL_MIN_BYTES = 32 * 2**20
"""Below this many bytes of input, `read_many` reads in this process unless told a number of
jobs: starting a worker (~1 s of imports) costs more than parsing small files."""


def default_jobs() -> int:
    """The number of cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def map_files(
    func: Callable[[Path], R],
    paths: Sequence[Path],
    *,
    jobs: int | None = None,
    engine: str | None = None,
    address: str | None = None,
) -> list[R]:
    """`[func(p) for p in paths]`, run by `jobs` processes (default: the core count) on the
    local engine, or as Ray tasks on the cluster at `address` (default: start or join a local
    one). `func` must be picklable (a module-level function or a partial of one). An exception
    raised by `func` is raised here as itself."""
    engine = engine or "local"
    jobs = jobs or default_jobs()
    if engine == "ray":
        return _map_ray(func, paths, address)
    if engine != "local":
        raise TraceFormatError(None, f"unknown engine {engine!r} (use one of {ENGINES})")
    if jobs <= 1 or len(paths) <= 1:
        results = []
        for p in paths:
            results.append(func(p))
            progress.report(p, 1, 1)  # the viewer's progress: files done
        return results
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(paths)), mp_context=context) as pool:
        futures = {pool.submit(func, p): p for p in paths}
        for future in as_completed(futures):  # the viewer's progress: files done
            if future.exception() is None:
                progress.report(futures[future], 1, 1)
        return [future.result() for future in futures]


@contextmanager
def ray_session(address: str | None) -> Iterator[Any]:
    """The `ray` module, initialised: joins the cluster at `address`, or starts a local one of
    its own (shut down and its session folder removed on leaving)."""
    try:
        import ray
    except ImportError:
        raise TraceFormatError(
            None, "--engine ray needs Ray: pip install 'moetrace[ray]'"
        ) from None
    own_dir: str | None = None
    if not ray.is_initialized():
        if address is None:  # a local cluster of our own: its session folder is ours to remove
            # Ray's socket paths (session_<date>_<pid>/sockets/plasma_store, ~75 bytes) must
            # fit AF_UNIX's 107: a long $TMPDIR falls back to /tmp.
            base = tempfile.gettempdir()
            own_dir = tempfile.mkdtemp(
                prefix="mtray-",
                dir=base if len(base) <= 24 or not os.path.isdir("/tmp") else "/tmp",
            )
        extra: dict[str, Any] = {"_temp_dir": own_dir} if own_dir else {}
        ray.init(address=address, log_to_driver=False, include_dashboard=False, **extra)
    try:
        yield ray
    finally:
        if own_dir is not None:  # no Ray session folder left in the temp directory
            ray.shutdown()
            shutil.rmtree(own_dir, ignore_errors=True)


def _map_ray(func: Callable[[Path], R], paths: Sequence[Path], address: str | None) -> list[R]:
    """`func` over `paths` as Ray tasks; joins the cluster at `address` (or starts a local one)."""
    with ray_session(address) as ray:
        task: Any = ray.remote(_apply)
        try:
            return list(ray.get([task.remote(func, p) for p in paths]))
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, BaseException):
                raise cause from None
            raise


def _apply(func: Callable[[Path], R], path: Path) -> R:
    """`func(path)`: the one Ray task (Ray wraps functions, not partials)."""
    return func(path)


def _read_file(path: Path, flavor: str | None, cache: bool) -> Trace:
    return read_file_cached(path, flavor, use_cache=cache)


def read_many(
    paths: Sequence[Path],
    flavor: str | None,
    *,
    cache: bool = True,
    jobs: int | None = None,
    engine: str | None = None,
    address: str | None = None,
) -> list[Trace]:
    """Read every file (through the cache unless `cache` is False) with `map_files`."""
    local = (engine or "local") == "local"
    if local and not jobs and sum(p.stat().st_size for p in paths) < PARALLEL_MIN_BYTES:
        jobs = 1
    func = functools.partial(_read_file, flavor=flavor, cache=cache)
    return map_files(func, paths, jobs=jobs, engine=engine, address=address)


def call_on_trace(func: Callable[[Trace], Any], path: Path, *, cache: bool = True) -> Any:
    """Load one file and return `func(trace)`: used with `map_files` so that a worker loads and
    analyses one rank and only `func`'s (small) result travels back."""
    return func(_read_file(path, None, cache))
