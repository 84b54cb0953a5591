"""simulate(): the trace contract, determinism, stragglers under skew, bad input."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import polars as pl
import pytest

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import PRESETS
from moetrace.executor.run import simulate, simulate_run
from moetrace.executor.taskgraph import T

SMALL: dict[str, Any] = dict(ranks=8, tokens=256)


@pytest.fixture(scope="module", params=["sequential", "chunked", "tile"])
def small_trace(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return request.param, simulate(schedule=request.param, **SMALL)


def test_trace_is_valid_and_shaped_as_promised(small_trace) -> None:  # type: ignore[no-untyped-def]
    schedule, trace = small_trace
    assert trace.problems() == []
    hw = PRESETS["ascend-a3"]
    tracks = trace.tracks
    assert sorted(tracks["rank"].unique().to_list()) == list(range(8))
    r3 = tracks.filter(pl.col("rank") == 3).sort("sort_index")
    assert r3["pid"].unique().to_list() == ["3"]
    assert r3["process_name"].unique().to_list() == ["rank 3"]
    names = r3["thread_name"].to_list()
    assert names[: hw.n_aic] == [f"AIC {i}" for i in range(hw.n_aic)]
    assert names[hw.n_aic : hw.n_aic + hw.n_aiv] == [f"AIV {i}" for i in range(hw.n_aiv)]
    assert names[hw.n_aic + hw.n_aiv : hw.n_aic + hw.n_aiv + 3] == ["TX", "RX", "step"]
    units = r3["unit"].cast(pl.String).to_list()
    assert units[: hw.n_aic] == ["aic"] * hw.n_aic
    assert set(units[hw.n_aic : hw.n_aic + hw.n_aiv]) == {"aiv"}
    assert units[hw.n_aic + hw.n_aiv : hw.n_aic + hw.n_aiv + 3] == ["link", "link", "other"]
    assert r3["sort_index"].to_list() == list(range(len(names)))
    ev = trace.events_with_tracks()
    steps = ev.filter(pl.col("name") == "step 0")
    makespan = trace.meta["executor"]["makespan_ns"]
    assert steps.height == 8
    assert set(steps["kind"].cast(pl.String)) == {"marker"}
    assert steps["dur"].to_list() == [makespan] * 8
    assert (ev["ts"] + ev["dur"]).max() == makespan
    # every GEMM is compute on an AIC with flops; every transfer is comm on a link with bytes
    gemm = ev.filter(pl.col("name").is_in(["gemm1", "gemm2"]))
    assert set(gemm["unit"].cast(pl.String)) == {"aic"}
    assert set(gemm["kind"].cast(pl.String)) == {"compute"}
    assert gemm["flops"].min() > 0
    tx = ev.filter(pl.col("name").is_in(["dispatch_tx", "combine_tx"]))
    assert set(tx["unit"].cast(pl.String)) == {"link"}
    assert set(tx["kind"].cast(pl.String)) == {"comm"}
    assert tx["bytes"].min() > 0
    args = json.loads(gemm["args"][0])
    assert args["task"] == gemm["name"][0] and args["unit"] == "aic" and args["expert"] is not None
    # transfers cross ranks: some data deps join events of two different ranks
    rank_of = dict(zip(ev["id"].to_list(), ev["rank"].to_list(), strict=True))
    data = trace.deps.filter(pl.col("kind") == "data")
    cross = sum(
        rank_of[s] != rank_of[d]
        for s, d in zip(data["src"].to_list(), data["dst"].to_list(), strict=True)
    )
    assert cross > 0
    meta = trace.meta
    assert meta["format"] == "executor" and meta["flavor"] == "moetrace"
    assert meta["peak_flops"] == pytest.approx(24 * 8192 * 1.91e9)  # 752 TF per 910C / 2 dies
    ex = meta["executor"]
    assert ex["schedule"]["name"] == schedule
    assert ex["tasks"] > 0 and ex["tokens_per_s"] == pytest.approx(8 * 256 / (makespan * 1e-9))
    assert ex["hardware"]["n_aic"] == 24 and ex["workload"]["shape"]["hidden"] == 7168


def test_total_work_matches_the_layer_flops() -> None:
    """Σ GEMM flops of the trace = 2·R·H·2I + 2·R·I·H over all routed rows (independent formula)."""
    trace = simulate(schedule="tile", **SMALL)
    ev = trace.events
    got = ev.filter(pl.col("name").is_in(["gemm1", "gemm2"]))["flops"].sum()
    rows = 8 * 256 * 8
    h, i = 7168, 2048
    assert got == pytest.approx(2 * rows * h * 2 * i + 2 * rows * i * h)


def test_same_seed_same_trace() -> None:
    a = simulate(schedule="tile", routing="zipf:1.0", seed=3, **SMALL)
    b = simulate(schedule="tile", routing="zipf:1.0", seed=3, **SMALL)
    c = simulate(schedule="tile", routing="zipf:1.0", seed=4, **SMALL)
    assert a.frames_equal(b)
    assert a.meta == b.meta
    assert not a.frames_equal(c)


def test_skewed_routing_makes_stragglers() -> None:
    """Under zipf routing the hot rank computes longest; the others wait for its combine."""
    run = simulate_run(ranks=8, tokens=2048, schedule="tile", routing="zipf:1.2")
    t = run.timed
    gemm = np.isin(t.type, [T["gemm1"], T["gemm2"]])
    busy = np.bincount(t.rank[gemm], weights=t.dur[gemm], minlength=8)
    assert busy.max() > 1.3 * busy.min()
    end = run.start + t.dur
    last_gemm = np.array([end[gemm & (t.rank == r)].max() for r in range(8)])
    unperm = t.type == T["unpermute"]
    last = np.array([end[unperm & (t.rank == r)].max() for r in range(8)])
    cold = int(np.argmin(busy))
    # the coldest rank finishes its own GEMMs early but its layer ends only after the hot rank's
    assert last[cold] - last_gemm[cold] > 0.3 * (last_gemm.max() - last_gemm.min())
    balanced = simulate_run(ranks=8, tokens=2048, schedule="tile")
    assert run.makespan_ns > 1.3 * balanced.makespan_ns


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(preset="nope"), "unknown preset"),
        (dict(hardware="tpu"), "unknown hardware"),
        (dict(hw_overrides={"warp_size": 32}), "unknown hardware key"),
        (dict(hw_overrides={"n_aic": "x"}), "not a number"),
        (dict(tokens=0), "tokens must be >= 1"),
        (dict(ranks=3), "must divide"),
        (dict(schedule="magic"), "unknown schedule"),
        (dict(routing="uniformish"), "unknown routing"),
        (dict(placement="random"), "unknown placement"),
        (dict(hw_overrides={"hbm_bytes": 1e6}), "HBM"),
        (dict(hw_overrides={"l2_bytes": 1e5}), "L2 of"),
        (dict(ranks=128, tokens=1 << 20), "too large"),
        (dict(schedule="sequential", dynamic=True), "tile schedule only"),
        (dict(frobnicate=True), "unknown option"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs: dict[str, Any], needle: str) -> None:
    args = {**SMALL, **kwargs}
    with pytest.raises(ExecutorInputError, match=needle) as info:
        simulate(**args)
    assert "\n" not in str(info.value)


def test_top_k_above_experts_is_rejected() -> None:
    from moetrace.executor.workload import MoEShape

    shape = MoEShape("tiny", 64, 32, 4, 6, 0, "test")
    with pytest.raises(ExecutorInputError, match="top-k"):
        simulate(preset=shape, ranks=2, tokens=16)


@pytest.mark.parametrize("ext", ["json", "pftrace"])
def test_same_options_give_byte_identical_files(tmp_path, ext: str) -> None:  # type: ignore[no-untyped-def]
    paths = []
    for i in range(2):
        trace = simulate(schedule="tile", routing="zipf:1.2", seed=5, ranks=4, tokens=128)
        paths.append(trace.write(tmp_path / f"run{i}.{ext}"))
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_routing_counts_from_a_file_follow_the_weights(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from moetrace.executor.workload import make_workload, route

    weights = [0.0] * 256
    for e in range(16):  # only 16 experts may be chosen, expert e with weight e + 1
        weights[e] = float(e + 1)
    path = tmp_path / "counts.txt"
    path.write_text(" ".join(str(w) for w in weights))
    wl = make_workload("deepseek-v3", 8, 512, routing=f"counts:{path}")
    assign = route(wl)
    assert set(np.unique(assign)) <= set(range(16))
    load = np.bincount(assign.ravel(), minlength=16)
    assert load[15] > load[0]  # heavier weight, more tokens
    assert (np.diff(np.sort(assign, axis=2), axis=2) > 0).all()  # k distinct experts per token
    with pytest.raises(ExecutorInputError, match="expected 256"):
        path.write_text("1 2 3")
        simulate(ranks=8, tokens=64, routing=f"counts:{path}")


def test_balanced_routing_is_exactly_balanced() -> None:
    from moetrace.executor.workload import make_workload, route

    assign = route(make_workload("deepseek-v3", 4, 512))
    per_source = np.stack([np.bincount(assign[r].ravel(), minlength=256) for r in range(4)])
    assert (per_source == 512 * 8 // 256).all()


def test_bandwidth_tables_can_be_overridden() -> None:
    from moetrace.executor.hardware import get_hardware

    hw = get_hardware("ascend-a3", {"dispatch_bw": "8:50e9,64:25e9"})
    assert hw.link_rate("dispatch", 8) == 50e9 and hw.link_rate("dispatch", 64) == 25e9
    assert hw.link_rate("dispatch", 16) == pytest.approx(50e9 - (50e9 - 25e9) / 3)
    one_point = get_hardware("ascend-a3", {"combine_bw": [[8, 1e9]]})
    assert one_point.link_rate("combine", 8) == 1e9
    assert one_point.link_rate("combine", 128) == 1e9  # one point: no trend, its rate held
    with pytest.raises(ExecutorInputError, match="EP:bytes_per_s"):
        get_hardware("ascend-a3", {"dispatch_bw": "fast"})
