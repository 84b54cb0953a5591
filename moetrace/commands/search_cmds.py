"""`moetrace search`: the best MoE layer configuration by simulation (Pangu-style).

The search itself (space, bounds, branch and bound, Pareto front, result store) is
`moetrace.executor.search`; this module parses the options, runs the simulations in this
process, a process pool on all cores, or Ray tasks, shows progress and prints and writes the
outcome. Heavy imports stay inside the command body so `moetrace --help` is fast.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, check_output_path, handle_errors, note
from moetrace.commands.executor_common import check_run_count, executor_errors, hw_overrides
from moetrace.commands.numbers import check_seed
from moetrace.text import visible

if TYPE_CHECKING:
    from moetrace.executor.search import Config, Evaluator, Outcome, Row


def _list(value: str, option: str) -> list[str]:
    values = [v.strip() for v in str(value).split(",") if v.strip()]
    if not values:
        raise UserError(f"--{option} {value!r}: expected one or more comma-separated values")
    return values


def _ints(value: str, option: str) -> list[int]:
    out = []
    for v in _list(value, option):
        try:
            out.append(int(v))
        except ValueError:
            raise UserError(f"--{option} {v!r}: expected an integer") from None
    return out


def _number(value: str | None, option: str) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise UserError(f"--{option} {value!r}: expected a number (bytes or bytes/s)") from None
    if not number > 0:
        raise UserError(f"--{option} {value!r}: must be > 0")
    return number


def hw_ranges(pairs: Sequence[str]) -> dict[str, list[str]]:
    """`--hw KEY=V1,V2,...` -> {KEY: [V1, V2, ...]}. A value with ':' (a bandwidth table like
    8:146e9,16:107e9) is one value; give several tables as separate --hw options."""
    out: dict[str, list[str]] = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--hw {pair!r}: expected KEY=VALUE[,VALUE...]")
        key, value = (x.strip() for x in pair.split("=", 1))
        values = [value] if ":" in value else _list(value, f"hw {key}")
        out.setdefault(key, []).extend(values)
    return out


class _PoolEvaluator:
    """Simulations on a process pool: `capacity` in flight, results as they finish."""

    def __init__(self, pool: Any, capacity: int) -> None:
        self.pool, self.capacity = pool, capacity
        self.futures: dict[Any, int] = {}

    def submit(self, tag: int, cfg: Config) -> None:
        from moetrace.executor.search import evaluate

        self.futures[self.pool.submit(evaluate, cfg)] = tag

    def next_result(self) -> tuple[int, dict[str, Any]]:
        from concurrent.futures import FIRST_COMPLETED, wait

        finished, _ = wait(self.futures, return_when=FIRST_COMPLETED)
        future = next(iter(finished))
        return self.futures.pop(future), future.result()


class _RayEvaluator:
    """Simulations as Ray tasks: `capacity` in flight, results as they finish."""

    def __init__(self, ray: Any, capacity: int) -> None:
        from moetrace.executor.search import evaluate

        self.ray, self.capacity = ray, capacity
        self.task: Any = ray.remote(evaluate)
        self.refs: dict[Any, int] = {}

    def submit(self, tag: int, cfg: Config) -> None:
        self.refs[self.task.remote(cfg)] = tag

    def next_result(self) -> tuple[int, dict[str, Any]]:
        ready, _ = self.ray.wait(list(self.refs), num_returns=1)
        return self.refs.pop(ready[0]), self.ray.get(ready[0])


@contextmanager
def engine_evaluator(engine: str, jobs: int, address: str | None) -> Iterator[Evaluator]:
    """Where simulations run: this process (jobs 1), a spawned pool of `jobs` processes, or Ray
    tasks (2 x jobs in flight, on the cluster at `address` or a local one)."""
    from moetrace.executor.search import InlineEvaluator

    if engine == "ray":
        from moetrace.trace.parallel import ray_session

        with ray_session(address) as ray:
            yield _RayEvaluator(ray, 2 * jobs)
        return
    if jobs <= 1:
        yield InlineEvaluator()
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: Polars' thread pool must not be forked
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        yield _PoolEvaluator(pool, jobs)


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A progress bar on stderr (a terminal only): callback(done, total, what)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.fields[what]}", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("search", total=None, what="search")

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, what=what)

        yield update


def _label(row: Row) -> str:
    from moetrace.executor.search import micro_batch_label

    c = row.config
    sched = c["schedule"] + micro_batch_label(c)
    if c.get("order", "auto") != "auto":  # only the tile schedule takes an order
        sched += f" ({c['order']})"
    hw = " ".join(f"{k}={v}" for k, v in sorted((c.get("hw_overrides") or {}).items()))
    return (
        f"EP{c['ranks']:<4} {c['tokens']:>6} tok/rank  {sched:<14} rows {c['tile_rows']:<4}"
        f" n {c['n_tile']:<4} {c['placement']:<11} {hw}"
    ).rstrip()


def _figures(row: Row) -> str:
    r = row.result or {}
    return (
        f"{r['makespan_ns'] / 1e6:9.3f} ms  {r['tokens_per_s'] / 1e6:9.2f} M tok/s"
        f"  MFU {100 * r['mfu']:5.1f}%"
    )


def _print(outcome: Outcome, total: int) -> None:
    failed = sum(r.status == "failed" for r in outcome.rows)
    click.echo(
        f"{total} candidates: {outcome.simulated} simulated, {outcome.reused} reused, "
        f"{outcome.pruned} pruned by their lower bound, {outcome.infeasible} infeasible"
        + (f", {failed} refused by the executor" if failed else "")
        + ("" if outcome.proven else "; stopped by --budget: the best is not proven")
    )
    if not outcome.best:
        click.echo("no feasible configuration")
        return
    click.echo(f"best by {outcome.objective}:")
    for i, row in enumerate(outcome.best, 1):
        click.echo(visible(f"  {i}. {_figures(row)}  {_label(row)}"))
    click.echo(f"Pareto front ({outcome.objective} vs ranks):")
    for row in outcome.pareto:
        click.echo(visible(f"  {_figures(row)}  {_label(row)}"))


def _write(outcome: Outcome, out: Path, force: bool, meta: dict[str, Any]) -> None:
    import polars as pl

    from moetrace.executor.search import row_record
    from moetrace.trace.atomic import atomic_path, write_bytes_atomic

    records = [row_record(r) for r in outcome.rows]
    if out.suffix == ".json":
        data = {
            **meta,
            "simulated": outcome.simulated,
            "reused": outcome.reused,
            "pruned": outcome.pruned,
            "infeasible": outcome.infeasible,
            "proven": outcome.proven,
            "best": [row_record(r) for r in outcome.best],
            "pareto": [row_record(r) for r in outcome.pareto],
            "rows": records,
        }
        write_bytes_atomic(out, json.dumps(data, indent=1).encode(), force=force)
        return
    table = pl.DataFrame(records, infer_schema_length=None)
    with atomic_path(out, force=force) as tmp:  # complete or not at all
        table.write_csv(tmp)


def _check_inputs(configs: Sequence[Config]) -> None:
    """An input no candidate accepts (an unknown preset, a bad routing) is a usage error, one
    line, exit 2; a candidate some others survive (an EP that does not divide the experts) is
    only infeasible."""
    from moetrace.executor.config import SimulationConfig
    from moetrace.executor.errors import ExecutorInputError
    from moetrace.executor.run import prepare

    first = None
    for cfg in configs:
        p = dict(cfg)
        try:
            prepare(SimulationConfig.build(**p))
            return
        except ExecutorInputError as exc:
            first = first or str(exc)
    raise UserError(f"no candidate can run: {first}")


@click.command("search")
@click.option("--preset", default="deepseek-v3", show_default=True, help="MoE layer shape.")
@click.option("--hardware", default="ascend-a3", show_default=True, help="Device profile.")
@click.option("--ranks", default="64,128,256", show_default=True, help="EP degrees.")
@click.option("--tokens", default=None, help="Tokens per rank (list; default 4096).")
@click.option(
    "--global-tokens",
    type=int,
    default=None,
    help="A global batch instead: tokens per rank = N / ranks.",
)
@click.option("--schedule", default="sequential,chunked,tile", show_default=True, help="Schedules.")
@click.option("--chunks", default="2,4", show_default=True, help="Micro-batches (chunked).")
@click.option("--tile-rows", default="128", show_default=True, help="Rows per row tile.")
@click.option("--n-tile", default="512", show_default=True, help="GEMM columns per tile.")
@click.option("--placement", default="round-robin", show_default=True, help="round-robin,balanced.")
@click.option(
    "--order", default="auto", show_default=True, help="Tile orders: auto,arrival,expert."
)
@click.option(
    "--routing", default="balanced", show_default=True, help="balanced|zipf:S|counts:FILE."
)
@click.option("--seed", default="0", show_default=True, help="Routing seed.")
@click.option("--dispatch-dtype", default=None, help="bf16|fp16|fp8|int8 (default per preset).")
@click.option("--shared-expert/--no-shared-expert", default=False, show_default=True)
@click.option(
    "--hw",
    "hw_pairs",
    multiple=True,
    metavar="KEY=V1,V2",
    help="Hardware field values to search (or one value to fix).",
)
@click.option("--hw-file", type=click.Path(dir_okay=False), help="TOML of fixed overrides.")
@click.option(
    "--objective",
    type=click.Choice(["makespan", "tokens_per_s", "mfu"]),
    default="tokens_per_s",
    show_default=True,
)
@click.option("--max-hbm-per-rank", default=None, help="Constraint: HBM bytes per rank.")
@click.option(
    "--max-link-bw", default=None, help="Link budget: per-rank link bytes/s a config may assume."
)
@click.option("--top", default=5, show_default=True, help="Best configurations to print.")
@click.option("--budget", type=int, default=None, help="At most N new simulations.")
@click.option("--exhaustive", is_flag=True, help="Simulate every feasible candidate (reference).")
@click.option(
    "--results",
    "results_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Result store (JSONL) to reuse and extend [default: the cache dir's].",
)
@click.option("--no-reuse", is_flag=True, help="Neither read nor write the result store.")
@click.option("--jobs", type=int, default=None, help="Processes (default: all cores).")
@click.option("--engine", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--address", default=None, help="Ray cluster to join with --engine ray.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write .csv or .json.")
@click.option("--force", is_flag=True, help="Overwrite the output file.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--yes", is_flag=True, help="Allow a space of more than the run limit.")
@handle_errors
def search(**kw: Any) -> None:
    """Search EP degree, tokens, schedule, micro-batches, tiles, placement and hardware fields
    for the best configuration by simulation; print the best and the Pareto front.

    \b
    Candidates are simulated best lower bound first; one whose bound cannot beat the results
    so far is skipped, so the best found equals an exhaustive sweep's with fewer simulations.
    Results are kept (--results) and reused by later searches of the same model version.

    \b
    Example:
      moetrace search --ranks 64,128,256 --global-tokens 262144 \\
          --schedule chunked,tile --chunks 2,4 --hw hbm_bw=1.6e12,3.2e12 -o best.csv
    """
    from moetrace.executor.search import BASE, ResultStore, expand, model_fingerprint
    from moetrace.executor.search import search as run_search
    from moetrace.trace.cache import cache_dir
    from moetrace.trace.parallel import default_jobs

    output = kw["output"]
    out = None
    if output:
        if not output.endswith((".csv", ".json")):
            raise UserError(f"{output}: use a .csv or .json file name")
        out = check_output_path(output, kw["force"])
    if kw["top"] < 1:
        raise UserError(f"--top {kw['top']}: expected a count >= 1")
    if kw["budget"] is not None and kw["budget"] < 1:
        raise UserError(f"--budget {kw['budget']}: expected a count >= 1")
    jobs = kw["jobs"] or default_jobs()
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: expected a count >= 1")
    fixed = hw_overrides((), kw["hw_file"])
    ranges = hw_ranges(kw["hw_pairs"])
    with executor_errors():  # every field named must exist and every value parse
        from moetrace.executor.hardware import get_hardware

        for key, values in ranges.items():
            for value in values:
                get_hardware(kw["hardware"], {**fixed, key: value})
    base: dict[str, Any] = {
        **BASE,
        "preset": kw["preset"],
        "hardware": kw["hardware"],
        "routing": kw["routing"],
        "seed": check_seed(kw["seed"]),
        "hw_overrides": fixed or None,
        "dispatch_dtype": kw["dispatch_dtype"],
        "shared_expert": kw["shared_expert"],
        "one_sided": True,
        "l2": True,
        "dynamic": False,
    }
    axes: dict[str, list[Any]] = {
        "ranks": _ints(kw["ranks"], "ranks"),
        "schedule": _list(kw["schedule"], "schedule"),
        "chunks": _ints(kw["chunks"], "chunks"),
        "tile_rows": _ints(kw["tile_rows"], "tile-rows"),
        "n_tile": _ints(kw["n_tile"], "n-tile"),
        "placement": _list(kw["placement"], "placement"),
        "order": _list(kw["order"], "order"),
    }
    if kw["global_tokens"] is not None:
        if kw["tokens"] is not None:
            raise UserError("--tokens and --global-tokens: give one of them")
        if kw["global_tokens"] < 1:
            raise UserError(f"--global-tokens {kw['global_tokens']}: expected a count >= 1")
    else:
        axes["tokens"] = _ints(kw["tokens"] or "4096", "tokens")
    with executor_errors():
        configs = expand(base, axes, ranges, kw["global_tokens"])
    if not configs:
        raise UserError(f"--global-tokens {kw['global_tokens']}: no EP degree divides it")
    check_run_count(len(configs), "search space", kw["yes"])
    _check_inputs(configs)
    store = None
    if not kw["no_reuse"]:
        path = Path(kw["results_path"]) if kw["results_path"] else None
        path = path or cache_dir() / "search-results.jsonl"
        with executor_errors():
            store = ResultStore(path)
    fingerprint = model_fingerprint()
    with ExitStack() as stack:
        bar = stack.enter_context(_progress(not kw["quiet"]))
        evaluator = stack.enter_context(engine_evaluator(kw["engine"], jobs, kw["address"]))

        def keep(key: str, cfg: Config, result: dict[str, Any]) -> None:
            if store is not None:
                store.add(key, cfg, result)

        with executor_errors():
            try:
                outcome = run_search(
                    configs,
                    evaluator,
                    kw["objective"],
                    top=kw["top"],
                    known=store.entries if store is not None else None,
                    fingerprint=fingerprint,
                    max_hbm_per_rank=_number(kw["max_hbm_per_rank"], "max-hbm-per-rank"),
                    max_link_bw=_number(kw["max_link_bw"], "max-link-bw"),
                    exhaustive=kw["exhaustive"],
                    budget=kw["budget"],
                    progress=bar,
                    on_result=keep,
                )
            finally:  # what was simulated is kept even when the search is interrupted
                if store is not None and store.dirty:
                    store.save()
    for row in outcome.rows:
        if row.status == "failed":
            note(f"{_label(row)}: {(row.result or {}).get('error')}")
    _print(outcome, len(configs))
    if out is not None:
        meta = {
            "objective": kw["objective"],
            "candidates": len(configs),
            "model_fingerprint": fingerprint,
        }
        _write(outcome, out, kw["force"], meta)
        click.echo(f"{len(outcome.rows)} rows -> {visible(out)}")


COMMANDS = [search]
