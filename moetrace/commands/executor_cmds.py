"""`moetrace run`, `sweep`, `demo` and `validate`: the executor on the command line.

The summary numbers (utilisation, exposed comm, critical-path comm share, MFU) come from the
analyzer (`moetrace.analysis.report.analyze`), so simulated and real traces are measured the
same way. Heavy imports stay inside the command bodies so `moetrace --help` is fast.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from moetrace.commands._common import UserError, check_output_path, handle_errors, note, warn
from moetrace.commands.executor_common import (
    MAX_RUNS,
    check_run_count,
    executor_errors,
    hw_overrides,
    run_figures,
    run_simulation,
    simulate_makespan,
    simulate_write_figures,
)
from moetrace.commands.numbers import check_seed
from moetrace.commands.output import OutputFormat, emit, output_options
from moetrace.text import visible

if TYPE_CHECKING:
    from moetrace.executor.config import SimulationConfig

DEMO_MARKER = ".moetrace-demo"
# rivals run for the headline only (makespan, no trace): with the traced schedules, the best of
# sequential and chunked x2/x4/x8 is "tile vs best rival" (the validation's best-rival row)
DEMO_SUMMARY_ONLY: dict[str, dict[str, Any]] = {
    "chunked x4": {"schedule": "chunked", "chunks": 4},
    "chunked x8": {"schedule": "chunked", "chunks": 8},
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


class _ScheduleOption(click.Option):
    """`--schedule`: its help lists the registered schedules (read when help is shown, so the
    registry is imported only then)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from moetrace.executor.schedules.registry import schedule_names

        self.help = "|".join(schedule_names()) + "."
        return super().get_help_record(ctx)


