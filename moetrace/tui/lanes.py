"""The timeline's lane tree: rank -> unit -> track (-> nesting depth), built once per trace.

Every (track, depth) becomes a lane with an `IntervalIndex` of its events; rank and unit
groups get summary indexes built lazily (on first draw) from their tracks' top-level events.
`LaneModel.rows` flattens the tree for the current collapse state and lane filter. Pure
Polars/numpy (no Textual), so it is unit-testable and cheap to rebuild.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import polars as pl

from moetrace.analysis.labels import short_names
from moetrace.trace.model import UNITS, Trace

from .binning import IntervalIndex
from .lane_parts import CounterSeries, Lane, LaneEvents, Row, TrackInfo, safe_text

__all__ = [
    "CounterSeries",
    "Lane",
    "LaneEvents",
    "LaneModel",
    "Row",
    "TrackInfo",
    "pack_braille",
    "safe_text",
    "search_events",
]

DEVICE_UNITS = ("aic", "aiv", "link", "stream")
COLLAPSE_RANKS_ABOVE = 16
COLLAPSE_DEPTH_FROM = 4


class LaneModel:
    """Lanes, groups and an id -> position lookup for one trace."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        window = trace.window()
        self.origin = window[0] if window else 0
        self.span = float(max((window[1] - window[0]) if window else 0, 1))
        self.tracks: list[TrackInfo] = []
        self.lanes: dict[tuple[int, int], Lane] = {}
        self._summaries: dict[tuple[object, ...], IntervalIndex] = {}
        self.counters = self._build_counters()
        self._build_tracks()
        self._build_lanes()
        self.ranks: list[int | None] = list(dict.fromkeys(t.rank for t in self.tracks))
        self.unit_tracks: dict[tuple[int | None, str], list[TrackInfo]] = {}
        self.rank_tracks: dict[int | None, list[TrackInfo]] = {}
        for info in self.tracks:
            self.unit_tracks.setdefault((info.rank, info.unit), []).append(info)
            self.rank_tracks.setdefault(info.rank, []).append(info)
        self._all_scale = max(1, len(self._group_tracks(("all",))))

    # ------------------------------------------------------------------ build
    def _build_tracks(self) -> None:
        tracks = self.trace.tracks
        unit_order = {u: i for i, u in enumerate(UNITS)}
        rows = tracks.with_columns(
            pl.col("unit").cast(pl.String).fill_null("other").alias("unit_s"),
        ).to_dicts()
        rows.sort(
            key=lambda r: (
                r["rank"] is None,
                r["rank"] if r["rank"] is not None else 0,
                unit_order.get(r["unit_s"], 99),
                r["sort_index"] if r["sort_index"] is not None else 0,
                r["track"],
            )
        )
        names = short_names(pl.Series("n", [r["thread_name"] for r in rows], pl.String))
        for r, short in zip(rows, names, strict=True):
            r["thread_name"] = short  # a track named by a C++ kernel: its short name
            counter_name = r["process_name"] if r["track"] in self.counters else None
            name = (
                r["thread_name"]
                or counter_name
                or (f"{r['unit_s']} {r['tid']}" if r["tid"] is not None else f"track {r['track']}")
            )
            self.tracks.append(TrackInfo(int(r["track"]), r["rank"], r["unit_s"], safe_text(name)))

    def _build_counters(self) -> dict[int, list[CounterSeries]]:
        """Counter samples by track, one series per counter name, times from the origin."""
        frame = self.trace.counters
        out: dict[int, list[CounterSeries]] = {}
        if frame.height == 0:
            return out
        frame = frame.drop_nulls(["ts", "value"]).sort(["track", "name", "ts"])
        for (track, name), part in frame.group_by(["track", "name"], maintain_order=True):
            ts = (part["ts"].to_numpy() - self.origin).astype(np.float64)
            values = part["value"].to_numpy().astype(np.float64)
            out.setdefault(int(track), []).append(
                CounterSeries(int(track), safe_text(name), ts, values)
            )
        return out

    def _build_lanes(self) -> None:
        ev = self.trace.events
        by_track = {t.track: t for t in self.tracks}
        if ev.height:
            ev = ev.select(
                pl.col("id"),
                pl.col("track"),
                pl.col("depth").fill_null(0),
                pl.col("ts"),
                pl.col("dur"),
                pl.col("kind").to_physical().alias("kind_code"),
                pl.col("name"),
            ).sort(["track", "depth", "ts"])
            self._ev_names = short_names(ev["name"])  # slices show the classifier's short names
            track = ev["track"].to_numpy().astype(np.int64)
            depth = ev["depth"].to_numpy().astype(np.int64)
            start = (ev["ts"].to_numpy() - self.origin).astype(np.float64)
            end = start + ev["dur"].to_numpy().astype(np.float64)
            ids = ev["id"].to_numpy()
            kinds = ev["kind_code"].to_numpy().astype(np.int8)
            events = LaneEvents(start, end, ids, kinds)
            key = track * 65536 + depth
            cuts = np.flatnonzero(np.diff(key)) + 1
            bounds = np.concatenate([[0], cuts, [len(key)]]).tolist()
            for a, b in itertools.pairwise(bounds):
                t, d = int(track[a]), int(depth[a])
                info = by_track.get(t)
                if info is None:  # events on an unknown track: give it a lane anyway
                    info = TrackInfo(t, None, "other", f"track {t}")
                    by_track[t] = info
                    self.tracks.append(info)
                label = info.label if d == 0 else f"{info.label} d{d}"
                lane = Lane(t, d, info.rank, info.unit, label, events, (a, b))
                info.lanes.append(lane)
                self.lanes[(t, d)] = lane
            self._id_order = np.argsort(ids, kind="stable")
            self._ids_sorted = ids[self._id_order]
            self._ev_track, self._ev_depth = track, depth
            self._ev_start, self._ev_end = start, end
        else:
            self._ids_sorted = np.empty(0, dtype=np.uint32)
            self._ev_names = pl.Series("name", [], dtype=pl.String)
        for info in self.tracks:
            if not info.lanes:
                lane = Lane(info.track, 0, info.rank, info.unit, info.label, None)
                info.lanes.append(lane)
                self.lanes[(info.track, 0)] = lane

    # ---------------------------------------------------------------- lookups
    def locate(self, event_id: int) -> tuple[Lane, float, float] | None:
        """The lane of an event and its start/end (ns from the origin), or None if unknown."""
        k = int(np.searchsorted(self._ids_sorted, event_id))
        if k >= len(self._ids_sorted) or int(self._ids_sorted[k]) != event_id:
            return None
        row = int(self._id_order[k])
        lane = self.lanes[(int(self._ev_track[row]), int(self._ev_depth[row]))]
        return lane, float(self._ev_start[row]), float(self._ev_end[row])

    def flow_ends(self, event_id: int) -> list[tuple[tuple[int, int], float, str]]:
        """Where the flows (dependencies) of an event end: ▶ at the end of each event it
        depends on, ◀ at the start of each event that depends on it, and a ▶/◀ on the event
        itself for each direction it has. (lane key, time ns from the origin, mark)."""
        deps = self.trace.deps
        if deps.height == 0:
            return []
        sources = deps.filter(pl.col("dst") == event_id)["src"].to_numpy()
        targets = deps.filter(pl.col("src") == event_id)["dst"].to_numpy()
        out: list[tuple[tuple[int, int], float, str]] = []
        for ids, mark in ((sources, "▶"), (targets, "◀")):
            for eid in ids[:64].tolist():
                found = self.locate(int(eid))
                if found is not None:
                    lane, start, end = found
                    at = max(end - 1e-6, start) if mark == "▶" else start
                    out.append(((lane.track, lane.depth), at, mark))
        me = self.locate(event_id)
        if me is not None:
            lane, start, end = me
            if len(sources):
                out.append(((lane.track, lane.depth), start, "◀"))
            if len(targets):
                out.append(((lane.track, lane.depth), max(end - 1e-6, start), "▶"))
        return out

    def names_of(self, event_ids: np.ndarray) -> list[str]:
        """Event names (control characters escaped) for known event ids, in order."""
        ids = np.asarray(event_ids, dtype=np.int64)
        if len(ids) == 0 or len(self._ids_sorted) == 0:
            return []
        k = np.clip(np.searchsorted(self._ids_sorted, ids), 0, len(self._ids_sorted) - 1)
        rows = self._id_order[k]
        return [safe_text(n) for n in self._ev_names.gather(rows).cast(pl.String).to_list()]

    def lanes_of(self, event_ids: np.ndarray) -> np.ndarray:
        """(track, depth) per event id as an (n, 2) int64 array; (-1, -1) for unknown ids."""
        ids = np.asarray(event_ids, dtype=np.int64)
        out = np.full((len(ids), 2), -1, dtype=np.int64)
        if len(self._ids_sorted) == 0 or len(ids) == 0:
            return out
        k = np.clip(np.searchsorted(self._ids_sorted, ids), 0, len(self._ids_sorted) - 1)
        found = self._ids_sorted[k].astype(np.int64) == ids
        rows = self._id_order[k[found]]
        out[found, 0] = self._ev_track[rows]
        out[found, 1] = self._ev_depth[rows]
        return out

    def cached_summary(self, key: tuple[object, ...]) -> IntervalIndex | None:
        """The summary index of a group if it was built already."""
        return self._summaries.get(key)

    def group_events(self, key: tuple[object, ...]) -> int:
        """Top-level events in a group's tracks (what building its summary costs)."""
        return sum(
            info.lanes[0].bounds[1] - info.lanes[0].bounds[0] for info in self._group_tracks(key)
        )

    def summary(self, key: tuple[object, ...]) -> IntervalIndex:
        """Summary index of a group (top-level, non-marker events of its tracks), cached."""
        if key in self._summaries:
            return self._summaries[key]
        infos = self._group_tracks(key)
        starts: list[np.ndarray] = []
        ends: list[np.ndarray] = []
        for info in infos:
            lane_starts, lane_ends = info.lanes[0].busy_parts()
            starts.append(lane_starts)
            ends.append(lane_ends)
        if starts:
            merged = IntervalIndex(np.concatenate(starts), np.concatenate(ends), disjoint=False)
        else:
            merged = IntervalIndex(np.empty(0), np.empty(0), disjoint=False)
        self._summaries[key] = merged
        return merged

    def _group_tracks(self, key: tuple[object, ...]) -> list[TrackInfo]:
        if key[0] == "rank":
            rank = key[1]
            return self.rank_tracks.get(rank if isinstance(rank, int) else None, [])
        if key[0] == "unit":
            return self.unit_tracks.get((key[1], key[2]), [])  # type: ignore[arg-type]
        device = [t for t in self.tracks if t.unit in DEVICE_UNITS]
        return device or self.tracks

    def group_lanes(self, key: tuple[object, ...]) -> list[Lane]:
        """The lanes of a rank or unit group (braille rows: of their ranks), top first."""
        if key and key[0] == "braille":
            return [lane for k in key[1:] if isinstance(k, tuple) for lane in self.group_lanes(k)]
        if key and key[0] in ("rank", "unit"):
            return [lane for info in self._group_tracks(key) for lane in info.lanes]
        return []

    def summary_scale(self, key: tuple[object, ...]) -> int:
        """How many tracks a summary averages over."""
        if key[0] == "all":
            return self._all_scale
        return max(1, len(self._group_tracks(key)))

    # ------------------------------------------------------------------- rows
    def default_collapsed(self) -> set[tuple[object, ...]]:
        """Collapse rank groups above 16 ranks, and tracks nested 4 or more deep."""
        out: set[tuple[object, ...]] = set()
        if len(self.ranks) > COLLAPSE_RANKS_ABOVE:
            out.update(("rank", r) for r in self.ranks)
        for info in self.tracks:
            if len(info.lanes) > COLLAPSE_DEPTH_FROM:
                out.add(("track", info.track))
        return out

    def ancestors(self, lane: Lane) -> list[tuple[object, ...]]:
        """Group keys that must be expanded for `lane` to be visible."""
        keys: list[tuple[object, ...]] = [("rank", lane.rank), ("unit", lane.rank, lane.unit)]
        if lane.depth > 0:
            keys.append(("track", lane.track))
        return keys

    def rows(
        self, collapsed: set[tuple[object, ...]], lane_filter: str = "", dense: bool = False
    ) -> list[Row]:
        """Visible rows for a collapse state; `lane_filter` keeps lanes whose path contains it.

        With `dense`, runs of collapsed ranks are packed 4 per row in braille."""
        rows = self._rows(collapsed, lane_filter)
        return pack_braille(rows) if dense else rows

    def _rows(self, collapsed: set[tuple[object, ...]], lane_filter: str) -> list[Row]:
        needle = lane_filter.lower().strip()
        exact = re.fullmatch(r"rank\s*(-?\d+)", needle)
        only_rank = int(exact.group(1)) if exact else None
        if exact:
            needle = ""  # 'rank 3' is rank 3 exactly, not 30-39
        out: list[Row] = []
        for rank in self.ranks:
            if exact and rank != only_rank:
                continue
            rank_label = "no rank" if rank is None else f"rank {rank}"
            rkey = ("rank", rank)
            if rkey in collapsed and not needle:  # nothing below it is visible
                scale = self.summary_scale(rkey)
                out.append(Row(rkey, "rank", rank_label, 0, rank, None, None, scale, True, False))
                continue
            units = [u for u in UNITS if (rank, u) in self.unit_tracks]
            rank_rows: list[Row] = []
            for unit in units:
                unit_rows: list[Row] = []
                for info in self.unit_tracks[(rank, unit)]:
                    path = f"{rank_label} {unit} {info.label}".lower()
                    if needle and needle not in path:
                        continue
                    series = self.counters.get(info.track)
                    if series and info.lanes[0].events is None:  # a counter track
                        unit_rows.extend(counter_rows(series, rank, unit))
                        continue
                    tkey = ("track", info.track)
                    deep = len(info.lanes) > 1
                    expanded = tkey not in collapsed
                    for lane in info.lanes if expanded else info.lanes[:1]:
                        label = (
                            lane.label
                            if lane.depth == 0
                            else f"{'·' * min(lane.depth, 6)}d{lane.depth}"
                        )
                        unit_rows.append(
                            Row(
                                ("lane", lane.track, lane.depth),
                                "lane",
                                label,
                                2 + min(lane.depth, 1),
                                rank,
                                unit,
                                lane,
                                1,
                                deep and lane.depth == 0,
                                expanded,
                            )
                        )
                if not unit_rows:
                    continue
                ukey = ("unit", rank, unit)
                u_open = ukey not in collapsed
                rank_rows.append(
                    Row(
                        ukey,
                        "unit",
                        unit,
                        1,
                        rank,
                        unit,
                        None,
                        self.summary_scale(ukey),
                        True,
                        u_open,
                    )
                )
                if u_open:
                    rank_rows.extend(unit_rows)
            if not rank_rows:
                continue
            rkey = ("rank", rank)
            r_open = rkey not in collapsed
            out.append(
                Row(
                    rkey,
                    "rank",
                    rank_label,
                    0,
                    rank,
                    None,
                    None,
                    self.summary_scale(rkey),
                    True,
                    r_open,
                )
            )
            if r_open:
                out.extend(rank_rows)
        return out


