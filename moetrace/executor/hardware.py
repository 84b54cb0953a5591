"""Device profiles for the executor: cores, rates, memories and links, each with unit and source.

One `Hardware` describes ONE rank (an Ascend die, or a GPU). Every field has an entry in
`FIELDS` with its unit and where the number comes from (`../shared/research/sim.md` section 1),
or the word "assumed" when no public figure was found. `docs/executor.md` renders that table.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moetrace.executor.errors import ExecutorInputError

BandwidthTable = tuple[tuple[int, float], ...]
"""(EP degree, bytes/s) pairs, EP ascending: measured effective all-to-all bandwidth per rank."""


@dataclass(frozen=True)
class Hardware:
    """One rank's device. Rates in bytes/s or FLOP/s, times in ns, sizes in bytes."""

    name: str
    n_aic: int  # matrix (cube) cores; SMs on a GPU
    n_aiv: int  # vector cores; 0 on a GPU (vector work shares the SMs: modelled as a pool)
    clock_hz: float
    cube_flops_per_cycle: float  # per AIC, BF16 (2 x MACs)
    vector_flops_per_cycle: float  # per AIV, FP16
    hbm_bytes: float
    hbm_bw: float  # whole device, bytes/s
    hbm_core_rate: float  # one core's HBM read/write rate, bytes/s
    l2_bytes: float
    l2_core_rate: float  # one core's L2 rate, bytes/s
    dispatch_bw: BandwidthTable  # effective per-rank dispatch bandwidth by EP degree
    combine_bw: BandwidthTable  # effective per-rank combine bandwidth by EP degree
    link_bw: float  # if > 0, overrides both tables (bytes/s per direction per rank)
    link_latency_ns: float  # one-way latency of a transfer tile
    launch_ns: float  # per kernel launch (operator-level schedules)
    collective_ns: float  # per collective orchestration (notify record/wait)
    tile_sync_ns: float  # per task in the tile schedule (event-counter wait + set)
    dequeue_ns: float  # per task for a dynamic ready queue (global atomic + poll)
    comm_aiv: int  # AIV cores that drive one-sided writes in the tile schedule
    aiv_copy_bw: float  # bytes/s one AIV can push (one-sided write injection)
    gemm_eff: float  # achieved / peak for whole grouped GEMM kernels
    tile_gemm_eff: float  # achieved / peak for streamed GEMM tiles

    @property
    def core_peak_flops(self) -> float:
        """Peak BF16 FLOP/s of one AIC (cube core)."""
        return self.cube_flops_per_cycle * self.clock_hz

    @property
    def peak_flops(self) -> float:
        """Peak BF16 FLOP/s of the whole rank (all AIC)."""
        return self.core_peak_flops * self.n_aic

    @property
    def vector_core_flops(self) -> float:
        """FLOP/s of one AIV."""
        return self.vector_flops_per_cycle * self.clock_hz

    def link_rate(self, what: str, ep: int) -> float:
        """Per-rank bandwidth (bytes/s) of `what` ('dispatch' or 'combine') at EP degree `ep`.

        `link_bw` > 0 wins; otherwise the measured table is interpolated in log2(EP) and clamped
        at its ends.
        """
        if self.link_bw > 0:
            return self.link_bw
        table = self.dispatch_bw if what == "dispatch" else self.combine_bw
        xs = [math.log2(e) for e, _ in table]
        ys = [b for _, b in table]
        x = math.log2(max(ep, 1))
        if x <= xs[0]:
            return ys[0]
        for i in range(1, len(xs)):
            if x <= xs[i]:
                f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
                return ys[i - 1] + f * (ys[i] - ys[i - 1])
        return ys[-1]

    def to_dict(self) -> dict[str, Any]:
        """All fields, JSON-friendly (tables as lists)."""
        out = dataclasses.asdict(self)
        out["dispatch_bw"] = [list(p) for p in self.dispatch_bw]
        out["combine_bw"] = [list(p) for p in self.combine_bw]
        out["peak_flops"] = self.peak_flops
        return out


