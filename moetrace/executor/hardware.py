"""Device profiles for the executor: cores, rates, memories and links, each with unit and source.

One `Hardware` describes ONE rank (an Ascend die, or a GPU). Every field has an entry in
`FIELDS` with its unit and where the number comes from (`../shared/research/sim.md` section 1),
or the word "assumed" when no public figure was found. `docs/executor.md` renders that table.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.sourced_fields import sourced_fields

BandwidthTable = tuple[tuple[int, float], ...]
"""(EP degree, bytes/s) pairs, EP ascending: measured effective all-to-all bandwidth per rank."""


@dataclass(frozen=True)
class Hardware:
    """One rank's device. Rates in bytes/s or FLOP/s, times in ns, sizes in bytes."""

    name: str
    n_aic: int  # matrix (cube) cores; SMs on a GPU
    n_aiv: int  # vector cores; 0 on a GPU (vector work shares the SMs: modelled as a pool)
    clock_hz: float
    cube_flops_per_cycle: float  # per AIC, BF16 (2 x MACs)
    vector_flops_per_cycle: float  # per AIV, FP16
    hbm_bytes: float
    hbm_bw: float  # whole device, bytes/s
    hbm_core_rate: float  # one core's HBM read/write rate, bytes/s
    l2_bytes: float
    l2_core_rate: float  # one core's L2 rate, bytes/s
    dispatch_bw: BandwidthTable  # effective per-rank dispatch bandwidth by EP degree
    combine_bw: BandwidthTable  # effective per-rank combine bandwidth by EP degree
    link_bw: float  # if > 0, overrides both tables (bytes/s per direction per rank)
    link_latency_ns: float  # one-way latency of a transfer tile
    launch_ns: float  # per kernel launch (operator-level schedules)
    collective_ns: float  # per collective orchestration (notify record/wait)
    tile_sync_ns: float  # per task in the tile schedule (event-counter wait + set)
    dequeue_ns: float  # per task for a dynamic ready queue (global atomic + poll)
    comm_aiv: int  # AIV cores that drive one-sided writes in the tile schedule
    aiv_copy_bw: float  # bytes/s one AIV can push (one-sided write injection)
    gemm_eff: float  # achieved / peak for whole grouped GEMM kernels
    tile_gemm_eff: float  # achieved / peak for streamed GEMM tiles
    a2a_setup_ns: float  # per all-to-all call and rank: count/notify exchange before any data
    recv_buffer_bytes: float  # receive window per rank one-sided writes land in; inf: no limit

    @property
    def core_peak_flops(self) -> float:
        """Peak BF16 FLOP/s of one AIC (cube core)."""
        return self.cube_flops_per_cycle * self.clock_hz

    @property
    def peak_flops(self) -> float:
        """Peak BF16 FLOP/s of the whole rank (all AIC)."""
        return self.core_peak_flops * self.n_aic

    @property
    def vector_core_flops(self) -> float:
        """FLOP/s of one AIV."""
        return self.vector_flops_per_cycle * self.clock_hz

    def link_rate(self, what: str, ep: int) -> float:
        """Per-rank bandwidth (bytes/s) of `what` ('dispatch' or 'combine') at EP degree `ep`.

        `link_bw` > 0 wins; otherwise the measured table is interpolated in log2(EP). Above the
        table's largest EP there is no measurement: refused (`ExecutorInputError`), never
        extrapolated; below its smallest EP the smallest EP's rate is used (`link_warnings`).
        """
        if self.link_bw > 0:
            return self.link_bw
        table = self.dispatch_bw if what == "dispatch" else self.combine_bw
        if ep > table[-1][0]:
            raise ExecutorInputError(
                f"hardware {self.name}: EP{ep} is beyond its measured {what} bandwidth table "
                f"(EP{table[0][0]}..EP{table[-1][0]}); give --hw link_bw=BYTES_PER_S to run it"
            )
        xs = [math.log2(e) for e, _ in table]
        ys = [b for _, b in table]
        x = math.log2(max(ep, 1))
        if x <= xs[0]:
            return ys[0]
        for i in range(1, len(xs)):
            if x <= xs[i]:
                f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
                return ys[i - 1] + f * (ys[i] - ys[i - 1])
        return ys[-1]

    def to_dict(self) -> dict[str, Any]:
        """All fields, JSON-friendly (tables as lists)."""
        out = dataclasses.asdict(self)
        out["dispatch_bw"] = [list(p) for p in self.dispatch_bw]
        out["combine_bw"] = [list(p) for p in self.combine_bw]
        out["peak_flops"] = self.peak_flops
        if not math.isfinite(self.recv_buffer_bytes):
            out["recv_buffer_bytes"] = None  # no limit (JSON has no infinity)
        return out


