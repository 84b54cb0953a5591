"""Many ranks on all cores: per-rank load + analysis of a 64-rank job, 1 process vs N.

Generates one seeded Kineto-like rank file of ~20 MB (bench_load's generator) and copies it
to --ranks files that differ in their `distributedInfo.rank`, then in a fresh interpreter
each: `map_files(call_on_trace(per_rank))` over all files with --jobs 1 and with --jobs N
(default: the core count). `per_rank` loads one rank and analyses it (moetrace.analysis
`analyze`), returning only its small per-(rank, step) table, so the parent never holds more
than the tables and each worker one rank at a time. The cache is off (every rank parsed).

Prints the wall time of each, the speed-up, the peak RSS of the parent and of the largest
worker (ru_maxrss of self / children), a bound on the job's peak (parent + N x worker), the
cores busy on average (CPU seconds of parent and workers / wall seconds: ~N when the workers
really run side by side), one line of 1-vs-N ratios (time, peak RSS), and checks that both
runs give identical tables. PASS: identical and peak bound <= 1.5 GB.

Run: python benchmarks/bench_job.py [--ranks 64] [--events 150000] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import generate

RUNNER = """
import functools, pickle, resource, sys, time
from pathlib import Path
import moetrace.analysis.report, moetrace.trace.io, moetrace.trace.parallel as par
from bench_job import per_rank
paths = sorted(Path(sys.argv[1]).glob('rank*.json'))
jobs = int(sys.argv[2])
t0 = time.perf_counter()
tables = par.map_files(functools.partial(par.call_on_trace, per_rank, cache=False), paths,
                       jobs=jobs)
elapsed = time.perf_counter() - t0
me = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
own, kids = me.ru_maxrss * 1024, children.ru_maxrss * 1024
cpu = me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime
Path(sys.argv[3]).write_bytes(pickle.dumps(tables))
print(elapsed, own, kids, cpu / elapsed)
"""


def per_rank(trace):  # type: ignore[no-untyped-def]
    """Analyse one rank; only its per-(rank, step) table travels back."""
    from moetrace.analysis.report import analyze

    return analyze(trace).ranks


def make_job(folder: Path, ranks: int, events: int) -> int:
    """--ranks copies of one generated rank file, each naming its own rank; bytes per file."""
    template = folder / "template.json"
    generate(template, events)
    text = template.read_bytes()
    head, body = text.split(b"\n", 1)
    for r in range(ranks):
        new_head = re.sub(rb'"rank":0', f'"rank":{r}'.encode(), head, count=1)
        (folder / f"rank{r:03d}.json").write_bytes(new_head + b"\n" + body)
    template.unlink()
    return len(text)


def run(folder: Path, jobs: int, out: Path) -> tuple[float, int, int, float]:
    """(seconds, parent peak RSS, largest worker peak RSS, busy cores = CPU seconds of the
    parent and its workers / wall seconds) of one run in a fresh interpreter."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(folder), str(jobs), str(out)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    secs, own, kids, busy = done.stdout.split()
    return float(secs), int(own), int(kids), float(busy)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--events", type=int, default=150_000, help="events per rank file")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    opts = parser.parse_args()
    import pickle

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = make_job(folder, opts.ranks, opts.events)
        print(
            f"job: {opts.ranks} rank files of {size / 1e6:.1f} MB "
            f"({opts.ranks * size / 1e9:.2f} GB), {opts.events:,} events each"
        )
        load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
        one = run(folder, 1, folder / "one.pkl")
        many = run(folder, opts.jobs, folder / "many.pkl")
        same = all(
            a.equals(b)
            for a, b in zip(
                pickle.loads((folder / "one.pkl").read_bytes()),
                pickle.loads((folder / "many.pkl").read_bytes()),
                strict=True,
            )
        )
        for label, (secs, own, kids, busy) in (("--jobs 1", one), (f"--jobs {opts.jobs}", many)):
            print(
                f"{label:10s} {secs:7.1f} s   parent peak RSS {own / 1e6:7.0f} MB   "
                f"largest worker {kids / 1e6:7.0f} MB   cores busy on average {busy:.2f}"
            )
        bound = many[1] + opts.jobs * many[2]
        print(
            f"speed-up with {opts.jobs} jobs: {one[0] / many[0]:.2f}x "
            f"({opts.ranks * size / 1e6 / many[0]:.0f} MB/s of JSON)"
        )
        print(
            f"job peak RSS bound (parent + {opts.jobs} x worker): {bound / 1e9:.2f} GB "
            f"(target <= 1.5 GB); with 1 job: {max(one[1], one[2]) / 1e9:.2f} GB"
        )
        one_peak = max(one[1], one[2])
        print(
            f"ratios, 1 vs {opts.jobs} jobs in this run: time {one[0] / many[0]:.2f}x faster "
            f"with {opts.jobs}, peak RSS {bound / one_peak:.2f}x that of 1 job "
            f"(load average at start: {load_at_start})"
        )
        print(f"per-rank tables identical (1 vs {opts.jobs} jobs): {same}")
        ok = same and bound <= 1.5e9
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("POLARS_MAX_THREADS", "1")
    sys.exit(main())