SIM = "sim.md §1a"
FIELDS: dict[str, tuple[str, str]] = {
    "n_aic": (
        "cores",
        f"{SIM}: 24 Cube per die (ATC --aicore_num; Ascend910_9392 ini ai_core_cnt=24)",
    ),
    "n_aiv": ("cores", f"{SIM}: 48 Vector per die (vector_core_cnt=48), 1:2 with AIC"),
    "clock_hz": ("Hz", f"{SIM}: cube_freq 1800 MHz (910B2 ini; A3 serving-sim config)"),
    "cube_flops_per_cycle": ("FLOP/cycle/AIC", f"{SIM}: 16x16x16 fp16 MAC/cycle -> 8192 FLOP"),
    "vector_flops_per_cycle": ("FLOP/cycle/AIV", f"{SIM}: 256 flop/cycle (22 TFLOPS per 48 AIV)"),
    "hbm_bytes": ("bytes", f"{SIM}: 64 GB per die (128 GB per 910C)"),
    "hbm_bw": ("bytes/s", f"{SIM}: 1.6 TB/s per die (3.2 TB/s per 910C)"),
    "hbm_core_rate": (
        "bytes/s",
        f"{SIM}: ddr_rate 32 B/cycle/core -> 58 GB/s (910B1 ini; A3 assumed same)",
    ),
    "l2_bytes": ("bytes", f"{SIM}: l2_size 192 MiB (910B2 ini; 192 MB/die in sim config)"),
    "l2_core_rate": ("bytes/s", f"{SIM}: l2_rate 110 B/cycle/core -> 198 GB/s (910B1 ini)"),
    "dispatch_bw": (
        "bytes/s by EP",
        f"{SIM}: DeepEP-Ascend measured dispatch (INT8) 146/107/102/81/57 GB/s at EP8..128 "
        "(sgl-kernel-npu README)",
    ),
    "combine_bw": (
        "bytes/s by EP",
        f"{SIM}: DeepEP-Ascend measured combine (BF16) 125/103/95/91/81 GB/s at EP8..128 "
        "(sgl-kernel-npu README)",
    ),
    "link_bw": ("bytes/s", "0 = use the measured tables; set to force one rate"),
    "link_latency_ns": ("ns", f"{SIM}: '<1 µs inter-node latency' (CloudMatrix384 summary); 1 µs"),
    "launch_ns": ("ns", f"assumed: raw launch not found; {SIM} suggests 5-30 µs; 20 µs"),
    "collective_ns": ("ns", "assumed: HCCL notify record/wait orchestration, 50 µs (sim.md §5)"),
    "tile_sync_ns": (
        "ns",
        "assumed: per-tile event-counter sync, 2 µs (sim.md §5 back-of-envelope)",
    ),
    "dequeue_ns": ("ns", "assumed: dynamic ready queue pop (global atomic + flag poll), 1 µs"),
    "comm_aiv": ("cores", "assumed: 16 AIV drive one-sided writes (sim.md §5)"),
    "aiv_copy_bw": ("bytes/s", "assumed: 10 GB/s injected per AIV (sim.md §5); 16 AIV > link"),
    "gemm_eff": ("ratio", "assumed: 0.75 for whole grouped GEMMs (sim.md §5 η_big)"),
    "tile_gemm_eff": ("ratio", "assumed: 0.70 for streamed tiles (sim.md §5 η_tile)"),
}

GB = 1e9
_A3_DISPATCH: BandwidthTable = (
    (8, 146 * GB),
    (16, 107 * GB),
    (32, 102 * GB),
    (64, 81 * GB),
    (128, 57 * GB),
)
_A3_COMBINE: BandwidthTable = (
    (8, 125 * GB),
    (16, 103 * GB),
    (32, 95 * GB),
    (64, 91 * GB),
    (128, 81 * GB),
)
# DeepEP V1 on H800: intranode EP8 153/158 GB/s, internode EP16/32/64 ≈ 43/58/51 GB/s (sim.md §1b).
_H_DISPATCH: BandwidthTable = ((8, 153 * GB), (16, 43 * GB), (32, 58 * GB), (64, 51 * GB))
_H_COMBINE: BandwidthTable = ((8, 158 * GB), (16, 43 * GB), (32, 58 * GB), (64, 51 * GB))

