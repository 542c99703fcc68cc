"""Reading a phone's touches from ``getevent`` output: the device listing (``getevent -lp``), the
touchscreen found by its capabilities, its axes scaled to the screen, and the event stream
(``getevent -lt``) turned into gestures.

Formats (AOSP toolbox ``getevent.c``, read at bluestacks/system-core-a16 bd6b5a60, the same code as
AOSP's): ``-p`` prints ``add device N: PATH``, ``  name: "..."``, an ``events:`` block with one line
per event type (``KEY (0001): BTN_TOUCH ...``; each ``ABS`` axis on its own line with ``: value V,
min A, max B, fuzz F, flat F, resolution R``) and ``input props:``; a key listed with ``*`` is down
right now (EVIOCGKEY); labels are cut to 20 characters (``KEY_PRIVACY_SCREEN_T``). ``-i`` adds
``bus:``/``vendor``/``version`` lines. ``-t`` prefixes an event with ``[   SECONDS.MICROS] ``,
and without a device argument each event names its device (``/dev/input/event2: ``); plain
``getevent`` prints neither a time nor (with a device argument) a path. ``-l`` prints type, code and
key states as words (``EV_ABS ABS_MT_POSITION_X 000001f4``, ``EV_KEY BTN_TOUCH DOWN``), values as
8 hex digits (a lifted contact's tracking id -1 is ``ffffffff``). Both labelled and numeric forms
are read, and a line ending in ``\r`` or ``\r\r`` (an ``adb shell`` pty) as the phone meant it.

The touchscreen is the device Android's EventHub would take for one (``openDeviceLocked``):
``ABS_MT_POSITION_X``/``_Y`` with ``BTN_TOUCH`` or without gamepad buttons (multi-touch), or
``BTN_TOUCH`` with ``ABS_X``/``ABS_Y`` (single-touch); a device with ``INPUT_PROP_POINTER`` and not
``INPUT_PROP_DIRECT`` is a touchpad, not a screen. Phones list several such devices (the vivo
tablet: its screen, a pen, and a fingerprint sensor with multi-touch axes but no
``INPUT_PROP_DIRECT``; the emulator: eleven ``virtio_input_multi_touch_N``, one per display), so
they are ranked (:func:`find_touchscreen`). Raw coordinates map to pixels as Android's
TouchInputMapper maps them: ``(raw - min) * size / (max - min + 1)``.

Contacts (the kernel's ``Documentation/input/multi-touch-protocol.rst``):

- type B: ``ABS_MT_SLOT`` selects a slot, ``ABS_MT_TRACKING_ID`` >= 0 puts a contact in it and -1
  lifts it, state is kept per slot and only changes are sent. The kernel sends ``ABS_MT_SLOT``
  only when the slot differs from the last one it sent (``input_handle_abs_event`` stages it), so
  the listing's ``ABS_MT_SLOT value`` is the slot the next events belong to; every slot starts
  empty: the listing's ``ABS_MT_TRACKING_ID value`` is the axis's unused absinfo, not a contact
  (the vivo tablet lists ``value 0`` while no finger is down). A slot's position is not in the
  listing either: EVIOCGABS gives the MT axes' absinfo, which the input core leaves at its idle
  value, a slot's values living in ``input_mt`` (drivers/input/input.c ``input_handle_abs_event``,
  which also drops a value equal to the one the slot holds). So a finger put down where the
  slot's last contact lifted, before the reading began, sends no position at all. Such a touch is not read at the listed (0, 0): its position is
  unknown until the slot reports one, and a touch that never does is a :class:`Touch` with no
  points, ``unplaced``, announced through ``on_warning``. Once a slot has reported its position,
  a later touch there is read right (its unchanged axes are the ones last reported).
- type A: each contact's axes end with ``SYN_MT_REPORT``; the contacts of a frame are the ones
  reported before its ``SYN_REPORT``, and a frame reporting none (an empty ``SYN_MT_REPORT``, or
  ``BTN_TOUCH`` up) has every finger lifted. The protocol is known from the first
  ``SYN_MT_REPORT``, which a type A device sends in its first frame; type B never sends one.
- ``BTN_TOUCH`` up ends every contact on either protocol.

A frame ends at ``SYN_REPORT``. One gesture runs from the first contact down to the last one up.
Keys are read from every node, the touchscreen's own too (a phone's HOME and BACK on the touch
controller, the emulator's keys): a key press is any ``EV_KEY`` that is not a button
(:func:`harness.core.input_codes.is_button`: BTN_TOUCH, BTN_TOOL_*, a pen's buttons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from harness.core import input_codes as C


class EvdevError(ValueError):
    """getevent output that cannot be read, or a phone without a usable touchscreen."""


@dataclass
class Axis:
    minimum: int
    maximum: int
    value: int = 0  # the value when listed (for MT axes: the current slot's)

    @property
    def span(self) -> int:
        return self.maximum - self.minimum + 1


@dataclass
class InputDeviceInfo:
    path: str
    name: str = ""
    caps: dict[int, set[int]] = field(default_factory=dict)
    axes: dict[int, Axis] = field(default_factory=dict)
    props: set[int] = field(default_factory=set)

    def has(self, ev_type: int, code: int) -> bool:
        return code in self.caps.get(ev_type, set())

    @property
    def is_touchscreen(self) -> bool:
        keys = self.caps.get(C.EV_KEY, set())
        gamepad = any(0x100 <= k < 0x110 or 0x120 <= k < 0x140 for k in keys)  # BTN_MISC.., BTN_JOYSTICK..
        multi = self.has(C.EV_ABS, C.ABS_MT_POSITION_X) and self.has(C.EV_ABS, C.ABS_MT_POSITION_Y)
        touch = (multi and (C.BTN_TOUCH in keys or not gamepad)) or (
            C.BTN_TOUCH in keys and self.has(C.EV_ABS, C.ABS_X) and self.has(C.EV_ABS, C.ABS_Y))
        touchpad = C.INPUT_PROP_POINTER in self.props and C.INPUT_PROP_DIRECT not in self.props
        return touch and not touchpad

    @property
    def multitouch(self) -> bool:
        return self.has(C.EV_ABS, C.ABS_MT_POSITION_X)

    @property
    def slotted(self) -> bool:
        """Multi-touch protocol type B (``ABS_MT_SLOT``); type A without it."""
        return self.has(C.EV_ABS, C.ABS_MT_SLOT)

    def describe(self) -> str:
        return f"{self.path} ({self.name!r})" if self.name else self.path


@dataclass
class Touchscreen:
    """A touchscreen and the screen it covers: raw axis values <-> screen pixels."""

    device: InputDeviceInfo
    x: Axis
    y: Axis
    size: tuple[int, int]

    @classmethod
    def of(cls, device: InputDeviceInfo, size: tuple[int, int]) -> "Touchscreen":
        xc, yc = (C.ABS_MT_POSITION_X, C.ABS_MT_POSITION_Y) if device.multitouch else (C.ABS_X, C.ABS_Y)
        if xc not in device.axes or yc not in device.axes:
            raise EvdevError(f"{device.describe()}: getevent -p gave no range for its position axes")
        x, y = device.axes[xc], device.axes[yc]
        if x.span <= 0 or y.span <= 0:
            raise EvdevError(f"{device.describe()}: empty axis range x {x.minimum}..{x.maximum}, y {y.minimum}..{y.maximum}")
        return cls(device, x, y, size)

    def to_pixels(self, rx: int, ry: int) -> tuple[int, int]:
        w, h = self.size
        px = int((rx - self.x.minimum) * w / self.x.span)
        py = int((ry - self.y.minimum) * h / self.y.span)
        return min(max(px, 0), w - 1), min(max(py, 0), h - 1)

    def to_raw(self, px: int, py: int) -> tuple[int, int]:
        """The raw value whose pixel is (px, py): the middle of the pixel's span of raw values."""
        w, h = self.size
        rx = self.x.minimum + int((px + 0.5) * self.x.span / w)
        ry = self.y.minimum + int((py + 0.5) * self.y.span / h)
        return min(rx, self.x.maximum), min(ry, self.y.maximum)

    def describe(self) -> str:
        return (f"{self.device.describe()}, x {self.x.minimum}-{self.x.maximum}, y {self.y.minimum}-{self.y.maximum} "
                f"-> {self.size[0]}x{self.size[1]} pixels")


