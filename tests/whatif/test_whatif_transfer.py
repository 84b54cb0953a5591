"""Issue 24: calibration takes the trace's own hardware, recovers the hidden fields, and a
fit on one run predicts another run of the same hardware (other routing, other schedule).

The hidden values are passed to `simulate` and removed from the trace's meta
(`hide_hardware`); the tolerances are the issue's (5% fit and replay, 10% tile what-if,
15% cross-run); the reference for a what-if is the executor run on the hidden hardware."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from moetrace.executor.hardware import get_hardware
from moetrace.executor.run import simulate
from moetrace.executor.workload import make_workload, route, rows_per_source_expert
from moetrace.testing.hidden_hardware import hide_hardware
from moetrace.trace.model import Trace
from moetrace.whatif.calibrate import calibrate
from moetrace.whatif.calibration import Fit, refuse_unidentified
from moetrace.whatif.extract import extract
from moetrace.whatif.replay import routing_of, shape_of, simulate_layer

HIDDEN = {"gemm_eff": 0.55, "link_bw": 60e9}
MUST_FIT = [*HIDDEN, "launch_ns", "a2a_setup_ns", "link_latency_ns"]


def _run(schedule: str, routing: str = "balanced") -> Trace:
    return simulate(
        "deepseek-v3", "ascend-a3", 16, 1024, schedule, routing, seed=1, hw_overrides=HIDDEN
    )


@pytest.fixture(scope="module")
def sequential() -> Trace:
    return hide_hardware(_run("sequential"), MUST_FIT)


@pytest.fixture(scope="module")
def skewed() -> Trace:
    return hide_hardware(_run("sequential", "zipf:1.0"), MUST_FIT)


def test_base_and_known_fields_come_from_the_trace(sequential: Trace) -> None:
    """The issue's run: DeepSeek-V3 on A3 used to be calibrated as h100 with gemm_eff 1."""
    wl = extract(sequential)
    cal = calibrate(sequential, wl, "h100", "seq")
    assert cal.base.name == "ascend-a3" and any("from the trace's meta" in n for n in cal.notes)
    assert set(cal.known) == set(sequential.meta["executor"]["hardware"]) - {"name", "peak_flops"}
    fits = {f.field: f for f in cal.fits}
    for key, value in HIDDEN.items():
        assert fits[key].value == pytest.approx(value, rel=0.05), key
        assert math.isfinite(fits[key].err) and fits[key].err < 0.05, key
    assert "tile_gemm_eff" not in fits  # stated by the meta: neither fitted nor derived
    assert cal.hardware.tile_gemm_eff == get_hardware("ascend-a3").tile_gemm_eff
    replay = simulate_layer(wl, cal.hardware, "sequential")
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.05)
    tile = simulate_layer(wl, cal.hardware, "tile")
    truth = _run("tile").meta["executor"]["makespan_ns"]
    assert tile.makespan_ns == pytest.approx(truth, rel=0.10)


@pytest.mark.parametrize("direction", ["balanced->skewed", "skewed->balanced"])
def test_a_fit_on_one_routing_predicts_the_other(
    sequential: Trace, skewed: Trace, direction: str
) -> None:
    fit_on, predict = (sequential, skewed) if direction.startswith("b") else (skewed, sequential)
    cal = calibrate(fit_on, extract(fit_on), "ascend-a3", "fit")
    wl = extract(predict)
    replay = simulate_layer(wl, cal.hardware, "sequential")
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.15)


def test_a_fit_the_trace_cannot_identify_is_refused() -> None:
    base = get_hardware("h100")
    notes: list[str] = []
    fits = [
        Fit("link_bw", 1e9, "bytes/s", "t", 0.1, 6, 0.5),  # ±50%: refused
        Fit("launch_ns", 7000.0, "ns", "t", 1.0, 10, 0.01),
        Fit("hbm_bw", 1e12, "bytes/s", "t", 1.0, 1, 0.0),  # one event: refused
    ]
    kept = refuse_unidentified(base, fits, notes)
    assert [f.field for f in kept] == ["launch_ns"]
    assert len(notes) == 2 and "link_bw not identified" in notes[0]
    assert f"{base.link_bw:g} kept" in notes[0]


def test_the_replay_draws_the_measured_rows_per_expert(skewed: Trace, tmp_path: Path) -> None:
    """The zipf run's rows per expert as routing weights under-load its hottest experts (k
    distinct experts per token); the fitted weights give back the measured rows."""
    wl = extract(skewed)
    routing, assumed = routing_of(wl, tmp_path)
    probe = make_workload(shape_of(wl), wl.ranks, wl.tokens, routing, "round-robin")
    drawn = rows_per_source_expert(probe, route(probe)).sum(axis=0)
    target = np.asarray(wl.expert_rows)
    hottest = int(np.argmax(target))
    # the draws are whole rows: a few rows off on the cold experts, the hottest within 1%
    assert np.abs(drawn - target).sum() < 0.01 * target.sum()
    assert abs(drawn[hottest] / target[hottest] - 1) < 0.01
    assert "fitted to the measured rows" in assumed["routing"]
    naive = tmp_path / "naive.txt"
    naive.write_text(" ".join(map(str, wl.expert_rows)))
    probe = make_workload(shape_of(wl), wl.ranks, wl.tokens, f"counts:{naive}", "round-robin")
    assert rows_per_source_expert(probe, route(probe)).sum(axis=0)[hottest] < target[hottest]


@pytest.mark.parametrize(("schedule", "tokens"), [("tile", 1024), ("chunked", 512)])
def test_a_fit_on_one_schedule_and_size_predicts_another(
    sequential: Trace, schedule: str, tokens: int
) -> None:
    """Fitted on the balanced sequential run, replaying a zipf run of another schedule and
    token count on the same hardware (its own trace, hidden alike)."""
    cal = calibrate(sequential, extract(sequential), "ascend-a3", "fit")
    other = simulate(
        "deepseek-v3", "ascend-a3", 16, tokens, schedule, "zipf:1.0", seed=1, hw_overrides=HIDDEN
    )
    wl = extract(hide_hardware(other, MUST_FIT))
    assert wl.schedule == schedule and wl.tokens == tokens
    replay = simulate_layer(wl, cal.hardware, schedule)
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.15)


def test_ignoring_the_meta_fits_over_the_given_base(sequential: Trace) -> None:
    cal = calibrate(sequential, extract(sequential), "ascend-a3", "x", use_meta=False)
    assert cal.known == [] and not any("from the trace's meta" in n for n in cal.notes)
    fits = {f.field: f.value for f in cal.fits}
    assert fits["gemm_eff"] == pytest.approx(HIDDEN["gemm_eff"], rel=0.05)
    assert "tile_gemm_eff" in fits  # not stated now: derived from gemm_eff (assumed ratio)
