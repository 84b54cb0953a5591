"""Hardware fitted to a PyTorch trace whose MoE layer runs on CPU threads (a host-rank profile).

GEMM time against FLOPs from `Input Dims` (least squares through a fixed per-call overhead),
all-to-all time against bytes from the split sizes (latency + bandwidth by least squares),
per-op overhead from the small ops.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis.moe import categorize, category_times
from moetrace.analysis.moe_rules import load_rules
from moetrace.executor.hardware import PRESET_FIELDS, Hardware, apply_overrides
from moetrace.trace.model import Trace
from moetrace.whatif.calibration import Calibration, Fit, finish, r_squared, rel_sem
from moetrace.whatif.extract import (
    LayerWorkload,
    WhatIfInputError,
    _concrete,
    _dims,
    _int_list,
    in_windows,
    layer_windows,
    num,
    torch_layer_events,
)
from moetrace.whatif.replay import simulate_layer


def _lstsq(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(intercept, slope, R²) of y = a + b x by least squares (intercept clipped at 0)."""
    a_mat = np.column_stack([np.ones_like(x), x])
    (a, b), *_ = np.linalg.lstsq(a_mat, y, rcond=None)
    if a < 0:
        a, b = 0.0, float((x * y).sum() / max((x * x).sum(), 1e-30))
    return float(a), float(b), r_squared(y, a + b * x)


def _slope_err(x: np.ndarray, y: np.ndarray, a: float, b: float) -> float:
    """Relative standard error of the slope b of y = a + b x (through the origin when a = 0)."""
    n = x.size
    free = n - (2 if a else 1)
    if free < 1 or b == 0:
        return float("nan")
    ssr = float(((y - a - b * x) ** 2).sum())
    sxx = float(((x - x.mean()) ** 2).sum() if a else (x * x).sum())
    return float(np.sqrt(ssr / free / sxx) / abs(b)) if sxx > 0 else float("nan")


