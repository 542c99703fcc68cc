"""The screen: ``screencap`` (PNG or raw), ``wm`` (size, density, dismiss-keyguard) and
``uiautomator dump``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.sim.fs import shell_write_error
from harness.sim.shell.context import CommandError, Ctx, split_flags
from harness.sim.shell.table import command

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI


XML_DECL = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"


def _with_decl(xml: str) -> str:
    s = xml.lstrip()
    return s if s.startswith("<?xml") else XML_DECL + s


def _raw_screencap(phone: PhoneAPI) -> bytes:
    """``screencap`` without -p: w, h, format (1 = RGBA_8888) as LE u32, then (Android 8 on,
    ``frameworks/base/cmds/screencap/screencap.cpp``: ``write(fd, &c, 4)`` with
    ``c = dataSpaceToInt(...)``) a 4th word with the colour space (1 = sRGB), then the pixels.
    Readers that assume the old 12-byte header are off by 4 bytes on modern phones too."""
    w, h = phone.size
    header = w.to_bytes(4, "little") + h.to_bytes(4, "little") + (1).to_bytes(4, "little")
    if phone.info.sdk >= 26:
        header += (1).to_bytes(4, "little")
    return header + phone.screencap_rgba()


@command("screencap")
def screencap(c: Ctx) -> int:
    phone = c.shell.phone
    flags, paths = split_flags(c.argv[1:], with_value={"d"})
    png = "p" in flags or (paths and paths[0].endswith(".png"))
    profile = c.shell.profile
    if profile is not None and "d" not in flags:
        # what the profile's phone wrote before its image (to stderr: `exec:` mixes it in first),
        # "[Warning] Multiple displays were found..." on one with several displays
        head = profile.image_head("screencap -p" if png else "screencap")
        if head:
            c.err(head)
    data = phone.screencap_encode() if png else _raw_screencap(phone)
    if paths:
        p = paths[0]
        if not c.writable("screencap", p):
            return 1
        try:
            phone.fs.write(c.path(p), data)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            c.error(f"Error opening file: {p} (No such file or directory)")
            return 1
        return 0
    c.write(data)
    return 0


@command("wm")
def wm(c: Ctx) -> int:
    shell = c.shell
    sub = c.argv[1] if len(c.argv) > 1 else ""
    if sub in ("size", "density") and len(c.argv) == 2 and shell.profile is not None \
            and shell.profile.answer(f"wm {sub}") is not None:
        c.write(shell.profile.answer(f"wm {sub}"))
        return 0
    if sub == "size":
        if len(c.argv) > 2 and c.argv[2] != "reset":
            raise CommandError("wm size: overriding the display size is not supported" + shell.sim_note(" by the simulated phone"))
        w, h = shell.phone.size
        c.line(f"Physical size: {w}x{h}")
        return 0
    if sub == "density":
        if len(c.argv) > 2 and c.argv[2] != "reset":
            raise CommandError("wm density: overriding the density is not supported" + shell.sim_note(" by the simulated phone"))
        c.line(f"Physical density: {shell.phone.density}")
        return 0
    if sub == "dismiss-keyguard":
        dismiss = getattr(shell.phone, "dismiss_keyguard", None)
        if callable(dismiss):
            dismiss()
        return 0
    if sub in ("user-rotation", "fixed-to-user-rotation"):
        return 0
    c.line("Window manager (window) commands:\n  size [reset|WxH|WdpxHdp]\n  density [reset|DENSITY]")
    return 0 if sub in ("", "help", "-h") else 255


@command("uiautomator")
def uiautomator(c: Ctx) -> int:
    phone = c.shell.phone
    args = c.argv[1:]
    if not args or args[0] not in ("dump", "events"):
        c.line("Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\n"
               "help: displays help message\n\ndump: creates an XML dump of current UI hierarchy\n\nevents: prints out accessibility events until terminated")
        return 0 if not args or args[0] == "help" else 1
    if args[0] == "events":
        c.cancel.wait()
        return 130
    paths = [a for a in args[1:] if not a.startswith("--")]
    path = paths[0] if paths else "/sdcard/window_dump.xml"
    xml = _with_decl(phone.hierarchy_xml())
    if path in ("/dev/tty", "/dev/stdout", "/proc/self/fd/1"):
        c.write(xml)
    else:
        problem = shell_write_error(c.path(path))
        if problem:
            c.error(f"ERROR: could not write {path}: {problem}")
            return 1
        try:
            phone.fs.write(c.path(path), xml.encode("utf-8"))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            c.error(f"ERROR: could not write {path}: No such file or directory")
            return 1
    c.line(f"UI hierchary dumped to: {path}")  # sic: Android's own spelling
    return 0
