"""Viewer speed, headless: first frame after the command starts, and key -> repaint while a
256-rank analysis runs.

1. First frame: a fresh Python process runs `moetrace view`'s code path (the CLI, the app,
   the load in the background) on a 1M-event trace written as .json.gz and as .pftrace; the
   time from process start to the first frame on screen (the load progress). Target ≤ 1 s.
   Then the first lanes (a preview of the events read so far) and the load's end, and the
   same load without previews (a second fresh process): with/without ≤ 1.15 (wall clock, and
   the process's CPU time, steadier on a shared machine). The same events as 8 rank files:
   the first rank's lanes are drawn before the last file is read.
2. Keys during analysis: a 256-rank trace is shown and 30 zoom/pan keys are pressed while the
   analysis thread is still running; median key press -> lane repaint. Target ≤ 50 ms.
3. Big traces (issue 25 item 4), each in a fresh viewer process with the metrics on: a 2M-event
   256-rank .pftrace and a 1M-event 8-rank .json.gz (both from the synthetic builder,
   moetrace.testing.synthetic, written by Trace.write; not `moetrace run` output): time to
   the first useful frame (the first lanes: a preview or the whole trace), to the load's end
   and to the metrics, the CPU seconds of the viewer process and of its analysis process, and
   the peak RSS of each (the viewer's ru_maxrss; the analysis process's own VmHWM, which it
   reports: a child's ru_maxrss would start at the viewer's); the sum bounds the job's.
   PASS: first frame ≤ 5 s, metrics ≤ 15 s, peak RSS ≤ 1.5 GB (quiet-machine targets: on a
   loaded box compare the CPU seconds).
Prints one line per figure and PASS or FAIL last. Times are wall clock on a shared machine:
the load average is printed with them.
Run: /work/venv/bin/python benchmarks/bench_tui.py [--events N] [--ranks R] [--big-only]
     [--big-pftrace-events N] [--big-json-events N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

KEYS = ["w", "d", "s", "a"] * 8  # each key repaints (net zoom 0: never rate-limited)
FIRST_FRAME_S = 1.0
REPAINT_MS = 50.0

# Run in a fresh interpreter the way `moetrace view` starts (the CLI, then the app): start the
# viewer headless on argv[1:] and print the wall-clock times of the first frame (the screen's
# first compositor update), of the first lanes drawn and of the load's end.
CHILD = r"""
import asyncio, os, sys, time
import moetrace.cli
from moetrace.tui.app import MoetraceApp
if os.environ.get("BENCH_NO_PREVIEWS"):  # the same load without previews of a big file
    import moetrace.tui.loading
    moetrace.tui.loading.PREVIEW_MIN_BYTES = 1 << 62

async def main():
    app = MoetraceApp(paths=sys.argv[1:], metrics=False)
    async with app.run_test(size=(160, 45)) as pilot:
        first = lanes = None
        while True:
            if first is None and app.screen._compositor is not None and app._driver is not None:
                if app.timeline.placeholder or app.timeline.lane_paints:
                    first, cpu = time.time(), time.process_time()
            if lanes is None and app.timeline.lane_paints:
                lanes, ranks = time.time(), len(app.model.ranks)
                first_events = app.trace.events.height
            if lanes is not None and app.load_progress is None and app.trace is not None:
                loaded, load_cpu = time.time(), time.process_time()
                break
            await asyncio.sleep(0.005)
        import moetrace.tui.loading as loading
        shown, spent = loading.last_preview_stats or (0, 0.0)
        print(f"{first:.6f} {lanes:.6f} {loaded:.6f} {app.trace.events.height} {cpu:.3f} "
              f"{ranks} {len(app.trace.ranks)} {first_events} {load_cpu:.3f} {shown} {spent:.3f}",
              flush=True)
        app.exit()

asyncio.run(main())
import os; os._exit(0)
"""


# The big-trace run: like CHILD with the metrics on; prints the seconds (wall clock) of the
# first lanes, the load's end and the metrics, the events of the first lanes, the CPU seconds
# of this process and of its children, the peak RSS (bytes) of this process and of the
# analysis process (its own VmHWM: a child's ru_maxrss starts at its parent's), and the CPU
# seconds of this process at the first lanes.
CHILD_BIG = r"""
import asyncio, resource, sys, time
import moetrace.cli
from moetrace.tui.app import MoetraceApp

