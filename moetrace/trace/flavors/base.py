"""What every flavor shares: the `Flavor` plug-in, the evidence detection looks at, and the
assembly of a `Trace` from Chrome-level parts once a flavor has given tracks their unit and
rank and events their kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors.built import Built, RestoreTracks
from moetrace.trace.model import Trace

STEP_MARKER = r"^(?:ProfilerStep#|step )(\d+)$"
"""Step markers (kind `marker`): Kineto/Ascend `ProfilerStep#N`, the executor's `step N`."""

DEVICE_COMM_KERNEL = (
    r"(?i)^(?:nccl|rccl)"
    r"|multimem_all_reduce|one_shot_all_reduce|two_shot_all_reduce|cross_device_reduce"
    r"|deep_ep::.*(?:dispatch|combine)|^(?:dispatch|combine)(?:_kernel)?(?:<|$|\()"
)
"""Collective kernels on a GPU stream, the readers' first guess at `kind == comm` (METRICS.md):
NCCL/RCCL (ncclKernel_*, ncclDevKernel_*, ncclSymkDevKernel_*), symmetric-memory and custom
all-reduce, DeepEP dispatch/combine. The classification stage (analysis/labels.py) refines it
with the libraries' rules; Kineto's `Collective name` arg is checked before it."""

LAUNCH_FLOW_CATS = ["ac2g", "async_cpu_to_gpu", "HostToDevice", "async_npu"]
"""Flow categories that are host -> device launches (Kineto ac2g, Ascend HostToDevice...)."""

RANK_LIMIT = 2**31
"""Ranks are Int32: 0 .. 2^31-1."""


@dataclass
class Evidence:
    """What detection may look at in a Chrome JSON file: its top-level keys, event frame, M
    rows and path. The process names and categories are computed once, on first use."""

    top: dict[str, Any]
    frame: pl.DataFrame
    meta_rows: pl.DataFrame
    path: str | Path

    @cached_property
    def process_names(self) -> set[str]:
        """Names given by `process_name` metadata events."""
        return set(
            self.meta_rows.filter(pl.col("name") == "process_name")["args"]
            .str.extract(r'"name"\s*:\s*"([^"]*)"')
            .drop_nulls()
            .to_list()
        )

    @cached_property
    def categories(self) -> set[str]:
        """Distinct event categories."""
        return (
            set(self.frame["cat"].drop_nulls().unique().to_list()) if self.frame.height else set()
        )


Interpret = Callable[
    [Built, dict[str, Any], str | Path, dict[str, Any]], tuple[pl.DataFrame, pl.DataFrame]
]
"""(parts, top-level keys, path, meta to add warnings to) -> (tracks with unit and rank,
events with kind)."""

Links = Callable[[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, Any]], pl.DataFrame]
"""(events with kind, tracks with unit and rank, flow deps, meta) -> deps."""


@dataclass(frozen=True)
class Flavor:
    """One producer of Chrome JSON traces (see flavors/__init__ for the registry).

    name: as in `meta["flavor"]` and `--flavor`. detect: does a file look like this
    producer's? interpret: units and ranks of tracks, kinds of events. restore: rebuild
    tracks the file stores exactly (moetrace's own), instead of laying them out. links:
    the deps the producer's own fields give beyond its flows (Kineto: launches by
    correlation id), from (events with kind, tracks with unit, flow deps, meta).
    """

    name: str
    detect: Callable[[Evidence], bool]
    interpret: Interpret
    restore: RestoreTracks | None = None
    links: Links | None = None


def track_attr(tracks: pl.DataFrame, column: str) -> pl.Expr:
    """Per-event value of a track column: a lookup by track id (no join of the event frame)."""
    return pl.col("track").replace_strict(
        tracks["track"], tracks[column], default=None, return_dtype=tracks.schema[column]
    )


def with_kind(events: pl.DataFrame, expr: pl.Expr) -> pl.DataFrame:
    """`kind` from the file's own `kind` field where present, else from `expr`. Lazy: Polars
    2.1's eager `with_columns` makes a transient one-chunk copy of the many-chunk columns
    (~140 MB at 1M events, the load's peak), the lazy one does not."""
    return events.lazy().with_columns(pl.coalesce(pl.col("kind_ext"), expr).alias("kind")).collect()


def flow_deps(built: Built) -> pl.DataFrame:
    """Flow edges as deps: `launch` for host -> device launch categories, else `flow`."""
    return built.flows.select(
        "src",
        "dst",
        pl.when(
            pl.col("cat").is_in(LAUNCH_FLOW_CATS)
            | ((pl.col("cat") == "async") & (pl.col("name") == "launch"))
        )
        .then(pl.lit("launch"))
        .otherwise(pl.lit("flow"))
        .alias("kind"),
    )


def assemble(
    built: Built,
    tracks: pl.DataFrame,
    events: pl.DataFrame,
    deps: pl.DataFrame,
    meta: dict[str, Any],
    *,
    mark_steps: bool = True,
) -> Trace:
    """A flavor's interpreted frames as the `Trace` (the model's columns, the reader's
    counters); `mark_steps`: ProfilerStep#N / "step N" slices become kind `marker`."""
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
            events = (
                events.lazy()
                .with_columns(
                    pl.when(pl.lit(is_step.scatter(where, hits)))
                    .then(pl.lit("marker"))
                    .otherwise(pl.col("kind"))
                    .alias("kind")
                )
                .collect()
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
