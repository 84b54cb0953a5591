"""The workload of one MoE layer instance, read back from a trace.

Two readers, chosen by what the trace holds:
- moetrace executor traces: every tile carries its rows, FLOPs and bytes (args), so tokens per
  rank, hidden/FFN sizes, experts, top-k, rows per expert, placement, dtype, tile sizes and the
  schedule are all measured (nothing is taken from the trace's meta, which the test compares
  against instead).
- PyTorch profiler traces with `record_shapes` (the MoE view's categories over `moe/*` ranges):
  tokens and hidden size from the gate GEMM's `Input Dims`, FFN size from the expert GEMMs',
  top-k from the dispatched rows, rows per rank pair from the all-to-all split sizes,
  placement from which rank runs `moe/expert<g>`.
Whatever cannot be read is taken from `--set key=value` and listed as assumed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.collectives import event_frame
from moetrace.analysis.moe import categorize
from moetrace.analysis.moe_rules import load_rules
from moetrace.errors import MoetraceError
from moetrace.trace.model import Trace


def num(value: Any) -> float:
    """A Polars scalar (max, mean, median of a numeric column) as a float; null -> nan."""
    return float("nan") if value is None else float(value)


class WhatIfInputError(MoetraceError, ValueError):
    """The trace holds no MoE layer we can read (or a --set value is bad): one line."""


@dataclass
class LayerWorkload:
    """One MoE layer instance as measured: sizes, routing, placement, schedule, time (ns)."""

    ranks: int
    tokens: int  # per rank (mean when ranks differ)
    hidden: int
    intermediate: int
    experts: int
    top_k: int
    dispatch_dtype: str
    expert_rows: list[int]  # rows routed to each expert
    expert_rank: list[int]  # rank holding each expert
    schedule: str  # sequential | chunked | tile
    chunks: int
    tile_rows: int
    n_tile: int
    shared_expert: bool
    measured_ns: int  # the layer's time: first start to last end over all ranks
    kind: str  # "executor" or "torch"
    sources: dict[str, str] = field(default_factory=dict)  # field -> "measured: ..."/"assumed: ..."

    def assumed(self) -> dict[str, str]:
        """Fields not read from the trace, with why."""
        return {k: v for k, v in self.sources.items() if v.startswith("assumed")}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_SETTABLE = {
    "tokens": int,
    "hidden": int,
    "intermediate": int,
    "experts": int,
    "top_k": int,
    "dispatch_dtype": str,
    "ranks": int,
    "tile_rows": int,
    "n_tile": int,
}


def parse_sets(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`--set key=value` pairs -> typed dict; unknown keys and non-numbers are one-line errors."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or key not in _SETTABLE:
            raise WhatIfInputError(
                f"--set {pair!r}: expected key=value with key one of {', '.join(_SETTABLE)}"
            )
        try:
            out[key] = _SETTABLE[key](value.strip())
        except ValueError:
            raise WhatIfInputError(f"--set {pair!r}: {value!r} is not a valid {key}") from None
    return out


def _apply_sets(wl: LayerWorkload, sets: dict[str, Any]) -> LayerWorkload:
    for key, value in sets.items():
        setattr(wl, key, value)
        wl.sources[key] = f"assumed: --set {key}={value}"
    return wl


def _args(ev: pl.DataFrame, *keys: str) -> pl.DataFrame:
    """`ev` with one Int64 column per args key (null where absent)."""
    return ev.with_columns(
        pl.col("args").str.json_path_match(f"$.{k}").cast(pl.Int64, strict=False).alias(k)
        for k in keys
    )


def is_executor_trace(trace: Trace) -> bool:
    """A moetrace executor trace: tiles named gemm1/dispatch_tx with their args."""
    names = set(trace.events["name"].unique().to_list())
    return {"gemm1", "dispatch_tx", "combine_tx", "gate"} <= names


def extract(trace: Trace, sets: dict[str, Any] | None = None) -> LayerWorkload:
    """The layer of `trace` (executor or PyTorch), with `--set` values applied on top."""
    wl = extract_executor(trace) if is_executor_trace(trace) else extract_torch(trace, sets)
    return _apply_sets(wl, sets or {})


# ----------------------------------------------------------------------------- executor
def _schedule_of(names: set[str]) -> tuple[str, int]:
    """(schedule, chunks) from the launch nodes: one `launch kernel` per rank is the tile
    kernel; `launch gemm1 cN` are chunked kernels; plain `launch gemm1` is sequential."""
    if "launch kernel" in names:
        return "tile", 1
    chunked = [n for n in names if n.startswith("launch gemm1 c")]
    if chunked:
        return "chunked", len(chunked)
    return "sequential", 1


def extract_executor(trace: Trace) -> LayerWorkload:
    """Read an executor trace's layer from its tiles' rows, FLOPs and bytes (see module doc)."""
    ev = trace.events_with_tracks()
    names = set(ev["name"].unique().to_list())
    schedule, chunks = _schedule_of(names)
    ranks = int(ev["rank"].n_unique())
    gate = _args(ev.filter(pl.col("name") == "gate"), "rows")
    tokens_total = int(gate["rows"].sum())
    combine = _args(ev.filter(pl.col("name") == "combine_tx"), "rows")
    dispatch = _args(ev.filter(pl.col("name") == "dispatch_tx"), "rows")
    routed = int(dispatch["rows"].sum())
    hidden = round(float(combine["bytes"].sum()) / int(combine["rows"].sum()) / 2)
    per_row = float(dispatch["bytes"].sum()) / routed
    dtype = "bf16" if abs(per_row - 2 * hidden) < 0.5 else "int8"
    experts = round(float(gate["flops"].sum()) / (2 * tokens_total * hidden))
    g1 = _args(ev.filter(pl.col("name") == "gemm1"), "rows", "expert", "n_tile", "row_tile")
    first = g1.filter(pl.col("n_tile") == 0)
    by_expert = first.group_by("expert").agg(pl.col("rows").sum(), pl.col("rank").first())
    rows = np.zeros(experts, dtype=np.int64)
    rank_of = np.full(experts, -1, dtype=np.int64)
    rows[by_expert["expert"].to_numpy()] = by_expert["rows"].to_numpy()
    rank_of[by_expert["expert"].to_numpy()] = by_expert["rank"].to_numpy()
    missing = np.flatnonzero(rank_of < 0)  # experts no row reached: round-robin is a guess
    rank_of[missing] = missing % ranks
    intermediate = round(float(g1["flops"].sum()) / (4.0 * hidden * int(rows.sum())))
    tile_rows = int(num(g1["rows"].max()))
    n_tile = round(num(first["flops"].max()) / (2.0 * tile_rows * hidden))
    # the largest tile has full rows and full columns unless the FFN is narrower than a tile
    n_tile = max(n_tile, 1)
    measured = trace.window()
    assert measured is not None
    src = "measured: executor tiles"
    sources = {
        "ranks": f"{src} (ranks with events)",
        "tokens": f"{src} (rows of the gate tiles / ranks)",
        "hidden": f"{src} (combine bytes per row / 2)",
        "intermediate": f"{src} (gemm1 FLOPs / (4 x hidden x rows))",
        "experts": f"{src} (gate FLOPs / (2 x tokens x hidden))",
        "top_k": f"{src} (dispatched rows / tokens)",
        "dispatch_dtype": f"{src} (dispatch bytes per row = {per_row:g})",
        "expert_rows": f"{src} (rows of each expert's gemm1 tiles)",
        "expert_rank": f"{src} (rank running each expert's tiles)",
        "schedule": f"{src} (launch nodes)",
    }
    if missing.size:
        sources["expert_rank"] = f"assumed: {missing.size} experts got no rows: round-robin"
    return LayerWorkload(
        ranks=ranks,
        tokens=tokens_total // ranks,
        hidden=hidden,
        intermediate=intermediate,
        experts=experts,
        top_k=round(routed / tokens_total),
        dispatch_dtype=dtype,
        expert_rows=rows.tolist(),
        expert_rank=rank_of.tolist(),
        schedule=schedule,
        chunks=chunks,
        tile_rows=tile_rows,
        n_tile=n_tile,
        shared_expert="shared_up" in names,
        measured_ns=measured[1] - measured[0],
        kind="executor",
        sources=sources,
    )


# ----------------------------------------------------------------------------- PyTorch
def _dims(text: str | None) -> list[list[int]]:
    try:
        value = json.loads(text or "{}").get("Input Dims") or []
    except (ValueError, AttributeError):
        return []
    return [list(d) if isinstance(d, list) else [] for d in value]


def _concrete(text: str | None) -> list[str]:
    try:
        value = json.loads(text or "{}").get("Concrete Inputs") or []
    except (ValueError, AttributeError):
        return []
    return [str(v) for v in value]


def _int_list(text: str) -> list[int]:
    text = text.strip().strip("[]")
    return [int(x) for x in text.split(",") if x.strip()] if text else []


def torch_layer_events(trace: Trace) -> pl.DataFrame:
    """Events of the PyTorch trace with rank, step, category and parent (the MoE view's)."""
    ev = event_frame(trace)
    if ev["rank"].null_count() == ev.height:
        ev = ev.with_columns(pl.lit(0, pl.Int64).alias("rank"))
    return categorize(ev, trace.deps, load_rules())


def layer_windows(ev: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, step): start and end (ns) of the layer's forward: the first `moe/gate` range
    to the end of the last `moe/unpermute` range (the forward the MoE view names)."""
    marks = ev.filter(
        pl.col("name").is_in(["moe/gate", "moe/unpermute"]) & pl.col("step").is_not_null()
    )
    return (
        marks.group_by("rank", "step")
        .agg(
            pl.col("ts").filter(pl.col("name") == "moe/gate").min().alias("start"),
            pl.col("end").filter(pl.col("name") == "moe/unpermute").max().alias("end"),
        )
        .drop_nulls()
        .sort("rank", "step")
    )


def in_windows(ev: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The events of `ev` lying inside their rank's and step's layer window."""
    return ev.join(
        windows.select("rank", "step", "start", pl.col("end").alias("w_end")), on=["rank", "step"]
    ).filter((pl.col("ts") >= pl.col("start")) & (pl.col("end") <= pl.col("w_end")))


def extract_torch(
    trace: Trace, sets: dict[str, Any] | None = None, step: int | None = None
) -> LayerWorkload:
    """A PyTorch `record_shapes` trace's MoE layer (last complete step unless `step`); a
    value the trace lacks comes from `sets` (`--set`), else one line asks for it."""
    ev = torch_layer_events(trace)
    windows = layer_windows(ev)
    if windows.height == 0:
        raise WhatIfInputError(
            "no expert-parallel MoE layer found: the trace has no moe/gate .. moe/unpermute "
            "ranges (record_function names) on any rank; whatif reads executor traces and "
            "PyTorch traces with those ranges and record_shapes"
        )
    steps = sorted(set(windows["step"].to_list()))
    chosen = steps[-1] if step is None else step
    win = windows.filter(pl.col("step") == chosen)
    ranks = sorted(win["rank"].to_list())
    inside = in_windows(ev, win)
    need = _Needs(sets or {})
    mm = inside.filter(pl.col("name") == "aten::mm")
    tokens, hidden, experts = _gate_shape(mm, need)
    expert_mm = mm.filter(pl.col("category") == "expert_gemm")
    intermediate = _ffn_size(expert_mm, hidden, need)
    top_k = _top_k(inside, tokens * len(ranks), need)
    rows, rank_of, unseen = _expert_rows(inside, expert_mm, experts, len(ranks))
    # the layer's time: the mean over ranks and steps of its span on each rank (ranks enter
    # the layer at different times on a shared host, the executor starts them together; the
    # calibration fits every step, so the measurement is every step's too)
    span = int(num((windows["end"] - windows["start"]).mean()))
    schedule = (
        "chunked" if inside.filter(pl.col("name").str.contains("_c1$")).height else "sequential"
    )
    return LayerWorkload(
        ranks=len(ranks),
        tokens=int(tokens),
        hidden=int(hidden),
        intermediate=intermediate,
        experts=int(experts),
        top_k=top_k,
        dispatch_dtype="bf16",
        expert_rows=rows.tolist(),
        expert_rank=rank_of.tolist(),
        schedule=schedule,
        chunks=2 if schedule == "chunked" else 1,
        tile_rows=128,
        n_tile=512,
        shared_expert=False,
        measured_ns=span,
        kind="torch",
        sources=_torch_sources(schedule, unseen),
    )


class _Needs:
    """A value read from the trace, else the user's `--set` value, else one line naming both."""

    def __init__(self, sets: dict[str, Any]) -> None:
        self.sets = sets

    def __call__(self, key: str, value: int | None, what: str) -> int:
        if value is not None:
            return int(value)
        if key in self.sets:
            return int(self.sets[key])
        raise WhatIfInputError(f"cannot read {key} from the trace ({what}): give --set {key}=…")


def _gate_shape(mm: pl.DataFrame, need: _Needs) -> tuple[int, int, int]:
    """(tokens, hidden, experts) from the gate GEMM's Input Dims [tokens, hidden] x
    [hidden, experts]."""
    gate = mm.filter(pl.col("category") == "router")
    gdims = _dims(gate["args"][0]) if gate.height else []
    ok = len(gdims) == 2 and len(gdims[0]) == 2 and len(gdims[1]) == 2
    gate_what = "no gate GEMM under moe/gate with Input Dims: record_shapes off?"
    tokens = need("tokens", gdims[0][0] if ok else None, gate_what)
    hidden = need("hidden", gdims[0][1] if ok else None, gate_what)
    experts = need("experts", gdims[1][1] if ok else None, gate_what)
    return tokens, hidden, experts


def _ffn_size(expert_mm: pl.DataFrame, hidden: int, need: _Needs) -> int:
    """The FFN size: the down projection [rows, ffn] x [ffn, hidden] names it (the up
    projection may be fused gate|up: [hidden, 2 ffn]); the median over the expert GEMMs."""
    dims = [_dims(a) for a in expert_mm["args"].to_list()]
    ffn_sizes = [
        d[1][0]
        for d in dims
        if len(d) == 2 and len(d[1]) == 2 and d[1][1] == hidden and d[1][0] != hidden
    ]
    return need(
        "intermediate",
        int(np.median(ffn_sizes)) if ffn_sizes else None,
        "no expert GEMM with Input Dims [rows, ffn] x [ffn, hidden]",
    )


def _top_k(inside: pl.DataFrame, tokens: int, need: _Needs) -> int:
    """Rows routed by the dispatch all-to-alls (their split sizes) per token of all ranks."""
    a2a = inside.filter((pl.col("name") == "AllToAll") & (pl.col("category") == "dispatch"))
    routed = 0
    for args in a2a["args"].to_list():
        conc = _concrete(args)
        if len(conc) >= 2:
            routed += sum(_int_list(conc[2] if len(conc) > 2 and conc[2] else conc[1]))
    return need(
        "top_k",
        max(1, round(routed / tokens)) if routed else None,
        "no dispatch all-to-all with split sizes (Concrete Inputs)",
    )


def _expert_rows(
    inside: pl.DataFrame, expert_mm: pl.DataFrame, experts: int, ranks: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """(rows per expert, rank of each expert, experts unseen): the first dimension of each
    `moe/expert<g>` range's first GEMM (summed over its ranges: one per chunk) and the rank
    running it; unseen experts are placed round-robin."""
    expert_of = inside.select(
        pl.col("name").str.extract(r"moe/expert(\d+)$").cast(pl.Int64).alias("e"),
        "rank",
        "ts",
        "end",
    ).filter(pl.col("e").is_not_null())
    rows = np.zeros(experts, dtype=np.int64)
    rank_of = np.full(experts, -1, dtype=np.int64)
    mm_np = expert_mm.select("rank", "ts", "args").to_dicts()
    for row in expert_of.to_dicts():
        e = int(row["e"])
        rank_of[e] = int(row["rank"])
        for m in mm_np:
            if m["rank"] == row["rank"] and row["ts"] <= m["ts"] <= row["end"]:
                d = _dims(m["args"])
                if d and d[0]:
                    rows[e] += d[0][0]  # one range per chunk: sum them
                break
    missing = np.flatnonzero(rank_of < 0)
    rank_of[missing] = missing % ranks
    return rows, rank_of, int(missing.size)


def _torch_sources(schedule: str, unseen: int) -> dict[str, str]:
    """Where each workload field of a PyTorch trace comes from (measured or assumed)."""
    src = "measured: record_shapes"
    sources = {
        "ranks": "measured: ranks with a moe/gate range",
        "tokens": f"{src} (gate GEMM Input Dims [tokens, hidden])",
        "hidden": f"{src} (gate GEMM Input Dims)",
        "experts": f"{src} (gate GEMM Input Dims [hidden, experts])",
        "intermediate": f"{src} (down-projection Input Dims [ffn, hidden])",
        "top_k": "measured: dispatch all-to-all split sizes / tokens",
        "dispatch_dtype": "assumed: bf16 (the trace moves float32, which the executor has not: "
        "the link and vector rates are fitted per executor byte, so times are kept)",
        "expert_rows": f"{src} (rows of each expert's first GEMM)",
        "expert_rank": "measured: rank running moe/expert<g>",
        "schedule": "measured: synchronous all-to-all (sequential)"
        if schedule == "sequential"
        else "measured: async chunks",
        "tile_rows": "assumed: 128 rows per tile (executor default)",
        "n_tile": "assumed: 512 columns per tile (executor default)",
    }
    if unseen:
        sources["expert_rank"] = f"assumed: {unseen} experts unseen: round-robin"
    return sources
