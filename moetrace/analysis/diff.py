"""The MoE-structured diff of two runs: where the time moved, per MoE stage and per kernel family.

Both sides are categorized as `moe` does (moe.moe_events). Steps are matched by position (the
k-th step of A with the k-th of B), layers, micro-batches (the executor's `chunk` arg, a
`micro_batch` arg) and ranks by number, stages by name. Every time is the union of the work
events' self intervals per (rank, step, layer, stage[, micro-batch][, kernel family]) summed
over what the table does not show (moe.union_times): overlapping tile events count once.
Kernels are matched across backends by family (the normalised short name, labels.py), then,
among the families left over in a (step, layer, stage), by position of their first start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from moetrace.analysis.moe import moe_events, union_times
from moetrace.analysis.moe_rules import Rules, load_rules
from moetrace.trace.model import Trace

BY_KEYS = ("step", "layer", "microbatch", "rank", "stage")
"""What a stage diff can be broken down by (stage is always there)."""

MICROBATCH_PATTERN = r'"(?:chunk|micro_?batch|microbatch_id)"\s*:\s*(\d+)'
"""Micro-batch index in an event's args: the executor's `chunk`, a `micro_batch` arg."""

_VALUE_COLS = ("a_ns", "b_ns", "delta_ns", "ratio")


@dataclass(frozen=True)
class DiffSide:
    """One run, ready to diff: categorized events with `stage`, `family`, `microbatch` and
    `step` as the step's position (0 = first step of the run), and the work mask."""

    ev: pl.DataFrame
    mask: pl.Series


def family_expr(col: str = "short_name") -> pl.Expr:
    """Kernel family: the short name lower-cased, without namespaces and template arguments
    (`at::native::vectorized_elementwise_kernel<…>` -> `vectorized_elementwise_kernel`)."""
    e = pl.col(col).fill_null("").str.replace_all("<…>", "", literal=True)
    return e.str.split("::").list.last().str.strip_chars().str.to_lowercase()


def diff_side(trace: Trace, rules: Rules | None = None) -> DiffSide:
    """`trace` categorized for `stage_diff` / `kernel_diff`."""
    ev, mask = moe_events(trace, rules or load_rules())
    ev = ev.with_columns(
        (pl.col("step").rank("dense") - 1).cast(pl.Int64).alias("step"),
        pl.col("category").alias("stage"),
        pl.col("args").str.extract(MICROBATCH_PATTERN, 1).cast(pl.Int64).alias("microbatch"),
        family_expr().alias("family"),
    )
    return DiffSide(ev, mask)


def _with_values(frame: pl.DataFrame) -> pl.DataFrame:
    """a_ns / b_ns filled with 0, delta_ns = b - a, ratio = b / a (null when a is 0)."""
    return frame.with_columns(pl.col("a_ns", "b_ns").fill_null(0)).with_columns(
        (pl.col("b_ns") - pl.col("a_ns")).alias("delta_ns"),
        pl.when(pl.col("a_ns") > 0).then(pl.col("b_ns") / pl.col("a_ns")).alias("ratio"),
    )


