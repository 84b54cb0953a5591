"""Producers of Chrome JSON traces ("flavors"), one module each, behind one registry.

A flavor (`base.Flavor`) says whether a file is its producer's (`detect`), and what the
producer's events mean: the `unit` and `rank` of every track, the `kind` of every event
(`interpret`); moetrace's own files also `restore` their stored tracks. Detection asks the
flavors in `FLAVORS` order and takes the first that says yes (`generic` always does).
Layers above use `flavor_of(trace)` to key their own producer-specific rules (analysis/
keys its Kineto and Ascend sync edges by flavor), so nothing matches flavor strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from moetrace.trace.flavors import moetrace
from moetrace.trace.flavors.ascend import ASCEND
from moetrace.trace.flavors.base import Evidence, Flavor, assemble, flow_deps
from moetrace.trace.flavors.built import Built
from moetrace.trace.flavors.generic import GENERIC
from moetrace.trace.flavors.kineto import KINETO
from moetrace.trace.model import Trace

MOETRACE = moetrace.MOETRACE

FLAVORS: tuple[Flavor, ...] = (MOETRACE, ASCEND, KINETO, GENERIC)
"""Detection order: moetrace's own key; Ascend (which defers to Kineto's top-level keys and
claims torch_npu files that share Kineto's categories); Kineto; anything else."""

_BY_NAME = {f.name: f for f in FLAVORS}

__all__ = [
    "ASCEND",
    "FLAVORS",
    "GENERIC",
    "KINETO",
    "MOETRACE",
    "Flavor",
    "detect_flavor",
    "flavor_named",
    "flavor_of",
    "interpret",
]


def detect_flavor(
    top: dict[str, Any], frame: pl.DataFrame, meta_rows: pl.DataFrame, path: str | Path
) -> Flavor:
    """The producer of a Chrome JSON file: the first flavor whose `detect` says yes."""
    evidence = Evidence(top, frame, meta_rows, path)
    return next(f for f in FLAVORS if f.detect(evidence))


def flavor_named(name: str) -> Flavor:
    """The flavor called `name` (`--flavor`); an unknown name reads as generic Chrome JSON."""
    return _BY_NAME.get(name, GENERIC)


def flavor_of(trace: Trace) -> Flavor | None:
    """The flavor a loaded trace was read as (None for merged mixed producers and .pftrace
    files of other writers)."""
    name = trace.meta.get("flavor")
    return _BY_NAME.get(name) if isinstance(name, str) else None


def interpret(
    flavor: Flavor, built: Built, top: dict[str, Any], path: str | Path, meta: dict[str, Any]
) -> Trace:
    """Apply a flavor's meaning to Chrome-level parts and assemble the `Trace`."""
    if built.stored:
        return moetrace.restored_trace(built, meta)
    tracks, events = flavor.interpret(built, top, path, meta)
    deps = flow_deps(built)
    if flavor.links is not None:
        deps = flavor.links(events, tracks, deps, meta)
    return assemble(built, tracks, events, deps, meta)
