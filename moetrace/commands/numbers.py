"""Validation of the numbers people type: finite, in a sane range, the range named on error.

Out-of-range values otherwise reach the executor or the analyzer and come back as nonsense
(MFU -15,272% for `--peak-tflops -1`), as silent fallbacks (`--hw link_bw=nan`), or as
misleading errors (`--hw link_bw=1` byte/s overflowing the ns clock into "a cycle").
"""

from __future__ import annotations

import math
import re
from typing import Any

from moetrace.commands._common import UserError

SEED_MAX = 2**63 - 1
PEAK_TFLOPS_RANGE = (1e-3, 1e6)
"""TFLOP/s of one device: 1 GFLOP/s .. 1 EFLOP/s."""

_RATE = (1e6, 1e16)  # bytes/s: 1 MB/s .. 10 PB/s
_LATENCY = (0.0, 1e10)  # ns: up to 10 s
HW_RANGES: dict[str, tuple[float, float, str]] = {
    "n_aic": (1, 100_000, "cores"),
    "n_aiv": (1, 100_000, "cores"),
    "comm_aiv": (1, 100_000, "cores"),
    "clock_hz": (1e6, 1e11, "Hz"),
    "cube_flops_per_cycle": (1, 1e9, "FLOP/cycle"),
    "vector_flops_per_cycle": (1, 1e9, "FLOP/cycle"),
    "hbm_bytes": (1e6, 1e16, "bytes"),
    "hbm_bw": (*_RATE, "bytes/s"),
    "hbm_core_rate": (*_RATE, "bytes/s"),
    "l2_bytes": (0, 1e13, "bytes"),
    "l2_core_rate": (*_RATE, "bytes/s"),
    "link_bw": (*_RATE, "bytes/s (0 = the measured tables)"),
    "link_latency_ns": (*_LATENCY, "ns"),
    "launch_ns": (*_LATENCY, "ns"),
    "collective_ns": (*_LATENCY, "ns"),
    "tile_sync_ns": (*_LATENCY, "ns"),
    "dequeue_ns": (*_LATENCY, "ns"),
    "a2a_setup_ns": (*_LATENCY, "ns"),
    "aiv_copy_bw": (*_RATE, "bytes/s"),
    "gemm_eff": (1e-3, 1.0, "of peak"),
    "tile_gemm_eff": (1e-3, 1.0, "of peak"),
    "recv_buffer_bytes": (1e3, float("inf"), "bytes (the presets' inf: no limit)"),
}
"""Sane range of every numeric hardware field (inclusive) and its unit."""

_ZERO_MEANS_DEFAULT = {"link_bw"}


def _fmt(x: float) -> str:
    return f"{x:g}"


def number_in_range(option: str, value: Any, low: float, high: float, unit: str) -> float:
    """`value` as a float in [low, high] (finite unless high is inf), else a UserError naming
    the range."""
    if isinstance(value, bool):
        raise UserError(f"{option} {value!r}: expected a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{option} {value!r}: expected a number") from None
    if math.isnan(number) or not low <= number <= high:  # inf only where high is inf
        raise UserError(
            f"{option} {value!r}: must be a finite number in {_fmt(low)}..{_fmt(high)} {unit}"
        )
    return number


def check_peak_tflops(value: float | None) -> float | None:
    """--peak-tflops: None (use the trace's own figure) or a positive, finite TFLOP/s."""
    if value is None:
        return None
    low, high = PEAK_TFLOPS_RANGE
    return number_in_range("--peak-tflops", value, low, high, "TFLOP/s")


def check_seed(value: str, option: str = "--seed") -> int:
    """--seed: an integer in 0..2^63-1 (numpy's generators refuse negative seeds)."""
    try:
        seed = int(str(value).strip())
    except ValueError:
        raise UserError(f"{option} {value!r}: expected an integer") from None
    if not 0 <= seed <= SEED_MAX:
        raise UserError(f"{option} {value!r}: must be an integer in 0..2^63-1")
    return seed


def check_hw_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Numeric `--hw` / `--hw-file` values: finite and in `HW_RANGES`; other keys (unknown
    ones, bandwidth tables) are left to the executor, which names what it knows."""
    for key, value in overrides.items():
        if key not in HW_RANGES:
            _check_finite_parts(f"--hw {key}", value, value)
            continue
        low, high, unit = HW_RANGES[key]
        if key in _ZERO_MEANS_DEFAULT and _is_zero(value):
            continue
        number_in_range(f"--hw {key}", value, low, high, unit)
        if unit == "cores" and float(value) != int(float(value)):
            raise UserError(f"--hw {key} {value!r}: expected a whole number of cores")
    return overrides


_PARTS = re.compile(r"[,:;=\s\[\]()]+")


def _check_finite_parts(option: str, value: Any, whole: Any) -> None:
    """Every number inside a compound value (a bandwidth table `8:nan,64:1e9`, a TOML list or
    table) must be finite: NaN/Inf there otherwise reach the executor's clock as an overflow."""
    if isinstance(value, dict):
        for item in value.values():
            _check_finite_parts(option, item, whole)
        return
    if isinstance(value, list | tuple):
        for item in value:
            _check_finite_parts(option, item, whole)
        return
    parts = [value] if isinstance(value, int | float) else _PARTS.split(str(value))
    for part in parts:
        if isinstance(part, bool):
            continue
        try:
            number = float(part)
        except (TypeError, ValueError):
            continue
        if not math.isfinite(number):
            raise UserError(f"{option} {str(whole)!r}: {str(part)!r} is not a finite number")


def _is_zero(value: Any) -> bool:
    try:
        return float(value) == 0.0
    except (TypeError, ValueError):
        return False
