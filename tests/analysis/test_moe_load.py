"""Measured load (analysis/moe_load.py, routing_dumps.py): tokens per expert and per rank from
the trace and from the routers' own dumps, built here from each writer's cited schema;
expected values by hand, from the executor's routing, or from the run's own run_meta.json."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.analysis.moe import moe_view
from moetrace.analysis.moe_load import load_stats
from moetrace.analysis.routing_dumps import RoutingError, read_routing
from moetrace.cli import main
from moetrace.testing.torch_save import write_torch_save
from moetrace.trace.io import load
from moetrace.trace.model import Trace

run = pytest.importorskip("moetrace.executor.run")


def _two_ranks() -> Trace:
    """Two ranks with one step marker each and nothing else: the job the dumps belong to."""
    ev = pl.DataFrame(
        {"id": [0, 1], "track": [0, 1], "name": ["step 0"] * 2, "kind": ["marker"] * 2,
         "ts": [0, 0], "dur": [100, 100]},
    )  # fmt: skip
    tracks = {"track": [0, 1], "rank": [0, 1], "unit": ["cpu", "cpu"]}
    return Trace.from_frames(ev, tracks, compute_depth=True)


def _per(view_load: pl.DataFrame, source: str, level: str) -> dict[int, float]:
    col = "expert" if level == "expert" else "rank"
    part = view_load.filter(
        (pl.col("source") == source)
        & (pl.col("expert").is_not_null() if level == "expert" else pl.col("expert").is_null())
    )
    return {int(k): float(v) for k, v in part.group_by(col).agg(pl.col("tokens").sum()).rows()}


# ------------------------------------------------------------------- statistics
def test_overload_and_percentiles_by_hand() -> None:
    """Experts [6, 2, 0, 0] (expert 2 and 3 absent): mean 2, max 6, overload 3; sorted
    [0, 0, 2, 6], linear interpolation: p50 at 1.5 -> 1, p90 at 2.7 -> 4.8, p99 -> 5.88.
    Ranks (2 experts each): [8, 0] -> overload 2."""
    frame = pl.DataFrame(
        {"source": ["x", "x"], "step": [0, 0], "layer": [1, 1], "rank": [None, None],
         "expert": [0, 1], "tokens": [6.0, 2.0]},
        schema_overrides={"rank": pl.Int64},
    )  # fmt: skip
    got = load_stats(frame, experts=4).row(0, named=True)
    assert (got["count"], got["tokens"], got["mean"], got["max"]) == (4, 8.0, 2.0, 6.0)
    assert got["overload"] == pytest.approx(3.0)
    assert (got["p50"], got["p90"], got["p99"]) == pytest.approx((1.0, 4.8, 5.88))


# ------------------------------------------------------------------------ dumps
def test_sglang_csv_of_two_ranks_adds_up(tmp_path: Path) -> None:
    """sglang managers/expert_distribution.py dump_record: `layer_id,expert_id,count` per rank.
    Rank 0's tokens chose experts 0 (5) and 3 (1), rank 1's expert 0 (3) and 1 (3): experts
    [8, 3, 0, 1] -> overload 8 / 3; 2 ranks, experts 0-1 on rank 0: ranks [11, 1]."""
    a = tmp_path / "expert_distribution_rank0_timestamp1.5.csv"
    b = tmp_path / "expert_distribution_rank1_timestamp1.5.csv"
    a.write_text("layer_id,expert_id,count\n0,0,5\n0,3,1\n")
    b.write_text("layer_id,expert_id,count\n0,0,3\n0,1,3\n")
    view = moe_view(_two_ranks(), routing_files=[str(a), str(b)])
    assert _per(view.load, "sglang", "expert") == {0: 8, 1: 3, 3: 1}
    assert _per(view.load, "sglang", "rank") == {0: 11, 1: 1}
    stats = {r["level"]: r for r in view.load_stats.filter(pl.col("source") == "sglang").to_dicts()}
    assert stats["expert"]["overload"] == pytest.approx(8 / 3)
    assert stats["rank"]["overload"] == pytest.approx(11 / 6)
    assert stats["expert"]["layer"] == 0


def test_sglang_stat_dump_torch_save(tmp_path: Path) -> None:
    """sglang eplb/expert_distribution.py _StatAccumulator.dump: {rank, logical_count
    (passes, layers, experts), average_utilization_rate_over_window}; each pass a step."""
    counts = np.array([[[4, 0, 0, 0], [1, 1, 1, 1]], [[2, 2, 0, 0], [0, 0, 0, 8]]], np.int32)
    path = write_torch_save(
        tmp_path / "expert_distribution_recorder_1.5.pt",
        {"rank": 0, "logical_count": counts, "average_utilization_rate_over_window": None},
    )
    got = read_routing(path)
    assert got.height == 16 and set(got["source"]) == {"sglang"}
    stats = load_stats(got).filter(pl.col("level") == "expert").sort("step", "layer")
    assert stats.select("step", "layer", "max", "overload").rows() == [
        (0, 0, 4.0, 4.0), (0, 1, 1.0, 1.0), (1, 0, 2.0, 2.0), (1, 1, 8.0, 4.0)
    ]  # fmt: skip


def test_vllm_eplb_window_with_redundant_experts(tmp_path: Path) -> None:
    """vllm eplb_state.py: expert_load_window (window, layers, physical experts) and the
    docstring's physical_to_logical_map [0, 1, 2, 3, 0, 1] (6 physical, 4 logical, 3 ranks):
    physical loads [1, 2, 3, 4, 5, 6] -> logical [1+5, 2+6, 3, 4]; ranks hold physical
    (0, 1), (2, 3), (4, 5) -> [3, 7, 11]."""
    window = np.array([[[1, 2, 3, 4, 5, 6]]], np.int32)
    path = write_torch_save(
        tmp_path / "eplb.pt",
        {"expert_load_window": window, "physical_to_logical_map": np.array([[0, 1, 2, 3, 0, 1]])},
    )
    got = read_routing(path, ranks=3)
    assert _per(got, "vllm_eplb", "expert") == {0: 6, 1: 8, 2: 3, 3: 4}
    by_rank = got.group_by("rank").agg(pl.col("tokens").sum()).sort("rank").rows()
    assert by_rank == [(0, 3.0), (1, 7.0), (2, 11.0)]


def test_megatron_router_trace_jsonl(tmp_path: Path) -> None:
    """megatron router_trace.py: one record per (step, block, layer) with top_indices;
    rank 0 and rank 1 records of step 0 layer 3 add up; an MTP record is skipped."""
    path = tmp_path / "router_trace_rank0.jsonl"
    recs = [
        {"step": 0, "stage": "pre_dispatch", "block": "decoder", "layer": 3, "rank": 0,
         "num_tokens": 2, "topk": 2, "top_indices": [[0, 1], [0, 2]]},
        {"step": 0, "stage": "pre_dispatch", "block": "decoder", "layer": 3, "rank": 1,
         "num_tokens": 2, "topk": 2, "top_indices": [[0, 3], [1, 0]]},
        {"step": 0, "stage": "pre_dispatch", "block": "mtp", "mtp_idx": 0, "layer": 3,
         "rank": 0, "num_tokens": 1, "topk": 2, "top_indices": [[3, 3]]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    got = read_routing(path)
    assert _per(got, "megatron", "expert") == {0: 4, 1: 2, 2: 1, 3: 1}
    assert set(got["layer"]) == {3} and set(got["step"]) == {0}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.csv", "layer,expert,count\n0,0,1\n", "line 1: header"),
        ("b.csv", "layer_id,expert_id,count\n0,0,1\n0,1,-2\n", "line 3: empty or negative"),
        ("router_trace_rank0.jsonl", '{"step": 0, "layer": 1}\n', "line 1: not a router-trace"),
        ("c.pt", b"PK\x03\x04broken", "not a torch.save zip archive"),
    ],
)
def test_bad_dumps_are_one_error_naming_file_and_line(
    tmp_path: Path, name: str, content: str | bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(RoutingError, match=message) as err:
        read_routing(path)
    assert str(err.value).startswith(str(path))


def test_a_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    """The unpickler allows tensor rebuilding only: a global such as os.system is an error,
    never called."""
    import zipfile

    path = tmp_path / "evil.pt"
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Evil(str(marker)), protocol=2)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)
    with pytest.raises(RoutingError, match="not a tensor dump"):
        read_routing(path)
    assert not marker.exists()


class _Evil:
    def __init__(self, target: str):
        self.target = target

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, (f"touch {self.target}",)


def test_cli_routing_from_and_bad_file_exit_2(tmp_path: Path) -> None:
    trace = tmp_path / "job.json"
    _two_ranks().write(trace)
    dump = tmp_path / "expert_distribution_rank0_timestamp1.csv"
    dump.write_text("layer_id,expert_id,count\n0,0,6\n0,1,2\n")
    res = CliRunner().invoke(main, ["moe", str(trace), "--routing-from", str(dump), "--json"])
    assert res.exit_code == 0, res.output
    stats = [r for r in json.loads(res.stdout)["load_stats"] if r["level"] == "expert"]
    assert stats[0]["overload"] == pytest.approx(6 / 4)
    res = CliRunner().invoke(main, ["moe", str(trace), "--routing-from", str(dump), "--csv",
                                    "--table", "load"])  # fmt: skip
    assert res.stdout.splitlines()[0] == "source,step,layer,rank,expert,tokens"
    dump.write_text("nope\n")
    res = CliRunner().invoke(main, ["moe", str(trace), "--routing-from", str(dump)])
    assert res.exit_code == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


# ------------------------------------------------------------------ from traces
def test_grouped_gemm_shapes_give_tokens_per_rank() -> None:
    """Kineto `aten::_grouped_mm` Input Dims [[300, 64], [4, 64, 128], [4]] on rank 0; msprof
    GroupedMatmul `Input Shapes` "120,64;4,64,128;4" on rank 1 -> ranks [300, 120]."""
    ev = pl.DataFrame(
        {
            "id": [0, 1, 2, 3],
            "track": [0, 1, 0, 1],
            "name": ["step 0", "step 0", "aten::_grouped_mm", "GroupedMatmul"],
            "kind": ["marker", "marker", "host", "compute"],
            "ts": [0, 0, 10, 10],
            "dur": [1000, 1000, 50, 50],
            "args": ["{}", "{}", '{"Input Dims": [[300, 64], [4, 64, 128], [4]]}',
                     '{"Input Shapes": "120,64;4,64,128;4"}'],
        }
    )  # fmt: skip
    tracks = {"track": [0, 1], "rank": [0, 1], "unit": ["cpu", "aic"]}
    view = moe_view(Trace.from_frames(ev, tracks, compute_depth=True))
    assert _per(view.load, "grouped_gemm_shapes", "rank") == {0: 300, 1: 120}
    stats = view.load_stats.filter(pl.col("source") == "grouped_gemm_shapes").row(0, named=True)
    assert stats["overload"] == pytest.approx(300 / 210)


def test_executor_tokens_per_expert_are_its_routing() -> None:
    from moetrace.executor.workload import make_workload, route, rows_per_source_expert

    view = moe_view(run.simulate(ranks=2, tokens=64, schedule="tile", routing="zipf:1.2", seed=3))
    wl = make_workload("deepseek-v3", ranks=2, tokens=64, routing="zipf:1.2", seed=3)
    want = rows_per_source_expert(wl, route(wl)).sum(axis=0)
    got = _per(view.load, "executor", "expert")
    assert got == {e: float(n) for e, n in enumerate(want) if n}
    assert sum(got.values()) == 2 * 64 * 8  # every token's top-8 slots
    stats = view.load_stats.filter(
        (pl.col("source") == "executor") & (pl.col("level") == "expert")
    ).row(0, named=True)
    assert stats["count"] == 256
    assert stats["overload"] == pytest.approx(want.max() / want.mean())


def test_gloo_gemm_shapes_and_splits_equal_run_meta(real_traces: Path) -> None:
    folder = real_traces / "torch_gloo_moe" / "skewed"
    meta = json.loads((folder / "run_meta.json").read_text())
    view = moe_view(load([str(p) for p in sorted(folder.glob("rank*.pt.trace.json.gz"))]))
    last = view.load.filter(pl.col("step") == view.load["step"].max())
    experts = _per(last, "gemm_shapes", "expert")
    assert experts == {e: float(n) for e, n in enumerate(meta["tokens_per_expert_last_step"])}
    slots = meta["token_slots_received_per_rank_last_step"]
    assert _per(last, "all_to_all_splits", "rank") == {r: float(n) for r, n in enumerate(slots)}
    assert _per(last, "gemm_shapes", "rank") == {r: float(n) for r, n in enumerate(slots)}
    stats = view.load_stats.filter(
        (pl.col("source") == "all_to_all_splits") & (pl.col("step") == last["step"][0])
    ).row(0, named=True)
    assert stats["overload"] == pytest.approx(max(slots) / (sum(slots) / 4))
