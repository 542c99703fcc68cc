"""The screen's size and density as ``wm size`` and ``wm density`` print them.

``Physical size: 1080x1920`` and, after ``wm size WxH``, ``Override size: 480x1024`` too (the size
apps, ``screencap`` and ``input`` then use); likewise ``Physical density: 480`` / ``Override
density: 160`` (WindowManagerShellCommand; awesome-adb's README shows both). Lines that are neither
are not the answer: the Redmi Note 1 prints ``open: Permission denied`` twice before its size
(minicap_java issue 6).
"""

from __future__ import annotations

import re

WM_SIZE = ("wm", "size")
WM_DENSITY = ("wm", "density")
COMMANDS = (WM_SIZE, WM_DENSITY)
# what `wm size WxH` / `wm density D` take (prepare's --size and --density), by the word they follow
OVERRIDES = {"size": r"[1-9][0-9]{1,4}x[1-9][0-9]{1,4}", "density": r"[1-9][0-9]{1,3}"}

_SIZE = re.compile(r"^\s*(Physical|Override) size:\s*(\d+)\s*x\s*(\d+)\s*$", re.M)
_DENSITY = re.compile(r"^\s*(Physical|Override) density:\s*(\d+)\s*$", re.M)


def parse_size(text: str) -> tuple[int, int] | None:
    """The size in effect: the override where there is one, else the physical size."""
    found = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _SIZE.finditer(text.replace("\r", ""))}
    return found.get("Override") or found.get("Physical")


def parse_physical_size(text: str) -> tuple[int, int] | None:
    """The display's own size (``Physical size:``), whatever override is in effect."""
    for m in _SIZE.finditer(text.replace("\r", "")):
        if m.group(1) == "Physical":
            return int(m.group(2)), int(m.group(3))
    return None


def parse_density(text: str) -> int | None:
    """The density in effect: the override where there is one, else the physical density."""
    found = {m.group(1): int(m.group(2)) for m in _DENSITY.finditer(text.replace("\r", ""))}
    return found.get("Override") or found.get("Physical")


def parse_override(text: str, key: str) -> str | None:
    """The override ``wm size`` (``key`` "size": ``"480x1024"``) or ``wm density`` ("density":
    ``"160"``) prints, None while there is none: the ``Override ...:`` line comes after the
    ``Physical ...:`` one only while an override is set (WindowManagerShellCommand, runDisplaySize
    and runDisplayDensity)."""
    pattern = {"size": _SIZE, "density": _DENSITY}[key]
    for m in pattern.finditer(text.replace("\r", "")):
        if m.group(1) == "Override":
            return "x".join(m.groups()[1:])
    return None
