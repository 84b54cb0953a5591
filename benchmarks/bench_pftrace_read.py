"""Reading .pftrace vs reading Chrome JSON of the same trace, on every bench_load shape (issue
25 item 2: pftrace <= 1x the JSON load, peak RSS <= 2x the .pftrace file).

Shapes (--shapes): bench_load's few (8 Kineto-like threads), many (512 tracks), deep (12-deep
stacks), and wide (5000 tracks: 50 ranks x 100 cores of back-to-back tiles, as `many`). Each
is generated (--events, seeded), loaded once and written by moetrace as Chrome JSON and as
.pftrace (same Trace). Then, in interleaved rounds (--repeat), each file is read by
`load(P, cache=False)` in a fresh interpreter (imports untimed), which reports its CPU
seconds (time.process_time: every thread of the process, Polars' and numpy's included), its
wall seconds and its peak RSS (ru_maxrss, imports included; also the growth above the
imports' peak, ~70 MB, printed for information). With --base DIR (a checkout
before a change, e.g. `git archive main | tar -x -C /tmp/base`) every round also reads the
.pftrace with that checkout: before and after in the same run.

Reported figure: CPU seconds (the box may be shared: wall time waits for other processes'
cores; CPU time does not), best of the rounds, with the range over the rounds; wall time is
printed beside it. Per shape: pftrace / JSON (best against best, and the range of the rounds'
own ratios), peak RSS / .pftrace file, and PASS/FAIL against <= 1x and <= 2x.

Run: python benchmarks/bench_pftrace_read.py [--events 1000000] [--repeat 3]
     [--shapes few,many,deep,wide] [--base DIR] [--keep DIR] [--slow]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import SHAPES, generate_many_tracks

TIMER = """
import resource, sys, time
import moetrace.trace.io, moetrace.trace.formats.chrome.read, moetrace.trace.formats.pftrace.write
from moetrace.trace.formats.pftrace import read_vectorised as pftrace_vec
from moetrace.trace.formats.pftrace.read_packets import read_slow
from pathlib import Path
P = Path(sys.argv[1])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
c0, t0 = time.process_time(), time.perf_counter()
if sys.argv[2] == "slow":
    t = read_slow(P, P.read_bytes())
else:
    t = moetrace.trace.io.load(P, cache=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
print(cpu, wall, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, before)
"""

SIDES = (".json", ".pftrace", "--base .pftrace")


def generate_wide(path: Path, n_events: int, seed: int = 7) -> None:
    """`many` with 5000 tracks: 50 ranks (pids) x 100 cores (tids) of back-to-back tiles."""
    generate_many_tracks(path, n_events, seed, ranks=50, cores=100)


GENERATORS = {**SHAPES, "wide": generate_wide}


def timed(
    path: Path, mode: str = "load", code: Path | None = None
) -> tuple[float, float, int, int]:
    """(CPU seconds, wall seconds, peak RSS, peak RSS of the imports, in bytes) of one read of
    `path` in a fresh interpreter, with the moetrace of checkout `code` when given."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    out = subprocess.run(
        [sys.executable, "-c", TIMER, str(path), mode],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,  # not a checkout: `-c` puts the working directory first on sys.path
    )
    cpu, wall, rss, imports = out.stdout.split()[:4]
    return float(cpu), float(wall), int(rss), int(imports)


def files(folder: Path, shape: str, events: int) -> tuple[Path, Path]:
    """The shape's trace as moetrace writes it in Chrome JSON and in .pftrace (made once, in a
    child process: a child's ru_maxrss starts at its parent's, so this process stays small)."""
    as_json = folder / f"{shape}_{events}.json"
    as_pftrace = folder / f"{shape}_{events}.pftrace"
    if not (as_json.exists() and as_pftrace.exists()):
        here = str(Path(__file__).resolve().parent)
        code = f"import sys; sys.path.insert(0, {here!r}); import bench_pftrace_read as b; "
        code += f"b.make({shape!r}, {events}, {str(folder)!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
    return as_json, as_pftrace


def make(shape: str, events: int, folder: str) -> None:
    """Generate the shape's source trace, load it and write it as Chrome JSON and .pftrace."""
    from moetrace.trace.io import load, write_trace

    source = Path(folder) / f"source_{shape}.json"
    GENERATORS[shape](source, events)
    trace = load(source, cache=False)
    write_trace(trace, Path(folder) / f"{shape}_{events}.json", force=True)
    write_trace(trace, Path(folder) / f"{shape}_{events}.pftrace", force=True)
    source.unlink()


