"""The trace builder's shortcuts against the generic paths: depth taken from the lanes vs
`nesting_depth`, hand-assembled args JSON vs the standard json parser and the task columns."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from moetrace.executor.run import simulate_run, to_trace
from moetrace.trace.nesting import nesting_depth

CASES = [
    dict(schedule="tile", routing="zipf:1.2"),
    dict(schedule="tile", routing="zipf:1.2", one_sided=False, l2=False),
    dict(schedule="tile", dynamic=True),
    dict(schedule="sequential"),
    dict(schedule="chunked", shared_expert=True),
]
FAMILY_KEYS = {  # args keys per task type, in text order
    "gate": ["token_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"],
    "shared_up": ["token_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"],
    "gemm1": ["expert", "row_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"],
    "swiglu": ["expert", "row_tile", "n_tile", "chunk", "rows", "hbm_bytes", "l2_bytes"],
    "dispatch_rx": ["src", "dst", "tile", "chunk", "rows"],
    "layout": ["chunk"],
}


@pytest.fixture(scope="module", params=range(len(CASES)))
def run_and_trace(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    run = simulate_run(ranks=4, tokens=256, **CASES[request.param])
    return run, to_trace(run)


def test_depth_equals_generic_nesting(run_and_trace) -> None:  # type: ignore[no-untyped-def]
    _, trace = run_and_trace
    ev = trace.events
    depth, bad = nesting_depth(ev["track"].to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy())
    assert not bad.any()
    assert np.array_equal(ev["depth"].to_numpy(), depth)
    assert ev["depth"].max() >= 1  # the step lane's tasks nest in the step marker
    assert trace.problems() == []


def test_args_parse_and_match_task_columns(run_and_trace) -> None:  # type: ignore[no-untyped-def]
    run, trace = run_and_trace
    ev = trace.events.head(run.timed.n)  # tasks (the step markers follow)
    parsed = [json.loads(text) for text in ev["args"].to_list()]
    assert [p["task"] for p in parsed] == ev["name"].to_list()
    cols = run.graph.cols
    for task, keys in FAMILY_KEYS.items():
        rows = np.flatnonzero(ev["name"].to_numpy() == task)
        for i in rows[:50].tolist():
            assert list(parsed[i])[2:] == keys, task
            if "rows" in keys:
                assert parsed[i]["rows"] == int(cols["rows"][i])
            chunk = int(cols["chunk"][i])
            assert parsed[i]["chunk"] == (chunk if chunk >= 0 else None)
            if "expert" in keys:
                assert parsed[i]["expert"] == int(cols["expert"][i])
                assert parsed[i]["n_tile"] == int(cols["n_tile"][i])  # -1 for swiglu
            elif "n_tile" in keys:
                n_tile = int(cols["n_tile"][i])
                assert parsed[i]["n_tile"] == (n_tile if n_tile >= 0 else None)
            if "hbm_bytes" in keys:
                assert parsed[i]["hbm_bytes"] == round(float(run.timed.hbm_bytes[i]))
    launches = ev.filter(pl.col("name").str.starts_with("launch"))["args"].to_list()
    assert all(json.loads(a)["chunk"] is None for a in launches)
