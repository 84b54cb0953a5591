"""Fuzzing campaign: hostile inputs through every command; no traceback, no damaged file.

Seeds are small real traces (../shared/real_traces/, when present), moetrace's own Chrome
JSON and .pftrace (made from them, so the stored `"moetrace"` tables get mutated too) and
the malformed test files. Each case mutates a seed (structured JSON edits with hostile values,
byte edits, gzip wrapping/truncation) or picks bad command-line values, runs one command
in-process (info, info --json, metrics --json, convert to .json/.json.gz/.pftrace with and
without an existing output, run with bad numbers, and the table commands moe, collectives,
query and compare) and checks:

- exit status 0 or 2, never an exception (a traceback);
- on exit 2, exactly one `moetrace: error: ...` line (warnings aside);
- no file changed but the one asked for (inputs byte-identical, no temporary files left, an
  existing output untouched without --force);
- no raw ESC byte in a table command's output (names are shown escaped, never act on the
  terminal).

The test suite runs a short fixed budget (tests/hostile/test_fuzz.py); this script runs a
long one and prints the counts:

    python benchmarks/fuzz.py [--cases N] [--seconds S] [--seed K]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
REAL_TRACES = Path(
    os.environ.get("MOETRACE_REAL_TRACES", REPO.parent / "shared" / "real_traces")
).resolve()  # a worktree has no ../shared: point the variable at it
MALFORMED = REPO / "tests" / "data" / "malformed"
MAX_SEED_BYTES = 2_000_000  # bigger seeds make cases slow without finding more

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**31,
    2**53 + 1,
    2**63,
    -(2**63) - 1,
    10**30,
    1e308,
    -1e308,
    -0.0,
    5e-324,
    1.5,
    "",
    "07",
    "00",
    "-07",
    "1e999",
    "-9.2e15",
    "9223372036854775807",
    "NaN",
    "\x1b[31mred\x1b[0m",
    "[bold]markup[/]",
    "\x00\x01\x7f",
    "é✓中\u202e",
    "a" * 5000,
    [],
    {},
    [1, [2, [3]]],
    {"a": {"b": None}},
]
KEYS = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "id2", "bp", "args", "s"]
KEYS += ["bind_id", "flow_in", "flow_out", "kind", "flops", "bytes"]
PHASES = [*list("XBEiIRbneCstfMSTFpONDPvVc()"), "", "XX", "x"]
BAD_NUMBERS = {
    "--seed": ["-1", "2.5", "1e3", str(2**64), "", "nan"],
    "--ranks": ["0", "-4", "3", "1e9", "x"],
    "--tokens": ["0", "-1", "1.5", str(2**40)],
    "--chunks": ["0", "-2"],
    "--tile-rows": ["0", "-128"],
    "--n-tile": ["0", "7.5"],
    "--routing": ["zipf:-1", "zipf:nan", "zipf:inf", "zipf:", "counts:/nonexistent", "nope"],
    "--seeds": ["0", "100000", "-1"],
    "--schedule": ["nope", ""],
    "--preset": ["nope"],
    "--hardware": ["nope"],
}
HW_BAD = [
    "link_bw=1",
    "link_bw=nan",
    "link_bw=-1",
    "link_bw=inf",
    "hbm_bw=0",
    "gemm_eff=2",
    "n_aic=0",
    "n_aic=1.5",
    "comm_aiv=1000",
    "clock_hz=abc",
    "nokey=1",
    "dispatch_bw=garbage",
    "dispatch_bw=8:nan",  # issue 27: NaN/Inf inside a compound value
    "dispatch_bw=8:inf,64:1e9",
    "novalue",
    "=1",
]
PEAK_BAD = ["-1", "0", "nan", "inf", "1e9", "x"]


@dataclass
class Counts:
    """What a campaign found (every count but `cases` and `by_command` should stay 0)."""

    cases: int = 0
    tracebacks: int = 0
    bad_exit: int = 0
    multi_line_errors: int = 0
    files_damaged: int = 0
    raw_escapes: int = 0  # table output with a raw ESC byte (a name acting on the terminal)
    by_command: Counter[str] = field(default_factory=Counter)
    by_exit: Counter[int] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    last: str = ""  # the last case's command line (for the slowest-case list)
    log: Any = None  # a text stream: each case's command line before it runs (--log)
    slowest: list[tuple[float, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.tracebacks
            or self.bad_exit
            or self.multi_line_errors
            or self.files_damaged
            or self.raw_escapes
        )


def seed_files(workdir: Path, include_real: bool = True) -> list[Path]:
    """Seeds copied into `workdir/seeds`: small real traces, malformed files, and moetrace's
    own JSON and .pftrace written from one real trace (or a synthetic one)."""
    from moetrace.trace.io import load, write_trace

    out = workdir / "seeds"
    out.mkdir(parents=True, exist_ok=True)
    found: list[Path] = []
    if include_real and REAL_TRACES.is_dir():
        found += [
            p
            for p in sorted(REAL_TRACES.rglob("*"))
            if p.is_file()
            and p.name.endswith((".json", ".json.gz"))
            and p.name != "run_meta.json"
            and p.stat().st_size <= MAX_SEED_BYTES
        ]
    found += [p for p in sorted(MALFORMED.glob("*.json*")) if p.is_file()]
    seeds: list[Path] = []
    for i, p in enumerate(found):
        target = out / f"{i:03d}_{p.name}"
        shutil.copyfile(p, target)
        seeds.append(target)
    synthetic = out / "synthetic.json"
    events = [
        {"ph": "X", "name": f"k{i}", "cat": "kernel", "pid": 0, "tid": i % 3, "ts": i * 7, "dur": 5}
        for i in range(40)
    ]
    events += [{"ph": "s", "id": 1, "pid": 0, "tid": 0, "ts": 1, "cat": "ac2g", "name": "f"}]
    events += [{"ph": "f", "id": 1, "pid": 0, "tid": 1, "ts": 8, "cat": "ac2g", "name": "f"}]
    events += [{"ph": "C", "name": "mem", "pid": 0, "ts": 3, "args": {"value": 7}}]
    synthetic.write_text(json.dumps({"distributedInfo": {"rank": 0}, "traceEvents": events}))
    seeds.append(synthetic)
    base = next((s for s in seeds if "flow_events_json_v1" in s.name), synthetic)
    trace = load(base)
    seeds.append(write_trace(trace, out / "own.json", force=True))
    seeds.append(write_trace(trace, out / "own.pftrace", force=True))
    return seeds


# ------------------------------------------------------------------ mutations
def _raw_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            return data
    return data


def _hostile(rng: random.Random) -> Any:
    value = rng.choice(HOSTILE_VALUES)
    if rng.random() < 0.05:  # deep nesting: a marker replaced after json.dumps (which recurses)
        return f"{_DEEP}{rng.choice([50, 1500, 5000])}"
    return value


_DEEP = "@@deep@@"
_DEEP_RE = re.compile(r'"@@deep@@(\d+)"')


def _expand_deep(text: str) -> str:
    return _DEEP_RE.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)


def mutate_json(doc: Any, rng: random.Random) -> Any:
    """One structured edit of a decoded trace: a field of an event, an event's phase, the
    container, the top-level metadata or moetrace's stored tables."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    op = rng.randrange(10)
    if isinstance(events, list) and events and op < 6:
        ev = rng.choice(events)
        if not isinstance(ev, dict):
            return doc
        if op == 0:
            ev[rng.choice(KEYS)] = _hostile(rng)
        elif op == 1 and ev:
            ev.pop(rng.choice(list(ev)), None)
        elif op == 2:
            ev["ph"] = rng.choice(PHASES)
        elif op == 3:
            ev["ts"] = rng.choice([9.2e15, -9.2e15, 4.6e15, "1736408883688177.9305", 2**64])
            ev["dur"] = rng.choice([1e15, -1, 0, "12.5", 2**63])
        elif op == 4:
            events.insert(rng.randrange(len(events) + 1), _hostile(rng))
        else:
            del events[rng.randrange(len(events))]
        return doc
    if isinstance(doc, dict):
        if op == 6:
            doc["distributedInfo"] = {"rank": _hostile(rng)}
        elif op == 7 and isinstance(doc.get("moetrace"), dict):
            _mutate_stored(doc["moetrace"], rng)
        elif op == 8:
            doc["traceEvents"] = _hostile(rng)
        else:
            return doc["traceEvents"] if isinstance(doc.get("traceEvents"), list) else doc
        return doc
    return {"traceEvents": doc} if op == 9 else doc


