"""Hardware fitted to a moetrace executor trace: launch, GEMM, HBM and link fields.

Models (the executor's own, docs/executor.md):
- GEMM: a tile takes max(FLOPs / F, HBM bytes / r + L2 bytes / L2 rate): F, the achieved FLOP/s
  of one core, is the upper envelope of FLOPs/duration (the compute-bound tiles sit on it);
  `gemm_eff` = F / the base preset's per-core peak.
- HBM: the per-core HBM rate r of the tiles below that envelope; in operator schedules all
  cores share `hbm_bw`, so hbm_bw = r x cores when r is below the per-core cap.
- All-to-all: duration = bytes / bandwidth for each transfer, plus a setup on the first transfer
  of each call (count/notify exchange): bandwidth and setup fitted per call kind; the latency
  is the least delay from a transfer's send to its receive.
- Launch and synchronisation: the durations of the launch nodes (kernels, collectives).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import polars as pl

from moetrace.executor.hardware import PRESETS, Hardware, apply_overrides
from moetrace.trace.model import Trace
from moetrace.whatif.calibration import (
    Calibration,
    Fit,
    envelope_err,
    finish,
    r_squared,
    refuse_unidentified,
    rel_sem,
)
from moetrace.whatif.extract import _args, num


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
                envelope_err(b / d),
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
                rel_sem(setup),
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
                rel_sem(lag[np.isclose(lag, lat, atol=1.0)]),
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
    Returns the fits and the rank's fitted HBM bandwidth (None when not fitted)."""
    aic = _args(ev.filter(pl.col("unit") == "aic"), "hbm_bytes", "l2_bytes").filter(
        pl.col("flops") > 0
    )
    gemm = aic.filter(pl.col("name").is_in(["gemm1", "gemm2"]))
    if gemm.height == 0:
        return [], None
    work = gemm["dur"].to_numpy() - sync_ns
    rate = gemm["flops"].to_numpy() / work * 1e9
    f_core = float(rate.max())  # the FLOP envelope (FLOP/s per core)
    on = rate >= f_core * 0.995  # the tiles on it
    below = (  # the tiles below the envelope that read HBM: their HBM rate r (bytes/s)
        aic.filter(
            (pl.col("flops") / (pl.col("dur") - sync_ns) * 1e9 < f_core * 0.98)
            & (pl.col("hbm_bytes") > 0)
        ).with_columns(
            (pl.col("dur") - sync_ns - pl.col("l2_bytes") / base.l2_core_rate * 1e9).alias("hbm_ns")
        )
    )
    # time left for HBM after the L2 reads at the base's L2 rate; none left (a base with
    # slower L2 than the trace's hardware): the tile says nothing about HBM
    no_time = int((below["hbm_ns"] <= 0).sum())
    below = below.filter(pl.col("hbm_ns") > 0).with_columns(
        (pl.col("hbm_bytes") / pl.col("hbm_ns") * 1e9).alias("r")
    )
    if no_time:
        notes.append(
            f"{no_time} HBM-reading tiles leave no time for HBM after their L2 reads at "
            f"{base.name}'s L2 rate ({base.l2_core_rate / 1e9:.0f} GB/s per core): not used "
            + ("for hbm_bw" if below.height else f"(hbm_bw kept from {base.name})")
        )
    field = "tile_gemm_eff" if schedule == "tile" else "gemm_eff"
    fits = _fit_gemm_eff(gemm.filter(pl.Series(on)), below, f_core, base, field, sync_ns, notes)
    if below.height == 0:
        if not no_time:
            notes.append(f"no HBM-bound tile: hbm_bw not identified ({base.name}'s kept)")
        return fits, None
    hbm_fit, cap = _fit_hbm(ev, below, base, schedule, sync_ns)
    return [*fits, hbm_fit], cap


def _fit_gemm_eff(
    envelope: pl.DataFrame,
    below: pl.DataFrame,
    f_core: float,
    base: Hardware,
    field: str,
    sync_ns: float,
    notes: list[str],
) -> list[Fit]:
    """`field` (gemm_eff or tile_gemm_eff): the envelope F (FLOP/s per core) over the
    preset's per-core peak, from the `envelope` tiles. When those tiles are HBM-bound too
    (their implied HBM rate is that of the tiles `below` the envelope), F is only a lower
    bound: the preset's value is kept unless it is below it."""
    eff = f_core / base.core_peak_flops
    work_ns = envelope["dur"].to_numpy() - sync_ns
    on_hbm = envelope.select(
        (
            pl.col("hbm_bytes")
            * 1e9
            / (pl.col("dur") - sync_ns - pl.col("l2_bytes") / base.l2_core_rate * 1e9)
        ).median()
    ).item()
    hbm_bound = below.height > 0 and abs(on_hbm / below["r"].median() - 1) < 0.005
    if not hbm_bound:
        return [
            Fit(
                field,
                min(eff, 1.0),
                "ratio",
                f"FLOP/s envelope of {envelope.height} compute-bound GEMM tiles"
                f" / {base.name} per-core peak {base.core_peak_flops / 1e12:.2f} TF",
                r_squared(work_ns, envelope["flops"].to_numpy() / f_core * 1e9),
                envelope.height,
                envelope_err(envelope["flops"].to_numpy() / work_ns, 0.005),
            )
        ]
    kept = getattr(base, field) >= eff
    notes.append(
        f"every GEMM tile is HBM-bound: {field} is at least {eff:.3f} (FLOP envelope); "
        f"{base.name}'s {getattr(base, field):g} kept"
        if kept
        else f"every GEMM tile is HBM-bound: {field} raised to its lower bound {eff:.3f}"
    )
    if kept:
        return []
    return [
        Fit(
            field,
            min(eff, 1.0),
            "ratio",
            "lower bound: FLOP/s envelope of HBM-bound tiles",
            0.0,
            envelope.height,
        )
    ]


