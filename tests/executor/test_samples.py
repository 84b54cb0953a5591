"""The committed sample traces load, and the executor reproduces them."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from moetrace.executor.run import simulate
from moetrace.trace.io import load

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
FILES = sorted(p.name for p in SAMPLES.glob("*_*.*") if p.suffix in (".gz", ".pftrace"))


@functools.cache
def _fresh(schedule: str, routing: str):  # type: ignore[no-untyped-def]
    return simulate(ranks=8, tokens=512, n_tile=2048, schedule=schedule, routing=routing)


def test_all_samples_are_present() -> None:
    expected = {
        f"{s}_{r}.{e}"
        for s in ("sequential", "tile")
        for r in ("balanced", "zipf")
        for e in ("json.gz", "pftrace")
    }
    assert expected <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_sample_loads_and_matches_a_fresh_simulation(name: str) -> None:
    path = SAMPLES / name
    assert path.stat().st_size < 2_200_000
    trace = load(path)
    assert trace.problems() == []
    assert trace.ranks == list(range(8))
    ex = trace.meta["executor"]
    schedule, routing = name.split(".")[0].split("_")
    assert ex["schedule"]["name"] == schedule
    fresh = simulate(
        ranks=8,
        tokens=512,
        n_tile=2048,
        schedule=schedule,
        routing="zipf:1.2" if routing == "zipf" else "balanced",
    )
    assert fresh.meta["executor"]["makespan_ns"] == ex["makespan_ns"]
    assert fresh.events.height + 0 == trace.events.height
