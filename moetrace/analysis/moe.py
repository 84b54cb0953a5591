"""The MoE view of a trace: time per op category, per expert, and token traffic between ranks.

Categories come from name rules kept as data (moetrace/rules/*.toml, one file per framework,
plus the user's own with `--rules FILE`, which win). An event whose own name matches no rule
takes the category of its innermost enclosing event on the same track (a `record_function`
range such as `moe/dispatch`), and a device kernel that still has none takes the category of
the host call that launched it. A rank's time is the self time (span minus children) of its
work events: device kernels where the rank has device tracks, else the host thread holding
the step markers (CPU-only PyTorch); except the comm stages (dispatch, combine, comm), whose
time is metrics' comm set itself (`comm_pieces`: the same events and windows, every thread
of a CPU-only rank), so `moe`'s comm stages equal `metrics`' comm on every trace.
exposed_ns = time only that category was running on the rank's device lanes; null on
CPU-only ranks (one host thread: it would only repeat time_ns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import CPU_COMM_PATTERN, DEVICE_UNITS, STEP_PATTERN
from moetrace.analysis.collectives import event_frame
from moetrace.analysis.event_codes import inherit, own_index
from moetrace.analysis.labels import join_labels, rule_kind_expr, unclassified
from moetrace.analysis.moe_comm import COMM_STAGES, comm_from_metrics, comm_pieces
from moetrace.analysis.moe_load import (
    empty_load,
    experts_of,
    load_stats,
    measured_load,
    with_ranks,
)
from moetrace.analysis.moe_rules import (
    CATEGORIES,
    Rules,
    load_rules,
)
from moetrace.analysis.moe_traffic import received, traffic
from moetrace.analysis.routing_dumps import read_routing
from moetrace.analysis.steps import prepare_steps
from moetrace.analysis.windows import with_windows
from moetrace.trace.model import Kind, Trace

"""The stages that are communication: exactly the events `metrics` counts as comm."""

FRAME_PATTERN = r"\.py\(\d+\)|\.py:\d+"
"""Python frames (Kineto `python_function`: `path/file.py(line): func`): the weakest evidence,
used only when neither the event, its enclosing ops nor its launching call has a stage."""


def _parents(ev: pl.DataFrame) -> np.ndarray:
    """Row index of each event's parent (the enclosing event one level up on its track), -1
    at the top. One as-of join per nesting level."""
    parent = np.full(ev.height, -1, dtype=np.int64)
    frame = ev.select(pl.int_range(pl.len()).alias("_i"), "track", "depth", "ts")
    max_depth = int(frame["depth"].max() or 0)  # type: ignore[arg-type]
    for level in range(1, max_depth + 1):
        kids = frame.filter(pl.col("depth") == level).sort("ts")
        ups = frame.filter(pl.col("depth") == level - 1).sort("ts").rename({"_i": "_p"})
        if kids.height == 0 or ups.height == 0:
            continue
        hit = kids.join_asof(
            ups.select("track", "ts", "_p"), on="ts", by="track", check_sortedness=False
        )
        found = hit.filter(pl.col("_p").is_not_null())
        parent[found["_i"].to_numpy()] = found["_p"].to_numpy()
    return parent


def _launch_links(ev: pl.DataFrame, deps: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(host call row, launched device event row) of every launch edge; GPU-side annotations
    (kind marker) are left out: they keep what their own name says."""
    launch = deps.filter(pl.col("kind") == "launch")
    if launch.height == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    row = pl.DataFrame({"id": ev["id"].cast(pl.Int64), "_r": np.arange(ev.height)})
    link = (
        launch.select(pl.col("src").cast(pl.Int64), pl.col("dst").cast(pl.Int64))
        .join(row.rename({"id": "src", "_r": "s"}), on="src")
        .join(row.rename({"id": "dst", "_r": "d"}), on="dst")
    )
    s, d = link["s"].to_numpy(), link["d"].to_numpy()
    keep = ~(ev["kind"] == "marker").to_numpy()[d]
    return s[keep], d[keep]


