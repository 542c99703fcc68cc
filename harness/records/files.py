"""Crash-safe file writes: whole files replaced atomically (temporary file in the same folder,
fsync, rename, folder fsync), appends of one complete line in one write, file digests."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from harness.records.json_text import dumps


def _fsync_dir(path: str | os.PathLike[str]) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _naming(e: OSError, path: str | os.PathLike[str]) -> OSError:
    """``e`` naming ``path`` when it names no file (``os.write`` and ``fsync`` errors such as
    ENOSPC or EIO do not), so that the message says which record could not be written."""
    if e.filename is None and e.errno is not None:
        return OSError(e.errno, e.strerror, str(path))
    return e


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a regular-file write is normally complete; loop only on short writes
        n = os.write(fd, view)
        view = view[n:]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically: temporary file in the same folder, fsync,
    ``os.replace``, fsync of the folder.  Readers see the old or the new content, never a
    mix; on any error the temporary file is removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        try:
            _write_all(fd, bytes(data))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _naming(e, path) from None
        raise
    if fsync:
        _fsync_dir(path.parent)
    return path


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, fsync: bool = True, indent: int = 2) -> Path:
    """:func:`atomic_write_bytes` of ``dumps(obj, indent=indent)`` plus a final newline."""
    return atomic_write_bytes(path, (dumps(obj, indent=indent) + "\n").encode("utf-8"), fsync=fsync)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        raise _naming(e, path) from None
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, flags: int, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | flags | getattr(os, "O_BINARY", 0), 0o666)
    try:
        _write_all(fd, data)
        if fsync:
            os.fsync(fd)
    except OSError as e:
        raise _naming(e, path) from None
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, *, fsync: bool) -> None:
    """Write a file that must not exist yet (inside a private folder), then fsync it."""
    _write_file(path, data, os.O_CREAT | os.O_EXCL, fsync=fsync)


def _append_line(path: Path, line: bytes, *, fsync: bool) -> None:
    """Append one complete line with a single write (O_APPEND), then fsync when asked."""
    _write_file(path, line, os.O_APPEND | os.O_CREAT, fsync=fsync)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
