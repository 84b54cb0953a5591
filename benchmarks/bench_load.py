"""Load-speed benchmark: moetrace.load vs two plain loaders, same file, same run.

Generates a seeded Kineto-like trace of 1M events with args (~143 MB), then times each loader
in a fresh subprocess (so peak RSS is that loader's own, via resource.getrusage), best of
--repeat runs (the machine is shared and noisy; ratios use the best times of this run):
  (a) msgspec: read the bytes, msgspec.json.decode into typed structs (name/ph/cat str,
      ts/dur float, pid/tid int|str, id, bp, args decoded as a real dict[str, Any]); a plain
      decode, the fastest one here, building no frame and no exact ns;
  (b) json: json.load of the file, then building per-column Python lists (ph, name, cat,
      ts, dur, pid, tid, args) from the event dicts, as a naive column loader would;
  moetrace.load: decode + exact integer ns + args as byte-exact JSON text + tracks, nesting,
      flows, flavor -> a complete `Trace`;
  decode floor (information, not a baseline): msgspec decoding of the whole file into
      the structs of moetrace's fast path, the part of the load no column building can remove.
  raw: msgspec typed decode with args kept as msgspec.Raw, the cheapest decode that reads
      every event: the baseline of every shape (issue 14).
Three shapes, 1M events each (--shapes): few (8 Kineto-like threads/streams, above),
many (8 ranks x 64 cores = 512 executor/Ascend-like tracks, 1% partial overlaps -> overflow
lanes), deep (Kineto CPU call stacks 10-14 deep). (a), (b) and the floor run on "few" only.
Prints one line per figure, a table of the shapes side by side, then PASS/FAIL against
issue 14: moetrace <= 2x the args-Raw decode and peak RSS <= 2x the file on every shape.

With --base DIR (a checkout before a change, e.g. `git worktree add /tmp/base main`), the
load of that checkout is timed in the same interleaved rounds ("before" columns). Each line
also gives the CPU seconds of the run (all threads, Polars' own included).

Run: python benchmarks/bench_load.py [--events 1000000] [--repeat 3] [--keep DIR]
     [--shapes few,many,deep] [--base DIR]
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
    with small args, M names first, and launch flows as Kineto writes them: 1 in 20 events an
    `s` at the start of the CPU op just written, its `f` (bp "e") at the start of the next
    kernel, so the load binds ~25k flow edges (a lone `f` binds nothing)."""
    rng = random.Random(seed)
    base_ns = 1_736_405_443_000_000_000
    with open(path, "w") as fh:
        fh.write('{"schemaVersion":1,"distributedInfo":{"rank":0,"world_size":8},"traceEvents":[\n')
        fh.write('{"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"python"}},\n')
        fh.write('{"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7"}}')
        clock = [0] * 8
        last_cpu: tuple[int, int, str, int] | None = None  # pid, tid, stamp, clock (ns)
        pending: list[tuple[int, int]] = []  # (flow id, launch clock) of kernels not written
        i = 0
        while i < n_events:
            lane = rng.randrange(8)
            gpu = lane >= 6
            clock[lane] += rng.randrange(1, 4000)
            if gpu and pending:  # a kernel starts after its launch
                clock[lane] = max(clock[lane], pending[0][1] + rng.randrange(1, 50))
            ts = base_ns + clock[lane]
            stamp = f"{ts // 1000}.{ts % 1000:03d}"
            pid, tid = (0, lane + 1) if gpu else (100, lane + 1)
            if i % 20 == 19 and last_cpu is not None:
                s_pid, s_tid, s_stamp, s_clock = last_cpu
                fh.write(
                    f',\n{{"ph":"s","id":{i},"pid":{s_pid},"tid":{s_tid},"ts":{s_stamp},'
                    f'"cat":"ac2g","name":"ac2g"}}'
                )
                pending.append((i, s_clock))
                i += 1
                continue
            dur = rng.randrange(1, 3000)
            clock[lane] += dur
            cat = "kernel" if gpu else "cpu_op"
            fh.write(
                f',\n{{"ph":"X","cat":"{cat}","name":"{NAMES[rng.randrange(200)]}","pid":{pid},'
                f'"tid":{tid},"ts":{stamp},"dur":{dur // 1000}.{dur % 1000:03d},'
                f'"args":{{"External id":{i},"stream":{lane}}}}}'
            )
            i += 1
            if not gpu:
                last_cpu = (pid, tid, stamp, clock[lane] - dur)
            elif pending and i < n_events:
                fh.write(
                    f',\n{{"ph":"f","id":{pending.pop(0)[0]},"pid":{pid},"tid":{tid},'
                    f'"ts":{stamp},"cat":"ac2g","name":"ac2g","bp":"e"}}'
                )
                i += 1
        fh.write("\n]}\n")