def _mutate_stored(stored: dict[str, Any], rng: random.Random) -> None:
    """Edits of the stored tables a moetrace file carries (lanes, tracks, deps, meta)."""
    table = rng.choice(["tracks", "lanes", "deps", "meta", "event_ids", "version"])
    value = stored.get(table)
    if isinstance(value, dict) and value:
        column = rng.choice(list(value))
        cells = value[column]
        if isinstance(cells, list) and cells and rng.random() < 0.7:
            cells[rng.randrange(len(cells))] = _hostile(rng)
        elif isinstance(cells, list) and cells:
            cells.pop()
        else:
            value[column] = _hostile(rng)
    else:
        stored[table] = _hostile(rng)


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """One byte-level edit: truncate, flip, insert, delete or duplicate a span."""
    if not data:
        return bytes([rng.randrange(256)])
    n = len(data)
    op = rng.randrange(6)
    at = rng.randrange(n)
    if op == 5:  # issue 27: a valid start, then zeros or control bytes (a damaged disk)
        fill = rng.choice([b"\x00", b"\x01", b"\x1f"])
        return data[:at] + fill * rng.choice([1, 4096, 1 << 20])
    if op == 0:
        return data[:at]
    if op == 1:
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    if op == 2:
        junk = rng.choice([b",", b"]", b"}", b"{", b'"', b"\\", b"\x00", b"\xff\xfe", b"[" * 3000])
        return data[:at] + junk + data[at:]
    span = rng.randrange(1, min(64, n - at) + 1)
    if op == 3:
        return data[:at] + data[at + span :]
    return data[:at] + data[at : at + span] * 2 + data[at + span :]


