"""How traces are read: cache, processes, engine. One small value passed down explicitly."""

from __future__ import annotations

from dataclasses import dataclass

ENGINES = ("local", "ray")


@dataclass(frozen=True)
class LoadOptions:
    """What `moetrace.trace.io.load` does beyond reading a file (the CLI's --no-cache, --jobs,
    --engine and --address); the defaults are what a plain `load(path)` does.

    cache: read and write the columnar cache. jobs: processes reading several files (None:
    the core count, or one process for small inputs). engine: "local" processes or "ray"
    tasks, on the Ray cluster at `address` (None: start or join a local one).
    """

    cache: bool = True
    jobs: int | None = None
    engine: str = "local"
    address: str | None = None
