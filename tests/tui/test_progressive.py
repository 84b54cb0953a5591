"""`moetrace view` draws before the heavy imports, and a job's lanes fill in as its rank files
arrive (a mocked slow reader: each file is read only when the test lets it)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from tui_helpers import lane_text, model_of, settle

from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp


def test_the_view_command_imports_no_polars_numpy_or_analysis() -> None:
    """What `moetrace view` imports before its first frame (the CLI, the command, the app)
    leaves Polars, numpy and the analysis to the loader thread."""
    code = (
        "import sys\n"
        "import moetrace.cli, moetrace.commands.view_cmd, moetrace.tui.app\n"
        "heavy = ('polars', 'numpy', 'moetrace.analysis', 'moetrace.trace.model')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def _rank_files(tmp_path: Path, trace: Trace) -> dict[Path, Trace]:
    """One (placeholder) file per rank and the sub-trace the mocked reader returns for it."""
    parts: dict[Path, Trace] = {}
    for rank in sorted(trace.ranks):
        tracks = trace.tracks.filter(pl.col("rank") == rank)
        events = trace.events.filter(pl.col("track").is_in(tracks["track"].implode()))
        path = tmp_path / f"rank{rank}.json"
        path.write_text('{"traceEvents": []}')
        parts[path] = Trace(events, tracks, trace.deps.clear(), trace.counters.clear(), {})
    return parts


async def _until(pilot: Any, condition: Any, rounds: int = 3000) -> None:
    """Let the app run until `condition()` holds (bounded by rounds, not by a clock)."""
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError("the app never got there")


async def test_lanes_fill_in_as_rank_files_arrive(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import moetrace.trace.formats.registry as registry
    import moetrace.trace.parallel as parallel

    trace = synthetic_trace(ranks=3, events_per_lane=20, seed=2)
    parts = _rank_files(tmp_path, trace)
    paths = sorted(parts)
    gates = {p: threading.Event() for p in paths}

    def slow_read(path: Path, flavor: str | None = None, *, use_cache: bool = True) -> Trace:
        gates[Path(path)].wait(60)
        return parts[Path(path)]

    monkeypatch.setattr(registry, "read_file_cached", slow_read)  # the step-wise reads
    monkeypatch.setattr(parallel, "read_file_cached", slow_read)  # load()'s, at the end
    app = MoetraceApp(paths=[tmp_path], metrics=False)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.model is None and "q or Ctrl+C quits" in app.timeline.render_line(2).text

        gates[paths[0]].set()  # rank 0's file is in: its lanes are drawn, the others' not
        await _until(pilot, lambda: app.model is not None)
        assert app.load_progress is not None  # still loading
        assert model_of(app).ranks == [0]
        assert "partial: 1 rank so far (1 of 3 files)" in app.sub_title
        row0 = lane_text(app.timeline, ("lane", 0, 0))
        assert any(c in row0 for c in "▁▂▃▄▅▆▇█▌▐")  # drawn, not a placeholder
        with pytest.raises(AssertionError):
            lane_text(app.timeline, ("rank", 1))

        await pilot.press("w", "w")  # the user zooms while the job loads
        window = (model_of(app).origin + app.timeline.t0, model_of(app).origin + app.timeline.t1)

        gates[paths[1]].set()  # rank 1 arrives: drawn too, the view kept
        await _until(pilot, lambda: app.model is not None and len(app.model.ranks) == 2)
        assert model_of(app).ranks == [0, 1] and app.load_progress is not None
        assert lane_text(app.timeline, ("rank", 1)).strip()
        now = (model_of(app).origin + app.timeline.t0, model_of(app).origin + app.timeline.t1)
        assert now == pytest.approx(window)

        gates[paths[2]].set()  # the last file: the whole job, as `load` makes it
        await _until(pilot, lambda: app.load_progress is None)
        await settle(app, pilot)
        assert app.trace is not None and app.trace.events.height == trace.events.height
        assert model_of(app).ranks == [0, 1, 2]
        now = (model_of(app).origin + app.timeline.t0, model_of(app).origin + app.timeline.t1)
        assert now == pytest.approx(window)
