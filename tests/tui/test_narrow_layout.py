"""Issue 26 item 3 at 80×24 and 200×50 (NO_COLOR): lane labels keep their distinguishing
tail, C++ kernels show the classifier's short names, slice args stay reachable, the footer
fits, and the viewer names its quantities as `moetrace metrics` does."""

from __future__ import annotations

from typing import Any

import pytest
from tui_helpers import running

from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.format import fit_label, label_tails

KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1>)"
)
SHORT = "at::native::vectorized_elementwise_kernel<…>"  # short_name_expr, worked by hand
LANES = [
    "Ascend Hardware AIV 11",
    "Ascend Hardware AIV 12",
    "communication stream lane 3",
    "communication stream lane 4",
    "compute stream 7 (overlap 1)",
    "compute stream 7 (overlap 2)",
]
TAILS = ["AIV 11", "AIV 12", "lane 3", "lane 4", "(overlap 1)", "(overlap 2)"]


def lanes_trace() -> Trace:
    """One rank, six tracks whose names differ only at the end, a C++ kernel on each."""
    n = len(LANES)
    ev = {
        "id": list(range(n)),
        "track": list(range(n)),
        "name": [KERNEL] * n,
        "cat": ["kernel"] * n,
        "kind": ["compute"] * n,
        "ts": [1_000 * i for i in range(n)],
        "dur": [50_000] * n,
        "args": ['{"stream": 7, "grid": [1, 2, 3]}'] * n,
    }
    tracks = {
        "track": list(range(n)),
        "rank": [0] * n,
        "pid": ["0"] * n,
        "tid": [str(i) for i in range(n)],
        "process_name": ["GPU 0"] * n,
        "thread_name": LANES,
        "unit": ["stream"] * n,
        "sort_index": list(range(n)),
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}
    counters: dict[str, list[Any]] = {"track": [], "name": [], "ts": [], "value": []}
    meta = {"format": "chrome-json", "flavor": "kineto", "source": ["lanes.json"]}
    return Trace.from_frames(ev, tracks, deps, counters, meta, compute_depth=True)


def test_cut_labels_keep_their_tail_by_hand() -> None:
    assert label_tails("stream 7 (overlap 2)") == ["(overlap 2)", "2)"]
    assert label_tails("Ascend Hardware AIV 12") == ["AIV 12", "12"]
    assert label_tails("thread 4339 (python)") == ["4339 (python)"]  # from 0: the whole label
    assert label_tails("no digits here") == []
    assert label_tails("42") == []  # the whole label: nothing to keep apart from it
    # 19 cells (18 of text + a gap): head cut, tail whole
    assert fit_label("  Ascend Hardware AIV 12", 19) == "  Ascend Ha…AIV 12 "
    assert fit_label("    nccl stream lane 3", 19) == "    nccl st…lane 3 "
    # 10 cells: the longer tail does not fit, the number alone does
    assert fit_label("  Ascend Hardware AIV 12", 10) == "  Asce…12 "
    # fits: unchanged and padded; no digit: cut at the end as before
    assert fit_label("lane 3", 10) == "lane 3    "
    assert fit_label("averyverylongname", 10) == "averyvery "


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_lane_labels_and_short_names(monkeypatch: Any, size: tuple[int, int]) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = MoetraceApp(lanes_trace(), metrics=False)
    async with running(app, size=size) as pilot:
        tl = app.timeline
        await pilot.pause()
        rows = {row.label: i for i, row in enumerate(tl.rows) if row.kind == "lane"}
        assert sorted(rows) == sorted(LANES)
        gutters = []
        for name, tail in zip(LANES, TAILS, strict=True):
            text = tl.render_line(tl.row_y(rows[name])).text
            gutter = text[: tl.label_width].rstrip(" ◂")
            assert gutter.endswith(tail), (gutter, tail)
            gutters.append(gutter)
            body = text[tl.label_width :]
            assert "void" not in body
            if size[0] >= 200:
                assert SHORT in body
        assert len(set(gutters)) == len(LANES)  # every lane tells itself apart
