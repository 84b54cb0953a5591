"""Fit the executor's hardware fields to a measured trace, and write them as a preset TOML.

The fits live in `fit_executor` (moetrace executor traces) and `fit_torch` (PyTorch traces),
what a calibration is in `calibration`, the TOML writer in `calibration_toml`.

Each fit says what it was fitted on and how well (R² of the measured durations against the
fitted model's, and the number of events); fields the trace cannot identify keep the base
preset's value and source. The models of executor traces (GEMM, HBM, all-to-all, launch) are
stated in `fit_executor`'s docstring and docs/executor.md.
PyTorch (CPU/GPU) traces: GEMM time against FLOPs from `Input Dims` (least squares through a
fixed per-call overhead), all-to-all time against bytes from the split sizes (latency +
bandwidth by least squares), per-op overhead from the small ops.
"""

from __future__ import annotations

from moetrace.executor.hardware import Hardware, get_hardware
from moetrace.trace.model import Trace
from moetrace.whatif.calibration import Calibration, Fit, r_squared
from moetrace.whatif.calibration_toml import to_toml
from moetrace.whatif.extract import LayerWorkload, is_executor_trace
from moetrace.whatif.fit_executor import calibrate_executor
from moetrace.whatif.fit_torch import calibrate_torch

__all__ = ["Calibration", "Fit", "calibrate", "r_squared", "to_toml"]


def calibrate(
    trace: Trace, wl: LayerWorkload, base: str | Hardware, name: str, use_meta: bool = True
) -> Calibration:
    """Calibrate `base` (a preset name or profile) to `trace`; an executor trace's stated
    hardware (its meta) is taken unless `use_meta` is False (then every field the events
    identify is fitted over `base`)."""
    hw = get_hardware(base)
    if is_executor_trace(trace):
        return calibrate_executor(trace, hw, name, use_meta)
    return calibrate_torch(trace, wl, hw, name)
