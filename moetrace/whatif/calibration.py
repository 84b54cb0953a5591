"""What a calibration is: each fitted hardware field with its quality, and the hardware they
make (fitted fields over the base preset; the rest keep the base preset's value and source).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from moetrace.executor.hardware import Hardware, apply_overrides

REFUSE_ERR = 0.2
"""A fit whose relative uncertainty is above this (20%) does not identify its field: refused."""


@dataclass(frozen=True)
class Fit:
    """One fitted hardware field: value, unit, how it was fitted (R², events used) and its
    relative uncertainty `err` (one standard error / value; NaN when not estimated)."""

    field: str
    value: float
    unit: str
    how: str
    r2: float
    n: int
    err: float = math.nan

    def source(self, trace_name: str) -> str:
        """The preset's `source` text: the fit with its quality, or the model's assumption."""
        if self.how.startswith("derived"):
            return f"{self.how}, for {trace_name}"
        return f"fit: {trace_name}, {self.how}, R²={self.r2:.4f}, n={self.n}, ±{self.err:.2%}"


def rel_sem(values: np.ndarray) -> float:
    """Relative standard error of the mean of `values` (each an estimate of one quantity):
    std / sqrt(n) / |mean|; 0 for one value or no spread, NaN for none."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.isfinite(v).all():
        return math.nan
    mean = float(np.abs(v.mean()))
    if v.size == 1 or mean == 0:
        return 0.0
    return float(v.std(ddof=1) / math.sqrt(v.size) / mean)


def envelope_err(rates: np.ndarray, within: float = 0.01) -> float:
    """Relative uncertainty of an upper envelope: the gap between the largest rate and the
    median of the rates within `within` of it (0 when the envelope events agree exactly)."""
    r = np.asarray(rates, dtype=np.float64)
    top = float(r.max())
    return float(1 - np.median(r[r >= top * (1 - within)]) / top) if top > 0 else math.nan


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
    known: list[str] = dataclasses.field(default_factory=list)  # fields from the trace's meta
    given: str = ""  # the hardware file replayed as given (no fit used), if any

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base.name,
            "fits": [
                {**dataclasses.asdict(f), "err": f.err if math.isfinite(f.err) else None}
                for f in self.fits
            ],
            "notes": self.notes,
            "known_from_trace": self.known,
            "given": self.given,
            "hardware": self.hardware.to_dict(),
        }


def _derive_other_eff(
    base: Hardware, fits: list[Fit], notes: list[str], known: frozenset[str]
) -> None:
    """A trace of operator kernels measures `gemm_eff`, one of the tile kernel `tile_gemm_eff`;
    the other (needed by a what-if under the other kind of schedule) keeps the base preset's
    ratio between the two (assumed), so a slow measured GEMM stays slow when tiled."""
    have = {f.field: f for f in fits}
    for measured, other in (("gemm_eff", "tile_gemm_eff"), ("tile_gemm_eff", "gemm_eff")):
        if measured in have and other not in have and other not in known:
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


def refuse_unidentified(base: Hardware, fits: list[Fit], notes: list[str]) -> list[Fit]:
    """The fits that identify their field: one with a relative uncertainty above REFUSE_ERR
    or fitted on fewer than 2 events is refused (the base's value kept, with a note)."""
    kept = []
    for f in fits:
        if f.n < 2 or (math.isfinite(f.err) and f.err > REFUSE_ERR):
            notes.append(
                f"{f.field} not identified by this trace (fit {f.value:.5g} ±{f.err:.0%}, "
                f"n={f.n}): {base.name}'s {getattr(base, f.field):g} kept"
            )
        else:
            kept.append(f)
    return kept


def finish(
    base: Hardware,
    fits: list[Fit],
    name: str,
    notes: list[str],
    known: frozenset[str] = frozenset(),
) -> Calibration:
    """The calibration of `base` by `fits` (fields in `known`, read from the trace's meta,
    are part of `base` and never fitted or derived)."""
    fits = [f for f in fits if f.field not in known]
    _derive_other_eff(base, fits, notes, known)
    overrides = {
        f.field: (round(f.value) if isinstance(getattr(base, f.field), int) else f.value)
        for f in fits
    }
    hw = apply_overrides(base, overrides)
    hw = dataclasses.replace(hw, name=f"calibrated-{base.name}")
    return Calibration(base, fits, hw, name, notes, sorted(known))