_ASCEND_COMMON: dict[str, Any] = dict(
    n_aic=24,
    n_aiv=48,
    clock_hz=1.8e9,
    cube_flops_per_cycle=8192.0,
    vector_flops_per_cycle=256.0,
    hbm_bytes=64e9,
    hbm_bw=1.6e12,
    hbm_core_rate=58e9,
    l2_bytes=192 * 2**20,
    l2_core_rate=198e9,
    dispatch_bw=_A3_DISPATCH,
    combine_bw=_A3_COMBINE,
    link_bw=0.0,
    link_latency_ns=1000.0,
    launch_ns=20_000.0,
    collective_ns=50_000.0,
    tile_sync_ns=2000.0,
    dequeue_ns=1000.0,
    comm_aiv=16,
    aiv_copy_bw=10 * GB,
    gemm_eff=0.75,
    tile_gemm_eff=0.70,
)

PRESETS: dict[str, Hardware] = {
    "ascend-a3": Hardware(name="ascend-a3", **_ASCEND_COMMON),
    # 910B2: same die as one A3 die for cores/clock/HBM; link tables are A3's (no A2 table found).
    "ascend-910b": Hardware(name="ascend-910b", **_ASCEND_COMMON),
    # Ascend 950 (partial data): 28 AIC / 56 AIV measured on 950PR; 950DT HBM 4.0 TB/s; 2 GHz (u).
    "ascend-950": Hardware(
        name="ascend-950",
        **{
            **_ASCEND_COMMON,
            "n_aic": 28,
            "n_aiv": 56,
            "clock_hz": 2.0e9,
            "hbm_bytes": 144e9,
            "hbm_bw": 4.0e12,
        },
    ),
    # H100 SXM: 132 SMs; 989 TFLOPS BF16 dense -> 3746 FLOP/cycle/SM at 2.0 GHz boost (derived).
    "h100": Hardware(
        name="h100",
        n_aic=132,
        n_aiv=132,
        clock_hz=2.0e9,
        cube_flops_per_cycle=989e12 / 132 / 2.0e9,
        vector_flops_per_cycle=256.0,
        hbm_bytes=80e9,
        hbm_bw=3.35e12,
        hbm_core_rate=3.35e12 / 132 * 1.5,
        l2_bytes=50e6,
        l2_core_rate=5.5e12 / 132,
        dispatch_bw=_H_DISPATCH,
        combine_bw=_H_COMBINE,
        link_bw=0.0,
        link_latency_ns=2000.0,
        launch_ns=5000.0,
        collective_ns=20_000.0,
        tile_sync_ns=1000.0,
        dequeue_ns=500.0,
        comm_aiv=20,
        aiv_copy_bw=10 * GB,
        gemm_eff=0.75,
        tile_gemm_eff=0.70,
    ),
}
PRESETS["h200"] = dataclasses.replace(PRESETS["h100"], name="h200", hbm_bytes=141e9, hbm_bw=4.8e12)

GPU_FIELDS: dict[str, str] = {
    "h100": "sim.md §1b: 132 SMs, 989 TFLOPS BF16 dense, 80 GB 3.35 TB/s, 50 MB L2; "
    "DeepEP V1 H800 bandwidths; "
    "n_aiv, per-core rates, latency, launch (4-6 µs) partly assumed",
    "h200": "as h100 with 141 GB HBM3e at 4.8 TB/s (sim.md §1b)",
    "ascend-950": "sim.md §1a: 28 AIC / 56 AIV (950PR), 950DT 144 GB 4.0 TB/s, 2 GHz (u); "
    "rest as A3 (assumed)",
    "ascend-910b": "sim.md §1a: 910B2 24/48 cores, 1.8 GHz, 64 GB 1.6 TB/s, 192 MiB L2; "
    "link tables A3's (assumed)",
}


