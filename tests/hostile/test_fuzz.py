"""The fuzzing harness (benchmarks/fuzz.py) on a short, fixed budget: hostile inputs through
info, metrics --json, convert and run; exit 0 or 2, one error line, no traceback, no file
changed but the one asked for. `python benchmarks/fuzz.py` runs the long campaign.

The budget is a number of cases (deterministic), not a time: tests assert behaviour.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]


def _fuzz_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("moetrace_fuzz", REPO / "benchmarks" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


fuzz = _fuzz_module()


def test_fuzz_campaign_short_budget() -> None:
    counts = fuzz.campaign(cases=120, seed=12)
    assert counts.cases == 120
    assert set(counts.by_command) == {
        "info",
        "metrics",
        "convert",
        "run",
        "sweep",
        "calibrate",
        *fuzz.TABLE_COMMANDS,
    }
    assert counts.by_exit[2] > 0 and counts.by_exit[0] > 0  # both outcomes are exercised
    assert counts.failures == [], "\n".join(counts.failures)
    assert counts.tracebacks == counts.files_damaged == counts.multi_line_errors == 0
    assert counts.raw_escapes == 0


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case_seed=st.integers(0, 2**32 - 1))
def test_fuzz_cases_chosen_by_hypothesis(case_seed: int, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("fuzz")
    seeds = _seeds(tmp_path_factory)
    counts = fuzz.Counts()
    fuzz.run_case(random.Random(case_seed), seeds, root, counts)
    assert counts.cases == 1
    assert counts.failures == [], counts.failures


_SEEDS: list[Path] = []


def _seeds(tmp_path_factory) -> list[Path]:  # type: ignore[no-untyped-def]
    if not _SEEDS:
        _SEEDS.extend(fuzz.seed_files(tmp_path_factory.mktemp("seeds")))
    return _SEEDS


def test_the_checker_catches_what_it_claims(tmp_path: Path) -> None:
    """The harness's own checks can fail: a traceback, a second error line, a changed file."""

    class Result:
        def __init__(self, exit_code: int, stderr: str, exception: BaseException | None) -> None:
            self.exit_code, self.stderr, self.exception = exit_code, stderr, exception
            self.exc_info = None

    counts = fuzz.Counts()
    fuzz._check(["info"], Result(1, "", ValueError("x")), {}, {}, tmp_path, None, counts)
    fuzz._check(
        ["info"],
        Result(2, "moetrace: error: a\nmore\n", SystemExit(2)),
        {},
        {},
        tmp_path,
        None,
        counts,
    )
    fuzz._check(
        ["info"], Result(0, "", None), {"in.json": "a"}, {"in.json": "b"}, tmp_path, None, counts
    )
    fuzz._check(["run"], Result(3, "", SystemExit(3)), {}, {}, tmp_path, None, counts)
    assert (counts.tracebacks, counts.multi_line_errors, counts.files_damaged, counts.bad_exit) == (
        1,
        1,
        1,
        1,
    )
