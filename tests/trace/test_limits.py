"""No size or depth limit a valid trace can hit, and error positions that are right.

Events bigger than the reader's 4 MB piece (a 200 MB name included) load; nesting is read to
`MAX_DEPTH` levels and refused beyond with the limit and the byte named; a directory load
takes its own files, not its sub-folders'.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moetrace.trace.formats.chrome.decode import CHUNK
from moetrace.trace.formats.chrome.deep import MAX_DEPTH, first_too_deep
from moetrace.trace.io import find_traces, load
from moetrace.trace.model import TraceFormatError

_X = '{{"ph":"X","name":"{name}","pid":1,"tid":{tid},"ts":{ts},"dur":2}}'


def _small(i: int) -> str:
    return _X.format(name=f"n{i}", tid=1, ts=10 * i)


def test_event_with_a_200_mb_name_loads(tmp_path: Path) -> None:
    size = 200_000_000
    path = tmp_path / "huge.json"
    with open(path, "wb") as fh:
        fh.write(b'{"traceEvents":[' + _small(0).encode() + b",")
        fh.write(b'{"ph":"X","name":"')
        block = b"n" * (1 << 20)
        for _ in range(size // len(block)):
            fh.write(block)
        fh.write(b"n" * (size % len(block)))
        fh.write(b'","pid":1,"tid":2,"ts":5,"dur":2},' + _small(2).encode() + b"]}")
    trace = load(path)
    names = trace.events.sort("ts")["name"]
    assert names.str.len_bytes().to_list() == [2, size, 2]
    assert names[0] == "n0" and names[2] == "n2"
    assert trace.warnings == []


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("where", [0, 1, 20_000, 39_999])
def test_events_bigger_than_a_piece_anywhere(tmp_path: Path, gz: bool, where: int) -> None:
    n = 40_000
    big = "b" * (CHUNK + CHUNK // 2)
    events = [_small(i) for i in range(n)]
    events[where] = _X.format(name=big, tid=2, ts=10 * where)
    data = ("[" + ",".join(events) + "]").encode()
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(data, 1) if gz else data)
    trace = load(path)
    assert trace.events.height == n
    by_ts = trace.events.sort("ts")
    assert by_ts["name"][where] == big
    expected = [f"n{i}" for i in range(n) if i != where]
    assert by_ts.filter(by_ts["name"] != big)["name"].to_list() == expected


@pytest.mark.parametrize("big_first", [False, True])
def test_syntax_error_names_its_byte_after_big_and_many_events(
    tmp_path: Path, big_first: bool
) -> None:
    head = _X.format(name="x" * (6 << 20), tid=1, ts=0) if big_first else _small(0)
    many = ",".join(_small(i) for i in range(1, 200_000))
    data = f'{{"traceEvents":[{head},{many},{{"a":1,,"b":2}},{_small(0)}]}}'.encode()
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError) as err:
        load(path)
    expected = data.index(b",,") + 1  # the second comma is the error
    assert err.value.position == f"byte {expected}"
    assert str(err.value).count("byte") == 1  # msgspec's piece-relative byte is not shown


def _deep_args(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize("gz", [False, True])
def test_100k_deep_nesting_loads_with_args_byte_exact(tmp_path: Path, gz: bool) -> None:
    args = '{"x":' + _deep_args(100_000) + "}"
    data = (
        '{"deep_meta":' + _deep_args(50_000) + ',"traceEvents":['
        '{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2,"args":' + args + "}," + _small(1)
    ) + "]}"
    path = tmp_path / ("deep.json.gz" if gz else "deep.json")
    path.write_bytes(gzip.compress(data.encode(), 1) if gz else data.encode())
    trace = load(path)
    assert trace.events.height == 2
    assert trace.events.sort("ts")["args"][0] == args
    out = tmp_path / "back.json"
    trace.write(out)  # the deep top-level key is written back too
    again = load(out)
    assert again.events.sort("ts")["args"][0] == args
    assert '"deep_meta":' + _deep_args(50_000) in out.read_text()


def _slow_depth_position(data: bytes, limit: int) -> int | None:
    """Reference: a byte-by-byte JSON nesting counter."""
    depth, in_string, escaped = 0, False, False
    for i, c in enumerate(data):
        ch = chr(c)
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return None


def test_nesting_beyond_the_limit_is_refused_with_limit_and_byte(tmp_path: Path) -> None:
    levels = MAX_DEPTH // 2 + 10_000  # two levels per unit: beyond the limit
    unit_open, unit_close = '[{"k\\"[":', "}]"
    data = (
        '{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":2,"args":'
        + unit_open * levels
        + "1"
        + unit_close * levels
        + "}]}"
    ).encode()
    path = tmp_path / "too_deep.json"
    path.write_bytes(data)
    with pytest.raises(TraceFormatError, match=f"deeper than {MAX_DEPTH:,} levels") as err:
        load(path)
    assert err.value.position == f"byte {_slow_depth_position(data, MAX_DEPTH)}"


@settings(max_examples=150, deadline=None)
@given(
    # brackets outside strings, and whole JSON strings holding brackets and escapes (the
    # block cuts fall anywhere, inside strings and escape runs too)
    pieces=st.lists(
        st.sampled_from(["[", "]", "{", "}", ",", '"a"', '"[{"', '"\\""', '"\\\\"', '"\\\\\\"]"']),
        max_size=60,
    ),
    limit=st.integers(0, 6),
    seed=st.integers(0, 2**16),
)
def test_first_too_deep_matches_a_byte_by_byte_reference(
    pieces: list[str], limit: int, seed: int
) -> None:
    data = "".join(pieces).encode()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(len(data) + 1), min(3, len(data) + 1)))
    blocks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    blocks = [b for b in blocks if b]
    feed = iter([*blocks, b""])
    assert first_too_deep(lambda: next(feed), limit) == _slow_depth_position(data, limit)


def _trace_text(name: str) -> str:
    return '{"traceEvents":[' + _X.format(name=name, tid=1, ts=1) + "]}"


def test_directory_load_skips_sub_folders_hidden_and_side_files(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(_trace_text("r0"))
    (tmp_path / "rank1.json.gz").write_bytes(gzip.compress(_trace_text("r1").encode()))
    (tmp_path / "run_meta.json").write_text('{"routing": "zipf", "ranks": 2}')
    (tmp_path / ".hidden.json").write_text(_trace_text("hidden"))
    (tmp_path / "other_run").mkdir()
    (tmp_path / "other_run" / "rank0.json").write_text(_trace_text("other"))
    found = find_traces(tmp_path)
    assert [p.name for p in found] == ["rank0.json", "rank1.json.gz"]
    trace = load(tmp_path)
    assert sorted(trace.events["name"].to_list()) == ["r0", "r1"]
    assert trace.ranks == [0, 1]


def test_directory_with_traces_only_in_sub_folders_names_them(tmp_path: Path) -> None:
    for run in ("balanced", "skewed"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "rank0.json").write_text(_trace_text(run))
    with pytest.raises(TraceFormatError, match="sub-folders balanced, skewed hold traces"):
        load(tmp_path)
    assert load(tmp_path / "skewed").events["name"].to_list() == ["skewed"]


def test_damaged_trace_in_a_directory_is_reported_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "rank0.json").write_text(_trace_text("r0"))
    (tmp_path / "rank1.json").write_text('{"traceEvents":[{"a":1,,}]}')
    with pytest.raises(TraceFormatError, match=r"rank1\.json"):
        load(tmp_path)


def test_deep_arrays_in_scalar_fields_become_text_and_warnings(tmp_path: Path) -> None:
    """A 1500-deep array as pid, ts or id once sent Polars' nested type inference into
    minutes and gigabytes; now it is the value's JSON text, flagged like any odd value."""
    deep = _deep_args(1500)
    data = (
        '{"traceEvents":['
        f'{{"ph":"X","name":"a","pid":{deep},"tid":1,"ts":1,"dur":2}},'
        f'{{"ph":"X","name":"b","pid":1,"tid":1,"ts":{deep},"dur":2}},'
        f'{{"ph":"X","name":"c","pid":1,"tid":{{"k":{deep}}},"ts":3,"dur":2,"id":{deep}}}'
        "]}"
    )
    path = tmp_path / "nested.json"
    path.write_text(data)
    trace = load(path)
    assert sorted(trace.events["name"].to_list()) == ["a", "c"]
    pids = set(trace.tracks["pid"].to_list())
    assert deep in pids
    tids = set(trace.tracks["tid"].to_list())
    assert '{"k":' + deep + "}" in tids
    assert any("non-numeric or out-of-range 'ts'" in w and "event #1" in w for w in trace.warnings)
    assert any("neither number nor string" in w and "event #0" in w for w in trace.warnings)
