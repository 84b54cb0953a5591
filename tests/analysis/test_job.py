"""Collectives matched across ranks, clock offsets, stragglers and the job's critical path.

The synthetic job: 3 ranks, each a compute kernel then an NCCL kernel with Kineto args, twice.
Every expected figure is worked out by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from moetrace.analysis.job import analyze_job
from moetrace.analysis.report import analyze
from moetrace.trace.model import Trace

GROUP = '"Process Group Name": "0", "Process Group Ranks": "[0, 1, 2]", "dtype": "Float"'
# (collective, nelems, arrivals per rank, end on every rank) in ns
INSTANCES = [
    ("allreduce", 1_000_000, (100_000, 150_000, 400_000), 500_000),
    ("alltoall", 3_000, (600_000, 900_000, 650_000), 1_000_000),
]


def synthetic(shift: dict[int, int] | None = None) -> Trace:
    """3 ranks; rank r's clock reads true time + shift[r]."""
    shift = shift or {}
    events, tracks = [], []
    eid = 0
    for rank in range(3):
        tracks.append({"track": rank, "rank": rank, "pid": str(rank), "tid": "7", "unit": "stream"})
        prev_end = 0
        for coll, nelems, arrivals, end in INSTANCES:
            d = shift.get(rank, 0)
            # compute from the previous collective's end up to this rank's arrival
            events.append(
                {"id": eid, "track": rank, "name": "gemm", "kind": "compute",
                 "ts": prev_end + d, "dur": arrivals[rank] - prev_end}
            )  # fmt: skip
            args = f'{{"Collective name": "{coll}", "In msg nelems": {nelems}, {GROUP}}}'
            events.append(
                {"id": eid + 1, "track": rank, "name": "ncclDevKernel_Generic", "kind": "comm",
                 "ts": arrivals[rank] + d, "dur": end - arrivals[rank], "args": args}
            )  # fmt: skip
            eid += 2
            prev_end = end
    return Trace.from_frames(
        pl.DataFrame(events), pl.DataFrame(tracks), meta={"flavor": "kineto"}, compute_depth=True
    )


def test_matching_skew_transfer_bandwidth_by_hand() -> None:
    job = analyze_job(synthetic())
    inst = job.collectives.sort("seq")
    assert inst["collective"].to_list() == ["all_reduce", "all_to_all"]
    assert inst["ranks"].to_list() == [[0, 1, 2], [0, 1, 2]]
    assert inst["missing_ranks"].to_list() == [[], []]
    # skew = last - first arrival; transfer = end - last arrival
    assert inst["skew_ns"].to_list() == [400_000 - 100_000, 900_000 - 600_000]
    assert inst["transfer_ns"].to_list() == [100_000, 100_000]
    assert inst["last_rank"].to_list() == [2, 1]
    # 1e6 floats = 4e6 B over 1e5 ns = 40 GB/s; busbw all-reduce x 2(3-1)/3
    assert inst["bytes"].to_list() == [4e6, 12_000.0]
    assert inst["algbw_gbps"][0] == pytest.approx(40.0)
    assert inst["busbw_gbps"][0] == pytest.approx(40.0 * 4 / 3)
    # 12 000 B / 1e5 ns = 0.12 GB/s; all-to-all x (3-1)/3
    assert inst["algbw_gbps"][1] == pytest.approx(0.12)
    assert inst["busbw_gbps"][1] == pytest.approx(0.08)


def test_stragglers_and_exposed_wait_by_hand() -> None:
    trace = synthetic()
    report = analyze(trace)
    job = report.job
    assert job is not None
    top = job["stragglers"]
    # instance 0: rank 2 late; ranks 0 and 1 wait 300 000 + 250 000
    # instance 1: rank 1 late; ranks 0 and 2 wait 300 000 + 250 000
    by_rank = {s["rank"]: s for s in top}
    assert by_rank[2]["caused_wait_ns"] == 550_000 and by_rank[2]["late_count"] == 1
    assert by_rank[1]["caused_wait_ns"] == 550_000 and by_rank[1]["late_count"] == 1
    assert by_rank[0]["caused_wait_ns"] == 0 and by_rank[0]["late_count"] == 0
    assert [s["caused_wait_ns"] for s in top] == sorted(
        (s["caused_wait_ns"] for s in top), reverse=True
    )
    # rank 0: comm kernels [100k, 500k) and [600k, 1M) are fully exposed (compute stops at
    # arrival): 400k + 400k; waits 300k + 300k; transfer the rest
    assert by_rank[0]["exposed_comm_ns"] == 800_000
    assert by_rank[0]["exposed_wait_ns"] == 600_000
    assert by_rank[0]["exposed_transfer_ns"] == 200_000
    # rank 2 waited only in instance 1 (250k); it caused instance 0
    assert by_rank[2]["wait_ns"] == 250_000
    assert by_rank[2]["exposed_wait_ns"] == 250_000
    assert report.collectives.height == 2
    assert report.stragglers.height == 3
    assert report.job_path.equals(analyze_job(trace).critical_path)


