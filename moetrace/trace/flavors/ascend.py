"""Ascend: torch_npu / msprof trace_view.json (Ascend Hardware streams, HCCL group and plane
lanes, Overlap Analysis lanes, counter processes). The rank comes from the path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors.base import RANK_LIMIT, Evidence, Flavor, track_attr, with_kind
from moetrace.trace.flavors.built import Built
from moetrace.trace.flavors.kineto import CATEGORIES as KINETO_CATEGORIES
from moetrace.trace.flavors.kineto import has_top_level_keys

NAME = "ascend"

PROCESSES = {
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
ASCEND_LAUNCH_CATEGORIES = {"HostToDevice", "async_npu"}
"""torch_npu's launch flow categories: with Kineto's categories, the file is Ascend's."""


def detect(evidence: Evidence) -> bool:
    """Unless Kineto's own top-level keys are there: Ascend processes; or Kineto categories
    with torch_npu's launch categories; or, without Kineto categories, a file named
    trace_view.json."""
    if has_top_level_keys(evidence):
        return False
    if evidence.process_names & PROCESSES:
        return True
    cats = evidence.categories
    if cats & KINETO_CATEGORIES and cats & ASCEND_LAUNCH_CATEGORIES:
        return True
    return not cats & KINETO_CATEGORIES and Path(evidence.path).name == "trace_view.json"


def interpret(
    built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Hardware streams, HCCL links, host threads; the rank from the path."""
    return _ascend(built, ascend_rank(path))


def ascend_rank(path: str | Path) -> int | None:
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
    # Lazy (see base.with_kind): an eager with_columns copies every many-chunk column.
    ev = (
        built.events.lazy()
        .with_columns(
            track_attr(tracks, "process_name").alias("process_name"),
            track_attr(tracks, "thread_name").alias("thread_name"),
            track_attr(tracks, "unit").alias("unit"),
        )
        .collect()
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
    return tracks, with_kind(ev, kind)


ASCEND = Flavor(NAME, detect, interpret)
