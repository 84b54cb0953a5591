"""Hostile inputs for the SQLite readers (msprof database, nsys export): truncated, a WAL
left beside, not SQLite at all, another program's database, missing tables, damaged pages.
Each is one `moetrace: error:` line, exit status 2, and the input byte-identical after
(nothing written beside it either)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.trace.io import find_traces, load


def _ascend(path: Path) -> None:
    """A minimal msprof-shaped database: two tasks on stream 2, one of them an op."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 512")
    conn.executescript(
        "CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE TASK (startNs INT, endNs INT, deviceId INT, connectionId INT,"
        " globalTaskId INT, globalPid INT, taskType INT, contextId INT, streamId INT,"
        " taskId INT, modelId INT);"
        "CREATE TABLE COMPUTE_TASK_INFO (name INT, globalTaskId INT, blockDim INT,"
        " mixBlockDim INT, taskType INT, opType INT);"
    )
    conn.executemany(
        "INSERT INTO STRING_IDS VALUES (?, ?)", [(1, "MatMul_1"), (2, "KERNEL_AICORE"), (3, "N/A")]
    )
    rows = [(i * 100, i * 100 + 50, 0, i, i, 7, 2, 0, 2, i, 0) for i in range(200)]
    conn.executemany("INSERT INTO TASK VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, 0, 8, 0, 3, 3)")
    conn.commit()
    conn.close()


def _nsys(path: Path) -> None:
    """A minimal nsys-shaped export: kernels and their runtime calls."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 512")
    conn.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT, end INT, deviceId INT,"
        " streamId INT, correlationId INT, globalPid INT, shortName INT, demangledName INT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INT, end INT, globalTid INT,"
        " correlationId INT, nameId INT);"
    )
    conn.executemany("INSERT INTO StringIds VALUES (?, ?)", [(1, "gemm"), (2, "cudaLaunchKernel")])
    g = 5 << 24
    rows = [(i * 100 + 10, i * 100 + 60, 0, 7, i, g, 1, 1) for i in range(200)]
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?)", rows)
    api = [(i * 100, i * 100 + 5, g | 5, i, 2) for i in range(200)]
    conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?)", api)
    conn.commit()
    conn.close()


MAKERS: dict[str, tuple[Callable[[Path], None], str]] = {
    "ascend": (_ascend, "ascend_pytorch_profiler_0.db"),
    "nsys": (_nsys, "report.sqlite"),
}


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _refused(path: Path, *needles: str) -> str:
    """Run `moetrace info path`: one error line, exit 2, the folder unchanged."""
    before = _digest(path.parent)
    result = CliRunner().invoke(main, ["info", str(path), "--no-cache"])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback is a failure
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("moetrace: error: ") and str(path) in lines[0]
    for needle in needles:
        assert needle in lines[0]
    assert _digest(path.parent) == before
    return lines[0]


@pytest.mark.parametrize("reader", list(MAKERS))
def test_good_file_reads_and_stays_untouched(tmp_path: Path, reader: str) -> None:
    make, name = MAKERS[reader]
    path = tmp_path / name
    make(path)
    before = _digest(tmp_path)
    trace = load(path, cache=False)
    assert trace.events.height > 0 and trace.problems() == []
    assert _digest(tmp_path) == before  # no -wal, -shm or journal appears


@pytest.mark.parametrize("reader", list(MAKERS))
def test_truncated(tmp_path: Path, reader: str) -> None:
    make, name = MAKERS[reader]
    whole = tmp_path / "whole"
    make(whole)
    data = whole.read_bytes()
    whole.unlink()
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    _refused(path, "truncated SQLite database")
    path.write_bytes(data[:50])  # inside the 100-byte header
    _refused(path, "truncated SQLite database")


@pytest.mark.parametrize("reader", list(MAKERS))
def test_wal_left_beside(tmp_path: Path, reader: str) -> None:
    make, name = MAKERS[reader]
    path = tmp_path / name
    make(path)
    (tmp_path / (name + "-wal")).write_bytes(b"\x37\x7f\x06\x82" + bytes(60))
    _refused(path, "-wal", "read-only")


@pytest.mark.parametrize("name", ["trace.db", "report.sqlite"])
def test_not_sqlite(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"this is a text file, not a database\n" * 10)
    _refused(path, "not an SQLite database")


@pytest.mark.parametrize("name", ["places.db", "places.sqlite"])
def test_database_of_another_program(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    conn.execute("INSERT INTO moz_places VALUES (1, 'https://example.org')")
    conn.commit()
    conn.close()
    _refused(path, "another program", "moz_places")


def test_ascend_missing_task_table(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_0.db"
    _ascend(path)
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE TASK")
    conn.commit()
    conn.close()
    _refused(path, "TASK")


def test_nsys_without_any_event_table(tmp_path: Path) -> None:
    path = tmp_path / "report.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);"
        "CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INT, end INT);"
    )
    conn.commit()
    conn.close()
    _refused(path, "holds none of")


@pytest.mark.parametrize("reader", list(MAKERS))
def test_damaged_pages(tmp_path: Path, reader: str) -> None:
    make, name = MAKERS[reader]
    path = tmp_path / name
    make(path)
    data = bytearray(path.read_bytes())
    for page in range(1, len(data) // 512):  # every page but the first: b-tree headers
        data[page * 512 : page * 512 + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    _refused(path)


def test_nsys_report_gets_the_export_command(tmp_path: Path) -> None:
    path = tmp_path / "run.nsys-rep"
    path.write_bytes(b"\x00\x01QDSTRM" + bytes(100))
    _refused(path, "nsys export --type sqlite")


def test_real_files_untouched(tmp_path: Path, real_traces: Path) -> None:
    """A copy of a real export keeps its bytes and gets no -wal, -shm or journal."""
    out = real_traces / "ascend_db/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
    src = out / "ascend_pytorch_profiler_0.db"
    path = tmp_path / src.name
    shutil.copyfile(src, path)
    before = _digest(tmp_path)
    assert load(path, cache=False).events.height > 0
    assert _digest(tmp_path) == before


def test_directory_takes_trace_databases_only(tmp_path: Path) -> None:
    """A folder's listing keeps the nsys export and the msprof database, and skips another
    program's database and a text file named .db (it is not refused: it is not a trace)."""
    _nsys(tmp_path / "report.sqlite")
    _ascend(tmp_path / "ascend_pytorch_profiler_0.db")
    conn = sqlite3.connect(tmp_path / "places.db")
    conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
    conn.commit()
    conn.close()
    (tmp_path / "notes.db").write_text("not a database")
    before = _digest(tmp_path)
    found = find_traces(tmp_path)
    assert [p.name for p in found] == ["ascend_pytorch_profiler_0.db", "report.sqlite"]
    assert _digest(tmp_path) == before
