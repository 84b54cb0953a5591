"""Measured MoE load: tokens per expert and per rank, the overload factor and percentiles per layer.

Read from what the trace records, each source a row set of its own (`source` column):

- `gemm_shapes`: the first GEMM (`aten::mm`, `addmm`, `matmul`, `linear`) inside an expert's
  annotation (an expert pattern of the rules, e.g. `moe/expert7`) with Kineto's `Input Dims`
  (`record_shapes=True`): its first input is [tokens, hidden], so tokens = its first dim;
- `grouped_gemm_shapes`: a grouped GEMM (Ascend `GroupedMatmul`, `aten::_grouped_mm`,
  `grouped_gemm`) takes all of a rank's rows as its first input, [tokens, hidden] in Kineto's
  `Input Dims` or msprof's `Input Shapes` ("M,K;E,K,N;..."): tokens per rank (the largest of
  the rank's grouped GEMMs in a step and layer; per expert needs the group list's values,
  which no profiler records);
- `all_to_all_splits`: the rows each rank receives in the dispatch all-to-all-v (Kineto's
  `In split size` of `all_to_allv`, moe_traffic): token slots per rank;
- `executor`: moetrace's own traces, the `rows` of the row tiles of each expert's first GEMM.

Dumps written by the routers themselves come in through `routing_dumps.read_routing`.
Hosting rank of expert e: contiguous blocks (`e // (E / ranks)`), the default layout of
SGLang, vLLM and Megatron; dumps that record another placement give it themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.event_codes import inherit_down, own_index
from moetrace.analysis.moe_rules import Rules

LOAD_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),  # gemm_shapes, all_to_all_splits, executor, sglang, ... (module doc)
    "step": pl.Int64(),  # null when the source has no steps
    "layer": pl.Int64(),  # null without layer annotations
    "rank": pl.Int64(),  # the rank that computes the tokens; null when not known
    "expert": pl.Int64(),  # null for per-rank rows
    "tokens": pl.Float64(),  # tokens (token slots: a token routed to k experts counts k times)
}

STATS_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "step": pl.Int64(),
    "layer": pl.Int64(),
    "level": pl.String(),  # expert or rank
    "count": pl.Int64(),  # experts (ranks) in the layer, zeros included
    "tokens": pl.Float64(),
    "mean": pl.Float64(),
    "max": pl.Float64(),
    "overload": pl.Float64(),  # max / mean: 1 = perfectly balanced
    "p50": pl.Float64(),
    "p90": pl.Float64(),
    "p99": pl.Float64(),
}

GEMM_PATTERN = r"(?i)(?:^|::)(?:mm|addmm|matmul|linear|bmm)$"
"""The per-expert GEMM calls whose first input is [tokens, hidden] (PyTorch's aten ops)."""

GROUPED_PATTERN = r"(?i)GroupedMatmul|grouped_mm|grouped_gemm|GmmSwiglu"
"""Grouped GEMMs (all local experts in one call): Ascend GroupedMatmul (hicann/ops-transformer
gmm/grouped_matmul), torch `aten::_grouped_mm`, Megatron's grouped_gemm."""

_FIRST_DIM = (
    r'"Input Dims"\s*:\s*\[\s*\[\s*(\d+)',  # Kineto: [[M, K], [K, N], ...]
    r'"Input Shapes"\s*:\s*"\s*(\d+)',  # msprof: "M,K;E,K,N;..."
)


def empty_load() -> pl.DataFrame:
    """A load table with no rows."""
    return pl.DataFrame(schema=LOAD_SCHEMA)


def _first_dim() -> pl.Expr:
    """First dimension of the first input of an event (Kineto or msprof shapes), else null."""
    got = [pl.col("args").str.extract(p, 1).cast(pl.Float64, strict=False) for p in _FIRST_DIM]
    return pl.coalesce(got)


def _cast(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    return frame.with_columns(pl.lit(source).alias("source")).select(
        [pl.col(k).cast(v) for k, v in LOAD_SCHEMA.items()]
    )


def _from_expert_gemms(ev: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """gemm_shapes: per (rank, step, layer, expert), the first dim of the earliest GEMM inside
    the expert's annotation."""
    if not rules.expert_patterns:
        return empty_load()
    expert = inherit_down(own_index(ev, rules.expert_patterns), ev)
    hit = ev.with_columns(pl.Series("expert", expert)).filter(
        (pl.col("expert") >= 0)
        & pl.col("name").str.contains(GEMM_PATTERN).fill_null(False)
        & (pl.col("kind") != "marker")
    )
    hit = hit.with_columns(_first_dim().alias("tokens")).filter(pl.col("tokens").is_not_null())
    if hit.height == 0:
        return empty_load()
    first = hit.sort("ts").group_by("rank", "step", "layer", "expert").agg(pl.col("tokens").first())
    return _cast(first, "gemm_shapes")


def _from_grouped_gemms(ev: pl.DataFrame) -> pl.DataFrame:
    """grouped_gemm_shapes: per (rank, step, layer), the largest first dim of the rank's
    grouped GEMMs (host op or kernel, whichever records shapes)."""
    hit = ev.filter(pl.col("name").str.contains(GROUPED_PATTERN).fill_null(False))
    hit = hit.with_columns(_first_dim().alias("tokens")).filter(pl.col("tokens").is_not_null())
    if hit.height == 0:
        return empty_load()
    per = hit.group_by("rank", "step", "layer").agg(pl.col("tokens").max())
    return _cast(per.with_columns(pl.lit(None, pl.Int64).alias("expert")), "grouped_gemm_shapes")


def _from_splits(traffic: pl.DataFrame) -> pl.DataFrame:
    """all_to_all_splits: rows each rank received in the dispatch all-to-all per step."""
    got = traffic.filter((pl.col("category") == "dispatch") & pl.col("rows").is_not_null())
    if got.height == 0:
        return empty_load()
    per = got.group_by("step", pl.col("dst").alias("rank")).agg(
        pl.col("rows").sum().alias("tokens")
    )
    return _cast(
        per.with_columns(
            pl.lit(None, pl.Int64).alias("layer"), pl.lit(None, pl.Int64).alias("expert")
        ),
        "all_to_all_splits",
    )


def _arg(name: str) -> pl.Expr:
    return pl.col("args").str.extract(rf'"{name}"\s*:\s*(\d+)', 1).cast(pl.Int64, strict=False)


def _from_executor(ev: pl.DataFrame) -> pl.DataFrame:
    """executor: Σ `rows` of the row tiles (n_tile 0) of each expert's first GEMM task."""
    hit = ev.filter(
        (pl.col("category") == "expert_gemm") & (pl.col("kind") != "marker")
    ).with_columns(
        _arg("expert").alias("expert"), _arg("rows").alias("rows"), _arg("n_tile").alias("n_tile")
    )
    hit = hit.filter(
        pl.col("expert").is_not_null()
        & pl.col("rows").is_not_null()
        & pl.col("n_tile").fill_null(0).eq(0)
    )
    if hit.height == 0:
        return empty_load()
    keys = ["rank", "step", "layer", "expert"]
    first = hit.group_by(keys).agg(pl.col("name").sort_by("ts").first().alias("_first"))
    per = (
        hit.join(first, on=keys, how="left", nulls_equal=True)
        .filter(pl.col("name") == pl.col("_first"))
        .group_by(keys)
        .agg(pl.col("rows").sum().cast(pl.Float64).alias("tokens"))
    )
    return _cast(per, "executor")


def measured_load(ev: pl.DataFrame, traffic: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """Every load the trace records (`LOAD_SCHEMA`), one `source` per way of reading it; `ev`
    from moe.categorize, `traffic` from moe_traffic.traffic."""
    frames = [
        _from_executor(ev),
        _from_expert_gemms(ev, rules),
        _from_grouped_gemms(ev),
        _from_splits(traffic),
    ]
    return pl.concat(frames).sort("source", "step", "layer", "rank", "expert", nulls_last=False)


def _max_index(col: pl.Series) -> int:
    """Largest value of an integer column (0 when empty)."""
    top = col.max()
    return int(top) if isinstance(top, int) else 0


def hosting_rank(expert: pl.Expr, experts: int, ranks: int) -> pl.Expr:
    """Rank of expert e in the contiguous layout: e // (experts / ranks); null when `ranks`
    does not divide `experts` (the layout is then unknown)."""
    if ranks <= 0 or experts <= 0 or experts % ranks:
        return pl.lit(None, pl.Int64)
    return (expert // (experts // ranks)).cast(pl.Int64)


def experts_of(meta: dict[str, Any]) -> int | None:
    """The layer's expert count when the trace states it (moetrace's executor traces)."""
    shape = meta.get("executor", {}).get("workload", {}).get("shape", {})
    experts = shape.get("experts") if isinstance(shape, dict) else None
    return experts if isinstance(experts, int) and experts > 0 else None


def with_ranks(load: pl.DataFrame, ranks: int, experts: int | None = None) -> pl.DataFrame:
    """Per-rank rows added to per-expert rows that have no per-rank rows of their source:
    Σ tokens of the experts each rank hosts (rows whose rank is null get `hosting_rank`;
    `experts` default: the largest expert seen, rounded up to whole experts per rank)."""
    per_expert = load.filter(pl.col("expert").is_not_null())
    out = [load]
    for (source,), part in per_expert.group_by("source"):
        if load.filter((pl.col("source") == source) & pl.col("expert").is_null()).height:
            continue
        seen = max(experts or 0, _max_index(part["expert"]) + 1)
        seen = -(-seen // max(ranks, 1)) * max(ranks, 1)  # whole experts per rank
        part = part.with_columns(
            pl.coalesce("rank", hosting_rank(pl.col("expert"), seen, ranks)).alias("rank")
        )
        per_rank = (
            part.filter(pl.col("rank").is_not_null())
            .group_by("source", "step", "layer", "rank")
            .agg(pl.col("tokens").sum())
        )
        out.append(
            per_rank.with_columns(pl.lit(None, pl.Int64).alias("expert")).select(load.columns)
        )
    return pl.concat([o.select([pl.col(k).cast(v) for k, v in LOAD_SCHEMA.items()]) for o in out])


def load_stats(
    load: pl.DataFrame, experts: int | None = None, ranks: Sequence[int] = ()
) -> pl.DataFrame:
    """Per (source, step, layer, level): count, tokens, mean, max, overload = max / mean, and the
    50th/90th/99th percentiles (linear interpolation) over experts (level `expert`) or ranks
    (level `rank`). Experts 0..`experts`-1 (default: up to the largest seen) and `ranks`
    absent from a layer count as 0 tokens."""
    if load.height == 0:
        return pl.DataFrame(schema=STATS_SCHEMA)
    rows = []
    key = ["source", "step", "layer"]
    for level, col in (("expert", "expert"), ("rank", "rank")):
        part = load.filter(
            pl.col("expert").is_not_null() if level == "expert" else pl.col("expert").is_null()
        )
        part = part.filter(pl.col(col).is_not_null())
        for keys, group in part.group_by(key, maintain_order=True):
            values = group.group_by(col).agg(pl.col("tokens").sum())
            if level == "expert":
                n = max(experts or 0, _max_index(values[col]) + 1)
            else:
                n = max(len(ranks), _max_index(values[col]) + 1)
            full = np.zeros(n)
            full[values[col].to_numpy()] = values["tokens"].to_numpy()
            mean = float(full.mean())
            rows.append(
                {
                    **dict(zip(key, keys, strict=True)),
                    "level": level,
                    "count": n,
                    "tokens": float(full.sum()),
                    "mean": mean,
                    "max": float(full.max()),
                    "overload": float(full.max()) / mean if mean > 0 else None,
                    **{f"p{q}": float(np.percentile(full, q)) for q in (50, 90, 99)},
                }
            )
    return pl.DataFrame(rows, schema=STATS_SCHEMA).sort(
        "source", "step", "layer", "level", nulls_last=False
    )
