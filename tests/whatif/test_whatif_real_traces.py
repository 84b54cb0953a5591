"""What-if on the shared real PyTorch traces (4 gloo CPU ranks of an expert-parallel MoE
layer): extraction against the run's own run_meta.json, replay-as-measured within 15%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moetrace.trace.io import load
from moetrace.whatif.calibrate import calibrate
from moetrace.whatif.extract import WhatIfInputError, extract
from moetrace.whatif.replay import simulate_layer


def _gloo(real_traces: Path, variant: str) -> list[Path]:
    return sorted((real_traces / "torch_gloo_moe" / variant).glob("rank*.pt.trace.json.gz"))


@pytest.mark.parametrize("variant", ["balanced", "skewed", "overlapped"])
def test_extraction_matches_run_meta(real_traces: Path, variant: str) -> None:
    meta = json.loads((real_traces / "torch_gloo_moe" / variant / "run_meta.json").read_text())
    wl = extract(load(_gloo(real_traces, variant)))
    assert (wl.ranks, wl.tokens, wl.hidden, wl.intermediate, wl.experts, wl.top_k) == (
        meta["world_size"],
        meta["tokens_per_rank"],
        meta["hidden"],
        meta["ffn"],
        meta["experts"],
        meta["topk"],
    )
    assert wl.expert_rank == [meta["expert_to_rank"][str(e)] for e in range(meta["experts"])]
    assert wl.expert_rows == meta["tokens_per_expert_last_step"]
    assert wl.schedule == ("chunked" if variant == "overlapped" else "sequential")
    assert "dispatch_dtype" in wl.assumed()


@pytest.mark.parametrize("variant", ["balanced", "skewed"])
def test_replay_as_measured_within_15_percent(real_traces: Path, variant: str) -> None:
    trace = load(_gloo(real_traces, variant))
    wl = extract(trace)
    cal = calibrate(trace, wl, "h100", variant)
    fitted = {f.field: f for f in cal.fits}
    # the GEMM rate is a CPU's: tens of GFLOP/s on one host thread
    rate = fitted["cube_flops_per_cycle"].value * cal.hardware.clock_hz
    assert 5e9 < rate < 5e11
    replay = simulate_layer(wl, cal.hardware, wl.schedule)
    assert replay.makespan_ns == pytest.approx(wl.measured_ns, rel=0.15)


def test_single_gpu_trace_without_layer_ranges_is_refused(real_traces: Path) -> None:
    path = real_traces / "kineto_moe/b300_moe_microbench/moe_01_many_experts_few_tokens.json.gz"
    with pytest.raises(WhatIfInputError, match="no expert-parallel MoE layer"):
        extract(load(path))


def test_missing_shapes_are_asked_for_then_assumed(real_traces: Path) -> None:
    """Without record_shapes on the gate GEMM, tokens/hidden/experts come from --set and are
    listed as assumed; without --set, one line names the key to give."""
    import polars as pl

    trace = load(_gloo(real_traces, "balanced"))
    no_dims = pl.col("args").str.replace(r'"Input Dims": \[\[1024, 256\], \[256, 16\]\]', '"x": 0')
    trace = trace.__class__(
        trace.events.with_columns(no_dims), trace.tracks, trace.deps, trace.counters, trace.meta
    )
    with pytest.raises(WhatIfInputError, match=r"--set tokens="):
        extract(trace)
    wl = extract(trace, {"tokens": 1024, "hidden": 256, "experts": 16})
    assert (wl.tokens, wl.hidden, wl.experts, wl.intermediate) == (1024, 256, 16, 384)
    assert {"tokens", "hidden", "experts"} <= set(wl.assumed())