PRESET_DIR = Path(__file__).with_name("presets")


def _field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Hardware) if f.name != "name"]


def load_preset(path: str | Path) -> tuple[Hardware, dict[str, tuple[str, str]], str]:
    """(profile, {field: (unit, source)}, description) of one preset TOML file.

    Schema: `name`, `description`, and a `[fields.KEY]` table with `value`, `unit` and
    `source` (a citation, or text starting "assumed"/"derived" saying why) for every field
    of `Hardware`; nothing more, nothing missing. Values are checked like user overrides."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ExecutorInputError(f"{p}: cannot read hardware preset: {exc}") from None
    fields = data.get("fields")
    if not isinstance(data.get("name"), str) or not isinstance(fields, dict):
        raise ExecutorInputError(f"{p}: a preset needs `name` and [fields.*] tables")
    values, meta = sourced_fields(p, fields, _field_names())
    hw = _build(str(data["name"]), values, str(p))
    return hw, meta, str(data.get("description", ""))


def _build(name: str, values: dict[str, Any], where: str) -> Hardware:
    """A checked `Hardware` from raw values (tables as lists of [EP, bytes/s] pairs)."""
    kinds = {f.name: f.type for f in dataclasses.fields(Hardware)}
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        kind = str(kinds[key])
        current: Any = () if "BandwidthTable" in kind else 0 if kind == "int" else 0.0
        coerced[key] = _coerce(key, value, current)
    hw = Hardware(name=name, **coerced)
    try:
        check_hardware(hw)
    except ExecutorInputError as exc:
        raise ExecutorInputError(f"{where}: {exc}") from None
    return hw


def _load_all() -> tuple[
    dict[str, Hardware], dict[str, dict[str, tuple[str, str]]], dict[str, str]
]:
    presets, metas, descriptions = {}, {}, {}
    for path in sorted(PRESET_DIR.glob("*.toml")):
        hw, meta, text = load_preset(path)
        presets[hw.name], metas[hw.name], descriptions[hw.name] = hw, meta, text
    return presets, metas, descriptions


def _table(name: str, value: Any) -> BandwidthTable:
    """A bandwidth table from "8:146e9,16:107e9" or a TOML list of [ep, bytes/s] pairs."""
    try:
        if isinstance(value, str):
            pairs = [item.split(":") for item in value.split(",") if item.strip()]
        else:
            pairs = [list(item) for item in value]
        table = tuple(sorted((int(ep), float(bw)) for ep, bw in pairs))
    except (TypeError, ValueError):
        raise ExecutorInputError(
            f"hardware field {name!r}: expected EP:bytes_per_s pairs like 8:146e9,16:107e9"
        ) from None
    if not table or any(ep < 1 or bw <= 0 for ep, bw in table):
        raise ExecutorInputError(f"hardware field {name!r}: needs EP >= 1 and bandwidth > 0")
    return table


def _coerce(name: str, value: Any, current: Any) -> Any:
    if isinstance(current, tuple):
        return _table(name, value)
    try:
        if isinstance(current, bool):
            return str(value).lower() in ("1", "true", "yes")
        if isinstance(current, int):
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if isinstance(current, float):
            return float(value)
    except (TypeError, ValueError):
        raise ExecutorInputError(f"hardware field {name!r}: {value!r} is not a number") from None
    return str(value)


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """`['key=value', ...]` -> dict; a pair without '=' is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ExecutorInputError(f"--hw {pair!r}: expected key=value")
        key, value = pair.split("=", 1)
        out[key.strip()] = value.strip()
    return out


def load_overrides_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML file of hardware overrides (top-level keys, or a [hardware] table), or a
    whole preset (`name` + `[fields.KEY]` tables, e.g. from `moetrace calibrate`): then every
    field's `value` is an override."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ExecutorInputError(f"{p}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExecutorInputError(f"{p}: bad TOML: {exc}") from None
    if "fields" in data:  # a whole preset: checked as one, every field is an override
        hw = load_preset(p)[0]
        return {k: v for k, v in dataclasses.asdict(hw).items() if k != "name"}
    return dict(data.get("hardware", data))


def is_hardware_file(name: str) -> bool:
    """Whether a `--hardware` value names a preset TOML file rather than a built-in preset."""
    return name not in PRESETS and name.endswith(".toml")