# --- the device listing --------------------------------------------------------------------------

_ADD = re.compile(r"^add device \d+: (\S+)")
_NAME = re.compile(r'^\s+name:\s+"(.*)"\s*$')
_SECTION = re.compile(r"^\s+([A-Z]{2,3})\s*\(([0-9a-fA-F]{4})\):(.*)$")
_ABS = re.compile(r"(\S+?)\*?\s*:\s*value (-?\d+), min (-?\d+), max (-?\d+)")


def _code(ev_type: int, token: str) -> int | None:
    token = token.rstrip("*")
    named = C.CODE_BY_NAME.get(ev_type, {}).get(token)
    if named is not None:
        return named
    try:
        return int(token, 16)
    except ValueError:
        return None


# getevent.c's open_device: ``fprintf(stderr, "could not open %s, %s\n", device, strerror(errno))`` for a
# node it may not read (the shell user outside the ``input`` group: "Permission denied"); the node is
# then left out of the listing, so a phone that forbids them all lists no device at all
_UNOPENED = re.compile(r"^could not open (\S+?),\s*(.*?)\s*$")


def unopened_nodes(text: str) -> list[tuple[str, str]]:
    """The input nodes ``getevent`` could not open, with the reason it printed: (path, reason)."""
    out = []
    for raw in text.replace("\r", "").split("\n"):
        m = _UNOPENED.match(raw.strip())
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def parse_devices(text: str) -> list[InputDeviceInfo]:
    """The devices of a ``getevent -p`` or ``getevent -lp`` listing, in listing order."""
    devices: list[InputDeviceInfo] = []
    dev: InputDeviceInfo | None = None
    ev_type: int | None = None
    in_props = False
    for raw in text.replace("\r", "").split("\n"):
        m = _ADD.match(raw)
        if m:
            dev = InputDeviceInfo(m.group(1))
            devices.append(dev)
            ev_type, in_props = None, False
            continue
        if dev is None or not raw.strip():
            continue
        m = _NAME.match(raw)
        if m:
            dev.name = m.group(1)
            continue
        stripped = raw.strip()
        if stripped == "events:":
            ev_type, in_props = None, False
            continue
        if stripped == "input props:":
            ev_type, in_props = None, True
            continue
        if in_props:
            if stripped != "<none>":
                prop = C.PROP_BY_NAME.get(stripped)
                if prop is None:
                    try:
                        prop = int(stripped, 16)
                    except ValueError:
                        continue
                dev.props.add(prop)
            continue
        m = _SECTION.match(raw)
        body = raw
        if m:
            ev_type = int(m.group(2), 16)
            body = m.group(3)
        elif not raw.startswith("               "):
            ev_type = None  # some other line (bus, version, location, ...)
            continue
        if ev_type is None:
            continue
        if ev_type == C.EV_ABS:
            a = _ABS.search(body)
            if a:
                code = _code(C.EV_ABS, a.group(1))
                if code is not None:
                    dev.caps.setdefault(C.EV_ABS, set()).add(code)
                    dev.axes[code] = Axis(int(a.group(3)), int(a.group(4)), int(a.group(2)))
            continue
        for token in body.split():
            code = _code(ev_type, token)
            if code is not None:
                dev.caps.setdefault(ev_type, set()).add(code)
    return devices


