"""Self-check: the executor writes a trace with hidden hardware values; calibrating from the
trace alone recovers them, and replaying the extracted layer reproduces the measured time.

The hidden values are the ones passed to `simulate` here, removed from the trace's meta
(`hide_hardware`: `calibrate` takes every hardware field the meta states); the tolerances are
the issue's 5%."""

from __future__ import annotations

import dataclasses

import pytest

from moetrace.executor.hardware import get_hardware, load_preset
from moetrace.executor.run import simulate
from moetrace.testing.hidden_hardware import hide_hardware
from moetrace.whatif.calibrate import calibrate, to_toml
from moetrace.whatif.extract import extract
from moetrace.whatif.replay import simulate_layer

HIDDEN = {
    "link_bw": 100e9,
    "gemm_eff": 0.6,
    "tile_gemm_eff": 0.55,
    "hbm_bw": 2.8e12,
    "launch_ns": 7000.0,
    "a2a_setup_ns": 15000.0,
}


def _fits(cal: object) -> dict[str, float]:
    return {f.field: f.value for f in cal.fits if not f.how.startswith("derived")}  # type: ignore[attr-defined]


@pytest.mark.parametrize("schedule", ["sequential", "chunked", "tile"])
def test_calibration_recovers_hidden_hardware_and_replay_matches(schedule: str) -> None:
    trace = simulate("mixtral-8x7b", "h100", 8, 600, schedule, hw_overrides=HIDDEN, tile_rows=256)
    trace = hide_hardware(trace, HIDDEN)
    wl = extract(trace)
    # the workload read from the tiles is the one simulated
    assert (wl.ranks, wl.tokens, wl.hidden, wl.intermediate, wl.experts, wl.top_k) == (
        8,
        600,
        4096,
        14336,
        8,
        2,
    )
    assert wl.schedule == schedule and wl.tile_rows == 256 and wl.dispatch_dtype == "bf16"
    assert wl.expert_rank == [e % 8 for e in range(8)]  # round-robin placement
    assert sum(wl.expert_rows) == 8 * 600 * 2
    cal = calibrate(trace, wl, "h100", "selfcheck")
    fits = _fits(cal)
    eff = "tile_gemm_eff" if schedule == "tile" else "gemm_eff"
    expected = {
        eff: HIDDEN[eff],
        "hbm_bw": HIDDEN["hbm_bw"],
        "launch_ns": HIDDEN["launch_ns"],
        "a2a_setup_ns": HIDDEN["a2a_setup_ns"],
    }
    if schedule == "sequential":  # elsewhere the port's HBM share binds the transfers (noted)
        expected["link_bw"] = HIDDEN["link_bw"]
    else:
        assert "link_bw" not in fits and any("share of HBM" in n for n in cal.notes)
    for key, value in expected.items():
        assert fits[key] == pytest.approx(value, rel=0.05), key
    replay = simulate_layer(wl, cal.hardware, wl.schedule)
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.05)


def test_skewed_routing_other_shape_and_hardware() -> None:
    """Inputs the fits were not tuned on: Qwen3 shape, Ascend A3, zipf routing, 16 ranks."""
    hidden = {"link_bw": 60e9, "gemm_eff": 0.5, "hbm_bw": 1.2e12, "launch_ns": 9000.0}
    trace = simulate(
        "qwen3-235b", "ascend-a3", 16, 512, "sequential", "zipf:0.5", seed=3, hw_overrides=hidden
    )
    trace = hide_hardware(trace, hidden)
    wl = extract(trace)
    assert (wl.hidden, wl.intermediate, wl.experts, wl.top_k) == (4096, 1536, 128, 8)
    assert len(set(wl.expert_rows)) > 1  # skewed: the rows per expert differ
    cal = calibrate(trace, wl, "ascend-a3", "skewed")
    fits = _fits(cal)
    for key, value in hidden.items():
        assert fits[key] == pytest.approx(value, rel=0.05), key
    replay = simulate_layer(wl, cal.hardware, "sequential")
    # the replay draws top-k from the measured per-expert rows: same load in expectation
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.05)
    assert "routing" in replay.assumed


def test_calibrated_toml_is_a_preset_the_executor_runs_on(tmp_path: object) -> None:
    trace = simulate("mixtral-8x7b", "h100", 8, 256, "sequential", hw_overrides={"link_bw": 80e9})
    trace = hide_hardware(trace, ["link_bw"])
    wl = extract(trace)
    cal = calibrate(trace, wl, "h100", "t.json")
    path = tmp_path / "hw.toml"  # type: ignore[operator]
    path.write_text(to_toml(cal))
    hw, meta, _ = load_preset(path)
    assert dataclasses.asdict(hw) == dataclasses.asdict(cal.hardware)
    assert meta["link_bw"][1].startswith("fit: t.json") and "R²=" in meta["link_bw"][1]
    assert meta["n_aic"][1].startswith("from the trace's meta: t.json")
    again = simulate("mixtral-8x7b", hw, 8, 256, "sequential")
    assert again.meta["executor"]["makespan_ns"] == pytest.approx(wl.measured_ns, rel=0.05)
    assert get_hardware(hw).link_bw == pytest.approx(80e9, rel=0.01)


@pytest.mark.parametrize("schedule", ["sequential", "chunked"])
def test_a_base_with_slower_l2_never_fits_a_negative_hbm_bandwidth(schedule: str) -> None:
    """Calibrating an Ascend-A3 run against H100 (slower L2 per core) used to subtract more L2
    time than some tiles took, fit a negative hbm_bw and refuse it. Those tiles say nothing
    about HBM: they are left out, and a note says so."""
    trace = simulate(
        preset="deepseek-v3", hardware="ascend-a3", ranks=8, tokens=512, schedule=schedule
    )
    trace = hide_hardware(trace)  # no hardware in the meta: the base is the given h100
    cal = calibrate(trace, extract(trace), "h100", "a3-on-h100")
    assert cal.hardware.hbm_bw > 0 and cal.hardware.hbm_core_rate > 0
    assert all(f.value >= 0 for f in cal.fits if f.field.startswith("hbm"))
    assert any("leave no time for HBM after their L2 reads" in n for n in cal.notes)
