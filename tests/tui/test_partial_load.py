"""One big file shows partial data while it loads: previews of the events read so far (the
Chrome decoder's pieces, a .pftrace's balanced prefixes), and the final trace is exactly the
one `moetrace.load` gives. The readers are slowed by gates the tests open (no clocks)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tui_helpers import lane_text, settle

import moetrace
from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace.formats import partial
from moetrace.trace.formats.chrome.partial import BUILDERS
from moetrace.trace.formats.pftrace.partial import (
    balanced_prefix,
    packet_boundary,
    packet_end,
    unclosed_begins,
)
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp

_BEGIN, _END, _INSTANT = 1, 2, 3


def _same(a: Trace, b: Trace) -> None:
    """Equal frames and metadata: the trace a plain load gives."""
    assert a.events.equals(b.events)
    assert a.tracks.equals(b.tracks)
    assert a.deps.equals(b.deps)
    assert a.counters.equals(b.counters)
    assert a.meta == b.meta


def _be_json(path: Path, pairs: int = 600) -> None:
    """A Chrome trace of nested B/E pairs on 3 threads, interleaved in time (so any cut of
    the file leaves some B without its E), plus X slices."""
    events: list[dict[str, Any]] = []
    for k in range(pairs):
        tid = k % 3
        t = 10 * k
        events += [
            {"ph": "B", "name": f"outer{k}", "pid": 1, "tid": tid, "ts": t},
            {"ph": "X", "name": f"x{k}", "pid": 1, "tid": tid, "ts": t + 1, "dur": 2},
        ]
        if k >= 3:  # the outer slice opened 3 steps ago on this thread closes now
            events.append({"ph": "E", "pid": 1, "tid": tid, "ts": t + 5})
    for k in range(max(pairs - 3, 0), pairs):
        events.append({"ph": "E", "pid": 1, "tid": k % 3, "ts": 10 * pairs + k})
    path.write_text(json.dumps({"traceEvents": events}))


def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Previews for every file and after every piece (the policy's timing taken out)."""
    import moetrace.tui.loading as loading

    monkeypatch.setattr(loading, "PREVIEW_MIN_BYTES", 0)
    monkeypatch.setattr(
        loading, "PREVIEW_POLICY", {"budget": 1.0, "first_after": 0.0, "min_interval": 0.0}
    )


def _eager_watch(show: Callable[[Trace], None]) -> partial.PreviewWatch:
    return partial.PreviewWatch(show, BUILDERS, budget=1e9, first_after=0.0, min_interval=0.0)


# ------------------------------------------------------------------ the watch's policy
class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_watch_waits_first_after_then_keeps_the_interval_and_the_budget() -> None:
    clock = _Clock()
    shown: list[int] = []

    def show(trace: Trace) -> None:
        shown.append(trace.events.height)
        clock.now += 0.2  # each preview costs 0.2 s

    watch = partial.PreviewWatch(show, budget=0.1, first_after=0.8, min_interval=1.0, clock=clock)
    clock.now = 0.7
    assert not watch.due(1000)  # before first_after
    clock.now = 0.8
    assert watch.due(1000)
    one = synthetic_trace(ranks=1, events_per_lane=2, seed=0)
    assert watch.deliver("trace", Path("x"), lambda: one, 1000)
    assert watch.spent == pytest.approx(0.2) and watch.reading_time() == pytest.approx(0.8)
    clock.now = 1.9
    assert not watch.due(1000)  # 0.9 s since the last preview ended: within min_interval
    clock.now = 2.0
    # The next preview of 1000 units costs ~0.2 s: 0.4 s of 2.0 s is beyond 10%.
    assert not watch.due(1000)
    clock.now = 4.1
    assert watch.due(1000)  # 0.4 s of 4.1 s: within the budget
    assert not watch.due(2000)  # ~0.4 s more: 0.6 s of 4 s is not
    assert shown == [one.events.height]
    assert not watch.deliver("trace", Path("x"), Trace, 1000)  # no events: nothing shown
    assert shown == [one.events.height] and not watch.stopped