def test_job_critical_path_runs_through_the_late_ranks() -> None:
    job = analyze_job(synthetic())
    path = job.critical_path
    # all ranks end at 1M; the walk starts on rank 0 (first of the ties), goes back over
    # instance 1's transfer [900k, 1M) to rank 1 (last there), rank 1 works [500k, 900k),
    # instance 0's transfer [400k, 500k) to rank 2, rank 2 works [0, 400k)
    rows = path.select("rank", "category", "start_ns", "end_ns").rows()
    assert rows == [
        (2, "work", 0, 400_000),
        (1, "comm", 400_000, 500_000),  # a comm segment is on the rank it lets go on
        (1, "work", 500_000, 900_000),
        (0, "comm", 900_000, 1_000_000),
    ]
    d = job.to_dict()["critical_path"]
    assert d["span_ns"] == 1_000_000
    assert d["comm_share"] == pytest.approx(0.2)


def test_shifted_clock_gives_same_skews_and_stragglers() -> None:
    base = analyze_job(synthetic())
    # 10 s: beyond the causal bounds' width, so the offset is estimated (within them, 0)
    moved = analyze_job(synthetic(shift={1: 10_000_000_000}))
    offsets = dict(moved.offsets.select("rank", "offset_ns").rows())
    assert offsets == {0: 0, 1: 10_000_000_000, 2: 0}
    assert dict(base.offsets.select("rank", "offset_ns").rows()) == {0: 0, 1: 0, 2: 0}
    cols = ["group", "seq", "skew_ns", "transfer_ns", "last_rank", "first_arrival_ns"]
    assert moved.collectives.select(cols).equals(base.collectives.select(cols))
    assert moved.stragglers.equals(base.stragglers)
    assert moved.critical_path.equals(base.critical_path)


def test_single_rank_has_no_job() -> None:
    one = Trace.from_frames(
        synthetic().events.filter(pl.col("track") == 0),
        synthetic().tracks.filter(pl.col("track") == 0),
    )
    report = analyze(one)
    assert report.job is None
    assert "job" not in report.to_dict()


# ------------------------------------------------------------------ real traces
def _gloo(real_traces: Path, variant: str) -> list[Path]:
    return sorted((real_traces / "torch_gloo_moe" / variant).glob("rank*.pt.trace.json.gz"))


def test_gloo_skewed_straggler_is_the_rank_with_most_tokens(real_traces: Path) -> None:
    from moetrace.trace.io import load

    meta = json.loads((real_traces / "torch_gloo_moe/skewed/run_meta.json").read_text())
    received = meta["token_slots_received_per_rank_last_step"]
    report = analyze(load(_gloo(real_traces, "skewed")))
    assert report.job is not None
    top = report.job["stragglers"][0]
    assert top["rank"] == received.index(max(received)) == 0
    assert top["caused_wait_ns"] > 10 * report.job["stragglers"][1]["caused_wait_ns"]
    # and in every profiled step
    assert [s["rank"] for s in report.job["stragglers_by_step"]] == [0, 0, 0]
    assert [s["step"] for s in report.job["stragglers_by_step"]] == [2, 3, 4]
    # the largest exposed comm is a late peer's fault: most of it is waiting
    worst = max(report.job["stragglers"], key=lambda s: s["exposed_comm_ns"])
    assert worst["rank"] != 0
    assert worst["exposed_wait_ns"] > 0.8 * worst["exposed_comm_ns"]
    assert report.job["critical_path"]["comm_share"] > 0
    assert (
        report.job["critical_path"]["ns_by_rank"]["0"]
        > 0.5 * report.job["critical_path"]["span_ns"]
    )


