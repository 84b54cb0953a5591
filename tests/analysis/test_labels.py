# ruff: noqa: E501  (kernel names and TOML snippets kept whole)
"""The one classification stage (analysis/labels.py): library kernels get the right role and
stage, metrics' comm equals an independent interval computation and moe's comm stages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.analysis.comm import exposed_comm
from moetrace.analysis.labels import short_name_expr, starter_rules
from moetrace.analysis.moe import moe_view
from moetrace.analysis.moe_comm import COMM_STAGES
from moetrace.analysis.moe_rules import RulesError, load_rules, parse_rules
from moetrace.analysis.report import analyze
from moetrace.analysis.steps import prepare
from moetrace.cli import main
from moetrace.testing.library_kernels import LIBRARY_KERNELS, library_trace
from moetrace.trace.io import load
from moetrace.trace.model import Trace


def _union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of a union of intervals, the slow obvious way (sorted sweep in Python)."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted(zip(starts.tolist(), ends.tolist(), strict=True)):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + ((cur_e - cur_s) if cur_e is not None else 0)


def test_every_library_kernel_gets_its_role_and_stage() -> None:
    prep = prepare(library_trace())
    got = {
        n: (r, s, f)
        for n, r, s, f in prep.ev.select("name", "role", "rule_stage", "comm_family").iter_rows()
    }
    view_ev = moe_view(library_trace())
    del view_ev
    wrong = [
        (name, got[name], (role, stage, fam))
        for name, role, stage, fam in LIBRARY_KERNELS
        if got[name] != (role, stage, fam)
    ]
    assert wrong == []


def test_metrics_comm_equals_independent_union_and_moe_comm_stages() -> None:
    trace = library_trace()
    prep = prepare(trace)
    per_window, *_ = exposed_comm(prep)
    metrics_comm = int(per_window["comm_ns"].sum())
    # independent: the union of the comm kernels by their names in the table, by hand
    comm_names = {n for n, role, _s, _f in LIBRARY_KERNELS if role == "comm"}
    ev = trace.events.filter(pl.col("name").is_in(list(comm_names)))
    ts = ev["ts"].to_numpy()
    expected = _union_ns(ts, ts + ev["dur"].to_numpy())
    assert expected > 0
    assert abs(metrics_comm - expected) <= 0.001 * expected
    view = moe_view(trace)
    moe_comm = int(view.categories.filter(pl.col("category").is_in(COMM_STAGES))["time_ns"].sum())
    assert moe_comm == metrics_comm  # comm kernels never overlap one another here


def test_layout_kernel_is_not_comm_and_fork_namespaces_are() -> None:
    names = [n for n, *_ in LIBRARY_KERNELS]
    prep = prepare(library_trace())
    kinds = dict(prep.ev.select("name", "kind").iter_rows())
    layout = next(n for n in names if "get_dispatch_layout" in n)
    fork = next(n for n in names if n.startswith("void dualpipe_ep::"))
    assert kinds[layout] == "compute"
    assert kinds[fork] == "comm"


def test_kineto_collective_arg_wins_over_the_name() -> None:
    ev = pl.DataFrame(
        {
            "id": [0],
            "track": [0],
            "name": ["ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"],
            "kind": ["comm"],
            "ts": [0],
            "dur": [100],
            "args": ['{"Collective name": "all_to_allv"}'],
        }
    )
    tracks = pl.DataFrame(
        {"track": [0], "rank": [0], "pid": ["0"], "tid": ["1"], "unit": ["stream"]}
    )
    prep = prepare(Trace.from_frames(ev, tracks))
    assert prep.ev["collective"].to_list() == ["all_to_all"]


def test_frame_rule_never_overrides_a_kernel_rule() -> None:
    """Host: python frame `flashinfer/fused_moe/core.py(10): run` (which the attention rule
    `(?i)flashinfer` would match) holds the launch of a FlashInfer MoE GEMM kernel and of an
    unnamed kernel; the GEMM keeps expert_gemm, the unnamed one takes the frame's stage."""
    ev = pl.DataFrame(
        {
            "id": [0, 1, 2, 3, 4],
            "track": [0, 0, 0, 1, 1],
            "name": [
                "flashinfer/attention/fused_moe/core.py(10): run",
                "cudaLaunchKernel",
                "cudaLaunchKernel",
                "void tensorrt_llm::kernels::cutlass_kernels::MoeFCGemm<float>(int)",
                "my_kernel",
            ],
            "cat": ["python_function", "cuda_runtime", "cuda_runtime", "kernel", "kernel"],
            "kind": ["host", "host", "host", "compute", "compute"],
            "ts": [0, 10, 30, 50, 200],
            "dur": [100, 5, 5, 100, 50],
        }
    )
    tracks = pl.DataFrame(
        {"track": [0, 1], "rank": [0, 0], "pid": ["0", "0"], "tid": ["1", "2"],
         "unit": ["cpu", "stream"]}
    )  # fmt: skip
    deps = pl.DataFrame({"src": [1, 2], "dst": [3, 4], "kind": ["launch", "launch"]})
    rules = load_rules()
    rules = parse_rules(
        'framework = "x"\n[[rule]]\ncategory = "attention"\npatterns = [\'(?i)flashinfer/attention\']\n',
        "x.toml",
    )
    merged = load_rules()
    from dataclasses import replace

    both = replace(
        merged,
        rules=rules.rules + merged.rules,
        info=rules.info + merged.details(),
        sources=rules.sources + merged.sources,
    )
    trace = Trace.from_frames(ev, tracks, deps=deps, compute_depth=True)
    view = moe_view(trace, both)
    cats = dict(view.categories.select("category", "time_ns").iter_rows())
    assert cats == {"expert_gemm": 100, "attention": 50}