def categorize(ev: pl.DataFrame, deps: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """`ev` (event_frame) with the labels.py columns, `kind` as the analysis sees it (a
    kernel rule's role wins), `category` (own rule, else enclosing op, else launching host
    call, else a containing GPU annotation, then Python frames, else "other"; comm events
    always get a comm stage and other events never do), `layer` (from layer annotations the
    same way; null without) and `parent` (row index, -1 at the top)."""
    ev = join_labels(ev, rules)
    device = pl.col("unit").is_in(list(DEVICE_UNITS))
    cpu_comm = (
        ~device
        & (pl.col("kind") != "marker")
        & pl.col("name").str.contains(CPU_COMM_PATTERN).fill_null(False)
    )
    ev = ev.with_columns(
        rule_kind_expr(device).cast(Kind).alias("kind"),
        (cpu_comm | (device & pl.col("rule_role").eq("comm").fill_null(False))).alias("_cpu_comm"),
    )
    codes = {c: i for i, c in enumerate(CATEGORIES)}
    # a rule whose stage is "other" (generic kernel families) classifies the role only: the
    # stage stays open to the enclosing op or annotation (a GEMM inside `expert_ffn[...]`)
    own = (
        ev["rule_stage"]
        .replace_strict({**codes, "other": -1}, default=-1, return_dtype=pl.Int64)
        .to_numpy()
        .copy()
    )
    frame = (
        ev.select(
            (pl.col("cat") == "python_function").fill_null(False)
            | pl.col("name").str.contains(FRAME_PATTERN).fill_null(False)
        )
        .to_series()
        .to_numpy()
    )
    parent = _parents(ev)
    depth = ev["depth"].to_numpy().astype(np.int64)
    links = _launch_links(ev, deps)
    cat = inherit(np.where(frame, -1, own), parent, depth, links)
    _from_device_annotations(ev, cat)
    if frame.any():  # Python frames never override a kernel or op rule: last resort
        by_frame = inherit(own, parent, depth, links)
        cat = np.where(cat >= 0, cat, by_frame)
    cat[cat < 0] = codes["other"]
    cat = _comm_stages(ev, cat, codes)
    layer = (
        inherit(own_index(ev, rules.layer_patterns), parent, depth, links)
        if rules.layer_patterns
        else None
    )
    return ev.drop("_cpu_comm").with_columns(
        pl.Series("category", np.asarray(CATEGORIES, dtype=object)[cat], dtype=pl.String),
        pl.Series("layer", layer, dtype=pl.Int64).replace(-1, None)
        if layer is not None
        else pl.lit(None, pl.Int64).alias("layer"),
        pl.Series("parent", parent),
    )


def _comm_stages(ev: pl.DataFrame, cat: np.ndarray, codes: dict[str, int]) -> np.ndarray:
    """Stages consistent with the roles, so that the comm stages are exactly the comm work:
    a comm event whose stage is not dispatch/combine is `comm`; a compute event that inherited
    dispatch/combine (a permute kernel inside a `dispatch` range) is `topk_permute`, one that
    inherited `comm` is `other`. Markers and host events keep theirs here (whatif reads a
    CPU-only trace's `moe/dispatch` range); `moe_view` takes the comm stages' time from
    metrics' comm set instead (`comm_pieces`)."""
    kind = ev["kind"].cast(pl.String).to_numpy()
    is_comm = (kind == "comm") | ev["_cpu_comm"].to_numpy()
    device = ev.select(pl.col("unit").is_in(list(DEVICE_UNITS))).to_series().to_numpy()
    marker = (kind == "marker") | ~device
    comm_codes = np.array([codes[c] for c in COMM_STAGES])
    in_comm = np.isin(cat, comm_codes)
    out = cat.copy()
    out[is_comm & ~in_comm & ~marker] = codes["comm"]
    wrong = ~is_comm & in_comm & ~marker
    out[wrong & (cat == codes["comm"])] = codes["other"]
    out[wrong & (cat != codes["comm"])] = codes["topk_permute"]
    return out


def _from_device_annotations(ev: pl.DataFrame, cat: np.ndarray) -> None:
    """Device work still without a category takes that of a categorized GPU-side annotation
    (`gpu_user_annotation`, any device track of the rank) that contains it in time; the
    latest-starting one wins. Updates `cat` in place."""
    frame = ev.select(
        pl.int_range(pl.len()).alias("_i"), "rank", "ts", "end", "kind",
        pl.col("unit").is_in(list(DEVICE_UNITS)).alias("device"),
    ).with_columns(pl.Series("cat", cat))  # fmt: skip
    marks = frame.filter(pl.col("device") & (pl.col("kind") == "marker") & (pl.col("cat") >= 0))
    todo = frame.filter(pl.col("device") & (pl.col("kind") != "marker") & (pl.col("cat") < 0))
    if marks.height == 0 or todo.height == 0:
        return
    hit = (
        todo.sort("ts")
        .join_asof(
            marks.select(
                "rank",
                pl.col("ts").alias("m_ts"),
                pl.col("end").alias("m_end"),
                pl.col("cat").alias("m_cat"),
            ).sort("m_ts"),
            left_on="ts",
            right_on="m_ts",
            by="rank",
            check_sortedness=False,
        )
        .filter(pl.col("m_end") >= pl.col("end"))
    )
    cat[hit["_i"].to_numpy()] = hit["m_cat"].to_numpy()


def _work_mask(ev: pl.DataFrame) -> pl.Series:
    """Device work events where a rank has them, else every event on the host threads that
    hold the rank's step markers (CPU-only traces)."""
    device = pl.col("unit").is_in(list(DEVICE_UNITS)) & pl.col("kind").is_in(
        ["compute", "comm", "memory"]
    )
    dev_ranks = ev.filter(device).select(pl.col("rank").unique())
    step_tracks = ev.filter(pl.col("name").str.contains(STEP_PATTERN)).select(
        pl.col("track").unique()
    )
    if step_tracks.height == 0:
        step_tracks = ev.filter(pl.col("unit") == "cpu").select(pl.col("track").unique())
    return ev.select(
        (device & pl.col("rank").is_in(dev_ranks["rank"].implode()))
        | (
            ~pl.col("rank").is_in(dev_ranks["rank"].implode())
            & pl.col("track").is_in(step_tracks["track"].implode())
        )
    ).to_series()


CATEGORY_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "layer": pl.Int64(),  # from layer annotations (rules' layer_patterns); null without
    "category": pl.String(),
    "time_ns": pl.Int64(),  # self time of the category's work events
    "exposed_ns": pl.Int64(),  # time only this category ran on the rank; null: CPU-only rank
    "share": pl.Float64(),  # time_ns / Σ time_ns of the rank and step
}


