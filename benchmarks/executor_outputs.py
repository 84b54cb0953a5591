"""The executor's outputs, for proving a refactor changes no behaviour: `moetrace run` for every
schedule x 3 presets x 2 hardware profiles (trace + `--json` summary), the ablations, a few
bad inputs (stderr and exit code), `sweep`, `--hw-file`, the Python API and `validate --json`
(on a small case: `CASE`, the grid and the bandwidth EPs shrunk so that a pass stays short).

Usage: PYTHONPATH=CHECKOUT python benchmarks/executor_outputs.py OUT_DIR
Run it once with the code before the change and once after; `diff -r` of the two OUT_DIRs
must be empty (the traces byte-identical).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCHEDULES = ("sequential", "chunked", "tile")
PRESETS = ("deepseek-v3", "mixtral-8x7b", "qwen3-235b")
HARDWARE = ("ascend-a3", "h100")
SMALL = ["--ranks", "4", "--tokens", "128"]
ABLATIONS: dict[str, list[str]] = {
    "no_one_sided": ["--no-one-sided"],
    "no_l2": ["--no-l2"],
    "dynamic": ["--dynamic"],
    "order_expert": ["--order", "expert"],
    "order_arrival": ["--order", "arrival"],
    "all_off": ["--no-one-sided", "--no-l2", "--dynamic", "--order", "arrival"],
    "shared_fp8": ["--shared-expert", "--dispatch-dtype", "fp8"],
    "zipf_balanced": ["--routing", "zipf:1.2", "--placement", "balanced", "--seed", "3"],
    "window": ["--hw", "recv_buffer_bytes=4000000"],
    "tiles": ["--tile-rows", "64", "--n-tile", "256"],
    "seeds": ["--seeds", "2"],
    "chunked2": ["--schedule", "chunked", "--chunks", "2"],
    "chunked8_zipf": ["--schedule", "chunked", "--chunks", "8", "--routing", "zipf:1.5"],
    "sequential_h200": ["--schedule", "sequential", "--hardware", "h200"],
}
ERRORS: dict[str, list[str]] = {
    "bad_schedule": ["--schedule", "bogus"],
    "ablation_not_tile": ["--schedule", "chunked", "--dynamic"],
    "no_l2_sequential": ["--schedule", "sequential", "--no-l2"],
    "bad_order": ["--order", "sideways"],
    "bad_chunks": ["--schedule", "chunked", "--chunks", "0"],
    "bad_hw_key": ["--hw", "bogus=1"],
    "bad_ranks": ["--ranks", "x"],
    "too_large": ["--ranks", "64", "--tokens", "4096", "--tile-rows", "1"],
    "l2_too_small": ["--hw", "l2_bytes=1000"],
    "bad_preset": ["--preset", "nope"],
    "bad_hardware": ["--hardware", "nope"],
    "bad_dtype": ["--dispatch-dtype", "fp3"],
}
HW_FILE = "hbm_bw = 1.2e12\nlaunch_ns = 5000\n"
API = """
import json, sys
from moetrace.executor.run import simulate, simulate_run
t = simulate(ranks=4, tokens=128, schedule="chunked", chunks=2, preset="mixtral-8x7b")
t.write(sys.argv[1], force=True)
r = simulate_run(ranks=4, tokens=128, schedule="tile", order="expert", hardware="h100")
print(json.dumps({"makespan_ns": r.makespan_ns, "plan": r.plan, "n": int(r.timed.n)}))
"""
VALIDATE = """
import sys
import moetrace.commands.executor_validate as v
v.CASE.update(ranks=8, tokens=256)
v.GRID_RANKS, v.GRID_TOKENS = (4, 8), (128,)
v.REFERENCE_BW = {k: {8: x[8], 16: x[16]} for k, x in v.REFERENCE_BW.items()}
from moetrace.cli import main
sys.argv = ["moetrace", "validate", "--json"]
main()
"""


def _run(out: Path, name: str, argv: list[str]) -> None:
    """Run one command; keep its stdout, stderr and exit code under `name`."""
    p = subprocess.run(argv, cwd=out, capture_output=True, text=True, env=os.environ.copy())
    (out / f"{name}.stdout").write_text(p.stdout)
    (out / f"{name}.stderr").write_text(p.stderr)
    (out / f"{name}.rc").write_text(f"{p.returncode}\n")


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-c", "from moetrace.cli import main; main()"]
    for sched in SCHEDULES:
        for preset in PRESETS:
            for hw in HARDWARE:
                name = f"run_{sched}_{preset}_{hw}"
                argv = [*cli, "run", *SMALL, "--schedule", sched, "--preset", preset]
                _run(out, name, [*argv, "--hardware", hw, "--json", "-o", f"{name}.json"])
    for name, extra in ABLATIONS.items():
        _run(out, f"abl_{name}", [*cli, "run", *SMALL, *extra, "-o", f"abl_{name}.json"])
    for name, extra in ERRORS.items():
        _run(out, f"err_{name}", [*cli, "run", *SMALL, *extra])
    (out / "hw.toml").write_text(HW_FILE)
    _run(out, "hw_file", [*cli, "run", *SMALL, "--hw-file", "hw.toml", "--json"])
    _run(out, "hw_file_bad", [*cli, "run", *SMALL, "--hw-file", "missing.toml"])
    sweep = ["--ranks", "4,8", "--tokens", "128", "--schedule", "sequential,chunked,tile"]
    _run(out, "sweep", [*cli, "sweep", *sweep, "--routing", "balanced,zipf:1.2", "-o", "g.csv"])
    _run(out, "sweep_bad", [*cli, "sweep", "--schedule", "tile,bogus", "-o", "bad.csv"])
    _run(out, "api", [sys.executable, "-c", API, "api.json"])
    _run(out, "validate", [sys.executable, "-c", VALIDATE])


if __name__ == "__main__":
    main()
