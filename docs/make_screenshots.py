"""Regenerate the viewer screenshots in docs/screenshots/ (PNG) from `app.save_screenshot`.

Runs the app headless on seeded traces, presses the keys of each scene, saves an SVG and
turns it into a PNG with rsvg-convert (`apt-get install librsvg2-bin`). Deterministic: same
traces, same keys, metrics finished before each picture.
Run: /work/venv/bin/python docs/make_screenshots.py
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from moetrace.testing.synthetic import synthetic_trace
from moetrace.trace.model import Trace
from moetrace.tui.app import MoetraceApp

OUT = Path(__file__).resolve().parent / "screenshots"
SIZE = (160, 44)
PNG_WIDTH = 1600


async def select_on_path(app: MoetraceApp, pilot: Any) -> None:
    """Select an event on the critical path of rank 0 and zoom in a little around it."""
    if app.overlays is not None and len(app.overlays.cp_events) > 4:
        app.timeline.select_event(int(app.overlays.cp_events[4]))
    await pilot.pause()


def executor_trace() -> Trace | None:
    try:
        from moetrace.executor.run import simulate
    except ImportError:
        return None
    return simulate(ranks=32, tokens=256, schedule="tile", seed=0)


Prepare = Callable[[MoetraceApp, Any], Awaitable[None]]
Scene = tuple[str, Callable[[], Trace | None], Prepare | None, list[str]]
SMALL = (80, 24)  # scenes shot at this size (the side pane folded away)
WIDE = (250, 70)  # a big terminal: side panes open, long labels
SIZES = {"small_80x24": SMALL, "wide_250x70": WIDE}
NO_COLOR_SCENES = {"no_color"}
SCENES: list[Scene] = [
    ("small_80x24", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["w", "w"]),
    ("no_color", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["c", "x", "i", "w"]),
    ("main", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["w"]),
    ("wide_250x70", lambda: synthetic_trace(ranks=8, seed=1), select_on_path, ["w", "c"]),
    ("critical_path", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["w", "c"]),
    ("idle_gaps", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["w", "i"]),
    ("exposed_comm", lambda: synthetic_trace(ranks=3, seed=1), select_on_path, ["w", "x"]),
    ("critical_path_table", lambda: synthetic_trace(ranks=3, seed=1), None, ["1"]),
    ("help", lambda: synthetic_trace(ranks=3, seed=1), None, ["question_mark"]),
    ("many_ranks_executor", executor_trace, None, ["c"]),
]


def svg_to_png(svg: Path, png: Path, columns: int = SIZE[0]) -> None:
    # Keep leading spaces (the lane tree's indentation) in renderers that collapse them.
    text = re.sub(r"<text ", '<text xml:space="preserve" ', svg.read_text(encoding="utf-8"))
    svg.write_text(text, encoding="utf-8")
    width = PNG_WIDTH * columns // SIZE[0]  # the same pixels per column at every size
    subprocess.run(["rsvg-convert", "-w", str(width), str(svg), "-o", str(png)], check=True)


async def settle(app: MoetraceApp, pilot: Any) -> None:
    """Until the workers and the viewer's analysis thread are done."""
    from moetrace.tui.loading import busy

    await pilot.pause()
    await app.workers.wait_for_complete()
    while busy():
        await asyncio.sleep(0.01)
    await pilot.pause()


async def shoot(name: str, trace: Trace, before: Any, keys: list[str], tmp: Path) -> Path:
    if name in NO_COLOR_SCENES:
        os.environ["NO_COLOR"] = "1"
    else:
        os.environ.pop("NO_COLOR", None)
    app = MoetraceApp(trace, title=f"{name.replace('_', ' ')}")
    async with app.run_test(size=SIZES.get(name, SIZE)) as pilot:
        await settle(app, pilot)
        if before is not None:
            await before(app, pilot)
        await pilot.press(*keys)
        await pilot.pause()
        svg = Path(app.save_screenshot(filename=f"{name}.svg", path=str(tmp)))
    png = OUT / f"{name}.png"
    svg_to_png(svg, png, SIZES.get(name, SIZE)[0])
    return png


def main() -> int:
    if shutil.which("rsvg-convert") is None:
        print("rsvg-convert not found: apt-get install -y librsvg2-bin", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, make, before, keys in SCENES:
            trace = make()
            if trace is None:
                print(f"skip {name}: executor not available")
                continue
            png = asyncio.run(shoot(name, trace, before, keys, Path(tmp)))
            print(f"wrote {png.relative_to(OUT.parent.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