_EMULATOR_TOUCH = re.compile(r"^virtio_input_multi_touch_(\d+)$")


def _rank(order: int, d: InputDeviceInfo) -> tuple:
    """How likely ``d`` is the phone's own screen, lowest first: says it is a screen
    (``INPUT_PROP_DIRECT``: TouchInputMapper takes it for one); multi-touch (a pen or a
    single-touch sensor is not the screen fingers use); type B; position axes that start at 0 (a
    sensor wrapper lists -32768..32768, the HTC M8x's); then the emulator's first display's
    ``virtio_input_multi_touch_N`` (lowest N: device/generic/goldfish product makefiles install
    _1.._11, one per display); then listing order."""
    pos = [d.axes[c] for c in ((C.ABS_MT_POSITION_X, C.ABS_MT_POSITION_Y) if d.multitouch else (C.ABS_X, C.ABS_Y))
           if c in d.axes]
    m = _EMULATOR_TOUCH.match(d.name)
    return (C.INPUT_PROP_DIRECT not in d.props, not d.multitouch, not d.slotted,
            any(a.minimum < 0 for a in pos), int(m.group(1)) if m else 0, order)


NO_PERMISSION_ADVICE = ("The adb shell may not read this phone's input devices, so the harness cannot read a "
                        "person's touches on it: run `adb root` first where the build allows it (emulators, userdebug "
                        "and eng builds), or use a rooted phone whose adbd runs as root")


