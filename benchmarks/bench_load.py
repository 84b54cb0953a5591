"""Load-speed benchmark: moetrace.load vs msgspec typed decode vs json.load, same file, same run.

Generates a seeded Kineto-like trace of 1M events with args (~140 MB), then times, each in a
fresh subprocess (so peak RSS is that loader's own, via resource.getrusage):
  - json.load of the file (the baseline people use),
  - msgspec.json.decode into typed structs (name/ph/cat str, ts/dur float, pid/tid int|str,
    args dict): the fastest plain decode, without building any frame,
  - moetrace.load (decode + exact ns + tracks, nesting, flows, flavor -> Trace).
Prints one line per figure, then PASS/FAIL against the targets of issue 2:
load <= 1.5x msgspec, >= 5x faster than json.load, peak RSS <= 2x file size.

Run: python benchmarks/bench_load.py [--events 1000000] [--keep PATH]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

NAMES = [f"aten::op_{i}" for i in range(150)] + [f"gemm_kernel<{i}>" for i in range(50)]


def generate(path: Path, n_events: int, seed: int = 7) -> None:
    """A Kineto-like trace of ~140 bytes per event: CPU ops and kernels on 8 threads/streams
    with small args, 1 in 20 events a launch flow end, M names first."""
    rng = random.Random(seed)
    base_ns = 1_736_405_443_000_000_000
    with open(path, "w") as fh:
        fh.write('{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":8},"traceEvents":[\n')
        fh.write('{"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"python"}},\n')
        fh.write('{"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7"}}')
        clock = [0] * 8
        for i in range(n_events):
            lane = rng.randrange(8)
            gpu = lane >= 6
            clock[lane] += rng.randrange(1, 4000)
            ts = base_ns + clock[lane]
            stamp = f"{ts // 1000}.{ts % 1000:03d}"
            pid, tid = (0, lane + 1) if gpu else (100, lane + 1)
            if i % 20 == 19:
                ev = (
                    f'{{"ph":"f","id":{i},"pid":{pid},"tid":{tid},"ts":{stamp},'
                    f'"cat":"ac2g","name":"ac2g","bp":"e"}}'
                )
            else:
                dur = rng.randrange(1, 3000)
                clock[lane] += dur
                cat = "kernel" if gpu else "cpu_op"
                ev = (
                    f'{{"ph":"X","cat":"{cat}","name":"{NAMES[rng.randrange(200)]}","pid":{pid},'
                    f'"tid":{tid},"ts":{stamp},"dur":{dur // 1000}.{dur % 1000:03d},'
                    f'"args":{{"External id":{i},"stream":{lane}}}}}'
                )
            fh.write(",\n" + ev)
        fh.write("\n]}\n")


RUNNERS = {
    "json": "import json\nwith open(P) as fh:\n    d = json.load(fh)\nn = len(d['traceEvents'])",
    "msgspec": (
        "import msgspec\n"
        "from typing import Any\n"
        "class E(msgspec.Struct):\n"
        "    ph: str = ''\n    name: str = ''\n    cat: str | None = None\n"
        "    ts: float = 0.0\n    dur: float = 0.0\n"
        "    pid: int | str = 0\n    tid: int | str = 0\n"
        "    id: int | str | None = None\n    bp: str | None = None\n"
        "    args: dict[str, Any] | None = None\n"
        "class T(msgspec.Struct):\n    traceEvents: list[E]\n"
        "with open(P, 'rb') as fh:\n    d = msgspec.json.decode(fh.read(), type=T)\n"
        "n = len(d.traceEvents)"
    ),
    "moetrace": "import moetrace\nt = moetrace.load(P)\nn = t.events.height",
}

TIMER = """
import resource, sys, time
P = sys.argv[1]
t0 = time.perf_counter()
{body}
elapsed = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(elapsed, rss, n)
"""


def measure(kind: str, path: Path) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, events) of one loader in a fresh interpreter."""
    code = TIMER.format(body=RUNNERS[kind])
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], check=True, capture_output=True, text=True
    )
    elapsed, rss, n = out.stdout.split()
    return float(elapsed), int(rss), int(n)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the generated trace here (and reuse it)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = opts.keep or Path(tmp) / "bench.json"
        if not path.exists():
            generate(path, opts.events)
        size = path.stat().st_size
        print(f"file: {size / 1e6:.1f} MB, {opts.events:,} events (+ metadata)")
        baseline_rss = measure_import_rss()
        results = {k: measure(k, path) for k in ("json", "msgspec", "moetrace")}
        for kind, (secs, rss, n) in results.items():
            print(f"{kind:9s} {secs:7.2f} s  peak RSS {rss / 1e6:7.1f} MB  ({n:,} events)")
        ours, rss, _ = results["moetrace"]
        vs_msgspec = ours / results["msgspec"][0]
        vs_json = results["json"][0] / ours
        rss_ratio = rss / size
        print(f"moetrace / msgspec typed decode: {vs_msgspec:.2f}x (target <= 1.5)")
        print(f"json.load / moetrace: {vs_json:.2f}x faster (target >= 5)")
        print(
            f"moetrace peak RSS / file size: {rss_ratio:.2f} "
            f"(target <= 2; interpreter + polars alone: "
            f"{baseline_rss / 1e6:.0f} MB)"
        )
        ok = vs_msgspec <= 1.5 and vs_json >= 5 and rss_ratio <= 2
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1


def measure_import_rss() -> int:
    code = (
        "import resource, moetrace.trace.io, polars\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(out.stdout)


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
