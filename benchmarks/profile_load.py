"""Where the CPU of a Chrome JSON load goes, per stage and per shape (issue 25).

Generates the three shapes of `bench_load.py` (few / many / deep) at --events events (default
300k: a profile needs no 1M-event file), loads each once per --repeat in a fresh interpreter
under cProfile with a CPU clock (process time: all threads, Polars' own included; steadier than
wall time on a loaded box) and prints the CPU seconds of the load's stages, best run by total:

  msgspec decode   msgspec's decode of the pieces into `fast.LeanEvent` structs (the part
                   the args-Raw baseline also pays);
  piece columns    the rest of `fast.LeanColumns.add`: per-field Python lists, joined raw
                   texts, string Series, freeing the structs;
  batch columns    `fast.LeanColumns.finish`: splitting and parsing the joined texts;
  build            `chrome.build.build`: slices, threads, overflow lanes, flow binding;
  flavor           `flavors.interpret`: kinds, Kineto links;
  other            the rest of `moetrace.load` (reading, conform, metadata).

Run: python benchmarks/profile_load.py [--events 300000] [--repeat 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import generate, generate_deep, generate_many_tracks

REPO = Path(__file__).resolve().parent.parent

STAGES = {
    # stage: (file name suffix, function name) whose cumulative CPU time it is
    "total": ("trace/io.py", "load"),
    "decode": ("", "<method 'decode' of 'msgspec.json.Decoder' objects>"),
    "add": ("chrome/fast.py", "add"),
    "batch columns": ("chrome/fast.py", "finish"),
    "build": ("chrome/build.py", "build"),
    "flavor": ("flavors/__init__.py", "interpret"),
}

CHILD = """
import cProfile, json, pstats, sys, time
import moetrace, moetrace.trace.io, moetrace.trace.formats.chrome.read
profile = cProfile.Profile(time.process_time)
profile.enable()
moetrace.load(sys.argv[1], cache=False)
profile.disable()
stages = json.loads(sys.argv[2])
out = {name: 0.0 for name in stages}
for (path, _line, func), (_cc, _nc, _tt, cum, _callers) in pstats.Stats(profile).stats.items():
    for name, (suffix, wanted) in stages.items():
        if func == wanted and path.endswith(suffix):
            out[name] += cum
print(json.dumps(out))
"""


def profile_once(path: Path) -> dict[str, float]:
    """CPU seconds per stage of one load of `path` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), json.dumps(STAGES)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    cpu: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return cpu


def row(shape: str, cpu: dict[str, float]) -> str:
    """One table line: CPU seconds per stage (decode counted once: inside `add`)."""
    piece = cpu["add"] - cpu["decode"]
    known = cpu["add"] + cpu["batch columns"] + cpu["build"] + cpu["flavor"]
    cells = [
        cpu["decode"],
        piece,
        cpu["batch columns"],
        cpu["build"],
        cpu["flavor"],
        cpu["total"] - known,
        cpu["total"],
    ]
    return f"{shape:6s}" + "".join(f"{c:10.3f}" for c in cells)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--events", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=2, help="loads per shape (best kept)")
    parser.add_argument("--keep", type=Path, help="directory to write the traces to (and reuse)")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="moetrace-profile-"))
    folder.mkdir(parents=True, exist_ok=True)
    makers = {"few": generate, "many": generate_many_tracks, "deep": generate_deep}
    print(
        f"CPU seconds per stage, {args.events:,} events, best of {args.repeat}\n"
        f"{'shape':6s}{'decode':>10s}{'piece':>10s}{'batch':>10s}{'build':>10s}"
        f"{'flavor':>10s}{'other':>10s}{'total':>10s}"
    )
    for shape, make in makers.items():
        path = folder / f"profile_{shape}_{args.events}.json"
        if not path.exists():
            make(path, args.events)
        runs = [profile_once(path) for _ in range(args.repeat)]
        print(row(shape, min(runs, key=lambda cpu: cpu["total"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
