"""What the events of a Chrome JSON trace mean, per producer ("flavor").

- kineto: PyTorch profiler (GPU pid = device, tid = stream; categories kernel, gpu_memcpy,
  cuda_runtime, cpu_op...; 2021 schema Kernel/Memcpy/Runtime/Operator; CPU-only gloo traces).
- ascend: torch_npu / msprof trace_view.json (Ascend Hardware streams, HCCL group and plane
  lanes, Overlap Analysis lanes, counter processes).
- moetrace: files written by moetrace itself (tracks, kinds and deps stored exactly).
- chrome: anything else; plain Chrome semantics, kinds guessed from names.

Each flavor sets the `unit` and `rank` of every track, the `kind` of every event and the
`kind` of every dependency (see METRICS.md / FORMATS.md for the rules).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.formats.chrome.build import Built
from moetrace.trace.model import TRACK_SCHEMA, Trace
from moetrace.trace.nesting import nesting_depth

STEP_MARKER = r"^(?:ProfilerStep#|step )(\d+)$"
"""Step markers (kind `marker`): Kineto/Ascend `ProfilerStep#N`, the executor's `step N`."""

KINETO_COMM_KERNEL = (
    r"^(?:nccl(?:Dev)?Kernel_|rccl|ncclDevKernel)"
    r"|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|cross_device_reduce"
    r"|deep_ep::.*(?:dispatch|combine)|^(?:dispatch|combine)(?:_kernel)?(?:<|$|\()"
)
"""Collective kernels on a GPU stream (METRICS.md): NCCL/RCCL, symmetric-memory and custom
all-reduce, DeepEP dispatch/combine. `Collective name` in args is checked first."""

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
_LAUNCH_FLOW_CATS = ["ac2g", "async_cpu_to_gpu", "HostToDevice", "async_npu"]
_ASCEND_PROCESSES = {
    "Ascend Hardware",
    "CANN",
    "HCCL",
    "Overlap Analysis",
    "Communication",
    "AI Core Freq",
}
ASCEND_COMPUTE_TASKS = [
    "AI_CORE",
    "AI_VECTOR_CORE",
    "MIX_AIC",
    "MIX_AIV",
    "AI_CPU",
    "FFTS_PLUS",
    "Other",
]
ASCEND_MEMORY_TASKS = ["SDMA", "SDMA_SQE", "PCIE_DMA_SQE", "DSA_SQE", "WRITE_BACK", "MEMCPY_ASYNC"]
_RANK_IN_PATH = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
_GENERIC_COMM = r"(?i)nccl|rccl|hccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast"


def detect_flavor(
    top: dict[str, Any], frame: pl.DataFrame, meta_rows: pl.DataFrame, path: str | Path
) -> str:
    """Guess the producer: moetrace key, Kineto top-level keys or categories, Ascend processes."""
    if isinstance(top.get("moetrace"), dict):
        return "moetrace"
    if any(
        k in top
        for k in ("schemaVersion", "distributedInfo", "deviceProperties", "baseTimeNanoseconds")
    ):
        return "kineto"
    procs = set(
        meta_rows.filter(pl.col("name") == "process_name")["args"]
        .str.extract(r'"name"\s*:\s*"([^"]*)"')
        .drop_nulls()
        .to_list()
    )
    if procs & _ASCEND_PROCESSES:
        return "ascend"
    cats = set(frame["cat"].drop_nulls().unique().to_list()) if frame.height else set()
    if cats & {
        "kernel",
        "cuda_runtime",
        "cpu_op",
        "gpu_memcpy",
        "ac2g",
        "Kernel",
        "Runtime",
        "Operator",
    }:
        if cats & {"HostToDevice", "async_npu"}:
            return "ascend"
        return "kineto"
    if Path(path).name == "trace_view.json":
        return "ascend"
    return "chrome"