def test_a_failing_preview_stops_the_previews_not_the_read() -> None:
    def broken(path: Path, raw: object) -> Trace:
        raise ValueError("bad preview")

    watch = partial.PreviewWatch(lambda t: None, {"chrome": broken}, first_after=0.0)
    assert not watch.deliver("chrome", Path("x"), lambda: None, 10)
    assert watch.stopped and not watch.due(10)


def test_no_watch_no_preview() -> None:
    assert partial.current() is None and not partial.due(10**6)


# ------------------------------------------------------------------ readers with a watch
def _load_watched(path: Path) -> tuple[Trace, list[Trace]]:
    """A plain load of `path`, and the previews an eager watch got while loading it again
    (that load's result checked equal to the plain one)."""
    plain = moetrace.load(path, cache=False)
    previews: list[Trace] = []
    with partial.watching(_eager_watch(previews.append)):
        watched = moetrace.load(path, cache=False)
    _same(watched, plain)
    return plain, previews


def test_chrome_previews_are_growing_prefixes_and_the_result_is_unchanged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import moetrace.trace.formats.chrome.decode as decode

    path = tmp_path / "be.json"
    _be_json(path)
    monkeypatch.setattr(decode, "CHUNK", 4096)  # many pieces
    plain, previews = _load_watched(path)
    assert len(previews) >= 5
    counts = [p.events.height for p in previews]
    assert counts == sorted(counts) and counts[-1] < plain.events.height
    # Each preview holds the X slices of a prefix of the file, exactly as the whole one has
    # them; B/E pairs cut by the end of the prefix may differ (open there).
    xs = plain.events.filter(plain.events["name"].str.starts_with("x"))
    for p in previews:
        shown = p.events.filter(p.events["name"].str.starts_with("x"))
        assert 0 < shown.height < xs.height
        assert shown["name"].to_list() == xs["name"].head(shown.height).to_list()
        assert shown["ts"].to_list() == xs["ts"].head(shown.height).to_list()
    assert partial.current() is None  # the watch ends with the block


def test_pftrace_previews_are_balanced_prefixes_and_the_result_is_unchanged(
    tmp_path: Path,
) -> None:
    trace = synthetic_trace(ranks=2, events_per_lane=300, seed=4)
    path = tmp_path / "t.pftrace"
    trace.write(path)
    plain, previews = _load_watched(path)
    assert len(previews) >= 3
    for p in previews:
        # A preview's slices are slices of the whole trace (same lane, name, start, end).
        keys = ["name", "ts", "dur"]
        assert 0 < p.events.height < plain.events.height
        assert p.events.select(keys).join(plain.events.select(keys), on=keys).height == (
            p.events.height
        )


def test_only_files_above_the_size_threshold_are_previewed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import moetrace.trace.formats.chrome.decode as decode
    import moetrace.tui.loading as loading
    from moetrace.trace.options import LoadOptions

    path = tmp_path / "be.json"
    _be_json(path)
    _eager(monkeypatch)
    monkeypatch.setattr(decode, "CHUNK", 4096)
    plain = moetrace.load(path, cache=False)

    def shown_with(threshold: int) -> list[int]:
        """The `done` values `load_in_steps` shows with this size threshold (its result
        checked against the plain load)."""
        monkeypatch.setattr(loading, "PREVIEW_MIN_BYTES", threshold)
        calls: list[int] = []
        result = loading.load_in_steps(
            [path], [path], lambda t, done: calls.append(done), LoadOptions(cache=False)
        )
        _same(result, plain)
        return calls

    size = path.stat().st_size
    assert shown_with(size + 1) == []
    shown = shown_with(size)
    assert shown and set(shown) == {0}
    assert loading.last_preview_stats is not None
    assert loading.last_preview_stats[0] == len(shown)


