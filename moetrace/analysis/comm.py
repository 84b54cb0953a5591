"""Exposed communication per (rank, step): compute, comm, overlapped, exposed, free (ns).

C = union of compute events on the rank's device tracks, M = union of comm events, both
clipped to the window W. comm = |M|, overlapped = |M ∩ C|, exposed = |M \\ C|,
compute = |C|, free = |W \\ (C ∪ M)|; these are msprof's Overlap Analysis lanes and HTA's
overlap ratio (overlapped / comm). All groups in one vectorised pass (see intervals.py).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from moetrace.analysis import intervals as iv
from moetrace.analysis.classify import collective_expr
from moetrace.analysis.prepared import Prepared
from moetrace.analysis.windows import spread


def device_events(prep: Prepared, kind: str) -> pl.DataFrame:
    """The `kind` events on device tracks that fall in a window (gid set): exactly the events
    whose union `kind_set` takes (metrics' comm set, and the MoE view's comm stages)."""
    return prep.ev.filter(pl.col("device") & (pl.col("kind") == kind) & pl.col("gid").is_not_null())


def kind_set(prep: Prepared, kind: str) -> iv.Intervals:
    """Union of the `kind` events on device tracks, per window, clipped to it (an event
    counts in every window it runs in)."""
    sel = device_events(prep, kind)
    return keyed_partition(prep, sel, np.zeros(sel.height, np.int64), 1)[0]


def keyed_partition(
    prep: Prepared, sel: pl.DataFrame, key: np.ndarray, n_keys: int
) -> tuple[iv.Intervals, np.ndarray]:
    """The union per window of the events `sel` (gid, ts, end; each spread to every window it
    runs in, clipped to it) cut into disjoint pieces by `key` (0..n_keys-1, one per event):
    a piece belongs to the lowest key whose events cover it. Returns the pieces (grouped by
    gid) and their keys; their union per gid is `kind_set`'s for the same events, so the keys'
    lengths add up to it exactly. One vectorised pass per key."""
    lo, hi = prep.lo_hi()
    g, s, e, k = spread(
        prep,
        sel["gid"].to_numpy().astype(np.int64),
        sel["ts"].to_numpy().astype(np.int64),
        sel["end"].to_numpy().astype(np.int64),
        np.asarray(key, dtype=np.int64),
    )
    if n_keys == 1:
        whole = iv.union(iv.clip(iv.make(g, s, e), lo, hi))
        return whole, np.zeros(len(whole), np.int64)
    covered = iv.empty()
    parts: list[iv.Intervals] = []
    keys: list[np.ndarray] = []
    for code in range(n_keys):
        this = k == code
        own = iv.union(iv.clip(iv.make(g[this], s[this], e[this]), lo, hi))
        if len(own) == 0:
            continue
        piece = iv.difference(own, covered)
        parts.append(piece)
        keys.append(np.full(len(piece), code, dtype=np.int64))
        covered = iv.union2(covered, own)
    if not parts:
        return iv.empty(), np.zeros(0, np.int64)
    return (
        iv.Intervals(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in iv.Intervals._fields)
        ),
        np.concatenate(keys),
    )


def exposed_comm(prep: Prepared) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, iv.Intervals]:
    """Per-window overlap metrics, the exposed intervals, and per comm event exposure.

    Returns (per-window frame keyed by gid, exposed intervals frame, comm events frame,
    the compute union C, which the idle and critical-path passes reuse).
    """
    n = prep.n_windows
    lo, hi = prep.lo_hi()
    compute = kind_set(prep, "compute")
    comm = kind_set(prep, "comm")
    both = iv.intersection(comm, compute)
    exposed = iv.difference(comm, compute)
    busy = iv.union2(compute, comm)
    window_ns = hi - lo
    compute_ns = iv.lengths_by_group(compute, n)
    comm_ns = iv.lengths_by_group(comm, n)
    overlapped_ns = iv.lengths_by_group(both, n)
    exposed_ns = iv.lengths_by_group(exposed, n)
    free_ns = window_ns - iv.lengths_by_group(busy, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        overlap_ratio = np.where(comm_ns > 0, overlapped_ns / np.maximum(comm_ns, 1), np.nan)
        exposed_ratio = np.where(comm_ns > 0, exposed_ns / np.maximum(comm_ns, 1), np.nan)
    per_window = pl.DataFrame(
        {
            "gid": np.arange(n, dtype=np.int64),
            "window_ns": window_ns,
            "compute_ns": compute_ns,
            "comm_ns": comm_ns,
            "overlapped_ns": overlapped_ns,
            "exposed_comm_ns": exposed_ns,
            "free_ns": free_ns,
            "overlap_ratio": overlap_ratio,
            "exposed_ratio": exposed_ratio,
        }
    ).with_columns(pl.col("overlap_ratio", "exposed_ratio").fill_nan(None))
    exposed_frame = pl.DataFrame(
        {"gid": exposed.group, "start_ns": exposed.start, "end_ns": exposed.end},
        schema={"gid": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64},
    )
    events = device_events(prep, "comm").select(
        pl.col("id").alias("event_id"),
        "gid",
        "ts",
        "end",
        # the classification stage's kind (labels.py); a frame built without it: by name
        (
            pl.col("collective").fill_null("other")
            if "collective" in prep.ev.columns
            else collective_expr()
        ).alias("collective"),
    )
    g = events["gid"].to_numpy().astype(np.int64)
    a = np.maximum(events["ts"].to_numpy(), lo[g]) if len(g) else np.zeros(0, np.int64)
    b = np.minimum(events["end"].to_numpy(), hi[g]) if len(g) else np.zeros(0, np.int64)
    b = np.maximum(a, b)
    hidden = iv.covered_length(compute, g, a, b)
    comm_events = events.select(
        "event_id",
        "gid",
        pl.col("ts").alias("ts_ns"),
        (pl.col("end") - pl.col("ts")).alias("dur_ns"),
        pl.Series("exposed_ns", (b - a) - hidden, dtype=pl.Int64),
        "collective",
    )
    # all-to-all (dispatch/combine) apart from the other collectives: its own union and the
    # part of it no compute hides
    a2a = (events["collective"] == "all_to_all").to_numpy()
    a2a_g, a2a_s, a2a_e = spread(
        prep, g[a2a], events["ts"].to_numpy()[a2a], events["end"].to_numpy()[a2a]
    )
    a2a_set = iv.union(iv.clip(iv.make(a2a_g, a2a_s, a2a_e), lo, hi))
    per_window = per_window.with_columns(
        pl.Series("a2a_comm_ns", iv.lengths_by_group(a2a_set, n), dtype=pl.Int64),
        pl.Series(
            "a2a_exposed_ns",
            iv.lengths_by_group(iv.difference(a2a_set, compute), n),
            dtype=pl.Int64,
        ),
    )
    return per_window, exposed_frame, comm_events, compute
