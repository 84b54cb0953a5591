"""The format registry: a file's format comes from its content first (gzip magic, JSON, the
protobuf packet tag), then its extension; a file that is neither is one clear error naming it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from moetrace.cli import main
from moetrace.errors import MoetraceError
from moetrace.trace.formats.chrome import CHROME
from moetrace.trace.formats.pftrace import PFTRACE
from moetrace.trace.formats.registry import FORMATS, format_of_content, format_of_name
from moetrace.trace.io import load
from moetrace.trace.model import Trace, TraceFormatError

EVENTS = [
    {"ph": "X", "name": "gemm", "pid": 1, "tid": 7, "ts": 10, "dur": 5},
    {"ph": "X", "name": "inner", "pid": 1, "tid": 7, "ts": 11, "dur": 2},
    {"ph": "X", "name": "copy", "pid": 1, "tid": 8, "ts": 20, "dur": 3},
]


def _chrome_bytes() -> bytes:
    return json.dumps({"traceEvents": EVENTS}).encode()


def _pftrace_bytes(tmp_path: Path) -> bytes:
    """A .pftrace written by moetrace from the same events."""
    source = tmp_path / "source.json"
    source.write_bytes(_chrome_bytes())
    out = tmp_path / "source.pftrace"
    load(source, cache=False).write(out)
    return out.read_bytes()


def _names_and_times(trace: Trace) -> list[tuple[str, int, int]]:
    return sorted(trace.events.select("name", "ts", "dur").iter_rows())


EXPECTED = [("copy", 20_000, 3_000), ("gemm", 10_000, 5_000), ("inner", 11_000, 2_000)]


def test_gzipped_json_named_pftrace_reads_as_chrome_json(tmp_path: Path) -> None:
    path = tmp_path / "really_json.pftrace"
    path.write_bytes(gzip.compress(_chrome_bytes()))
    trace = load(path, cache=False)
    assert trace.meta["format"] == "chrome-json"
    assert _names_and_times(trace) == EXPECTED


def test_protobuf_named_json_reads_as_pftrace(tmp_path: Path) -> None:
    path = tmp_path / "really_protobuf.json"
    path.write_bytes(_pftrace_bytes(tmp_path))
    trace = load(path, cache=False)
    assert trace.meta["format"] == "pftrace"
    assert _names_and_times(trace) == EXPECTED


def test_json_without_extension_reads_by_content(tmp_path: Path) -> None:
    path = tmp_path / "trace_dump"
    path.write_bytes(b"\xef\xbb\xbf  \n" + _chrome_bytes())  # BOM and whitespace first
    assert _names_and_times(load(path, cache=False)) == EXPECTED


def test_unknown_content_and_name_is_one_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mystery.bin"
    path.write_bytes(b"PK\x03\x04 a zip file, not a trace")
    with pytest.raises(TraceFormatError) as caught:
        load(path, cache=False)
    assert isinstance(caught.value, MoetraceError)
    message = str(caught.value)
    assert "mystery.bin" in message and "unknown trace format" in message
    result = CliRunner().invoke(main, ["info", "--no-cache", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "mystery.bin" in lines[0] and "Traceback" not in result.output


def test_unknown_content_with_a_trace_extension_goes_to_that_reader(tmp_path: Path) -> None:
    """The extension decides when the content says nothing: the reader then explains what is
    wrong in its own terms."""
    as_json = tmp_path / "junk.json"
    as_json.write_bytes(b"hello")
    with pytest.raises(TraceFormatError, match="not a JSON trace"):
        load(as_json, cache=False)
    as_pftrace = tmp_path / "junk.pftrace"
    as_pftrace.write_bytes(b"\xff\xff\xff\xff")
    with pytest.raises(TraceFormatError, match="Perfetto"):
        load(as_pftrace, cache=False)


def test_sniffing_rules() -> None:
    gz = gzip.compress(b"{}")
    assert format_of_content(Path("x.pftrace"), gz[:64]) is CHROME
    assert format_of_content(Path("x"), b'  [{"ph": "X"}]') is CHROME
    assert format_of_content(Path("x.json"), b"\n\x85\x01\x10") is PFTRACE
    # A newline then '{' is JSON or a 123-byte first packet: the extension decides.
    assert format_of_content(Path("x.pftrace"), b"\n{@\x01") is PFTRACE
    assert format_of_content(Path("x.json"), b"\n{\n") is CHROME
    with pytest.raises(TraceFormatError, match="unknown trace format"):
        format_of_content(Path("x.txt"), b"\x00\x01")


def test_extensions_choose_the_writer() -> None:
    assert format_of_name(Path("a.JSON")) is CHROME
    assert format_of_name(Path("a.json.gz")) is CHROME
    assert format_of_name(Path("a.pftrace")) is PFTRACE
    assert format_of_name(Path("a.csv")) is None
    # The SQLite readers (issue 22) own their endings for reading; they write nothing.
    assert {f.name for f in FORMATS} == {
        "chrome-json",
        "pftrace",
        "ascend-db",
        "nsys-sqlite",
        "rocprofv3-json",
    }
