"""The key rows of the validation table (docs/executor.md), asserted.

The full-size speedup row runs the real case (64 ranks, 4096 tokens); the other rows use a
smaller case where the same mechanisms show, to keep the suite fast.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from moetrace.commands.executor_validate import (
    BEGIN,
    END,
    HW_BEGIN,
    REFERENCE_BW,
    effective_bandwidth,
    render_hardware,
    update_docs,
)
from moetrace.executor.hardware import FIELDS, PRESETS
from moetrace.executor.run import simulate, simulate_run

MID = dict(ranks=8, tokens=4096)  # compute-bound GEMMs, as in the full case


@pytest.mark.slow
def test_tile_vs_sequential_speedup_is_in_the_published_range() -> None:
    seq = simulate_run(schedule="sequential")
    tile = simulate_run(schedule="tile")
    speedup = seq.makespan_ns / tile.makespan_ns
    assert 1.35 <= speedup <= 1.75


@pytest.mark.parametrize("ablation", [dict(one_sided=False), dict(dynamic=True)])
def test_each_ablation_costs_time(ablation: dict) -> None:
    tile = simulate_run(schedule="tile", **MID)
    ablated = simulate_run(schedule="tile", **MID, **ablation)
    assert ablated.makespan_ns > 1.005 * tile.makespan_ns


def test_l2_intermediates_cost_time_only_where_hbm_is_the_bottleneck() -> None:
    """With compute-bound GEMMs (A3, 1.6 TB/s) the extra HBM round trips of --no-l2 fit in the
    idle bandwidth; on a die with a quarter of A3's HBM bandwidth they slow the layer down."""
    tile = simulate_run(schedule="tile", **MID)
    no_l2 = simulate_run(schedule="tile", **MID, l2=False)
    assert no_l2.makespan_ns >= tile.makespan_ns
    assert no_l2.timed.hbm_bytes.sum() > tile.timed.hbm_bytes.sum()
    slow = {"hbm_bw": 0.4e12}
    tile = simulate_run(schedule="tile", **MID, hw_overrides=slow)
    no_l2 = simulate_run(schedule="tile", **MID, l2=False, hw_overrides=slow)
    assert no_l2.makespan_ns > 1.05 * tile.makespan_ns


def test_tile_beats_chunked_beats_nothing_at_full_overlap_potential() -> None:
    seq = simulate_run(schedule="sequential", ranks=8, tokens=4096)
    chunked = simulate_run(schedule="chunked", ranks=8, tokens=4096)
    tile = simulate_run(schedule="tile", ranks=8, tokens=4096)
    assert tile.makespan_ns < chunked.makespan_ns < seq.makespan_ns


def test_balanced_placement_beats_round_robin_under_skew() -> None:
    rr = simulate_run(schedule="tile", ranks=8, tokens=2048, routing="zipf:1.0")
    bal = simulate_run(
        schedule="tile", ranks=8, tokens=2048, routing="zipf:1.0", placement="balanced"
    )
    assert bal.makespan_ns < 0.95 * rr.makespan_ns
    # same routing, same work: only where the experts live changed
    assert (bal.graph.assign == rr.graph.assign).all()


def test_placement_changes_nothing_under_balanced_routing_load() -> None:
    rr = simulate_run(schedule="tile", ranks=8, tokens=1024)
    bal = simulate_run(schedule="tile", ranks=8, tokens=1024, placement="balanced")
    assert bal.makespan_ns == pytest.approx(rr.makespan_ns, rel=0.02)


def test_effective_bandwidth_from_the_trace_matches_deepep_at_ep8() -> None:
    trace = simulate(schedule="sequential", ranks=8, tokens=4096)
    dispatch = effective_bandwidth(trace, "dispatch") / 1e9
    combine = effective_bandwidth(trace, "combine") / 1e9
    assert dispatch == pytest.approx(REFERENCE_BW["dispatch"][8], rel=0.15)
    assert combine == pytest.approx(REFERENCE_BW["combine"][8], rel=0.15)


def test_a_slower_link_lowers_the_measured_bandwidth() -> None:
    trace = simulate(schedule="sequential", ranks=8, tokens=1024, hw_overrides={"link_bw": 40e9})
    assert effective_bandwidth(trace, "dispatch") / 1e9 == pytest.approx(40, rel=0.15)


def test_every_hardware_field_has_a_unit_and_a_source() -> None:
    fields = set(PRESETS["ascend-a3"].to_dict()) - {"name", "peak_flops"}
    assert fields == set(FIELDS)
    for unit, source in FIELDS.values():
        assert unit and source
        assert "sim.md" in source or "assumed" in source or "0 =" in source
    table = render_hardware()
    assert all(f"`{key}`" in table for key in FIELDS)


def test_docs_sections_are_replaced_in_place(tmp_path: Path) -> None:
    doc = tmp_path / "executor.md"
    hw_old = f"{HW_BEGIN}\nold\n<!-- END hardware -->"
    doc.write_text(f"# intro\n\n{hw_old}\n\nmiddle\n\n{BEGIN}\nold\n{END}\n\ntail\n")
    update_docs(doc, f"{BEGIN}\nNEW TABLE\n{END}")
    text = doc.read_text()
    assert "NEW TABLE" in text and "old" not in text
    assert text.index("intro") < text.index("middle") < text.index("NEW TABLE") < text.index("tail")
    assert "`n_aic`" in text
