"""Read progress reported by the readers themselves, for the viewer's status line.

The viewer's loader installs a sink (`Sink`) for its loading thread (`watching`); a reader
calls `report(path, done, total, stage)` at natural points (the .pftrace reader between its
passes, `moetrace.trace.parallel.map_files` as each file is done), and the viewer turns the
latest report into a share of the file, a rate and an ETA. Formats read through an ordinary
file object need no report: the viewer takes their progress from the kernel's read position.
With no watch (every other caller) a report costs one thread-local lookup.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

_local = threading.local()


@dataclass(frozen=True)
class ProgressReport:
    """One reader's latest report: `done` of `total` units (bytes, packets, stages) of `path`,
    in the stage named `stage`."""

    path: Path
    done: float
    total: float
    stage: str

    @property
    def fraction(self) -> float:
        """Share of the file done, 0..1 (0 when the total is unknown)."""
        return min(max(self.done / self.total, 0.0), 1.0) if self.total > 0 else 0.0


class Sink(Protocol):
    """Where the reports go (the viewer's: `moetrace.tui.loading.ReadProgress`); called from
    the reading thread."""

    def update(self, report: ProgressReport) -> None:
        """Take `report` as the latest of its file."""


@contextmanager
def watching(sink: Sink) -> Iterator[Sink]:
    """Reads in this thread within the block report their progress to `sink`."""
    before: Sink | None = getattr(_local, "sink", None)
    _local.sink = sink
    try:
        yield sink
    finally:
        _local.sink = before


def report(path: Path, done: float, total: float, stage: str = "") -> None:
    """A reader's hook: `done` of `total` units of `path` read, now in `stage`."""
    sink: Sink | None = getattr(_local, "sink", None)
    if sink is not None:
        sink.update(ProgressReport(Path(path), float(done), float(total), stage))