def test_gloo_same_clock_reports_but_does_not_apply_offsets(real_traces: Path) -> None:
    from moetrace.trace.io import load

    job = analyze_job(load(_gloo(real_traces, "skewed")), same_clock=True)
    assert job.offsets["offset_ns"].to_list() == [0, 0, 0, 0]
    assert job.offsets["applied"].to_list() == [False] * 4
    # one host: every rank's causal bounds include 0, so the estimate itself is 0, not the
    # median of the collectives' end differences (which was -3.75 .. +5.05 ms here)
    assert job.offsets["one_clock"].to_list() == [True] * 4
    assert job.offsets["estimate_ns"].to_list() == [0, 0, 0, 0]
    bounds = job.offsets.filter(pl.col("rank") != 0)
    assert (bounds["lower_ns"] <= 0).all() and (bounds["upper_ns"] >= 0).all()
    # unaligned: raw arrivals; the straggler does not depend on the choice
    first = job.ops.sort("arrival_ns").group_by("group", "seq").agg(pl.col("arrival_ns").min())
    got = job.collectives.select("group", "seq", "first_arrival_ns")
    assert (
        got.join(first, on=["group", "seq"])
        .filter(pl.col("first_arrival_ns") != pl.col("arrival_ns"))
        .is_empty()
    )
    assert job.to_dict()["stragglers"][0]["rank"] == 0


def _shift_rank(trace: Trace, rank: int, ns: int) -> Trace:
    """`trace` with every event of `rank` moved by `ns` (that rank's clock set off)."""
    tracks = trace.tracks.filter(pl.col("rank") == rank)["track"].implode()
    events = trace.events.with_columns(
        pl.when(pl.col("track").is_in(tracks)).then(pl.col("ts") + ns).otherwise("ts").alias("ts")
    )
    return Trace(events, trace.tracks, trace.deps, trace.counters, trace.meta)


def test_gloo_shifted_rank_same_stragglers(real_traces: Path) -> None:
    from moetrace.trace.io import load

    trace = load(_gloo(real_traces, "skewed"))
    # moved 10 s and 20 s: both beyond the causal bounds, so both estimated, and every
    # aligned figure is the same (the estimate moves with the clock)
    a = analyze_job(trace)
    b = analyze_job(_shift_rank(trace, 1, 10_000_000_000))
    c = analyze_job(_shift_rank(trace, 1, 20_000_000_000))
    off_a = dict(a.offsets.select("rank", "offset_ns").rows())
    off_b = dict(b.offsets.select("rank", "offset_ns").rows())
    off_c = dict(c.offsets.select("rank", "offset_ns").rows())
    assert off_c[1] - off_b[1] == 10_000_000_000
    assert off_a[1] == 0 and off_b[1] != 0  # one clock; then moved outside the bounds
    bounds_a = a.offsets.filter(pl.col("rank") == 1).row(0, named=True)
    bounds_b = b.offsets.filter(pl.col("rank") == 1).row(0, named=True)
    assert bounds_b["lower_ns"] - bounds_a["lower_ns"] == 10_000_000_000
    assert bounds_b["upper_ns"] - bounds_a["upper_ns"] == 10_000_000_000
    assert c.collectives.select("skew_ns", "last_rank").equals(
        b.collectives.select("skew_ns", "last_rank")
    )
    assert c.stragglers.equals(b.stragglers)


@pytest.mark.parametrize("seed", [0, 3])
def test_executor_sequential_zipf_straggler_has_most_tokens(seed: int) -> None:
    from moetrace.executor.run import simulate

    trace = simulate(ranks=8, routing="zipf:1.2", schedule="sequential", seed=seed, tokens=1024)
    tokens = (
        trace.events_with_tracks()
        .filter(pl.col("name") == "dispatch_rx")
        .group_by("rank")
        .agg(pl.col("bytes").sum())
        .sort("bytes", descending=True)
    )
    job = analyze_job(trace)
    top = job.to_dict()["stragglers"][0]
    assert top["rank"] == tokens["rank"][0]
    # one clock (offsets 0): the path goes through the straggler's late work and ends on
    # the rank whose own work ends last (not necessarily the straggler: its tail after combine)
    work = job.critical_path.filter(pl.col("category") == "work")
    assert top["rank"] in work["rank"].to_list()
    last = (
        trace.events_with_tracks()
        .filter(pl.col("kind").is_in(["compute", "comm"]))
        .group_by("rank")
        .agg((pl.col("ts") + pl.col("dur")).max().alias("end"))
        .sort("end")
    )
    assert work["rank"].to_list()[-1] == last["rank"][-1]
    assert job.missing_ranks == []  # the executor states its 8 ranks
    assert [w for w in job.warnings if not w.startswith("note: rank")] == []
    # drop rank 5: a partial job that names it
    kept = trace.tracks.filter(pl.col("rank") != 5)
    events = trace.events.filter(pl.col("track").is_in(kept["track"].implode()))
    ids = events["id"].implode()
    deps = trace.deps.filter(pl.col("src").is_in(ids) & pl.col("dst").is_in(ids))
    partial = analyze_job(Trace(events, kept, deps, trace.counters, trace.meta))
    assert partial.missing_ranks == [5]
    assert partial.collectives["missing_ranks"].to_list() == [[5], [5]]


