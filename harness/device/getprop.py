"""System properties as ``getprop`` lists them: ``[name]: [value]`` one a line (AOSP toolbox
getprop). An ``adb shell`` pty ends the lines with CRLF (the Asus TF201's Android 3.2 listing);
a pasted excerpt may start in the middle (redroid-modules issue 5). A value may hold newlines and
then runs on to the line that ends in ``]`` (``persist.sys.boot.reason.history`` on the motorola edge 20
and the MediaTek tablet: one boot reason a line).
"""

from __future__ import annotations

import re

GETPROP = ("getprop",)
COMMANDS = (GETPROP,)

_PROP_LINE = re.compile(r"^\[([^\]\r\n]+)\]: \[(.*?)\]\r*$", re.M | re.S)


def parse_props(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _PROP_LINE.finditer(text)}


def sdk_of(props: dict[str, str]) -> int | None:
    """``ro.build.version.sdk`` (the system's API level) as a number; None where it is missing.
    The vendor's and other partitions' SDKs (``ro.vendor.build.version.sdk``) may be older."""
    try:
        return int(props.get("ro.build.version.sdk", "").strip())
    except ValueError:
        return None
