"""Summary lanes of big groups are built off the interface so the first frame never waits.

`SummaryBuilder.index(key)` returns a group's summary index at once when it is small
(≤ SYNC_SUMMARY_EVENTS top-level events), else asks `start_worker` to build it in a thread and
returns None; the row shows a placeholder until `ready(key)` is called back (on the
interface's thread) and the view repaints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..binning import IntervalIndex
    from ..lanes import LaneModel

SYNC_SUMMARY_EVENTS = 200_000  # summaries of bigger groups are built in a worker

GroupKey = tuple[object, ...]


class SummaryBuilder:
    """Lazy, worker-built summary indexes of one lane model.

    start_worker(job): run `job` in a thread. ready(key): called by the job, from its thread,
    once `key`'s index is built (it should hand over to the interface's thread and repaint).
    """

    def __init__(
        self,
        model: LaneModel,
        start_worker: Callable[[Callable[[], None]], object],
        ready: Callable[[GroupKey], None],
    ) -> None:
        self.model = model
        self._start_worker = start_worker
        self._ready = ready
        self.pending: set[GroupKey] = set()

    def index(self, key: GroupKey) -> IntervalIndex | None:
        """A group's summary index; big ones are built in a worker (None until ready), so
        the first frame of a huge trace does not wait for sorting millions of intervals."""
        index = self.model.cached_summary(key)
        if index is not None:
            return index
        if self.model.group_events(key) <= SYNC_SUMMARY_EVENTS:
            return self.model.summary(key)
        if key not in self.pending:
            self.pending.add(key)
            self._start_worker(lambda: self._build(key))
        return None

    def _build(self, key: GroupKey) -> None:
        self.model.summary(key)
        self._ready(key)

    def built(self, key: GroupKey) -> None:
        """On the interface's thread, after `ready(key)`: no longer pending."""
        self.pending.discard(key)
