"""`moetrace cache info|clear`: the columnar cache of loaded traces (moetrace.trace.cache)."""

from __future__ import annotations

import click

from moetrace.commands._common import handle_errors
from moetrace.text import visible


@click.group("cache")
def cache() -> None:
    """The cache of loaded traces ($XDG_CACHE_HOME/moetrace, default ~/.cache/moetrace).

    Loading a trace stores its tables there, so the next command on the same file skips the
    parsing. An entry is used only while the file keeps its size and modification time.
    Commands that load traces take --no-cache to bypass it.
    """


@cache.command("info")
@handle_errors
def info() -> None:
    """Where the cache is, how many traces it holds and their size."""
    from moetrace.trace.cache import cache_info

    found = cache_info()
    click.echo(f"directory: {visible(found['directory'])}")
    click.echo(f"entries:   {found['entries']}")
    click.echo(f"size:      {found['bytes'] / 1e6:.1f} MB")


@cache.command("clear")
@handle_errors
def clear() -> None:
    """Delete every cached trace (the trace files themselves are not touched)."""
    from moetrace.trace.cache import cache_dir, clear_cache

    count, size = clear_cache()
    click.echo(f"removed {count} entries ({size / 1e6:.1f} MB) from {visible(cache_dir())}")


COMMANDS = [cache]
