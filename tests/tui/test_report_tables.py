"""Pilot tests of the registry's report tables (steps, critical path by kernel, experts, MoE):
their cells are the numbers `moetrace metrics --json` / `moe --json` print for the same file,
at 80×24 and 200×50 with NO_COLOR; the tables open at their top."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.text import Text
from textual.widgets import DataTable
from tui_helpers import running, static_text

import moetrace
from moetrace.cli import main
from moetrace.tui.app import MoetraceApp
from moetrace.tui.format import fmt_ns, fmt_pct
from moetrace.tui.keys import APP_BINDINGS
from moetrace.tui.screens.tables import TableScreen
from moetrace.tui.table_registry import TABLES

SAMPLE = Path(__file__).parents[2] / "sample_traces" / "tile_zipf.json.gz"  # 8-rank executor run
SIZES = [(80, 24), (200, 50)]


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, str(SAMPLE)])
    assert result.exit_code == 0, result.output
    start = result.stdout.index("{")  # warnings go to stderr; stdout is the JSON
    return json.loads(result.stdout[start:])


@pytest.fixture(scope="module")
def metrics_json() -> Any:
    return cli_json("metrics", "--json")


@pytest.fixture(scope="module")
def moe_json() -> Any:
    return cli_json("moe", "--json")


@pytest.fixture(autouse=True)
def no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")


def title_of(app: MoetraceApp) -> str:
    from textual.widgets import Static

    return str(app.screen.query_one("#table-title", Static).content)


def rows_of(table: DataTable[Any]) -> list[list[str]]:
    return [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]


def test_every_table_has_one_key_one_binding_and_one_palette_entry() -> None:
    from moetrace.tui.commands import COMMANDS

    keys = [spec.key for spec in TABLES]
    assert len(set(keys)) == len(keys)
    bound = {b.key: b.action for b in APP_BINDINGS}
    for spec in TABLES:
        assert bound[spec.key] == f"table('{spec.name}')"
        assert (spec.palette, spec.action, spec.key) in COMMANDS
    others = [b.key for b in APP_BINDINGS if not b.action.startswith("table(")]
    assert not set(keys) & {k for key in others for k in key.split(",")}


@pytest.mark.parametrize("size", SIZES)
async def test_steps_table_is_metrics_rank_step_rows_and_enter_zooms_to_the_step(
    size: tuple[int, int], metrics_json: Any
) -> None:
    expected = {(r["rank"], r["step"]): r for r in metrics_json["traces"][0]["ranks"]}
    app = MoetraceApp(moetrace.load(SAMPLE))
    async with running(app, size=size) as pilot:
        await pilot.press("9")
        screen = app.screen
        assert isinstance(screen, TableScreen)
        table = screen.query_one(DataTable)
        assert table.row_count == len(expected) == 8
        title = title_of(app)
        assert f"{len(expected)} rows" in title
        assert table.scroll_y == 0 and table.cursor_row == 0  # opens at its top
        head = [str(c.label) for c in table.columns.values()]
        assert head[3:] == ["window", "compute", "exposed_comm", "free", "idle", "cp_comm_ratio"]
        shown = rows_of(table)
        for cells in shown:
            r = expected[(int(cells[0]), int(cells[1]))]
            cp = r["critical_path"]["cp_comm_ratio"]
            assert cells[3:] == [
                fmt_ns(r["window_ns"], 4),
                fmt_ns(r["compute_ns"], 4),
                fmt_ns(r["exposed_comm_ns"], 4),
                fmt_ns(r["free_ns"], 4),
                fmt_ns(r["idle_ns"], 4),
                fmt_pct(cp),
            ]
        slowest = max(expected.values(), key=lambda r: r["window_ns"])
        assert shown[0][:2] == [str(slowest["rank"]), str(slowest["step"])]
        await pilot.press("enter")
        assert not isinstance(app.screen, TableScreen)
        assert app.report is not None and app.model is not None
        row = app.report.ranks.filter(
            (app.report.ranks["rank"] == slowest["rank"])
            & (app.report.ranks["step"] == slowest["step"])
        ).row(0, named=True)
        a = row["window_start_ns"] - app.model.origin
        b = row["window_end_ns"] - app.model.origin
        tl = app.timeline
        assert tl.t0 <= a and tl.t1 >= b and (tl.t1 - tl.t0) <= 1.1 * (b - a)
        assert f"rank {slowest['rank']} step {slowest['step']}" in static_text(app, "#status")


async def test_steps_table_sorts_by_a_clicked_column(metrics_json: Any) -> None:
    app = MoetraceApp(moetrace.load(SAMPLE))
    async with running(app, size=(200, 50)) as pilot:
        await pilot.press("9")
        screen = app.screen
        assert isinstance(screen, TableScreen)
        table = screen.query_one(DataTable)
        column = list(table.columns)[4]  # compute
        screen.on_data_table_header_selected(
            DataTable.HeaderSelected(table, column, 4, Text("compute"))
        )
        computes = sorted(r["compute_ns"] for r in metrics_json["traces"][0]["ranks"])
        assert [cells[4] for cells in rows_of(table)] == [fmt_ns(c, 4) for c in computes]


@pytest.mark.parametrize("size", SIZES)
async def test_critical_path_by_kernel_sums_the_path_and_enter_steps_through_instances(
    size: tuple[int, int], metrics_json: Any
) -> None:
    trace = moetrace.load(SAMPLE)
    app = MoetraceApp(trace)
    async with running(app, size=size) as pilot:
        assert app.report is not None
        # by hand: each segment's event name, in path order
        names = dict(zip(trace.events["id"].to_list(), trace.events["name"].to_list(), strict=True))
        per_name: dict[str, int] = defaultdict(int)
        instances: dict[str, list[int]] = defaultdict(list)
        cp = app.report.critical_path.sort("rank", "step", "seq")
        for r in cp.iter_rows(named=True):
            per_name[names[r["event_id"]]] += r["dur_ns"]
            instances[names[r["event_id"]]].append(r["event_id"])
        # the CLI's number: Σ of every rank·step's critical-path span
        span = sum(r["critical_path"]["span_ns"] for r in metrics_json["traces"][0]["ranks"])
        assert sum(per_name.values()) == span
        await pilot.press("K")
        table = app.screen.query_one(DataTable)
        assert table.scroll_y == 0 and "rows" in title_of(app)
        shown = rows_of(table)
        assert len(shown) == len(per_name)
        for name, time_s, share, count in shown:
            assert time_s == fmt_ns(per_name[name])
            assert share == fmt_pct(per_name[name] / span)
            assert count == str(len(instances[name]))
        top = max(per_name, key=lambda n: (per_name[n], n))
        assert shown[0][0] == top
        await pilot.press("enter")
        assert app.timeline.selected == instances[top][0]
        await pilot.press("K", "enter")
        assert app.timeline.selected == instances[top][1]
        assert f"instance 2 of {len(instances[top])}" in static_text(app, "#status")


@pytest.mark.parametrize("size", SIZES)
async def test_expert_and_moe_tables_are_the_moe_command_rows(
    size: tuple[int, int], moe_json: Any
) -> None:
    app = MoetraceApp(moetrace.load(SAMPLE))
    async with running(app, size=size) as pilot:
        await pilot.press("E")
        table = app.screen.query_one(DataTable)
        assert table.scroll_y == 0
        experts = moe_json["experts"]
        assert table.row_count == len(experts) > 0
        want = {
            (str(e["expert"]), str(e["rank"]), str(e["step"])): [
                fmt_ns(e["time_ns"]),
                str(e["events"]),
            ]
            for e in experts
        }
        shown = rows_of(table)
        assert {tuple(c[:3]): c[3:] for c in shown} == want
        most = max(experts, key=lambda e: e["time_ns"])
        assert shown[0][3] == fmt_ns(most["time_ns"])
        await pilot.press("escape", "8")
        table = app.screen.query_one(DataTable)
        cats = moe_json["micro_batches"] or moe_json["categories"]
        assert table.row_count == len(cats) > 0
        want_cat = sorted(
            [
                str(c["rank"]),
                str(c["step"]),
                "-" if c["layer"] is None else str(c["layer"]),
                "-" if c.get("micro_batch") is None else str(c["micro_batch"]),
                c["category"],
                fmt_ns(c["time_ns"]),
                fmt_ns(c["exposed_ns"]),
                fmt_pct(c["share"]),
            ]
            for c in cats
        )
        assert sorted(rows_of(table)) == want_cat


@pytest.mark.parametrize("size", SIZES)
async def test_every_table_opens_at_its_top_with_title_and_row_count(size: tuple[int, int]) -> None:
    app = MoetraceApp(moetrace.load(SAMPLE))
    async with running(app, size=size) as pilot:
        for spec in TABLES:
            await pilot.press(spec.key)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, TableScreen) and screen.table_name == spec.name
            title = screen.query_one("#table-title")
            table = screen.query_one(DataTable)
            assert screen.scroll_offset.y == 0 and title.region.y == 0, spec.name
            assert title.region.height >= 1 and table.region.y == title.region.bottom
            assert table.scroll_y == 0 and table.cursor_row == 0
            assert f"{table.row_count} rows" in title_of(app), spec.name
            await pilot.press("escape")


async def test_moe_table_splits_a_chunked_run_by_micro_batch() -> None:
    from moetrace.executor.run import simulate

    trace = simulate(preset="mixtral-8x7b", ranks=2, tokens=128, schedule="chunked", chunks=2)
    app = MoetraceApp(trace)
    async with running(app, size=(200, 50)) as pilot:
        await pilot.press("8")
        rows = rows_of(app.screen.query_one(DataTable))
        assert {r[3] for r in rows} == {"0", "1"}
        # by hand: each micro-batch's expert GEMM self time is its share of the category's
        gemm = {r[3]: r[5] for r in rows if r[0] == "0" and r[4] == "expert_gemm"}
        assert app.report is not None
        total = app.report.moe.filter(
            (app.report.moe["rank"] == 0) & (app.report.moe["category"] == "expert_gemm")
        )["time_ns"].sum()
        view = app.report.moe_view
        assert view is not None
        mb = view.micro_batches.filter(
            (view.micro_batches["rank"] == 0) & (view.micro_batches["category"] == "expert_gemm")
        )
        assert mb["time_ns"].sum() == total and mb.height == 2
        assert gemm == {
            str(m): fmt_ns(t) for m, t in zip(mb["micro_batch"], mb["time_ns"], strict=True)
        }


@pytest.mark.parametrize("size", SIZES)
async def test_real_gloo_job_steps_and_experts_equal_the_cli(
    size: tuple[int, int], real_traces: Path
) -> None:
    """The shared skewed gloo job (4 ranks, expert ids from `moe/expert<g>` names): the
    slowest step and the expert with most time on screen in one key, as the CLI says."""
    folder = real_traces / "torch_gloo_moe" / "skewed"
    runner = CliRunner()
    metrics = json.loads(runner.invoke(main, ["metrics", "--json", str(folder)]).stdout)
    moe = json.loads(runner.invoke(main, ["moe", "--json", str(folder)]).stdout)
    ranks = [r for t in metrics["traces"] for r in t["ranks"]]
    app = MoetraceApp(paths=[folder])
    async with running(app, size=size) as pilot:
        await pilot.press("9")
        shown = rows_of(app.screen.query_one(DataTable))
        assert len(shown) == len(ranks)
        slowest = max(ranks, key=lambda r: (r["window_ns"], -r["rank"], -r["step"]))
        assert shown[0][:2] == [str(slowest["rank"]), str(slowest["step"])]
        assert shown[0][3:8] == [
            fmt_ns(slowest[k], 4)
            for k in ("window_ns", "compute_ns", "exposed_comm_ns", "free_ns", "idle_ns")
        ]
        await pilot.press("escape", "E")
        shown = rows_of(app.screen.query_one(DataTable))
        assert len(shown) == len(moe["experts"]) > 0
        most = max(moe["experts"], key=lambda e: e["time_ns"])
        assert shown[0][0] == str(most["expert"]) and shown[0][3] == fmt_ns(most["time_ns"])


async def test_big_traces_build_table_rows_in_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from moetrace.tui.screens import tables

    app = MoetraceApp(moetrace.load(SAMPLE))
    async with running(app, size=(80, 24)) as pilot:
        await pilot.press("E")
        expected = app.screen.query_one(DataTable).row_count
        await pilot.press("escape")
        monkeypatch.setattr(tables, "THREAD_EVENTS", 0)  # every trace is "big" now
        await pilot.press("E", "escape")  # closed before its rows are in: no error
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("E")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, TableScreen)
        assert app.screen.query_one(DataTable).row_count == expected > 0
        assert f"{expected} rows" in title_of(app)
