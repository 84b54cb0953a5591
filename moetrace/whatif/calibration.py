"""What a calibration is: each fitted hardware field with its quality, and the hardware they
make (fitted fields over the base preset; the rest keep the base preset's value and source).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.hardware import Hardware, apply_overrides


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


def finish(base: Hardware, fits: list[Fit], name: str, notes: list[str]) -> Calibration:
    _derive_other_eff(base, fits, notes)
    overrides = {
        f.field: (round(f.value) if isinstance(getattr(base, f.field), int) else f.value)
        for f in fits
    }
    hw = apply_overrides(base, overrides)
    hw = dataclasses.replace(hw, name=f"calibrated-{base.name}")
    return Calibration(base, fits, hw, name, notes)
