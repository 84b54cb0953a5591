"""The metric spec (analysis/metric_spec.py) is what the Report, the docs and the tables read."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from moetrace.analysis.metric_spec import (
    BY_NAME,
    METRICS,
    POOLED,
    RANKS_SCHEMA,
    is_ratio,
    markdown_table,
)
from moetrace.analysis.report import Report

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_docs_metric_table_is_the_spec() -> None:
    text = DOCS.read_text(encoding="utf-8")
    begin, end = "<!-- metric table: begin -->\n", "\n<!-- metric table: end -->"
    table = text[text.index(begin) + len(begin) : text.index(end)]
    assert table == markdown_table()


def test_spec_is_consistent() -> None:
    names = [m.name for m in METRICS]
    assert len(names) == len(set(names))
    assert list(RANKS_SCHEMA)[:2] == ["rank", "step"]
    assert set(RANKS_SCHEMA) == {"rank", "step", *names}
    for metric in METRICS:
        assert metric.name.endswith("_ns") == (metric.unit == "ns"), metric.name
        assert (metric.pooled is not None) == (metric.total == "pooled"), metric.name
    for num, den in POOLED.values():  # both parts are ns metrics of the spec
        assert BY_NAME[num].unit == "ns" and BY_NAME[den].unit == "ns"


def _report(ranks: list[dict[str, float | int | None]]) -> Report:
    """A Report holding only these (rank, step) rows (other columns 0)."""
    rows = [{name: row.get(name, 0) for name in RANKS_SCHEMA} for row in ranks]
    frame = pl.DataFrame(rows, schema=RANKS_SCHEMA)
    empty = pl.DataFrame()
    units = pl.DataFrame(
        schema={"rank": pl.Int64, "step": pl.Int64, "unit": pl.String, "tracks": pl.Int64,
                "busy_ns": pl.Int64, "util": pl.Float64}
    )  # fmt: skip
    path = pl.DataFrame(
        schema={"rank": pl.Int64, "step": pl.Int64, "category": pl.String, "dur_ns": pl.Int64}
    )
    return Report(frame, units, empty, empty, path, empty, empty)


ROWS: list[dict[str, float | int | None]] = [
    # rank 0: 30 of 40 ns of comm hidden (0.75); rank 1: 10 of 160 (0.0625)
    {"rank": 0, "step": 0, "window_ns": 100, "comm_ns": 40, "overlapped_ns": 30,
     "exposed_comm_ns": 10, "cp_span_ns": 100, "cp_comm_ns": 20, "job_comm_ns": 40,
     "mfu": 0.5, "overlap_ratio": 0.75, "exposed_ratio": 0.25},
    {"rank": 1, "step": 0, "window_ns": 300, "comm_ns": 160, "overlapped_ns": 10,
     "exposed_comm_ns": 150, "cp_span_ns": 150, "cp_comm_ns": 60, "job_comm_ns": 200,
     "mfu": None, "overlap_ratio": 0.0625, "exposed_ratio": 150 / 160},
]  # fmt: skip


def test_summary_pools_ratios_as_the_spec_declares() -> None:
    s = _report(ROWS).summary()
    assert s["comm_ns"] == 200.0 and s["window_ns"] == 400.0
    assert s["overlap_ratio"] == pytest.approx(40 / 200)  # not the mean of ratios, 0.40625
    assert s["exposed_ratio"] == pytest.approx(160 / 200)
    assert s["cp_coverage"] == pytest.approx(250 / 400)
    assert s["cp_comm_ratio"] == pytest.approx(80 / 240)
    assert s["mfu"] == pytest.approx(0.5)  # only the rank that knows it, weighted by window
    assert s["makespan_ns"] == 0.0  # the rows' windows all start and end at 0 here


def test_aggregate_has_each_metric_as_the_spec_declares() -> None:
    agg = _report(ROWS).aggregate()
    row = agg.row(0, named=True)
    assert row["overlapped_ns:sum"] == 40 and row["comm_ns:max"] == 160
    assert row["overlap_ratio:pooled"] == pytest.approx(40 / 200)
    assert row["mfu:min"] == row["mfu:max"] == 0.5
    for metric in METRICS:
        assert (f"{metric.name}:min" in agg.columns) == metric.per_step, metric.name
        assert (f"{metric.name}:pooled" in agg.columns) == (metric.pooled is not None)
        assert (f"{metric.name}:sum" in agg.columns) == (
            metric.per_step and metric.total == "sum"
        ), metric.name


def test_per_rank_json_leaves_out_an_unknown_optional_metric() -> None:
    items = _report(ROWS).to_dict()["ranks"]
    assert items[0]["mfu"] == 0.5 and "mfu" not in items[1]
    assert items[1]["overlap_ratio"] == 0.0625 and items[1]["exposed_comm_ns"] == 150


def test_is_ratio_reads_the_spec() -> None:
    assert is_ratio("cp_coverage") and is_ratio("mfu:max") and is_ratio("overlap_ratio:pooled")
    assert not is_ratio("cp_span_ns") and not is_ratio("rank") and not is_ratio("util gpu")
