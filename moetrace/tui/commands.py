"""Command palette (Ctrl+P) entries: overlays, tables, view and lane commands."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .table_registry import table_commands

COMMANDS: list[tuple[str, str, str]] = [
    ("Toggle critical path overlay", "overlay('critical')", "c"),
    ("Toggle idle gaps overlay", "overlay('gaps')", "i"),
    ("Toggle exposed communication overlay", "overlay('exposed')", "x"),
    *table_commands(),
    ("Go to rank / step / time", "prompt('goto')", ":"),
    ("Show or hide the side panes", "toggle_side", "p"),
    ("Sort the metrics' ranks", "metrics_sort", "o"),
    ("Search event names", "prompt('search')", "/"),
    ("Filter lanes", "prompt('filter')", "\\"),
    ("Reset zoom", "reset_view", "0"),
    ("Collapse all ranks", "collapse_all(True)", ""),
    ("Expand all ranks", "collapse_all(False)", ""),
    ("Help", "help", "?"),
]


class ViewerCommands(Provider):
    """The viewer's actions, by name, so every key is also discoverable in the palette."""

    async def _run(self, action: str) -> None:
        await self.app.run_action(action)

    def _commands(self) -> list[tuple[str, str, str]]:
        steps = getattr(self.app, "steps", [])
        return COMMANDS + [(f"Go to step {n}", f"goto_step({n})", "g") for n, _, _ in steps]

    async def discover(self) -> Hits:
        for name, action, key in self._commands():
            yield DiscoveryHit(
                name, partial(self._run, action), help=f"key: {key}" if key else None
            )

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, key in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(name),
                    partial(self._run, action),
                    help=f"key: {key}" if key else None,
                )