async def main():
    app = MoetraceApp(paths=sys.argv[1:], metrics=True)
    async with app.run_test(size=(160, 45)) as pilot:
        lanes = loaded = metrics = None
        first_events = 0
        while metrics is None:
            now = time.time()
            if lanes is None and app.timeline.lane_paints:
                lanes, first_events = now, app.trace.events.height
                lanes_cpu = time.process_time()
            if loaded is None and lanes is not None and app.load_progress is None:
                loaded = now
            if loaded is not None and app.report is not None:
                metrics = now
            await asyncio.sleep(0.02)
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        import moetrace.tui.loading as loading
        analysis_rss = loading.last_analysis_rss  # its own VmHWM (0: analysed in-process)
        print(f"{lanes:.6f} {loaded:.6f} {metrics:.6f} {first_events} "
              f"{app.trace.events.height} {me.ru_utime + me.ru_stime:.3f} "
              f"{kids.ru_utime + kids.ru_stime:.3f} {me.ru_maxrss * 1024} "
              f"{analysis_rss} {lanes_cpu:.3f}", flush=True)
        app.exit()

asyncio.run(main())
import os; os._exit(0)
"""
FIRST_USEFUL_S, METRICS_S, PEAK_RSS = 5.0, 15.0, 1.5e9


def fresh_viewer(
    code: str, paths: list[Path], cache_dir: Path, extra: dict[str, str] | None = None
) -> tuple[float, list[str]]:
    """Run `code` on `paths` in a fresh interpreter with a fresh columnar cache at
    `cache_dir` (bytecode compiled first, as in an installed copy: this sandbox sets
    PYTHONDONTWRITEBYTECODE); (its start time, its stdout's words)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(cache_dir)
    env.update(extra or {})
    subprocess.run([sys.executable, "-c", "import moetrace.tui.app"], env=env, check=True)
    start = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, paths)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    return start, out


def big_trace(path: Path, cache_dir: Path) -> bool:
    """The viewer with metrics on `path` in a fresh process (fresh cache); prints one line,
    returns whether it met the targets."""
    start, out = fresh_viewer(CHILD_BIG, [path], cache_dir)
    lanes, loaded, metrics = (float(x) - start for x in out[:3])
    first_events, events = int(out[3]), int(out[4])
    cpu, kids_cpu, rss, kids_rss = float(out[5]), float(out[6]), int(out[7]), int(out[8])
    lanes_cpu = float(out[9])
    ok = lanes <= FIRST_USEFUL_S and metrics <= METRICS_S and rss + kids_rss <= PEAK_RSS
    print(
        f"{path.name}: {events:,} events, {path.stat().st_size / 1e6:.0f} MB: first lanes at "
        f"{lanes:.1f} s ({first_events:,} events: {'preview' if first_events < events else 'all'})"
        f" (target ≤ {FIRST_USEFUL_S:.0f} s; {lanes_cpu:.1f} s of CPU), load done at "
        f"{loaded:.1f} s, metrics at "
        f"{metrics:.1f} s (target ≤ {METRICS_S:.0f} s); CPU {cpu:.1f} s viewer + {kids_cpu:.1f} s"
        f" analysis; peak RSS {rss / 1e9:.2f} GB viewer + {kids_rss / 1e9:.2f} GB analysis = "
        f"{(rss + kids_rss) / 1e9:.2f} GB (target ≤ {PEAK_RSS / 1e9:.1f} GB; load average "
        f"{os.getloadavg()[0]:.1f}) {'PASS' if ok else 'FAIL'}"
    )
    return ok


