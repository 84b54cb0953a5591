"""Click commands, one module per part of moetrace; `moetrace.cli` registers them.

Each module exports `COMMANDS: list[click.Command]` and keeps its heavy imports inside the
command bodies so `moetrace --help` stays fast.
"""