def get_hardware(name: str | Hardware, overrides: dict[str, Any] | None = None) -> Hardware:
    """The preset `name` (or a preset TOML file) with `overrides` applied; unknown names/keys
    and bad values are errors."""
    if isinstance(name, Hardware):
        hw = name
    elif is_hardware_file(name):  # a preset file, e.g. written by `moetrace calibrate`
        hw = load_preset(name)[0]
    else:
        if name not in PRESETS:
            raise ExecutorInputError(
                f"unknown hardware {name!r} (known: {', '.join(sorted(PRESETS))})"
            )
        hw = PRESETS[name]
    return apply_overrides(hw, overrides or {})


def apply_overrides(hw: Hardware, overrides: dict[str, Any]) -> Hardware:
    """`hw` with `--hw key=value` / `--hw-file` overrides applied and the result checked.

    The one place user hardware values are parsed and range-checked (the CLI's parse layer can
    call it too): unknown keys, non-numbers, non-finite or out-of-range values each give one
    line naming the field, the value and the allowed range (`ExecutorInputError`)."""
    if not overrides:
        return hw
    current = dataclasses.asdict(hw)
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if key not in current or key == "name":
            raise ExecutorInputError(f"unknown hardware key {key!r} (known: {', '.join(FIELDS)})")
        changes[key] = _coerce(key, value, getattr(hw, key))
    hw = dataclasses.replace(hw, **changes)
    check_hardware(hw)
    return hw


def link_warnings(hw: Hardware, ep: int) -> list[str]:
    """Where a run relies on a rate the link tables do not measure (below their smallest EP)."""
    if hw.link_bw > 0:
        return []
    out = []
    for what, table in (("dispatch", hw.dispatch_bw), ("combine", hw.combine_bw)):
        if ep < table[0][0]:
            out.append(
                f"EP{ep} is below {hw.name}'s measured {what} table (from EP{table[0][0]}): "
                f"using EP{table[0][0]}'s {table[0][1] / 1e9:.0f} GB/s"
            )
    return out


_POSITIVE = (
    "clock_hz",
    "cube_flops_per_cycle",
    "vector_flops_per_cycle",
    "hbm_bw",
    "hbm_core_rate",
    "l2_core_rate",
    "aiv_copy_bw",
    "hbm_bytes",
)
_NON_NEGATIVE = (
    "link_bw",
    "link_latency_ns",
    "launch_ns",
    "collective_ns",
    "tile_sync_ns",
    "dequeue_ns",
    "l2_bytes",
    "a2a_setup_ns",
)


def check_hardware(hw: Hardware) -> None:
    """Reject profiles that cannot run anything: one line naming the field, value and range."""
    for key in _POSITIVE + _NON_NEGATIVE + ("gemm_eff", "tile_gemm_eff"):
        value = getattr(hw, key)
        if not math.isfinite(value):
            raise ExecutorInputError(f"hardware field {key!r}: {value!r} is not finite")
    if hw.n_aic < 1 or hw.n_aiv < 2:
        raise ExecutorInputError(
            f"hardware field 'n_aic'/'n_aiv': {hw.n_aic}/{hw.n_aiv}: needs n_aic >= 1, n_aiv >= 2"
        )
    if hw.comm_aiv < 1 or hw.comm_aiv >= hw.n_aiv:
        raise ExecutorInputError(
            f"hardware field 'comm_aiv': {hw.comm_aiv}: must be in 1..n_aiv-1 ({hw.n_aiv - 1})"
        )
    if not hw.recv_buffer_bytes > 0:  # may be inf: a window that holds everything
        raise ExecutorInputError(
            f"hardware field 'recv_buffer_bytes': {hw.recv_buffer_bytes!r} must be > 0"
        )
    for key in _POSITIVE:
        if getattr(hw, key) <= 0:
            raise ExecutorInputError(f"hardware field {key!r}: {getattr(hw, key)!r} must be > 0")
    for key in _NON_NEGATIVE:
        if getattr(hw, key) < 0:
            raise ExecutorInputError(f"hardware field {key!r}: {getattr(hw, key)!r} must be >= 0")
    for key in ("gemm_eff", "tile_gemm_eff"):
        if not 0 < getattr(hw, key) <= 1:
            raise ExecutorInputError(
                f"hardware field {key!r}: {getattr(hw, key)!r} must be in (0, 1] (achieved / peak)"
            )


PRESETS, PRESET_FIELDS, DESCRIPTIONS = _load_all()
FIELDS: dict[str, tuple[str, str]] = PRESET_FIELDS["ascend-a3"]
"""Unit and source of every field of the default profile (docs/executor.md renders it)."""