def big_traces(pftrace_events: int, json_events: int) -> bool:
    """Item 3 of the docstring: the 2M-event .pftrace and the 1M-event .json.gz."""
    from moetrace.testing.synthetic import synthetic_trace

    ok = True
    lanes = 5
    with tempfile.TemporaryDirectory() as tmp:
        for suffix, ranks, events in (
            (".pftrace", 256, pftrace_events),
            (".json.gz", 8, json_events),
        ):
            trace = synthetic_trace(
                ranks=ranks, events_per_lane=events // (ranks * lanes), seed=0, with_deps=False
            )
            path = Path(tmp) / f"big{suffix}"
            trace.write(path)
            del trace
            ok &= big_trace(path, Path(tmp) / f"cache-big{suffix}")
            path.unlink()
    return ok


class Frame(NamedTuple):
    """Seconds after the process started: first frame, first lanes, load done; events; CPU
    seconds to the first frame; ranks in the first lanes and in the whole job; events in the
    first lanes (a preview or the first rank files: fewer than `events`)."""

    first: float
    lanes: float
    loaded: float
    events: int
    cpu: float
    first_ranks: int
    ranks: int
    first_events: int
    load_cpu: float  # CPU seconds of the process (all threads) until the load was done
    previews: int  # previews of one big file shown while it loaded
    preview_s: float  # seconds the loader spent building and posting them


def first_frame(paths: list[Path], cache_dir: Path, previews: bool = True) -> Frame:
    """Start the viewer on `paths` in a fresh process (a fresh columnar cache: a first load;
    `previews` False: one big file shows nothing until it is in, as before the previews).
    Bytecode is cached as in an installed copy (this sandbox sets PYTHONDONTWRITEBYTECODE,
    which would recompile moetrace on every start)."""
    start, out = fresh_viewer(
        CHILD, paths, cache_dir, {} if previews else {"BENCH_NO_PREVIEWS": "1"}
    )
    return Frame(
        float(out[0]) - start,
        float(out[1]) - start,
        float(out[2]) - start,
        int(out[3]),
        float(out[4]),
        int(out[5]),
        int(out[6]),
        int(out[7]),
        float(out[8]),
        int(out[9]),
        float(out[10]),
    )


async def wait_paint(app: object, before: int, timeout: float = 5.0) -> float:
    """Wait until the timeline has drawn lane rows after `before`; return the paint time."""
    tl = app.timeline  # type: ignore[attr-defined]
    deadline = time.perf_counter() + timeout
    while tl.lane_paints <= before and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    return float(tl.last_paint)


async def keys_alone(ranks: int, count: int) -> list[float]:
    """Baseline on the same trace with no analysis running: latencies (ms) of `count` keys."""
    from moetrace.testing.synthetic import synthetic_trace
    from moetrace.tui.app import MoetraceApp

    app = MoetraceApp(synthetic_trace(ranks=ranks, events_per_lane=200, seed=0), metrics=False)
    out: list[float] = []
    async with app.run_test(size=(208, 45)) as pilot:
        await wait_paint(app, 0, timeout=60)
        for k in range(count):
            before = app.timeline.lane_paints
            t = time.perf_counter()
            await pilot.press(KEYS[k % len(KEYS)])
            out.append((await wait_paint(app, before) - t) * 1000)
    return out


