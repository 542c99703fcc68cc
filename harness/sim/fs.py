"""An in-memory file system for the simulated phone (``harness.sim.phone_api.FileSystem``).

Only what ``adb push/pull``, ``sync:`` and the shell need: directories and regular files with a
mode and an mtime. ``/sdcard`` is a directory of its own and ``/storage/emulated/0`` (and
``/storage/self/primary``) are aliases of it, as on Android where they name the same storage.

Thread-safe: the ADB services run shell commands in worker threads.
"""

from __future__ import annotations

import hashlib
import posixpath
import stat as stat_mod
import threading
import time
from dataclasses import dataclass, field

S_IFDIR = stat_mod.S_IFDIR
S_IFREG = stat_mod.S_IFREG

ALIASES = {
    "/storage/emulated/0": "/sdcard",
    "/storage/self/primary": "/sdcard",
    "/mnt/sdcard": "/sdcard",
}

DEFAULT_DIRS = (
    "/",
    "/sdcard",
    "/sdcard/Download",
    "/sdcard/DCIM",
    "/sdcard/Pictures",
    "/sdcard/Movies",
    "/sdcard/Music",
    "/sdcard/Documents",
    "/sdcard/Android",
    "/storage",
    "/storage/emulated",
    "/data",
    "/data/local",
    "/data/local/tmp",
    "/system",
    "/system/bin",
)


# Where Android's ``shell`` user (uid 2000, which adbd runs commands and sync as) may write:
# shared storage and /data/local/tmp. The root file system and /system are read-only (EROFS),
# everything else under /data belongs to other users (EACCES).
SHELL_WRITABLE = ("/sdcard", "/data/local/tmp")
READ_ONLY = ("/system", "/vendor", "/product", "/apex")


def shell_write_error(path: str, creating_root_ok: bool = False) -> str | None:
    """Why the shell user may not create/modify/remove ``path`` (an strerror text), or None.

    The writable roots themselves cannot be removed or replaced (``/sdcard`` is a symlink on the
    read-only root file system, ``/data/local/tmp``'s parent belongs to root).
    """
    p = normpath(path)
    for root in SHELL_WRITABLE:
        if p.startswith(root + "/"):
            return None
        if p == root:
            return None if creating_root_ok else "Permission denied"
    if p == "/" or any(p == r or p.startswith(r + "/") for r in READ_ONLY) or p.count("/") == 1:
        return "Read-only file system"
    return "Permission denied"


@dataclass
class _Node:
    mode: int
    mtime: int
    data: bytearray | None = None  # None for directories
    children: set[str] = field(default_factory=set)

    @property
    def is_dir(self) -> bool:
        return self.data is None


def normpath(path: str, cwd: str = "/") -> str:
    """Absolute, normalised path with aliases resolved (``/storage/emulated/0/x`` -> ``/sdcard/x``)."""
    if not path:
        path = cwd
    if not path.startswith("/"):
        path = posixpath.join(cwd, path)
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    for alias, target in ALIASES.items():
        if path == alias or path.startswith(alias + "/"):
            path = target + path[len(alias):]
            break
    return path


