"""Configuration search (Pangu-style): the best MoE layer configuration by simulation.

A space is the product of option lists (EP degree, tokens per rank or a global batch,
schedule, micro-batches, tile sizes, placement, transfer order, hardware fields). Every
candidate gets a cheap analytic estimate first (`estimate`: routing only, no task graph): its
HBM need per rank and link rate, checked against the constraints, and a lower bound of its
makespan from the resource floors (compute at the schedule's GEMM efficiency, link bytes at
the per-rank rate, expert weights read once from HBM; for the operator schedules, the chain
first micro-batch's dispatch received -> expert GEMMs -> last micro-batch's combine sent that
their stream order forces; for `tile`, the smaller of its bound and an operator plan's, since
its planner may keep one). The search is
best-first branch and bound: candidates are simulated in order of their bound, and a
candidate is skipped once its bound cannot beat the `top`-th best result so far nor the best
result on as many ranks or fewer, so the best configurations and the Pareto front are the
ones an exhaustive sweep finds (a test checks it), with fewer simulations. (Pareto: a
candidate whose bound cannot beat the best result on as many ranks or fewer is dominated.)

This module is engine free: `search` hands candidates to an `Evaluator` (in this process here;
a process pool or Ray in `moetrace.commands.search_cmds`), keeping it busy: after every
finished simulation the bounds are checked again and the next best candidate is submitted.
Results are kept by `ResultStore` (JSONL keyed by the full configuration and a fingerprint of
the executor's code and data), so a repeated or widened search reuses what it simulated.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from moetrace.executor.errors import ExecutorInputError
from moetrace.executor.schedules import Schedule, ScheduleOptions, get_schedule
from moetrace.executor.search_bound import Estimate, estimate

OBJECTIVES = {"makespan": "makespan_ns", "tokens_per_s": "tokens_per_s", "mfu": "mfu"}
"""Objective name -> result column; makespan is minimised, the others maximised."""
MAXIMISED = {"tokens_per_s", "mfu"}

AXES = ("ranks", "tokens", "schedule", "chunks", "tile_rows", "n_tile", "placement", "order")
"""Option lists a space takes besides hardware fields (`hw.KEY`)."""

Config = dict[str, Any]
"""Keyword arguments of `moetrace.executor.run.simulate` (hw_overrides a plain dict)."""

BASE: Config = {
    "preset": "deepseek-v3",
    "hardware": "ascend-a3",
    "routing": "balanced",
    "placement": "round-robin",
    "seed": 0,
    "hw_overrides": None,
    "order": "auto",
    "chunks": 1,
    "tile_rows": 128,
    "n_tile": 512,
}
"""The defaults of `simulate` a space's candidates start from (`expand`'s base)."""


class Evaluator(Protocol):
    """Runs simulations: up to `capacity` at once; `submit` starts one (tagged), `next_result`
    waits for any one to finish and returns (its tag, `evaluate`'s result)."""

    capacity: int

    def submit(self, tag: int, cfg: Config) -> None:
        """Start simulating `cfg`."""

    def next_result(self) -> tuple[int, dict[str, Any]]:
        """(tag, result) of a finished simulation; blocks until one finishes."""


class InlineEvaluator:
    """Simulations in this process, one at a time, in submission order."""

    capacity = 1

    def __init__(self, func: Callable[[Config], dict[str, Any]] | None = None) -> None:
        self.func = func or evaluate
        self.queue: list[tuple[int, Config]] = []

    def submit(self, tag: int, cfg: Config) -> None:
        """Queue `cfg` (simulated by `next_result`)."""
        self.queue.append((tag, cfg))

    def next_result(self) -> tuple[int, dict[str, Any]]:
        """Simulate the oldest queued configuration."""
        tag, cfg = self.queue.pop(0)
        return tag, self.func(cfg)


def expand(
    base: Config,
    axes: Mapping[str, Sequence[Any]],
    hw_axes: Mapping[str, Sequence[str]] | None = None,
    global_tokens: int | None = None,
) -> list[Config]:
    """Every distinct candidate of the space: `base` with each combination of `axes` values
    (keys in AXES) and `hw_axes` values (hardware field -> values, on top of base's
    hw_overrides). `chunks` matters to `chunked` only (other schedules get 1) and `order` to
    `tile` only ("auto" elsewhere); with `global_tokens`, tokens per rank = global_tokens /
    ranks (EP degrees that do not divide it are left out) and a `tokens` axis is refused."""
    unknown = set(axes) - set(AXES)
    if unknown:
        raise ExecutorInputError(f"unknown search axis {', '.join(sorted(unknown))}")
    if global_tokens is not None and "tokens" in axes:
        raise ExecutorInputError("give tokens per rank or a global batch, not both")
    names = list(axes)
    hw_names = list(hw_axes or {})
    out: list[Config] = []
    seen: set[str] = set()
    value_lists = [list(axes[n]) for n in names] + [list((hw_axes or {})[k]) for k in hw_names]
    for combo in itertools.product(*value_lists):
        cfg = dict(base)
        cfg.update(zip(names, combo[: len(names)], strict=True))
        hw = dict(base.get("hw_overrides") or {})
        hw.update(zip(hw_names, combo[len(names) :], strict=True))
        cfg["hw_overrides"] = hw or None
        if global_tokens is not None:
            if global_tokens % int(cfg["ranks"]):
                continue
            cfg["tokens"] = global_tokens // int(cfg["ranks"])
        _drop_unused_knobs(cfg)
        key = config_json(cfg)
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


def _schedule_of(cfg: Config) -> Schedule | None:
    """The registered schedule `cfg` names; None for an unknown name (the candidate's own
    run then says so, one line)."""
    try:
        return get_schedule(str(cfg.get("schedule")))
    except ExecutorInputError:
        return None


def _drop_unused_knobs(cfg: Config) -> None:
    """Chunks 1 for a schedule that does not split into micro-batches, order auto for one that
    plans a single transfer order (the registry says which), so equal runs get one key."""
    sched = _schedule_of(cfg)
    if sched is None:
        return
    if sched.micro_batches(ScheduleOptions(chunks=2)) == 1:
        cfg["chunks"] = 1
    if len(sched.transfer_orders(ScheduleOptions(order="auto"))) == 1:
        cfg["order"] = "auto"


def config_json(cfg: Config) -> str:
    """The canonical text of a configuration (sorted keys; hardware values as text)."""
    hw = cfg.get("hw_overrides") or {}
    norm = {**cfg, "hw_overrides": {k: str(v) for k, v in sorted(hw.items())} or None}
    return json.dumps(norm, sort_keys=True, default=str)


def model_files() -> list[Path]:
    """The files whose content is the model: every executor module (the schedule plug-ins in
    executor/schedules/ included), the hardware presets and the shapes."""
    root = Path(__file__).parent
    return sorted([*root.rglob("*.py"), *root.glob("presets/*.toml"), *root.glob("shapes/*.toml")])


def model_fingerprint() -> str:
    """A digest of the executor's code, presets and shapes: results computed by another
    version of the model are not reused."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in model_files():
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def result_key(cfg: Config, fingerprint: str) -> str:
    """The result cache key of a configuration under one model fingerprint."""
    text = f"{fingerprint}\0{config_json(cfg)}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def evaluate(cfg: Config) -> dict[str, Any]:
    """Simulate one candidate: makespan (ns), tokens/s, MFU over the makespan, tasks, plan and
    floors (ns); {"error": text} when the executor refuses it. Top level: a worker runs it."""
    from moetrace.executor.config import SimulationConfig
    from moetrace.executor.floors import floors
    from moetrace.executor.run import execute, prepare

    p = dict(cfg)
    try:
        wl, hw, opts, _ = prepare(SimulationConfig.build(**p))
        run = execute(wl, hw, opts, fold=True)
    except ExecutorInputError as exc:
        return {"error": str(exc)}
    makespan = run.makespan_ns
    figures = floors(run.timed, hw, wl.ranks)
    copies = run.expansion.copies if run.expansion is not None else 1
    flops = figures["flops"] * copies
    return {
        "makespan_ns": makespan,
        "tokens_per_s": wl.ranks * wl.tokens / (makespan * 1e-9),
        "mfu": flops / (figures["peak_flops"] * makespan * 1e-9),
        "tasks": run.graph.full_tasks,
        "plan": run.plan,
        "floors_ns": figures["floors_ns"],
    }


def badness(value: float, objective: str) -> float:
    """An objective value oriented so that smaller is better."""
    return -value if objective in MAXIMISED else value


def bound_badness(cfg: Config, est: Estimate, objective: str) -> float:
    """The best (smallest) `badness` the candidate could reach: its makespan lower bound in
    the objective's terms."""
    lb_s = est.lower_bound_ns * 1e-9
    if objective == "makespan":
        return est.lower_bound_ns
    if lb_s <= 0:
        return -math.inf
    if objective == "tokens_per_s":
        return -int(cfg["ranks"]) * int(cfg["tokens"]) / lb_s
    # a little headroom: the simulated FLOPs are summed in another order
    return -est.flops / (est.peak_flops * lb_s) * (1 + 1e-9)


@dataclass
class Row:
    """One candidate: its configuration, estimate and (once simulated or reused) result."""

    config: Config
    estimate: Estimate
    result: dict[str, Any] | None = None
    status: str = "pending"  # simulated | reused | pruned | infeasible | failed
    bound: float = math.inf  # `bound_badness` under the search's objective

    def value(self, objective: str) -> float:
        """The objective (its natural sign); nan when there is no result."""
        if not self.result or "error" in self.result:
            return math.nan
        return float(self.result[OBJECTIVES[objective]])


@dataclass
class Outcome:
    """A finished search: every row, the ranked best, the Pareto front and the counts."""

    objective: str
    rows: list[Row]
    best: list[Row]
    pareto: list[Row]
    simulated: int
    reused: int
    pruned: int
    infeasible: int
    proven: bool  # False when the budget stopped the search before every bound was settled
    counts: dict[str, int] = field(default_factory=dict)


def search(
    configs: Sequence[Config],
    evaluator: Evaluator,
    objective: str = "makespan",
    *,
    top: int = 5,
    known: dict[str, dict[str, Any]] | None = None,
    fingerprint: str = "",
    max_hbm_per_rank: float | None = None,
    max_link_bw: float | None = None,
    exhaustive: bool = False,
    budget: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    on_result: Callable[[str, Config, dict[str, Any]], None] | None = None,
) -> Outcome:
    """Best-first branch and bound over `configs` (see the module docstring).

    known: results by `result_key` (reused, not simulated again). exhaustive: simulate every
    feasible candidate (the reference the bound search is checked against). budget: at most
    this many new simulations. progress(done, total, what) after every candidate settled;
    on_result(key, config, result) after every new simulation (to store it)."""
    if objective not in OBJECTIVES:
        raise ExecutorInputError(
            f"unknown objective {objective!r} (known: {', '.join(OBJECTIVES)})"
        )
    known = known or {}
    say = progress or (lambda done, total, what: None)
    rows = [Row(c, estimate(c, max_hbm_per_rank, max_link_bw)) for c in configs]
    for row in rows:
        row.bound = bound_badness(row.config, row.estimate, objective)
    total = len(rows)
    settled = 0
    for row in rows:
        if not row.estimate.feasible:
            row.status = "infeasible"
            settled += 1
    open_rows = [r for r in rows if r.status == "pending"]
    keys = {id(r): result_key(r.config, fingerprint) for r in open_rows}
    for row in open_rows:
        if keys[id(row)] in known:
            row.result, row.status = known[keys[id(row)]], "reused"
            settled += 1
    say(settled, total, "estimated")
    pending = sorted((r for r in open_rows if r.status == "pending"), key=lambda r: r.bound)
    done = [r for r in open_rows if r.status == "reused" and "error" not in (r.result or {})]
    simulated = 0  # started
    in_flight: dict[int, Row] = {}
    while True:
        if not exhaustive and pending:
            beatable = _threshold(done, objective, top)
            kept = [r for r in pending if beatable(r)]
            for row in pending:
                if not beatable(row):
                    row.status = "pruned"
                    settled += 1
            pending = kept
        while pending and len(in_flight) < evaluator.capacity:
            if budget is not None and simulated >= budget:
                break
            row = pending.pop(0)
            in_flight[simulated] = row
            evaluator.submit(simulated, row.config)
            simulated += 1
        if not in_flight:
            break
        tag, result = evaluator.next_result()
        row = in_flight.pop(tag)
        row.result = result
        row.status = "failed" if "error" in result else "simulated"
        settled += 1
        if "error" not in result:
            done.append(row)
            if on_result is not None:
                on_result(keys[id(row)], row.config, result)
        say(settled, total, f"simulated {_describe(row.config)}")
    proven = not pending  # the budget left candidates whose bound could still win
    best = sorted(done, key=lambda r: (badness(r.value(objective), objective), _order(r)))
    counts = {s: sum(r.status == s for r in rows) for s in ("simulated", "reused", "pruned")}
    return Outcome(
        objective=objective,
        rows=rows,
        best=best[:top],
        pareto=pareto_front(done, objective),
        simulated=counts["simulated"],
        reused=counts["reused"],
        pruned=counts["pruned"],
        infeasible=sum(r.status == "infeasible" for r in rows),
        proven=proven,
        counts=counts,
    )


def _order(row: Row) -> str:
    return config_json(row.config)


def _describe(cfg: Config) -> str:
    text = f"EP{cfg['ranks']} x {cfg['tokens']} tok {cfg['schedule']}"
    return text + micro_batch_label(cfg)


def micro_batch_label(cfg: Config) -> str:
    """' xN' for a schedule that splits the layer into N > 1 micro-batches, else ''."""
    sched = _schedule_of(cfg)
    if sched is None:
        return ""
    n = sched.micro_batches(ScheduleOptions(chunks=int(cfg.get("chunks", 4))))
    return f" x{n}" if n > 1 else ""


def _threshold(done: list[Row], objective: str, top: int) -> Callable[[Row], bool]:
    """Whether a row could still enter the `top` best or the Pareto front, given the results
    `done`: its bound must beat the `top`-th best, or the best result on as many ranks or
    fewer (otherwise that result dominates it, and it is not its own EP degree's best)."""
    values = sorted(badness(r.value(objective), objective) for r in done)
    kth = values[top - 1] if len(values) >= top else math.inf
    best: dict[int, float] = {}
    for r in done:
        ranks = int(r.config["ranks"])
        best[ranks] = min(best.get(ranks, math.inf), badness(r.value(objective), objective))
    levels = sorted(best)
    running = list(itertools.accumulate((best[k] for k in levels), min))

    def beatable(row: Row) -> bool:
        if row.bound < kth:
            return True
        i = bisect.bisect_right(levels, int(row.config["ranks"]))
        return i == 0 or row.bound < running[i - 1]

    return beatable


def pareto_front(rows: Iterable[Row], objective: str) -> list[Row]:
    """The configurations no other beats on both the objective and the ranks it needs: per EP
    degree the best, kept when it is strictly better than every smaller EP's."""
    best_per: dict[int, Row] = {}
    for row in rows:
        ranks = int(row.config["ranks"])
        cur = best_per.get(ranks)
        key = (badness(row.value(objective), objective), _order(row))
        if cur is None or key < (badness(cur.value(objective), objective), _order(cur)):
            best_per[ranks] = row
    front: list[Row] = []
    for ranks in sorted(best_per):
        row = best_per[ranks]
        if not front or badness(row.value(objective), objective) < badness(
            front[-1].value(objective), objective
        ):
            front.append(row)
    return front


def row_record(row: Row) -> dict[str, Any]:
    """One flat record of a row (CSV/JSON): configuration, estimate, status and result."""
    cfg = row.config
    out: dict[str, Any] = {k: cfg.get(k) for k in ("preset", "hardware", *AXES)}
    out.update(routing=cfg.get("routing"), seed=cfg.get("seed"))
    for k, v in sorted((cfg.get("hw_overrides") or {}).items()):
        out[f"hw.{k}"] = str(v)
    est = row.estimate
    out.update(
        status=row.status,
        lower_bound_ns=est.lower_bound_ns if math.isfinite(est.lower_bound_ns) else None,
        hbm_need_bytes=est.hbm_need_bytes if math.isfinite(est.hbm_need_bytes) else None,
        link_bw=est.link_bw if math.isfinite(est.link_bw) else None,
        reason=est.reason or (row.result or {}).get("error", ""),
    )
    res = row.result if row.result and "error" not in row.result else {}
    for k in ("makespan_ns", "tokens_per_s", "mfu", "tasks", "plan"):
        out[k] = res.get(k)
    for k, v in (res.get("floors_ns") or {}).items():
        out[f"floor_{k}_ns"] = v
    return out


class ResultStore:
    """Simulated results by key in a JSONL file (one {"key", "config", "result"} per line);
    saved atomically, the whole file at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        self._configs: dict[str, str] = {}
        self.dirty = False  # results added since the file was read
        if path.exists():
            self._load()

    def _load(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ExecutorInputError(f"{self.path}: cannot read search results: {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                key, result, cfg = item["key"], item["result"], item["config"]
                if not isinstance(key, str) or not isinstance(result, dict):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                raise ExecutorInputError(
                    f"{self.path}:{number}: not a search result line "
                    '({"key": ..., "config": ..., "result": {...}})'
                ) from None
            self.entries[key] = result
            self._configs[key] = json.dumps(cfg, sort_keys=True)

    def add(self, key: str, cfg: Config, result: dict[str, Any]) -> None:
        """Remember one result (written by `save`)."""
        self.entries[key] = result
        self._configs[key] = config_json(cfg)
        self.dirty = True

    def save(self) -> None:
        """Write every entry (the file complete or unchanged)."""
        from moetrace.trace.atomic import write_bytes_atomic

        lines = [
            json.dumps(
                {"key": k, "config": json.loads(self._configs[k]), "result": r}, sort_keys=True
            )
            for k, r in self.entries.items()
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(self.path, ("\n".join(lines) + "\n").encode(), force=True)
        self.dirty = False