def _fit_hbm(
    ev: pl.DataFrame, below: pl.DataFrame, base: Hardware, schedule: str, sync_ns: float
) -> tuple[Fit, float | None]:
    """hbm_bw from the HBM-bound tiles' per-core rate r (`below`), or hbm_core_rate when the
    cores ran at the preset's per-core cap (then hbm_bw is not what limited them).

    The executor splits `hbm_bw` before scheduling: the link ports take the share `shared` of
    the rank's HBM bytes they move (chunked, tile), and the rest goes to the cores; so one
    core's measured HBM rate r gives hbm_bw = r x AIC cores / (1 - shared) when one pool runs
    at a time (sequential, chunked), and (r_aic x AIC + r_vec x vector cores) / (1 - shared)
    when both pools split it (tile)."""
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
        return Fit(
            "hbm_core_rate",
            r,
            "bytes/s",
            f"per-core HBM rate of {below.height} "
            "HBM-bound tiles (cores below their share of hbm_bw)",
            1.0,
            below.height,
            rel_sem(below["r"].to_numpy()),
        ), None
    cap = num(caps["cap"].median())
    r_all = below["r"].to_numpy()
    return Fit(
        "hbm_bw",
        cap,
        "bytes/s",
        f"per-core HBM rate of {below.height} HBM-bound tiles through the {schedule} schedule's"
        f" HBM split (L2 at {base.name}'s {base.l2_core_rate / 1e9:.0f} GB/s per core)",
        r_squared(
            below["hbm_ns"].to_numpy(), below["hbm_bytes"].to_numpy() / np.median(r_all) * 1e9
        ),
        below.height,
        rel_sem(caps["cap"].to_numpy()),
    ), cap


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
                    rel_sem(d),
                )
            )
    return fits


def _schedule_name(names: set[str]) -> str:
    if "launch kernel" in names:
        return "tile"
    return "chunked" if any(n.startswith("launch gemm1 c") for n in names) else "sequential"


def trace_hardware(trace: Trace, base: Hardware) -> tuple[Hardware, frozenset[str], list[str]]:
    """The hardware the trace's meta states (`executor.hardware`, written by the executor),
    over its preset when the meta names a known one (else over `base`): (hardware, the
    fields the meta gave, notes). Fields missing from the meta are the ones to fit."""
    given = ((trace.meta.get("executor") or {}).get("hardware")) or {}
    if not isinstance(given, dict) or not given:
        return base, frozenset(), []
    named = str(given.get("name", ""))
    preset = PRESETS.get(named, base)
    notes = []
    if preset.name != base.name:
        notes.append(f"base {preset.name} from the trace's meta (not {base.name})")
    fields = set(dataclasses.asdict(preset)) - {"name"}
    known = {k: v for k, v in given.items() if k in fields and v is not None}
    if "recv_buffer_bytes" in given and given["recv_buffer_bytes"] is None:
        known["recv_buffer_bytes"] = math.inf  # written as null: no limit
    hw = apply_overrides(preset, known)
    if named and named != preset.name:
        notes.append(f"the trace's hardware {named!r} is not a preset: base {preset.name}")
    return hw, frozenset(known), notes


def calibrate_executor(
    trace: Trace, base: Hardware, name: str, use_meta: bool = True
) -> Calibration:
    """Fit launch, GEMM, HBM and link fields from an executor trace (module docstring): the
    fields the trace's meta states are taken from it (unless not `use_meta`), only the
    others are fitted."""
    ev = trace.events_with_tracks()
    schedule = _schedule_name(set(ev["name"].unique().to_list()))
    base, known, notes = trace_hardware(trace, base) if use_meta else (base, frozenset(), [])
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
    fits = refuse_unidentified(base, [f for f in fits if f.field not in known], notes)
    return finish(base, fits, name, notes, known)
