"""The screen: ``screencap`` (PNG or raw), ``wm`` (size, density, dismiss-keyguard) and
``uiautomator dump``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

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


def _wm_display(c: Ctx, sub: str, arg: str | None) -> int:
    """``wm size [WxH|reset]`` / ``wm density [D|reset]``: print the physical value and the override
    while there is one, as WindowManagerShellCommand does; set or reset the override."""
    phone = c.shell.phone
    override = getattr(phone, "override_display", None)
    if arg is not None:
        if not callable(override):
            raise CommandError(f"wm {sub}: overriding is not supported" + c.shell.sim_note(" by this phone"))
        value: Any = None
        if arg != "reset":
            m = re.fullmatch(r"(\d+)x(\d+)" if sub == "size" else r"(\d+)", arg)
            if m is None:
                raise CommandError(f"Error: bad {sub} {arg!r}")
            value = (int(m.group(1)), int(m.group(2))) if sub == "size" else int(m.group(1))
        try:
            override(sub, value)
        except ValueError as e:
            raise CommandError(f"Error: {e}") from None
        return 0
    overrides = getattr(phone, "display_overrides", {})
    if sub == "size":
        w, h = getattr(phone, "physical", (*phone.size, 0))[:2]
        c.line(f"Physical size: {w}x{h}")
        if overrides.get("size"):
            c.line("Override size: {}x{}".format(*overrides["size"]))
    else:
        c.line(f"Physical density: {getattr(phone, 'physical', (0, 0, phone.density))[2]}")
        if overrides.get("density"):
            c.line(f"Override density: {overrides['density']}")
    return 0


@command("wm")
def wm(c: Ctx) -> int:
    shell = c.shell
    sub = c.argv[1] if len(c.argv) > 1 else ""
    if sub in ("size", "density") and len(c.argv) == 2 and shell.profile is not None \
            and shell.profile.answer(f"wm {sub}") is not None and not getattr(shell.phone, "display_overrides", {}).get(sub):
        c.write(shell.profile.answer(f"wm {sub}"))  # as the profile's phone printed it (no override set)
        return 0
    if sub in ("size", "density"):
        return _wm_display(c, sub, c.argv[2] if len(c.argv) > 2 else None)
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