def find_touchscreen(devices: list[InputDeviceInfo], unopened: list[tuple[str, str]] = ()) -> InputDeviceInfo:
    """The touchscreen among ``devices`` (ranked by :func:`_rank`); EvdevError, naming what was
    found, when there is none. ``unopened``: the nodes getevent could not open
    (:func:`unopened_nodes`); when permission was refused, the error says so and what to do: the
    touchscreen may be one of them."""
    screens = [(i, d) for i, d in enumerate(devices) if d.is_touchscreen]
    if not screens:
        denied = [path for path, why in unopened if "permission denied" in why.lower()]
        if denied:
            shown = ", ".join(denied[:4]) + (f" and {len(denied) - 4} more" if len(denied) > 4 else "")
            opened = (f"; it could read only {', '.join(d.describe() for d in devices)}, no touchscreen among them"
                      if devices else "")
            raise EvdevError(f"getevent could not open {len(denied)} input device(s) ({shown}): Permission denied"
                             f"{opened}. {NO_PERMISSION_ADVICE}")
        seen = ", ".join(d.describe() for d in devices) or "none"
        raise EvdevError(f"getevent lists no touchscreen (a device with ABS_MT_POSITION_X/Y or BTN_TOUCH with ABS_X/Y); "
                         f"input devices: {seen}")
    return min(screens, key=lambda p: _rank(*p))[1]


# --- the event stream ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RawEvent:
    time: float
    device: str
    type: int
    code: int
    value: int


# [time] (getevent -t) and the device path (no device argument) are both optional; type, code and
# value are labels (-l) or hex, the value 8 hex digits unless -l names it
_EVENT = re.compile(r"^(?:\[\s*(\d+)\.(\d+)\]\s+)?(?:(/dev/\S+?):\s+)?(EV_\w+|[0-9a-fA-F]{4})\s+(\S+)\s+"
                    r"([0-9a-fA-F]{8}|DOWN|UP|REPEAT|MT_TOOL_\w+)\s*$")


def _signed32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def parse_event_line(line: str) -> RawEvent | None:
    """One event line of ``getevent`` (``-t``, ``-l``, with or without the device path); None for
    anything else (device headers, blanks, a shell prompt). Without ``-t`` the time is 0."""
    m = _EVENT.match(line.rstrip("\r\n"))
    if not m:
        return None
    sec, frac, device, t_tok, c_tok, v_tok = m.groups()
    ev_type = C.EV_BY_NAME.get(t_tok)
    try:
        if ev_type is None:
            ev_type = int(t_tok, 16)
        code = C.CODE_BY_NAME.get(ev_type, {}).get(c_tok)
        if code is None:
            code = int(c_tok, 16)
        if v_tok in ("DOWN", "UP", "REPEAT"):
            value = {"UP": 0, "DOWN": 1, "REPEAT": 2}[v_tok]
        elif v_tok.startswith("MT_TOOL_"):
            value = {v: k for k, v in C.MT_TOOL_NAMES.items()}.get(v_tok, 0)
        else:
            value = _signed32(int(v_tok, 16))
    except ValueError:
        return None
    when = int(sec) + int(frac) / 10 ** len(frac) if sec is not None else 0.0
    return RawEvent(when, device or "", ev_type, code, value)


