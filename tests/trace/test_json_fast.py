"""The fast Chrome JSON path (formats/chrome/fast.py) against the slow reference path.

The reference is `columns.decode_bracketed`, the decoder that was the only one before: it
turns every value into a Python object first. Generated pieces mix the value forms profilers
write with odd ones (exponents, quoted and escaped numbers, big ints, -0, objects, nulls,
escapes, non-ASCII); whole traces of the three shapes of benchmarks/bench_load.py (few
tracks, many tracks with partial overlaps, deep call stacks) must load to the same `Trace`
with the fast path on and off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moetrace.trace.formats.chrome import columns, decode
from moetrace.trace.formats.chrome.fast import LeanColumns, decode_lean
from moetrace.trace.formats.chrome.read import read_chrome

# Number literals as JSON text, so their exact form (decimals, exponent, sign) is chosen.
_NUMBER_TEXT = st.one_of(
    st.integers(-(10**17), 10**17).map(str),
    st.integers(0, 2**70).map(str),
    st.tuples(st.integers(-(10**16), 10**16), st.integers(0, 999)).map(
        lambda p: f"{p[0]}.{p[1]:03d}"
    ),
    st.tuples(st.integers(0, 10**6), st.text("0123456789", min_size=1, max_size=12)).map(
        lambda p: f"{p[0]}.{p[1]}"
    ),
    st.sampled_from(["-0", "0", "-0.000", "1e3", "1.5E-2", "-2.5e+1", "123456789012345678.125"]),
)
_TIME_TEXT = st.one_of(
    _NUMBER_TEXT,
    _NUMBER_TEXT.map(lambda t: json.dumps(t)),  # numbers as strings
    st.sampled_from(['"1\\u002e5"', '" 12.5"', '"abc"', "true", "null", "[1]", '{"a": 1.0}']),
)
_ID_TEXT = st.one_of(
    st.integers(-(2**63), 2**64).map(str),
    st.sampled_from(["-0", "1.5", "1e2", "true", "null", "[1, 2]", '{"k": "v"}', '"0x1f"']),
    st.text(max_size=6).map(json.dumps),
)
_STRING = st.text(max_size=8)
_PID = st.one_of(st.integers(-5, 2**40), st.text("0123456789abc", max_size=4))
_ARGS_TEXT = st.one_of(
    st.just("null"),
    st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), _STRING), max_size=3).map(
        lambda d: json.dumps(d, ensure_ascii=False)
    ),
    st.sampled_from(['{"a": 1.50, "b": [1, {"c": null}]}', "[1, 2]", '"text"', "7"]),
)


@st.composite
def _event_text(draw: Any) -> str:
    """One event object with a random subset of the fields moetrace reads."""
    fields: dict[str, str] = {
        "ph": json.dumps(draw(st.sampled_from(["X", "X", "X", "i", "f", "s", "M", "C"])))
    }
    if draw(st.booleans()):
        fields["name"] = json.dumps(draw(_STRING), ensure_ascii=draw(st.booleans()))
    if draw(st.booleans()):
        fields["cat"] = json.dumps(draw(_STRING))
    for key in ("ts", "dur"):
        if draw(st.integers(0, 4)):
            fields[key] = draw(_TIME_TEXT)
    for key in ("pid", "tid"):
        if draw(st.integers(0, 4)):
            fields[key] = json.dumps(draw(_PID))
    if draw(st.booleans()):
        fields["id"] = draw(_ID_TEXT)
    if draw(st.booleans()):
        fields["bp"] = json.dumps(draw(st.sampled_from(["e", "s", ""])))
    if draw(st.booleans()):
        fields["args"] = draw(_ARGS_TEXT)
    order = draw(st.permutations(list(fields)))
    return "{" + ", ".join(f'"{k}": {fields[k]}' for k in order) + "}"


def _without_slice_ids(frame: pl.DataFrame) -> pl.DataFrame:
    """id and bp are read only for events that are not complete slices (X): the fast path
    leaves them null on X rows, where nothing reads them."""
    is_x = pl.col("ph").fill_null("") == "X"
    return frame.with_columns(
        pl.when(is_x).then(None).otherwise(pl.col(c)).alias(c) for c in ("id", "bp")
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(_event_text(), min_size=1, max_size=30), first=st.integers(0, 1000))
def test_fast_piece_columns_equal_the_reference_decoder(events: list[str], first: int) -> None:
    data = ("[" + ",\n".join(events) + "]").encode()
    fast = decode_lean(data, first)
    reference = columns.decode_bracketed(data, first)
    if fast is None:  # a value outside the lean types: the caller takes the reference path
        return
    assert fast.schema == reference.schema
    assert fast.equals(_without_slice_ids(reference)), (fast, reference)


def test_fast_piece_covers_the_common_forms() -> None:
    """The generated pieces above may all fall back; this one must take the fast path and
    give exact ns for epoch-sized times (no float64 on the way)."""
    data = (
        b'[{"ph":"X","name":"k","pid":1,"tid":7,"ts":1736405443000000.123,"dur":2.5,'
        b'"args":{"a":1}},{"ph":"f","id":"0x1","bp":"e","pid":1,"tid":7,"ts":17,"cat":"ac2g"}]'
    )
    fast = decode_lean(data, 0)
    assert fast is not None
    assert fast["ts"].to_list() == [1736405443000000123, 17000]
    assert fast["dur"].to_list() == [2500, None]
    assert fast["id"].to_list() == [None, "0x1"]
    assert fast["bp"].to_list() == [None, "e"]
    assert fast["args"].to_list() == ['{"a":1}', None]


def test_invalid_utf8_in_raw_values_is_a_json_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(b'[{"ph":"X","name":"a","pid":1,"tid":1,"ts":"\xff","dur":1}]')
    with pytest.raises(Exception, match="UTF-8"):
        read_chrome(path)


# --- whole traces of the three shapes, fast path on and off -------------------------------


def _few_tracks(rng: Any, n: int) -> list[str]:
    out = ['{"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"stream 7"}}']
    clock = [0] * 8
    for i in range(n):
        lane = rng.randrange(8)
        clock[lane] += rng.randrange(1, 4000)
        ts = 1_736_405_443_000_000_000 + clock[lane]
        pid, tid = (0, lane + 1) if lane >= 6 else (100, lane + 1)
        if i % 20 == 19:
            out.append(
                f'{{"ph":"f","id":{i},"pid":{pid},"tid":{tid},"ts":{ts // 1000}.{ts % 1000:03d},'
                f'"cat":"ac2g","name":"ac2g","bp":"e"}}'
            )
            continue
        dur = rng.randrange(1, 3000)
        clock[lane] += dur
        out.append(
            f'{{"ph":"X","cat":"kernel","name":"op_{rng.randrange(9)}","pid":{pid},'
            f'"tid":{tid},"ts":{ts // 1000}.{ts % 1000:03d},"dur":{dur // 1000}.{dur % 1000:03d},'
            f'"args":{{"External id":{i}}}}}'
        )
    return out


def _many_tracks(rng: Any, n: int) -> list[str]:
    out = []
    clock = [0] * 64
    last_end = [0] * 64
    for i in range(n):
        lane = rng.randrange(64)
        dur = rng.randrange(500, 3000)
        start = clock[lane] + rng.randrange(1, 400)
        if rng.random() < 0.05 and last_end[lane] > 200:
            start = last_end[lane] - rng.randrange(1, 200)  # a partial overlap
        clock[lane] = max(clock[lane], start + dur)
        last_end[lane] = start + dur
        out.append(
            f'{{"ph":"X","cat":"tile","name":"t{i % 7}","pid":{lane // 8},"tid":{lane % 8},'
            f'"ts":{start / 1000:.3f},"dur":{dur / 1000:.3f},"args":{{"tile":{i}}}}}'
        )
    return out


def _deep(rng: Any, n: int) -> list[str]:
    out: list[str] = []
    clock = 0
    while len(out) < n:
        depth = rng.randrange(10, 15)
        stack = [(0, clock + rng.randrange(1, 1000), 1 << (depth + 6))]
        clock = stack[0][1] + stack[0][2]
        while stack and len(out) < n:
            level, s, d = stack.pop()
            out.append(
                f'{{"ph":"X","cat":"cpu_op","name":"f{level}","pid":100,"tid":1,'
                f'"ts":{s},"dur":{d},"args":{{"Sequence number":{level}}}}}'
            )
            if level + 1 < depth and d > 8:
                k = rng.randrange(1, 3)
                width = (d - 2) // k
                stack.extend((level + 1, s + 1 + c * width, max(width - 1, 1)) for c in range(k))
    return out


_SHAPES = {"few": _few_tracks, "many": _many_tracks, "deep": _deep}


@pytest.mark.parametrize("shape", sorted(_SHAPES))
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 2000), chunk=st.sampled_from([512, 4096]))
def test_traces_of_each_shape_load_the_same_with_and_without_the_fast_path(
    shape: str, seed: int, n: int, chunk: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    events = _SHAPES[shape](random.Random(seed), n)
    path = tmp_path / f"{shape}.json"
    path.write_text('{"traceEvents":[\n' + ",\n".join(events) + "\n]}\n")
    monkeypatch.setattr(decode, "CHUNK", chunk)  # many pieces, cut at every kind of event
    monkeypatch.setattr(decode, "BATCH_EVENTS", 50)  # many batches of columns
    fast = read_chrome(path)
    with monkeypatch.context() as m:
        m.setattr(decode, "FAST_PATH", False)
        reference = read_chrome(path)
    assert fast.frames_equal(reference)
    assert fast.meta == reference.meta


def test_a_boolean_among_integer_times_or_pids_is_invalid_in_both_decoders() -> None:
    """Polars' Int64 constructor reads True as 1: the reference decoder used to take
    `"ts": true` as 1 µs when the piece's other times were integers (and as invalid
    otherwise), and a `true` pid as "1". Both decoders now flag it, whatever its neighbours."""
    data = b'[{"ph":"X","ts":0,"dur":1,"pid":3},{"ph":"X","ts":true,"dur":1,"pid":true}]'
    reference = columns.decode_bracketed(data, 0)
    assert reference["ts"].to_list() == [0, None]
    assert reference["flags"][1] & columns.FLAG_BAD_TS
    assert reference["pid"].to_list() == ["3", "true"]
    assert reference["flags"][1] & columns.FLAG_ODD_ID
    fast = decode_lean(data, 0)
    assert fast is None  # a boolean pid breaks the lean types: the reference decodes it
    only_ts = b'[{"ph":"X","ts":0,"dur":1},{"ph":"X","ts":true,"dur":1}]'
    lean = decode_lean(only_ts, 0)
    assert lean is not None
    assert lean.equals(columns.decode_bracketed(only_ts, 0))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.lists(_event_text(), min_size=0, max_size=12), min_size=1, max_size=5),
    first=st.integers(0, 1000),
)
def test_a_batch_of_pieces_equals_each_piece_decoded_alone(
    pieces: list[list[str]], first: int
) -> None:
    """`LeanColumns` builds the columns of many pieces at once: they must equal the pieces'
    reference columns one after the other (the rare-value fallbacks stay per piece)."""
    batch = LeanColumns(first)
    expected = []
    index = first
    for events in pieces:
        data = ("[" + ",\n".join(events) + "]").encode()
        if not batch.add(data):
            return  # a piece outside the lean types: the caller decodes it on its own
        reference = columns.decode_bracketed(data, index)
        index += reference.height
        if reference.height:
            expected.append(_without_slice_ids(reference))
    got = batch.finish()
    assert batch.count == index - first
    if not expected:
        assert got.height == 0
        return
    want = pl.concat(expected)
    assert got.schema == want.schema
    assert got.equals(want), (got, want)