def interpret(
    flavor: str, built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> Trace:
    """Apply a flavor's meaning to Chrome-level parts and assemble the `Trace`."""
    if built.stored:
        raw_meta = built.stored.get("meta")
        stored_meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        events = built.events.with_columns(pl.col("kind_ext").fill_null("other").alias("kind"))
        merged = {**stored_meta, **meta, "flavor": stored_meta.get("flavor", "moetrace")}
        merged["source"] = meta["source"]
        return _assemble(built, built.tracks, events, _stored_deps(built), merged, mark_steps=False)
    if flavor == "kineto":
        rank = _kineto_rank(top)
        if rank is None and isinstance(top.get("distributedInfo"), dict):
            given = top["distributedInfo"].get("rank")
            if given is not None:
                meta.setdefault("warnings", []).append(
                    f"distributedInfo.rank {str(given)[:40]!r} is not an integer in "
                    "0..2^31-1: rank unknown"
                )
        tracks, events = _kineto(built, rank)
    elif flavor == "ascend":
        rank = _ascend_rank(path)
        tracks, events = _ascend(built, rank)
    else:
        tracks, events = _generic(built)
    deps = built.flows.select(
        "src",
        "dst",
        pl.when(
            pl.col("cat").is_in(_LAUNCH_FLOW_CATS)
            | ((pl.col("cat") == "async") & (pl.col("name") == "launch"))
        )
        .then(pl.lit("launch"))
        .otherwise(pl.lit("flow"))
        .alias("kind"),
    )
    return _assemble(built, tracks, events, deps, meta)


def _assemble(
    built: Built,
    tracks: pl.DataFrame,
    events: pl.DataFrame,
    deps: pl.DataFrame,
    meta: dict[str, Any],
    *,
    mark_steps: bool = True,
) -> Trace:
    if mark_steps:
        # The regex runs only on names with a step prefix (a cheap test), not on every name.
        names = events["name"]
        prefixed = (
            names.str.starts_with("ProfilerStep#") | names.str.starts_with("step ")
        ).fill_null(False)
        if prefixed.any():
            where = prefixed.arg_true()
            hits = names.gather(where).str.contains(STEP_MARKER).fill_null(False)
            is_step = pl.repeat(False, events.height, dtype=pl.Boolean, eager=True)
            events = events.with_columns(
                pl.when(pl.lit(is_step.scatter(where, hits)))
                .then(pl.lit("marker"))
                .otherwise(pl.col("kind"))
                .alias("kind")
            )
    # Lazy select: Polars 2.1's eager select makes a transient one-chunk copy of the
    # many-chunk columns (~110 MB at 1M events), the lazy one does not.
    ev = (
        events.lazy()
        .select(
            "id", "track", "name", "cat", "kind", "ts", "dur", "depth", "flops", "bytes", "args"
        )
        .collect()
    )
    trace = Trace.from_frames(ev, tracks, deps, built.counters, meta)
    return trace


def _with_kind(events: pl.DataFrame, expr: pl.Expr) -> pl.DataFrame:
    return events.with_columns(pl.coalesce(pl.col("kind_ext"), expr).alias("kind"))


RANK_LIMIT = 2**31
"""Ranks are Int32: 0 .. 2^31-1."""


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


def _track_attr(tracks: pl.DataFrame, column: str) -> pl.Expr:
    """Per-event value of a track column: a lookup by track id (no join of the event frame)."""
    return pl.col("track").replace_strict(
        tracks["track"], tracks[column], default=None, return_dtype=tracks.schema[column]
    )


def _kineto(built: Built, rank: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    ev = built.events
    # Filter the track column alone (a frame filter or group_by costs ~100 MB at 1M events).
    gpu_tracks = ev["track"].filter(ev["cat"].is_in(_KINETO_GPU_CATS)).unique().to_list()
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
    is_kernel = ev["cat"].is_in(["kernel", "Kernel"]).fill_null(False)
    comm = pl.repeat(False, ev.height, dtype=pl.Boolean, eager=True)
    if is_kernel.any():
        # A filter of args would copy their text (~100 MB at 1M events): the literal test
        # runs on every row instead (cheap), the regex on the kernels' names only.
        collective = ev["args"].str.contains('"Collective name"', literal=True).fill_null(False)
        named = ev["name"].filter(is_kernel).str.contains(KINETO_COMM_KERNEL).fill_null(False)
        hit = collective.filter(is_kernel) | named
        comm = comm.scatter(is_kernel.arg_true(), hit)
    cpu_comm = (  # host ops are comm only in CPU-only traces: skip the regex otherwise
        pl.col("name").str.contains(r"^(?:gloo:|c10d::|nccl:|record_param_comms$)")
        if not has_gpu
        else pl.lit(False)
    )
    kind = (
        pl.when(pl.lit(comm))
        .then(pl.lit("comm"))
        .when(pl.lit(is_kernel))
        .then(pl.lit("compute"))
        .when(pl.col("cat").is_in(_KINETO_MEMORY_CATS))
        .then(pl.lit("memory"))
        .when(pl.col("cat") == "gpu_user_annotation")
        .then(pl.lit("marker"))
        .when(cpu_comm)
        .then(pl.lit("comm"))
        .when(pl.col("cat").is_in(_KINETO_HOST_CATS))
        .then(pl.lit("host"))
        .otherwise(pl.lit("other"))
    )
    return tracks, _with_kind(ev, kind)


def _ascend_rank(path: str | Path) -> int | None:
    """Rank from `*rank<N>*` in the path (torch_npu's `rank0_ascend_pt` folders), else from a
    `profiler_info_<N>.json` next to ASCEND_PROFILER_OUTPUT, else unknown."""
    p = Path(path)
    for part in reversed(p.parts):
        m = _RANK_IN_PATH.search(part)
        if m and int(m.group(1)) < RANK_LIMIT:
            return int(m.group(1))
    for parent in (p.parent, p.parent.parent):
        found = sorted(parent.glob("profiler_info_*.json")) if parent.is_dir() else []
        for info in found:
            digits = info.stem.rsplit("_", 1)[-1]
            if digits.isdigit() and int(digits) < RANK_LIMIT:
                return int(digits)
    return None


def _ascend(built: Built, rank: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    pname = pl.col("process_name").fill_null("")
    tname = pl.col("thread_name").fill_null("")
    tracks = built.tracks.with_columns(
        pl.when(pname == "Ascend Hardware")
        .then(pl.lit("stream"))
        .when(pname.is_in(["HCCL", "Communication"]))
        .then(pl.lit("link"))
        .when(pname.is_in(["Python", "CANN"]) | (pl.col("labels") == "CPU"))
        .then(pl.lit("cpu"))
        .otherwise(pl.lit("other"))
        .alias("unit"),
        pl.lit(rank, pl.Int32).alias("rank"),
    )
    ev = built.events.with_columns(
        _track_attr(tracks, "process_name").alias("process_name"),
        _track_attr(tracks, "thread_name").alias("thread_name"),
        _track_attr(tracks, "unit").alias("unit"),
    )
    task = pl.col("args").str.extract(r'"Task Type"\s*:\s*"([^"]*)"')
    kind = (
        pl.when(pname == "Overlap Analysis")
        .then(pl.lit("marker"))
        .when(pname.is_in(["HCCL", "Communication"]) & tname.str.contains(r"Communication$"))
        .then(pl.lit("comm"))
        .when(
            pname.is_in(["HCCL", "Communication"])
            & pl.col("name").str.contains(r"(?i)memcpy|reduce")
        )
        .then(pl.lit("memory"))
        .when(pname.is_in(["HCCL", "Communication"]))
        .then(pl.lit("other"))
        .when(pname == "Ascend Hardware")
        .then(
            pl.when(task.is_in(ASCEND_COMPUTE_TASKS) | task.is_null())
            .then(pl.lit("compute"))
            .when(task.is_in(ASCEND_MEMORY_TASKS))
            .then(pl.lit("memory"))
            .otherwise(pl.lit("other"))
        )
        .when(pl.col("unit") == "cpu")
        .then(pl.lit("host"))
        .otherwise(pl.lit("other"))
    )
    return tracks, _with_kind(ev, kind)


def _generic(built: Built) -> tuple[pl.DataFrame, pl.DataFrame]:
    tracks = built.tracks.with_columns(
        pl.when(pl.col("thread_name").str.to_lowercase().str.contains("stream").fill_null(False))
        .then(pl.lit("stream"))
        .otherwise(pl.lit("cpu"))
        .alias("unit"),
        pl.lit(None, pl.Int32).alias("rank"),
    )
    ev = built.events.with_columns(_track_attr(tracks, "unit").alias("unit"))
    kind = (
        pl.when(pl.col("name").str.contains(_GENERIC_COMM))
        .then(pl.lit("comm"))
        .when(pl.col("name").str.contains(r"(?i)memcpy|memset"))
        .then(pl.lit("memory"))
        .when(pl.col("unit") == "stream")
        .then(pl.lit("compute"))
        .otherwise(pl.lit("host"))
    )
    return tracks, _with_kind(ev, kind)


# ------------------------------------------------------------------ moetrace's own files
def restore_moetrace_tracks(
    slices: pl.DataFrame, counters: pl.DataFrame, stored: dict[str, Any], warnings: list[str]
) -> Built:
    """Files written by moetrace carry their tracks table, overflow lanes, event ids and deps:
    restore them exactly instead of re-deriving them (the round trip is lossless)."""
    tracks = pl.DataFrame(stored["tracks"]).with_columns(
        [pl.col(c).cast(t, strict=False) for c, t in TRACK_SCHEMA.items() if c in stored["tracks"]]
    )
    if isinstance(stored.get("lanes"), dict):
        schema = {"pid": pl.String, "tid": pl.String, "track": pl.UInt32}
        lookup = pl.DataFrame(stored["lanes"], schema=schema)
    else:
        lookup = tracks.select("pid", "tid", pl.col("track").cast(pl.UInt32))
    lookup = lookup.unique(["pid", "tid"], keep="first")
    slices = slices.join(lookup, on=["pid", "tid"], how="left", maintain_order="left")
    counters = counters.join(lookup, on=["pid", "tid"], how="left", maintain_order="left")
    lost = int(slices["track"].null_count())
    if lost:
        warnings.append(
            f"{lost} event(s) on threads missing from the moetrace track table, skipped"
        )
        slices = slices.filter(pl.col("track").is_not_null())
    ids = stored.get("event_ids")
    if isinstance(ids, list) and len(ids) == slices.height:
        slices = slices.with_columns(pl.Series("id", ids, dtype=pl.UInt32))
    depth, _ = nesting_depth(
        slices["track"].to_numpy(), slices["ts"].to_numpy(), slices["dur"].to_numpy()
    )
    slices = slices.with_columns(pl.Series("depth", depth, dtype=pl.UInt16))
    flows = pl.DataFrame(
        schema={"src": pl.Int64, "dst": pl.Int64, "cat": pl.String, "name": pl.String}
    )
    return Built(
        slices, tracks, flows, counters.select("track", "name", "ts", "value"), stored=stored
    )


def _stored_deps(built: Built) -> pl.DataFrame:
    deps = built.stored.get("deps") or {"src": [], "dst": [], "kind": []}
    return pl.DataFrame(deps, schema={"src": pl.UInt32, "dst": pl.UInt32, "kind": pl.String})
