"""The what-if of a measured trace, end to end: extract, calibrate, replay, change, report.

`what_if()` returns one JSON-ready dict (`measured_ns`, `replayed_ns`, `whatif_ns`, `speedup`,
`exposed_comm_ns` and `idle_ns` for each of measured/replayed/whatif, `assumed`) plus the
what-if trace; `text()` renders it for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moetrace.executor.hardware import Hardware, apply_overrides
from moetrace.trace.model import Trace
from moetrace.whatif.calibrate import Calibration, calibrate
from moetrace.whatif.extract import (
    LayerWorkload,
    extract,
    is_executor_trace,
    layer_windows,
    torch_layer_events,
)
from moetrace.whatif.placement import what_if_layer
from moetrace.whatif.replay import measured_figures, simulate_layer


@dataclass
class WhatIf:
    """The report (JSON-ready) and the replayed and what-if traces."""

    report: dict[str, Any]
    replayed: Trace
    whatif: Trace


def assumed_fields(wl: LayerWorkload, cal: Calibration, extra: dict[str, str]) -> dict[str, str]:
    """Everything not read from the trace: workload fields, and hardware fields kept from the
    base preset (not fitted)."""
    out = {f"workload.{k}": v for k, v in wl.assumed().items()}
    out.update({f"workload.{k}": v for k, v in extra.items()})
    for f in cal.fits:
        if f.how.startswith("derived"):
            out[f"hardware.{f.field}"] = f"{f.how}: {f.value:g}"
    fitted = {f.field for f in cal.fits}
    if cal.given:  # the hardware file replayed as given: its sources say where each came from
        return out
    for key in cal.base.to_dict():
        if key in ("name", "peak_flops") or key in fitted or key in cal.known:
            continue
        out[f"hardware.{key}"] = f"assumed: {cal.base.name} preset"
    return out


def what_if(
    trace: Trace,
    trace_name: str,
    base: str | Hardware,
    schedule: str,
    placement: str | None = None,
    change: dict[str, Any] | None = None,
    sets: dict[str, Any] | None = None,
    calibrated: Hardware | None = None,
    chunks: int | None = None,
    options: dict[str, Any] | None = None,
    hardware_file: str = "",
    use_meta: bool = True,
) -> WhatIf:
    """Extract the layer, calibrate (unless `calibrated` hardware, read from `hardware_file`,
    is given: then it is replayed as given), replay it as measured, then under
    `schedule`/`placement` (round-robin, balanced, eplb[:R] or an expert -> rank file) with
    `chunks`, the schedule `options` and the hardware `change` applied."""
    wl = extract(trace, sets)
    if calibrated is not None:
        cal = Calibration(
            calibrated,
            [],
            calibrated,
            trace_name,
            [f"hardware {hardware_file or calibrated.name} replayed as given (no fit)"],
            given=hardware_file or calibrated.name,
        )
    else:
        cal = calibrate(trace, wl, base, trace_name, use_meta)
    hw = cal.hardware
    replayed = simulate_layer(wl, hw, wl.schedule, label="replayed")
    target = apply_overrides(hw, change or {})
    changed, exec_placement, placement_label = what_if_layer(wl, placement)
    whatif = simulate_layer(changed, target, schedule, exec_placement, "whatif", chunks, options)
    windows = None if is_executor_trace(trace) else layer_windows(torch_layer_events(trace))
    if windows is not None and windows.height:
        last = windows["step"].max()
        windows = windows.filter(windows["step"] == last)
    m_exposed, m_idle = measured_figures(trace, windows)
    assumed = assumed_fields(wl, cal, {**replayed.assumed, **whatif.assumed})
    replay_error = replayed.makespan_ns / wl.measured_ns - 1
    report = {
        "trace": trace_name,
        "measured_ns": wl.measured_ns,
        "replayed_ns": replayed.makespan_ns,
        "whatif_ns": whatif.makespan_ns,
        "replay_error": replay_error,
        # the change's effect inside the model (replayed -> what-if); the replay error above
        # says how far the model is from the measurement
        "speedup": replayed.makespan_ns / whatif.makespan_ns,
        "exposed_comm_ns": {
            "measured": m_exposed,
            "replayed": replayed.exposed_comm_ns,
            "whatif": whatif.exposed_comm_ns,
        },
        "idle_ns": {"measured": m_idle, "replayed": replayed.idle_ns, "whatif": whatif.idle_ns},
        "measured_schedule": wl.schedule,
        "whatif_schedule": schedule,
        "whatif_placement": placement_label or whatif.placement,
        "whatif_options": {"chunks": chunks, **(options or {})},
        "layers": [layer_row(0, wl.measured_ns, replayed.makespan_ns, whatif.makespan_ns)],
        "change": {k: str(v) for k, v in (change or {}).items()},
        "workload": {k: v for k, v in wl.to_dict().items() if k != "sources"},
        "measured": {k: v for k, v in wl.sources.items() if not v.startswith("assumed")},
        "assumed": assumed,
        "calibration": cal.to_dict(),
    }
    return WhatIf(report, replayed.trace, whatif.trace)


def layer_row(
    layer: int, measured_ns: float, replayed_ns: float, whatif_ns: float
) -> dict[str, Any]:
    """One layer's times (ns) and what the change saves per step (µs): the what-if scaled by
    measured / replayed (the model's error taken out), saved = measured - that; its error
    bar = |replay error| x the scaled what-if (the what-if is as far off as the replay was).
    The extraction reads one MoE layer per step, so per layer is per step."""
    scaled = whatif_ns * measured_ns / replayed_ns
    return {
        "layer": layer,
        "measured_ns": measured_ns,
        "replayed_ns": replayed_ns,
        "whatif_ns": whatif_ns,
        "whatif_scaled_ns": scaled,
        "saved_us_per_step": (measured_ns - scaled) / 1e3,
        "error_bar_us": abs(replayed_ns / measured_ns - 1) * scaled / 1e3,
    }


_DEFAULT_OPTIONS: dict[str, Any] = {
    "one_sided": True,
    "l2": True,
    "dynamic": False,
    "order": "auto",
}


def _ms(ns: float) -> str:
    return f"{ns / 1e6:9.3f} ms"


def _row(label: str, time_ns: float, exposed_ns: float, idle_ns: float) -> str:
    return f"  {label:<14} {_ms(time_ns)}  {_ms(exposed_ns)}  {_ms(idle_ns)}"


def fit_line(fit: dict[str, Any]) -> str:
    """One fitted field: value, unit, R², events used and how it was fitted."""
    err = fit.get("err")
    pm = f"±{100 * err:.1f}%" if err is not None else "±?"
    return (
        f"    {fit['field']:<16} {fit['value']:<12.5g} {fit['unit']:<8} {pm:<7} "
        f"R²={fit['r2']:.3f} n={fit['n']}  {fit['how']}"
    )


def known_line(calibration: dict[str, Any]) -> list[str]:
    """The hardware fields read from the trace's meta (not fitted), in one line, if any."""
    known = calibration.get("known_from_trace") or []
    return [f"    hardware from the trace's meta: {', '.join(known)}"] if known else []


def assumed_lines(assumed: dict[str, str], base: str) -> list[str]:
    """What was not read from the trace: workload fields one a line with why, hardware fields
    derived by a model in one line, the rest named as the base preset's."""
    lines = ["  assumed (not in the trace):"]
    lines += [f"    {k}: {why}" for k, why in assumed.items() if k.startswith("workload.")]
    derived = [
        f"{k.split('.', 1)[1]}={why.rsplit(': ', 1)[1]}"
        for k, why in assumed.items()
        if k.startswith("hardware.") and why.startswith("derived")
    ]
    if derived:
        lines.append(f"    hardware derived by the model: {', '.join(derived)}")
    preset = [
        k.split(".", 1)[1]
        for k, why in assumed.items()
        if k.startswith("hardware.") and not why.startswith("derived")
    ]
    if preset:
        lines.append(f"    hardware from {base}: {', '.join(preset)}")
    return lines


def text(report: dict[str, Any]) -> list[str]:
    """The report for people: the three times, the speedup, comm and idle, what was assumed."""
    wl = report["workload"]
    ex, idle = report["exposed_comm_ns"], report["idle_ns"]
    lines = [
        f"{report['trace']}: MoE layer of {wl['ranks']} ranks x {wl['tokens']} tokens, hidden "
        f"{wl['hidden']}, FFN {wl['intermediate']}, {wl['experts']} experts, top-{wl['top_k']}, "
        f"measured schedule {report['measured_schedule']}",
        f"                 {'time':>12}  {'exposed comm':>13}  {'idle':>12}",
        _row("measured", report["measured_ns"], ex["measured"], idle["measured"]),
        _row("replayed", report["replayed_ns"], ex["replayed"], idle["replayed"])
        + f"   (error {100 * report['replay_error']:+.1f}% vs measured)",
        _row("what-if", report["whatif_ns"], ex["whatif"], idle["whatif"])
        + f"   ({report['whatif_schedule']}, {report['whatif_placement']}"
        + "".join(f", {k}={v}" for k, v in report["change"].items())
        + "".join(
            f", {k}={v}"
            for k, v in report.get("whatif_options", {}).items()
            if v is not None and v != _DEFAULT_OPTIONS.get(k)
        )
        + ")",
        f"  speedup        {report['speedup']:.2f}x (replayed / what-if); exposed comm and idle "
        "are summed over ranks",
        f"  {'per layer':<14} {'measured':>12} {'replayed':>12} {'what-if':>12}   saved per step",
    ]
    for row in report["layers"]:
        lines.append(
            f"  layer {row['layer']:<8} {_ms(row['measured_ns'])} {_ms(row['replayed_ns'])} "
            f"{_ms(row['whatif_ns'])}   {row['saved_us_per_step']:.1f} ± "
            f"{row['error_bar_us']:.1f} µs (what-if scaled by measured/replayed; ± the replay "
            "error)"
        )
    given = report["calibration"].get("given")
    lines.append(f"  hardware: {given}, replayed as given" if given else "  fitted:")
    for fit in report["calibration"]["fits"]:
        if fit["how"].startswith("derived"):
            continue
        lines.append(fit_line(fit))
    lines += known_line(report["calibration"])
    for note in report["calibration"]["notes"]:
        lines.append(f"    note: {note}")
    lines += assumed_lines(report["assumed"], report["calibration"]["base"])
    return lines
