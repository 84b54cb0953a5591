"""Fit the executor's hardware fields to a measured trace, and write them as a preset TOML.

Each fit says what it was fitted on and how well (R² of the measured durations against the
fitted model's, and the number of events); fields the trace cannot identify keep the base
preset's value and source. Models (the executor's own, docs/executor.md):
- GEMM: a tile takes max(FLOPs / F, HBM bytes / r + L2 bytes / L2 rate): F, the achieved FLOP/s
  of one core, is the upper envelope of FLOPs/duration (the compute-bound tiles sit on it);
  `gemm_eff` = F / the base preset's per-core peak.
- HBM: the per-core HBM rate r of the tiles below that envelope; in operator schedules all
  cores share `hbm_bw`, so hbm_bw = r x cores when r is below the per-core cap.
- All-to-all: duration = bytes / bandwidth for each transfer, plus a setup on the first transfer
  of each call (count/notify exchange): bandwidth and setup fitted per call kind; the latency
  is the least delay from a transfer's send to its receive.
- Launch and synchronisation: the durations of the launch nodes (kernels, collectives).
PyTorch (CPU/GPU) traces: GEMM time against FLOPs from `Input Dims` (least squares through a
fixed per-call overhead), all-to-all time against bytes from the split sizes (latency +
bandwidth by least squares), per-op overhead from the small ops.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from moetrace.analysis.moe import categorize, category_times, load_rules
from moetrace.executor.hardware import PRESET_FIELDS, Hardware, apply_overrides, get_hardware
from moetrace.trace.model import Trace
from moetrace.whatif.extract import (
    LayerWorkload,
    WhatIfInputError,
    _args,
    _concrete,
    _dims,
    _int_list,
    in_windows,
    is_executor_trace,
    layer_windows,
    num,
    torch_layer_events,
)


@dataclass(frozen=True)
class Fit:
    """One fitted hardware field: value, unit, and how it was fitted (R², events used)."""

    field: str
    value: float
    unit: str
    how: str
    r2: float
    n: int

    def source(self, trace_name: str) -> str:
        """The preset's `source` text: the fit with its quality, or the model's assumption."""
        if self.how.startswith("derived"):
            return f"{self.how}, for {trace_name}"
        return f"fit: {trace_name}, {self.how}, R²={self.r2:.4f}, n={self.n}"


def r_squared(measured: np.ndarray, model: np.ndarray) -> float:
    """1 - SS_res / SS_tot; 1.0 when the measurements have no spread and the model hits them."""
    measured = np.asarray(measured, dtype=np.float64)
    model = np.asarray(model, dtype=np.float64)
    ss_res = float(((measured - model) ** 2).sum())
    ss_tot = float(((measured - measured.mean()) ** 2).sum())
    if ss_tot <= 0:
        return 1.0 if ss_res <= 1e-9 * max(float((measured**2).sum()), 1.0) else 0.0
    return 1.0 - ss_res / ss_tot


@dataclass
class Calibration:
    """The base preset, the fits, and the resulting hardware."""

    base: Hardware
    fits: list[Fit]
    hardware: Hardware
    trace_name: str
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.name,
            "fits": [dataclasses.asdict(f) for f in self.fits],
            "notes": self.notes,
            "hardware": self.hardware.to_dict(),
        }


# ----------------------------------------------------------------------------- executor
def _transfer_pairs(ev: pl.DataFrame) -> pl.DataFrame:
    """Remote transfers: TX with its RX (keyed by kind, src, dst, tile, chunk), and whether
    the TX is the first of its all-to-all call on its rank (it carries the call's setup)."""

    def side(suffix: str) -> pl.DataFrame:
        names = [f"dispatch{suffix}", f"combine{suffix}"]
        return _args(
            ev.filter(pl.col("name").is_in(names)), "src", "dst", "tile", "chunk"
        ).with_columns(pl.col("name").str.replace(suffix, "").alias("what"))

    tx, rx = side("_tx"), side("_rx")
    # a transfer's rate: the envelope (fastest bytes/ns) of the remote ones of its kind; a
    # rank-local copy moves at the port's rate, which equals it (the link rate is capped by
    # the port's HBM share); the call's setup sits on one transfer (the first issued, not
    # always the first to run): the one with the largest excess time over bytes / rate
    remote_rate = (pl.col("bytes") / pl.col("dur")).filter(pl.col("src") != pl.col("dst"))
    tx = tx.with_columns(remote_rate.max().over("what").alias("rate"))
    excess = pl.col("dur") - pl.col("bytes") / pl.col("rate")
    tx = tx.with_columns(
        ((excess == excess.max().over("rank", "what", "chunk")) & (excess > 2.0)).alias("first"),
        excess.alias("excess"),
    )
    keys = ["what", "src", "dst", "tile", "chunk"]
    return tx.join(
        rx.select(*keys, pl.col("ts").alias("rx_ts"), pl.col("dur").alias("rx_dur")),
        on=keys,
        how="left",
    )


def _fit_links(ev: pl.DataFrame, port_bw: float | None, notes: list[str]) -> list[Fit]:
    """Link bandwidth, all-to-all setup and latency; `port_bw` is the transfers' HBM share
    (bytes/s per port) when known: a link rate at that share is the HBM's, not the link's."""
    pairs = _transfer_pairs(ev)
    remote = pl.col("src") != pl.col("dst")
    rest = pairs.filter(~pl.col("first") & remote)
    if rest.height == 0:
        return []
    b, d = rest["bytes"].to_numpy(), rest["dur"].to_numpy().astype(np.float64)
    bw = float(rest["rate"][0]) * 1e9
    fits = []
    if port_bw is not None and abs(bw / port_bw - 1) < 0.01:
        notes.append(
            f"remote transfers run at {bw / 1e9:.1f} GB/s, the transfers' share of HBM: the link "
            "is faster and its bandwidth cannot be read from this trace (preset kept)"
        )
    else:
        fits.append(
            Fit(
                "link_bw",
                bw,
                "bytes/s",
                "bytes/duration envelope of remote transfers",
                r_squared(d, b / bw * 1e9),
                len(d),
            )
        )
    first = pairs.filter(pl.col("first"))
    setup = first["excess"].to_numpy()
    if setup.size:
        value = max(float(np.median(setup)), 0.0)
        model = (first["bytes"] / first["rate"]).to_numpy() + value
        fits.append(
            Fit(
                "a2a_setup_ns",
                value,
                "ns",
                "largest excess over bytes/bandwidth in each call",
                r_squared(first["dur"].to_numpy(), model),
                len(setup),
            )
        )
    lag = (rest["rx_ts"] - rest["ts"]).drop_nulls().to_numpy().astype(np.float64)
    if lag.size:
        lat = float(lag.min())
        fits.append(
            Fit(
                "link_latency_ns",
                max(lat, 0.0),
                "ns",
                "least send-to-receive delay",
                float(np.mean(np.isclose(lag, lat, atol=1.0))),
                lag.size,
            )
        )
    return fits


def _rank_bytes(ev: pl.DataFrame) -> pl.DataFrame:
    """Per rank: HBM bytes of the cube (AIC) tasks, of the vector tasks, and of the link ports
    (the transfers' DMA reads and writes): the weights of the executor's HBM split."""
    hbm = pl.coalesce(
        pl.col("args").str.json_path_match("$.hbm_bytes").cast(pl.Float64, strict=False),
        pl.col("bytes"),
    ).fill_null(0.0)
    port = pl.col("name").is_in(["dispatch_tx", "dispatch_rx", "combine_tx", "combine_rx"])
    vec = (pl.col("unit") == "aiv") & ~pl.col("name").str.ends_with("_issue")
    return (
        ev.group_by("rank")
        .agg(
            hbm.filter(pl.col("unit") == "aic").sum().alias("b_aic"),
            hbm.filter(vec).sum().alias("b_vec"),
            pl.col("bytes").filter(port).sum().alias("b_port"),
        )
        .with_columns(
            (pl.col("b_port") / (pl.col("b_port") + pl.col("b_aic") + pl.col("b_vec"))).alias(
                "shared"
            )
        )
    )


def _fit_compute(
    ev: pl.DataFrame, base: Hardware, schedule: str, sync_ns: float, notes: list[str]
) -> tuple[list[Fit], float | None]:
    """GEMM efficiency from the FLOP envelope; HBM bandwidth from the tiles below it.

    The executor splits `hbm_bw` before scheduling: the link ports take the share `shared` of
    the rank's HBM bytes they move (chunked, tile), and the rest goes to the cores; so one
    core's measured HBM rate r gives hbm_bw = r x AIC cores / (1 - shared) when one pool runs
    at a time (sequential, chunked), and (r_aic x AIC + r_vec x vector cores) / (1 - shared)
    when both pools split it (tile). Returns the fits and the rank's fitted HBM bandwidth."""
    tile = schedule == "tile"
    aic = _args(ev.filter(pl.col("unit") == "aic"), "hbm_bytes", "l2_bytes").filter(
        pl.col("flops") > 0
    )
    gemm = aic.filter(pl.col("name").is_in(["gemm1", "gemm2"]))
    if gemm.height == 0:
        return [], None
    work = gemm["dur"].to_numpy() - sync_ns
    rate = gemm["flops"].to_numpy() / work * 1e9
    f_core = float(rate.max())
    on = rate >= f_core * 0.995
    field = "tile_gemm_eff" if tile else "gemm_eff"
    eff = f_core / base.core_peak_flops
    below = (
        aic.filter(
            (pl.col("flops") / (pl.col("dur") - sync_ns) * 1e9 < f_core * 0.98)
            & (pl.col("hbm_bytes") > 0)
        )
        .with_columns(
            (pl.col("dur") - sync_ns - pl.col("l2_bytes") / base.l2_core_rate * 1e9).alias("hbm_ns")
        )
        .with_columns((pl.col("hbm_bytes") / pl.col("hbm_ns") * 1e9).alias("r"))
    )
    # are the envelope tiles compute-bound? If their implied HBM rate is the HBM-bound tiles'
    # rate, every GEMM tile waited on HBM and the envelope is only a lower bound on F
    on_hbm = (
        gemm.filter(pl.Series(on))
        .select(
            (
                pl.col("hbm_bytes")
                * 1e9
                / (pl.col("dur") - sync_ns - pl.col("l2_bytes") / base.l2_core_rate * 1e9)
            ).median()
        )
        .item()
    )
    hbm_bound = below.height > 0 and abs(on_hbm / below["r"].median() - 1) < 0.005
    if hbm_bound:
        notes.append(
            f"every GEMM tile is HBM-bound: {field} is at least {eff:.3f} (FLOP envelope); "
            f"{base.name}'s {getattr(base, field):g} kept"
            if getattr(base, field) >= eff
            else f"every GEMM tile is HBM-bound: {field} raised to its lower bound {eff:.3f}"
        )
        fits = (
            []
            if getattr(base, field) >= eff
            else [
                Fit(
                    field,
                    min(eff, 1.0),
                    "ratio",
                    "lower bound: FLOP/s envelope of HBM-bound tiles",
                    0.0,
                    int(on.sum()),
                )
            ]
        )
    else:
        fits = [
            Fit(
                field,
                min(eff, 1.0),
                "ratio",
                f"FLOP/s envelope of {int(on.sum())} compute-bound GEMM tiles"
                f" / {base.name} per-core peak {base.core_peak_flops / 1e12:.2f} TF",
                r_squared(work[on], gemm["flops"].to_numpy()[on] / f_core * 1e9),
                int(on.sum()),
            )
        ]
    if below.height == 0:
        return fits, None
    per_rank = below.group_by("rank").agg(pl.col("r").median().alias("r_aic"))
    vec = ev.filter((pl.col("name") == "permute") & (pl.col("unit") == "aiv"))
    vec_rate = vec.group_by("rank").agg(
        (pl.col("bytes") / (pl.col("dur") - sync_ns) * 1e9).median().alias("r_vec")
    )
    shares = _rank_bytes(ev).join(per_rank, on="rank").join(vec_rate, on="rank", how="left")
    n_vec = base.n_aiv - base.comm_aiv
    if schedule == "sequential":
        cores = pl.col("r_aic") * base.n_aic
    elif schedule == "chunked":
        cores = pl.col("r_aic") * base.n_aic / (1 - pl.col("shared"))
    else:
        cores = (pl.col("r_aic") * base.n_aic + pl.col("r_vec").fill_null(0.0) * n_vec) / (
            1 - pl.col("shared")
        )
    caps = shares.select(cores.alias("cap"), "r_aic")
    if num(caps["r_aic"].max()) >= base.hbm_core_rate * 0.999:
        r = num(caps["r_aic"].median())
        fits.append(
            Fit(
                "hbm_core_rate",
                r,
                "bytes/s",
                f"per-core HBM rate of {below.height} "
                "HBM-bound tiles (cores below their share of hbm_bw)",
                1.0,
                below.height,
            )
        )
        return fits, None
    cap = num(caps["cap"].median())
    r_all = below["r"].to_numpy()
    fits.append(
        Fit(
            "hbm_bw",
            cap,
            "bytes/s",
            f"per-core HBM rate of {below.height} HBM-bound tiles through the {schedule} schedule's"
            f" HBM split (L2 at {base.name}'s {base.l2_core_rate / 1e9:.0f} GB/s per core)",
            r_squared(
                below["hbm_ns"].to_numpy(), below["hbm_bytes"].to_numpy() / np.median(r_all) * 1e9
            ),
            below.height,
        )
    )
    return fits, cap


def _fit_launches(ev: pl.DataFrame) -> list[Fit]:
    launches = ev.filter(pl.col("name").str.starts_with("launch "))
    comm = launches.filter(pl.col("name").str.contains(r"^launch (?:dispatch|combine)"))
    kernels = launches.filter(~pl.col("name").str.contains(r"^launch (?:dispatch|combine)"))
    fits = []
    for field, frame, what in (
        ("launch_ns", kernels, "kernel launch nodes"),
        ("collective_ns", comm, "collective launch nodes"),
    ):
        if frame.height:
            d = frame["dur"].to_numpy().astype(np.float64)
            v = float(np.median(d))
            fits.append(
                Fit(
                    field,
                    v,
                    "ns",
                    f"median duration of {what}",
                    r_squared(d, np.full(d.size, v)),
                    d.size,
                )
            )
    return fits


def _schedule_name(names: set[str]) -> str:
    if "launch kernel" in names:
        return "tile"
    return "chunked" if any(n.startswith("launch gemm1 c") for n in names) else "sequential"


def calibrate_executor(trace: Trace, base: Hardware, name: str) -> Calibration:
    """Fit launch, GEMM, HBM and link fields from an executor trace (module docstring)."""
    ev = trace.events_with_tracks()
    schedule = _schedule_name(set(ev["name"].unique().to_list()))
    notes: list[str] = []
    fits = _fit_launches(ev)
    # the tile kernel's per-task flag wait is inside every tile's duration; the trace does not
    # show it apart, so the base preset's value is used to take it out (assumed)
    sync = base.tile_sync_ns if schedule == "tile" else 0.0
    if schedule == "tile":
        notes.append(f"tile_sync_ns {sync:g} ns per task taken from {base.name} (not separable)")
    compute, cap = _fit_compute(ev, base, schedule, sync, notes)
    port_bw = None
    if cap is not None:
        shared = _rank_bytes(ev)["shared"].to_numpy()
        port_bw = float(np.min(cap if schedule == "sequential" else cap * shared)) / 2
    fits += compute + _fit_links(ev, port_bw, notes)
    return _finish(base, fits, name, notes)


def _derive_other_eff(base: Hardware, fits: list[Fit], notes: list[str]) -> None:
    """A trace of operator kernels measures `gemm_eff`, one of the tile kernel `tile_gemm_eff`;
    the other (needed by a what-if under the other kind of schedule) keeps the base preset's
    ratio between the two (assumed), so a slow measured GEMM stays slow when tiled."""
    have = {f.field: f for f in fits}
    for measured, other in (("gemm_eff", "tile_gemm_eff"), ("tile_gemm_eff", "gemm_eff")):
        if measured in have and other not in have:
            ratio = getattr(base, other) / getattr(base, measured)
            value = min(have[measured].value * ratio, 1.0)
            fits.append(
                Fit(
                    other,
                    value,
                    "ratio",
                    f"derived: fitted {measured} x {base.name}'s "
                    f"{other}/{measured} ratio {ratio:.3f} (assumed)",
                    have[measured].r2,
                    have[measured].n,
                )
            )
            notes.append(f"{other} derived from the fitted {measured} with {base.name}'s ratio")


def _finish(base: Hardware, fits: list[Fit], name: str, notes: list[str]) -> Calibration:
    _derive_other_eff(base, fits, notes)
    overrides = {
        f.field: (round(f.value) if isinstance(getattr(base, f.field), int) else f.value)
        for f in fits
    }
    hw = apply_overrides(base, overrides)
    hw = dataclasses.replace(hw, name=f"calibrated-{base.name}")
    return Calibration(base, fits, hw, name, notes)


# ----------------------------------------------------------------------------- PyTorch
def _lstsq(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(intercept, slope, R²) of y = a + b x by least squares (intercept clipped at 0)."""
    a_mat = np.column_stack([np.ones_like(x), x])
    (a, b), *_ = np.linalg.lstsq(a_mat, y, rcond=None)
    if a < 0:
        a, b = 0.0, float((x * y).sum() / max((x * x).sum(), 1e-30))
    return float(a), float(b), r_squared(y, a + b * x)


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
    fits: list[Fit] = []
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
    clock = 1e9
    fits.append(
        Fit(
            "cube_flops_per_cycle",
            f_rank / clock,
            "FLOP/cycle/SM",
            f"aten::mm time vs Input Dims FLOPs: {f_rank / 1e9:.2f} GFLOP/s, overhead "
            f"{over / 1e3:.1f} µs per call (at clock 1 GHz)",
            r2,
            len(x),
        )
    )
    # the executor's bytes for this layer: a probe run on the host shape with unit rates
    host = {
        "n_aic": 1,
        "n_aiv": 2,
        "comm_aiv": 1,
        "clock_hz": clock,
        "gemm_eff": 1.0,
        "tile_gemm_eff": 1.0,
        "cube_flops_per_cycle": f_rank / clock,
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
    probe_hw = apply_overrides(base, host)
    from moetrace.whatif.replay import simulate_layer

    probe = simulate_layer(wl, probe_hw, wl.schedule).trace.events_with_tracks()
    # the kernels the executor launches per rank for this schedule (sequential: gate, topk,
    # layout, permute, dispatch, gemm1, swiglu, gemm2, combine, unpermute; chunked: per chunk)
    kernels = max(probe.filter(pl.col("name").str.starts_with("launch ")).height // wl.ranks, 1)
    # vector rate: the activation's bytes in the executor (swiglu) over the measured
    # activation time; the small CPU ops of top-k/permute are overhead-bound, not byte-bound,
    # so their measured time goes to the launch overhead below (minus their modelled time)
    act_bytes = float(probe.filter(pl.col("name") == "swiglu")["bytes"].sum()) / wl.ranks
    small = probe.filter(pl.col("name").is_in(["topk", "layout", "permute", "unpermute"]))
    small_bytes = float(small["bytes"].sum()) / wl.ranks
    act_ns = _mean_per_rank_step(times, ["activation"])
    rate = act_bytes / act_ns * 1e9 if act_bytes > 0 and act_ns > 0 else 1e15
    per_rs = _per_rank_step(times, ["activation"])
    fits.append(
        Fit(
            "hbm_bw",
            rate,
            "bytes/s",
            f"executor activation bytes ({act_bytes / 1e6:.2f} MB per rank) / measured "
            f"activation time ({act_ns / 1e6:.2f} ms, mean of {per_rs.size} rank-steps)",
            r_squared(per_rs, np.full(per_rs.size, act_ns)),
            per_rs.size,
        )
    )
    fits.append(
        Fit("hbm_core_rate", rate, "bytes/s", "= hbm_bw (one host thread)", 1.0, per_rs.size)
    )
    # all-to-all: per call, the fastest rank's duration carries the transfer alone; its bytes
    # are those through its busier port (sent or received rows)
    a2a = inside.filter(pl.col("name") == "AllToAll").with_columns(pl.col("category").alias("what"))
    sizes, mins = [], []
    for (_, _what), grp in a2a.group_by("step", "what"):
        best = grp.sort("dur").row(0, named=True)
        conc = _concrete(best["args"])
        send = _int_list(conc[1]) if len(conc) > 1 and conc[1] else []
        recv = _int_list(conc[2]) if len(conc) > 2 and conc[2] else []
        if send:
            sizes.append(max(sum(send), sum(recv)) * wl.hidden * 2.0)  # executor bytes (bf16)
            mins.append(float(best["dur"]))
    if sizes:
        b, t = np.array(sizes), np.array(mins)
        spread = float(b.std() / b.mean()) if b.mean() > 0 else 0.0
        setup, slope, r2 = _lstsq(b, t) if len(b) >= 3 and spread > 0.1 else (0.0, 0.0, 0.0)
        if slope > 0:
            # sizes spread enough: latency (per call, the executor's a2a setup) + bandwidth
            bw, how = 1e9 / slope, "least squares over the calls' sizes"
            fits.append(Fit("a2a_setup_ns", setup, "ns", f"AllToAll intercept ({how})", r2, len(b)))
        else:
            bw, how = float(b.sum() / t.sum() * 1e9), "through the origin: sizes too alike"
            r2 = r_squared(t, b / bw * 1e9)
        fits.append(
            Fit(
                "link_bw",
                bw,
                "bytes/s",
                f"executor bytes / duration of the fastest rank's AllToAll per call ({how})",
                r2,
                len(t),
            )
        )
    # glue: per step the least over ranks (a rank waiting for a straggler shows the wait as
    # 'other' too), averaged over steps
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
    for field in ("launch_ns", "collective_ns"):
        fits.append(
            Fit(
                field,
                launch,
                "ns",
                f"host glue inside the layer (MoE view 'other' + "
                f"'topk_permute', least rank of each step, less their modelled bytes: "
                f"{glue_ns / 1e6:.2f} ms, mean of {per_rs.size} steps) / {kernels} kernels",
                r_squared(per_rs, np.full(per_rs.size, per_rs.mean())),
                per_rs.size,
            )
        )
    fixed = {k: v for k, v in host.items() if k not in {f.field for f in fits}}
    for key in (
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
    ):
        if key not in fixed:  # fitted above
            continue
        fits.append(
            Fit(
                key,
                float(fixed[key]),
                PRESET_FIELDS["ascend-a3"][key][0],
                "derived: host model (assumed)",
                0.0,
                0,
            )
        )
    return _finish(base, fits, name, notes)


def calibrate(trace: Trace, wl: LayerWorkload, base: str | Hardware, name: str) -> Calibration:
    """Calibrate `base` (a preset name or profile) to `trace`."""
    hw = get_hardware(base)
    if is_executor_trace(trace):
        return calibrate_executor(trace, hw, name)
    return calibrate_torch(trace, wl, hw, name)


# ----------------------------------------------------------------------------- writing
def _toml_value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return json.dumps(str(value))


def to_toml(cal: Calibration) -> str:
    """The calibrated hardware in the presets' format: every field's value, unit and source
    (the fit with its R² for fitted fields, the base preset's source for the others)."""
    meta = PRESET_FIELDS.get(cal.base.name, PRESET_FIELDS["ascend-a3"])
    fitted = {f.field: f for f in cal.fits}
    lines = [
        f"# moetrace hardware calibrated from {cal.trace_name} (moetrace calibrate).",
        f"name = {json.dumps(cal.hardware.name)}",
        f"description = {json.dumps(f'{cal.base.name} with fields fitted to {cal.trace_name}')}",
    ]
    for key, value in dataclasses.asdict(cal.hardware).items():
        if key == "name":
            continue
        unit, source = meta[key]
        if key in fitted:
            source = fitted[key].source(cal.trace_name)
        else:
            source = f"{cal.base.name} preset: {source}"
        lines += [
            "",
            f"[fields.{key}]",
            f"value = {_toml_value(value)}",
            f"unit = {json.dumps(unit)}",
            f"source = {json.dumps(source)}",
        ]
    return "\n".join(lines) + "\n"
