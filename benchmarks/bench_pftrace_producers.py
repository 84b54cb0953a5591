""".pftrace vs Chrome JSON read time on other producers' traces (issue 14: pftrace <= 1x JSON
on every trace, not only bench_pftrace_read's generated one).

Every trace file under DIR (default ../shared/real_traces next to the repo: Kineto NVIDIA and
AMD, Ascend trace_view, torch_gloo_moe ranks, ...) that moetrace loads is loaded once and
written with moetrace's own writers as .json and .pftrace into a temporary folder (the real
traces are only read, never copied into the project). Then a fresh interpreter (imports and one
warm-up read untimed) times `load(P, cache=False)` of each, JSON and pftrace interleaved, best
of --repeat. With --base CHECKOUT (e.g. `git worktree add /tmp/base main`) a second interpreter
with that checkout's moetrace times the same files, alternated with the first --rounds times,
so before and after come from one run. Prints per trace: events, the best times, pftrace / JSON
(and the base's), which .pftrace reader took the file (vectorised or per-packet), and at the
end the worst ratio and PASS/FAIL (every trace <= 1x).

Run: python benchmarks/bench_pftrace_producers.py [--real DIR] [--repeat 3] [--rounds 1]
     [--base CHECKOUT] [--min-events 1000] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REAL = ROOT.parent / "shared" / "real_traces"

WORKER = """
import json, sys, time
from pathlib import Path
from moetrace.trace.io import load
from moetrace.trace.formats.pftrace.read_vectorised import read_vectorised
pairs, repeat = json.loads(sys.argv[1]), int(sys.argv[2])
best = {}
for js, pf in pairs:  # warm-up (lazy imports, first-touch), and which reader takes the file
    load(Path(js), cache=False)
    load(Path(pf), cache=False)
    best[pf + ":vectorised"] = read_vectorised(Path(pf), Path(pf).read_bytes()) is not None
for _ in range(repeat):
    for js, pf in pairs:
        for p in (js, pf):
            t0 = time.perf_counter()
            load(Path(p), cache=False)
            best[p] = min(best.get(p, 1e9), time.perf_counter() - t0)
print(json.dumps(best))
"""


def trace_files(real: Path) -> list[Path]:
    """The Chrome JSON trace files under `real` (CSV and README files are not traces)."""
    return sorted(
        p for p in real.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
    )


def convert(files: list[Path], real: Path, out: Path, min_events: int) -> list[dict[str, Any]]:
    """Load each file and write it as .json and .pftrace into `out`; one row per trace loaded
    with at least `min_events` events (others are named as skipped, with why)."""
    from moetrace.trace.io import load, write_trace

    rows = []
    for i, path in enumerate(files):
        name = str(path.relative_to(real))
        try:
            trace = load(path, cache=False)
        except Exception as exc:  # not a trace moetrace loads: say so, go on
            print(f"skip {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
            continue
        events = trace.events.height
        if events < min_events:
            print(f"skip {name}: {events} events (< --min-events {min_events})")
            continue
        as_json, as_pf = out / f"{i}.json", out / f"{i}.pftrace"
        write_trace(trace, as_json, force=True)
        write_trace(trace, as_pf, force=True)
        rows.append({"name": name, "events": events, "json": str(as_json), "pf": str(as_pf)})
    return rows


def timed(rows: list[dict[str, Any]], repeat: int, code: Path | None) -> dict[str, Any]:
    """Best times of every file from one fresh interpreter (with checkout `code`'s moetrace
    when given, else this one's)."""
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    pairs = json.dumps([[r["json"], r["pf"]] for r in rows])
    out = subprocess.run(
        [sys.executable, "-c", WORKER, pairs, str(repeat)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(rows[0]["pf"]).parent,  # not a checkout: `-c` puts the cwd first on sys.path
    )
    best: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--real", type=Path, default=DEFAULT_REAL, help="folder of real traces")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved reads per process")
    parser.add_argument("--rounds", type=int, default=1, help="processes per side, alternated")
    parser.add_argument("--base", type=Path, help="a checkout before a change: its reads too")
    parser.add_argument("--min-events", type=int, default=1000, help="skip smaller traces")
    parser.add_argument("--only", default="", help="only the traces whose path contains this")
    opts = parser.parse_args()
    files = [p for p in trace_files(opts.real) if opts.only in str(p.relative_to(opts.real))]
    if not files:
        print(f"no trace files under {opts.real}")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        rows = convert(files, opts.real, Path(tmp), opts.min_events)
        if not rows:
            print("no trace loaded")
            return 2
        best: dict[str, Any] = {}
        base: dict[str, Any] = {}
        for _ in range(max(opts.rounds, 1)):
            for side, code in ((best, None), (base, opts.base)):
                if side is base and opts.base is None:
                    continue
                for key, value in timed(rows, opts.repeat, code).items():
                    keep = value if key.endswith(":vectorised") else min(side.get(key, 1e9), value)
                    side[key] = keep
        head = f"{'trace':70s} {'events':>8s} {'.json':>7s} {'.pftrace':>8s} {'pf/json':>7s}"
        if opts.base:
            head += f" {'base pf':>8s} {'base/json':>9s}"
        print(head + "  reader")
        worst = 0.0
        for r in rows:
            j, p = best[r["json"]], best[r["pf"]]
            worst = max(worst, p / j)
            line = f"{r['name'][:70]:70s} {r['events']:8d} {j:7.3f} {p:8.3f} {p / j:6.2f}x"
            if opts.base:
                b = base[r["pf"]]
                line += f" {b:8.3f} {b / base[r['json']]:8.2f}x"
            reader = "vectorised" if best[r["pf"] + ":vectorised"] else "per-packet"
            print(f"{line}  {reader}")
        rounds = max(opts.rounds, 1)
        print(f"best of {opts.repeat} reads x {rounds} process(es) per side, cache off")
        print(f"worst pftrace / JSON: {worst:.2f}x (target <= 1)")
        loads = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"load average at the end (1, 5, 15 min): {loads}")
        print("PASS" if worst <= 1 else "FAIL")
        return 0 if worst <= 1 else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "2")
    sys.exit(main())
