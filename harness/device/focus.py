"""Which app is in front, read from what ``dumpsys`` prints on each Android version.

What each command prints (the transcripts are in ``../shared/reference/real_device/``):

- ``dumpsys window windows`` before Android 10 ends with ``mCurrentFocus=Window{HASH u0 PKG/ACT}``
  and ``mFocusedApp=AppWindowToken{HASH token=Token{HASH ActivityRecord{HASH u0 PKG/.ACT t15}}}``
  (adb-enhanced issue 4). Android 4 had no user field and a word before the brace:
  ``Window{b4d2a948 PKG/ACT paused=false}`` (AndroidViewClient's DUMPSYS_WINDOW_WINDOWS_SAMPLE_UI).
- From Android 10 (API 29) those lines moved to ``dumpsys window displays`` (appium-adb
  ``lib/tools/app-commands.ts`` @ 8eea1a84 switches command at API 29; none of the Android 11, 12
  and 13 ``windows`` dumps here has them): one pair per display, after its ``Display: mDisplayId=N``
  header (the MediaTek Android 13 tablet's full ``dumpsys window``). The windows section keeps
  ``mTopFocusedDisplayId=N``, the display that has the focus. A phone with several displays prints
  a pair for each (the Galaxy Z Flip4, appium-adb issue 797: three, two ``null``, one the cover
  screen's SystemUI), so the focused display is read first.
- ``mCurrentFocus`` names a window: an app's ``PKG/ACT``, or a system window without a package
  (``NotificationShade`` over the lock screen, ``StatusBar``, ``PopupWindow:1a2b``); then
  ``mFocusedApp`` says which app (an ``ActivityRecord{HASH u0 PKG/.ACT tN}``, with a stray ``}``
  after ``tN`` on Android 13). A window name may carry words after the component (vivo's
  ``... type=1 }``), so the component is the token of the form ``PKG/ACT``.
- A ``windows`` section without those lines (API 29 on): the topmost visible app window. Windows
  are listed top first as ``Window #N Window{HASH u0 PKG/ACT}:`` blocks, each with its
  ``mDisplayId=N`` and ``isVisible=true|false`` (Appium's Android 11 and 13 fixtures).
- ``dumpsys activity activities``: ``mResumedActivity: ActivityRecord{...}`` before Android 10
  (awesome-adb's README), ``ResumedActivity:`` and ``Resumed:`` on Android 12 on (the tablet:
  adbutils' ``app_current`` regex wants the ``m`` and misses it), ``topResumedActivity=`` in
  between; the top display's comes first.
- ``dumpsys activity top``: ``ACTIVITY PKG/ACT HASH pid=N`` per task; the one in front has
  ``mResumed=true`` in its local state (the vivo phone), else the last one is (adbutils does so).

:func:`foreground` asks in that order, by SDK, and stops at the first answer. Activities are
returned as full class names (``.Main`` of ``com.x`` is ``com.x.Main``, as ComponentName reads it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

DUMPSYS_WINDOW_DISPLAYS = ("dumpsys", "window", "displays")
DUMPSYS_WINDOW_WINDOWS = ("dumpsys", "window", "windows")
DUMPSYS_ACTIVITY_ACTIVITIES = ("dumpsys", "activity", "activities")
DUMPSYS_ACTIVITY_TOP = ("dumpsys", "activity", "top")
COMMANDS = (DUMPSYS_WINDOW_DISPLAYS, DUMPSYS_WINDOW_WINDOWS, DUMPSYS_ACTIVITY_ACTIVITIES, DUMPSYS_ACTIVITY_TOP)
DISPLAYS_SINCE_SDK = 29  # Android 10: the focus lines left `dumpsys window windows` for `displays`

Shell = Callable[[list[str]], str]

_COMPONENT = re.compile(r"^([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)/([A-Za-z0-9_.$]+)$")
_WINDOW = re.compile(r"Window\{[0-9a-fA-F]+ (?:u\d+ )?([^{}]*?)\s*\}")
_RECORD = re.compile(r"ActivityRecord\{[0-9a-fA-F]+ (?:u\d+ )?([^\s{}]+)")
_DISPLAY = re.compile(r"^\s*Display: mDisplayId=(\d+)")
_TOP_DISPLAY = re.compile(r"^\s*mTopFocusedDisplayId=(-?\d+)", re.M)
_FOCUS = re.compile(r"^\s*(mCurrentFocus|mFocusedApp)=(.*)$")
_WINDOW_BLOCK = re.compile(r"^\s*Window #\d+ Window\{[0-9a-fA-F]+ (?:u\d+ )?(.*?)\s*\}:\s*$")
_RESUMED = re.compile(r"^\s*(topResumedActivity|mResumedActivity|ResumedActivity|Resumed)[:=]\s*(ActivityRecord\{.*)$")
_TOP_ACTIVITY = re.compile(r"^\s*ACTIVITY (\S+) [0-9a-fA-F]+ pid=")


@dataclass(frozen=True)
class Foreground:
    """The app in front: its package and activity (a full class name), and what said so."""

    package: str
    activity: str
    source: str
    display: int | None = None

    @property
    def component(self) -> str:
        return f"{self.package}/{self.activity}"


def component(token: str) -> tuple[str, str] | None:
    """``(package, activity)`` of a ``PKG/ACT`` token, the activity as a full class name."""
    m = _COMPONENT.match(token.strip().rstrip(",}"))
    if m is None:
        return None
    pkg, act = m.groups()
    return pkg, (pkg + act if act.startswith(".") else act)


def _window_component(value: str) -> tuple[str, str] | None:
    m = _WINDOW.search(value)
    if m is None:
        return None
    return next((c for c in map(component, m.group(1).split()) if c), None)


def _record_component(value: str) -> tuple[str, str] | None:
    m = _RECORD.search(value)
    return component(m.group(1)) if m else None


@dataclass
class _Display:
    display: int | None
    window: str | None = None          # mCurrentFocus's value; "null" when nothing has the focus
    app: str | None = None             # mFocusedApp's value

    def focused(self) -> bool:
        return self.window is not None and self.window.strip() != "null"

    def read(self) -> tuple[tuple[str, str], str] | None:
        """The app this display shows in front, and the line that said so."""
        if self.window:
            c = _window_component(self.window)
            if c:
                return c, "mCurrentFocus"
        if self.app:
            c = _record_component(self.app)
            if c:
                return c, "mFocusedApp"
        return None


def top_focused_display(text: str) -> int | None:
    """``mTopFocusedDisplayId`` of a ``dumpsys window`` (its windows section), or None."""
    m = _TOP_DISPLAY.search(text)
    return int(m.group(1)) if m else None


def _displays(text: str) -> list[_Display]:
    """The focus lines of a window dump, grouped by display. Under ``Display: mDisplayId=N``
    headers each display has its own pair; without headers (the old single-display dump, or a
    ``grep`` of the lines) the n-th mCurrentFocus and the n-th mFocusedApp are one display's."""
    headed: list[_Display] = []
    loose: list[_Display] = []
    for line in text.splitlines():
        m = _DISPLAY.match(line)
        if m:
            headed.append(_Display(int(m.group(1))))
            continue
        m = _FOCUS.match(line)
        if m is None:
            continue
        field = "window" if m.group(1) == "mCurrentFocus" else "app"
        if headed:
            setattr(headed[-1], field, getattr(headed[-1], field) or m.group(2))
            continue
        slot = next((d for d in loose if getattr(d, field) is None), None)
        if slot is None:
            slot = _Display(None)
            loose.append(slot)
        setattr(slot, field, m.group(2))
    return headed or loose


