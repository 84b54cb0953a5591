"""What every command shares: one-line errors with exit status 2, safe output paths."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def fail(message: str) -> None:
    """Print `moetrace: error: message` (control characters made visible) and exit 2."""
    safe = (
        message.encode("unicode_escape", "backslashreplace").decode("ascii")
        if _has_control(message)
        else message
    )
    click.echo(f"moetrace: error: {safe}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def _has_control(text: str) -> bool:
    return any(
        (ord(c) < 32 and c not in "\t") or ord(c) == 127 or 0x80 <= ord(c) < 0xA0 for c in text
    )


def handle_errors(func: F) -> F:
    """Turn bad input (TraceFormatError, UserError, missing files) into one line and exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from moetrace.trace.model import TraceFormatError, TraceValidationError

        try:
            return func(*args, **kwargs)
        except (TraceFormatError, TraceValidationError, UserError) as exc:
            fail(str(exc))
        except FileNotFoundError as exc:
            fail(f"{exc.filename}: no such file or directory")
        except IsADirectoryError as exc:
            fail(f"{exc.filename}: is a directory")
        except PermissionError as exc:
            fail(f"{exc.filename}: permission denied")
        except BrokenPipeError:
            # `moetrace ... | head`: the reader went away; that is not an error.
            sys.stderr.close()
            sys.exit(0)

    return wrapper  # type: ignore[return-value]


def check_output_path(path: str | Path, force: bool) -> Path | None:
    """Return the output path, or None for '-' (stdout). Refuse to overwrite without force."""
    if str(path) == "-":
        return None
    out = Path(path)
    if out.exists() and not force:
        raise UserError(f"{out}: already exists (use --force to overwrite)")
    if out.parent and not out.parent.exists():
        raise UserError(f"{out.parent}: no such directory")
    return out


def _set_load_default(key: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from moetrace.trace.io import LOAD_DEFAULTS

        if value is not None and value is not False:
            LOAD_DEFAULTS[key] = (not value) if key == "cache" else value
        return value

    return callback


def load_options(func: F) -> F:
    """--no-cache, --jobs N, --engine local|ray, --address: how traces are loaded (they set
    `moetrace.trace.io.LOAD_DEFAULTS`, so every `load` of the command follows them)."""
    options = [
        click.option(
            "--no-cache",
            is_flag=True,
            expose_value=False,
            callback=_set_load_default("cache"),
            help="Parse the trace files again; neither read nor write the columnar cache.",
        ),
        click.option(
            "--jobs",
            "-j",
            type=click.IntRange(min=1),
            expose_value=False,
            callback=_set_load_default("jobs"),
            help="Processes reading several files at once  [default: the core count]",
        ),
        click.option(
            "--engine",
            type=click.Choice(["local", "ray"]),
            expose_value=False,
            callback=_set_load_default("engine"),
            help="Where several files are read: local processes, or Ray tasks (moetrace[ray]).",
        ),
        click.option(
            "--address",
            expose_value=False,
            callback=_set_load_default("address"),
            help="Ray cluster to join with --engine ray (default: start a local one).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