def _grouped_union(
    ev: pl.DataFrame, mask: np.ndarray, key_cols: list[str], extra: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, iv.Intervals]:
    """(keys with `gid`, the union of the work events' self intervals per gid, ns): self =
    span minus the spans of work children, so nested and overlapping events count once.
    `extra` (key_cols, start, end; `comm_pieces`): intervals that stand for the work events
    marked `_comm` in `ev`, which then give no self time of their own (they still take their
    time off their parents)."""
    work_rows = np.flatnonzero(mask)
    ts = ev["ts"].to_numpy().astype(np.int64)
    end = ev["end"].to_numpy().astype(np.int64)
    parent = ev["parent"].to_numpy()
    pos = np.full(ev.height, -1, dtype=np.int64)
    pos[work_rows] = np.arange(len(work_rows))
    kids = np.flatnonzero(mask & (parent >= 0))
    kids = kids[pos[parent[kids]] >= 0]
    children = iv.union(iv.make(pos[parent[kids]], ts[kids], end[kids]))
    spans = iv.union(iv.make(np.arange(len(work_rows)), ts[work_rows], end[work_rows]))
    own = iv.difference(spans, children)  # self intervals, grouped by work-event position
    work = ev[work_rows].select(key_cols).with_row_index("_w")
    if extra is None:
        extra = pl.DataFrame(
            schema={**work.select(key_cols).schema, "start": pl.Int64, "end": pl.Int64}
        )
    else:  # the comm stages come from metrics' comm set, not from self time
        counted = ~ev["_comm"].to_numpy()[work_rows]
        own = iv.Intervals(*(x[counted[own.group]] for x in own))
    keys = (
        pl.concat([work.select(key_cols), extra.select(key_cols)], how="vertical_relaxed")
        .unique()
        .sort(key_cols, nulls_last=False)
        .with_row_index("gid")
    )
    work = work.join(keys, on=key_cols, how="left", nulls_equal=True).sort("_w")
    gid = work["gid"].to_numpy().astype(np.int64)
    extra_gid = extra.join(keys, on=key_cols, how="left", nulls_equal=True, maintain_order="left")
    return keys, iv.union(
        iv.make(
            np.concatenate([gid[own.group], extra_gid["gid"].to_numpy().astype(np.int64)]),
            np.concatenate([own.start, extra["start"].to_numpy()]),
            np.concatenate([own.end, extra["end"].to_numpy()]),
        )
    )


