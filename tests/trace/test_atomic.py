"""Every file moetrace writes appears complete or not at all (moetrace.trace.atomic).

The signal tests run the real `moetrace convert` in a subprocess whose writer is paused
(mid-content, or complete but not yet renamed) so the signal lands inside the write
deterministically; the full disk is simulated with RLIMIT_FSIZE.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from moetrace.errors import OutputError
from moetrace.trace.atomic import atomic_write, check_target, write_bytes_atomic
from moetrace.trace.io import load, write_trace

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces"


def _a_trace_file(tmp_path: Path, n: int = 3000) -> Path:
    """A plain Chrome trace big enough that its conversion is several 64 KB blocks."""
    events = ",".join(
        f'{{"ph":"X","name":"kernel_{i}","pid":1,"tid":{i % 4},"ts":{i * 10},"dur":5,'
        f'"args":{{"i":{i}}}}}'
        for i in range(n)
    )
    path = tmp_path / "in.json"
    path.write_text(f'{{"traceEvents":[{events}]}}')
    return path


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


def test_exception_mid_write_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_bytes(b"old content")
    with pytest.raises(RuntimeError), atomic_write(target, force=True) as fh:
        fh.write(b"new partial")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old content"
    assert _leftovers(tmp_path, {"out.json"}) == []


def test_existing_target_needs_force_and_is_replaced_only_when_complete(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(OutputError, match="already exists"):
        write_bytes_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    with atomic_write(target, force=True) as fh:
        fh.write(b"new")
        assert target.read_bytes() == b"old"  # not yet: only after the content is complete
    assert target.read_bytes() == b"new"
    assert _leftovers(tmp_path, {"out.bin"}) == []


def test_target_appearing_during_the_write_is_not_clobbered(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    with pytest.raises(OutputError, match="already exists"), atomic_write(target) as fh:
        fh.write(b"mine")
        target.write_bytes(b"someone else's")
    assert target.read_bytes() == b"someone else's"
    assert _leftovers(tmp_path, {"out.bin"}) == []


def test_new_file_gets_umask_mode_and_old_file_keeps_its_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        fresh = write_bytes_atomic(tmp_path / "a.bin", b"x")
        assert fresh.stat().st_mode & 0o777 == 0o644
        old = tmp_path / "b.bin"
        old.write_bytes(b"x")
        old.chmod(0o640)
        write_bytes_atomic(old, b"y", force=True)
        assert old.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(umask)


def test_checks_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="no such directory"):
        check_target(tmp_path / "missing" / "x.json")
    with pytest.raises(OutputError, match=r"file name too long \(305 characters"):
        check_target(tmp_path / ("x" * 300 + ".json"))
    with pytest.raises(OutputError, match="is a directory"):
        check_target(tmp_path, force=True)


# The writer pauses either after the first block of content or after the last one (content
# complete, rename not yet done), prints a line, and waits for the signal (signal.pause).
_PAUSED_CONVERT = textwrap.dedent(
    """
    import signal, sys
    import moetrace.trace.atomic as atomic
    where = sys.argv[1]
    real = atomic.atomic_write.__wrapped__

    def paused(*args, **kwargs):
        gen = real(*args, **kwargs)
        fh = next(gen)

        class Slow:
            def __init__(self):
                self.blocks = 0
            def write(self, data):
                fh.write(data)
                self.blocks += 1
                if where == "middle" and self.blocks == 2:
                    fh.flush()
                    print("paused", flush=True)
                    signal.pause()  # until the test's signal: no clock
                return len(data)
            def __getattr__(self, name):
                return getattr(fh, name)

        yield Slow()
        if where == "end":
            fh.flush()
            print("paused", flush=True)
            signal.pause()  # until the test's signal: no clock
        try:
            next(gen)
        except StopIteration:
            pass

    import contextlib
    atomic.atomic_write = contextlib.contextmanager(paused)
    import moetrace.trace.formats.chrome.write as cw, moetrace.trace.formats.pftrace.write as pf
    cw.atomic_write = pf.atomic_write = atomic.atomic_write
    from moetrace.cli import main
    main(sys.argv[2:], prog_name="moetrace")
    """
)


_CLI = [sys.executable, "-c", "from moetrace.cli import main; main(prog_name='moetrace')"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("where", ["middle", "end"])
@pytest.mark.parametrize("suffix", [".json", ".pftrace"])
def test_signal_during_convert_leaves_old_file_byte_identical(
    tmp_path: Path, sig: int, where: str, suffix: str
) -> None:
    source = _a_trace_file(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / f"old{suffix}"
    old = b"the previous output, which must survive"
    target.write_bytes(old)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _PAUSED_CONVERT,
            where,
            "convert",
            str(source),
            "-o",
            str(target),
            "--force",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "paused"
    temps = _leftovers(out_dir, {target.name})
    assert len(temps) == 1 and temps[0].endswith(".tmp")  # the new content goes to a temp file
    assert (out_dir / temps[0]).stat().st_size > 0
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (130 if sig == signal.SIGINT else 128 + sig)
    assert "Traceback" not in err
    assert target.read_bytes() == old
    assert _leftovers(out_dir, {target.name}) == []


def test_sigint_on_a_new_path_leaves_nothing_and_rerun_works(tmp_path: Path) -> None:
    source = _a_trace_file(tmp_path)
    target = tmp_path / "new.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _PAUSED_CONVERT,
            "middle",
            "convert",
            str(source),
            "-o",
            str(target),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "paused"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert not target.exists()
    assert _leftovers(tmp_path, {"in.json"}) == []
    again = subprocess.run(
        [*_CLI, "convert", str(source), "-o", str(target)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert again.returncode == 0, again.stderr
    assert load(target).events.height == 3000


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".pftrace"])
def test_full_disk_keeps_old_file_and_says_so(tmp_path: Path, suffix: str) -> None:
    source = _a_trace_file(tmp_path, n=20000)  # ~1.5 MB of output, gzip ~150 KB
    target = tmp_path / f"old{suffix}"
    old = os.urandom(4000)
    target.write_bytes(old)
    limit = 32 * 1024
    proc = subprocess.run(
        [*_CLI, "convert", str(source), "-o", str(target), "--force"],
        capture_output=True,
        text=True,
        env=_env(),
        preexec_fn=lambda: _limit_file_size(limit),
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0] and "left unchanged" in lines[0]
    assert target.read_bytes() == old
    assert _leftovers(tmp_path, {"in.json", target.name}) == []


def test_write_trace_round_trip_still_works(tmp_path: Path) -> None:
    trace = load(_a_trace_file(tmp_path, n=50))
    out = write_trace(trace, tmp_path / "t.json")
    assert load(out).frames_equal(trace)
    with pytest.raises(OutputError, match="already exists"):
        write_trace(trace, out)


def test_no_writer_bypasses_the_atomic_helper() -> None:
    """Static guard: outside trace/atomic.py nothing in moetrace opens a file for writing or
    calls Path.write_text / write_bytes (writers go through atomic_write / atomic_path)."""
    import ast

    offenders: list[str] = []
    for path in sorted((REPO / "moetrace").rglob("*.py")):
        if path.name == "atomic.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("write_text", "write_bytes"):
                offenders.append(f"{path.name}:{node.lineno} {name}")
            if name == "open" and len(node.args) >= 2:
                mode = node.args[1]
                if isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+"):
                    offenders.append(f"{path.name}:{node.lineno} open(..., {mode.value!r})")
    assert offenders == []
