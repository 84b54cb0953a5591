"""The load's progress in the status line: a share with an ETA from the readers' own reports
(moetrace.trace.progress) or the read position, never going back. The fake readers report
when the test's gates let them (no clocks)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from tui_helpers import settle, static_text

from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace import progress
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp
from moetrace.tui.loading import LoadProgress, ReadProgress

# What the fake reader reports, in order: (done, total) of its units. The fourth goes back
# (as a reader's estimate may): the share shown stays at the third's.
STEPS = [(1, 5), (2, 5), (3, 5), (2, 5), (4, 5)]
SHOWN = [20, 40, 60, 60, 80]  # % by hand: 100 * max(done so far) / 5


def _percent(status: str) -> int:
    found = re.search(r"(\d+)% of", status)
    assert found, status
    return int(found.group(1))


async def test_status_shows_a_monotonic_share_and_an_eta(monkeypatch: Any, tmp_path: Path) -> None:
    import moetrace.trace.io as io

    path = tmp_path / "big.pftrace"
    path.write_bytes(b"\0" * 1000)
    result = synthetic_trace(ranks=1, events_per_lane=5, seed=0)
    gates = [threading.Event() for _ in range(len(STEPS) + 1)]

    def fake_load(paths: Any, **kw: Any) -> Trace:
        for k, (done, total) in enumerate(STEPS):
            gates[k].wait(30)
            progress.report(path, done, total, f"step {k}")
        gates[-1].wait(30)
        return result

    monkeypatch.setattr(io, "load", fake_load)
    app = MoetraceApp(paths=[path], metrics=False)
    seen: list[str] = []
    async with app.run_test(size=(160, 36)) as pilot:
        for k in range(len(STEPS)):
            gates[k].set()
            for _ in range(2000):  # bounded rounds until the status shows this step
                await pilot.pause(0.01)
                status = static_text(app, "#status")
                if f"(step {k})" in status:
                    break
            seen.append(status)
        gates[-1].set()
        await settle(app, pilot)
        assert app.trace is result and app.load_progress is None
    assert [_percent(s) for s in seen] == SHOWN
    for status in seen:
        assert re.search(r"ETA \d+ s", status), status
        assert "of 0.0 MB" in status and "big.pftrace" not in status  # bytes, no markup


def test_a_job_counts_the_files_its_workers_finished(tmp_path: Path) -> None:
    """Files done (reported by map_files, as a worker returns) count whole; the share is by
    bytes: 300 of 400 bytes = 75%."""
    small, big = tmp_path / "rank0.json", tmp_path / "rank1.json"
    small.write_bytes(b" " * 100)
    big.write_bytes(b" " * 300)
    sink = ReadProgress()
    state = LoadProgress([small, big], reported=sink)
    assert "%" not in state.text() and "0 done" in state.text()
    with progress.watching(sink):
        progress.report(big, 1, 1)
    text = state.text()
    assert "reading 2 files, 1 done" in text and "75% of" in text and "ETA" in text
    with progress.watching(sink):
        progress.report(small, 1, 1)
    text = state.text()
    assert "2 done" in text and "100% of" in text and "building the trace" in text


def test_map_files_reports_each_file_done(tmp_path: Path) -> None:
    from moetrace.trace.parallel import map_files

    paths = [tmp_path / f"f{k}" for k in range(3)]
    sink = ReadProgress()
    with progress.watching(sink):
        out = map_files(str, paths, jobs=1)
    assert out == [str(p) for p in paths]
    assert {p: (r.done, r.total) for p, r in sink.latest().items()} == {
        p: (1.0, 1.0) for p in paths
    }


def test_the_pftrace_reader_reports_its_three_weighted_passes(tmp_path: Path) -> None:
    from moetrace.trace.formats.pftrace.read import read_pftrace

    path = tmp_path / "t.pftrace"
    trace = synthetic_trace(ranks=1, events_per_lane=5, seed=0)
    trace.write(path)

    class Record:
        def __init__(self) -> None:
            self.steps: list[tuple[float, float]] = []

        def update(self, report: progress.ProgressReport) -> None:
            self.steps.append((report.done, report.total))

    record = Record()
    with progress.watching(record):
        read = read_pftrace(path)
    assert read.events.height == trace.events.height
    assert record.steps == [(0, 100), (5, 100), (15, 100), (100, 100)]
    progress.report(path, 1, 1)  # no watch: nothing recorded, nothing raised
    assert len(record.steps) == 4


def test_an_sqlite_read_reports_the_bytes_its_queries_read(tmp_path: Path) -> None:
    """SQLite reads pages with pread (no file position): the share is the bytes the process
    read since the database was opened, below 100% until the reader is done."""
    import sqlite3

    import polars as pl

    from moetrace.trace.formats.sqlite import fetch, open_readonly

    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", ((k, "x" * 200) for k in range(20_000)))
    conn.commit()
    conn.close()
    size = path.stat().st_size
    sink = ReadProgress()
    seen: list[tuple[float, str]] = []
    with progress.watching(sink), open_readonly(path, "a test database") as db:
        seen.append((sink.latest()[path].done, sink.latest()[path].stage))
        rows = fetch(db, "SELECT a, b FROM t", {"a": pl.Int64(), "b": pl.String()})
        seen.append((sink.latest()[path].done, sink.latest()[path].stage))
    assert rows.height == 20_000
    assert seen[0] == (0.0, "SQLite: opening")
    assert 0.5 * size <= seen[1][0] <= 0.95 * size and seen[1][1] == "SQLite: 1 queries"