class MemoryFS:
    """Directories and regular files in a dict, keyed by normalised absolute path."""

    def __init__(self, dirs: tuple[str, ...] = DEFAULT_DIRS, now: int | None = None) -> None:
        self._lock = threading.RLock()
        t = int(time.time()) if now is None else now
        self._nodes: dict[str, _Node] = {"/": _Node(S_IFDIR | 0o755, t)}
        for d in dirs:
            self.mkdir(d, parents=True)

    # --- the FileSystem protocol ---------------------------------------------------------------
    def stat(self, path: str) -> tuple[int, int, int] | None:
        with self._lock:
            node = self._nodes.get(normpath(path))
            if node is None:
                return None
            size = 4096 if node.is_dir else len(node.data or b"")
            return node.mode, size, node.mtime

    def listdir(self, path: str) -> list[tuple[str, int, int, int]] | None:
        with self._lock:
            p = normpath(path)
            node = self._nodes.get(p)
            if node is None or not node.is_dir:
                return None
            out = []
            for name in sorted(node.children):
                child = self._nodes[posixpath.join(p, name)]
                size = 4096 if child.is_dir else len(child.data or b"")
                out.append((name, child.mode, size, child.mtime))
            return out

    def read(self, path: str) -> bytes | None:
        with self._lock:
            node = self._nodes.get(normpath(path))
            if node is None or node.is_dir:
                return None
            return bytes(node.data or b"")

    def write(self, path: str, data: bytes, mode: int = 0o644, mtime: int | None = None) -> None:
        """Create or replace a regular file.

        Raises FileNotFoundError when the parent directory is missing, IsADirectoryError when
        ``path`` is a directory, NotADirectoryError when the parent is a file.
        """
        with self._lock:
            p = normpath(path)
            if p == "/":
                raise IsADirectoryError(p)
            parent, name = posixpath.split(p)
            pnode = self._nodes.get(parent)
            if pnode is None:
                raise FileNotFoundError(p)
            if not pnode.is_dir:
                raise NotADirectoryError(p)
            existing = self._nodes.get(p)
            if existing is not None and existing.is_dir:
                raise IsADirectoryError(p)
            t = int(time.time()) if mtime is None else int(mtime)
            self._nodes[p] = _Node(S_IFREG | (mode & 0o7777), t, bytearray(data))
            pnode.children.add(name)

    def append(self, path: str, data: bytes) -> None:
        """``>>`` redirection: append, creating the file when missing."""
        with self._lock:
            node = self._nodes.get(normpath(path))
            if node is None:
                self.write(path, data)
                return
            if node.is_dir:
                raise IsADirectoryError(path)
            assert node.data is not None
            node.data.extend(data)
            node.mtime = int(time.time())

    def remove(self, path: str, recursive: bool = False) -> bool:
        """Remove a file, an empty directory, or (``recursive``) a whole tree. False when missing,
        or when ``path`` is a non-empty directory and ``recursive`` is False."""
        with self._lock:
            p = normpath(path)
            node = self._nodes.get(p)
            if node is None or p == "/":
                return False
            if node.is_dir and node.children and not recursive:
                return False
            doomed = [p] + ([k for k in self._nodes if k.startswith(p + "/")] if node.is_dir else [])
            for k in doomed:
                del self._nodes[k]
            parent, name = posixpath.split(p)
            if parent in self._nodes:
                self._nodes[parent].children.discard(name)
            return True

    def mkdir(self, path: str, parents: bool = False) -> bool:
        """True when created (or, with ``parents``, when it already is a directory)."""
        with self._lock:
            p = normpath(path)
            node = self._nodes.get(p)
            if node is not None:
                return parents and node.is_dir
            parent, name = posixpath.split(p)
            pnode = self._nodes.get(parent)
            if pnode is None:
                if not parents or not self.mkdir(parent, parents=True):
                    return False
                pnode = self._nodes[parent]
            if not pnode.is_dir:
                return False
            self._nodes[p] = _Node(S_IFDIR | 0o771, int(time.time()))
            pnode.children.add(name)
            return True

    # --- helpers beyond the protocol -----------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def is_dir(self, path: str) -> bool:
        st = self.stat(path)
        return st is not None and stat_mod.S_ISDIR(st[0])

    def touch(self, path: str) -> None:
        with self._lock:
            node = self._nodes.get(normpath(path))
            if node is None:
                self.write(path, b"")
            else:
                node.mtime = int(time.time())

    def walk_files(self, top: str = "/") -> list[str]:
        """All regular files under ``top``, sorted."""
        with self._lock:
            t = normpath(top)
            prefix = "/" if t == "/" else t + "/"
            return sorted(
                k for k, n in self._nodes.items() if not n.is_dir and (k == t or k.startswith(prefix))
            )

    def digest(self, top: str = "/") -> str:
        """A hash over the tree (paths, modes, contents): equal digests mean an unchanged FS."""
        h = hashlib.sha256()
        with self._lock:
            t = normpath(top)
            prefix = "/" if t == "/" else t + "/"
            for k in sorted(self._nodes):
                if k == t or k.startswith(prefix):
                    n = self._nodes[k]
                    h.update(k.encode() + b"\0" + str(n.mode).encode() + b"\0")
                    if n.data is not None:
                        h.update(hashlib.sha256(bytes(n.data)).digest())
        return h.hexdigest()
