"""Screenshots as ``screencap`` writes them, found in what ``adb exec-out`` returns.

``exec:`` (``adb exec-out``) has one stream: what the command writes to stderr arrives in it too,
before the image. ``screencap`` on a device with several displays and no ``-d`` writes "[Warning]
Multiple displays were found, but no display id was specified! Defaulting to the first display
found, however this default is not guaranteed to be consistent across captures. A display id
should be specified." and two more lines naming ``-d`` and ``dumpsys SurfaceFlinger --display-id``
to stderr (AOSP ``cmds/screencap/screencap.cpp``, read at bluestacks/frameworks-base-a16 2b447fb9;
adbutils issue 133: the PNG cannot be decoded); containers print their drivers' complaints
("Failed to create //.cache for shader cache (Read-only file system)---disabling." on Waydroid) and
some builds the linker's ("WARNING: linker: ..."; LmeSzinc/AzurLaneAutoScript
``module/device/method/utils.py`` @ 9d738099, ``remove_shell_warning``). So the image is looked for
after such text: a PNG from its signature on, a raw frame (``harness.core.screenshot.parse_raw_screencap``)
where its header and pixels fill the rest exactly. Anything else (an error message alone, an image
cut short, bytes that are not text before the image) is a :class:`ScreencapError` that quotes what
came: never a corrupt image.

On a device with several displays ``-d`` takes a SurfaceFlinger display id, a 64-bit number
(``strtoull``), not the window manager's display 0/1/2 (screencap.cpp; a Pixel Fold emulator's
inner screen is ``4619827259835644672``). ``dumpsys SurfaceFlinger --display-id`` lists them, one a
line: ``Display 4619827259835644672 (HWC display 0): port=0 pnpId=GGL displayName="EMU_display_0"``.
``dumpsys display`` ties them to the window manager's ids: each logical display's
``mBaseDisplayInfo=DisplayInfo{..., displayId 0, ... uniqueId "local:4619827259835644672"...}``.
"""

from __future__ import annotations

import re

from harness.core.screenshot import RawFrame, RawFrameError, parse_raw_screencap

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"IEND\xaeB`\x82"  # the IEND chunk's type and CRC close every whole PNG
SURFACEFLINGER_DISPLAY_IDS = ("dumpsys", "SurfaceFlinger", "--display-id")
DUMPSYS_DISPLAY = ("dumpsys", "display")
COMMANDS = (SURFACEFLINGER_DISPLAY_IDS, DUMPSYS_DISPLAY)
MAX_NOISE = 4096  # bytes of text allowed before the image
MULTIPLE_DISPLAYS = "Multiple displays were found"

_SF_DISPLAY = re.compile(r"^Display (\d+) ", re.M)
_LOGICAL = re.compile(r'displayId (\d+),.*?uniqueId "local:(\d+)"')


class ScreencapError(ValueError):
    """What ``screencap`` returned holds no whole image."""


def png_command(display: str | None = None) -> str:
    return "screencap -p" + (f" -d {int(display)}" if display else "")


def raw_command(display: str | None = None) -> str:
    return "screencap" + (f" -d {int(display)}" if display else "")


def _text(prefix: bytes) -> str | None:
    """``prefix`` as text when it is only text (a message a program printed), else None."""
    if b"\x00" in prefix:
        return None
    try:
        return prefix.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _quote(data: bytes) -> str:
    return repr(data[:160])


def find_png(data: bytes) -> tuple[bytes, str]:
    """The PNG in a ``screencap -p`` stream and the text that came with it (before it, or after
    its IEND chunk)."""
    at = data.find(PNG_SIGNATURE, 0, MAX_NOISE + len(PNG_SIGNATURE))
    if at < 0:
        raise ScreencapError(f"{len(data)} bytes that hold no PNG: {_quote(data)}")
    before = _text(data[:at])
    if before is None:
        raise ScreencapError(f"a PNG after {at} bytes that are not text: {_quote(data)}")
    end = data.rfind(PNG_END)
    if end < at:
        raise ScreencapError(f"a PNG cut short ({len(data) - at} bytes, no IEND chunk)"
                             + (f" after {before.strip()[:200]!r}" if before.strip() else ""))
    end += len(PNG_END)
    after = _text(data[end:])
    if after is None:
        raise ScreencapError(f"{len(data) - end} bytes that are not text after the PNG's IEND chunk")
    return data[at:end], (before + after).strip()


def find_raw(data: bytes, expected: tuple[int, int]) -> tuple[RawFrame, str]:
    """The raw frame in a ``screencap`` stream (its header and ``expected`` width x height pixels
    fill the rest exactly) and the text before it."""
    try:
        return parse_raw_screencap(data, expected), ""
    except RawFrameError as first:
        error = first
    # text before the frame: the frame is the stream's last header + pixels bytes
    for header in (16, 12):
        for bpp in (4, 3, 2):
            at = len(data) - (header + expected[0] * expected[1] * bpp)
            if 0 < at <= MAX_NOISE:
                before = _text(data[:at])
                if before is None:
                    continue
                try:
                    return parse_raw_screencap(data[at:], expected), before.strip()
                except RawFrameError:
                    continue
    raise ScreencapError(f"{error}; the stream starts {_quote(data[:80])}")


def parse_display_ids(text: str) -> list[str]:
    """The SurfaceFlinger display ids of ``dumpsys SurfaceFlinger --display-id``, in its order."""
    return _SF_DISPLAY.findall(text)


def physical_display(display_dump: str, logical: int) -> str | None:
    """The SurfaceFlinger id of the window manager's display ``logical``, from ``dumpsys display``
    (``uniqueId "local:ID"`` of its DisplayInfo); None where it does not say."""
    for m in _LOGICAL.finditer(display_dump):
        if int(m.group(1)) == logical:
            return m.group(2)
    return None
