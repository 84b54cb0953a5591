"""Helpers shared by the executor commands: error mapping, progress bar, run summary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from moetrace.commands._common import UserError
from moetrace.commands.numbers import check_hw_overrides

if TYPE_CHECKING:
    from moetrace.executor.config import SimulationConfig
    from moetrace.trace.model import Trace


MAX_RUNS = 200
"""Simulations one command runs without --yes (one run of a 64-rank layer: seconds)."""


def check_run_count(runs: int, what: str, yes: bool) -> None:
    """Say how many simulations a request means; refuse more than MAX_RUNS without --yes."""
    if runs > MAX_RUNS and not yes:
        raise UserError(
            f"{what}: {runs:,} runs requested (more than {MAX_RUNS}); add --yes to run them all"
        )


@contextmanager
def executor_errors() -> Iterator[None]:
    """Executor input errors become the CLI's one-line UserError (exit 2)."""
    from moetrace.executor.errors import ExecutorInputError

    try:
        yield
    except ExecutorInputError as exc:
        raise UserError(str(exc)) from None


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[str, float], None] | None]:
    """A rich progress bar on stderr (only when stderr is a terminal)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("simulating", total=1.0)

        def update(stage: str, fraction: float) -> None:
            bar.update(task, completed=fraction, description=f"simulating: {stage}")

        yield update


def run_figures(trace: Trace) -> dict[str, Any]:
    """The run's figures: executor meta plus the analyzer's util/exposed/critical-path/MFU."""
    from moetrace.analysis.report import analyze

    ex = trace.meta["executor"]
    summary = analyze(trace).summary()
    util = {k.split(":", 1)[1]: v for k, v in summary.items() if k.startswith("util:")}
    return {
        "makespan_ns": ex["makespan_ns"],
        "tasks": ex["tasks"],
        "tokens_per_s": ex["tokens_per_s"],
        "util": util,
        "exposed_ratio": summary.get("exposed_ratio"),
        "cp_comm_ratio": summary.get("cp_comm_ratio"),
        "mfu": summary.get("mfu"),
        # MFU over the layer's makespan on every rank: all ranks' GEMM FLOPs / (peak x makespan)
        "mfu_makespan": ex.get("mfu_makespan"),
        # what no schedule can beat (executor/floors.py), so anyone can check a run against physics
        "floors_ns": ex.get("floors_ns"),
        "flops": ex.get("flops"),
        "peak_flops": ex.get("peak_flops"),
        "hbm_bytes": ex.get("hbm_bytes"),
        "warnings": ex.get("warnings", []),
        "notes": ex.get("notes", []),  # stated assumptions, e.g. an extrapolated link rate
        # sums over ranks (ns), for derived figures such as "util if part of the comm were hidden"
        "window_ns": summary.get("window_ns"),
        "comm_ns": summary.get("comm_ns"),
        "exposed_comm_ns": summary.get("exposed_comm_ns"),
    }


def run_simulation(config: SimulationConfig, show_progress: bool = True) -> Trace:
    """Simulate `config` (a progress bar on a terminal); executor errors become one line."""
    from moetrace.executor.run import simulate

    with executor_errors(), progress_bar(show_progress) as progress:
        return simulate(config, progress=progress)


def hw_overrides(pairs: tuple[str, ...], hw_file: str | None) -> dict[str, Any]:
    from moetrace.executor.hardware import load_overrides_file, parse_overrides

    with executor_errors():
        out: dict[str, Any] = load_overrides_file(hw_file) if hw_file else {}
        out.update(parse_overrides(pairs))
    return check_hw_overrides(out)


def simulate_makespan(config: SimulationConfig) -> int:
    """Simulate without building a trace; the makespan (ns). Top-level for `demo`'s pool."""
    from moetrace.executor.run import simulate_run

    return simulate_run(config).makespan_ns


def simulate_write_figures(config: SimulationConfig, path: str) -> dict[str, Any]:
    """Simulate, write the trace to `path` (overwriting) and return its summary.

    Top-level so that `moetrace demo` can run the two schedules in two processes.
    """
    from moetrace.executor.run import simulate

    trace = simulate(config)
    trace.write(path, force=True)
    return run_figures(trace)