def _visible_window(text: str, top: int | None) -> Foreground | None:
    """The topmost visible app window of a windows section (listed top first)."""
    name: str | None = None
    display: int | None = None
    visible = False

    def done() -> Foreground | None:
        if name and visible and (top is None or display in (None, top)):
            c = next((c for c in map(component, name.split()) if c), None)
            if c:
                return Foreground(*c, source="the topmost visible window", display=display)
        return None

    for line in text.splitlines():
        m = _WINDOW_BLOCK.match(line)
        if m:
            found = done()
            if found:
                return found
            name, display, visible = m.group(1), None, False
            continue
        if name is None:
            continue
        s = line.strip()
        if s.startswith("mDisplayId="):
            d = re.match(r"mDisplayId=(\d+)", s)
            display = int(d.group(1)) if d else None
        elif s == "isVisible=true":
            visible = True
    return done()


def read_window_dump(text: str, top_display: int | None = None) -> Foreground | None:
    """The app in front per a ``dumpsys window`` (``windows``, ``displays`` or all of it); None
    when it does not say, or when several displays have the focus and nothing says which one is
    on top (``top_display``, else the dump's own ``mTopFocusedDisplayId``)."""
    top = top_display if top_display is not None else top_focused_display(text)
    displays = _displays(text)
    if not displays:
        return _visible_window(text, top)
    if top is not None:
        for d in displays:
            if d.display == top and d.read():
                (pkg, act), line = d.read()
                return Foreground(pkg, act, f"{line} of the focused display {top}", top)
    # Without per-display focus only the top display's window has the focus (the others print null)
    focused = [d for d in displays if d.focused() and d.read()]
    readable = focused or [d for d in displays if d.read()]
    if len(readable) != 1:
        return None
    (pkg, act), line = readable[0].read()
    where = "" if len(displays) == 1 else f" (the only display with {'a focused window' if focused else 'an app'})"
    return Foreground(pkg, act, line + where, readable[0].display)