def _stamp(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def generate_many_tracks(
    path: Path, n_events: int, seed: int = 7, ranks: int = 8, cores: int = 64
) -> None:
    """An executor/Ascend-like trace: 8 ranks (pids) x 64 cores (tids) = 512 tracks, each a
    stream of back-to-back tiles with small args; 1 tile in 100 starts before the previous
    one on its core ends (a partial overlap: it goes to an overflow lane)."""
    rng = random.Random(seed)
    base_ns = 1_736_405_443_000_000_000
    lanes = ranks * cores
    with open(path, "w") as fh:
        fh.write('{"traceEvents":[\n')
        fh.write('{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}}')
        clock = [0] * lanes
        last_end = [0] * lanes
        for i in range(n_events):
            lane = rng.randrange(lanes)
            pid, tid = divmod(lane, cores)
            dur = rng.randrange(500, 3000)
            start = clock[lane] + rng.randrange(1, 400)
            if i % 100 == 99 and last_end[lane] > 200:
                start = last_end[lane] - rng.randrange(1, 200)  # overlaps the previous tile
            clock[lane] = max(clock[lane], start + dur)
            last_end[lane] = start + dur
            fh.write(
                f',\n{{"ph":"X","cat":"tile","name":"{NAMES[i % 200]}","pid":{pid},"tid":{tid},'
                f'"ts":{_stamp(base_ns + start)},"dur":{_stamp(dur)},'
                f'"args":{{"tile":{i},"expert":{i % 256}}}}}'
            )
        fh.write("\n]}\n")


def generate_deep(path: Path, n_events: int, seed: int = 7) -> None:
    """Kineto-like CPU call stacks 10-14 deep on 4 threads: every top-level op holds a tree
    of nested calls (1-3 children per call), each a few ns inside its parent."""
    rng = random.Random(seed)
    base_ns = 1_736_405_443_000_000_000
    written = 0
    with open(path, "w") as fh:
        fh.write('{"schemaVersion":1,"traceEvents":[\n')
        fh.write('{"ph":"M","name":"process_name","pid":100,"tid":0,"args":{"name":"python"}}')
        clock = [0] * 4
        while written < n_events:
            tid = rng.randrange(4)
            depth = rng.randrange(10, 15)
            start = clock[tid] + rng.randrange(1, 1000)
            span = 1 << (depth + 6)
            stack = [(0, start, span)]
            while stack and written < n_events:
                level, s, d = stack.pop()
                fh.write(
                    f',\n{{"ph":"X","cat":"cpu_op","name":"{NAMES[(level * 13 + written) % 150]}",'
                    f'"pid":100,"tid":{tid + 1},"ts":{_stamp(base_ns + s)},"dur":{_stamp(d)},'
                    f'"args":{{"External id":{written},"Sequence number":{level}}}}}'
                )
                written += 1
                if level + 1 < depth and d > 8:
                    k = 1 if level < depth // 2 else rng.randrange(1, 4)
                    width = (d - 2) // k
                    for c in range(k):
                        stack.append((level + 1, s + 1 + c * width, max(width - 1, 1)))
            clock[tid] = start + span
        fh.write("\n]}\n")


SHAPES = {"few": generate, "many": generate_many_tracks, "deep": generate_deep}
FILE_VERSION = {"few": 2, "many": 1, "deep": 1}
"""Bumped when a generator changes, so --keep never reuses a file of an older generator
(few v2: launch flows as s/f pairs that bind, instead of lone f points)."""


# Each loader: (setup, untimed: imports and type definitions, as in a session that has
# the library loaded already; body, timed: from the file path to the loaded data).
RUNNERS: dict[str, tuple[str, str]] = {
    "json": (
        "import json",
        "with open(P) as fh:\n    d = json.load(fh)\n"
        "cols = {k: [] for k in ('ph', 'name', 'cat', 'ts', 'dur', 'pid', 'tid', 'args')}\n"
        "for e in d['traceEvents']:\n"
        "    for k, col in cols.items():\n        col.append(e.get(k))\n"
        "n = len(cols['ph'])",
    ),
    "msgspec": (
        "import msgspec\n"
        "from typing import Any\n"
        "class E(msgspec.Struct):\n"
        "    ph: str = ''\n    name: str = ''\n    cat: str | None = None\n"
        "    ts: float = 0.0\n    dur: float = 0.0\n"
        "    pid: int | str = 0\n    tid: int | str = 0\n"
        "    id: int | str | None = None\n    bp: str | None = None\n"
        "    args: dict[str, Any] | None = None\n"
        "class T(msgspec.Struct):\n    traceEvents: list[E]",
        "with open(P, 'rb') as fh:\n    d = msgspec.json.decode(fh.read(), type=T)\n"
        "n = len(d.traceEvents)",
    ),
    # The cheapest decode that reads every event (issue 14's baseline for every shape):
    # typed fields, args kept as undecoded raw JSON.
    "raw": (
        "import msgspec\n"
        "class E(msgspec.Struct, gc=False):\n"
        "    ph: str = ''\n    name: str = ''\n    cat: str | None = None\n"
        "    ts: float = 0.0\n    dur: float = 0.0\n"
        "    pid: int | str = 0\n    tid: int | str = 0\n"
        "    id: int | str | None = None\n    bp: str | None = None\n"
        "    args: msgspec.Raw = msgspec.Raw(b'null')\n"
        "class T(msgspec.Struct):\n    traceEvents: list[E]\n"
        "dec = msgspec.json.Decoder(T)",
        "with open(P, 'rb') as fh:\n    d = dec.decode(fh.read())\nn = len(d.traceEvents)",
    ),
    # moetrace imports Polars lazily inside load(); importing the reader first keeps that
    # one-off ~0.45 s out of the load time (it is printed on its own line).
    "moetrace": (
        "import moetrace, moetrace.trace.io, moetrace.trace.formats.chrome.read",
        "t = moetrace.load(P, cache=False)\nn = t.events.height",
    ),
    # Not a baseline: the part of moetrace.load no column building can avoid, i.e. reading
    # the file and msgspec-decoding the events into the structs of moetrace's fast path
    # (formats/chrome/fast.LeanEvent: ts, dur, id and args kept as raw JSON text) in one
    # call. Printed to show how much of the load is decode and how much is building the Trace.
    "floor": (
        "import msgspec\n"
        "from moetrace.trace.formats.chrome.fast import LeanEvent\n"
        "class T(msgspec.Struct):\n    traceEvents: list[LeanEvent]\n"
        "dec = msgspec.json.Decoder(T)",
        "with open(P, 'rb') as fh:\n    d = dec.decode(fh.read())\nn = len(d.traceEvents)",
    ),
}

TIMER = """
import resource, sys, time
P = sys.argv[1]
{setup}
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
t0, c0 = time.perf_counter(), cpu()
{body}
elapsed, cpu_s = time.perf_counter() - t0, cpu() - c0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(elapsed, rss, n, cpu_s)
"""

REPO = Path(__file__).resolve().parent.parent
"""The checkout this benchmark belongs to: "moetrace" runs time its code."""

BASE: Path | None = None
"""A checkout of moetrace before a change (--base): "before" runs moetrace.load from it."""


def measure(kind: str, path: Path, repeat: int) -> tuple[float, int, int, float]:
    """(best seconds, peak RSS bytes of that best run, events, CPU seconds of all its
    threads) of one loader, each run in a fresh interpreter. Kind "before" is moetrace.load
    of the --base checkout."""
    # `python -c` puts the working directory first on sys.path: each run starts in the
    # checkout whose moetrace it times (else a run from a worktree imports that worktree's
    # moetrace whatever PYTHONPATH says, and "before" silently times the new code).
    env, cwd = None, REPO
    if kind == "before":
        assert BASE is not None
        env = {**os.environ, "PYTHONPATH": str(BASE)}
        cwd = BASE
        kind = "moetrace"
    setup, body = RUNNERS[kind]
    code = TIMER.format(setup=setup, body=body)
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code, str(path)],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
        )
        elapsed, rss, n, cpu = out.stdout.split()
        runs.append((float(elapsed), int(rss), int(n), float(cpu)))
    return min(runs)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs per loader (best kept)")
    parser.add_argument("--keep", type=Path, help="directory to write the traces to (and reuse)")
    parser.add_argument(
        "--shapes", default="few,many,deep", help="comma list of: " + ", ".join(SHAPES)
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="checkout of moetrace before a change: its load is timed in the same rounds",
    )
    opts = parser.parse_args()
    global BASE
    BASE = opts.base
    shapes = [s for s in opts.shapes.split(",") if s]
    summary: list[tuple[str, float, float, float, int, float, float | None]] = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = opts.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        print(f"load average at the start (1, 5, 15 min): {_load_average()}")
        import_secs, baseline_rss = measure_import()
        print(
            f"import of moetrace + polars (untimed setup): {import_secs:.2f} s, "
            f"{baseline_rss / 1e6:.0f} MB"
        )
        for shape in shapes:
            path = folder / f"bench_{shape}_{opts.events}_v{FILE_VERSION[shape]}.json"
            if not path.exists():
                SHAPES[shape](path, opts.events)
            ok &= run_shape(shape, path, opts.repeat, summary)
        print()
        print(
            f"{'shape':6s} {'file MB':>8s} {'raw s':>7s} {'moetrace s':>10s} "
            f"{'/ raw':>6s} {'RSS/file':>8s} {'CPU s':>6s}"
            + (f" {'before s':>8s} {'/ raw':>6s}" if opts.base else "")
        )
        for shape, size_mb, raw, ours, rss, cpu, before in summary:
            print(
                f"{shape:6s} {size_mb:8.1f} {raw:7.2f} {ours:10.2f} {ours / raw:5.2f}x "
                f"{rss / (size_mb * 1e6):7.2f}x {cpu:6.2f}"
                + (f" {before:8.2f} {before / raw:5.2f}x" if before is not None else "")
            )
        print("targets (issue 14): moetrace / raw <= 2 and peak RSS <= 2x file, every shape")
        print(f"load average at the end (1, 5, 15 min): {_load_average()}")
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1