def union_times(
    ev: pl.DataFrame, key_cols: Sequence[str], work_mask: pl.Series | None = None
) -> pl.DataFrame:
    """Per distinct `key_cols` of the work events of `ev` (categorize output; `work_mask`
    default `_work_mask(ev)`): time_ns = length of the union of their self intervals (ns).
    Include `rank` in the keys: a union across ranks is not a time on any device."""
    mask = (_work_mask(ev) if work_mask is None else work_mask).to_numpy()
    schema = {**{k: ev.schema[k] for k in key_cols}, "time_ns": pl.Int64()}
    if not mask.any():
        return pl.DataFrame(schema=schema)
    keys, per_key = _grouped_union(ev, mask, list(key_cols))
    time_ns = iv.lengths_by_group(per_key, keys.height)
    return (
        keys.with_columns(pl.Series("time_ns", time_ns, dtype=pl.Int64))
        .drop("gid")
        .filter(pl.col("time_ns") > 0)
    )


MICRO_BATCH_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "step": pl.Int64(),
    "layer": pl.Int64(),
    "micro_batch": pl.Int64(),  # the events' `chunk` / `micro_batch` arg (executor traces)
    "category": pl.String(),
    "time_ns": pl.Int64(),
    "exposed_ns": pl.Int64(),
    "share": pl.Float64(),
}

MICRO_BATCH_ARG = r'"(?:chunk|micro_batch)"\s*:\s*(\d+)'
"""The micro-batch of an event: its `chunk` arg (the executor's, executor/trace_out.py) or a
`micro_batch` arg."""


def micro_batches(ev: pl.DataFrame, deps: pl.DataFrame) -> pl.DataFrame:
    """`ev` (categorize's) with `micro_batch`: the event's own arg, else its enclosing
    event's or launching host call's (as `layer`); null without."""
    own = ev["args"].str.extract(MICRO_BATCH_ARG, 1).cast(pl.Int64, strict=False)
    if own.null_count() == ev.height:
        return ev.with_columns(pl.lit(None, pl.Int64).alias("micro_batch"))
    depth = ev["depth"].to_numpy().astype(np.int64)
    code = inherit(
        own.fill_null(-1).to_numpy().astype(np.int64),
        ev["parent"].to_numpy(),
        depth,
        _launch_links(ev, deps),
    )
    return ev.with_columns(pl.Series("micro_batch", code, dtype=pl.Int64).replace(-1, None))


