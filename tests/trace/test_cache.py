"""The columnar cache: a cached load equals a fresh one, and a stale, truncated, corrupt or
version-bumped entry is never trusted (it is ignored and rebuilt)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.trace import cache
from moetrace.trace.formats import registry
from moetrace.trace.io import load
from moetrace.trace.model import Trace

OLD_NS = 1_700_000_000_000_000_000  # a modification time well in the past (2023)


def _write_trace(path: Path, n: int = 50, shift: int = 0) -> Path:
    """A small Chrome JSON trace with nesting, an instant, a counter and a flow; its mtime is
    set in the past so the cache accepts it at once."""
    events: list[dict[str, object]] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "worker"}}
    ]
    for i in range(n):
        ts = i * 10 + shift
        events.append(
            {
                "ph": "X",
                "name": f"op{i % 7}",
                "pid": 1,
                "tid": 2,
                "ts": ts,
                "dur": 8,
                "args": {"i": i},
            }
        )
        events.append({"ph": "X", "name": "inner", "pid": 1, "tid": 2, "ts": ts + 1, "dur": 2})
    events.append({"ph": "i", "name": "mark", "pid": 1, "tid": 3, "ts": 5, "s": "t"})
    events.append({"ph": "C", "name": "mem", "pid": 1, "ts": 7, "args": {"bytes": 12}})
    events.append({"ph": "s", "id": 1, "name": "f", "cat": "c", "pid": 1, "tid": 2, "ts": 1})
    events.append(
        {"ph": "f", "id": 1, "name": "f", "cat": "c", "pid": 1, "tid": 2, "ts": 21, "bp": "e"}
    )
    path.write_text(json.dumps({"traceEvents": events}))
    os.utime(path, ns=(OLD_NS, OLD_NS))
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every real parse of a trace file (a cache hit parses nothing)."""
    seen: list[Path] = []
    original = registry.read_file

    def counting(path: Path, *, flavor: str | None = None) -> Trace:
        seen.append(path)
        return original(path, flavor=flavor)

    monkeypatch.setattr(registry, "read_file", counting)
    return seen


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets an empty cache directory of its own."""
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "moetrace"


def test_cached_load_equals_fresh_load(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    first = load(path)
    assert cache.entry_path(path, None).is_file()
    second = load(path)
    assert reads == [path]  # the second load parsed nothing
    fresh = load(path, cache=False)
    assert len(reads) == 2
    for other in (second, fresh):
        assert first.frames_equal(other)
        assert other.meta == first.meta
    assert second.events.height == 101 and second.deps.height == 1
    assert second.counters.height == 1


def test_cached_real_trace_equals_fresh(real_trace_files: list[Path], reads: list[Path]) -> None:
    path = real_trace_files[0]
    first = load(path)
    again = load(path)
    assert reads == [path]
    assert again.frames_equal(first) and again.meta == first.meta


def test_touched_file_is_read_again(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    load(path)
    os.utime(path, ns=(OLD_NS + 1, OLD_NS + 1))  # same bytes, new mtime: stale
    assert cache.read_cached(path, None) is None
    load(path)
    assert reads == [path, path]
    load(path)  # rebuilt entry is used
    assert len(reads) == 2


def test_rewritten_file_of_same_size_is_read_again(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json", shift=1)
    before = load(path)
    size = path.stat().st_size
    _write_trace(path, shift=2)  # same length, other times, same (old) mtime...
    assert path.stat().st_size == size
    os.utime(path, ns=(OLD_NS + 5, OLD_NS + 5))  # ...as any rewrite changes it
    after = load(path)
    assert len(reads) == 2
    assert (
        after.events.select(pl.min("ts")).item() == before.events.select(pl.min("ts")).item() + 1000
    )


def test_truncated_entry_is_ignored_and_rebuilt(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    expected = load(path)
    files = cache.entry_files(path, None)
    assert len(files) == 1 + 4  # the header and one Arrow file per frame
    cases = 0
    for target in files:  # the header, then every frame file
        files = cache.entry_files(path, None)  # each rebuild writes frames of new names
        target = files[0] if target.suffix == ".mtcache" else _same_table(files, target)
        data = target.read_bytes()
        for cut in (0, 5, len(data) // 2, len(data) - 1):
            target.write_bytes(data[:cut])
            assert cache.read_cached(path, None) is None, (target.name, cut)
            got = load(path)
            cases += 1
            assert got.frames_equal(expected)
            assert cache.read_cached(path, None) is not None  # rebuilt, whole again
            files = cache.entry_files(path, None)
            target = files[0] if target.suffix == ".mtcache" else _same_table(files, target)
            data = target.read_bytes()
    assert len(reads) == 1 + cases


def _same_table(files: list[Path], old: Path) -> Path:
    """The frame file of the same table as `old` among an entry's (rewritten) files."""
    table = old.name.split(".")[-2]
    (found,) = [f for f in files if f.suffix == ".arrow" and f.name.split(".")[-2] == table]
    return found


