"""What every command shares: one-line errors with exit status 2, safe output paths."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from moetrace.errors import MoetraceError
from moetrace.text import visible

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2


class UserError(MoetraceError):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def warn(message: str) -> None:
    """Print `moetrace: warning: message` on stderr, one line, control characters made visible."""
    click.echo(f"moetrace: warning: {visible(message)}", err=True)


def note(message: str) -> None:
    """Print `moetrace: note: message` on stderr (a stated assumption, not a problem)."""
    click.echo(f"moetrace: note: {visible(message)}", err=True)


def warn_or_note(message: str, where: str = "") -> None:
    """A line the analysis handed over: `note: …` (a stated assumption) printed as a note,
    anything else as a warning; `where` (a path) goes first."""
    prefix = f"{where}: " if where else ""
    if message.startswith("note: "):
        note(prefix + message.removeprefix("note: "))
    else:
        warn(prefix + message)


def fail(message: str) -> None:
    """Print `moetrace: error: message` (control characters made visible) and exit 2."""
    click.echo(f"moetrace: error: {visible(message)}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def handle_errors(func: F) -> F:
    """Turn bad input (any MoetraceError, OS errors such as a missing file or a full disk) into
    one line and exit 2; Ctrl+C exits 130 without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MoetraceError as exc:  # TraceFormatError, OutputError, UserError...
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
        except OSError as exc:  # name too long, disk full, I/O error: one line, not a traceback
            where = f"{exc.filename}: " if exc.filename else ""
            fail(f"{where}{exc.strerror or exc}")
        except UnicodeDecodeError as exc:  # a text file (rules, TOML) that is not UTF-8
            fail(f"a text input is not UTF-8: {exc.reason} at offset {exc.start}")
        except KeyboardInterrupt:
            interrupted()
        except MemoryError:
            fail("out of memory (the trace or the request is too large for this machine)")
        except RecursionError:
            fail("input nested too deeply (Python's recursion limit was reached)")
        except (RuntimeError, ImportError) as exc:
            reason = exhausted(exc)
            if reason is None:
                raise
            fail(reason)
        except BaseException as exc:  # Polars' PanicException derives from BaseException
            if type(exc).__name__ != "PanicException":
                raise
            fail(exhausted(exc) or f"internal error in Polars: {_first_line(exc)}")

    return wrapper  # type: ignore[return-value]


def interrupted() -> None:
    """Ctrl+C: one line and exit 130 (128 + SIGINT), whatever was running."""
    click.echo("moetrace: interrupted", err=True)
    sys.exit(130)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_RESOURCE_WORDS = (
    ("can't start new thread", "threads (the process limit was reached)"),
    ("cannot start new thread", "threads (the process limit was reached)"),
    ("resource temporarily unavailable", "threads or processes (the process limit was reached)"),
    ("failed to spawn thread", "threads (the process limit was reached)"),
    ("cannot allocate memory", "memory"),
    ("out of memory", "memory"),
    ("memory allocation", "memory"),
    ("failed to map", "memory (address space)"),
    ("mmap", "memory (address space)"),
)


def exhausted(exc: BaseException) -> str | None:
    """The one line for an error that means a resource ran out (a thread that could not
    start, an import whose shared library could not be mapped), or None for any other."""
    text = f"{exc} {exc.__cause__ or ''}".lower()
    for words, what in _RESOURCE_WORDS:
        if words in text:
            return f"ran out of {what}: {_first_line(exc)}"
    return None


_OUTPUT_PARAMS = frozenset({"output", "out_dir", "docs_path"})


def command_inputs() -> list[str]:
    """Every file or folder the running command was given, outputs aside: each string value
    (or string in a list) of its click parameters that names an existing path. One rule for
    every writer, so that a new option cannot be forgotten."""
    ctx = click.get_current_context(silent=True)
    found: list[str] = []
    while ctx is not None:
        for name, value in ctx.params.items():
            if name in _OUTPUT_PARAMS:
                continue
            values = value if isinstance(value, list | tuple) else (value,)
            for item in values:
                if isinstance(item, str | Path) and str(item) not in ("", "-"):
                    try:
                        if os.path.exists(item):
                            found.append(str(item))
                    except (OSError, ValueError):
                        continue
        ctx = ctx.parent
    return found


def check_output_path(
    path: str | Path, force: bool, inputs: list[str] | None = None
) -> Path | None:
    """Return the output path, or None for '-' (stdout). Refuse to overwrite without force,
    and refuse, force or not, a target that is one of the command's inputs."""
    if str(path) == "-":
        return None
    from moetrace.errors import OutputError
    from moetrace.trace.atomic import check_target

    given = command_inputs() if inputs is None else inputs
    try:
        return check_target(path, force=force, inputs=given)
    except OutputError as exc:
        raise UserError(str(exc)) from None


def load_options(func: F) -> F:
    """--no-cache, --jobs N, --engine local|ray, --address: how traces are loaded. The command
    receives them as one `loading: LoadOptions` argument and passes it to every `load`."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        no_cache: bool,
        jobs: int | None,
        engine: str | None,
        address: str | None,
        **kwargs: Any,
    ) -> Any:
        from moetrace.trace.options import LoadOptions

        loading = LoadOptions(
            cache=not no_cache, jobs=jobs, engine=engine or "local", address=address
        )
        return func(*args, loading=loading, **kwargs)

    return load_flags(wrapper)  # type: ignore[return-value]


def load_flags(func: F) -> F:
    """The options of `load_options` as plain arguments (no_cache, jobs, engine, address), for
    a command that must not import `moetrace.trace` (and Polars) when it starts: `view`."""
    options = [
        click.option(
            "--no-cache",
            is_flag=True,
            help="Parse the trace files again; neither read nor write the columnar cache.",
        ),
        click.option(
            "--jobs",
            "-j",
            type=click.IntRange(min=1),
            help="Processes reading several files at once  [default: the core count]",
        ),
        click.option(
            "--engine",
            type=click.Choice(["local", "ray"]),
            help="Where several files are read: local processes, or Ray tasks (moetrace[ray]).",
        ),
        click.option(
            "--address",
            help="Ray cluster to join with --engine ray (default: start a local one).",
        ),
    ]
    command: Any = func
    for option in reversed(options):
        command = option(command)
    return cast(F, command)


class OneLineUsageError(click.UsageError):
    """A bad option or argument, shown like every other error: one line, exit status 2."""

    def show(self, file: Any = None) -> None:
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        message = visible(self.format_message().replace("\n", " "))
        click.echo(f"moetrace: error: {message}{hint}", err=True)


class OneLineErrorGroup(click.Group):
    """The `moetrace` group: click's usage errors (bad option values, unknown commands) are
    printed as one `moetrace: error: ...` line instead of usage + hint + error."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except (KeyboardInterrupt, click.Abort):  # outside a command's handler: still 130
            interrupted()


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", OneLineUsageError)


def _one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, OneLineUsageError | _NO_ARGS_IS_HELP):  # bare `moetrace`: the help
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx)
