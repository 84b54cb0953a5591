"""Mutation check: plant the review's bugs one at a time in a scratch copy of the package and
assert that the suite's relevant tests catch each (a mutant that passes is a test hole).

Each mutant is (file, exact text, replacement, test selection). The copy lives in a temporary
folder put first on PYTHONPATH, so the checkout is never edited. The unmutated copy must pass
the same selections first (else a "caught" mutant would prove nothing).

Usage: python benchmarks/mutants.py   (exit 1 if any mutant survives or fails to apply)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent


class Mutant(NamedTuple):
    """One planted bug: replace `old` by `new` in `path` and expect `tests` to fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant(
        "exposed all-to-all := all all-to-all",
        "moetrace/analysis/comm.py",
        "iv.lengths_by_group(iv.difference(a2a_set, compute), n)",
        "iv.lengths_by_group(a2a_set, n)",
        ("tests/analysis/test_cases.py",),
    ),
    Mutant(
        "critical path: track order wins ties over a dependency",
        "moetrace/analysis/critical_path.py",
        "tie = (et == EDGE_TRACK).astype(np.int64) * (n + 1) + src",
        "tie = (et != EDGE_TRACK).astype(np.int64) * (n + 1) + src",
        ("tests/analysis/test_cases.py",),
    ),
    Mutant(
        "steps: an event at a step marker's start falls into the step before",
        "moetrace/analysis/windows.py",
        'pos = np.searchsorted(mkey[order], qkey, side="right") - 1',
        'pos = np.searchsorted(mkey[order], qkey, side="left") - 1',
        ("tests/analysis/test_cases.py", "tests/analysis/test_properties.py"),
    ),
    Mutant(
        "track order: an event ending exactly at the start is no predecessor",
        "moetrace/analysis/critical_path.py",
        'at = np.searchsorted(end_key, start_key, side="right") - 1',
        'at = np.searchsorted(end_key, start_key, side="left") - 1',
        ("tests/analysis/test_cases.py", "tests/analysis/test_properties.py"),
    ),
    Mutant(
        "summary: exposed ratio pooled from the overlapped ns",
        "moetrace/analysis/report.py",
        'out["exposed_ratio"] = (out["exposed_comm_ns"] or 0.0) / comm if comm else None',
        'out["exposed_ratio"] = (out["overlapped_ns"] or 0.0) / comm if comm else None',
        ("tests/analysis/test_cases.py", "tests/analysis/test_properties.py"),
    ),
)


def run_tests(root: Path, tests: tuple[str, ...]) -> bool:
    """True when the selected tests pass with the package under `root` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    return done.returncode == 0


def main() -> int:
    """Run every mutant; print one line each; 0 when all are caught."""
    failures = 0
    with tempfile.TemporaryDirectory(prefix="moetrace-mutants-") as tmp:
        root = Path(tmp)
        for part in ("moetrace", "tests", "pyproject.toml"):
            src = REPO / part
            if src.is_dir():
                shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, root / part)
        selections = sorted({t for m in MUTANTS for t in m.tests})
        if not run_tests(root, tuple(selections)):
            print("baseline: the unmutated selections fail; nothing can be concluded")
            return 1
        for m in MUTANTS:
            target = root / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                print(f"NOT APPLIED  {m.name}: the text is not found exactly once in {m.path}")
                failures += 1
                continue
            target.write_text(original.replace(m.old, m.new))
            try:
                caught = not run_tests(root, m.tests)
            finally:
                target.write_text(original)
            print(f"{'caught  ' if caught else 'SURVIVED'}  {m.name}")
            failures += not caught
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
