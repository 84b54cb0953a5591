"""`moetrace calibrate` and `moetrace whatif`: the executor fitted to a measured trace.

calibrate TRACE… -o hw.toml   fit the hardware to the trace, write it in the presets' format
whatif TRACE… --schedule S    replay the trace's MoE layer as measured, then under S
Heavy imports stay inside the command bodies so `moetrace --help` is fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from moetrace.commands._common import UserError, check_output_path, handle_errors
from moetrace.text import visible

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def _whatif_errors() -> Iterator[None]:
    """Executor and what-if input errors become one line, exit 2."""
    from moetrace.executor.errors import ExecutorInputError
    from moetrace.whatif.extract import WhatIfInputError

    try:
        yield
    except (ExecutorInputError, WhatIfInputError) as exc:
        raise UserError(str(exc)) from None


def _load(traces: tuple[str, ...]) -> tuple[Any, str]:
    from moetrace.trace.io import load

    if not traces:
        raise UserError("give at least one trace file or folder")
    name = traces[0] if len(traces) == 1 else f"{traces[0]} (+{len(traces) - 1})"
    return load(list(traces)), Path(name).name if len(traces) == 1 else name


def _sets(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`--set` values, each a count of at least 1 (a zero `hidden` was silently replaced by
    what the trace says: every settable number is a size or a count)."""
    from moetrace.whatif.extract import parse_sets

    sets = parse_sets(pairs)
    for key, value in sets.items():
        if isinstance(value, int) and value < 1:
            raise UserError(f"--set {key}={value}: must be a whole number >= 1")
    return sets


def _base(hardware: str) -> Any:
    """A preset name, or a hardware TOML in the presets' format (e.g. from calibrate)."""
    from moetrace.executor.hardware import get_hardware, is_hardware_file, load_preset

    if is_hardware_file(hardware):
        return load_preset(hardware)[0]
    return get_hardware(hardware)


def _shared_options(output_help: str, json_help: str) -> Callable[[F], F]:
    """TRACE…, --hardware, --set, -o, --force and --json: what calibrate and whatif share."""

    def wrap(func: F) -> F:
        options = [
            click.argument("traces", nargs=-1, type=click.Path()),
            click.option(
                "--hardware",
                default="h100",
                show_default=True,
                help="Base preset for the fields the trace cannot give, or a calibrated TOML.",
            ),
            click.option(
                "--set",
                "set_pairs",
                multiple=True,
                metavar="KEY=VALUE",
                help="Workload value the trace lacks (tokens, hidden, …): listed as assumed.",
            ),
            click.option("-o", "--output", type=click.Path(dir_okay=False), help=output_help),
            click.option("--force", is_flag=True, help="Overwrite the output file(s)."),
            click.option("--json", "as_json", is_flag=True, help=json_help),
            click.option(
                "--ignore-meta",
                is_flag=True,
                help="Fit every field the events identify, not the hardware a moetrace "
                "trace states in its meta (checks the stated hardware against the events).",
            ),
        ]
        for option in reversed(options):
            func = option(func)
        return func

    return wrap


@click.command("calibrate")
@_shared_options("Write the calibrated hardware (presets' TOML format).", "Print the fits as JSON.")
@handle_errors
def calibrate_cmd(
    traces: tuple[str, ...],
    hardware: str,
    set_pairs: tuple[str, ...],
    output: str | None,
    force: bool,
    as_json: bool,
    ignore_meta: bool,
) -> None:
    """Fit the executor's hardware (GEMM efficiency, HBM, all-to-all, launches) to a trace."""
    from moetrace.trace.atomic import write_bytes_atomic
    from moetrace.whatif.calibrate import calibrate, to_toml
    from moetrace.whatif.extract import extract
    from moetrace.whatif.report import assumed_fields, assumed_lines, fit_line, known_line

    out = check_output_path(output, force) if output else None
    with _whatif_errors():
        base = _base(hardware)
        trace, name = _load(traces)
        wl = extract(trace, _sets(set_pairs))
        cal = calibrate(trace, wl, base, name, not ignore_meta)
        if out is not None:
            write_bytes_atomic(out, to_toml(cal).encode(), force=force)
    if as_json:
        click.echo(json.dumps(cal.to_dict(), indent=2, sort_keys=True))
        return
    click.echo(visible(f"{name}: calibrated {cal.hardware.name} (base {cal.base.name})"))
    for fit in cal.to_dict()["fits"]:
        if not fit["how"].startswith("derived"):
            click.echo(fit_line(fit))
    for line in (
        known_line(cal.to_dict()) + assumed_lines(assumed_fields(wl, cal, {}), cal.base.name)[1:]
    ):
        click.echo(line)
    for note in cal.notes:
        click.echo(f"  note: {note}")
    if out is not None:
        click.echo(visible(f"  written {out}  (use: moetrace whatif TRACE --hardware {out} …)"))


