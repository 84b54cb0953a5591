"""Reading .pftrace vs reading Chrome JSON of the same trace (issue 14: pftrace <= 1x JSON),
and the peak memory of reading it (issue 14: peak RSS <= 2x the file).

Generates bench_load's seeded Kineto-like trace (--events), loads it once, writes it with
moetrace as Chrome JSON and as .pftrace (same Trace), then times `load(P, cache=False)` of each
in fresh interpreters (imports untimed), interleaved rounds, best of --repeat, and takes each
fresh interpreter's peak RSS (ru_maxrss, imports included). With --base DIR (a checkout before
a change, e.g. `git worktree add /tmp/base main`) every round also reads the .pftrace with
that checkout, so before and after are measured in the same run. With --slow it also times
the per-packet protobuf reader (`read_packets.read_slow`) on the same file once. Prints
times, the ratio pftrace / JSON, peak RSS / file size, and PASS/FAIL (pftrace <= 1x JSON).

Run: python benchmarks/bench_pftrace_read.py [--events 1000000] [--repeat 3] [--slow]
     [--base DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import generate

TIMER = """
import resource, sys, time
import moetrace.trace.io, moetrace.trace.formats.chrome.read, moetrace.trace.formats.pftrace.write
from moetrace.trace.formats.pftrace import read_vectorised as pftrace_vec
from moetrace.trace.formats.pftrace.read_packets import read_slow
from pathlib import Path
P = Path(sys.argv[1])
t0 = time.perf_counter()
if sys.argv[2] == "slow":
    t = read_slow(P, P.read_bytes())
else:
    t = moetrace.trace.io.load(P, cache=False)
print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


SIDES = (".json", ".pftrace", ".pftrace --base")


def timed(path: Path, mode: str = "load", code: Path | None = None) -> tuple[float, int]:
    """(seconds, peak RSS in bytes) of one read of `path` in a fresh interpreter, with the
    moetrace of checkout `code` when given (else the one this interpreter imports)."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    out = subprocess.run(
        [sys.executable, "-c", TIMER, str(path), mode],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,  # not a checkout: `-c` puts the working directory first on sys.path
    )
    secs, rss = out.stdout.split()[:2]
    return float(secs), int(rss)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slow", action="store_true", help="also time the per-packet reader")
    parser.add_argument("--base", type=Path, help="a checkout before a change: its read too")
    parser.add_argument("--keep", type=Path, help="write (or reuse) the trace files here")
    opts = parser.parse_args()
    from moetrace.trace.io import load, write_trace

    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        as_json, as_pftrace = folder / "t.json", folder / "t.pftrace"
        if not (as_json.exists() and as_pftrace.exists()):
            source = folder / "source.json"
            generate(source, opts.events)
            trace = load(source, cache=False)
            write_trace(trace, as_json, force=True)
            write_trace(trace, as_pftrace, force=True)
            del trace
        json_size, pf_size = as_json.stat().st_size, as_pftrace.stat().st_size
        print(
            f"{opts.events:,} events: Chrome JSON {json_size / 1e6:.1f} MB, "
            f".pftrace {pf_size / 1e6:.1f} MB"
        )
        rounds = []
        for _ in range(max(opts.repeat, 1)):  # interleaved: the same load on every reader
            row = [timed(as_json), timed(as_pftrace)]
            if opts.base:
                row.append(timed(as_pftrace, code=opts.base))
            rounds.append(row)
            print(
                "round: "
                + ", ".join(f"{name} {t:.2f} s" for name, (t, _) in zip(SIDES, row, strict=False))
                + f"; pftrace / JSON {row[1][0] / row[0][0]:.2f}x",
                flush=True,
            )
        j, p = (min(r[k][0] for r in rounds) for k in (0, 1))
        j_rss, p_rss = (min(r[k][1] for r in rounds) for k in (0, 1))
        j_top, p_top = (max(r[k][1] for r in rounds) for k in (0, 1))
        n = len(rounds)
        for name, secs, low, top in ((".json", j, j_rss, j_top), (".pftrace", p, p_rss, p_top)):
            print(
                f"load {name:9s} {secs:6.2f} s (best of {n})  peak RSS {low / 1e6:5.0f} MB "
                f"(lowest of the rounds; highest {top / 1e6:.0f} MB)"
            )
        if opts.base:
            b = min(r[2][0] for r in rounds)
            b_rss = min(r[2][1] for r in rounds)
            print(
                f"load .pftrace with --base {opts.base}: {b:6.2f} s  peak RSS "
                f"{b_rss / 1e6:5.0f} MB = {b_rss / pf_size:.1f}x the file; "
                f"before / after: {b / p:.2f}x time, {b_rss / p_rss:.1f}x RSS; "
                f"before / JSON: {b / j:.2f}x"
            )
        if opts.slow:
            s, _ = timed(as_pftrace, "slow")
            print(f"per-packet .pftrace reader: {s:6.2f} s = {s / p:.1f}x the vectorised one")
        per_round = sorted(r[1][0] / r[0][0] for r in rounds)
        print(
            f"pftrace / JSON: {p / j:.2f}x (target <= 1; best against best); "
            f"median of the rounds' ratios {per_round[len(per_round) // 2]:.2f}x"
        )
        print(
            f"peak RSS / file: .pftrace {p_rss / pf_size:.2f}x (target <= 2), "
            f".json {j_rss / json_size:.2f}x"
        )
        loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average at the end (1, 5, 15 min): {loads}")
        print("PASS" if p <= j else "FAIL")
        return 0 if p <= j else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
