"""What the hostile-input tests share: run the CLI in-process and read its one error line."""

from __future__ import annotations

from click.testing import CliRunner

from moetrace.cli import main


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `moetrace ARGS`; a traceback is re-raised (a failure)."""
    result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a traceback is a failure
    return result.exit_code, result.stdout, result.stderr


def one_error_line(err: str) -> str:
    """The only line of `err`, which must be moetrace's `error:` line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("moetrace: error: "), err
    return lines[0]
