"""Byte-identical outputs before/after a refactor: the same CLI commands on the same inputs,
run once with a base checkout's code and once with this one's, every output compared.

Inputs: sample traces the executor writes (`moetrace run` in .json, .json.gz and .pftrace,
`moetrace demo` small), every trace of ../shared/real_traces (each file alone, and the
multi-rank folders as one job), and the malformed inputs of tests/data/malformed (their
error lines and exit codes). Per input: `convert -o .json`, `convert -o .pftrace`, `metrics
--json`, then the exported .pftrace read back (`convert -o .json`, `metrics --json`).
Every command's exit code, stdout, stderr and written file is compared byte for byte; the
sample traces themselves (written by each side's executor) are compared too, and so are the
overflow lanes of 416 seeded layouts as the Chrome reader/writer and the .pftrace writer lay
them out (two implementations before, `trace.nesting.overflow_lanes` after).

Usage: python benchmarks/check_identical.py --base /tmp/base13 [--work DIR]
(--base: a checkout of the code before the change, e.g. `git worktree add /tmp/base13 c8d516c`)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
REAL = REPO.parent / "shared" / "real_traces"
MALFORMED = REPO / "tests" / "data" / "malformed"
TRACE_ENDINGS = (".json", ".json.gz", ".pftrace")

# Executor runs whose traces are inputs (and outputs: each side writes its own).
SAMPLE_RUNS = [
    ["run", "--ranks", "8", "--tokens", "256", "-o", "run_tile.json"],
    ["run", "--ranks", "8", "--tokens", "256", "-o", "run_tile.json.gz"],
    ["run", "--ranks", "8", "--tokens", "256", "-o", "run_tile.pftrace"],
    ["run", "--ranks", "4", "--tokens", "512", "--schedule", "chunked", "-o", "run_chunked.json"],
    [
        "demo",
        "--ranks",
        "8",
        "--tokens",
        "256",
        "--no-view",
        "--jobs",
        "1",
        "--out",
        "demo",
        "--format",
        "json",
    ],
]


def inputs() -> list[list[str]]:
    """Every input set (a list of files, several = one job), as absolute paths."""
    found: list[list[str]] = []
    if REAL.is_dir():
        files = sorted(p for p in REAL.rglob("*") if p.is_file() and p.name.endswith(TRACE_ENDINGS))
        found += [[str(p)] for p in files]
        for job in sorted(REAL.glob("torch_gloo_moe/*/")):
            ranks = sorted(str(p) for p in job.iterdir() if p.name.endswith(TRACE_ENDINGS))
            if len(ranks) > 1:
                found.append(ranks)
        ascend = sorted(str(p) for p in REAL.glob("ascend/level0__rank*_trace_view.json"))
        if len(ascend) > 1:
            found.append(ascend)
    found += [[str(p)] for p in sorted(MALFORMED.iterdir()) if p.suffix != ".py"]
    return found


def lane_cases() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Seeded (track, ts, dur) inputs for the overflow-lane layout: flat, nested, tied,
    zero-length, random overlaps, and staircases deeper than every lane cap (100 slices each
    overlapping the previous one partially)."""
    rng = np.random.default_rng(13)
    cases = []
    for case in range(400):
        n = int(rng.integers(1, 300))
        tracks = int(rng.integers(1, 6))
        span = int(rng.choice([5, 50, 5000]))
        track = rng.integers(0, tracks, n)
        ts = rng.integers(0, span, n)
        dur = rng.integers(0, max(2, span // int(rng.choice([1, 4, 40]))), n)
        if case % 5 == 0:
            dur[rng.random(n) < 0.3] = 0
        cases.append((track, ts, dur))
    for depth in (63, 64, 65, 100):
        i = np.arange(depth)
        cases.append((np.zeros(depth, np.int64), i, np.full(depth, 1000)))
        cases.append((i % 2, i, np.full(depth, 1000)))
    return [(t.astype(np.int64), s.astype(np.int64), d.astype(np.int64)) for t, s, d in cases]


def produce_lanes(out: Path) -> None:
    """Overflow lanes of `lane_cases` as the Chrome code and the .pftrace writer lay them out,
    with whichever implementation the code on sys.path has (two before, one after)."""
    try:
        from moetrace.trace.nesting import MAX_OVERFLOW_LANE, overflow_lanes

        def chrome(t: np.ndarray, s: np.ndarray, d: np.ndarray) -> list[np.ndarray]:
            return list(overflow_lanes(t, s, d, MAX_OVERFLOW_LANE))

        def pftrace(t: np.ndarray, s: np.ndarray, d: np.ndarray) -> np.ndarray:
            from moetrace.trace.formats.pftrace.layout import OVERFLOW_LEVELS

            return overflow_lanes(t, s, d, max_lane=OVERFLOW_LEVELS - 1)[0]
    except ImportError:  # the code before: two implementations
        from moetrace.trace.chrome_phases import assign_overflow_lanes  # type: ignore
        from moetrace.trace.pftrace_tracks import overflow_levels  # type: ignore

        def chrome(t: np.ndarray, s: np.ndarray, d: np.ndarray) -> list[np.ndarray]:
            return list(assign_overflow_lanes(t, s, d))

        def pftrace(t: np.ndarray, s: np.ndarray, d: np.ndarray) -> np.ndarray:
            return overflow_levels(t, s, d)  # type: ignore[no-any-return]

    chrome_out, pftrace_out = [], []
    for t, s, d in lane_cases():
        lane, depth = chrome(t, s, d)
        chrome_out += [lane.astype(np.int64), depth.astype(np.int64)]
        pftrace_out.append(pftrace(t, s, d).astype(np.int64))
    (out / "lanes.chrome.bin").write_bytes(b"".join(a.tobytes() + b"|" for a in chrome_out))
    (out / "lanes.pftrace.bin").write_bytes(b"".join(a.tobytes() + b"|" for a in pftrace_out))
    top = max(int(a.max()) for a in pftrace_out)
    (out / "lanes.max.txt").write_text(f"max pftrace lane {top}\n")


def produce(out: Path, sets: list[list[str]]) -> None:
    """Run every command with the code on sys.path; write each result under `out`."""
    from click.testing import CliRunner

    from moetrace.cli import main

    out.mkdir(parents=True, exist_ok=True)
    produce_lanes(out)
    os.chdir(out)
    runner = CliRunner()

    def record(tag: str, args: list[str]) -> None:
        result = runner.invoke(main, args)
        (out / f"{tag}.exit").write_text(f"{result.exit_code}\n")
        (out / f"{tag}.stdout").write_bytes(result.stdout_bytes)
        (out / f"{tag}.stderr").write_bytes(result.stderr_bytes or b"")

    samples = out / "samples"
    samples.mkdir(exist_ok=True)
    os.chdir(samples)
    for i, args in enumerate(SAMPLE_RUNS):
        record(f"../sample{i:02d}", args)
    os.chdir(out)
    sample_files = sorted(  # relative: both sides' outputs then name the same paths
        str(p.relative_to(out))
        for p in samples.rglob("*")
        if p.is_file() and p.name.endswith(TRACE_ENDINGS)
    )
    all_sets = [[f] for f in sample_files] + sets
    for i, files in enumerate(all_sets):
        tag = f"in{i:03d}"
        (out / f"{tag}.inputs").write_text("\n".join(files))
        record(f"{tag}.json", ["convert", *files, "-o", f"{tag}.out.json"])
        record(f"{tag}.pftrace", ["convert", *files, "-o", f"{tag}.out.pftrace"])
        record(f"{tag}.metrics", ["metrics", "--json", *files])
        if (out / f"{tag}.out.pftrace").exists():
            back = [f"{tag}.out.pftrace"]
            record(f"{tag}.back.json", ["convert", *back, "-o", f"{tag}.back.out.json"])
            record(f"{tag}.back.metrics", ["metrics", "--json", *back])


def run_side(code: Path, out: Path, sets_file: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out.parent.mkdir(parents=True, exist_ok=True)
    no_cache = out.parent / f"{out.name}.no-cache"  # a file: the cache can never be used
    no_cache.write_text("")
    env["XDG_CACHE_HOME"] = str(no_cache)
    cmd = [sys.executable, __file__, "--produce", str(out), "--sets", str(sets_file)]
    subprocess.run(cmd, env=env, check=True)


def compare(a: Path, b: Path) -> tuple[int, list[str]]:
    """(number of files compared, names that differ or exist on one side only)."""
    names_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    names_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    differ = sorted(str(n) + " (one side only)" for n in names_a ^ names_b)
    common = sorted(names_a & names_b)
    differ += [str(n) for n in common if (a / n).read_bytes() != (b / n).read_bytes()]
    return len(common), differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="checkout of the code before the change")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--produce", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--sets", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        produce(args.produce, json.loads(args.sets.read_text()))
        return
    if args.base is None:
        parser.error("--base is required")
    work = args.work or Path(tempfile.mkdtemp(prefix="check_identical-"))
    work.mkdir(parents=True, exist_ok=True)
    sets = inputs()
    sets_file = work / "sets.json"
    sets_file.write_text(json.dumps(sets))
    # Both sides write under the same directory name (outputs may name their own paths).
    results = {}
    for side, code in (("base", args.base.resolve()), ("this", REPO)):
        out = work / side / "out"
        run_side(code, out, sets_file)
        results[side] = out
    n, differ = compare(results["base"], results["this"])
    n_inputs = len(sets) + sum(1 for p in (results["this"] / "samples").rglob("*") if p.is_file())
    print(f"inputs: {n_inputs} trace sets ({len(sets)} given + executor samples)")
    print(f"files compared: {n}; identical: {n - len([d for d in differ if 'one side' not in d])}")
    if differ:
        print(f"DIFFERENT ({len(differ)}):")
        for name in differ:
            print(f"  {name}")
        sys.exit(1)
    print("all identical")


if __name__ == "__main__":
    main()
