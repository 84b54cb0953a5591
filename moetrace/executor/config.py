"""`SimulationConfig`: one simulation's inputs (workload, hardware, schedule options), checked once.

Every way of asking for a run builds one: the CLI (`run`, `sweep`, `demo`, `--hw`/`--hw-file`
overrides), the Python API (`simulate(**keywords)` or `simulate(config)`), the validation table
and the what-if replay. Building it validates every input before any heavy work and raises
`ExecutorInputError` with one line; the workload, hardware and schedule options it builds are
kept on it (`prepared`), so nothing downstream checks them again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.hardware import Hardware, get_hardware
from moetrace.executor.schedules.base import ScheduleOptions
from moetrace.executor.schedules.registry import check_options
from moetrace.executor.workload import Workload, make_workload

MAX_TASKS = 6_000_000
MAX_ROUTED_ROWS = 100_000_000


class Prepared(NamedTuple):
    """What a checked config stands for: workload, hardware, schedule options, task estimate."""

    workload: Workload
    hardware: Hardware
    options: ScheduleOptions
    tasks: int


def estimate_tasks(wl: Workload) -> int:
    """Upper estimate of the task count, computed before any allocation."""
    sh = wl.shape
    rows = wl.ranks * wl.tokens * sh.top_k
    row_tiles = rows // wl.tile_rows + sh.experts
    n1 = -(-2 * sh.intermediate // wl.n_tile)
    n2 = -(-sh.hidden // wl.n_tile)
    comm = rows // wl.tile_rows + wl.ranks * wl.ranks
    token_tiles = wl.ranks * -(-wl.tokens // wl.tile_rows)
    return row_tiles * (n1 + n2 + 1) + 8 * comm + token_tiles * (4 + n1 + n2)


@dataclass(frozen=True)
class SimulationConfig:
    """One MoE layer simulation's inputs; checked when built (`ExecutorInputError`, one line).

    preset: a shape name or `MoEShape`; hardware: a profile name or `Hardware`, with
    `hw_overrides` (field -> value) applied; schedule: a registered schedule's name, with
    chunks (chunked), one_sided / l2 / dynamic (the ablations a schedule accepts) and order
    (tile transfer order: auto, arrival, expert); max_tasks: refuse larger runs (tasks).
    """

    preset: Any = "deepseek-v3"
    hardware: str | Hardware = "ascend-a3"
    ranks: int = 64
    tokens: int = 4096
    schedule: str = "tile"
    routing: str = "balanced"
    placement: str = "round-robin"
    seed: int = 0
    hw_overrides: dict[str, Any] | None = None
    dispatch_dtype: str | None = None
    shared_expert: bool = False
    tile_rows: int = 128
    n_tile: int = 512
    chunks: int = 4
    one_sided: bool = True
    l2: bool = True
    dynamic: bool = False
    order: str = "auto"
    max_tasks: int = MAX_TASKS
    prepared: Prepared = field(init=False, repr=False, compare=False)

    @classmethod
    def build(cls, *args: Any, **keywords: Any) -> SimulationConfig:
        """A config from the API's arguments (fields in order, then keywords); an unknown
        keyword is an error (one line)."""
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(keywords) - known
        if unknown:
            raise ExecutorInputError(f"unknown option(s): {', '.join(sorted(unknown))}")
        return cls(*args, **keywords)

    def __post_init__(self) -> None:
        """Coerce the scalar fields as the keyword API always did, then check and build."""
        for name, kind in (
            ("shared_expert", bool),
            ("tile_rows", int),
            ("n_tile", int),
            ("chunks", int),
            ("one_sided", bool),
            ("l2", bool),
            ("dynamic", bool),
            ("order", str),
            ("max_tasks", int),
        ):
            object.__setattr__(self, name, kind(getattr(self, name)))
        object.__setattr__(self, "prepared", self._check())

    def _check(self) -> Prepared:
        """Validate every input (no heavy work) and build what the run needs."""
        hw = get_hardware(self.hardware, self.hw_overrides)
        wl = make_workload(
            self.preset,
            self.ranks,
            self.tokens,
            self.routing,
            self.placement,
            self.seed,
            self.dispatch_dtype,
            self.shared_expert,
            self.tile_rows,
            self.n_tile,
        )
        opts = ScheduleOptions(
            schedule=self.schedule,
            chunks=self.chunks,
            one_sided=self.one_sided,
            l2=self.l2,
            dynamic=self.dynamic,
            order=self.order,
        )
        check_options(opts, wl, hw)
        est = estimate_tasks(wl)
        if est > self.max_tasks:
            raise ExecutorInputError(
                f"run too large: about {est:,} tasks (limit {self.max_tasks:,}); "
                "use fewer ranks/tokens or larger tiles"
            )
        if wl.ranks * wl.tokens * wl.shape.top_k > MAX_ROUTED_ROWS:
            raise ExecutorInputError("run too large: more than 100M routed rows")
        return Prepared(wl, hw, opts, est)