def test_unclosed_begins_match_a_stack_walk() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        kinds: list[int] = []
        uuids: list[int] = []
        depth = {u: 0 for u in range(4)}
        for _ in range(int(rng.integers(0, 60))):
            u = int(rng.integers(0, 4))
            roll = rng.random()
            if roll < 0.15:
                kind = _INSTANT
            elif roll < 0.6 or depth[u] == 0:
                kind, depth[u] = _BEGIN, depth[u] + 1
            else:
                kind, depth[u] = _END, depth[u] - 1
            kinds.append(kind)
            uuids.append(u)
        expected: list[int] = []
        stacks: dict[int, list[int]] = {u: [] for u in range(4)}
        for row, (kind, u) in enumerate(zip(kinds, uuids, strict=True)):
            if kind == _BEGIN:
                stacks[u].append(row)
            elif kind == _END:
                stacks[u].pop()
        expected = sorted(r for rows in stacks.values() for r in rows)
        got = unclosed_begins(np.array(kinds, dtype=np.int64), np.array(uuids, dtype=np.uint64))
        assert got.tolist() == expected


def test_packet_boundaries_and_a_balanced_prefix(tmp_path: Path) -> None:
    from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised

    trace = synthetic_trace(ranks=1, events_per_lane=50, seed=5, with_deps=False)
    path = tmp_path / "t.pftrace"
    trace.write(path)
    data = path.read_bytes()
    head = packet_end(data, 0)
    assert 0 < head < len(data) and packet_end(data, 1) == -1
    assert packet_boundary(data, len(data)) == len(data)
    cut = packet_boundary(data, head + (len(data) - head) // 2, head)
    assert head < cut < len(data) and packet_end(data, cut) > cut
    assert read_vectorised(path, data[:cut]) is None  # B/E pairs cut in two: refused
    preview = read_vectorised(path, balanced_prefix(data, cut))
    assert preview is not None and 0 < preview.events.height < trace.events.height


# ------------------------------------------------------------------ the viewer
async def _until(pilot: Any, condition: Callable[[], bool], rounds: int = 3000) -> None:
    """Let the app run until `condition()` holds (bounded by rounds, not by a clock)."""
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.01)
    raise AssertionError("the app never got there")


def _drawn(app: MoetraceApp) -> bool:
    """Some visible lane of the preview has slices drawn (which lanes a prefix of the file
    holds depends on the writer's order)."""
    assert app.model is not None
    lanes = [row.key for row in app.timeline.rows if row.key[0] == "lane"]
    assert lanes
    return any(any(c in lane_text(app.timeline, key) for c in "▁▂▃▄▅▆▇█▌▐") for key in lanes[:20])


async def _preview_then_final(
    app: MoetraceApp, pilot: Any, gate: threading.Event, plain: Trace
) -> None:
    """Lanes drawn from a preview while the reader waits at the gate; then the plain load's
    trace, the view kept."""
    await pilot.pause()
    await _until(pilot, lambda: app.model is not None)
    assert app.load_progress is not None  # still loading
    assert app.trace is not None
    assert 0 < app.trace.events.height < plain.events.height
    assert "preview:" in app.sub_title and "events read so far" in app.sub_title
    assert _drawn(app)
    await pilot.press("w", "w")  # the user zooms while the file loads
    assert app.model is not None
    window = (app.model.origin + app.timeline.t0, app.model.origin + app.timeline.t1)
    gate.set()
    await _until(pilot, lambda: app.load_progress is None)
    await settle(app, pilot)
    assert app.trace is not None and app.model is not None
    _same(app.trace, plain)
    now = (app.model.origin + app.timeline.t0, app.model.origin + app.timeline.t1)
    assert now == pytest.approx(window)
    assert "preview" not in app.sub_title