def counter_rows(series: list[CounterSeries], rank: int | None, unit: str) -> list[Row]:
    """One row per counter series (drawn as a step chart)."""
    return [
        Row(("counter", c.track, c.name), "counter", c.name, 2, rank, unit, None, 1, False, False)
        for c in series
    ]


def pack_braille(rows: list[Row]) -> list[Row]:
    """Replace runs of collapsed rank rows by braille rows of up to 4 ranks each."""
    out: list[Row] = []
    run: list[Row] = []

    def flush() -> None:
        for i in range(0, len(run), 4):
            group = run[i : i + 4]
            first, last = group[0].label, group[-1].label.removeprefix("rank ")
            label = first if len(group) == 1 else f"{first}–{last}"
            key = ("braille", *(r.key for r in group))
            out.append(Row(key, "braille", label, 0, group[0].rank, None, None, 1, True, False))
        run.clear()

    for row in rows:
        if row.kind == "rank" and not row.expanded:
            run.append(row)
            continue
        flush()
        out.append(row)
    flush()
    return out


ARG_QUERY = re.compile(r"^\s*([\w.-]+)\s*=\s*(\S.*?)\s*$")
"""`key=value`: a search for events whose args hold that key with that value."""


def search_events(trace: Trace, text: str) -> np.ndarray:
    """Ids of matching events, by start time: events whose name contains `text`
    (case-insensitive, literal) and, for `key=value` (`expert=3`), events whose args have
    `key` equal to `value` (a JSON number or string, case-insensitive), else events whose args
    text contains `text`."""
    if not text or trace.events.height == 0:
        return np.empty(0, dtype=np.uint32)
    needle = text.lower()
    args = pl.col("args").fill_null("").str.to_lowercase()
    match = pl.col("name").str.to_lowercase().str.contains(needle, literal=True)
    pair = ARG_QUERY.match(text)
    if pair is None:
        match = match | args.str.contains(needle, literal=True)
    else:
        key, value = (re.escape(part.lower()) for part in pair.groups())
        arg = f'"{key}"\\s*:\\s*(?:"{value}"|{value}(?:[,}}\\]\\s]|$))'
        match = match | args.str.contains(arg)
    hits = trace.events.filter(match).sort(["ts", "id"])
    return hits["id"].to_numpy()
