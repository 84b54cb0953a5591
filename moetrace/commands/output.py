"""One output layer for the commands: the --json / --csv flags, and a result printed as JSON,
CSV or tables for people. JSON and CSV are plain and stable for scripts; tables are drawn by
the command (rich, every cell plain Text)."""

from __future__ import annotations

import functools
import json as jsonlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from moetrace.commands._common import fail
from moetrace.commands.report_tables import write_csv

if TYPE_CHECKING:
    import polars as pl

F = TypeVar("F", bound=Callable[..., Any])

OutputFormat = Literal["table", "json", "csv"]
"""How a command prints its result: tables for people (the default), --json or --csv."""


def output_options(json_help: str, csv_help: str | None = None) -> Callable[[F], F]:
    """--json (and --csv when `csv_help` is given): the command receives them as one
    `fmt: OutputFormat` argument; both at once is one error line, exit status 2."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, as_json: bool, as_csv: bool = False, **kwargs: Any) -> Any:
            if as_json and as_csv:
                fail("--json and --csv are exclusive")
            fmt: OutputFormat = "json" if as_json else "csv" if as_csv else "table"
            return func(*args, fmt=fmt, **kwargs)

        command: Any = wrapper
        if csv_help is not None:
            command = click.option("--csv", "as_csv", is_flag=True, help=csv_help)(command)
        command = click.option("--json", "as_json", is_flag=True, help=json_help)(command)
        return command  # type: ignore[no-any-return]

    return wrap


def emit(
    fmt: OutputFormat,
    *,
    table: Callable[[], None],
    json: Callable[[], Any] | None = None,
    csv: Callable[[], pl.DataFrame] | None = None,
) -> None:
    """Print a result as `fmt`: `json()` (text printed as it is, else dumped with indent 1),
    `csv()` as CSV on stdout, or `table()` drawing it for people. Only the one asked for runs."""
    if fmt == "json" and json is not None:
        doc = json()
        click.echo(doc if isinstance(doc, str) else jsonlib.dumps(doc, indent=1))
    elif fmt == "csv" and csv is not None:
        write_csv(csv())
    else:
        table()
