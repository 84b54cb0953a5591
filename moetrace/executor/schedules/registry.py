"""The schedules by name: `sequential`, `chunked`, `tile` and any `register`ed one.

The CLI's `--schedule` help, the demo's rows, docs/executor.md's list (checked by a test) and
every check of a schedule's options come from here; nothing outside the schedule modules tests
a schedule's name.
"""

from __future__ import annotations

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import Hardware
from moetrace.executor.schedules.base import Schedule, ScheduleOptions
from moetrace.executor.schedules.chunked import CHUNKED
from moetrace.executor.schedules.sequential import SEQUENTIAL
from moetrace.executor.schedules.tile import TILE
from moetrace.executor.workload import Workload

ORDERS = ("auto", "arrival", "expert")
_REGISTRY: dict[str, Schedule] = {s.name: s for s in (SEQUENTIAL, CHUNKED, TILE)}
# the demo's rows in table order: the reference (the validation's baseline) first; the
# featured schedule (run first, opened in the viewer) last
DEMO = ("chunked", "sequential", "tile")


def register(schedule: Schedule) -> None:
    """Make `schedule` available by its name (replacing one of the same name)."""
    _REGISTRY[schedule.name] = schedule


def unregister(name: str) -> None:
    """Forget the schedule `name` (a test's toy schedule)."""
    _REGISTRY.pop(name, None)


def schedule_names() -> tuple[str, ...]:
    """Every registered schedule's name, in registration order."""
    return tuple(_REGISTRY)


def get_schedule(name: str) -> Schedule:
    """The schedule called `name`; an unknown name is an `ExecutorInputError` (one line)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ExecutorInputError(
            f"unknown schedule {name!r} (known: {', '.join(schedule_names())})"
        ) from None


def demo_schedules() -> list[Schedule]:
    """The schedules `moetrace demo` compares, in table order (reference first, featured last)."""
    return [_REGISTRY[name] for name in DEMO]


def check_options(opts: ScheduleOptions, wl: Workload, hw: Hardware) -> None:
    """Refuse options the schedule cannot run on this workload and hardware (one line)."""
    sched = get_schedule(opts.schedule)
    if opts.order not in ORDERS:
        raise ExecutorInputError(f"unknown order {opts.order!r} (known: {', '.join(ORDERS)})")
    if opts.chunks < 1:
        raise ExecutorInputError(f"chunks must be >= 1 (got {opts.chunks})")
    if opts.ablations() - sched.ablations:
        takers = " and ".join(s.name for s in _REGISTRY.values() if s.ablations)
        raise ExecutorInputError(
            f"--no-one-sided, --no-l2 and --dynamic apply to the {takers} schedule only"
        )
    if sched.l2_intermediates(opts):
        tile_bytes = wl.tile_rows * 3 * wl.shape.intermediate * 2.0
        if hw.l2_bytes < tile_bytes:
            raise ExecutorInputError(
                f"L2 of {hw.l2_bytes / 2**20:.2f} MiB cannot hold one row tile's intermediates "
                f"({tile_bytes / 2**20:.2f} MiB); use --no-l2 or smaller tiles"
            )