def read_activities(text: str) -> Foreground | None:
    """The resumed activity of ``dumpsys activity activities`` (the first display's first)."""
    found: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        m = _RESUMED.match(line)
        if m and m.group(1) not in found:
            c = _record_component(m.group(2))
            if c:
                found[m.group(1)] = c
    for name in ("topResumedActivity", "mResumedActivity", "ResumedActivity", "Resumed"):
        if name in found:
            return Foreground(*found[name], source=name)
    return None


def read_activity_top(text: str) -> Foreground | None:
    """The activity in front per ``dumpsys activity top``: the one whose state says
    ``mResumed=true``, else the last one listed."""
    last: tuple[str, str] | None = None
    current: tuple[str, str] | None = None
    for line in text.splitlines():
        m = _TOP_ACTIVITY.match(line)
        if m:
            current = component(m.group(1))
            last = current or last
        elif current and "mResumed=true" in line:
            return Foreground(*current, source="dumpsys activity top (mResumed=true)")
    return Foreground(*last, source="dumpsys activity top (the last activity)") if last else None


def foreground(shell: Shell, sdk: int | None) -> Foreground | None:
    """Ask the phone which app is in front: the window manager's focus (``displays`` from API 29,
    ``windows`` before; the windows section's ``mTopFocusedDisplayId`` where several displays
    have one), then the activity manager's resumed activity, then ``dumpsys activity top``.
    ``sdk`` None (not known): as on a recent phone."""
    windows: str | None = None
    if sdk is None or sdk >= DISPLAYS_SINCE_SDK:
        displays = shell(list(DUMPSYS_WINDOW_DISPLAYS))
        found = read_window_dump(displays)
        if found:
            return found
        windows = shell(list(DUMPSYS_WINDOW_WINDOWS))
        found = read_window_dump(displays, top_focused_display(windows))
        if found:
            return found
    if windows is None:
        windows = shell(list(DUMPSYS_WINDOW_WINDOWS))
    found = read_window_dump(windows)
    if found:
        return found
    for command, read in ((DUMPSYS_ACTIVITY_ACTIVITIES, read_activities), (DUMPSYS_ACTIVITY_TOP, read_activity_top)):
        found = read(shell(list(command)))
        if found:
            return found
    return None


def commands_for(sdk: int | None) -> Sequence[tuple[str, ...]]:
    """The commands :func:`foreground` may send to a phone of ``sdk``, in order."""
    first = (DUMPSYS_WINDOW_DISPLAYS,) if sdk is None or sdk >= DISPLAYS_SINCE_SDK else ()
    return (*first, DUMPSYS_WINDOW_WINDOWS, DUMPSYS_ACTIVITY_ACTIVITIES, DUMPSYS_ACTIVITY_TOP)
