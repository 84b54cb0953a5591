"""What counts as device work, communication and which collective: names and args to labels.

Readers already set `kind`; the analyzer widens `comm` with the name patterns of METRICS.md
(symmetric-memory / custom all-reduce kernels, DeepEP-style dispatch/combine) plus the
user's own patterns, and on CPU-only traces with `c10d::*` / `gloo:*` work.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl

DEVICE_UNITS = ("aic", "aiv", "link", "stream")
"""Units of device tracks (host threads are `cpu`)."""

WORK_KINDS = ("compute", "comm")
"""Event kinds that define a rank's window and the overlap metrics."""

DEFAULT_DEVICE_COMM_PATTERNS = (
    r"^nccl(Dev)?Kernel_",
    r"^rccl",
    r"multimem_all_reduce",
    r"one_shot_all_reduce",
    r"two_shot_all_reduce",
    r"cross_device_reduce",
    r"(?i)deep_?ep",
    r"(?i)(^|[_:])(dispatch|combine)(_|$|kernel)",
)
"""Device kernels that are communication even when a reader called them compute."""

CPU_COMM_PATTERN = r"^(c10d::|gloo:|_c10d_functional::wait|record_param_comms$)"
"""On CPU-only traces (gloo): the collective work and the calls that block on it (c10d ops,
gloo's own ranges, functional collectives' `wait_tensor`, Kineto's `record_param_comms`)."""

ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
"""Kineto categories of annotations: `record_function` ranges on host threads and their
mirrors on GPU streams. They label time, they are not work."""

DEVICE_WAIT_PATTERN = r"(?i)wait|sync"
"""Device slices of kind `other` that are waits, not work: Ascend EVENT_WAIT / Notify Wait,
Kineto `cuda_sync` (Context/Stream/Event Sync, Stream Wait Event). They stay nodes of the
critical path (they carry the dependency) but never count as busy."""

STEP_PATTERN = r"^(?:ProfilerStep#|step )(\d+)$"
"""Step markers: Kineto/Ascend `ProfilerStep#N`, the executor's `step N`."""

_COLLECTIVES: tuple[tuple[str, str], ...] = (
    ("all_to_all", r"(?i)all_?to_?all|alltoall|a2a|dispatch|combine|deep_?ep"),
    ("all_reduce", r"(?i)all_?reduce|allreduce"),
    ("all_gather", r"(?i)all_?gather|allgather"),
    ("reduce_scatter", r"(?i)reduce_?scatter|reducescatter"),
    ("broadcast", r"(?i)broadcast|bcast"),
    ("send_recv", r"(?i)send_?recv|sendrecv|^(send|recv)|p2p"),
    # c10d::reduce_ / gloo:reduce / "reduce" / ncclKernel_Reduce_*; c10d::barrier / gloo:barrier
    # (not c10d::monitored_barrier_, which gloo runs as sends and receives)
    ("reduce", r"(?i)^reduce$|(?:^|:)reduce_?$|Kernel_Reduce_"),
    ("barrier", r"(?i)(?:^|:)barrier"),
)
"""Collective family from the `Collective name` arg, else the event name (first match)."""


def check_patterns(patterns: Sequence[str]) -> list[str]:
    """Validate user regexes; raise ValueError naming the bad one."""
    out = []
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad --comm-pattern {pattern!r}: {exc}") from exc
        out.append(pattern)
    return out


def annotation_expr() -> pl.Expr:
    """True for annotations: step markers and other `marker` slices (Ascend Overlap Analysis
    lanes, the executor's steps), Kineto user / GPU user annotations (not when they are
    communication, e.g. gloo's own `gloo:*` ranges) and `ProfilerStep#N` / `step N` ranges."""
    return (
        (pl.col("kind") == "marker")
        | (pl.col("cat").is_in(ANNOTATION_CATS).fill_null(False) & (pl.col("kind") != "comm"))
        | pl.col("name").str.contains(STEP_PATTERN).fill_null(False)
    )


def comm_name_expr(patterns: Sequence[str]) -> pl.Expr:
    """True where the event name matches any of `patterns`."""
    if not patterns:
        return pl.lit(False)
    return pl.col("name").str.contains("|".join(f"(?:{p})" for p in patterns))


def collective_expr() -> pl.Expr:
    """The collective family of a comm event (all_to_all, all_reduce, ..., other)."""
    coll_arg = pl.col("args").str.extract(r'"Collective name"\s*:\s*"([^"]*)"', 1)
    text = pl.coalesce(coll_arg, pl.col("name"))
    expr: pl.Expr = pl.lit("other")
    for label, pattern in reversed(_COLLECTIVES):
        expr = pl.when(text.str.contains(pattern)).then(pl.lit(label)).otherwise(expr)
    return expr


def category_expr() -> pl.Expr:
    """Critical-path category of an event: compute-<unit>, comm, memory, host, other."""
    return (
        pl.when(pl.col("kind") == "compute")
        .then(pl.lit("compute-") + pl.col("unit").cast(pl.String).fill_null("other"))
        .when(pl.col("kind") == "comm")
        .then(pl.lit("comm"))
        .when(pl.col("kind") == "memory")
        .then(pl.lit("memory"))
        .when((pl.col("kind") == "host") | (pl.col("unit") == "cpu"))
        .then(pl.lit("host"))
        .otherwise(pl.lit("other"))
    )


def wait_cause(kind: str, unit: str) -> str:
    """Idle-gap cause from the gating predecessor's kind and unit: wait:comm, wait:memory,
    wait:host (host thread or host call), else wait:<unit> (wait:aic, wait:aiv, ...)."""
    if kind == "comm":
        return "wait:comm"
    if kind == "memory":
        return "wait:memory"
    if unit == "cpu" or kind == "host":
        return "wait:host"
    return f"wait:{unit}"