def _by_moved(frame: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """Largest |delta_ns| first, then by the keys (stable for ties)."""
    return frame.sort(
        [pl.col("delta_ns").abs(), *keys], descending=[True, *[False] * len(keys)], nulls_last=True
    )


def _check_by(by: Sequence[str]) -> list[str]:
    bad = [k for k in by if k not in BY_KEYS]
    if bad:
        raise ValueError(f"cannot break a diff down by {bad[0]!r}: one of {', '.join(BY_KEYS)}")
    return list(dict.fromkeys([*[k for k in by if k != "stage"], "stage"]))


def stage_times(side: DiffSide, by: Sequence[str] = ("stage",)) -> pl.DataFrame:
    """Per `by` (+ stage): time_ns = Σ over what `by` leaves out of the union per (rank, step,
    layer, stage[, microbatch]) (ns)."""
    keys = _check_by(by)
    union_keys = list(dict.fromkeys(["rank", "step", "layer", "stage", *keys]))
    per = union_times(side.ev, union_keys, side.mask)
    return per.group_by(keys).agg(pl.col("time_ns").sum())


def stage_diff(a: DiffSide, b: DiffSide, by: Sequence[str] = ("stage",)) -> pl.DataFrame:
    """Per `by` (+ stage) matched across A and B: a_ns, b_ns, delta_ns = b - a, ratio = b / a;
    the row whose time moved most (largest |delta_ns|) first."""
    keys = _check_by(by)
    ta = stage_times(a, keys).rename({"time_ns": "a_ns"})
    tb = stage_times(b, keys).rename({"time_ns": "b_ns"})
    both = ta.join(tb, on=keys, how="full", coalesce=True, nulls_equal=True)
    return _by_moved(_with_values(both), keys).select(*keys, *_VALUE_COLS)


_CELL = ("step", "layer", "stage")
"""Where kernels are matched: within one step, layer and stage."""


def _families(side: DiffSide) -> pl.DataFrame:
    """Per (step, layer, stage, family): time_ns (Σ over ranks of the per-rank union) and the
    family's position in its (step, layer, stage) by first start (0 = first)."""
    per = union_times(side.ev, ["rank", *_CELL, "family"], side.mask)
    times = per.group_by(*_CELL, "family").agg(pl.col("time_ns").sum())
    first = (
        side.ev.filter(side.mask)
        .group_by(*_CELL, "family")
        .agg(pl.col("ts").min().alias("first_ts"))
    )
    return times.join(first, on=[*_CELL, "family"], how="left", nulls_equal=True)


def _position(frame: pl.DataFrame) -> pl.DataFrame:
    """`pos`: order of first start within the (step, layer, stage), name breaking ties."""
    return frame.sort("first_ts", "family").with_columns(
        pl.int_range(pl.len()).over(_CELL).alias("pos")
    )


def kernel_diff(a: DiffSide, b: DiffSide, by: Sequence[str] = ("stage",)) -> pl.DataFrame:
    """Kernel families matched across A and B within each (step, layer, stage): by family
    name (match `name`), then the left-over families by position of first start (`position`),
    the rest `a only` / `b only`; rows summed per `by` (subset of step, layer, stage) and the
    pair: stage, kernel_a, kernel_b, match, a_ns, b_ns, delta_ns, ratio; most moved first."""
    keys = [k for k in _check_by(by) if k in _CELL]
    fa = _families(a).rename({"family": "kernel_a", "time_ns": "a_ns", "first_ts": "ts_a"})
    fb = _families(b).rename({"family": "kernel_b", "time_ns": "b_ns", "first_ts": "ts_b"})
    named = fa.join(
        fb, left_on=[*_CELL, "kernel_a"], right_on=[*_CELL, "kernel_b"], nulls_equal=True
    ).with_columns(pl.col("kernel_a").alias("kernel_b"), pl.lit("name").alias("match"))
    rest_a = fa.join(named.select(*_CELL, "kernel_a"), on=[*_CELL, "kernel_a"], how="anti",
                     nulls_equal=True)  # fmt: skip
    rest_b = fb.join(named.select(*_CELL, "kernel_b"), on=[*_CELL, "kernel_b"], how="anti",
                     nulls_equal=True)  # fmt: skip
    pa = _position(rest_a.rename({"kernel_a": "family", "ts_a": "first_ts"}))
    pb = _position(rest_b.rename({"kernel_b": "family", "ts_b": "first_ts"}))
    by_pos = pa.rename({"family": "kernel_a"}).join(
        pb.rename({"family": "kernel_b"}), on=[*_CELL, "pos"], how="full", coalesce=True,
        nulls_equal=True,
    )  # fmt: skip
    by_pos = by_pos.with_columns(
        pl.when(pl.col("kernel_a").is_null())
        .then(pl.lit("b only"))
        .when(pl.col("kernel_b").is_null())
        .then(pl.lit("a only"))
        .otherwise(pl.lit("position"))
        .alias("match")
    )
    cols = [*_CELL, "kernel_a", "kernel_b", "match", "a_ns", "b_ns"]
    pairs = pl.concat([named.select(cols), by_pos.select(cols)])
    group = [*keys, "kernel_a", "kernel_b", "match"]
    out = pairs.group_by(group).agg(pl.col("a_ns").sum(), pl.col("b_ns").sum())
    return _by_moved(_with_values(out), group).select(*group, *_VALUE_COLS)


def moved_most(stages: pl.DataFrame) -> str | None:
    """One line naming the row of a stage_diff whose time moved most, in ns and as a ratio."""
    if stages.height == 0:
        return None
    row = stages.row(0, named=True)
    where = ", ".join(f"{k} {row[k]}" for k in stages.columns if k not in _VALUE_COLS)
    ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}x"
    return (
        f"time moved most in {where}: A {row['a_ns']:,} ns -> B {row['b_ns']:,} ns "
        f"(delta {row['delta_ns']:+,} ns, B/A {ratio})"
    )
