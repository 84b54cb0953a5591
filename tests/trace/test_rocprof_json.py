"""rocprofv3 JSON (rocprofiler-sdk-tool): every kernel dispatch of the real TraceLens sample
becomes one kernel on its GPU queue, with the duration and name a plain-Python reading of
the same JSON gives; damaged files are one error line."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.trace.io import load

FILE = "rocprof/tracelens__rocprofv3__908_results.json.gz"


def test_dispatches_equal_a_plain_reading(real_traces: Path) -> None:
    path = real_traces / FILE
    run = json.loads(gzip.decompress(path.read_bytes()))["rocprofiler-sdk-tool"][0]
    names = {k["kernel_id"]: k["kernel_name"] for k in run["kernel_symbols"]}
    dispatch = run["buffer_records"]["kernel_dispatch"]
    want_names = Counter(names[d["dispatch_info"]["kernel_id"]] for d in dispatch)
    want_dur = sum(d["end_timestamp"] - d["start_timestamp"] for d in dispatch)
    queues = {
        (d["dispatch_info"]["agent_id"]["handle"], d["dispatch_info"]["queue_id"]["handle"])
        for d in dispatch
    }
    trace = load(path, cache=False)
    assert trace.meta["format"] == "rocprofv3-json"
    assert trace.events.height == len(dispatch)
    assert int(trace.events["dur"].sum()) == want_dur
    assert Counter(trace.events["name"].to_list()) == want_names
    base = trace.tracks.filter(~pl.col("thread_name").str.contains(r"\(overlap"))
    assert base.height == len(queues)
    assert set(trace.tracks["unit"].cast(pl.String)) == {"stream"}
    assert trace.problems() == []


def test_truncated_gzip_is_one_line(tmp_path: Path, real_traces: Path) -> None:
    data = (real_traces / FILE).read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 3])
    result = CliRunner().invoke(main, ["info", str(path), "--no-cache"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("moetrace: error: ") and str(path) in lines[0]


@pytest.mark.parametrize(
    "body",
    [
        b'{"rocprofiler-sdk-tool": 3}',
        b'{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": []}}]}',
        b'{"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [{"x": 1}]}}]}',
    ],
)
def test_odd_shapes_are_one_line(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(body)
    result = CliRunner().invoke(main, ["info", str(path), "--no-cache"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1
