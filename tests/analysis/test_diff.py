"""The MoE-structured diff (analysis/diff.py): stages and kernel families matched across two
runs, times as interval unions; expected values by hand and from a slow per-interval reference
(a Python loop over the events with testing/reference.py's interval lists, independent
of moe.union_times)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.analysis.diff import DiffSide, diff_side, family_expr, kernel_diff, stage_diff
from moetrace.analysis.labels import short_name_expr
from moetrace.analysis.moe import moe_view
from moetrace.analysis.moe_rules import load_rules
from moetrace.testing import reference as ref
from moetrace.testing.builders import random_trace
from moetrace.trace.io import load
from moetrace.trace.model import Trace

run = pytest.importorskip("moetrace.executor.run")


def _trace(events: list[tuple[int, str, str, int, int]], args: list[str] | None = None) -> Trace:
    """Rank 0; (track, name, kind, ts, dur) per event; track 0/1 compute (aic), 2 a link."""
    ev = pl.DataFrame(events, schema=["track", "name", "kind", "ts", "dur"], orient="row")
    ev = ev.with_row_index("id").with_columns(
        pl.Series("args", args or ["{}"] * ev.height, dtype=pl.String)
    )
    tracks = {"track": [0, 1, 2], "rank": [0] * 3, "unit": ["aic", "aic", "link"]}
    return Trace.from_frames(ev, tracks, compute_depth=True)


def slow_stage_ns(side: DiffSide) -> dict[str, int]:
    """Per stage: Σ over (rank, step, layer) of the merged self intervals of the work events
    (span minus work children), one event at a time."""
    rows = side.ev.with_columns(side.mask.alias("work")).to_dicts()
    kids: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in rows:
        if r["work"] and r["parent"] >= 0 and rows[r["parent"]]["work"]:
            kids[r["parent"]].append((r["ts"], r["end"]))
    segs: dict[tuple[object, ...], list[tuple[int, int]]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r["work"]:
            key = (r["stage"], r["rank"], r["step"], r["layer"])
            segs[key] += ref.minus([(r["ts"], r["end"])], kids[i])
    out: dict[str, int] = defaultdict(int)
    for where, parts in segs.items():
        out[str(where[0])] += ref.length(parts)
    return {k: v for k, v in out.items() if v}


def _check_against_slow(a: DiffSide, b: DiffSide) -> pl.DataFrame:
    got = stage_diff(a, b)
    ra, rb = slow_stage_ns(a), slow_stage_ns(b)
    want = {s: (ra.get(s, 0), rb.get(s, 0)) for s in set(ra) | set(rb)}
    assert {r["stage"]: (r["a_ns"], r["b_ns"]) for r in got.to_dicts()} == want
    most = max(want, key=lambda s: abs(want[s][1] - want[s][0]))
    first = got.row(0, named=True)
    assert first["stage"] == most
    assert first["delta_ns"] == want[most][1] - want[most][0]
    return got


# ------------------------------------------------------------------------ by hand
def test_overlapping_tiles_count_once_and_the_most_moved_stage_is_first() -> None:
    """A: gemm1 tiles [0, 100) and [50, 150) on two cores -> expert_gemm 150 (not 200),
    dispatch_tx [0, 40) -> 40. B: gemm1 [0, 100) -> 100, dispatch_tx [0, 200) -> 200.
    By hand: dispatch moved +160 (5x), expert_gemm -50 (2/3)."""
    a = diff_side(_trace([(0, "gemm1", "compute", 0, 100), (1, "gemm1", "compute", 50, 100),
                          (2, "dispatch_tx", "comm", 0, 40)]))  # fmt: skip
    b = diff_side(_trace([(0, "gemm1", "compute", 0, 100), (2, "dispatch_tx", "comm", 0, 200)]))
    got = stage_diff(a, b)
    assert got.select("stage", "a_ns", "b_ns", "delta_ns").rows() == [
        ("dispatch", 40, 200, 160),
        ("expert_gemm", 150, 100, -50),
    ]
    assert got["ratio"].to_list() == [pytest.approx(5.0), pytest.approx(2 / 3)]
    _check_against_slow(a, b)


def test_microbatches_and_ranks_break_the_diff_down() -> None:
    """The executor's `chunk` arg is the micro-batch: A runs gemm1 as one chunk of 100 ns,
    B as two chunks of 40 ns (each its own union)."""
    a = diff_side(_trace([(0, "gemm1", "compute", 0, 100)], ['{"chunk": 0}']))
    b = diff_side(_trace([(0, "gemm1", "compute", 0, 40), (0, "gemm1", "compute", 40, 40)],
                         ['{"chunk": 0}', '{"chunk": 1}']))  # fmt: skip
    got = stage_diff(a, b, by=["microbatch", "rank"]).sort("microbatch")
    assert got.select("microbatch", "rank", "stage", "a_ns", "b_ns").rows() == [
        (0, 0, "expert_gemm", 100, 40),
        (1, 0, "expert_gemm", 0, 40),
    ]
    assert got["ratio"].to_list() == [pytest.approx(0.4), None]
    with pytest.raises(ValueError, match="'expert'"):
        stage_diff(a, b, by=["expert"])


def test_kernels_match_by_family_then_by_position_in_the_stage(tmp_path: Path) -> None:
    """Two backends' expert GEMM kernels: gemm2 matches by name; alpha_gemm (A) and beta_gemm
    (B) are the first left-over kernels of the stage on each side -> matched by position;
    gamma_gemm only runs in B."""
    rules = tmp_path / "two_backends.toml"
    rules.write_text(
        'framework = "test"\n[[rule]]\ncategory = "expert_gemm"\n'
        'patterns = ["^(alpha|beta|gamma)_gemm"]\nsource = "this test"\n'
    )
    loaded = load_rules([str(rules)])
    a = diff_side(_trace([(0, "alpha_gemm", "compute", 0, 100),
                          (0, "gemm2", "compute", 100, 30)]), loaded)  # fmt: skip
    b = diff_side(_trace([(0, "beta_gemm", "compute", 0, 60), (0, "gemm2", "compute", 60, 40),
                          (1, "gamma_gemm", "compute", 0, 10)]), loaded)  # fmt: skip
    got = kernel_diff(a, b)
    rows = got.select("stage", "kernel_a", "kernel_b", "match", "a_ns", "b_ns").rows()
    assert rows == [
        ("expert_gemm", "alpha_gemm", "beta_gemm", "position", 100, 60),
        ("expert_gemm", "gemm2", "gemm2", "name", 30, 40),
        ("expert_gemm", None, "gamma_gemm", "b only", 0, 10),
    ]
    assert got["delta_ns"].to_list() == [-40, 10, 10]


def test_family_is_the_short_name_without_namespace_or_templates() -> None:
    names = pl.DataFrame(
        {
            "name": [
                "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor"
                "<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, "
                "std::array<char*, 1ul>)",
                "aten::mm",
                "GroupedMatmul",
            ]
        }
    )
    got = names.select(short_name_expr().alias("short_name")).select(family_expr())
    assert got.to_series().to_list() == ["vectorized_elementwise_kernel", "mm", "groupedmatmul"]


# ------------------------------------------------------------ executor and real
def test_tile_vs_chunked_executor_traces_equal_the_slow_reference() -> None:
    tile = diff_side(run.simulate(ranks=2, tokens=64, schedule="tile"))
    chunked = diff_side(run.simulate(ranks=2, tokens=64, schedule="chunked"))
    got = _check_against_slow(tile, chunked)
    assert got.height >= 5  # router, permute, dispatch, GEMM, combine at least
    # the per-stage sum is `moe`'s per-category time summed over ranks and steps
    kernels = kernel_diff(tile, chunked)
    assert kernels["a_ns"].sum() >= got["a_ns"].sum()  # families overlap within a stage
    assert set(kernels["match"]) <= {"name", "position", "a only", "b only"}


def test_gloo_balanced_vs_skewed_names_the_most_moved_stage(real_traces: Path) -> None:
    def side(variant: str) -> tuple[DiffSide, Trace]:
        folder = real_traces / "torch_gloo_moe" / variant
        trace = load([str(p) for p in sorted(folder.glob("rank*.pt.trace.json.gz"))])
        return diff_side(trace), trace

    (a, ta), (b, tb) = side("balanced"), side("skewed")
    got = _check_against_slow(a, b)
    # skewed routing sends most tokens to rank 0's expert 0: the other ranks wait in combine
    combine = got.filter(pl.col("stage") == "combine").row(0, named=True)
    assert combine["ratio"] > 2
    for diff_col, trace in (("a_ns", ta), ("b_ns", tb)):
        cats = moe_view(trace).categories
        assert got[diff_col].sum() == cats["time_ns"].sum()


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), annotations=st.booleans())
def test_random_nested_traces_equal_the_slow_reference(seed: int, annotations: bool) -> None:
    """Random multi-rank traces with nested slices, steps and overflow lanes: every stage's
    union of self intervals equals the per-event reference on both sides."""
    a = diff_side(random_trace(seed, annotations=annotations))
    b = diff_side(random_trace(seed + 1, annotations=annotations))
    _check_against_slow(a, b)