def _table(name: str, value: Any) -> BandwidthTable:
    """A bandwidth table from "8:146e9,16:107e9" or a TOML list of [ep, bytes/s] pairs."""
    try:
        if isinstance(value, str):
            pairs = [item.split(":") for item in value.split(",") if item.strip()]
        else:
            pairs = [list(item) for item in value]
        table = tuple(sorted((int(ep), float(bw)) for ep, bw in pairs))
    except (TypeError, ValueError):
        raise ExecutorInputError(
            f"hardware field {name!r}: expected EP:bytes_per_s pairs like 8:146e9,16:107e9"
        ) from None
    if not table or any(ep < 1 or bw <= 0 for ep, bw in table):
        raise ExecutorInputError(f"hardware field {name!r}: needs EP >= 1 and bandwidth > 0")
    return table


def _coerce(name: str, value: Any, current: Any) -> Any:
    if isinstance(current, tuple):
        return _table(name, value)
    try:
        if isinstance(current, bool):
            return str(value).lower() in ("1", "true", "yes")
        if isinstance(current, int):
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if isinstance(current, float):
            return float(value)
    except (TypeError, ValueError):
        raise ExecutorInputError(f"hardware field {name!r}: {value!r} is not a number") from None
    return str(value)


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`['key=value', ...]` -> dict; a pair without '=' is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ExecutorInputError(f"--hw {pair!r}: expected key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def load_overrides_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML file of hardware overrides (top-level keys, or a [hardware] table)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ExecutorInputError(f"{p}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExecutorInputError(f"{p}: bad TOML: {exc}") from None
    return dict(data.get("hardware", data))


def get_hardware(name: str | Hardware, overrides: dict[str, Any] | None = None) -> Hardware:
    """The preset `name` with `overrides` applied; unknown names/keys and bad values are errors."""
    if isinstance(name, Hardware):
        hw = name
    else:
        if name not in PRESETS:
            raise ExecutorInputError(
                f"unknown hardware {name!r} (known: {', '.join(sorted(PRESETS))})"
            )
        hw = PRESETS[name]
    if not overrides:
        return hw
    current = dataclasses.asdict(hw)
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in current or key == "name":
            raise ExecutorInputError(f"unknown hardware key {key!r} (known: {', '.join(FIELDS)})")
        changes[key] = _coerce(key, value, getattr(hw, key))
    hw = dataclasses.replace(hw, **changes)
    check_hardware(hw)
    return hw


def check_hardware(hw: Hardware) -> None:
    """Reject profiles that cannot run anything (zero cores, non-positive rates)."""
    if hw.n_aic < 1 or hw.n_aiv < 1:
        raise ExecutorInputError(f"hardware {hw.name}: needs at least one AIC and one AIV core")
    if hw.comm_aiv < 1 or hw.comm_aiv >= hw.n_aiv:
        raise ExecutorInputError(f"hardware {hw.name}: comm_aiv must be in 1..n_aiv-1")
    for key in (
        "clock_hz",
        "cube_flops_per_cycle",
        "vector_flops_per_cycle",
        "hbm_bw",
        "hbm_core_rate",
        "l2_core_rate",
        "aiv_copy_bw",
        "gemm_eff",
        "tile_gemm_eff",
        "hbm_bytes",
    ):
        if getattr(hw, key) <= 0:
            raise ExecutorInputError(f"hardware {hw.name}: {key} must be > 0")
    for key in (
        "link_bw",
        "link_latency_ns",
        "launch_ns",
        "collective_ns",
        "tile_sync_ns",
        "dequeue_ns",
        "l2_bytes",
    ):
        if getattr(hw, key) < 0:
            raise ExecutorInputError(f"hardware {hw.name}: {key} must be >= 0")