def run_shape(
    shape: str,
    path: Path,
    repeat: int,
    summary: list[tuple[str, float, float, float, int, float, float | None]],
) -> bool:
    """Measure one shape; the few-tracks shape also gets the older baselines (a), (b)."""
    size = path.stat().st_size
    print(f"\n[{shape}] {path.name}: {size / 1e6:.1f} MB")
    kinds = ("raw", "moetrace") + (("before",) if BASE else ())
    kinds += ("msgspec", "json", "floor") if shape == "few" else ()
    # Interleaved rounds, so a burst of load from other users hits every loader alike.
    rounds = [{k: measure(k, path, 1) for k in kinds} for _ in range(max(repeat, 1))]
    results = {k: min(r[k] for r in rounds) for k in kinds}
    labels = {
        "raw": "msgspec decode, args Raw",
        "msgspec": "(a) msgspec typed decode",
        "json": "(b) json.load + columns",
        "moetrace": "moetrace.load",
        "floor": "decode floor (info)",
        "before": "moetrace.load of --base",
    }
    for kind, (secs, rss, n, cpu) in results.items():
        print(
            f"{labels[kind]:26s} {secs:7.2f} s  CPU {cpu:6.2f} s  peak RSS {rss / 1e6:7.1f} MB  "
            f"({n:,} events; best of {len(rounds)})"
        )
    ours, rss, _, cpu = results["moetrace"]
    raw = results["raw"][0]
    before = results["before"][0] if "before" in results else None
    summary.append((shape, size / 1e6, raw, ours, rss, cpu, before))
    print(f"moetrace / msgspec args-Raw decode: {ours / raw:.2f}x (target <= 2)")
    print(f"moetrace peak RSS / file size: {rss / size:.2f} (target <= 2)")
    if shape == "few":
        print(f"moetrace / (a) msgspec typed decode: {ours / results['msgspec'][0]:.2f}x")
        print(f"(b) json.load + columns / moetrace: {results['json'][0] / ours:.2f}x faster")
    return ours / raw <= 2 and rss / size <= 2


def _load_average() -> str:
    """The machine's load averages: the timings mean little when it is busy."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure_import() -> tuple[float, int]:
    """(seconds, peak RSS bytes) of importing moetrace's reader and Polars, the untimed setup."""
    code = (
        "import resource, time\nt0 = time.perf_counter()\n"
        "import moetrace, moetrace.trace.io, moetrace.trace.formats.chrome.read, polars\n"
        "print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    secs, rss = out.stdout.split()
    return float(secs), int(rss)


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