def test_corrupt_entry_is_ignored_and_rebuilt(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    expected = load(path)
    header = cache.entry_path(path, None)
    data = header.read_bytes()
    # One flipped byte anywhere in the header: magic, length, CRC, JSON.
    for at in (0, len(cache.MAGIC) + 2, len(cache.MAGIC) + 20, len(data) // 2, len(data) - 3):
        damaged = bytearray(data)
        damaged[at] ^= 0x5A
        header.write_bytes(bytes(damaged))
        assert cache.read_cached(path, None) is None, at
        assert load(path).frames_equal(expected)
        data = header.read_bytes()
    header.write_bytes(b"not a cache entry at all")
    assert load(path).frames_equal(expected)
    assert len(reads) == 7
    # One flipped byte inside each frame file (same size: only the hash can tell).
    for table in ("events", "tracks", "deps", "counters"):
        (frame,) = [f for f in cache.entry_files(path, None) if f.name.endswith(f".{table}.arrow")]
        damaged = bytearray(frame.read_bytes())
        damaged[len(damaged) // 2] ^= 0x5A
        frame.write_bytes(bytes(damaged))
        assert cache.read_cached(path, None) is None, table
        assert load(path).frames_equal(expected)
    assert len(reads) == 11


def test_a_missing_frame_file_is_a_miss(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    expected = load(path)
    frames = [f for f in cache.entry_files(path, None) if f.suffix == ".arrow"]
    frames[0].unlink()
    assert cache.read_cached(path, None) is None
    assert load(path).frames_equal(expected) and len(reads) == 2


def test_a_second_writer_of_an_entry_never_mixes_frames(tmp_path: Path) -> None:
    """Two writers of one entry (two processes loading the same file): each names its own
    frame files, and the header that lands last is whole with the frames it lists."""
    path = _write_trace(tmp_path / "t.json")
    fresh = load(path, cache=False)
    before = path.stat()
    assert cache.write_cached(path, None, fresh, before)
    first = {f.name for f in cache.entry_files(path, None)}
    assert cache.write_cached(path, None, fresh, before)
    second = {f.name for f in cache.entry_files(path, None)}
    assert len(second) == 5 and (first - second) and cache.entry_path(path, None).name in second
    got = cache.read_cached(path, None)
    assert got is not None and got.frames_equal(fresh)


def test_version_bump_invalidates(
    tmp_path: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write_trace(tmp_path / "t.json")
    load(path)
    monkeypatch.setattr(cache, "CACHE_FORMAT_VERSION", cache.CACHE_FORMAT_VERSION + 1)
    assert cache.read_cached(path, None) is None
    load(path)
    assert len(reads) == 2
    monkeypatch.setattr(cache, "moetrace_version", lambda: "999.0")  # new moetrace, same layout
    load(path)
    assert len(reads) == 3


def test_flavor_is_part_of_the_key(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    auto = load(path)
    forced = load(path, flavor="chrome")
    assert len(reads) == 2 and forced.meta["flavor"] == "chrome"
    assert load(path).meta == auto.meta and len(reads) == 2


@pytest.mark.parametrize(
    ("age_ns", "cached"),
    [(0, False), (cache.RACY_WINDOW_NS - 1, False), (cache.RACY_WINDOW_NS, True)],
)
def test_freshly_modified_file_is_not_cached(
    tmp_path: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch, age_ns: int, cached: bool
) -> None:
    """A file modified less than RACY_WINDOW_NS before its load is not cached (a same-size
    rewrite in that mtime tick would go unseen). Deterministic: an explicit mtime and an
    injected clock, not the time a loaded machine happens to take."""
    path = _write_trace(tmp_path / "t.json")
    mtime = 1_700_000_000 * 10**9
    os.utime(path, ns=(mtime, mtime))
    monkeypatch.setattr(cache, "now_ns", lambda: mtime + age_ns)
    load(path)
    load(path)
    assert len(reads) == (1 if cached else 2)
    assert cache.entry_path(path, None).exists() == cached


def test_no_cache_neither_reads_nor_writes(tmp_path: Path, reads: list[Path]) -> None:
    path = _write_trace(tmp_path / "t.json")
    load(path, cache=False)
    assert not cache.entry_path(path, None).exists()
    load(path)
    load(path, cache=False)
    assert len(reads) == 3


def test_unwritable_cache_does_not_fail_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # cache dir would be below a file
    path = _write_trace(tmp_path / "t.json")
    assert load(path).events.height == 101


def test_cli_no_cache_and_cache_info_clear(tmp_path: Path, own_cache: Path) -> None:
    path = _write_trace(tmp_path / "t.json")
    runner = CliRunner()
    result = runner.invoke(main, ["info", "--no-cache", str(path)])
    assert result.exit_code == 0, result.output
    assert not own_cache.exists() or not list(own_cache.iterdir())
    # --no-cache was an option of that command only: the next one in this process caches
    result = runner.invoke(main, ["info", str(path)])
    assert result.exit_code == 0, result.output
    size = sum(f.stat().st_size for f in cache.entry_files(path, None))
    result = runner.invoke(main, ["cache", "info"])
    assert result.exit_code == 0
    assert f"directory: {own_cache}" in result.output
    assert "entries:   1" in result.output
    assert f"{size / 1e6:.1f} MB" in result.output
    result = runner.invoke(main, ["cache", "clear"])
    assert result.exit_code == 0 and "removed 1 entries" in result.output
    assert cache.entry_files(path, None) == []
    assert "entries:   0" in runner.invoke(main, ["cache", "info"]).output


def test_size_cap_drops_least_recently_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [_write_trace(tmp_path / f"t{i}.json", shift=i) for i in range(3)]
    load(paths[0])
    size = sum(f.stat().st_size for f in cache.entry_files(paths[0], None))
    monkeypatch.setenv("MOETRACE_CACHE_MAX_BYTES", str(2 * size + size // 2))  # room for 2
    load(paths[1])
    old = cache.entry_path(paths[0], None).stat().st_mtime_ns
    os.utime(cache.entry_path(paths[1], None), ns=(old - 10**9, old - 10**9))  # 1 is older
    load(paths[2])
    kept = [cache.entry_path(p, None).exists() for p in paths]
    assert kept == [True, False, True]
    assert cache.entry_files(paths[1], None) == []  # its frames went with its header


def test_entry_is_shared_by_every_name_of_the_file(
    tmp_path: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write_trace(tmp_path / "t.json")
    first = load(path)
    monkeypatch.chdir(tmp_path)
    again = load("t.json")  # relative name, same file: one entry
    assert len(reads) == 1
    assert again.frames_equal(first)
    assert again.meta["source"] == ["t.json"]  # as this load named it
    assert first.meta["source"] == [str(path)]
