"""The `moetrace` command: a thin click group; each part registers its own commands."""

from __future__ import annotations

import importlib

import click

from moetrace import __version__
from moetrace.commands._common import OneLineErrorGroup

# Modules under moetrace.commands, each exporting COMMANDS (a list of click commands).
_COMMAND_MODULES = (
    "trace_cmds",
    "executor_cmds",
    "search_cmds",
    "analysis_cmds",
    "view_cmd",
    "job_cmds",
    "whatif_cmds",
    "cache_cmds",
)

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=OneLineErrorGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, prog_name="moetrace")
def main() -> None:
    """moetrace: see where a Mixture-of-Experts step spends its time.

    \b
    Simulate MoE layers tile by tile, analyze profiler traces (PyTorch/Kineto,
    Ascend msprof/torch_npu, Chrome JSON, moetrace's own) and browse them in the terminal.

    \b
    Start here:
      moetrace demo                      DeepSeek-V3 on 64 ranks: chunked baseline vs tile
      moetrace view trace.json           browse a trace (keys: ? for help)
      moetrace metrics trace.json        exposed comm, idle cores, critical path
      moetrace info trace.json           what is in a trace
    """


def _register() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(f"moetrace.commands.{name}")
        for command in getattr(module, "COMMANDS", []):
            main.add_command(command)


_register()
