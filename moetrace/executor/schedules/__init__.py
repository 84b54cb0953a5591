"""Schedules: turn the task graph into timed work on lanes (durations, edge delays, launches).

One module per schedule (`sequential`, `chunked`, `tile`), each a `Schedule` (`base.py`) found
by name in `registry.py`; `timing.py` times a graph under one. See docs/development.md "Add a
schedule".
"""

from moetrace.executor.schedules.base import (
    ABLATIONS,
    POOL_AIC,
    POOL_AIV,
    POOL_AIVC,
    POOL_RX,
    POOL_STEP,
    POOL_STREAM,
    POOL_TX,
    Schedule,
    ScheduleOptions,
)
from moetrace.executor.schedules.registry import (
    check_options,
    demo_schedules,
    get_schedule,
    register,
    schedule_names,
    unregister,
)
from moetrace.executor.schedules.timing import (
    A_INTERMEDIATE,
    OUT_INTERMEDIATE,
    HbmShares,
    Timed,
    hbm_rates,
    lane_layout,
    schedule,
    water_fill,
    weight_hbm_fraction,
)

__all__ = [
    "ABLATIONS",
    "A_INTERMEDIATE",
    "OUT_INTERMEDIATE",
    "POOL_AIC",
    "POOL_AIV",
    "POOL_AIVC",
    "POOL_RX",
    "POOL_STEP",
    "POOL_STREAM",
    "POOL_TX",
    "HbmShares",
    "Schedule",
    "ScheduleOptions",
    "Timed",
    "check_options",
    "demo_schedules",
    "get_schedule",
    "hbm_rates",
    "lane_layout",
    "register",
    "schedule",
    "schedule_names",
    "unregister",
    "water_fill",
    "weight_hbm_fraction",
]