def make_input(seed: Path, rng: random.Random, target_dir: Path) -> Path:
    """A mutated copy of `seed` in `target_dir` (json, json.gz or pftrace, like the seed)."""
    raw = _raw_bytes(seed)
    pftrace = seed.name.endswith(".pftrace")
    if not pftrace and rng.random() < 0.6:
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            doc = None
        if doc is not None:
            for _ in range(rng.randint(1, 3)):
                doc = mutate_json(doc, rng)
            raw = _expand_deep(json.dumps(doc, ensure_ascii=rng.random() < 0.5)).encode()
    if pftrace or rng.random() < 0.5:
        for _ in range(rng.randint(1, 2)):
            raw = mutate_bytes(raw, rng)
    if pftrace:
        return _write_new(target_dir / "input.pftrace", raw)
    if rng.random() < 0.3:
        packed = gzip.compress(raw, 1)
        if rng.random() < 0.3:
            packed = packed[: rng.randrange(len(packed) + 1)]
        elif rng.random() < 0.2:
            packed = packed + gzip.compress(b"", 1)
        elif rng.random() < 0.2 and len(packed) >= 8:  # issue 27: a member's CRC-32 damaged
            packed = packed[:-8] + bytes([packed[-8] ^ 0xFF]) + packed[-7:]
        return _write_new(target_dir / "input.json.gz", packed)
    return _write_new(target_dir / "input.json", raw)


