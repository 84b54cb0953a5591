"""Shared CLI plumbing: one-line errors, exit status 2, no clobbering."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from moetrace.commands._common import UserError, check_output_path, handle_errors, load_options
from moetrace.commands.output import OutputFormat, emit, output_options
from moetrace.trace.model import TraceFormatError
from moetrace.trace.options import LoadOptions


@click.command()
@click.argument("what")
@handle_errors
def _boom(what: str) -> None:
    if what == "format":
        raise TraceFormatError("t.json", "expected an object", position="byte 17")
    if what == "user":
        raise UserError("evil\x1b[31m name [bold]x[/bold]")
    if what == "missing":
        open("/nonexistent/definitely/not/here")  # noqa: SIM115
    click.echo("fine")


@pytest.mark.parametrize(
    ("what", "line"),
    [
        ("format", "moetrace: error: t.json: byte 17: expected an object"),
        ("user", "moetrace: error: evil\\x1b[31m name [bold]x[/bold]"),
        ("missing", "moetrace: error: /nonexistent/definitely/not/here: no such file or directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(what: str, line: str) -> None:
    result = CliRunner().invoke(_boom, [what])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [line]
    assert "Traceback" not in result.output


def test_good_input_exits_0() -> None:
    result = CliRunner().invoke(_boom, ["ok"])
    assert result.exit_code == 0
    assert result.stdout == "fine\n"


def test_output_path_refuses_to_overwrite(tmp_path: Path) -> None:
    existing = tmp_path / "a.json"
    existing.write_text("keep me")
    with pytest.raises(UserError, match="already exists"):
        check_output_path(existing, force=False)
    assert check_output_path(existing, force=True) == existing
    assert existing.read_text() == "keep me"
    assert check_output_path("-", force=False) is None
    with pytest.raises(UserError, match="no such directory"):
        check_output_path(tmp_path / "nope" / "b.json", force=False)


def test_cli_help_lists_the_main_commands() -> None:
    from moetrace.cli import main

    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "moetrace demo" in result.output
    commands = result.output.split("Commands:")[1].splitlines()
    listed = {line.split()[0] for line in commands if line.strip()}
    expected = {"info", "metrics", "view", "convert", "query", "compare"}
    expected |= {"run", "sweep", "demo", "validate"}
    assert expected <= listed, sorted(expected - listed)


@click.command()
@load_options
def _show_loading(loading: LoadOptions) -> None:
    click.echo(repr(loading))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], LoadOptions()),
        (["--no-cache", "-j", "3"], LoadOptions(cache=False, jobs=3)),
        (["--engine", "ray", "--address", "host:1"], LoadOptions(engine="ray", address="host:1")),
    ],
)
def test_load_options_reach_the_command_as_one_value(
    args: list[str], expected: LoadOptions
) -> None:
    runner = CliRunner()
    assert runner.invoke(_show_loading, args).output.strip() == repr(expected)
    # nothing is left behind for the next command in the same process
    assert runner.invoke(_show_loading, []).output.strip() == repr(LoadOptions())


@click.command()
@output_options("Print JSON.", "Print CSV.")
@handle_errors
def _result(fmt: OutputFormat) -> None:
    import polars as pl

    frame = pl.DataFrame({"name": ["a,b", "c"], "ns": [1, 2]})
    emit(fmt, json=lambda: {"rows": frame.to_dicts()}, csv=lambda: frame, table=lambda: None)
    if fmt == "table":
        click.echo("table")


@pytest.mark.parametrize(
    ("flags", "out"),
    [
        ([], "table\n"),
        (["--json"], '{\n "rows": [\n  {\n   "name": "a,b",\n   "ns": 1\n  },\n'
         '  {\n   "name": "c",\n   "ns": 2\n  }\n ]\n}\n'),
        (["--csv"], 'name,ns\n"a,b",1\nc,2\n'),
    ],
)  # fmt: skip
def test_output_layer_prints_the_one_format_asked_for(flags: list[str], out: str) -> None:
    result = CliRunner().invoke(_result, flags)
    assert result.exit_code == 0 and result.stdout == out


def test_output_layer_refuses_json_and_csv_at_once() -> None:
    result = CliRunner().invoke(_result, ["--json", "--csv"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == ["moetrace: error: --json and --csv are exclusive"]


def test_validate_help_names_the_page_it_writes() -> None:
    from moetrace.cli import main

    result = CliRunner().invoke(main, ["validate", "--help"])
    assert result.exit_code == 0
    assert "EXECUTOR.md" not in result.output  # the page was renamed docs/executor.md
    assert "docs/executor.md" in " ".join(result.output.split())
