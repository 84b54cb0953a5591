"""Loading and saving traces: files, several ranks, directories.

`load` reads Chrome JSON (.json, .json.gz: Kineto, Ascend, moetrace, plain) and Perfetto
.pftrace, each file in the format its content says (formats.registry); several files are
several ranks merged into one `Trace`. `write_trace` writes .json / .json.gz (Chrome JSON)
or .pftrace, never overwriting without `force`.
"""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import polars as pl

from moetrace.trace import model
from moetrace.trace.atomic import check_target
from moetrace.trace.formats.chrome import CHROME
from moetrace.trace.formats.registry import (
    TRACE_SUFFIXES,
    format_of_name,
    is_trace_database,
    read_file_cached,
)
from moetrace.trace.model import Trace, TraceFormatError
from moetrace.trace.options import LoadOptions
from moetrace.trace.parallel import read_many

__all__ = ["TRACE_SUFFIXES", "find_traces", "load", "merge", "write_trace"]
_NOT_TRACES = {
    "communication.json",
    "communication_matrix.json",
    "profiler_info.json",
    "profiler_metadata.json",
    "cluster_communication.json",
    "cluster_communication_matrix.json",
    "communication_group.json",
}


def _is_trace_name(p: Path) -> bool:
    name = p.name.lower()
    if name in _NOT_TRACES or name.startswith("profiler_info"):
        return False
    return name.endswith(TRACE_SUFFIXES)


def find_traces(directory: Path) -> list[Path]:
    """Trace files of `directory`, sorted by path: Ascend
    `*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json` at any depth (one per rank; the side
    files next to them are not traces) or, in such a folder without one, its
    `ascend_pytorch_profiler*.db` (the database export; analysis.db is msprof's figures, not a
    trace), plus the .json, .json.gz, .pftrace files and the trace databases (.db, .sqlite)
    directly in `directory`. Other sub-folders are not searched (they are usually other runs), and
    hidden files and JSON side files without a `traceEvents` array are skipped."""
    ascend = sorted(
        p
        for p in directory.rglob("ASCEND_PROFILER_OUTPUT/trace_view.json")
        if not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )
    with_json = {p.parent for p in ascend}
    ascend += sorted(
        p
        for p in directory.rglob("ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler*.db")
        if p.parent not in with_json
        and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )
    ascend_roots = {p.parent.parent for p in ascend}
    others = [
        p
        for p in sorted(directory.iterdir())
        if not p.name.startswith(".")
        and p.is_file()
        and _is_trace_name(p)
        and not any(r in p.parents for r in ascend_roots)
        and _may_be_trace(p)
    ]
    return sorted({*ascend, *others})


_SNIFF = 1 << 20


