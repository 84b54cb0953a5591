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
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from moetrace.errors import OutputError

_EXISTS = "already exists (use --force to overwrite)"
_CAUGHT_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


def check_target(
    target: str | Path, *, force: bool = False, inputs: Iterable[str | Path] = ()
) -> Path:
    """The checks that can fail before any work: the directory exists, the name fits the file
    system, the target is none of `inputs` (see `refuse_inputs`; `force` does not change
    that), the target does not exist (unless `force`). Raises `OutputError`."""
    target = Path(target)
    refuse_inputs(target, inputs)
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


_MAX_WALKED = 100_000  # files looked at inside one folder input before giving up the search


def refuse_inputs(target: str | Path, inputs: Iterable[str | Path]) -> None:
    """Raise `OutputError` when `target` is the same file as an input: the same inode
    (st_dev, st_ino) whatever the spelling, symlink or hard link, or any file inside a folder
    input (a folder input that contains the target's path counts too). A missing target is no
    input, so nothing is refused then."""
    try:
        st = os.stat(target)  # follows symlinks: a link to an input is that input
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode):
        return
    key = (st.st_dev, st.st_ino)
    real = os.path.realpath(target)
    for item in inputs:
        name = os.fspath(item)
        try:
            ist = os.stat(name)
        except (OSError, ValueError):
            continue
        if not stat.S_ISDIR(ist.st_mode):
            if (ist.st_dev, ist.st_ino) == key:
                raise OutputError(target, f"is the input {name}; choose another output")
            continue
        folder = os.path.realpath(name)
        if os.path.commonpath([folder, real]) == folder:
            raise OutputError(target, f"is inside the input folder {name}; choose another output")
        if _folder_holds(name, key):
            raise OutputError(
                target, f"is a file of the input folder {name}; choose another output"
            )


def _folder_holds(folder: str, key: tuple[int, int]) -> bool:
    """Whether a file under `folder` (symlinks followed, loops skipped) is the inode `key`."""
    seen = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for file in files:
            seen += 1
            if seen > _MAX_WALKED:
                return False
            try:
                fst = os.stat(os.path.join(root, file))
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) == key:
                return True
    return False


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
