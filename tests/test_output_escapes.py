"""Names are data in every table and CSV the CLI prints: an event name or a file name with
terminal escapes is shown escaped on a terminal, and piped CSV keeps the data unchanged."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.commands.report_tables import write_csv

HOSTILE = "gemm\x1b[31mred\u202e[bold]x"
SHOWN = "gemm\\x1b[31mred\\u202e[bold]x"


def _trace(path: Path, name: str = HOSTILE) -> Path:
    events = [
        {"ph": "X", "name": name, "ts": 1, "dur": 2, "pid": 0, "tid": 0},
        {"ph": "X", "name": "ok", "ts": 5, "dur": 1, "pid": 0, "tid": 0},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_query_table_shows_escapes_not_terminal_codes(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    result = CliRunner().invoke(main, ["query", str(trace), "SELECT name FROM events"])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert SHOWN in result.output


def test_piped_csv_keeps_the_data_unchanged(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    result = CliRunner().invoke(main, ["query", str(trace), "SELECT name FROM events", "--csv"])
    assert result.exit_code == 0, result.output
    assert pl.read_csv(io.StringIO(result.output))["name"].to_list() == [HOSTILE, "ok"]


def test_csv_on_a_terminal_is_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    out.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr("sys.stdout", out)
    write_csv(pl.DataFrame({"name": [HOSTILE, "plain", None], "n": [1, 2, 3]}))
    text = out.getvalue()
    assert "\x1b" not in text and "\u202e" not in text
    assert text.splitlines() == ["name,n", f"{SHOWN},1", "plain,2", ",3"]


def test_compare_escapes_file_names(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a\x1b[2Jclear.json", name="k")
    b = _trace(tmp_path / "b.json", name="k")
    result = CliRunner().invoke(main, ["compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output
    assert "a\\x1b[2Jclear.json" in result.output