@click.command("whatif")
@_shared_options(
    "Write the what-if trace (.json, .json.gz); the replay goes beside it as *.replayed.*.",
    "Print the report as JSON.",
)
@click.option(
    "--schedule",
    default="tile",
    show_default=True,
    help="What-if schedule: tile|chunked|sequential.",
)
@click.option(
    "--placement",
    default=None,
    help="What-if placement: round-robin|balanced|eplb[:R]|FILE (an expert -> rank map; "
    "default: as measured).",
)
@click.option("--chunks", type=int, default=None, help="Micro-batches of a chunked what-if.")
@click.option("--no-one-sided", is_flag=True, help="Tile what-if ablation: two-sided transfers.")
@click.option("--no-l2", is_flag=True, help="Tile what-if ablation: intermediates through HBM.")
@click.option("--dynamic", is_flag=True, help="Tile what-if ablation: run-time ready queue.")
@click.option(
    "--order", default="auto", show_default=True, help="Tile transfer order: auto|arrival|expert."
)
@click.option(
    "--hw",
    "hw_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="What-if hardware change (e.g. link_bw=400e9), on top of the calibrated fit.",
)
@handle_errors
def whatif_cmd(
    traces: tuple[str, ...],
    schedule: str,
    placement: str | None,
    chunks: int | None,
    no_one_sided: bool,
    no_l2: bool,
    dynamic: bool,
    order: str,
    hardware: str,
    hw_pairs: tuple[str, ...],
    set_pairs: tuple[str, ...],
    as_json: bool,
    output: str | None,
    force: bool,
    ignore_meta: bool,
) -> None:
    """Replay a trace's MoE layer on hardware fitted to it, then under another schedule."""
    from moetrace.commands.numbers import check_hw_overrides
    from moetrace.executor.hardware import is_hardware_file, parse_overrides
    from moetrace.whatif.report import text, what_if

    out = check_output_path(output, force) if output else None
    replay_out = _replay_path(out) if out is not None else None
    if replay_out is not None:
        check_output_path(replay_out, force)
    with _whatif_errors():
        change = check_hw_overrides(parse_overrides(hw_pairs))
        base = _base(hardware)
        calibrated = base if is_hardware_file(hardware) else None
        trace, name = _load(traces)
        if chunks is not None and chunks < 1:
            raise UserError(f"--chunks {chunks}: must be >= 1")
        options = {"one_sided": not no_one_sided, "l2": not no_l2, "dynamic": dynamic}
        result = what_if(
            trace,
            name,
            base,
            schedule,
            placement,
            change,
            _sets(set_pairs),
            calibrated,
            chunks,
            {**options, "order": order},
            hardware if calibrated is not None else "",
            not ignore_meta,
        )
    if out is not None and replay_out is not None:
        result.whatif.write(out, force=force)  # trace writers are atomic
        result.replayed.write(replay_out, force=force)
        result.report["whatif_trace"] = str(out)
        result.report["replayed_trace"] = str(replay_out)
    if as_json:
        click.echo(json.dumps(result.report, indent=2, sort_keys=True, default=str))
        return
    for line in text(result.report):
        click.echo(visible(line))  # trace and file names are data
    if out is not None:
        click.echo(
            f"  traces: {replay_out} (replayed), {out} (what-if); "
            f"compare: moetrace compare {replay_out} {out}"
        )


def _replay_path(out: Path) -> Path:
    name = out.name
    for suffix in (".json.gz", ".json", ".pftrace"):
        if name.endswith(suffix):
            return out.with_name(name[: -len(suffix)] + ".replayed" + suffix)
    return out.with_name(name + ".replayed.json")


COMMANDS = [calibrate_cmd, whatif_cmd]
