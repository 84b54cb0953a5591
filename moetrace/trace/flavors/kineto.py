"""Kineto: the PyTorch profiler (GPU pid = device, tid = stream; categories kernel,
gpu_memcpy, cuda_runtime, cpu_op...; the 2021 schema Kernel/Memcpy/Runtime/Operator; CPU-only
gloo traces). Collective kernels are `comm`; the rank is `distributedInfo.rank`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors.base import DEVICE_COMM_KERNEL, RANK_LIMIT, Evidence, Flavor, with_kind
from moetrace.trace.flavors.built import Built
from moetrace.trace.flavors.kineto_links import kineto_links

NAME = "kineto"

_KINETO_GPU_CATS = [
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "Kernel",
    "Memcpy",
    "Memset",
    "cuda_sync",
]
_KINETO_MEMORY_CATS = ["gpu_memcpy", "gpu_memset", "Memcpy", "Memset"]
_KINETO_HOST_CATS = [
    "cpu_op",
    "cuda_runtime",
    "cuda_driver",
    "python_function",
    "user_annotation",
    "Operator",
    "Runtime",
    "cpu_instant_event",
    "overhead",
    "cuda_event",
    "Python",
    "python",
    "xpu_runtime",
    "xpu_driver",
    "mtia_runtime",
]

TOP_LEVEL_KEYS = ("schemaVersion", "distributedInfo", "deviceProperties", "baseTimeNanoseconds")
"""Top-level keys only Kineto writes."""
CATEGORIES = {
    "kernel",
    "cuda_runtime",
    "cpu_op",
    "gpu_memcpy",
    "ac2g",
    "Kernel",
    "Runtime",
    "Operator",
}
"""Event categories of Kineto traces (torch_npu's Ascend traces share some: see ascend)."""


def detect(evidence: Evidence) -> bool:
    """Kineto's top-level keys or categories (asked after `ascend`, which claims torch_npu's
    files that share Kineto's categories)."""
    return has_top_level_keys(evidence) or bool(evidence.categories & CATEGORIES)


def has_top_level_keys(evidence: Evidence) -> bool:
    """True when the file has a top-level key only Kineto writes."""
    return any(k in evidence.top for k in TOP_LEVEL_KEYS)


def interpret(
    built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Streams and host threads, the rank from distributedInfo (a bad one is a warning)."""
    rank = _kineto_rank(top)
    if rank is None and isinstance(top.get("distributedInfo"), dict):
        given = top["distributedInfo"].get("rank")
        if given is not None:
            meta.setdefault("warnings", []).append(
                f"distributedInfo.rank {str(given)[:40]!r} is not an integer in "
                "0..2^31-1: rank unknown"
            )
    return _kineto(built, rank)


def _kineto_rank(top: dict[str, Any]) -> int | None:
    info = top.get("distributedInfo")
    if isinstance(info, dict):
        value = info.get("rank")
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            return None
        try:
            rank = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return None
        return rank if 0 <= rank < RANK_LIMIT else None  # reported by `interpret`
    return None


def _kineto(built: Built, rank: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    ev = built.events
    cats = ev["cat"].unique().drop_nulls().to_list()  # a few distinct categories
    # Filter the track column alone (a frame filter or group_by costs ~100 MB at 1M events);
    # none to filter when no GPU category occurs (CPU-only and executor-like traces).
    gpu_cats = [c for c in cats if c in _KINETO_GPU_CATS]
    gpu_tracks = (
        ev["track"].filter(ev["cat"].is_in(gpu_cats)).unique().to_list() if gpu_cats else []
    )
    tracks = built.tracks.with_columns(
        pl.when(
            pl.col("track").is_in(gpu_tracks)
            | pl.col("labels").str.starts_with("GPU").fill_null(False)
            | pl.col("tid").str.starts_with("stream").fill_null(False)
            | pl.col("thread_name").str.to_lowercase().str.starts_with("stream").fill_null(False)
        )
        .then(pl.lit("stream"))
        .when(pl.col("pid").str.contains(r"^-?\d+$"))
        .then(pl.lit("cpu"))
        .otherwise(pl.lit("other"))
        .alias("unit"),
        pl.lit(rank, pl.Int32).alias("rank"),
    )
    has_gpu = bool(gpu_tracks)
    # Comm detection runs on kernel rows only (regexes over every host op would dominate).
    comm = pl.repeat(False, ev.height, dtype=pl.Boolean, eager=True)
    if "kernel" in cats or "Kernel" in cats:
        is_kernel = ev["cat"].is_in(["kernel", "Kernel"]).fill_null(False)
        # A filter of args would copy their text (~100 MB at 1M events): the literal test
        # runs on every row instead (cheap), the regex on the kernels' names only.
        collective = ev["args"].str.contains('"Collective name"', literal=True).fill_null(False)
        named = ev["name"].filter(is_kernel).str.contains(DEVICE_COMM_KERNEL).fill_null(False)
        hit = collective.filter(is_kernel) | named
        comm = comm.scatter(is_kernel.arg_true(), hit)
    cpu_comm = (  # host ops are comm only in CPU-only traces: skip the regex otherwise
        pl.col("name").str.contains(r"^(?:gloo:|c10d::|nccl:|record_param_comms$)")
        if not has_gpu
        else pl.lit(False)
    )
    # The kind a category gives (kernel, memory, marker, host, other), looked up once per
    # distinct category: one hash lookup per row instead of four is_in/== passes.
    by_cat = (
        pl.col("cat")
        .replace_strict(cats, [_kind_of_cat(c) for c in cats], default="other")
        .fill_null("other")
        if cats
        else pl.lit("other")
    )
    kind = (
        pl.when(pl.lit(comm))
        .then(pl.lit("comm"))
        .when(by_cat.is_in(["compute", "memory", "marker"]))
        .then(by_cat)
        .when(cpu_comm)
        .then(pl.lit("comm"))
        .otherwise(by_cat)
        if not has_gpu
        else pl.when(pl.lit(comm)).then(pl.lit("comm")).otherwise(by_cat)
    )
    return tracks, with_kind(ev, kind)


def _kind_of_cat(cat: str) -> str:
    """The kind of an event of category `cat` that is not comm: kernels compute, then
    memory copies and sets, GPU annotations markers, host categories host, else other."""
    if cat in ("kernel", "Kernel"):
        return "compute"
    if cat in _KINETO_MEMORY_CATS:
        return "memory"
    if cat == "gpu_user_annotation":
        return "marker"
    return "host" if cat in _KINETO_HOST_CATS else "other"


KINETO = Flavor(NAME, detect, interpret, links=kineto_links)
