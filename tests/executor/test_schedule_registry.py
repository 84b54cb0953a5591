"""Schedules are plug-ins: a new one is one class registered by name (here a toy in this file),
and nothing outside the schedule modules tests a schedule's name."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.run import simulate_run
from moetrace.executor.schedules import (
    get_schedule,
    register,
    schedule_names,
    unregister,
)
from moetrace.executor.schedules.sequential import Sequential

ROOT = Path(__file__).resolve().parents[2]
SMALL: dict[str, Any] = {"ranks": 4, "tokens": 128}


class Toy(Sequential):
    """The worked example of docs/development.md: a schedule that reuses every part of
    sequential under its own name (a real one overrides what differs)."""

    name = "toy"
    summary = "sequential's operator kernels (a test's example)"
    demo_label = ""


@pytest.fixture
def toy() -> Iterator[Toy]:
    schedule = Toy()
    register(schedule)
    yield schedule
    unregister(schedule.name)


def test_a_registered_schedule_runs_and_equals_the_parts_it_reuses(toy: Toy) -> None:
    assert "toy" in schedule_names() and get_schedule("toy") is toy
    mine = simulate_run(**SMALL, schedule="toy")
    ref = simulate_run(**SMALL, schedule="sequential")
    assert mine.options.schedule == "toy"
    assert mine.makespan_ns == ref.makespan_ns
    np.testing.assert_array_equal(mine.start, ref.start)
    np.testing.assert_array_equal(mine.lane, ref.lane)
    # its plan label comes from the schedule it reuses, under its own name
    assert mine.plan == ref.plan.replace("sequential", "toy")


def test_a_registered_schedule_is_on_the_command_line(toy: Toy) -> None:
    runner = CliRunner()
    helped = runner.invoke(main, ["run", "--help"])
    assert "sequential|chunked|tile|toy." in helped.output
    ran = runner.invoke(
        main, ["run", "--ranks", "4", "--tokens", "128", "--schedule", "toy", "--json"]
    )
    assert ran.exit_code == 0, ran.output
    assert json.loads(ran.output[ran.output.index("{") :])["makespan_ns"] > 0


def test_ablations_are_the_schedules_own(toy: Toy) -> None:
    with pytest.raises(ExecutorInputError, match="apply to the tile schedule only"):
        simulate_run(**SMALL, schedule="toy", dynamic=True)
    with pytest.raises(ExecutorInputError, match=r"known: sequential, chunked, tile, toy\)"):
        simulate_run(**SMALL, schedule="nope")


def test_unregistered_schedule_is_gone() -> None:
    assert "toy" not in schedule_names()
    with pytest.raises(ExecutorInputError, match="unknown schedule 'toy'"):
        get_schedule("toy")


def test_docs_list_every_registered_schedule() -> None:
    text = (ROOT / "docs" / "executor.md").read_text()
    section = text[text.index("**Schedules**") :]
    listed = re.findall(r"^- `([a-z_]+)`[:( ]", section[: section.index("\n\n")], flags=re.M)
    assert listed == list(schedule_names())


def test_help_lists_the_registry() -> None:
    helped = CliRunner().invoke(main, ["run", "--help"])
    assert "|".join(schedule_names()) + "." in helped.output


NAME_TEST = re.compile(
    r"""(==|!=)\s*["'](sequential|chunked|tile)["']|["'](sequential|chunked|tile)["']\s*(==|!=)"""
    r"""|\bschedule\s+(not\s+)?in\s*[(\[{]"""
)


def test_no_schedule_name_tests_outside_the_schedule_modules() -> None:
    """Behaviour comes from the `Schedule` objects: no `opts.schedule == "tile"` anywhere in
    the executor or its commands, only in the schedule modules themselves."""
    schedules = ROOT / "moetrace" / "executor" / "schedules"
    own = {schedules / f"{m}.py" for m in ("sequential", "chunked", "tile", "registry")}
    files = [*(ROOT / "moetrace" / "executor").rglob("*.py")]
    files += [
        ROOT / "moetrace" / "commands" / f for f in ("executor_cmds.py", "executor_common.py")
    ]
    found = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in files
        if path not in own
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if NAME_TEST.search(line)
    ]
    assert found == []


def test_the_name_test_grep_finds_a_planted_name_test() -> None:
    assert NAME_TEST.search('    tile = opts.schedule == "tile"')
    assert NAME_TEST.search("if 'chunked' != kind:")
    assert not NAME_TEST.search('name = "tile"')