@dataclass
class Touch:
    """One touch gesture in screen pixels: the primary contact's point at every frame whose point
    was read. ``unplaced``: where it began could not be read (the module's docstring, type B); its
    ``points`` are then those read after (none, for a touch that never moved)."""

    start: float
    end: float
    points: list[tuple[int, int]]
    contacts: int = 1
    unplaced: bool = False

    @property
    def duration_ms(self) -> int:
        return int(round((self.end - self.start) * 1000))

    def travel(self) -> float:
        if not self.points:
            return 0.0
        x0, y0 = self.points[0]
        return max(((x - x0) ** 2 + (y - y0) ** 2) ** 0.5 for x, y in self.points)


UNPLACED = ("getevent gave no position for this touch: it began where the last touch in its slot lifted "
            "before the reading started, and the phone sends a position only when it changes")


@dataclass
class KeyPress:
    device: str
    code: int
    start: float
    end: float

    @property
    def name(self) -> str:
        return C.KEY_NAMES.get(self.code, f"{self.code:04x}")


Gesture = Touch | KeyPress


class GestureReader:
    """Feeds on RawEvents and calls ``on_gesture`` with each finished Touch (from the touchscreen)
    or KeyPress (a key of any device, the touchscreen's own too), and ``on_contact`` when a touch
    begins. Events without a device path (``getevent -t DEVICE``) are the touchscreen's."""

    def __init__(self, screen: Touchscreen, on_gesture: Callable[[Gesture], None],
                 on_contact: Callable[[float], None] | None = None, on_warning: Callable[[str], None] | None = None):
        self.screen = screen
        self.on_gesture = on_gesture
        self.on_contact = on_contact or (lambda t: None)
        self.on_warning = on_warning or (lambda m: None)
        dev = screen.device
        axes = dev.axes
        # type B: the slot the next events belong to is the kernel's current one, as listed; every
        # slot is empty (the listed tracking id is not a contact), and its position is unknown until
        # it reports one (the listed MT positions are idle values, not a slot's: see the docstring)
        self.slot = axes[C.ABS_MT_SLOT].value if C.ABS_MT_SLOT in axes else 0
        self.slots: dict[int, dict[int, int]] = {}
        # type A (known from the first SYN_MT_REPORT, which a type A device sends in its first
        # frame): the contact being reported, the frame's reports, the contacts down
        self.type_a = False
        self._report: dict[int, int] = {}
        self._reported: list[dict[int, int]] | None = None  # None: no SYN_MT_REPORT in this frame
        self._down_a: list[dict[int, int]] = []
        self._lifted = False  # BTN_TOUCH went up in this frame
        self.single: dict[int, int] = {c: a.value for c, a in axes.items() if c in (C.ABS_X, C.ABS_Y)}
        self.touch: Touch | None = None
        self.keys: dict[tuple[str, int], float] = {}

    def feed(self, e: RawEvent) -> None:
        path = self.screen.device.path
        if e.type == C.EV_KEY and not C.is_button(e.code):
            self._key(e)  # a key of any node, the touchscreen's own too
            return
        if e.device and e.device != path:
            return  # another device's axes and buttons (a pen, a sensor) are not the screen's touches
        if e.type == C.EV_SYN:
            if e.code == C.SYN_REPORT:
                self._frame(e.time)
            elif e.code == C.SYN_MT_REPORT:
                if not self.type_a:  # what was read into slots was this protocol's reports
                    self.type_a, self.slots = True, {}
                if self._reported is None:
                    self._reported = []
                if self._report:  # an empty report (no axes since the last) says no finger is down
                    self._reported.append(self._report)
                self._report = {}
            elif e.code == C.SYN_DROPPED:
                self.on_warning("the phone dropped input events (SYN_DROPPED); the gesture in progress may be wrong")
            return
        if e.type == C.EV_ABS:
            if e.code == C.ABS_MT_SLOT:
                self.slot = e.value
            elif C.is_mt_axis(e.code):
                self._report[e.code] = e.value
                if not self.type_a:
                    self._slot(self.slot)[e.code] = e.value
            else:
                self.single[e.code] = e.value
        elif e.type == C.EV_KEY and e.code == C.BTN_TOUCH:
            self.single[C.BTN_TOUCH] = e.value
            if e.value == 0:
                self._lifted = True

    def feed_all(self, events: Iterable[RawEvent]) -> None:
        for e in events:
            self.feed(e)

    def _slot(self, n: int) -> dict[int, int]:
        if n not in self.slots:
            self.slots[n] = {C.ABS_MT_TRACKING_ID: -1}
        return self.slots[n]

    def contacts(self) -> list[tuple[int | None, int | None]]:
        """The raw positions of the fingers down now (as of the last frame), lowest slot first; an
        axis a type B slot has not reported since the reading began is None."""
        if self.screen.device.multitouch:
            if self.type_a:
                return [(r.get(C.ABS_MT_POSITION_X, 0), r.get(C.ABS_MT_POSITION_Y, 0)) for r in self._down_a]
            return [(s.get(C.ABS_MT_POSITION_X), s.get(C.ABS_MT_POSITION_Y))
                    for _, s in sorted(self.slots.items()) if s.get(C.ABS_MT_TRACKING_ID, -1) >= 0]
        if self.single.get(C.BTN_TOUCH):
            return [(self.single.get(C.ABS_X, 0), self.single.get(C.ABS_Y, 0))]
        return []

    def _end_frame(self) -> None:
        """Apply the frame's type A reports and BTN_TOUCH up to the contacts."""
        if self.type_a:
            if self._reported is not None:
                self._down_a = self._reported
            elif self._lifted:
                self._down_a = []
            # a frame without SYN_MT_REPORT and without BTN_TOUCH up (a key, a timestamp) changes nothing
        elif self._lifted:
            for s in self.slots.values():
                s[C.ABS_MT_TRACKING_ID] = -1
        self._reported, self._report, self._lifted = None, {}, False

    def _frame(self, t: float) -> None:
        self._end_frame()
        contacts = self.contacts()
        if contacts:
            rx, ry = contacts[0]
            pt = self.screen.to_pixels(rx, ry) if rx is not None and ry is not None else None
            if self.touch is None:
                self.touch = Touch(t, t, [pt] if pt else [], len(contacts), unplaced=pt is None)
                if pt is None:
                    self.on_warning(f"a touch could not be placed: {UNPLACED}")
                self.on_contact(t)
            else:
                self.touch.end = t
                self.touch.contacts = max(self.touch.contacts, len(contacts))
                if pt is not None and (not self.touch.points or self.touch.points[-1] != pt):
                    self.touch.points.append(pt)
        elif self.touch is not None:
            done, self.touch = self.touch, None
            done.end = t
            self.on_gesture(done)

    def _key(self, e: RawEvent) -> None:
        k = (e.device, e.code)
        if e.value == 1:
            self.keys[k] = e.time
        elif e.value == 0 and k in self.keys:
            self.on_gesture(KeyPress(e.device, e.code, self.keys.pop(k), e.time))


def classify(touch: Touch, slop_px: int, long_press_ms: int) -> str:
    """``tap``, ``long_press``, ``swipe`` or ``multi`` by Android's rules: a touch that never
    leaves the touch slop (ViewConfiguration's 8 dp) is a press, long once held past the long-press
    timeout; one that does is a swipe; more than one finger is a multi-touch gesture."""
    if touch.contacts > 1:
        return "multi"
    if touch.travel() > slop_px:
        return "swipe"
    return "long_press" if touch.duration_ms >= long_press_ms else "tap"