def _may_be_trace(path: Path) -> bool:
    """False only for a JSON object file that ends within its first MB without a
    `"traceEvents"` key (run metadata and other side files); anything else may be a trace
    (a damaged one is then reported by the reader, not skipped)."""
    if path.name.lower().endswith(".pftrace"):
        return True
    if path.name.lower().endswith((".db", ".sqlite")):
        return is_trace_database(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(_SNIFF + 1)
        if head[:2] == b"\x1f\x8b":
            inflate = zlib.decompressobj(wbits=31)
            head = inflate.decompress(head, _SNIFF + 1)
            if not inflate.eof:
                return True  # longer than the sniffed part
        elif len(head) > _SNIFF:
            return True
    except (OSError, zlib.error):
        return True
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return not (text[:1] == b"{" and b'"traceEvents"' not in text)


def _traces_below(directory: Path) -> list[str]:
    """Sub-folders (one level) that hold traces, for the error message."""
    subs = [p for p in sorted(directory.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    return [p.name for p in subs if any(_is_trace_name(f) for f in p.rglob("*"))][:8]


def expand_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    """The trace files `paths` name, in order: files as given, directories through
    `find_traces`. A missing file, or a directory without traces (naming its sub-folders
    that hold some), is a TraceFormatError."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise TraceFormatError(None, "no trace files given")
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if p.is_dir():
            found = find_traces(p)
            if not found:
                below = _traces_below(p)
                hint = (
                    f"; its sub-folders {', '.join(below)} hold traces (pass those)"
                    if below
                    else ""
                )
                raise TraceFormatError(
                    p,
                    "directory holds no traces (*.json, *.json.gz, *.pftrace, *.db, *.sqlite, "
                    "*_ascend_pt/)" + hint,
                )
            out.extend(found)
        elif not p.exists():
            raise TraceFormatError(p, _missing_reason(p))
        else:
            out.append(p)
    return out


def _missing_reason(path: Path) -> str:
    """Why `path` cannot be opened: a symlink loop, a dangling symlink or really nothing there."""
    if not path.is_symlink():
        return "no such file or directory"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop (too many levels of symbolic links)"
    return f"symbolic link to {os.readlink(path)}, which does not exist"


def load(
    paths: str | Path | Sequence[str | Path],
    *,
    flavor: str | None = None,
    cache: bool | None = None,
    jobs: int | None = None,
    engine: str | None = None,
    options: LoadOptions | None = None,
) -> Trace:
    """Load one trace file, several (one rank each, merged), or a directory of traces.

    Ranks come from each file (Kineto `distributedInfo.rank`, moetrace's metadata, Ascend
    `rank<N>` in the path); a file that names none gets its position in the list.
    `cache` (default on) reads and writes the columnar cache; several files are read by
    `jobs` processes (default: the core count) or, with `engine="ray"`, as Ray tasks, with
    the same result as one process. `options` gives all of these at once (the CLI's load
    options); an explicit `cache`, `jobs` or `engine` wins over it.
    Raises `TraceFormatError` for bad input.
    """
    files = expand_paths(paths)
    opts = options or LoadOptions()
    use_cache = opts.cache if cache is None else cache
    if len(files) == 1:
        traces = [read_file_cached(files[0], flavor, use_cache=use_cache)]
    else:
        traces = read_many(
            files,
            flavor,
            cache=use_cache,
            jobs=jobs or opts.jobs,
            engine=engine or opts.engine,
            address=opts.address,
        )
    if len(traces) == 1:
        return traces[0]
    claimed: dict[int, Path] = {}
    fixed: list[Trace] = []
    for position, (path, trace) in enumerate(zip(files, traces, strict=True)):
        trace = trace.with_meta(warnings=[f"{path}: {w}" for w in trace.warnings])
        if trace.tracks.height and trace.tracks["rank"].null_count() == trace.tracks.height:
            trace = Trace(
                trace.events,
                trace.tracks.with_columns(pl.lit(position, pl.Int32).alias("rank")),
                trace.deps,
                trace.counters,
                {
                    **trace.meta,
                    "warnings": [
                        *trace.warnings,
                        f"{path}: no rank in the file; using its position {position}",
                    ],
                },
            )
        for r in trace.ranks:
            if r in claimed and claimed[r] != path:
                trace = trace.with_meta(
                    warnings=[*trace.warnings, f"{path}: rank {r} also in {claimed[r]}"]
                )
            claimed.setdefault(r, path)
        fixed.append(trace)
    return merge(fixed)


def merge(traces: Sequence[Trace]) -> Trace:
    """One trace from several (e.g. one per rank): ids and track numbers renumbered so they
    stay unique, ranks kept, warnings and sources concatenated."""
    if not traces:
        return Trace()
    events, tracks, deps, counters = [], [], [], []
    id_off = track_off = 0
    for t in traces:
        events.append(_offset(t.events, {"id": id_off, "track": track_off}))
        tracks.append(_offset(t.tracks, {"track": track_off, "sort_index": track_off}))
        deps.append(_offset(t.deps, {"src": id_off, "dst": id_off}))
        counters.append(_offset(t.counters, {"track": track_off}))
        id_off += int(t.events["id"].cast(pl.Int64).max() or 0) + 1 if t.events.height else 0  # type: ignore[arg-type]
        track_off += int(t.tracks["track"].cast(pl.Int64).max() or 0) + 1 if t.tracks.height else 0  # type: ignore[arg-type]
    first = traces[0].meta
    meta: dict[str, Any] = {k: v for k, v in first.items() if k not in ("warnings", "source")}
    formats = {t.meta.get("format") for t in traces}
    flavors = {t.meta.get("flavor") for t in traces}
    meta["format"] = formats.pop() if len(formats) == 1 else "mixed"
    meta["flavor"] = flavors.pop() if len(flavors) == 1 else "mixed"
    meta["warnings"] = [w for t in traces for w in t.warnings]
    meta["source"] = [s for t in traces for s in t.meta.get("source", [])]
    return Trace.from_frames(
        pl.concat(events), pl.concat(tracks), pl.concat(deps), pl.concat(counters), meta
    )


def _offset(frame: pl.DataFrame, offsets: dict[str, int]) -> pl.DataFrame:
    return frame.with_columns(
        [(pl.col(c).cast(pl.Int64) + off).cast(frame.schema[c]) for c, off in offsets.items()]
    )


def write_trace(trace: Trace, path: str | Path | IO[bytes], *, force: bool = False) -> Path:
    """Write `trace`: .json / .json.gz -> Chrome JSON, .pftrace -> Perfetto protobuf.

    A binary stream gets Chrome JSON. A file is written atomically (complete or not at all);
    an existing one is replaced only with `force` (else `OutputError`, before any work).
    Returns the path written (`Path("-")` for a stream).
    """
    if not isinstance(path, str | Path):
        CHROME.write(trace, path, force=True)
        return Path("-")
    out = Path(path)
    fmt = format_of_name(out)
    if fmt is None:
        raise TraceFormatError(out, "unknown output format: use .json, .json.gz or .pftrace")
    check_target(out, force=force)  # fail before the work; the write itself is atomic
    fmt.write(trace, out, force=force)
    return out


model.set_writer(write_trace)  # `Trace.write`: the model itself imports no format