def _layer_categories(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(events inside the layer windows with their MoE categories, time per category per
    rank and step): the MoE view restricted to the layer's forward."""
    ev = torch_layer_events(trace)
    win = layer_windows(ev)
    inside = in_windows(ev, win).drop("category", "layer", "parent", "start", "w_end")
    inside = categorize(inside, trace.deps, load_rules())
    times = category_times(inside)
    return inside, times


def _per_rank_step(times: pl.DataFrame, categories: list[str]) -> np.ndarray:
    """Summed time (ns) of `categories` for every (rank, step)."""
    sub = times.filter(pl.col("category").is_in(categories))
    return sub.group_by("rank", "step").agg(pl.col("time_ns").sum())["time_ns"].to_numpy()


def _mean_per_rank_step(times: pl.DataFrame, categories: list[str]) -> float:
    """Mean over (rank, step) of the summed time (ns) of `categories`."""
    sub = times.filter(pl.col("category").is_in(categories))
    if sub.height == 0:
        return 0.0
    return num(sub.group_by("rank", "step").agg(pl.col("time_ns").sum())["time_ns"].mean())


_CLOCK_HZ = 1e9
"""The host model's clock: rates per cycle are rates per ns."""

_ASSUMED = (
    "n_aic",
    "n_aiv",
    "comm_aiv",
    "clock_hz",
    "gemm_eff",
    "tile_gemm_eff",
    "vector_flops_per_cycle",
    "l2_core_rate",
    "l2_bytes",
    "hbm_bytes",
    "a2a_setup_ns",
    "link_latency_ns",
    "tile_sync_ns",
    "dequeue_ns",
)
"""Fields of the host model that are assumed, not fitted (unless a fit above sets them)."""


def calibrate_torch(trace: Trace, wl: LayerWorkload, base: Hardware, name: str) -> Calibration:
    """A host-rank profile fitted to a PyTorch trace whose layer runs on CPU threads.

    The rank is one compute thread: `n_aic` 1, whose GEMM rate F comes from aten::mm time
    against Input-Dims FLOPs (t = overhead + FLOPs / F, least squares over every step);
    vector work (top-k, permute, activation) runs at the byte rate that makes the executor's
    vector bytes take the measured time of those categories; the all-to-all moves the
    executor's bytes at the rate of the fastest rank of each call (the others wait for it;
    the waiting is the simulation's to reproduce); the host glue between ops (the MoE view's
    `other` inside the layer) is spread over the executor's kernel launches."""
    inside, times = _layer_categories(trace)
    notes = [
        "host-only trace: the rank is modelled as one compute core (n_aic=1) and two vector "
        "cores; peak = the fitted GEMM rate (gemm_eff 1)"
    ]
    gemm, f_rank = _fit_gemm(inside, name)
    host = _host_model(f_rank)
    # the executor's bytes for this layer: a probe run on the host shape with unit rates
    probe = simulate_layer(wl, apply_overrides(base, host), wl.schedule).trace.events_with_tracks()
    vector = _fit_vector_rate(probe, times, wl.ranks)
    rate = vector[0].value
    fits = [gemm, *vector, *_fit_all_to_all(inside, wl.hidden), *_fit_glue(probe, times, wl, rate)]
    fitted = {f.field for f in fits}
    for key in _ASSUMED:
        if key not in fitted:  # every assumed key is in the host model
            fits.append(
                Fit(
                    key,
                    float(host[key]),
                    PRESET_FIELDS["ascend-a3"][key][0],
                    "derived: host model (assumed)",
                    0.0,
                    0,
                )
            )
    return finish(base, fits, name, notes)


def _fit_gemm(inside: pl.DataFrame, name: str) -> tuple[Fit, float]:
    """The thread's GEMM rate (its fit in FLOP/cycle at `_CLOCK_HZ`, and FLOP/s) from
    aten::mm time against its Input Dims FLOPs, by least squares through a per-call
    overhead."""
    mm = inside.filter(pl.col("name") == "aten::mm")
    flops, durs = [], []
    for args, dur in zip(mm["args"].to_list(), mm["dur"].to_list(), strict=True):
        d = _dims(args)
        if len(d) == 2 and len(d[0]) == 2 and len(d[1]) == 2:
            flops.append(2.0 * d[0][0] * d[0][1] * d[1][1])
            durs.append(float(dur))
    if len(flops) < 2:
        raise WhatIfInputError(
            f"{name}: no aten::mm with Input Dims in the layer (record_shapes off?)"
        )
    x, y = np.array(flops), np.array(durs)
    over, slope, r2 = _lstsq(x, y)
    f_rank = 1e9 / slope
    fit = Fit(
        "cube_flops_per_cycle",
        f_rank / _CLOCK_HZ,
        "FLOP/cycle/SM",
        f"aten::mm time vs Input Dims FLOPs: {f_rank / 1e9:.2f} GFLOP/s, overhead "
        f"{over / 1e3:.1f} µs per call (at clock 1 GHz)",
        r2,
        len(x),
        _slope_err(x, y, over, slope),
    )
    return fit, f_rank


def _host_model(f_rank: float) -> dict[str, float]:
    """One compute thread of `f_rank` FLOP/s and two vector cores; every other rate so high
    that only the fitted ones matter (a probe of the executor's bytes and launches)."""
    return {
        "n_aic": 1,
        "n_aiv": 2,
        "comm_aiv": 1,
        "clock_hz": _CLOCK_HZ,
        "gemm_eff": 1.0,
        "tile_gemm_eff": 1.0,
        "cube_flops_per_cycle": f_rank / _CLOCK_HZ,
        "vector_flops_per_cycle": 1e6,
        "hbm_bw": 1e15,
        "hbm_core_rate": 1e15,
        "l2_core_rate": 1e15,
        "l2_bytes": 1e12,
        "hbm_bytes": 1e15,
        "launch_ns": 1.0,
        "collective_ns": 1.0,
        "link_bw": 1e15,
        "a2a_setup_ns": 0.0,
        "link_latency_ns": 0.0,
        "tile_sync_ns": 0.0,
        "dequeue_ns": 0.0,
    }


def _fit_vector_rate(probe: pl.DataFrame, times: pl.DataFrame, ranks: int) -> list[Fit]:
    """hbm_bw (first) and hbm_core_rate: the activation's bytes in the executor (swiglu)
    over the measured activation time. The small CPU ops of top-k/permute are overhead-bound,
    not byte-bound: their time goes to the launch overhead (`_fit_glue`)."""
    act_bytes = float(probe.filter(pl.col("name") == "swiglu")["bytes"].sum()) / ranks
    act_ns = _mean_per_rank_step(times, ["activation"])
    rate = act_bytes / act_ns * 1e9 if act_bytes > 0 and act_ns > 0 else 1e15
    per_rs = _per_rank_step(times, ["activation"])
    return [
        Fit(
            "hbm_bw",
            rate,
            "bytes/s",
            f"executor activation bytes ({act_bytes / 1e6:.2f} MB per rank) / measured "
            f"activation time ({act_ns / 1e6:.2f} ms, mean of {per_rs.size} rank-steps)",
            r_squared(per_rs, np.full(per_rs.size, act_ns)),
            per_rs.size,
            rel_sem(per_rs),
        ),
        Fit("hbm_core_rate", rate, "bytes/s", "= hbm_bw (one host thread)", 1.0, per_rs.size),
    ]


def _fit_all_to_all(inside: pl.DataFrame, hidden: int) -> list[Fit]:
    """link_bw (and a2a_setup_ns when the calls' sizes spread): per call, the fastest rank's
    duration carries the transfer alone; its bytes are those through its busier port (sent
    or received rows, bf16). Empty when the layer has no AllToAll with split sizes."""
    a2a = inside.filter(pl.col("name") == "AllToAll").with_columns(pl.col("category").alias("what"))
    sizes, mins = [], []
    # in order of first appearance: the sums below do not depend on a hash table's order
    for (_, _what), grp in a2a.group_by("step", "what", maintain_order=True):
        best = grp.sort("dur").row(0, named=True)
        conc = _concrete(best["args"])
        send = _int_list(conc[1]) if len(conc) > 1 and conc[1] else []
        recv = _int_list(conc[2]) if len(conc) > 2 and conc[2] else []
        if send:
            sizes.append(max(sum(send), sum(recv)) * hidden * 2.0)  # executor bytes (bf16)
            mins.append(float(best["dur"]))
    if not sizes:
        return []
    fits = []
    b, t = np.array(sizes), np.array(mins)
    spread = float(b.std() / b.mean()) if b.mean() > 0 else 0.0
    setup, slope, r2 = _lstsq(b, t) if len(b) >= 3 and spread > 0.1 else (0.0, 0.0, 0.0)
    if slope > 0:
        # sizes spread enough: latency (per call, the executor's a2a setup) + bandwidth
        bw, how = 1e9 / slope, "least squares over the calls' sizes"
        err = _slope_err(b, t, setup, slope)
        fits.append(Fit("a2a_setup_ns", setup, "ns", f"AllToAll intercept ({how})", r2, len(b)))
    else:
        bw, how = float(b.sum() / t.sum() * 1e9), "through the origin: sizes too alike"
        r2 = r_squared(t, b / bw * 1e9)
        err = rel_sem(b / t)
    fits.append(
        Fit(
            "link_bw",
            bw,
            "bytes/s",
            f"executor bytes / duration of the fastest rank's AllToAll per call ({how})",
            r2,
            len(t),
            err,
        )
    )
    return fits


def _fit_glue(
    probe: pl.DataFrame, times: pl.DataFrame, wl: LayerWorkload, rate: float
) -> list[Fit]:
    """launch_ns and collective_ns: the host glue inside the layer per step (the least over
    ranks: a rank waiting for a straggler shows the wait as 'other' too; averaged over
    steps), less the small ops' modelled time at the vector `rate` (bytes/s), spread over
    the kernels the executor launches per rank for this schedule."""
    # sequential: gate, topk, layout, permute, dispatch, gemm1, swiglu, gemm2, combine,
    # unpermute; chunked: per chunk
    kernels = max(probe.filter(pl.col("name").str.starts_with("launch ")).height // wl.ranks, 1)
    small = probe.filter(pl.col("name").is_in(["topk", "layout", "permute", "unpermute"]))
    small_bytes = float(small["bytes"].sum()) / wl.ranks
    glue = (
        times.filter(pl.col("category").is_in(["other", "topk_permute"]))
        .group_by("rank", "step")
        .agg(pl.col("time_ns").sum())
        .group_by("step")
        .agg(pl.col("time_ns").min())
    )
    per_rs = glue["time_ns"].to_numpy().astype(np.float64)
    glue_ns = float(per_rs.mean()) - small_bytes / rate * 1e9 / 2
    launch = max(glue_ns, 0.0) / kernels
    return [
        Fit(
            field,
            launch,
            "ns",
            f"host glue inside the layer (MoE view 'other' + "
            f"'topk_permute', least rank of each step, less their modelled bytes: "
            f"{glue_ns / 1e6:.2f} ms, mean of {per_rs.size} steps) / {kernels} kernels",
            r_squared(per_rs, np.full(per_rs.size, per_rs.mean())),
            per_rs.size,
            rel_sem(per_rs),
        )
        for field in ("launch_ns", "collective_ns")
    ]
