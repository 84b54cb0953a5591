"""MoE layer shapes, routing (which experts each token picks) and expert placement.

Shapes come from sim.md §4. Routing is `balanced` (every source sends exactly T·k/E rows to
every expert), `zipf:S` (expert popularity ∝ rank^-S over a seeded permutation, k distinct
experts per token drawn by Gumbel top-k) or `counts:PATH` (popularity weights from a file).
Placement is `round-robin` (expert e on rank e mod EP) or `balanced` (greedy: heaviest expert
first onto the least loaded rank with a free slot, as Pangu's dynamic placement).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.shape_presets import DTYPE_BYTES as DTYPE_BYTES
from moetrace.executor.shape_presets import MoEShape as MoEShape
from moetrace.executor.shape_presets import load_shapes

SHAPE_PRESETS = load_shapes()
SHAPES: dict[str, MoEShape] = {name: p.shape for name, p in SHAPE_PRESETS.items()}
"""The MoE layer presets (executor/shapes/*.toml, each field with its unit and source)."""

# The skew to use when "what routers produce" is wanted (validation, docs): zipf:0.2 over 256
# experts with top-8 gives a per-batch max/mean expert load of about 2.4 (EP8, 4096 tokens).
# Assumed: load-balanced routers (auxiliary loss or DeepSeek's bias) keep the hottest expert
# within a small multiple of the mean per batch; zipf:1.0 (hottest expert 25x the mean) is a
# stress case, not a router.
ROUTER_SKEW = "zipf:0.2"

DEFAULT_DISPATCH = {name: p.dispatch_dtype for name, p in SHAPE_PRESETS.items()}
"""Each preset's dispatch dtype (DeepEP runs DeepSeek with 8-bit dispatch, BF16 combine)."""


@dataclass(frozen=True)
class Workload:
    """What to run: a shape, EP ranks, tokens per rank, dtypes, routing and placement."""

    shape: MoEShape
    ranks: int
    tokens: int  # per rank
    dispatch_dtype: str
    shared_expert: bool
    routing: str
    placement: str
    seed: int
    tile_rows: int = 128  # rows per dispatch/combine/GEMM row tile and tokens per token tile
    n_tile: int = 512  # GEMM output columns per tile

    @property
    def experts_per_rank(self) -> int:
        return self.shape.experts // self.ranks

    @property
    def dispatch_row_bytes(self) -> float:
        """Bytes per dispatched row: H values, plus a 4-byte scale when 8-bit."""
        b = DTYPE_BYTES[self.dispatch_dtype]
        return self.shape.hidden * b + (4 if b == 1 else 0)

    @property
    def combine_row_bytes(self) -> float:
        return self.shape.hidden * 2.0

    def to_dict(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        out["shape"] = dataclasses.asdict(self.shape)
        return out


def get_shape(preset: str | MoEShape) -> MoEShape:
    if isinstance(preset, MoEShape):
        return preset
    if preset not in SHAPES:
        raise ExecutorInputError(f"unknown preset {preset!r} (known: {', '.join(sorted(SHAPES))})")
    return SHAPES[preset]


def make_workload(
    preset: str | MoEShape,
    ranks: int,
    tokens: int,
    routing: str = "balanced",
    placement: str = "round-robin",
    seed: int = 0,
    dispatch_dtype: str | None = None,
    shared_expert: bool = False,
    tile_rows: int = 128,
    n_tile: int = 512,
) -> Workload:
    """Validate and bundle the inputs; every impossible shape is an `ExecutorInputError`."""
    shape = get_shape(preset)
    if dispatch_dtype is None:
        dispatch_dtype = DEFAULT_DISPATCH.get(shape.name, "bf16")
    if dispatch_dtype not in DTYPE_BYTES:
        raise ExecutorInputError(
            f"unknown dispatch dtype {dispatch_dtype!r} (known: {', '.join(DTYPE_BYTES)})"
        )
    if tokens < 1:
        raise ExecutorInputError(f"tokens must be >= 1 (got {tokens})")
    if ranks < 1:
        raise ExecutorInputError(f"ranks must be >= 1 (got {ranks})")
    if shape.top_k > shape.experts or shape.top_k < 1:
        raise ExecutorInputError(f"top-k {shape.top_k} must be in 1..experts ({shape.experts})")
    if shape.experts % ranks:
        raise ExecutorInputError(f"ranks {ranks} must divide the {shape.experts} experts")
    if tile_rows < 1 or n_tile < 1:
        raise ExecutorInputError("tile_rows and n_tile must be >= 1")
    if placement not in ("round-robin", "balanced"):
        raise ExecutorInputError(f"unknown placement {placement!r} (known: round-robin, balanced)")
    parse_routing(routing, shape.experts)  # validate early
    return Workload(
        shape,
        ranks,
        tokens,
        dispatch_dtype,
        shared_expert,
        routing,
        placement,
        seed,
        tile_rows,
        n_tile,
    )


def parse_routing(routing: str, experts: int) -> tuple[str, np.ndarray | float | None]:
    """('balanced', None) | ('zipf', S) | ('counts', weights per expert)."""
    if routing == "balanced":
        return "balanced", None
    if routing.startswith("zipf:"):
        try:
            skew = float(routing[5:])
        except ValueError:
            raise ExecutorInputError(
                f"routing {routing!r}: expected zipf:S with S a number"
            ) from None
        if not math.isfinite(skew):
            raise ExecutorInputError(f"routing {routing!r}: S must be a finite number")
        if skew < 0:
            raise ExecutorInputError(f"routing {routing!r}: S must be >= 0")
        return "zipf", skew
    if routing.startswith("counts:"):
        path = Path(routing[7:])
        try:
            weights = np.array(path.read_text().replace(",", " ").split(), dtype=np.float64)
        except FileNotFoundError:
            raise ExecutorInputError(f"{path}: no such file") from None
        except ValueError:
            raise ExecutorInputError(
                f"{path}: expected {experts} numbers (tokens per expert)"
            ) from None
        if weights.size != experts or (weights < 0).any() or weights.sum() <= 0:
            raise ExecutorInputError(
                f"{path}: expected {experts} non-negative counts, got {weights.size}"
            )
        return "counts", weights
    raise ExecutorInputError(f"unknown routing {routing!r} (known: balanced, zipf:S, counts:PATH)")


def route(wl: Workload) -> np.ndarray:
    """Expert ids chosen by every token: int32 [ranks, tokens, top_k], k distinct per token.

    Skewed routing: each token's k experts are the top-k of log(weight) + Gumbel noise, the
    noise being `Generator.gumbel` over [ranks, tokens, experts] in one stream (what
    moetrace.testing.route_reference computes, bit for bit). Computed by `_gumbel_top_k`
    without drawing every Gumbel value or partitioning the whole matrix."""
    ep, t, k, e = wl.ranks, wl.tokens, wl.shape.top_k, wl.shape.experts
    if wl.routing == "balanced":  # every source routes alike: one read-only copy, broadcast
        base = (np.arange(t, dtype=np.int64)[:, None] * k + np.arange(k)[None, :]) % e
        return np.broadcast_to(base.astype(np.int32), (ep, t, k))
    rng = np.random.default_rng(wl.seed)
    logw = routing_log_weights(wl, rng)
    return _gumbel_top_k(rng, logw, ep * t, k).reshape(ep, t, k)


def routing_log_weights(wl: Workload, rng: np.random.Generator) -> np.ndarray:
    """log of each expert's routing probability (float64 [experts], -inf for weight 0) of a
    skewed routing: zipf:S ranks the experts by a permutation drawn from `rng` (popularity
    rank^-S); counts:PATH takes the file's weights."""
    e = wl.shape.experts
    kind, param = parse_routing(wl.routing, e)
    if kind == "zipf":
        popularity = np.arange(1, e + 1, dtype=np.float64) ** -float(param)  # type: ignore[arg-type]
        weights = popularity[rng.permutation(e)]
    elif kind == "counts":
        weights = np.asarray(param, dtype=np.float64)
    else:
        raise ExecutorInputError(f"routing {wl.routing!r} has no weights (balanced)")
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(weights / weights.sum()))


# `_gumbel_top_k`: expected candidates per token (their exact scores are computed), the width of
# the candidate matrix (a token with more candidates, or fewer than k, is redone exactly), the
# margin (score units) under which two scores count as a tie that rounding could flip, the
# uniform draws per chunk (bounds the memory: 8 bytes each) and the rows redone one by one
_CANDIDATES = 20.0  # at least; 2.5 k for a larger top-k
_WIDTH = 40  # at least; twice the expected candidates
_TIE = 1e-6
_CHUNK_DRAWS = 1 << 18
_REDO_ROWS = 64  # per chunk: more and the whole chunk is redone exactly


def _gumbel_top_k(rng: np.random.Generator, logw: np.ndarray, rows: int, k: int) -> np.ndarray:
    """Sorted top-k expert ids (int32 [rows, k]) of logw + G per row, G = `rng.gumbel()` drawn
    row-major over [rows, experts]: the reference's result, without its cost.

    numpy draws G = -log(-log(1 - u)) from u = the generator's next double, so `rng.random`
    gives the same u at a fraction of the cost. A threshold score c (about `_CANDIDATES` per
    row above it) becomes a per-expert bound on u, so one comparison finds each row's
    candidates; only those get scores (np.log, which can differ from the C library's log by an
    ulp) and a top-k in a narrow matrix. A row is redone exactly (its own `rng.gumbel` draws,
    the reference's argpartition) unless its k-th score clears c, and the (k+1)-th, by `_TIE`:
    then no rounding can change which k experts it picks. A zero u (gumbel redraws it) sends the
    rest of the stream to the reference's computation, since it shifts every later draw."""
    e = logw.size
    out = np.empty((rows, k), dtype=np.int32)
    if k >= e:  # every expert: the reference's draws cannot change the (sorted) answer
        return np.broadcast_to(np.arange(e, dtype=np.int32), (rows, e)).copy()
    expected = max(_CANDIDATES, 2.5 * k)  # top-k 8: 20 candidates in a matrix 40 wide
    bound = _candidate_bound(logw, min(expected, float(np.isfinite(logw).sum())))
    chunk = max(1, _CHUNK_DRAWS // e)
    width = min(max(_WIDTH, int(2 * expected), k + 1), e)
    buffer = np.empty((min(chunk, rows), e))
    for lo in range(0, rows, chunk):
        hi = min(rows, lo + chunk)
        state = rng.bit_generator.state
        u = rng.random(out=buffer[: hi - lo])  # reused: no fresh pages per chunk
        if not u.all():  # a zero draw: gumbel would redraw it, shifting all later draws
            rng.bit_generator.state = state
            scores = logw[None, :] + rng.gumbel(size=(rows - lo, e))
            out[lo:] = _top_k_sorted(scores, k)
            return out
        out[lo:hi], redo = _candidate_top_k(u, logw, bound, k, width)
        redo_rows = np.flatnonzero(redo).tolist()
        if len(redo_rows) > _REDO_ROWS:  # e.g. fewer than k+1 experts of non-zero weight
            out[lo:hi] = _exact_rows(rng, state, 0, hi - lo, logw, k)
            continue
        for row in redo_rows:
            out[lo + row] = _exact_rows(rng, state, row, 1, logw, k)[0]
    return out


def _candidate_bound(logw: np.ndarray, expected: float) -> tuple[float, np.ndarray]:
    """(c, per-expert u bound): score logw + G > c exactly when u < -expm1(-exp(logw - c)),
    with c chosen (bisection) so that the bounds sum to `expected` candidates per row. The
    bounds are raised a little (never lowered), so rounding can only add candidates."""
    finite = logw[np.isfinite(logw)]
    lo, hi = float(finite.min()) - 50.0, float(finite.max()) + 50.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if float(-np.expm1(-np.exp(finite - mid)).sum()) > expected:
            lo = mid
        else:
            hi = mid
    c = lo
    with np.errstate(over="ignore"):
        below = -np.expm1(-np.exp(logw - c))
    return c, np.minimum(below * (1 + 1e-9) + 1e-300, 1.0)


def _candidate_top_k(
    u: np.ndarray, logw: np.ndarray, bound: tuple[float, np.ndarray], k: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """(sorted top-k ids [rows, k], rows to redo exactly) from uniform draws u [rows, experts]."""
    c, u_max = bound
    rows, e = u.shape
    flat = np.flatnonzero(u < u_max[None, :])
    row, col = np.divmod(flat, e)
    count = np.bincount(row, minlength=rows)
    first = np.cumsum(count) - count
    pos = np.arange(row.size) - first[row]
    keep = pos < width
    row, col, pos = row[keep], col[keep], pos[keep]
    score = np.full((rows, width), -np.inf)
    ids = np.zeros((rows, width), dtype=np.int64)
    score[row, pos] = logw[col] - np.log(-np.log(1.0 - u.ravel()[flat[keep]]))
    ids[row, pos] = col
    part = np.argpartition(-score, k, axis=1)[:, : k + 1]
    top = np.take_along_axis(score, part, axis=1)
    kth = top[:, :k].min(axis=1)
    with np.errstate(invalid="ignore"):  # -inf - -inf in rows of fewer than k candidates
        close = ~(kth - top[:, k] > _TIE)
    redo = (count < k) | (count > width) | (kth <= c + _TIE) | close
    return np.sort(np.take_along_axis(ids, part[:, :k], axis=1), axis=1).astype(np.int32), redo


def _exact_rows(
    rng: np.random.Generator, state: Mapping[str, Any], row: int, n: int, logw: np.ndarray, k: int
) -> np.ndarray:
    """Rows row..row+n of a chunk, as the reference picks them, from their own Gumbel draws: a
    generator set to the chunk's start `state`, advanced past the rows before (one 64-bit draw
    per value; `np.random.default_rng` is a PCG64, which can jump ahead)."""
    gen = np.random.PCG64()
    gen.state = dict(state)  # type: ignore[assignment]  # the dict rng.bit_generator gave
    gen.advance(row * logw.size)
    scores = logw[None, :] + np.random.Generator(gen).gumbel(size=(n, logw.size))
    return _top_k_sorted(scores, k)


def _top_k_sorted(scores: np.ndarray, k: int) -> np.ndarray:
    """The reference's selection: argpartition of -scores per row, the k ids sorted, int32."""
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.sort(top, axis=1).astype(np.int32)


def rows_per_source_expert(wl: Workload, assign: np.ndarray) -> np.ndarray:
    """Rows each source sends to each expert: int64 [ranks, experts] (balanced routing: one
    source's counts, repeated: every source routes alike)."""
    e = wl.shape.experts
    if wl.routing == "balanced":
        one = np.bincount(assign[0].ravel(), minlength=e)
        return np.broadcast_to(one, (wl.ranks, e))
    flat = assign.reshape(wl.ranks, -1).astype(np.int64) + e * np.arange(wl.ranks)[:, None]
    return np.bincount(flat.ravel(), minlength=wl.ranks * e).reshape(wl.ranks, e)


def place(wl: Workload, assign: np.ndarray) -> np.ndarray:
    """Rank of every expert (int32 [experts]); each rank holds experts/ranks of them."""
    e, ep = wl.shape.experts, wl.ranks
    per = e // ep
    if wl.placement == "round-robin":
        return (np.arange(e) % ep).astype(np.int32)
    load = rows_per_source_expert(wl, assign).sum(axis=0).astype(np.int64)
    order = np.lexsort((np.arange(e), -load))  # heaviest first, ties by id
    rank_load = np.zeros(ep, dtype=np.int64)
    slots = np.full(ep, per, dtype=np.int64)
    out = np.empty(e, dtype=np.int32)
    for expert in order:  # E <= a few hundred: a loop over experts, not events
        free = np.flatnonzero(slots > 0)
        target = free[np.argmin(rank_load[free])]
        out[expert] = target
        rank_load[target] += load[expert]
        slots[target] -= 1
    return out
