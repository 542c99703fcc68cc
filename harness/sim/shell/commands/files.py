"""Toybox file tools on the phone's file system: ls, cat, rm, rmdir, mkdir, touch, cp, mv, stat,
md5sum/sha*sum, base64, and chmod/chown/sync (accepted, no effect)."""

from __future__ import annotations

import base64
import hashlib
import posixpath
import re
import stat as stat_mod
import zlib
from datetime import datetime

from harness.sim.shell.context import CommandError, Ctx, split_flags, to_int
from harness.sim.shell.table import command


def _fmt_time(t: int) -> str:
    return datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S.000000000 +0000")


def _ls_line(name: str, mode: int, size: int, mtime: int) -> str:
    owner, group = ("root", "sdcard_rw") if stat_mod.S_ISDIR(mode) else ("u0_a123", "sdcard_rw")
    when = datetime.fromtimestamp(mtime).strftime("%Y-%m-%d %H:%M")
    return f"{stat_mod.filemode(mode)} 1 {owner} {group} {size:>8} {when} {name}"


def _copy(c: Ctx, tool: str, move: bool) -> int:
    flags, paths = split_flags(c.argv[1:])
    if len(paths) < 2:
        raise CommandError(f"{tool}: Needs 2 arguments")
    fs = c.shell.phone.fs
    *srcs, dst = paths
    dst_full = c.path(dst)
    dst_is_dir = fs.is_dir(dst_full) if hasattr(fs, "is_dir") else False
    status = 0
    for s in srcs:
        full = c.path(s)
        data = fs.read(full)
        st = fs.stat(full)
        if st is None:
            c.error(f"{tool}: {s}: No such file or directory")
            status = 1
            continue
        if data is None:
            c.error(f"{tool}: {s}: Is a directory (not copied)")
            status = 1
            continue
        target = posixpath.join(dst_full, posixpath.basename(full)) if dst_is_dir else dst_full
        if not c.writable(tool, target) or (move and not c.writable(tool, s)):
            status = 1
            continue
        try:
            fs.write(target, data, mode=st[0] & 0o7777, mtime=st[2] if move else None)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as e:
            c.error(f"{tool}: {dst}: {type(e).__name__}")
            status = 1
            continue
        if move:
            fs.remove(full)
    return status


@command("ls")
def ls(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:])
    long_ = "l" in flags
    all_ = "a" in flags
    dir_only = "d" in flags
    fs = c.shell.phone.fs
    status = 0
    if not paths:
        paths = ["."]
    files: list[tuple[str, int, int, int]] = []
    dirs: list[tuple[str, str]] = []
    for p in paths:
        full = c.path(p)
        st = fs.stat(full)
        if st is None:
            c.error(f"ls: {p}: No such file or directory")
            status = 1
            continue
        if stat_mod.S_ISDIR(st[0]) and not dir_only:
            dirs.append((p, full))
        else:
            files.append((p, *st))
    for name, mode, size, mtime in files:
        c.line(_ls_line(name, mode, size, mtime) if long_ else name)
    for k, (p, full) in enumerate(dirs):
        if len(paths) > 1:
            if files or k:
                c.line()
            c.line(f"{p}:")
        entries = fs.listdir(full) or []
        if long_:
            c.line(f"total {len(entries) * 8}")
        if all_:
            st = fs.stat(full)
            entries = [(".", st[0], st[1], st[2]), ("..", st[0], st[1], st[2])] + entries if st else entries
        for name, mode, size, mtime in entries:
            if name.startswith(".") and not all_:
                continue
            c.line(_ls_line(name, mode, size, mtime) if long_ else name)
    return status


@command("cat")
def cat(c: Ctx) -> int:
    phone = c.shell.phone
    _, paths = split_flags(c.argv[1:])
    if not paths:
        c.write(c.stdin.read())
        return 0
    status = 0
    for p in paths:
        if p == "-":
            c.write(c.stdin.read())
            continue
        data = phone.fs.read(c.path(p))
        if data is None:
            st = phone.fs.stat(c.path(p))
            c.error(f"cat: {p}: {'Is a directory' if st else 'No such file or directory'}")
            status = 1
            continue
        c.write(data)
    return status


@command("rm")
def rm(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:])
    recursive = "r" in flags or "R" in flags
    force = "f" in flags
    if not paths and not force:
        raise CommandError("rm: Needs 1 argument (see \"rm --help\")")
    status = 0
    fs = c.shell.phone.fs
    for p in paths:
        full = c.path(p)
        st = fs.stat(full)
        if st is None:
            if not force:
                c.error(f"rm: {p}: No such file or directory")
                status = 1
            continue
        if not c.writable("rm", p):
            status = 1
            continue
        if stat_mod.S_ISDIR(st[0]) and not recursive:
            c.error(f"rm: {p}: Is a directory")
            status = 1
            continue
        fs.remove(full, recursive=recursive)
    return status


@command("rmdir")
def rmdir(c: Ctx) -> int:
    status = 0
    for p in c.argv[1:]:
        if not c.writable("rmdir", p):
            status = 1
        elif not c.shell.phone.fs.remove(c.path(p), recursive=False):
            c.error(f"rmdir: '{p}': Directory not empty")
            status = 1
    return status