def test_partial_jobs_name_the_missing_ranks(real_traces: Path) -> None:
    from moetrace.trace.io import load

    kineto = load(
        sorted((real_traces / "kineto").glob("hta__trace_filter__sampled_rank-*.json.gz"))
    )
    job = analyze_job(kineto)
    assert job.ranks == [0, 1]
    assert job.missing_ranks == list(range(2, 128))
    assert job.collectives.height == 10
    assert job.collectives["ranks"].to_list() == [[0, 1]] * 10
    assert any("2 of 128 ranks" in w for w in job.warnings)
    asc = real_traces / "ascend"
    ascend = load(
        [
            asc / "level0__rank0_ascend_pt__trace_view.json",
            asc / "level0__rank1_ascend_pt__trace_view.json",
        ]
    )
    aj = analyze_job(ascend)
    inst = aj.collectives.sort("seq")
    assert inst.height == 4 and inst["collective"].unique().to_list() == ["all_reduce"]
    assert inst["ranks"].to_list() == [[0, 1]] * 4
    assert any("does not say which ranks" in w for w in aj.warnings)
    # 4 097 000 FP32 elements
    assert inst["bytes"][0] == 4_097_000 * 4


def test_metrics_json_has_the_job_for_several_files(real_traces: Path) -> None:
    from click.testing import CliRunner

    from moetrace.cli import main

    files = [str(p) for p in _gloo(real_traces, "skewed")]
    res = CliRunner().invoke(main, ["metrics", *files, "--json"])
    assert res.exit_code == 0, res.output
    job = json.loads(res.stdout)["job"]
    assert job["stragglers"][0]["rank"] == 0
    waits = [s["caused_wait_ns"] for s in job["stragglers"]]
    assert waits == sorted(waits, reverse=True)
    assert set(job["clock_offsets_ns"]) == {"0", "1", "2", "3"}
    assert 0 < job["critical_path"]["comm_share"] < 1


def _ops(rank1_shift_ns: int) -> pl.DataFrame:
    """Two ranks, one blocking all-to-all each step: rank 1 arrives 50 ns after rank 0's
    arrival and leaves 30 ns after rank 0 leaves (true clocks), its clock moved by the shift."""
    rows = []
    for seq in range(3):
        t = seq * 1000
        rows.append((0, seq, t, t + 100))
        rows.append((1, seq, t + 50 + rank1_shift_ns, t + 130 + rank1_shift_ns))
    return pl.DataFrame(
        rows, schema=["rank", "seq", "arrival_ns", "end_ns"], orient="row"
    ).with_columns(pl.lit("g").alias("group"), pl.lit("all_to_all").alias("collective"))


def test_clock_offset_is_zero_when_the_causal_bounds_include_zero() -> None:
    from moetrace.analysis.clocks import clock_offsets

    one = clock_offsets(_ops(0)).filter(pl.col("rank") == 1).row(0, named=True)
    # bounds by hand: a1 - end0 = 50 - 100 = -50, end1 - a0 = 130 - 0 = 130: 0 inside
    assert (one["lower_ns"], one["upper_ns"]) == (-50, 130)
    assert one["offset_ns"] == 0 and one["one_clock"] is True  # not the ends' median, 30


def test_clock_offset_outside_zero_is_the_median_of_the_ends() -> None:
    from moetrace.analysis.clocks import clock_offsets

    far = clock_offsets(_ops(1000)).filter(pl.col("rank") == 1).row(0, named=True)
    assert (far["lower_ns"], far["upper_ns"]) == (950, 1130)
    assert far["offset_ns"] == 1030 and far["one_clock"] is False
