"""Telling what a phone was sent: the commands that change a phone (never sent by ``harness devices
capture``), and the command lines of a simulated phone's command log that are neither those nor on
the read-only list (``harness.device.read_only_commands``) - a reader whose command a capture would
not keep."""

from __future__ import annotations

from typing import Any

from harness.device.read_only_commands import listed

# what the harness sends that changes a phone (settings, apps, input methods, the screen, touches);
# `sh -c` carries the stand-in human's sendevent scripts; `wm size|density VALUE|reset` (prepare's
# --size/--density) too (see changes)
CHANGES = (("settings", "put"), ("settings", "delete"), ("input",), ("am",), ("pm", "clear"), ("pm", "install"),
           ("ime", "set"), ("ime", "enable"), ("ime", "disable"), ("wm", "dismiss-keyguard"), ("monkey",),
           ("sendevent",), ("setprop",), ("svc",), ("sh", "-c"))


def changes(argv: list[str]) -> bool:
    if argv[:2] in (["wm", "size"], ["wm", "density"]):  # with a value (or reset) it overrides the screen's
        return len(argv) > 2
    return any(tuple(argv[:len(c)]) == c for c in CHANGES)


def not_on_the_list(records: list[dict[str, Any]]) -> list[str]:
    """Command lines of ``records`` that change nothing (no simple command in them is one of
    CHANGES) and yet hold a simple command the read-only list does not have."""
    out = []
    for r in records:
        argvs = r.get("argv") or []
        if any(changes(a) for a in argvs):
            continue
        if not argvs or not all(listed(a) for a in argvs):
            out.append(r["line"])
    return out