def _simulation_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by `run` and `sweep` (sweep accepts comma lists in the first ones)."""
    options = [
        click.option("--preset", default="deepseek-v3", show_default=True, help="MoE layer shape."),
        click.option(
            "--hardware",
            default="ascend-a3",
            show_default=True,
            help="Device profile: a preset, or a preset TOML file (e.g. calibrate -o).",
        ),
        click.option("--ranks", default="64", show_default=True, help="EP degree (ranks)."),
        click.option("--tokens", default="4096", show_default=True, help="Tokens per rank."),
        click.option("--schedule", cls=_ScheduleOption, default="tile", show_default=True),
        click.option(
            "--routing", default="balanced", show_default=True, help="balanced|zipf:S|counts:FILE."
        ),
        click.option(
            "--placement", default="round-robin", show_default=True, help="round-robin|balanced."
        ),
        click.option("--seed", default="0", show_default=True, help="Routing seed."),
        click.option("--chunks", default=4, show_default=True, help="Micro-batches (chunked)."),
        click.option(
            "--dispatch-dtype", default=None, help="bf16|fp16|fp8|int8 (default per preset)."
        ),
        click.option("--shared-expert/--no-shared-expert", default=False, show_default=True),
        click.option(
            "--tile-rows", default=128, show_default=True, help="Rows per dispatch/GEMM row tile."
        ),
        click.option(
            "--n-tile", default=512, show_default=True, help="GEMM output columns per tile."
        ),
        click.option("--no-one-sided", is_flag=True, help="Tile ablation: two-sided transfers."),
        click.option("--no-l2", is_flag=True, help="Tile ablation: intermediates through HBM."),
        click.option("--dynamic", is_flag=True, help="Tile ablation: run-time ready queue."),
        click.option(
            "--order",
            default="auto",
            show_default=True,
            help="Tile transfer order: auto (planner picks)|arrival|expert.",
        ),
        click.option(
            "--hw",
            "hw_pairs",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override a hardware field.",
        ),
        click.option(
            "--hw-file", type=click.Path(dir_okay=False), help="TOML file of hardware overrides."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _int(value: str, name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--{name} {value!r}: expected an integer") from None


def _config(kw: dict[str, Any], overrides: dict[str, Any]) -> SimulationConfig:
    """The run's `SimulationConfig` from the command's options, checked before any work
    (one line, exit 2)."""
    from moetrace.executor.config import SimulationConfig

    ranks, tokens = _int(str(kw["ranks"]), "ranks"), _int(str(kw["tokens"]), "tokens")
    seed = check_seed(kw["seed"])
    with executor_errors():
        return SimulationConfig(
            preset=kw["preset"],
            hardware=kw["hardware"],
            ranks=ranks,
            tokens=tokens,
            schedule=kw["schedule"],
            routing=kw["routing"],
            placement=kw["placement"],
            seed=seed,
            hw_overrides=overrides or None,
            chunks=kw["chunks"],
            dispatch_dtype=kw["dispatch_dtype"],
            shared_expert=kw["shared_expert"],
            tile_rows=kw["tile_rows"],
            n_tile=kw["n_tile"],
            one_sided=not kw["no_one_sided"],
            l2=not kw["no_l2"],
            dynamic=kw["dynamic"],
            order=kw["order"],
        )


@click.command("run")
@_simulation_options
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the trace (.json, .json.gz, .pftrace).",
)
@click.option("--force", is_flag=True, help="Overwrite the output file.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--seeds",
    default=1,
    show_default=True,
    help="Also run seeds SEED..SEED+N-1 and report the spread of makespan and MFU.",
)
@click.option("--yes", is_flag=True, help=f"Allow more than {MAX_RUNS} runs.")
@handle_errors
def run(
    output: str | None,
    force: bool,
    as_json: bool,
    seeds: int,
    yes: bool,
    hw_pairs: tuple[str, ...],
    hw_file: str | None,
    **kw: Any,
) -> None:
    """Simulate one MoE layer on all EP ranks and print its summary."""
    config = _config(kw, hw_overrides(hw_pairs, hw_file))
    out = check_output_path(output, force) if output else None
    if output and out is None:
        raise UserError("-o -: writing a trace to stdout is not supported here; give a file name")
    if seeds < 1:
        raise UserError(f"--seeds {seeds}: expected a count >= 1")
    check_run_count(seeds, "--seeds", yes)
    trace = run_simulation(config)
    if out is not None:
        trace.write(out, force=force)
    summary = run_figures(trace)
    for warning in trace.meta["executor"].get("warnings", []):
        warn(warning)
    for line in trace.meta["executor"].get("notes", []):
        note(line)
    if seeds > 1:
        summary["seeds"] = seed_spread(config, seeds)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
        return
    ex = trace.meta["executor"]
    click.echo(
        f"{config.preset} on {config.ranks} x {config.hardware}, "
        f"{config.tokens} tokens/rank, schedule {ex['schedule']['name']}, "
        f"routing {config.routing}, placement {config.placement}"
    )
    click.echo(
        f"  makespan     {summary['makespan_ns'] / 1e6:.3f} ms   ({summary['tasks']:,} tasks)"
    )
    click.echo(f"  tokens/s     {summary['tokens_per_s']:,.0f}")
    click.echo(
        "  util         " + "  ".join(f"{u} {_pct(v)}" for u, v in sorted(summary["util"].items()))
    )
    click.echo(f"  exposed comm {_pct(summary['exposed_ratio'])} of comm time")
    click.echo(f"  cp comm      {_pct(summary['cp_comm_ratio'])} of comm time on the critical path")
    click.echo(
        f"  MFU          {_pct(summary['mfu_makespan'])} over the layer's makespan"
        f" ({_pct(summary['mfu'])} over each rank's busy window)"
    )
    floors = summary["floors_ns"]
    click.echo(
        "  floors       "
        + "  ".join(f"{k} {v / 1e6:.3f} ms" for k, v in floors.items())
        + "  (no schedule can beat these)"
    )
    if "seeds" in summary:
        sp = summary["seeds"]
        ms = sp["makespan_ms"]
        click.echo(
            f"  over {sp['n']} seeds  makespan {ms['min']:.3f}..{ms['max']:.3f}"
            f" ms (mean {ms['mean']:.3f}, sd {ms['sd']:.3f}); "
            f"MFU {_pct(sp['mfu']['min'])}..{_pct(sp['mfu']['max'])}"
        )
    if out is not None:
        click.echo(f"  trace        {visible(out)}")


def seed_spread(config: SimulationConfig, n: int) -> dict[str, Any]:
    """Makespan (ms) and MFU over the makespan for seeds seed..seed+n-1: min, max, mean, sd."""
    import statistics

    from moetrace.executor.floors import mfu_over_makespan
    from moetrace.executor.run import simulate_run

    spans, mfus = [], []
    with executor_errors():
        for k in range(n):
            result = simulate_run(dataclasses.replace(config, seed=config.seed + k))
            spans.append(result.makespan_ns / 1e6)
            mfus.append(
                mfu_over_makespan(
                    result.timed, result.hardware, result.workload.ranks, result.makespan_ns
                )
            )

    def stats(xs: list[float]) -> dict[str, float]:
        return {
            "min": min(xs),
            "max": max(xs),
            "mean": statistics.fmean(xs),
            "sd": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        }

    return {"n": n, "first_seed": config.seed, "makespan_ms": stats(spans), "mfu": stats(mfus)}


def _split(value: str, option: str) -> list[str]:
    """A comma-separated option as its values; an empty list is refused, not an empty table."""
    values = [v.strip() for v in str(value).split(",") if v.strip()]
    if not values:
        raise UserError(f"--{option} {str(value)!r}: expected one or more comma-separated values")
    return values


@click.command("sweep")
@_simulation_options
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="Table to write (.csv or .parquet).",
)
@click.option("--force", is_flag=True, help="Overwrite the output file.")
@click.option("--yes", is_flag=True, help=f"Allow a grid of more than {MAX_RUNS} runs.")
@handle_errors
def sweep(
    output: str,
    force: bool,
    yes: bool,
    hw_pairs: tuple[str, ...],
    hw_file: str | None,
    **kw: Any,
) -> None:
    """Simulate every combination of comma-separated options and write one row per run.

    \b
    Example:
      moetrace sweep --ranks 8,16,32,64 --schedule sequential,tile \\
          --routing balanced,zipf:1.2 -o grid.csv
    """
    import polars as pl

    if not output.endswith((".csv", ".parquet")):
        raise UserError(f"{output}: use a .csv or .parquet file name")
    out = check_output_path(output, force)
    assert out is not None
    overrides = hw_overrides(hw_pairs, hw_file)
    grid_keys = (
        "preset",
        "hardware",
        "ranks",
        "tokens",
        "schedule",
        "routing",
        "placement",
        "seed",
    )
    values = [_split(kw[k], k) for k in grid_keys]
    runs = math.prod(len(v) for v in values)
    check_run_count(
        runs, " x ".join(f"{len(v)} {k}" for k, v in zip(grid_keys, values, strict=True)), yes
    )
    combos = [dict(zip(grid_keys, combo, strict=True)) for combo in itertools.product(*values)]
    # every combination is built (and so checked) before the first runs
    configs = [_config({**kw, **combo}, overrides) for combo in combos]
    rows = []
    for i, config in enumerate(configs, 1):
        row = {k: getattr(config, k) for k in grid_keys}
        click.echo(f"[{i}/{len(configs)}] {json.dumps(row)}", err=True)
        summary = run_figures(run_simulation(config, show_progress=False))
        row.update(one_sided=config.one_sided, l2=config.l2, dynamic=config.dynamic)
        row.update(
            {
                k: summary[k]
                for k in (
                    "makespan_ns",
                    "tasks",
                    "tokens_per_s",
                    "exposed_ratio",
                    "cp_comm_ratio",
                    "mfu",
                )
            }
        )
        row.update({f"util_{u}": v for u, v in summary["util"].items()})
        rows.append(row)
    table = pl.DataFrame(rows)
    from moetrace.trace.atomic import atomic_path

    with atomic_path(out, force=force) as tmp:  # complete or not at all
        if output.endswith(".parquet"):
            table.write_parquet(tmp)
        else:
            table.write_csv(tmp)
    click.echo(f"{len(rows)} runs -> {visible(out)}")


def _prepare_demo_dir(directory: Path, force: bool) -> None:
    """Create the demo directory; never clobber a directory that is not a previous demo."""
    if directory.exists() and not directory.is_dir():
        raise UserError(f"{directory}: exists and is not a directory")
    if (
        directory.is_dir()
        and any(directory.iterdir())
        and not (directory / DEMO_MARKER).exists()
        and not force
    ):
        raise UserError(f"{directory}: exists and is not a moetrace demo directory (use --force)")
    directory.mkdir(parents=True, exist_ok=True)
    from moetrace.trace.atomic import write_bytes_atomic

    write_bytes_atomic(
        directory / DEMO_MARKER,
        b"written by `moetrace demo`; rerunning the demo replaces its files\n",
        force=True,
    )


@click.command("demo")
@click.option(
    "--out", "out_dir", default="moetrace-demo", show_default=True, type=click.Path(file_okay=False)
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["pftrace", "json.gz", "json"]),
    default="pftrace",  # 3-5x faster to write than Chrome JSON (sync edges become flows there)
    show_default=True,
)
@click.option("--ranks", default=64, show_default=True, help="EP degree.")
@click.option("--tokens", default=4096, show_default=True, help="Tokens per rank.")
@click.option("--force", is_flag=True, help="Use the directory even if it is not a previous demo.")
@click.option("--no-view", is_flag=True, help="Do not open the viewer afterwards.")
@click.option(
    "--jobs", default=2, show_default=True, help="Run the schedules in parallel processes."
)
@handle_errors
def demo(
    out_dir: str, fmt: str, ranks: int, tokens: int, force: bool, no_view: bool, jobs: int
) -> None:
    """DeepSeek-V3's MoE layer on 64 Ascend A3 dies: the chunked baseline vs tile-level.

    The reference is `chunked` with 2 micro-batches (operator kernels, dispatch overlapping
    the previous micro-batch's GEMMs: the baseline `moetrace validate` reproduces the paper
    with); `sequential` (fully serialised) is shown for context. Writes the three traces to
    ./moetrace-demo/, prints the comparison (speedups against chunked) and, in a terminal,
    opens the viewer on the tile-scheduled trace.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from moetrace.executor.config import SimulationConfig
    from moetrace.executor.schedules.registry import demo_schedules

    directory = Path(out_dir)
    shown = demo_schedules()  # table order: the reference first, the featured one last
    reference_name, featured = shown[0].name, shown[-1].name
    labels = {s.name: s.demo_label for s in shown}
    base = {"preset": "deepseek-v3", "hardware": "ascend-a3", "ranks": ranks, "tokens": tokens}
    with executor_errors():
        params = {
            s.name: SimulationConfig.build(**base, schedule=s.name, **s.demo_options) for s in shown
        }
        extra = [
            SimulationConfig.build(**base, **options) for options in DEMO_SUMMARY_ONLY.values()
        ]
    _prepare_demo_dir(directory, force)
    paths = {s: directory / f"{s}.{fmt}" for s in params}
    # the longest run (the featured tile) first, so that two workers finish about together
    run_order = sorted(paths, key=lambda s: s != featured)
    jobs_args = [(params[s], str(paths[s])) for s in run_order]
    click.echo(
        f"writing {len(paths)} .{fmt} traces into {visible(directory.resolve())}/ "
        f"({ranks} ranks x {tokens} tokens: tens to hundreds of MB; --out DIR to choose)",
        err=True,
    )
    click.echo("simulating chunked (2 micro-batches), sequential and tile schedules ...", err=True)
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: Polars' thread pool must not be forked
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(params)), mp_context=ctx) as pool:
            futures = [pool.submit(simulate_write_figures, p, out) for p, out in jobs_args]
            spans = list(pool.map(simulate_makespan, extra))
            summaries = [f.result() for f in futures]
    else:
        summaries = [simulate_write_figures(p, out) for p, out in jobs_args]
        spans = [simulate_makespan(p) for p in extra]
    done = dict(zip(run_order, summaries, strict=True))
    results = {s: done[s] for s in paths}
    reference = results[reference_name]["makespan_ns"]
    rival_names = {
        s.name: s.name + (f" x{s.demo_options['chunks']}" if "chunks" in s.demo_options else "")
        for s in shown
    }
    rivals = {rival_names[n]: r["makespan_ns"] for n, r in results.items() if n != featured}
    rivals.update(zip(DEMO_SUMMARY_ONLY, spans, strict=True))
    table = Table(
        title=f"DeepSeek-V3 MoE layer, {ranks} x Ascend A3 dies, {tokens} tokens/rank, "
        "balanced routing; speedup vs chunked (2 micro-batches)"
    )
    for col in (
        "schedule",
        "makespan",
        "speedup",
        "AIC util",
        "exposed comm",
        "cp comm share",
        "MFU (makespan)",
    ):
        table.add_column(col, justify="left" if col == "schedule" else "right")
    for schedule, s in results.items():
        table.add_row(
            Text(labels[schedule]),
            Text(f"{s['makespan_ns'] / 1e6:.2f} ms"),
            Text(f"{reference / s['makespan_ns']:.2f}x"),
            Text(_pct(s["util"].get("aic"))),
            Text(_pct(s["exposed_ratio"])),
            Text(_pct(s["cp_comm_ratio"])),
            Text(_pct(s["mfu_makespan"])),
        )
    console = Console(width=120)
    console.print(table)
    tile_ns = results[featured]["makespan_ns"]
    best = min(rivals, key=lambda k: rivals[k])
    console.print(
        Text(
            f"{featured} vs best rival: {rivals[best] / tile_ns:.2f}x "
            f"({best} {rivals[best] / 1e6:.2f} ms; "
            + ", ".join(f"{k} {v / 1e6:.2f}" for k, v in rivals.items())
            + " ms)"
        )
    )
    console.print(
        Text(
            f"{featured} vs paper baseline ({rival_names[reference_name]}): "
            f"{reference / tile_ns:.2f}x"
        )
    )
    written = sum(p.stat().st_size for p in paths.values() if p.exists())
    console.print(
        Text(
            f"traces ({written / 1e6:,.1f} MB in {directory}): "
            + "  ".join(str(p) for p in paths.values())
        )
    )
    console.print(Text(f"browse: moetrace view {paths[featured]}"))
    if no_view or not sys.stdout.isatty():
        return
    try:
        from moetrace.tui.app import launch
    except ImportError:
        return
    launch([str(paths[featured])])


@click.command("validate")
@click.option(
    "--docs",
    "docs_path",
    default="docs/executor.md",
    show_default=True,
    type=click.Path(dir_okay=False),
)
@click.option(
    "--print", "print_only", is_flag=True, help="Print the table instead of updating the docs."
)
@output_options("Print every row as JSON (docs untouched).")
@handle_errors
def validate(docs_path: str, print_only: bool, fmt: OutputFormat) -> None:
    """Regenerate the executor's validation table (the "Validation" section of docs/executor.md)."""
    from moetrace.commands.executor_validate import collect_validation
    from moetrace.commands.validation_docs import render_validation, update_docs

    with executor_errors():
        data = collect_validation(lambda msg: click.echo(msg, err=True))

    def docs() -> None:
        markdown = render_validation(lambda msg: None, data)
        if print_only:
            click.echo(markdown)
            return
        update_docs(Path(docs_path), markdown)
        click.echo(f"validation table written to {visible(docs_path)}")

    emit(fmt, json=lambda: json.dumps(data, indent=2, default=str), table=docs)


COMMANDS = [run, sweep, demo, validate]
