"""Summary lanes of big groups are built in a worker so the first frame never waits.

A mixin of `TimelineView`: `summary_index` returns a group's index at once when it is
small (≤ SYNC_SUMMARY_EVENTS top-level events), else starts a 'summaries' thread worker
and returns None; the row shows a placeholder until the worker refreshes the view.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ..binning import IntervalIndex
from ..lanes import LaneModel

SYNC_SUMMARY_EVENTS = 200_000  # summaries of bigger groups are built in a worker


class TimelineSummaries:
    """Lazy, worker-built summary indexes; expects `model` and Textual's widget API."""

    model: LaneModel | None
    _pending_summaries: set[tuple[object, ...]]

    if TYPE_CHECKING:
        app: Any

        def refresh(self, *args: Any, **kwargs: Any) -> Any: ...
        def run_worker(self, *args: Any, **kwargs: Any) -> Any: ...

    def summary_index(self, key: tuple[object, ...]) -> IntervalIndex | None:
        """A group's summary index; big ones are built in a worker (None until ready), so
        the first frame of a huge trace does not wait for sorting millions of intervals."""
        assert self.model is not None
        index = self.model.cached_summary(key)
        if index is not None:
            return index
        if self.model.group_events(key) <= _sync_limit():
            return self.model.summary(key)
        if key not in self._pending_summaries:
            self._pending_summaries.add(key)
            self.run_worker(
                partial(self._build_summary, self.model, key),
                thread=True,
                group="summaries",
                name="summaries",
                description="Building summary lanes",
            )
        return None

    def _build_summary(self, model: LaneModel, key: tuple[object, ...]) -> None:
        model.summary(key)
        self.app.call_from_thread(self._summary_ready, key)

    def _summary_ready(self, key: tuple[object, ...]) -> None:
        self._pending_summaries.discard(key)
        self.refresh()


def _sync_limit() -> int:
    return SYNC_SUMMARY_EVENTS