def category_times(
    ev: pl.DataFrame,
    work_mask: pl.Series | None = None,
    comm: pl.DataFrame | None = None,
    *,
    by_micro_batch: bool = False,
) -> pl.DataFrame:
    """Per (rank, step, layer, category): time_ns, exposed_ns, share (`CATEGORY_SCHEMA`);
    `work_mask`: the events counted (default `_work_mask(ev)`, passed when already known);
    `comm` (`comm_pieces`): the comm stages' time as metrics counts it, standing for the
    events marked `_comm` in `ev`; `by_micro_batch`: per (rank, step, layer, micro_batch,
    category) (`MICRO_BATCH_SCHEMA`; `ev` with the `micro_batch` column of `micro_batches`,
    no `comm`: the comm stages' self times)."""
    schema = MICRO_BATCH_SCHEMA if by_micro_batch else CATEGORY_SCHEMA
    more = ["micro_batch"] if by_micro_batch else []
    mask = (_work_mask(ev) if work_mask is None else work_mask).to_numpy()
    if not mask.any() and (comm is None or comm.height == 0):
        return pl.DataFrame(schema=schema)
    key_cols = ["rank", "step", "layer", *more, "category"]
    filled = ev.with_columns(pl.col(c).fill_null(-1) for c in ["step", "layer", *more])
    extra = (
        comm.with_columns(pl.col("step").fill_null(-1), pl.col("layer").fill_null(-1))
        if comm is not None
        else None
    )
    keys, per_cat = _grouped_union(filled, mask, key_cols, extra)
    time_ns = iv.lengths_by_group(per_cat, keys.height)
    # exposed: sweep all categories of a (rank, step) together; where exactly one is active,
    # the running sum of active category codes names it
    rs = keys.select("rank", "step").unique().sort("rank", "step").with_row_index("rsg")
    keys = keys.join(rs, on=["rank", "step"], how="left", maintain_order="left")
    rsg = keys["rsg"].to_numpy().astype(np.int64)
    g = rsg[per_cat.group]
    t = np.concatenate([per_cat.start, per_cat.end])
    gg = np.concatenate([g, g])
    d = np.concatenate([np.ones(len(g), np.int64), -np.ones(len(g), np.int64)])
    c = np.concatenate([per_cat.group, -per_cat.group])
    (key,) = iv.pack_pairs((gg, t))
    order = np.lexsort((d, key))  # ends before starts at the same instant
    gg, t, d, c = gg[order], t[order], d[order], c[order]
    level, active = np.cumsum(d), np.cumsum(c)
    sel = (gg[:-1] == gg[1:]) & (level[:-1] == 1) & (t[1:] > t[:-1])
    exposed = np.bincount(
        active[:-1][sel], weights=(t[1:] - t[:-1])[sel].astype(np.float64), minlength=keys.height
    )
    # A CPU-only rank's work is the one host thread holding its step markers: one category
    # runs at a time there by construction (the gloo threads moving the data are not work),
    # so "only this category running" would repeat time_ns: exposed is not measured (null).
    device_ranks = ev.filter(
        pl.Series(mask) & pl.col("unit").cast(pl.String).is_in(list(DEVICE_UNITS))
    )["rank"].unique()
    out = (
        keys.with_columns(
            pl.Series("time_ns", time_ns),
            pl.Series("exposed_ns", np.rint(exposed).astype(np.int64)),
        )
        .with_columns(
            pl.when(pl.col("rank").is_in(device_ranks.implode()))
            .then("exposed_ns")
            .alias("exposed_ns")
        )
        .filter(pl.col("time_ns") > 0)
    )
    return (
        out.with_columns(
            (pl.col("time_ns") / pl.col("time_ns").sum().over("rank", "step")).alias("share"),
            pl.when(pl.col("step") >= 0).then("step").alias("step"),
            *(pl.when(pl.col(c) >= 0).then(c).alias(c) for c in ["layer", *more]),
        )
        .sort(
            "rank",
            "step",
            "layer",
            *more,
            pl.col("category").replace_strict({c: i for i, c in enumerate(CATEGORIES)}, default=99),
        )
        .select([pl.col(k).cast(v) for k, v in schema.items()])
    )


def expert_times(ev: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """Per (rank, step, expert): time_ns (inclusive) and events, from annotations whose
    name matches an expert pattern, else from an `"expert": N` arg on expert GEMM work."""
    frames = []
    for pattern in rules.expert_patterns:
        hit = ev.with_columns(
            pl.col("name").str.extract(pattern, 1).cast(pl.Int64, strict=False).alias("expert")
        )
        hit = hit.filter(pl.col("expert").is_not_null())
        if hit.height:
            frames.append(hit.select("rank", "step", "expert", "dur"))
            ev = ev.filter(~pl.col("name").str.contains(pattern))
    arg = (
        ev.filter(pl.col("category") == "expert_gemm")
        .with_columns(
            pl.col("args")
            .str.extract(r'"expert"\s*:\s*(\d+)', 1)
            .cast(pl.Int64, strict=False)
            .alias("expert")
        )
        .filter(pl.col("expert").is_not_null())
    )
    if arg.height:
        frames.append(arg.select("rank", "step", "expert", "dur"))
    schema = {
        "rank": pl.Int64,
        "step": pl.Int64,
        "expert": pl.Int64,
        "time_ns": pl.Int64,
        "events": pl.Int64,
    }
    if not frames:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat(frames)
        .group_by("rank", "step", "expert")
        .agg(pl.col("dur").sum().alias("time_ns"), pl.len().alias("events"))
        .sort("rank", "step", "expert")
        .select([pl.col(k).cast(v) for k, v in schema.items()])
    )


