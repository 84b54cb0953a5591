"""What `moetrace query` lets through to Polars SQL: one read-only SELECT over the trace's
tables, small enough to parse, stopped after `--timeout` seconds.

Polars' SQL runs DDL (`DROP TABLE events` succeeds silently), and its table functions read
any file (`read_csv`, `read_parquet`, `read_ipc`, `read_json`: polars-sql's
`table_functions.rs`, pola-rs/polars crates/polars-sql/src/table_functions.rs). Its parser
recurses once per operator, so a 20,000-term expression overflows the stack (a segfault no
handler can catch) and 5,000 terms take over a minute: the size is bounded here, before
Polars sees the text.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from moetrace.commands._common import EXIT_BAD_INPUT, UserError

MAX_SQL_CHARS = 20_000
"""Longest query accepted (characters)."""
MAX_SQL_TOKENS = 2_000
"""Most tokens (names, numbers, strings, operators) in a query: a 1,000-term sum (~2,000
tokens) parses in ~0.5 s on one core; 5,000 terms took over 60 s."""
MAX_SQL_DEPTH = 64
"""Deepest parenthesis nesting accepted."""

TABLES = ("events", "tracks", "deps", "counters")
_STARTS = ("select", "with", "(")
_REFUSED_WORDS = frozenset(
    {
        "attach",
        "copy",
        "create",
        "drop",
        "truncate",
        "insert",
        "update",
        "delete",
        "alter",
        "install",
        "pragma",
    }
)
_TABLE_FUNCTIONS = re.compile(r"^(read|scan)_\w+$")
_TOKEN = re.compile(
    r"""
    (?P<string>'(?:[^']|'')*')          # a string literal ('' escapes a quote)
  | (?P<quoted>"(?:[^"]|"")*")          # a quoted identifier
  | (?P<comment>--[^\n]*|/\*.*?\*/)     # comments
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
  | (?P<space>\s+)
  | (?P<op>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def check_sql(sql: str) -> None:
    """Refuse (UserError, one line) anything but one read-only SELECT of bounded size that
    calls no file-reading table function."""
    if len(sql) > MAX_SQL_CHARS:
        raise UserError(f"SQL: query too long ({len(sql):,} characters, limit {MAX_SQL_CHARS:,})")
    tokens: list[tuple[str, str]] = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup or "op"
        if kind in ("space", "comment"):
            continue
        tokens.append((kind, match.group()))
        if len(tokens) > MAX_SQL_TOKENS:
            raise UserError(f"SQL: query too large (more than {MAX_SQL_TOKENS:,} tokens)")
    if not tokens:
        raise UserError("SQL: empty query")
    first = tokens[0][1].lower()
    if first not in _STARTS:
        raise UserError(
            f"SQL: only SELECT queries are allowed (got {tokens[0][1][:20]!r}): "
            "the trace's tables are read-only"
        )
    depth = 0
    for i, (kind, text) in enumerate(tokens):
        if kind == "op":
            if text == "(":
                depth += 1
                if depth > MAX_SQL_DEPTH:
                    raise UserError(f"SQL: parentheses nested deeper than {MAX_SQL_DEPTH}")
            elif text == ")":
                depth -= 1
            elif text == ";" and any(k != "op" or t != ";" for k, t in tokens[i + 1 :]):
                raise UserError("SQL: one statement only")
            continue
        if kind != "word":
            continue
        word = text.lower()
        if word in _REFUSED_WORDS:
            raise UserError(f"SQL: {text.upper()} is not allowed: the trace's tables are read-only")
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if following == "(" and _TABLE_FUNCTIONS.match(word):
            raise UserError(
                f"SQL: {text}() is not allowed: only the tables {', '.join(TABLES)} can be read"
            )


T = TypeVar("T")


def run_bounded(work: Callable[[], T], timeout: float) -> T:
    """`work()` in a worker thread, at most `timeout` seconds. A Polars query cannot be
    cancelled from Python, so a query past its time ends the command: one line on stderr and
    exit status 2 (`os._exit`: the worker thread would otherwise keep the process alive)."""
    done = threading.Event()
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(work())
        except BaseException as exc:
            error.append(exc)
        finally:
            done.set()

    threading.Thread(target=target, name="moetrace-query", daemon=True).start()
    if not done.wait(timeout):
        sys.stderr.write(f"moetrace: error: SQL: query ran longer than --timeout {timeout:g} s\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(EXIT_BAD_INPUT)
    if error:
        raise error[0]
    return result[0]