def _write_new(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# ------------------------------------------------------------------ one case
def _snapshot(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _command(
    rng: random.Random, inputs: list[Path], case_dir: Path
) -> tuple[list[str], Path | None]:
    """Command line and the one file it may write (None: it must write nothing)."""
    kind = rng.choice(
        [
            "info",
            "info --json",
            "metrics",
            "convert",
            "convert",
            "run",
            *TABLE_COMMANDS,
            "convert self",
            "sweep",
            "calibrate",
        ]
    )
    args = [str(p) for p in inputs]
    if kind in ("convert self", "sweep", "calibrate"):
        return _round3_command(kind, rng, inputs, case_dir)
    if kind in TABLE_COMMANDS:
        return _table_command(kind, args, rng), None
    if kind == "info":
        return ["info", *args], None
    if kind == "info --json":
        return ["info", "--json", *args], None
    if kind == "metrics":
        extra = ["--peak-tflops", rng.choice(PEAK_BAD)] if rng.random() < 0.3 else []
        return ["metrics", "--json", *args, *extra], None
    if kind == "convert":
        out = case_dir / ("out" + rng.choice([".json", ".json.gz", ".pftrace", ".txt"]))
        force = rng.random() < 0.5
        if rng.random() < 0.4 and out.suffix != ".txt":
            out.write_bytes(b"previous output")
        return ["convert", *args, "-o", str(out), *(["--force"] if force else [])], (
            out if force or not out.exists() else None
        )
    option = rng.choice([*BAD_NUMBERS, "--hw", "--hw"])
    value = rng.choice(HW_BAD) if option == "--hw" else rng.choice(BAD_NUMBERS[option])
    out = case_dir / "run.json"
    return ["run", "--ranks", "4", "--tokens", "64", option, value, "-o", str(out)], out


def _round3_command(
    kind: str, rng: random.Random, inputs: list[Path], case_dir: Path
) -> tuple[list[str], Path | None]:
    """Issue 27's cases: an output that is an input (any spelling, --force or not), empty or
    huge sweep grids, --set 0. None of them may write anything."""
    args = [str(p) for p in inputs]
    if kind == "convert self":
        first = inputs[0]
        if first.is_dir():
            files = sorted(p for p in first.rglob("*") if p.is_file())
            target = files[0] if files else first / "x.json"
        else:
            target = first
        if target.exists():
            spelling = rng.choice(["same", "dotted", "symlink", "hardlink"])
            if spelling == "dotted":
                target = target.parent / "." / ".." / target.parent.name / target.name
            elif spelling == "symlink":
                link = case_dir / "link.json"
                link.symlink_to(target)
                target = link
            elif spelling == "hardlink":
                hard = case_dir / "hard.json"
                try:
                    hard.hardlink_to(target)
                    target = hard
                except OSError:
                    pass
        force = ["--force"] if rng.random() < 0.7 else []
        return ["convert", *args, "-o", str(target), *force], None
    if kind == "sweep":
        out = case_dir / "grid.csv"
        grid = rng.choice(
            [
                ["--ranks", ""],
                ["--tokens", ","],
                ["--schedule", " , "],
                [
                    "--tokens",
                    ",".join(str(64 + i) for i in range(20)),
                    "--seed",
                    "1,2,3,4,5,6,7,8,9,10,11",
                ],
            ]
        )
        return ["sweep", "--ranks", "4", "--tokens", "64", *grid, "-o", str(out)], None
    pair = rng.choice(["hidden=0", "tokens=0", "experts=-1", "top_k=x", "nokey=1"])
    out = case_dir / "hw.toml"
    return ["calibrate", *args, "--set", pair, "-o", str(out)], None


TABLE_COMMANDS = ("moe", "collectives", "query", "compare")
"""Commands that print tables of names for people: their output must show no raw escape."""

QUERIES = [
    "SELECT name, count(*) AS n FROM events GROUP BY name ORDER BY n DESC",
    "SELECT * FROM tracks",
    "SELECT args FROM events WHERE args IS NOT NULL LIMIT 5",
    "SELECT name FROM nope",
    "SELEC name",
    # issue 27: the sandbox (only the trace's tables, read-only, bounded size)
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('x.parquet')",
    "DROP TABLE events",
    "TRUNCATE events",
    "CREATE TABLE t AS SELECT 1 AS a",
    "COPY events TO 'leak.csv'",
    "ATTACH 'other.db' AS o",
    "SELECT 1 AS a; DROP TABLE events",
    "SELECT " + "+".join(["dur"] * 20_000) + " AS s FROM events",
    "SELECT " + "(" * 200 + "1" + ")" * 200 + " AS s",
]


def _table_command(kind: str, args: list[str], rng: random.Random) -> list[str]:
    if kind == "query":
        return ["query", args[0], rng.choice(QUERIES), *(["--json"] if rng.random() < 0.2 else [])]
    if kind == "compare":
        return ["compare", args[0], args[-1]]
    if kind == "moe" and rng.random() < 0.2:  # issue 27: a rules file that is not UTF-8
        rules = Path(args[0]).parent / "rules.toml"
        rules.write_bytes(rng.choice([b'[[rule]]\nname = "caf\xe9"\n', b"\xff\xfe\x00", b"["]))
        return ["moe", *args, "--rules", str(rules)]
    return [kind, *args]


def run_case(rng: random.Random, seeds: list[Path], root: Path, counts: Counts) -> None:
    """Make one case in a fresh folder, run it, check the outcome, update `counts`."""
    case_dir = Path(tempfile.mkdtemp(dir=root))
    try:
        n_inputs = 1 if rng.random() < 0.85 else 2
        inputs = []
        for i in range(n_inputs):
            sub = case_dir / f"in{i}"
            sub.mkdir()
            inputs.append(make_input(rng.choice(seeds), rng, sub))
        if rng.random() < 0.05:
            inputs = [inputs[0].parent]  # a directory
        elif rng.random() < 0.02:  # issue 27: a symlink loop
            loop_a, loop_b = case_dir / "loop_a.json", case_dir / "loop_b.json"
            loop_a.symlink_to(loop_b)
            loop_b.symlink_to(loop_a)
            inputs = [loop_a]
        args, allowed = _command(rng, inputs, case_dir)
        if counts.log is not None:
            print(f"case {counts.cases}: {' '.join(args)}", file=counts.log, flush=True)
        before = _snapshot(case_dir)
        result = CliRunner().invoke(_main(), args)
        after = _snapshot(case_dir)
        _check(args, result, before, after, case_dir, allowed, counts)
    finally:
        shutil.rmtree(case_dir, ignore_errors=True)


def _main() -> Any:
    from moetrace.cli import main

    return main


def _check(
    args: list[str],
    result: Any,
    before: dict[str, str],
    after: dict[str, str],
    case_dir: Path,
    allowed: Path | None,
    counts: Counts,
) -> None:
    counts.cases += 1
    counts.by_command[args[0]] += 1
    counts.by_exit[result.exit_code] += 1
    label = " ".join(a.replace(str(case_dir), "<case>") for a in args)
    counts.last = label
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        counts.tracebacks += 1
        where = traceback.extract_tb(result.exc_info[2])[-1] if result.exc_info else None
        at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        counts.failures.append(f"traceback {type(exc).__name__}{at}: {str(exc)[:200]} <- {label}")
        return
    if args[0] in TABLE_COMMANDS and "\x1b" in result.stdout:
        counts.raw_escapes += 1
        counts.failures.append(f"raw ESC in the output <- {label}")
    if result.exit_code not in (0, 2):
        counts.bad_exit += 1
        counts.failures.append(f"exit {result.exit_code} <- {label}")
    if result.exit_code == 2:
        warn = ("warning: ", "moetrace: warning: ")
        lines = [ln for ln in result.stderr.splitlines() if not ln.startswith(warn)]
        if len(lines) != 1 or not lines[0].startswith("moetrace: error: "):
            counts.multi_line_errors += 1
            counts.failures.append(f"error output {lines[:3]!r} <- {label}")
    allowed_key = str(allowed.relative_to(case_dir)) if allowed is not None else None
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    changed.discard(allowed_key)  # type: ignore[arg-type]
    if changed:
        counts.files_damaged += 1
        counts.failures.append(f"files changed {sorted(changed)} <- {label}")


def campaign(
    cases: int,
    seed: int = 0,
    seconds: float | None = None,
    include_real: bool = True,
    log: Any = None,
) -> Counts:
    """Run `cases` cases (or until `seconds` have passed), deterministic for a `seed`."""
    counts = Counts(log=log)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="moetrace-fuzz-") as folder:
        root = Path(folder)
        seeds = seed_files(root, include_real)
        start = time.perf_counter()
        for _ in range(cases):
            began = time.perf_counter()
            run_case(rng, seeds, root, counts)
            counts.slowest.append((time.perf_counter() - began, counts.last))
            counts.slowest = sorted(counts.slowest, reverse=True)[:5]
            if seconds is not None and time.perf_counter() - start > seconds:
                break
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", action="store_true", help="print each case before it runs")
    opts = parser.parse_args(argv)
    start = time.perf_counter()
    counts = campaign(opts.cases, opts.seed, opts.seconds, log=sys.stderr if opts.log else None)
    elapsed = time.perf_counter() - start
    print(f"cases tried      {counts.cases}  ({counts.cases / elapsed:.1f}/s, seed {opts.seed})")
    print(f"by command       {dict(sorted(counts.by_command.items()))}")
    print(f"by exit status   {dict(sorted(counts.by_exit.items()))}")
    print(f"tracebacks       {counts.tracebacks}")
    print(f"bad exit status  {counts.bad_exit}")
    print(f"multi-line error {counts.multi_line_errors}")
    print(f"files damaged    {counts.files_damaged}")
    print(f"raw escapes      {counts.raw_escapes}")
    for seconds, label in counts.slowest:
        print(f"  slow case {seconds:.1f} s: {label}")
    for failure in counts.failures[:40]:
        print("  " + failure)
    return 0 if counts.ok else 1


if __name__ == "__main__":
    sys.exit(main())