def test_short_names() -> None:
    names = [
        "void deep_ep::internode::dispatch<true, 8, 4>(int4*, float*, int const*)",
        "void at::native::(anonymous namespace)::foo<std::array<char*, 2ul> >(int, float)",
        "fused_moe_kernel",
    ]
    got = pl.DataFrame({"name": names}).select(short_name_expr()).to_series().to_list()
    assert got == [
        "deep_ep::internode::dispatch<…>",
        "at::native::{anon}::foo<…>",
        "fused_moe_kernel",
    ]


def test_rule_schema_rejects_bad_role_and_family_without_comm() -> None:
    with pytest.raises(RulesError, match="role"):
        parse_rules(
            'framework = "x"\n[[rule]]\ncategory = "norm"\nrole = "fast"\npatterns = ["a"]\n', "x"
        )
    with pytest.raises(RulesError, match="need role"):
        parse_rules(
            'framework = "x"\n[[rule]]\ncategory = "norm"\nrole = "compute"\nfamily = "nccl"\npatterns = ["a"]\n',
            "x",
        )


def test_classify_command_and_write_rules(tmp_path: Path) -> None:
    trace = library_trace()
    path = tmp_path / "t.json"
    trace.write(path)
    extra = pl.DataFrame({"name": ["zz_unknown_kernel"]})
    del extra
    out = tmp_path / "mine.toml"
    res = CliRunner().invoke(
        main, ["classify", str(path), "--top", "100", "--write-rules", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "deep_ep::internode_ll::dispatch<…>" in res.output
    assert "unclassified (no rule): 0.0%" in res.output
    parse_rules(out.read_text(), str(out))  # a valid (empty) rules file


def test_starter_rules_round_trip() -> None:
    table = pl.DataFrame(
        {"name": ["void foo::bar<int>(int)"], "short_name": ["foo::bar<…>"], "rule": [None],
         "total_ns": [5_000_000]},
        schema={"name": pl.String, "short_name": pl.String, "rule": pl.String, "total_ns": pl.Int64},
    )  # fmt: skip
    rules = parse_rules(starter_rules(table), "s.toml")
    assert rules.rules == (("other", r"foo::bar"),)


MOE_TRACES = (
    "kineto_moe/mi300x_gptoss20b_decode/graph_execution.json.gz",
    *(f"kineto_moe/b300_moe_microbench/moe_0{i}" for i in range(1, 7)),
    "kineto_moe/mi300x_resnet_rccl/resnet_act_checkpoint.json.gz",
    "ascend/level0__rank0_ascend_pt__trace_view.json",
    "ascend/level0__rank1_ascend_pt__trace_view.json",
    "ascend/mstt_advisor__trace_view.json",
    "ascend_db/level0",
    "kineto/hta__nccl_parser_config__nccl_data.json.gz",
)
"""The shared GPU and NPU traces."""

GLOO_JOBS = ("torch_gloo_moe/balanced", "torch_gloo_moe/skewed", "torch_gloo_moe/overlapped")
"""The CPU-only gloo MoE jobs (4 ranks each): comm runs on gloo's worker threads, which the
MoE view's comm stages count because they are metrics' comm set (moe_comm.comm_pieces)."""


def _comm_by_rank_step(
    trace: Trace,
) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(metrics' comm_ns, the MoE view's comm stages) per (rank, step), ns."""
    ranks = analyze(trace).ranks
    metrics = {
        (r, s): c
        for r, s, c in ranks.select(
            pl.col("rank").fill_null(0), pl.col("step").fill_null(-1), "comm_ns"
        ).iter_rows()
    }
    cats = moe_view(trace).categories.filter(pl.col("category").is_in(COMM_STAGES))
    sums = cats.group_by(pl.col("rank").fill_null(0), pl.col("step").fill_null(-1)).agg(
        pl.col("time_ns").sum()
    )
    moe = {(r, s): c for r, s, c in sums.iter_rows()}
    return {k: v for k, v in metrics.items() if v}, moe


@pytest.mark.parametrize("rel", MOE_TRACES)
def test_real_moe_traces_classified_and_comm_consistent(real_traces: Path, rel: str) -> None:
    path = real_traces / rel
    if not path.exists():
        path = next(real_traces.glob(rel + "*"))
    trace = load(path)
    view = moe_view(trace)
    assert view.unclassified_share < 0.10
    metrics, moe = _comm_by_rank_step(trace)
    assert moe == metrics  # equal by construction, per rank and step, to the ns


@pytest.mark.parametrize("rel", GLOO_JOBS)
def test_gloo_jobs_moe_comm_stages_equal_metrics_comm(real_traces: Path, rel: str) -> None:
    """The gloo jobs once gave metrics 643.6 ms against moe's 244.9 ms (balanced): moe counted
    the main thread's self time, metrics unioned gloo's worker threads. Now one set."""
    metrics, moe = _comm_by_rank_step(load(real_traces / rel))
    assert len(metrics) == 12 and sum(metrics.values()) > 0  # 4 ranks x 3 steps
    assert moe == metrics


def _two_kernels(unknown_ns: int, known_ns: int) -> Trace:
    ev = pl.DataFrame(
        {
            "id": [0, 1],
            "track": [0, 0],
            "name": ["zz_mystery_kernel", "fused_moe_kernel"],
            "kind": ["compute", "compute"],
            "ts": [0, unknown_ns],
            "dur": [unknown_ns, known_ns],
        }
    )
    tracks = pl.DataFrame(
        {"track": [0], "rank": [0], "pid": ["0"], "tid": ["1"], "unit": ["stream"]}
    )
    return Trace.from_frames(ev, tracks)


def test_metrics_and_moe_warn_over_ten_percent_unclassified() -> None:
    from moetrace.analysis.report import analyze

    over = analyze(_two_kernels(200, 800))  # 20 % unknown
    assert over.meta["unclassified_share"] == pytest.approx(0.2)
    assert any("zz_mystery_kernel" in w and "20.0%" in w for w in over.warnings)
    under = analyze(_two_kernels(50, 950))  # 5 %
    assert under.meta["unclassified_share"] == pytest.approx(0.05)
    assert not any("matches no name rule" in w for w in under.warnings)
    view = moe_view(_two_kernels(200, 800))
    assert view.unclassified_share == pytest.approx(0.2)
    assert view.unclassified_top[0][0] == "zz_mystery_kernel"


def test_overlapping_dispatch_and_combine_count_once_in_moe() -> None:
    """DualPipe-style: a dispatch [0, 100) on one stream and a combine [50, 150) on another,
    a GEMM [20, 60) on a third. By hand: metrics comm = |[0, 150)| = 150 ns; moe gives the
    shared [50, 100) to dispatch (the first comm stage): dispatch 100, combine 50, Σ 150."""
    names = [
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int const*)",
        "void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(__nv_bfloat16*, float*)",
        "fused_moe_kernel",
    ]
    ev = pl.DataFrame(
        {"id": [0, 1, 2], "track": [0, 1, 2], "name": names, "kind": ["compute"] * 3,
         "ts": [0, 50, 20], "dur": [100, 100, 40]}
    )  # fmt: skip
    tracks = pl.DataFrame(
        {"track": [0, 1, 2], "rank": [0] * 3, "pid": ["0"] * 3, "tid": ["1", "2", "3"],
         "unit": ["stream"] * 3}
    )  # fmt: skip
    trace = Trace.from_frames(ev, tracks)
    assert int(analyze(trace).ranks["comm_ns"].sum()) == 150
    cats = dict(moe_view(trace).categories.select("category", "time_ns").iter_rows())
    assert (cats["dispatch"], cats["combine"], cats["expert_gemm"]) == (100, 50, 40)


def test_collectives_read_the_labels() -> None:
    """collectives.collective_ops takes what is a collective, its family and kind from the
    classification stage: every comm kernel of the library table once (DeepEP under a fork's
    namespace included, the layout kernel not), grouped family:collective without args."""
    from moetrace.analysis.collectives import collective_ops

    trace = library_trace()
    ops = collective_ops(trace)
    names = trace.events.select(pl.col("id").cast(pl.Int64).alias("event_id"), "name")
    got = ops.join(names, on="event_id")
    assert got["event_id"].n_unique() == got.height
    assert set(got["name"]) == {n for n, role, _s, _f in LIBRARY_KERNELS if role == "comm"}
    kind = {n: (g, c) for n, g, c in got.select("name", "group", "collective").iter_rows()}
    fork = next(n for n in kind if n.startswith("void dualpipe_ep::internode::combine"))
    assert kind[fork] == ("deepep:all_to_all", "all_to_all")
    nccl = next(n for n in kind if n.startswith("ncclDevKernel_AllReduce_Sum_bf16"))
    assert kind[nccl] == ("nccl:all_reduce", "all_reduce")
    assert kind["MoeDistributeDispatchV2"] == ("hccl_mc2:all_to_all", "all_to_all")
    assert kind["hcom_alltoallv__456_2_1"][1] == "all_to_all"


def test_short_names_only_shorten_cxx_signatures() -> None:
    from moetrace.analysis.labels import short_names

    names = pl.Series(
        "name",
        [
            "void ns::k<int, 4>(float*, int)",
            "stream 7 (overlap 2)",
            "aten::mm",
            None,
            "void ns::k<int, 4>(float*, int)",
        ],
    )
    # worked by hand: return type, template arguments and parameters dropped
    assert short_names(names).to_list() == [
        "ns::k<…>",
        "stream 7 (overlap 2)",
        "aten::mm",
        None,
        "ns::k<…>",
    ]
