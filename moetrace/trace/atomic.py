"""Atomic file output: every file moetrace writes appears complete or not at all.

The content goes to a temporary file in the target's directory (same file system, so the
final rename is atomic), is flushed and fsynced, then renamed over the target. On any
exception, Ctrl+C or SIGTERM/SIGHUP during the write, the temporary file is removed and the
target is untouched. An existing target is replaced only with `force`, and only once the new
content is complete; without `force` the rename is a hard link that fails if the target
appeared meanwhile, so nothing is ever clobbered.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from moetrace.errors import OutputError

_EXISTS = "already exists (use --force to overwrite)"
_CAUGHT_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


def check_target(target: str | Path, *, force: bool = False) -> Path:
    """The checks that can fail before any work: the directory exists, the name fits the file
    system, the target does not exist (unless `force`). Raises `OutputError`."""
    target = Path(target)
    directory = target.parent
    try:
        if not directory.is_dir():
            raise OutputError(directory, "no such directory")
        name_max = _name_max(directory)
        if len(os.fsencode(target.name)) > name_max:
            raise OutputError(
                target,
                f"file name too long ({len(target.name)} characters, limit {name_max} bytes)",
            )
        if target.is_dir():
            raise OutputError(target, "is a directory")
        if not force and os.path.lexists(target):
            raise OutputError(target, _EXISTS)
    except OSError as exc:  # e.g. a path component that is not a directory
        raise OutputError(target, _reason(exc)) from None
    return target


def _name_max(directory: Path) -> int:
    try:
        return int(os.pathconf(directory, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return 255


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) if exc.errno is not None else str(exc)


@contextlib.contextmanager
def atomic_path(target: str | Path, *, force: bool = False) -> Iterator[Path]:
    """Yield a temporary path next to `target`; when the block ends normally it becomes
    `target` (fsynced, then renamed). On any failure or signal the temporary file is removed
    and `target` is left as it was. Raises `OutputError` for an existing target without
    `force`, a missing directory, a disk that fills up..."""
    target = check_target(target, force=force)
    directory = target.parent
    prefix = "." + target.name[:40] + "."
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(target, f"cannot create a file in {directory}: {_reason(exc)}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with _signals_raise():
            try:
                yield tmp
                _fsync(tmp)
                _set_mode(tmp, target)
                _install(tmp, target, force)
            except OSError as exc:  # disk full, file too large, I/O error...
                raise OutputError(
                    target, f"could not write: {_reason(exc)} (the target was left unchanged)"
                ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(directory)


@contextlib.contextmanager
def atomic_write(target: str | Path, *, force: bool = False) -> Iterator[IO[bytes]]:
    """A binary file object whose content replaces `target` atomically (see `atomic_path`)."""
    with atomic_path(target, force=force) as tmp, open(tmp, "wb") as fh:
        yield fh
        fh.flush()


def write_bytes_atomic(target: str | Path, data: bytes, *, force: bool = False) -> Path:
    """Write `data` to `target` atomically; returns the target path."""
    with atomic_write(target, force=force) as fh:
        fh.write(data)
    return Path(target)


def _install(tmp: Path, target: Path, force: bool) -> None:
    if force:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # fails if the target exists: never clobbers
    except FileExistsError:
        raise OutputError(target, _EXISTS) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(target):  # a file system without hard links
            raise OutputError(target, _EXISTS) from None
        os.replace(tmp, target)
        return
    tmp.unlink()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _set_mode(tmp: Path, target: Path) -> None:
    """mkstemp makes 0600 files: give the new file the old one's mode, else 0666 - umask."""
    try:
        mode = target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


class Terminated(SystemExit):
    """SIGTERM or SIGHUP during a write: unwinds (removing the temporary file), exit 128+N."""


@contextlib.contextmanager
def _signals_raise() -> Iterator[None]:
    """While writing, SIGTERM/SIGHUP raise (so cleanup runs) instead of killing the process;
    Ctrl+C already raises KeyboardInterrupt. Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handler(signum: int, _frame: Any) -> None:
        raise Terminated(128 + signum)

    for sig in _CAUGHT_SIGNALS:
        try:
            old = signal.getsignal(sig)
            if old in (signal.SIG_DFL, None):
                previous[sig] = signal.signal(sig, handler)
        except (OSError, ValueError):
            continue
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
