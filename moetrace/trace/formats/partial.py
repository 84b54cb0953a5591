"""Previews of one big file while it is read: the events read so far, as a `Trace`.

The viewer installs a `PreviewWatch` for its loading thread (`watching`); the readers offer
what they have read so far at natural points (the Chrome decoder after each piece, the
.pftrace reader before its whole-file pass) and the watch decides whether a preview is worth
building now: never before `first_after` seconds of reading, at most once per
`min_interval`, and only while the previews' total cost (building the partial trace and
showing it) stays within `budget` of the reading time. A preview's cost grows with the events
read, so the previews come at growing intervals. With no watch (every other caller) the hooks
cost one thread-local lookup per piece.

Previews are views only: the reader's result is the one it gives without a watch. A preview
that fails is dropped (and the previews stop); the reader goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moetrace.trace.model import Trace

_local = threading.local()

Builder = Callable[[Path, Any], "Trace | None"]
"""Turns what a reader offers (e.g. the Chrome decoder's raw columns so far) into a Trace."""


class PreviewWatch:
    """When to build previews, and what to do with them (`show`).

    `builders` maps the kind of partial data a reader offers ("chrome": a RawTrace) to the
    function that makes a Trace of it; kind "trace" is a Trace already. Times in seconds.
    """

    def __init__(
        self,
        show: Callable[[Trace], None],
        builders: Mapping[str, Builder] | None = None,
        *,
        budget: float = 0.10,
        first_after: float = 0.5,
        min_interval: float = 1.5,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.show = show
        self.builders = dict(builders or {})
        self.budget, self.first_after, self.min_interval = budget, first_after, min_interval
        self.clock = clock
        self.started = clock()
        self.spent = 0.0  # seconds spent building and showing previews
        self.shown = 0  # previews shown
        self.last_end = self.started  # when the last preview was done
        self.cost_per_unit = 0.0  # seconds per unit (event, byte) of the last preview
        self.stopped = False

    def reading_time(self) -> float:
        """Seconds of reading since the watch started, previews not counted."""
        return self.clock() - self.started - self.spent

    def due(self, units: int) -> bool:
        """Whether a preview of `units` (events, bytes) read so far is worth building now."""
        if self.stopped or units <= 0:
            return False
        now = self.clock()
        reading = now - self.started - self.spent
        if reading < self.first_after:
            return False
        if self.shown == 0:
            return True  # the first preview is small: what `first_after` seconds read
        if now - self.last_end < self.min_interval:
            return False
        estimate = self.cost_per_unit * units
        return self.spent + estimate <= self.budget * (now - self.started)

    def deliver(self, kind: str, path: Path, make: Callable[[], Any], units: int) -> bool:
        """Build the preview (`make()`, then the builder of `kind`) and show it unless it has
        no events; its cost counts against the budget. Returns whether a preview was shown."""
        begun = self.clock()
        try:
            made = make()
            trace = made if kind == "trace" else self.builders[kind](path, made)
            if trace is not None and trace.events.height == 0:
                trace = None  # nothing to draw yet (a prefix of open slices only)
            if trace is not None:
                self.show(trace)
        except Exception:  # a preview is only a view: the reader's own result is unaffected
            self.stopped = True
            trace = None
        end = self.clock()
        self.spent += end - begun
        self.last_end = end
        if trace is None:
            return False
        self.shown += 1
        self.cost_per_unit = (end - begun) / max(units, 1)
        return True


def current() -> PreviewWatch | None:
    """The watch of this thread's read, or None (no previews wanted)."""
    watch: PreviewWatch | None = getattr(_local, "watch", None)
    return watch


def due(units: int) -> bool:
    """Whether this thread's watch wants a preview of `units` read so far now."""
    watch = current()
    return watch is not None and watch.due(units)


@contextmanager
def watching(watch: PreviewWatch) -> Iterator[PreviewWatch]:
    """Reads in this thread within the block offer their partial data to `watch`."""
    before = current()
    _local.watch = watch
    try:
        yield watch
    finally:
        _local.watch = before


def offer(kind: str, path: Path, make: Callable[[], Any], units: int) -> None:
    """A reader's hook: `make()` gives the partial data of `kind` read so far (`units`
    events or bytes); built and shown only when this thread's watch says it is due."""
    watch = current()
    if watch is not None and watch.due(units):
        watch.deliver(kind, path, make, units)
