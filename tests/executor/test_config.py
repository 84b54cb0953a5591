"""`SimulationConfig`: one frozen, typed config, checked once where it is built."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import moetrace.executor.config as config_module
from moetrace.executor.config import SimulationConfig
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import Hardware
from moetrace.executor.run import prepare, simulate, simulate_run
from moetrace.executor.schedules import ScheduleOptions, check_options
from moetrace.executor.workload import Workload

SMALL: dict[str, Any] = {"ranks": 4, "tokens": 128}


def test_config_is_frozen_and_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = check_options

    def counting(opts: ScheduleOptions, wl: Workload, hw: Hardware) -> None:
        calls.append(opts.schedule)
        real(opts, wl, hw)

    monkeypatch.setattr(config_module, "check_options", counting)
    config = SimulationConfig(**SMALL, schedule="chunked", chunks=2)
    assert calls == ["chunked"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.ranks = 8  # type: ignore[misc]
    trace = simulate(config)
    run = simulate_run(config)
    assert calls == ["chunked"]  # simulating it checks nothing again
    assert trace.meta["executor"]["schedule"]["chunks"] == 2
    assert run.options.chunks == 2 and run.workload.ranks == 4


def test_keywords_and_config_build_the_same_run() -> None:
    by_keywords = simulate_run(**SMALL, schedule="tile", order="expert")
    by_config = simulate_run(SimulationConfig(**SMALL, schedule="tile", order="expert"))
    assert by_keywords.makespan_ns == by_config.makespan_ns
    assert by_keywords.plan == by_config.plan


def test_prepare_returns_what_the_config_built() -> None:
    config = SimulationConfig(**SMALL, hardware="h100", hw_overrides={"launch_ns": 1234})
    wl, hw, opts, tasks = prepare(config)
    assert (wl.ranks, wl.tokens, hw.name, hw.launch_ns) == (4, 128, "h100", 1234)
    assert opts.schedule == "tile" and opts.order == "auto" and tasks > 0


def test_replace_checks_the_new_values() -> None:
    config = SimulationConfig(**SMALL)
    assert dataclasses.replace(config, seed=3).prepared.workload.seed == 3
    with pytest.raises(ExecutorInputError, match="chunks must be >= 1"):
        dataclasses.replace(config, chunks=0)


@pytest.mark.parametrize(
    ("keywords", "needle"),
    [
        ({"frobnicate": 1}, "unknown option"),
        ({"schedule": "bogus"}, "unknown schedule 'bogus'"),
        ({"schedule": "chunked", "l2": False}, "tile schedule only"),
        ({"order": "sideways"}, "unknown order"),
        ({"max_tasks": 10}, "run too large"),
    ],
)
def test_bad_config_is_one_line(keywords: dict[str, object], needle: str) -> None:
    with pytest.raises(ExecutorInputError, match=needle) as info:
        SimulationConfig.build(**SMALL, **keywords)
    assert "\n" not in str(info.value)


def test_config_and_keywords_together_are_refused() -> None:
    with pytest.raises(ExecutorInputError, match="not both: ranks"):
        simulate_run(SimulationConfig(**SMALL), ranks=8)
