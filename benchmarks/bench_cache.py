"""Columnar cache benchmark: first load (parse + write the cache entry) vs a cached reopen.

For each of bench_load's three seeded 1M-event shapes (few: 8 Kineto-like threads; many:
8 ranks x 64 cores = 512 tracks; deep: 12-deep CPU stacks), points XDG_CACHE_HOME at a
temporary directory, then in fresh interpreters (imports untimed, as in bench_load): (1)
`load(P, cache=False)`, the parse alone; (2) the first `load(P)`, parse + writing the entry;
(3) `load(P)` again, read from the cache. Rounds are interleaved; every figure is printed as
the range over --repeat rounds, and the ratio cached / first load is taken per round. Prints
PASS/FAIL against issue 25's target: cached reopen <= 0.05x the first load in every round on
every shape.

Run: python benchmarks/bench_cache.py [--events 1000000] [--repeat 3] [--shapes few,many,deep]
     [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import SHAPES

TARGET = 0.05

TIMER = """
import sys, time
import moetrace, moetrace.trace.io, moetrace.trace.formats.chrome.read, moetrace.trace.cache
P = sys.argv[1]
t0 = time.perf_counter()
t = moetrace.trace.io.load(P, cache={cache})
print(time.perf_counter() - t0, t.events.height)
"""


def timed_load(path: Path, cache: bool, env: dict[str, str]) -> tuple[float, int]:
    """(seconds, events) of one `load` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", TIMER.format(cache=cache), str(path)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    secs, n = out.stdout.split()
    return float(secs), int(n)


def _span(values: list[float], fmt: str = "{:.3f}") -> str:
    """'lo–hi' of a list of figures (the range over rounds)."""
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def bench_shape(path: Path, repeat: int, cache_root: Path) -> bool:
    """Time parse / first load / cached reopen of one file; True when every round passes."""
    old = path.stat().st_mtime_ns - 10_000_000_000  # older than the cache's racy window
    os.utime(path, ns=(old, old))
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_root)}
    entry_dir = cache_root / "moetrace"
    parse, first, cached = [], [], []
    n = 0
    for _ in range(max(repeat, 1)):
        for entry in entry_dir.glob("*"):
            entry.unlink()
        parse.append(timed_load(path, False, env)[0])
        first.append(timed_load(path, True, env)[0])
        secs, n = timed_load(path, True, env)
        cached.append(secs)
    entry_bytes = sum(p.stat().st_size for p in entry_dir.glob("*"))
    ratios = [c / f for c, f in zip(cached, first, strict=True)]
    size = path.stat().st_size
    print(f"  file {size / 1e6:.1f} MB, {n:,} events; cache entry {entry_bytes / 1e6:.1f} MB")
    print(f"  parse only (--no-cache)     {_span(parse, '{:.2f}')} s")
    print(f"  first load (parse + write)  {_span(first, '{:.2f}')} s")
    print(f"  cached reopen               {_span(cached)} s")
    print(f"  cached / first load         {_span(ratios)}x (target <= {TARGET})")
    return max(ratios) <= TARGET


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="few,many,deep", help="comma list of: few, many, deep")
    parser.add_argument(
        "--keep", type=Path, help="write the generated traces here (and reuse them)"
    )
    opts = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for shape in opts.shapes.split(","):
            path = folder / f"cache_{shape}_{opts.events}.json"
            if not path.exists():
                SHAPES[shape](path, opts.events)
            print(f"{shape}:")
            ok &= bench_shape(path, opts.repeat, Path(tmp) / f"cache-{shape}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