async def keys_during_analysis(ranks: int) -> tuple[list[float], int, int, float]:
    """Latencies (ms) of the keys pressed while the analysis ran; keys in total; events;
    analysis time (s)."""
    from moetrace.testing.synthetic import synthetic_trace
    from moetrace.tui.app import MoetraceApp
    from moetrace.tui.loading import busy

    trace = synthetic_trace(ranks=ranks, events_per_lane=200, seed=0)
    app = MoetraceApp(trace)
    during: list[float] = []
    async with app.run_test(size=(208, 45)) as pilot:
        await wait_paint(app, 0, timeout=60)
        started = time.perf_counter()
        while not busy() and app.report is None:  # the analysis starts after the first paint
            await asyncio.sleep(0.001)
        pressed = 0
        while busy() and pressed < 200:
            key = KEYS[pressed % len(KEYS)]
            before = app.timeline.lane_paints
            t = time.perf_counter()
            await pilot.press(key)
            painted = await wait_paint(app, before)
            pressed += 1
            if busy():
                during.append((painted - t) * 1000)
        while busy():
            await asyncio.sleep(0.01)
        analysis = time.perf_counter() - started
    return during, pressed, trace.events.height, analysis


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--big-only", action="store_true", help="only the big traces (3.)")
    parser.add_argument("--big-pftrace-events", type=int, default=2_000_000)
    parser.add_argument("--big-json-events", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.big_only:
        print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        ok = big_traces(args.big_pftrace_events, args.big_json_events)
        print("PASS" if ok else "FAIL")
        return
    import polars as pl

    from moetrace.testing.synthetic import synthetic_trace
    from moetrace.trace.model import Trace

    ok = True
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ranks, lanes = 8, 5
    trace = synthetic_trace(
        ranks=ranks, events_per_lane=args.events // (ranks * lanes), seed=0, with_deps=False
    )
    with tempfile.TemporaryDirectory() as tmp:
        for suffix in (".json.gz", ".pftrace"):
            path = Path(tmp) / f"bench{suffix}"
            trace.write(path)
            f = first_frame([path], Path(tmp) / f"cache{suffix}")
            plain = first_frame([path], Path(tmp) / f"cache-plain{suffix}", previews=False)
            print(
                f"{suffix:9s} {f.events} events, {path.stat().st_size / 1e6:.0f} MB: first frame "
                f"{f.first * 1000:.0f} ms after process start (target ≤ {FIRST_FRAME_S * 1000:.0f}"
                f" ms; {f.cpu * 1000:.0f} ms of CPU); first lanes at {f.lanes:.1f} s "
                f"({f.first_events} events read so far); lanes drawn at {f.loaded:.1f} s "
                f"(load done)"
            )
            print(
                f"{'':9s} without previews: lanes drawn at {plain.loaded:.1f} s (load done); "
                f"load with previews / without {f.loaded / plain.loaded:.2f} (target ≤ 1.15), "
                f"CPU {f.load_cpu:.1f} / {plain.load_cpu:.1f} s = "
                f"{f.load_cpu / plain.load_cpu:.2f}; {f.previews} preview(s) cost the loader "
                f"{f.preview_s:.2f} s ({100 * f.preview_s / f.loaded:.0f}% of the load)"
            )
            ok &= f.first <= FIRST_FRAME_S and f.first_events < f.events
        # The same events as one .json.gz per rank: lanes appear as the rank files arrive.
        files = []
        for rank in range(ranks):
            part = trace.tracks.filter(pl.col("rank") == rank)
            events = trace.events.filter(pl.col("track").is_in(part["track"].implode()))
            files.append(Path(tmp) / f"rank{rank}.json.gz")
            Trace(events, part, trace.deps.clear(), trace.counters.clear(), trace.meta).write(
                files[-1]
            )
        f = first_frame(files, Path(tmp) / "cache-ranks")
        print(
            f"{ranks} rank files, {f.events} events: first frame {f.first * 1000:.0f} ms; "
            f"first lanes ({f.first_ranks} of {f.ranks} ranks) at {f.lanes:.1f} s, "
            f"all {f.ranks} ranks at {f.loaded:.1f} s"
        )
        ok &= f.first <= FIRST_FRAME_S and f.first_ranks < f.ranks
    during, pressed, n, analysis = asyncio.run(keys_during_analysis(args.ranks))
    if during:
        median = statistics.median(during)
        print(
            f"{args.ranks} ranks, {n} events: {len(during)} of {pressed} keys pressed while the "
            f"analysis ran ({analysis:.1f} s): key -> repaint median {median:.1f} ms, "
            f"p90 {sorted(during)[int(0.9 * len(during))]:.1f} ms, max {max(during):.1f} ms "
            f"(target median ≤ {REPAINT_MS:.0f} ms)"
        )
        ok &= median <= REPAINT_MS
        alone = asyncio.run(keys_alone(args.ranks, pressed))
        print(
            f"the same keys with no analysis running: median {statistics.median(alone):.1f} ms "
            f"(ratio during/alone {median / statistics.median(alone):.2f})"
        )
    else:
        print(f"the analysis ended ({analysis:.1f} s) before a key could be measured ({pressed})")
        ok = False
    ok &= big_traces(args.big_pftrace_events, args.big_json_events)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
