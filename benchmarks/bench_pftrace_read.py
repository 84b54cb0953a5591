"""Reading .pftrace vs reading Chrome JSON of the same trace (issue 14: pftrace <= 1x JSON).

Generates bench_load's seeded Kineto-like trace (--events), loads it once, writes it with
moetrace as Chrome JSON and as .pftrace (same Trace), then times `load(P, cache=False)` of each
in fresh interpreters (imports untimed), interleaved rounds, best of --repeat. With --slow it
also times the per-packet protobuf reader (`read_packets.read_slow`, the previous reader) on
the same file once. Prints times, the ratio pftrace / JSON, and PASS/FAIL (<= 1x).

Run: python benchmarks/bench_pftrace_read.py [--events 1000000] [--repeat 3] [--slow]
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
import sys, time
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
print(time.perf_counter() - t0, t.events.height)
"""


def timed(path: Path, mode: str = "load") -> float:
    """Seconds of one read of `path` in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", TIMER, str(path), mode], check=True, capture_output=True, text=True
    )
    return float(out.stdout.split()[0])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slow", action="store_true", help="also time the per-packet reader")
    opts = parser.parse_args()
    from moetrace.trace.io import load, write_trace

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source.json"
        generate(source, opts.events)
        trace = load(source, cache=False)
        as_json, as_pftrace = Path(tmp) / "t.json", Path(tmp) / "t.pftrace"
        write_trace(trace, as_json)
        write_trace(trace, as_pftrace)
        del trace
        print(
            f"{opts.events:,} events: Chrome JSON {as_json.stat().st_size / 1e6:.1f} MB, "
            f".pftrace {as_pftrace.stat().st_size / 1e6:.1f} MB"
        )
        rounds = [(timed(as_json), timed(as_pftrace)) for _ in range(max(opts.repeat, 1))]
        j = min(r[0] for r in rounds)
        p = min(r[1] for r in rounds)
        print(f"load .json     {j:6.2f} s (best of {len(rounds)})")
        print(f"load .pftrace  {p:6.2f} s (best of {len(rounds)})")
        if opts.slow:
            s = timed(as_pftrace, "slow")
            print(f"per-packet .pftrace reader (before): {s:6.2f} s = {s / p:.1f}x the new one")
        print(f"pftrace / JSON: {p / j:.2f}x (target <= 1)")
        loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average at the end (1, 5, 15 min): {loads}")
        print("PASS" if p <= j else "FAIL")
        return 0 if p <= j else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