async def test_viewer_draws_a_json_preview_before_the_load_ends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import moetrace.trace.formats.chrome.decode as decode

    trace = synthetic_trace(ranks=2, events_per_lane=150, seed=6)
    path = tmp_path / "t.json"
    trace.write(path)
    plain = moetrace.load(path, cache=False)
    _eager(monkeypatch)
    monkeypatch.setattr(decode, "CHUNK", 8192)
    gate = threading.Event()
    real = decode._decode_in_place
    pieces = [0]

    def slow_piece(*args: Any, **kwargs: Any) -> Any:
        pieces[0] += 1
        if pieces[0] > 3:  # three pieces in (and previewed), then the reader waits
            gate.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(decode, "_decode_in_place", slow_piece)
    app = MoetraceApp(paths=[path], metrics=False, loading={"cache": False})
    async with app.run_test(size=(140, 40)) as pilot:
        await _preview_then_final(app, pilot, gate, plain)


def _gated_pftrace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trace: Trace
) -> tuple[MoetraceApp, threading.Event, Trace]:
    """The viewer on `trace` written as .pftrace, previews eager and the whole-file read
    waiting at the returned gate (the previews read through their own binding); and the
    trace a plain load gives."""
    import moetrace.trace.formats.pftrace.read as pf_read

    path = tmp_path / "t.pftrace"
    trace.write(path)
    plain = moetrace.load(path, cache=False)
    _eager(monkeypatch)
    gate = threading.Event()
    from moetrace.trace.formats.pftrace.read_vectorised import decode_vectorised as real

    def slow_whole_read(p: Path, data: bytes) -> Any:
        gate.wait(60)
        return real(p, data)

    monkeypatch.setattr(pf_read, "decode_vectorised", slow_whole_read)
    return MoetraceApp(paths=[path], metrics=False, loading={"cache": False}), gate, plain


async def test_viewer_draws_a_pftrace_preview_before_the_load_ends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    trace = synthetic_trace(ranks=2, events_per_lane=150, seed=6)
    app, gate, plain = _gated_pftrace(monkeypatch, tmp_path, trace)
    async with app.run_test(size=(140, 40)) as pilot:
        await _preview_then_final(app, pilot, gate, plain)


async def test_quit_during_a_previewed_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl+C ends the viewer while a preview is shown and the reader still waits."""
    from moetrace.tui.loading import busy

    trace = synthetic_trace(ranks=1, events_per_lane=150, seed=8)
    app, gate, _ = _gated_pftrace(monkeypatch, tmp_path, trace)
    async with app.run_test(size=(100, 30)) as pilot:
        await _until(pilot, lambda: app.model is not None)
        assert app.load_progress is not None  # a preview, the load still running
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit and busy()  # closing although the load has not returned
    gate.set()


def test_a_pftrace_preview_spans_the_whole_trace(tmp_path: Path) -> None:
    """The first preview is a sample over the whole time span (not the file's first
    moments): runs of packets from the first event to the last, their slices exactly as the
    whole trace has them, on every rank."""
    from moetrace.trace.formats.pftrace.partial import spread_sample
    from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised
    from moetrace.trace.formats.pftrace.scan import packet_spans

    trace = synthetic_trace(ranks=4, events_per_lane=2000, seed=5)
    path = tmp_path / "t.pftrace"
    trace.write(path)
    data = path.read_bytes()
    whole = read_vectorised(path, data)
    assert whole is not None
    sample = read_vectorised(path, spread_sample(data, packet_spans(data), 0.05))
    assert sample is not None
    keys = ["track", "name", "ts", "dur"]
    assert sample.events.select(keys).join(whole.events.select(keys), on=keys).height == (
        sample.events.height
    )
    assert 0 < sample.events.height <= whole.events.height // 10  # ~5% of the packets
    w0, w1 = whole.window() or (0, 0)
    s0, s1 = sample.window() or (0, 0)
    assert s0 - w0 <= 0.05 * (w1 - w0) and w1 - s1 <= 0.05 * (w1 - w0)
    assert sorted(sample.ranks) == sorted(whole.ranks)
