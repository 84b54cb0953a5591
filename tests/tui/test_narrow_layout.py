"""Issue 26 item 3 at 80×24 and 200×50 (NO_COLOR): lane labels keep their distinguishing
tail, C++ kernels show the classifier's short names, slice args stay reachable, the footer
fits, and the viewer names its quantities as `moetrace metrics` does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tui_helpers import running, settle, static_text

from moetrace.cli import main
from moetrace.trace.io import write_trace
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.format import fit_label, fmt_ns, label_tails

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
    tails = [tail for _, tail in label_tails("stream 7 (overlap 2)")]
    assert tails == ["(overlap 2)", "2)"]
    assert [t for _, t in label_tails("Ascend Hardware AIV 12")] == ["AIV 12", "12"]
    # from 0 would be the whole label; the tid alone, without the common "(python)", is last
    assert label_tails("thread 4339 (python)") == [
        ("thread ", "4339 (python)"),
        ("thread ", "4339"),
    ]
    assert fit_label("    thread 4339 (python)", 14) == "    thre…4339 "
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


def steps_trace() -> Trace:
    """Two ranks, three steps (ProfilerStep#N); per step a kernel, a collective and a memcpy
    that neither overlaps, so free (no compute, no comm) ≠ idle (no device work at all)."""
    ev: dict[str, list[Any]] = {k: [] for k in ("id", "track", "name", "cat", "kind", "ts", "dur")}
    parts = [
        (0, "ProfilerStep#{}", "user_annotation", "marker", 0, 9_000),
        (1, "gemm_{}", "kernel", "compute", 1_000, 2_000),
        (1, "ncclDevKernel_AllReduce", "kernel", "comm", 3_500, 1_000),
        (2, "Memcpy HtoD", "gpu_memcpy", "memory", 3_050, 300),
    ]
    for rank in range(2):
        for step in range(3):
            t = 1_000_000 + step * 10_000
            for track, name, cat, kind, at, dur in parts:
                ev["id"].append(len(ev["id"]))
                for key, value in zip(
                    ("track", "name", "cat", "kind", "ts", "dur"),
                    (3 * rank + track, name.format(step), cat, kind, t + at, dur + 100 * rank),
                    strict=True,
                ):
                    ev[key].append(value)
    tracks = {
        "track": list(range(6)),
        "rank": [0, 0, 0, 1, 1, 1],
        "pid": ["1", "0", "0", "2", "1", "1"],
        "tid": ["1", "stream 7", "stream 8", "2", "stream 7", "stream 8"],
        "process_name": ["python3", "GPU 0", "GPU 0", "python3", "GPU 1", "GPU 1"],
        "thread_name": ["python3", "stream 7", "stream 8"] * 2,
        "unit": ["cpu", "stream", "stream"] * 2,
        "sort_index": [0, 1, 2] * 2,
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}
    counters: dict[str, list[Any]] = {"track": [], "name": [], "ts": [], "value": []}
    meta = {"format": "chrome-json", "flavor": "kineto", "source": ["steps.json"]}
    return Trace.from_frames(ev, tracks, deps, counters, meta, compute_depth=True)


async def until_report(app: MoetraceApp, pilot: Any, rounds: int = 3000) -> None:
    """Let the app run until the whole trace's report is in (the analysis starts after the
    first paint, so settling alone may come before it); bounded by rounds, not a clock."""
    for _ in range(rounds):
        if app.report is not None:
            await settle(app, pilot)
            return
        await pilot.pause(0.01)
    raise AssertionError("the report never came")


def metrics_rows(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """The metrics pane's per rank and step table as read off the screen: cells by header,
    each header right-aligned over its column."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "step"])
    header = lines[at]
    ends = [m.end() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for line in lines[at + 1 :]:
        if not line.strip() or "rows (rank × step)" in line:
            break
        starts = [0, *[e + 1 for e in ends[:-1]]]
        cells = {n: line[a:b].strip() for n, a, b in zip(names, starts, ends, strict=True)}
        rows[(cells["rank"], cells["step"])] = cells
    return rows


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_free_and_idle_are_the_cli_quantities(
    tmp_path: Path, monkeypatch: Any, size: tuple[int, int]
) -> None:
    """The viewer's `free` and `idle` cells are `metrics --json`'s free_ns and idle_ns of the
    same rank and step (the issue found the viewer's `idle` was the CLI's `free`)."""
    monkeypatch.setenv("NO_COLOR", "1")
    path = write_trace(steps_trace(), tmp_path / "t.json")
    result = CliRunner().invoke(main, ["metrics", "--json", str(path)])
    assert result.exit_code == 0, result.output
    cli = json.loads(result.stdout)["traces"][0]["ranks"]
    app = MoetraceApp(paths=[path])
    async with running(app, size=size) as pilot:
        await until_report(app, pilot)
        if not app.query_one("#side").display:
            await pilot.press("p")
            await pilot.pause()
        text = static_text(app, "#metrics-body")
    shown = metrics_rows(text)
    assert len(shown) == len(cli) > 1
    for row in cli:
        cells = shown[(str(row["rank"]), str(row["step"]))]
        assert cells["free"] == fmt_ns(row["free_ns"])
        assert cells["idle"] == fmt_ns(row["idle_ns"])
    assert any(r["free_ns"] != r["idle_ns"] for r in cli)  # the two can be told apart
    worst = max(cli, key=lambda r: r["idle_ns"])
    assert f"idle: max {fmt_ns(worst['idle_ns'])} (r{worst['rank']} s{worst['step']})" in text


def cpu_moe_trace() -> Trace:
    """A CPU-only MoE rank (gloo-like): step markers and moe/* ranges on one host thread, the
    dispatch and combine all-to-alls (gloo ops) inside their ranges."""
    names = ["ProfilerStep#1", "moe/dispatch", "moe/expert_ffn", "moe/combine"]
    names += ["gloo:all_to_all", "gloo:all_to_all"]
    ev = {
        "id": [0, 1, 2, 3, 4, 5],
        "track": [0] * 6,
        "name": names,
        "cat": ["user_annotation"] * 4 + ["cpu_op"] * 2,
        "kind": ["marker", "host", "host", "host", "comm", "comm"],
        "ts": [1_000, 1_000, 3_000, 7_000, 1_500, 7_500],
        "dur": [9_000, 2_000, 4_000, 3_000, 1_000, 1_500],
    }
    tracks = {
        "track": [0],
        "rank": [0],
        "pid": ["1"],
        "tid": ["1"],
        "process_name": ["python3"],
        "thread_name": ["python3"],
        "unit": ["cpu"],
        "sort_index": [0],
    }
    deps: dict[str, list[Any]] = {"src": [], "dst": [], "kind": []}
    counters: dict[str, list[Any]] = {"track": [], "name": [], "ts": [], "value": []}
    meta = {"format": "chrome-json", "flavor": "kineto", "source": ["cpu.json"]}
    return Trace.from_frames(ev, tracks, deps, counters, meta, compute_depth=True)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_moe_exposed_on_a_cpu_only_trace_is_not_time(
    tmp_path: Path, monkeypatch: Any, size: tuple[int, int]
) -> None:
    """CPU-only: the MoE table's `exposed` is '–' (not a copy of `time`), as `moe --json`
    gives null; its `time` is the CLI's time_ns."""
    from textual.widgets import DataTable

    monkeypatch.setenv("NO_COLOR", "1")
    path = write_trace(cpu_moe_trace(), tmp_path / "cpu.json")
    result = CliRunner().invoke(main, ["moe", "--json", str(path)])
    assert result.exit_code == 0, result.output
    cli = {r["category"]: r for r in json.loads(result.stdout)["categories"]}
    assert {"dispatch", "expert_gemm", "combine"} <= set(cli)
    assert all(r["exposed_ns"] is None for r in cli.values())
    app = MoetraceApp(paths=[path])
    async with running(app, size=size) as pilot:
        await until_report(app, pilot)
        await pilot.press("8")
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        cols = [str(c.label) for c in table.columns.values()]
        rows = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
    assert len(rows) == len(cli)
    for row in rows:
        cells = dict(zip(cols, row, strict=True))
        assert cells["time"] == fmt_ns(cli[cells["category"]]["time_ns"])
        assert cells["exposed"] == "–"


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_footer_fits_and_details_show_their_args(
    monkeypatch: Any, size: tuple[int, int]
) -> None:
    """The key bar is never wider than the terminal (short at 80 columns, whole at 200) and
    Enter shows the slice's args without scrolling: alone in the side pane at 24 rows."""
    from textual.widgets._footer import FooterKey

    from moetrace.tui.widgets.details import DetailsPane
    from moetrace.tui.widgets.footer import FittingFooter

    monkeypatch.setenv("NO_COLOR", "1")
    app = MoetraceApp(lanes_trace())
    async with running(app, size=size) as pilot:
        keys = list(app.query_one(FittingFooter).query(FooterKey))
        assert sum(k.outer_size.width for k in keys) <= size[0]
        actions = {k.action for k in keys}
        assert {"details", "prompt('search')", "help", "close_or_quit"} <= actions
        assert ("pan(-1)" in actions) is (size[0] >= 200)  # the full bar when wide
        await pilot.press("j", "j", "full_stop", "enter")
        await pilot.pause()
        details = app.query_one(DetailsPane)
        text = static_text(app, "#details-text")
        assert "args" in text and "stream: 7" in text and "grid: [1, 2, 3]" in text
        assert details.max_scroll_y == 0  # nothing below the fold
        assert app.query_one("#metrics").display is (size[1] >= 30)
        await pilot.press("p", "p")  # panes off and on again: metrics come back
        await pilot.pause()
        assert app.query_one("#metrics").display is True


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_a_rankless_partial_view_says_partial(
    monkeypatch: Any, size: tuple[int, int]
) -> None:
    """While a job loads, its lanes so far are labelled partial on screen (first in the
    header, which cuts its end at 80 columns), and a rankless part says 'no rank ids'."""
    import polars as pl

    from moetrace.tui.app import RanksLoaded
    from moetrace.tui.lanes import LaneModel
    from moetrace.tui.loading import LoadProgress

    monkeypatch.setenv("NO_COLOR", "1")
    full = lanes_trace()
    rankless = Trace.from_frames(
        full.events, full.tracks.with_columns(pl.lit(None, pl.Int64).alias("rank")), full.deps
    )
    app = MoetraceApp(metrics=False)
    async with running(app, size=size) as pilot:
        app.load_progress = LoadProgress([Path("a.json"), Path("b.json")])
        app.post_message(RanksLoaded(rankless, LaneModel(rankless), 1, 2))
        await pilot.pause()
        assert app.sub_title.startswith("partial: no rank ids so far (1 of 2 files)")
        assert "partial" in app.export_screenshot()  # the header as drawn
        app.load_progress = None


async def test_metrics_rows_do_not_wrap_at_120x40(monkeypatch: Any) -> None:
    """At 120×40 the side pane is 48 columns: the totals and the rank rows keep one line
    each (before, `CPcov CPcomm` wrapped onto a line of their own and so did the totals)."""
    import io

    from rich.console import Console

    monkeypatch.setenv("NO_COLOR", "1")
    app = MoetraceApp(steps_trace())
    async with running(app, size=(120, 40)) as pilot:
        await until_report(app, pilot)
        pane = app.query_one("#metrics")
        width = pane.content_size.width
        console = Console(width=width, record=True, file=io.StringIO())
        console.print(app.query_one("#metrics-body").content)  # type: ignore[attr-defined]
        lines = console.export_text().splitlines()
    assert 40 <= width < 50
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "step"])
    table = lines[at + 1 : at + 7]  # the 6 (rank, step) rows, one line each
    assert {tuple(line.split()[:2]) for line in table} == {
        (str(r), str(k)) for r in range(2) for k in range(3)
    }
    assert "rows (rank × step)" in lines[at + 7]
    starts: tuple[str, ...] = (
        "whole trace",
        "job span",
        "exposed comm",
        "  Σ",
        "free: max",
        "idle: max",
    )
    starts += ("critical path", "  holds", "util", "  stream")
    totals = lines[: lines.index("per rank and step") - 1]
    assert totals and all(line.startswith(starts) for line in totals), totals