@command("mkdir")
def mkdir(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:], with_value={"m"})
    parents = "p" in flags
    status = 0
    fs = c.shell.phone.fs
    for p in paths:
        full = c.path(p)
        if fs.stat(full) is not None:
            if not parents:
                c.error(f"mkdir: '{p}': File exists")
                status = 1
            continue
        if not c.writable("mkdir", p, creating_root_ok=True):
            status = 1
            continue
        if not fs.mkdir(full, parents=parents):
            c.error(f"mkdir: '{p}': No such file or directory")
            status = 1
    return status


@command("touch")
def touch(c: Ctx) -> int:
    _, paths = split_flags(c.argv[1:], with_value={"d", "t", "r"})
    status = 0
    fs = c.shell.phone.fs
    for p in paths:
        full = c.path(p)
        if not c.writable("touch", p):
            status = 1
            continue
        if fs.stat(full) is None:
            try:
                fs.write(full, b"")
            except (FileNotFoundError, NotADirectoryError):
                c.error(f"touch: '{p}': No such file or directory")
                status = 1
        else:
            touch = getattr(fs, "touch", None)
            if callable(touch):
                touch(full)
    return status


@command("cp")
def cp(c: Ctx) -> int:
    return _copy(c, "cp", move=False)


@command("mv")
def mv(c: Ctx) -> int:
    return _copy(c, "mv", move=True)


@command("stat")
def stat(c: Ctx) -> int:
    shell = c.shell
    flags, paths = split_flags(c.argv[1:], with_value={"c"})
    fmt = flags.get("c") if isinstance(flags, dict) else None
    status = 0
    for p in paths:
        st = shell.phone.fs.stat(c.path(p))
        if st is None:
            c.error(f"stat: '{p}': No such file or directory")
            status = 1
            continue
        mode, size, mtime = st
        kind = "directory" if stat_mod.S_ISDIR(mode) else ("regular empty file" if size == 0 else "regular file")
        if fmt is not None:
            fields = {
                "s": str(size), "n": p, "N": f"'{p}'", "a": format(mode & 0o7777, "o"),
                "A": stat_mod.filemode(mode), "F": kind, "Y": str(mtime), "X": str(mtime),
                "Z": str(mtime), "u": "2000", "g": "1015", "U": "shell", "G": "sdcard_rw",
                "i": str(zlib.crc32(p.encode()) & 0xFFFFF), "f": format(mode, "x"), "b": str((size + 511) // 512),
                "B": "512", "y": _fmt_time(mtime), "h": "1", "%": "%",
            }
            table = fields

            def subst(m: re.Match[str]) -> str:
                return table.get(m.group(1), m.group(0))  # noqa: B023 (used at once)

            c.line(re.sub(r"%(.)", subst, fmt))
            continue
        c.line(f"  File: {p}")
        c.line(f"  Size: {size}\t Blocks: {(size + 511) // 512}\t IO Blocks: 4096\t{kind}")
        c.line(f"Device: fd00h/64768d\t Inode: {zlib.crc32(p.encode()) & 0xFFFFF}\t Links: 1")
        c.line(f"Access: ({mode & 0o7777:04o}/{stat_mod.filemode(mode)})\tUid: ( 2000/   shell)\tGid: ( 1015/sdcard_rw)")
        for label in ("Access", "Modify", "Change"):
            c.line(f"{label}: {_fmt_time(mtime)}")
    return status


@command("md5sum", "md5", "sha1sum", "sha256sum", "sha512sum")
def md5sum(c: Ctx) -> int:
    phone = c.shell.phone
    algo = {"md5sum": "md5", "md5": "md5", "sha1sum": "sha1", "sha256sum": "sha256", "sha512sum": "sha512"}[c.argv[0]]
    _, paths = split_flags(c.argv[1:])
    if not paths:
        c.line(f"{hashlib.new(algo, c.stdin.read()).hexdigest()}  -")
        return 0
    status = 0
    for p in paths:
        data = phone.fs.read(c.path(p))
        if data is None:
            st = phone.fs.stat(c.path(p))
            c.error(f"{c.argv[0]}: {p}: {'Is a directory' if st else 'No such file or directory'}")
            status = 1
            continue
        c.line(f"{hashlib.new(algo, data).hexdigest()}  {p}")
    return status


@command("base64")
def base64_(c: Ctx) -> int:
    flags, paths = split_flags(c.argv[1:], with_value={"w"})
    decode = "d" in flags or "--decode" in c.argv
    wrap = to_int(flags["w"]) if "w" in flags else 76
    if paths:
        data = c.shell.phone.fs.read(c.path(paths[0]))
        if data is None:
            raise CommandError(f"base64: {paths[0]}: No such file or directory")
    else:
        data = c.stdin.read()
    if decode:
        try:
            c.write(base64.b64decode(re.sub(rb"\s+", b"", data), validate=False))
        except Exception:
            raise CommandError("base64: bad input") from None
        return 0
    enc = base64.b64encode(data).decode()
    if wrap > 0:
        enc = "\n".join(enc[i : i + wrap] for i in range(0, len(enc), wrap))
    c.line(enc) if enc else None
    return 0


@command("chmod")
def chmod(c: Ctx) -> int:
    return 0


@command("chown")
def chown(c: Ctx) -> int:
    return 0


@command("sync")
def sync(c: Ctx) -> int:
    return 0
