"""`moetrace view TRACE...`: the terminal viewer (several files or a directory: a rank each)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from moetrace.commands._common import UserError, handle_errors, load_options
from moetrace.trace.options import LoadOptions


@click.command("view")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--no-metrics", is_flag=True, help="Do not run the analysis (faster on huge traces).")
@load_options
@handle_errors
def view(paths: tuple[Path, ...], no_metrics: bool, loading: LoadOptions) -> None:
    """Browse traces in the terminal: timeline, critical path, idle gaps, exposed comm.

    \b
    Keys: w/s zoom, a/d pan, . , next/prev event, c i x overlays, / search, ? help, q quit.
    """
    for path in paths:
        if not path.exists():
            raise UserError(f"{path}: no such file or directory")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal Textual cannot read keys: it would spin and never exit.
        raise UserError(
            "view needs a terminal (stdin and stdout must be a tty); "
            "for figures without one use `moetrace metrics`"
        )
    from moetrace.tui.app import launch

    launch(list(paths), metrics=not no_metrics, loading=loading)


COMMANDS = [view]