def _span(values: list[float], unit: str, fmt: str = ".2f") -> str:
    return f"{min(values):{fmt}}{unit} ({min(values):{fmt}}-{max(values):{fmt}})"


def run_shape(shape: str, folder: Path, opts: argparse.Namespace) -> tuple[bool, list[str]]:
    """Measure one shape: its lines, and whether both targets hold."""
    as_json, as_pftrace = files(folder, shape, opts.events)
    json_size, pf_size = as_json.stat().st_size, as_pftrace.stat().st_size
    print(
        f"\n[{shape}] {opts.events:,} events: Chrome JSON {json_size / 1e6:.1f} MB, "
        f".pftrace {pf_size / 1e6:.1f} MB",
        flush=True,
    )
    rounds = []
    for _ in range(max(opts.repeat, 1)):  # interleaved: the same load on every reader
        row = [timed(as_json), timed(as_pftrace)]
        if opts.base:
            row.append(timed(as_pftrace, code=opts.base))
        rounds.append(row)
        print(
            "  round: "
            + ", ".join(
                f"{name} {c:.2f} s CPU / {w:.2f} s wall"
                for name, (c, w, *_) in zip(SIDES, row, strict=False)
            )
            + f"; pftrace / JSON {row[1][0] / row[0][0]:.2f}x CPU",
            flush=True,
        )
    lines = []
    sides = [(".json", 0, json_size), (".pftrace", 1, pf_size)]
    sides += [("--base .pftrace", 2, pf_size)] if opts.base else []
    best = {}
    for name, k, size in sides:
        cpu = [r[k][0] for r in rounds]
        wall = [r[k][1] for r in rounds]
        rss = [r[k][2] / size for r in rounds]
        grown = [(r[k][2] - r[k][3]) / size for r in rounds]
        best[k] = (min(cpu), min(r[k][2] for r in rounds))
        line = (
            f"  {name:16s} CPU {_span(cpu, ' s')}  wall {_span(wall, ' s')}  "
            f"peak RSS / file {_span(rss, 'x')}, above the imports' {_span(grown, 'x')}"
        )
        print(line)
        lines.append(line)
    ratios = [r[1][0] / r[0][0] for r in rounds]
    time_ratio = best[1][0] / best[0][0]
    rss_ratio = best[1][1] / pf_size
    time_ok, rss_ok = time_ratio <= 1.0, rss_ratio <= 2.0
    verdict = (
        f"  {shape}: pftrace / JSON {time_ratio:.2f}x CPU (rounds {min(ratios):.2f}-"
        f"{max(ratios):.2f}x) {'PASS' if time_ok else 'FAIL'} (<= 1x); peak RSS "
        f"{rss_ratio:.2f}x the file {'PASS' if rss_ok else 'FAIL'} (<= 2x)"
    )
    if opts.base:
        before = best[2][0] / best[0][0]
        before_rss = best[2][1] / pf_size
        verdict += (
            f"; before: {before:.2f}x JSON, RSS {before_rss:.2f}x file "
            f"(before / after {best[2][0] / best[1][0]:.2f}x CPU)"
        )
    print(verdict, flush=True)
    if opts.slow:
        s = timed(as_pftrace, "slow")[0]
        print(f"  per-packet .pftrace reader: {s:6.2f} s CPU = {s / best[1][0]:.1f}x vectorised")
    return time_ok and rss_ok, [verdict]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default="few,many,deep,wide", help=", ".join(GENERATORS))
    parser.add_argument("--slow", action="store_true", help="also time the per-packet reader")
    parser.add_argument("--base", type=Path, help="a checkout before a change: its read too")
    parser.add_argument("--keep", type=Path, help="write (or reuse) the trace files here")
    opts = parser.parse_args()
    shapes = [s for s in opts.shapes.split(",") if s]
    unknown = [s for s in shapes if s not in GENERATORS]
    if unknown:
        parser.error(f"unknown shape {unknown[0]!r} (one of {', '.join(GENERATORS)})")
    print("times: CPU seconds of the reading process (all threads), best of the rounds (range)")
    ok = True
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for shape in shapes:
            passed, verdict = run_shape(shape, folder, opts)
            ok &= passed
            summary += verdict
    print("\nsummary (targets, issue 25 item 2: pftrace <= 1x JSON, peak RSS <= 2x file):")
    print("\n".join(summary))
    loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end (1, 5, 15 min): {loads}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