@dataclass
class MoeView:
    """The MoE view: categories per (rank, step); experts; traffic between ranks; received
    bytes per rank with the imbalance; the rule files used; the categories per micro-batch
    too (empty when no event names its micro-batch)."""

    categories: pl.DataFrame
    experts: pl.DataFrame
    traffic: pl.DataFrame
    received: pl.DataFrame
    rule_sources: tuple[str, ...]
    unclassified_share: float = 0.0
    unclassified_top: tuple[tuple[str, int], ...] = ()
    load: pl.DataFrame = field(default_factory=empty_load)  # moe_load.LOAD_SCHEMA
    load_stats: pl.DataFrame = field(default_factory=pl.DataFrame)  # moe_load.STATS_SCHEMA
    micro_batches: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema=MICRO_BATCH_SCHEMA)
    )  # categories per micro-batch; empty when no event names one

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: each frame as a list of rows."""
        return {
            "categories": self.categories.to_dicts(),
            "experts": self.experts.to_dicts(),
            "traffic": self.traffic.to_dicts(),
            "received": self.received.to_dicts(),
            "rules": list(self.rule_sources),
            "unclassified_share": self.unclassified_share,
            "unclassified_top": [{"short_name": n, "ns": t} for n, t in self.unclassified_top],
            "load": self.load.to_dicts(),
            "load_stats": self.load_stats.to_dicts(),
            "micro_batches": self.micro_batches.to_dicts(),
        }


def moe_events(trace: Trace, rules: Rules) -> tuple[pl.DataFrame, pl.Series]:
    """(categorized events of `trace`, the work mask `moe` counts): the input of
    `category_times` and `union_times`; a trace that names no rank is rank 0."""
    ev = event_frame(trace)
    if ev["rank"].null_count() == ev.height:  # a single trace that names no rank: rank 0
        ev = ev.with_columns(pl.lit(0, pl.Int64).alias("rank"))
    ev = categorize(ev, trace.deps, rules)
    return ev, _work_mask(ev)


def moe_view(
    trace: Trace, rules: Rules | None = None, routing_files: Sequence[str] = ()
) -> MoeView:
    """Categories, experts, traffic, received bytes and measured load of `trace` (see module
    docstring); `routing_files`: the routers' own expert-distribution dumps (routing_dumps)."""
    rules = rules or load_rules()
    ev, mask = moe_events(trace, rules)
    pairs = traffic(trace, ev)  # what each all-to-all was for: its issuing call's stage
    prep = with_windows(prepare_steps(trace, rules=rules), None)
    single = trace.tracks["rank"].null_count() == trace.tracks.height
    staged = comm_from_metrics(ev, prep)
    ranks = trace.ranks or [0]
    dumps = [read_routing(f, len(ranks)) for f in routing_files]
    experts = experts_of(trace.meta)
    load = with_ranks(pl.concat([measured_load(ev, pairs, rules), *dumps]), len(ranks), experts)
    share, top = unclassified(
        ev.with_columns(mask.alias("work"), pl.lit(True).alias("device")), top=5
    )
    with_mb = micro_batches(ev, trace.deps)
    by_micro_batch = (
        category_times(with_mb, mask, by_micro_batch=True)
        if with_mb["micro_batch"].null_count() < with_mb.height
        else pl.DataFrame(schema=MICRO_BATCH_SCHEMA)
    )
    return MoeView(
        categories=category_times(staged, mask, comm_pieces(ev, prep, single)),
        experts=expert_times(ev, rules),
        traffic=pairs,
        received=received(pairs, trace.ranks or [0]),
        rule_sources=rules.sources,
        unclassified_share=share,
        unclassified_top=tuple(top),
        load=load,
        load_stats=load_stats(load, experts, ranks),
        micro_batches=by_micro_batch,
    )
