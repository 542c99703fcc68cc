"""The simulated phone's kernel input side: ``/dev/input/event*`` devices, what ``sendevent``
writes to them, what ``getevent`` reads from them, and the input reader that turns touchscreen
frames into taps, long presses and swipes on the phone, and key presses into keys.

How a phone behaves, and so how this does:

* Devices have capabilities (event types and codes, axis ranges, input properties). A recorder
  finds the touchscreen by them, as Android's EventHub does (``EventHub::openDeviceLocked``: a
  device with ``ABS_MT_POSITION_X``/``_Y`` and ``BTN_TOUCH`` or no gamepad buttons is a
  multi-touch device; ``INPUT_PROP_DIRECT`` makes it a touchscreen rather than a touchpad). The
  simulated phone's own devices: ``gpio-keys`` (volume and power), an accelerometer that reports
  ``ABS_X/Y/Z`` (no contacts: not a touchscreen) and the touchscreen; a phone built without a
  touchscreen has only the first two. A device profile (``harness.sim.profile``) replaces them with
  a real phone's devices, read from its ``getevent -p``/``-lp`` listing (several touch devices, a
  pen, a fingerprint sensor with MT axes, keys on the touch controller's own node).
* Multi-touch protocol type B (the kernel's ``Documentation/input/multi-touch-protocol.rst``):
  ``ABS_MT_SLOT`` picks a slot, ``ABS_MT_TRACKING_ID`` >= 0 puts a contact in it and -1 lifts it,
  ``ABS_MT_POSITION_X``/``_Y`` move it, ``SYN_REPORT`` ends a frame. Type A (a device without
  ``ABS_MT_SLOT``): every frame reports each contact's data followed by ``SYN_MT_REPORT``; a frame
  with no contact data is all lifted (with ``BTN_TOUCH`` 0, the last ``SYN_MT_REPORT`` may be left
  out: the document's "If the driver reports one of BTN_TOUCH or ABS_PRESSURE ..."), tracking ids
  optional. A single-touch device (a pen: ``BTN_TOUCH`` with ``ABS_X``/``ABS_Y``) touches while
  ``BTN_TOUCH`` is down. Axes are not in screen pixels: Android's TouchInputMapper scales them,
  ``x_px = (raw - min) * width / (max - min + 1)`` (``RawPointerAxes::getRawWidth`` is
  ``max - min + 1``), and so does a recorder.
* The input core (Linux ``drivers/input/input.c``, ``input_handle_abs_event`` and
  ``input_handle_event``) drops what did not change: an axis written with its current value, a key
  already in that state, a code the device does not have. ``ABS_MT_SLOT`` is held back and sent
  just before the first changed value of another slot. MT values of a type-B device are kept per
  slot, so what ``EVIOCGABS`` reports for them (the ``value`` of a ``getevent -p`` listing) is not
  the current contact's but the device's own idle value, 0 unless the driver set another: real
  listings show ``ABS_MT_TRACKING_ID : value 0`` (the vivo tablet, the MK802's 3M screen, the
  emulator's virtio screens), and ``ABS_MT_SLOT`` shows the slot last reported. A type-A device's
  MT values bypass the filter (every frame is passed on whole). Values are queued until
  ``SYN_REPORT``; a frame with nothing in it is dropped. evdev stamps a frame's events with one time
  (``CLOCK_MONOTONIC``, which getevent selects).
* ``input tap`` and uiautomator's ``injectInputEvent`` go through InputManager, above the kernel:
  they never show in getevent. Only ``sendevent`` (a finger, as far as the phone can tell) does.
* Keys act on the phone when released, from any device (Android's KeyboardInputMapper reads every
  device with keys), through the Linux code's Android key: Generic.kl's numbering (158 BACK,
  172 HOME, 139 MENU, 580 APP_SWITCH, 116 POWER, ...), and 102 (``KEY_HOME``) as HOME, as phones'
  and boxes' own key layout files map it (Rockchip's ``rk29-keypad.kl``: ``key 102 HOME``).

The input reader runs before getevent's readers see a frame, so a client that reads a finger's
lift finds the phone has already acted on it (on a phone the two race; the recorder waits for the
screen to settle either way).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from harness.core import input_codes as C

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI

TOUCH_MAX = 4095          # the simulated touchscreen's axis range, 0..TOUCH_MAX on both axes
SLOTS = 10
BOOT_UPTIME_S = 3.0e4      # the phone "booted" this long before the process started (timestamps)

# names getevent prints that harness.core.input_codes does not list (linux input-event-codes.h): what
# phones' sensors, headset jacks and keyboards' LEDs report
MORE_NAMES = {
    C.EV_REL: {"REL_X": 0, "REL_Y": 1, "REL_Z": 2, "REL_RX": 3, "REL_RY": 4, "REL_RZ": 5, "REL_HWHEEL": 6,
               "REL_DIAL": 7, "REL_WHEEL": 8, "REL_MISC": 9},
    C.EV_SW: {"SW_LID": 0, "SW_TABLET_MODE": 1, "SW_HEADPHONE_INSERT": 2, "SW_RFKILL_ALL": 3,
              "SW_MICROPHONE_INSERT": 4, "SW_DOCK": 5, "SW_LINEOUT_INSERT": 6, "SW_JACK_PHYSICAL_INSERT": 7,
              "SW_VIDEOOUT_INSERT": 8, "SW_CAMERA_LENS_COVER": 9, "SW_KEYPAD_SLIDE": 10},
    0x11: {"LED_NUML": 0, "LED_CAPSL": 1, "LED_SCROLLL": 2},
}
_MORE_LABELS = {t: {code: name for name, code in names.items()} for t, names in MORE_NAMES.items()}

# Linux key code -> the Android key the phone acts on (see the module docstring)
ANDROID_KEYS = {
    C.KEY_BACK: "BACK", C.KEY_HOMEPAGE: "HOME", 102: "HOME", C.KEY_MENU: "MENU", C.KEY_APPSELECT: "APP_SWITCH",
    C.KEY_POWER: "POWER", C.KEY_WAKEUP: "WAKEUP", C.KEY_VOLUMEUP: "VOLUME_UP", C.KEY_VOLUMEDOWN: "VOLUME_DOWN",
    C.KEY_ENTER: "ENTER", C.KEY_BACKSPACE: "DEL", 217: "SEARCH",
}


@dataclass
class AbsInfo:
    minimum: int
    maximum: int
    value: int = 0
    fuzz: int = 0
    flat: int = 0
    resolution: int = 0


@dataclass
class Event:
    time: float   # seconds of CLOCK_MONOTONIC
    device: str
    type: int
    code: int
    value: int


@dataclass
class InputDevice:
    path: str
    name: str
    keys: list[int] = field(default_factory=list)
    abs: dict[int, AbsInfo] = field(default_factory=dict)
    msc: list[int] = field(default_factory=list)
    props: list[int] = field(default_factory=list)
    other: dict[int, list[int]] = field(default_factory=dict)   # REL, SW, LED...: listed, never acted on
    bus: int = 0x0019
    vendor: int = 0x0001
    product: int = 0x0001
    version: int = 0x0100
    # what this phone's getevent calls a code ("" for none: it prints the code) and the spaces it
    # prints after the label (a profile's listing; otherwise getevent.c's 20 - strlen(label))
    labels: dict[tuple[int, int], str] = field(default_factory=dict)
    pads: dict[tuple[int, int], int] = field(default_factory=dict)
    # input core state
    keys_down: set[int] = field(default_factory=set)
    slot: int = 0
    slot_reported: int = 0
    slots: list[dict[int, int]] = field(default_factory=list)
    pending: list[tuple[int, int, int]] = field(default_factory=list)
    reports: list[dict[int, int]] = field(default_factory=list)    # type A: this frame's contacts so far
    report: dict[int, int] = field(default_factory=dict)           # type A: the contact being reported

    def __post_init__(self) -> None:
        if C.ABS_MT_SLOT in self.abs:
            self.slot = self.slot_reported = self.abs[C.ABS_MT_SLOT].value
            self.slots = [{C.ABS_MT_TRACKING_ID: -1} for _ in range(self.abs[C.ABS_MT_SLOT].maximum + 1)]

    @property
    def multitouch(self) -> bool:
        return C.ABS_MT_POSITION_X in self.abs and C.ABS_MT_POSITION_Y in self.abs

    @property
    def type_a(self) -> bool:
        return self.multitouch and C.ABS_MT_SLOT not in self.abs

    @property
    def single_touch(self) -> bool:
        return not self.multitouch and C.BTN_TOUCH in self.keys and C.ABS_X in self.abs and C.ABS_Y in self.abs

    def capabilities(self) -> dict[int, list[int]]:
        """Codes by event type, in code order (a profile's device: in its listing's order, which is
        the kernel's code order with any code the tables here do not name in its place)."""
        order = list if self.labels else sorted
        caps: dict[int, list[int]] = {}
        if self.keys:
            caps[C.EV_KEY] = order(self.keys)
        if self.abs:
            caps[C.EV_ABS] = order(self.abs)
        if self.msc:
            caps[C.EV_MSC] = order(self.msc)
        for t, codes in self.other.items():
            if codes:
                caps[t] = order(codes)
        return dict(sorted(caps.items()))

    def label(self, ev_type: int, code: int) -> str | None:
        if (ev_type, code) in self.labels:
            return self.labels[(ev_type, code)] or None
        return C.code_name(ev_type, code) or _MORE_LABELS.get(ev_type, {}).get(code)

    def abs_value(self, code: int) -> int:
        """An axis's value as ``EVIOCGABS`` reports it: the slot last reported for ``ABS_MT_SLOT``,
        the device's idle value for the other MT axes (see the module docstring)."""
        if code == C.ABS_MT_SLOT:
            return self.slot_reported
        return self.abs[code].value

    def filter(self, ev_type: int, code: int, value: int) -> list[tuple[int, int, int]]:
        """What the input core passes on for one written event (possibly nothing, possibly a
        held-back ``ABS_MT_SLOT`` first)."""
        if ev_type == C.EV_KEY:
            if code not in self.keys:
                return []
            down = code in self.keys_down
            if value == 2:
                return [(ev_type, code, value)] if down else []
            if bool(value) == down:
                return []
            (self.keys_down.add if value else self.keys_down.discard)(code)
            return [(ev_type, code, 1 if value else 0)]
        if ev_type == C.EV_ABS:
            if code not in self.abs:
                return []
            if code == C.ABS_MT_SLOT:
                if self.slots and 0 <= value < len(self.slots):
                    self.slot = value  # staged until a value of that slot changes
                return []
            if C.is_mt_axis(code) and self.slots:
                current = self.slots[self.slot]
                if current.get(code, 0) == value:
                    return []
                current[code] = value
                out = []
                if self.slot != self.slot_reported:
                    self.slot_reported = self.slot
                    out.append((C.EV_ABS, C.ABS_MT_SLOT, self.slot))
                return out + [(ev_type, code, value)]
            if C.is_mt_axis(code):  # type A: "bypass filtering for multi-touch events when not employing slots"
                self.report[code] = value
                return [(ev_type, code, value)]
            info = self.abs[code]
            if info.value == value:
                return []
            info.value = value
            return [(ev_type, code, value)]
        if ev_type == C.EV_MSC:
            return [(ev_type, code, value)] if code in self.msc else []
        if ev_type == C.EV_SYN and code == C.SYN_MT_REPORT:
            if self.report:
                self.reports.append(self.report)
                self.report = {}
            return [(ev_type, code, value)]
        return []

    def contacts(self) -> list[dict[int, int]]:
        """The contacts of the frame just ended, as the input reader sees them: per-slot state
        (type B), this frame's reports (type A: ends the frame's reports), or the pen's point."""
        if self.type_a:
            out = self.reports + ([self.report] if self.report else [])
            self.reports, self.report = [], {}
            return [c for c in out if C.ABS_MT_POSITION_X in c or C.ABS_MT_POSITION_Y in c]
        if self.multitouch:
            return [s for s in self.slots if s.get(C.ABS_MT_TRACKING_ID, -1) >= 0]
        if self.single_touch and C.BTN_TOUCH in self.keys_down:
            return [{C.ABS_X: self.abs[C.ABS_X].value, C.ABS_Y: self.abs[C.ABS_Y].value}]
        return []


def standard_devices(touchscreen: bool = True) -> list[InputDevice]:
    """A phone's input devices, numbered in the order a phone's kernel registers them."""
    devs = [
        InputDevice("/dev/input/event0", "gpio-keys", keys=[C.KEY_VOLUMEDOWN, C.KEY_VOLUMEUP, C.KEY_POWER]),
        InputDevice("/dev/input/event1", "accelerometer", vendor=0, product=0,
                    abs={C.ABS_X: AbsInfo(-2048, 2047), C.ABS_Y: AbsInfo(-2048, 2047), C.ABS_Z: AbsInfo(-2048, 2047, 1024)}),
    ]
    if touchscreen:
        devs.append(InputDevice(
            "/dev/input/event2", "crate_touchscreen", vendor=0x0000, product=0x0000, version=0x0000,
            keys=[C.BTN_TOOL_FINGER, C.BTN_TOUCH],
            abs={C.ABS_MT_SLOT: AbsInfo(0, SLOTS - 1), C.ABS_MT_TOUCH_MAJOR: AbsInfo(0, 255),
                 C.ABS_MT_POSITION_X: AbsInfo(0, TOUCH_MAX), C.ABS_MT_POSITION_Y: AbsInfo(0, TOUCH_MAX),
                 C.ABS_MT_TRACKING_ID: AbsInfo(0, 65535), C.ABS_MT_PRESSURE: AbsInfo(0, 255)},
            props=[C.INPUT_PROP_DIRECT]))
    return devs


def touches_the_screen(devices: list[InputDevice]) -> list[InputDevice]:
    """The devices whose contacts land on the screen: multi-touch or pen devices with
    ``INPUT_PROP_DIRECT``; on a phone where none has it (the emulator's virtio screens, which an
    input device configuration file makes touchscreens), every multi-touch device."""
    direct = [d for d in devices if (d.multitouch or d.single_touch) and C.INPUT_PROP_DIRECT in d.props]
    return direct or [d for d in devices if d.multitouch]


class TouchReader:
    """The input reader's view of one touch device: contacts across frames become one gesture per
    touch, from the first contact down to the last one lifted, dispatched to ``on_gesture`` as
    display points and a duration (which decides tap, long press or swipe)."""

    def __init__(self, device: InputDevice, size: Callable[[], tuple[int, int]],
                 on_gesture: Callable[[list[tuple[int, int]], int], object]):
        self.device = device
        self.size = size
        self.on_gesture = on_gesture
        self.down_at: float | None = None
        self.points: list[tuple[int, int]] = []
        self.max_contacts = 0
        self.axes = (C.ABS_MT_POSITION_X, C.ABS_MT_POSITION_Y) if device.multitouch else (C.ABS_X, C.ABS_Y)

    def _display(self, contact: dict[int, int]) -> tuple[int, int]:
        w, h = self.size()
        ax, ay = self.device.abs[self.axes[0]], self.device.abs[self.axes[1]]
        x = (contact.get(self.axes[0], 0) - ax.minimum) * w / (ax.maximum - ax.minimum + 1)
        y = (contact.get(self.axes[1], 0) - ay.minimum) * h / (ay.maximum - ay.minimum + 1)
        return min(max(int(x), 0), w - 1), min(max(int(y), 0), h - 1)

    def frame(self, t: float) -> None:
        contacts = self.device.contacts()
        if contacts:
            if self.down_at is None:
                self.down_at, self.points, self.max_contacts = t, [], 0
            self.max_contacts = max(self.max_contacts, len(contacts))
            pt = self._display(contacts[0])
            if not self.points or self.points[-1] != pt:
                self.points.append(pt)
            return
        if self.down_at is None:
            return
        duration_ms = int(round((t - self.down_at) * 1000))
        points, multi = self.points, self.max_contacts > 1
        self.down_at, self.points = None, []
        if not multi:  # two-finger gestures (pinch, rotate) have no effect on the simulated apps
            self.on_gesture(points, duration_ms)


class InputSubsystem:
    """``/dev/input`` of one phone. Thread-safe; every ``sendevent`` and ``getevent`` of the
    phone's shell goes through the one instance. ``devices``: a profile's (default: the simulated
    phone's own, without the touchscreen when ``touchscreen`` is false)."""

    def __init__(self, phone: "PhoneAPI", touchscreen: bool = True,
                 on_gesture: Callable[[list[tuple[int, int]], int], object] | None = None,
                 devices: list[InputDevice] | None = None):
        from harness.sim.u2 import TouchTracker  # the gesture rules shared with `input` and uiautomator

        self.phone = phone
        self.devices = devices if devices is not None else standard_devices(touchscreen)
        self._lock = threading.Lock()
        self._readers: list[queue.Queue[Event]] = []
        self._epoch = time.monotonic() - BOOT_UPTIME_S
        dispatch = on_gesture or TouchTracker(phone).gesture
        self.touches = {d.path: TouchReader(d, lambda: phone.size, dispatch) for d in touches_the_screen(self.devices)}
        self.touch = next(iter(self.touches.values()), None)

    def now(self) -> float:
        return time.monotonic() - self._epoch

    def device(self, path: str) -> InputDevice | None:
        return next((d for d in self.devices if d.path == path), None)

    def write(self, path: str, ev_type: int, code: int, value: int) -> None:
        """One ``struct input_event`` written to ``path`` (what sendevent does). Raises
        FileNotFoundError for a device that does not exist."""
        dev = self.device(path)
        if dev is None:
            raise FileNotFoundError(path)
        with self._lock:
            if ev_type == C.EV_SYN and code == C.SYN_REPORT:
                if not dev.pending:
                    dev.contacts()  # nothing reached the handlers; a type-A device's reports end here
                    return
                frame, dev.pending = dev.pending, []
                t = self.now()
                reader = self.touches.get(path)
                if reader is not None:
                    reader.frame(t)
                else:
                    dev.contacts()
                events = [Event(t, path, *e) for e in frame] + [Event(t, path, C.EV_SYN, C.SYN_REPORT, 0)]
                for q in self._readers:
                    for e in events:
                        q.put(e)
                released = [c for ty, c, v in frame if ty == C.EV_KEY and v == 0 and c in ANDROID_KEYS]
            else:
                dev.pending.extend(dev.filter(ev_type, code, value))
                return
        for c in released:  # outside the kernel's lock: the phone takes its own
            self.phone.keyevent(ANDROID_KEYS[c])

    def open_reader(self) -> queue.Queue[Event]:
        q: queue.Queue[Event] = queue.Queue()
        with self._lock:
            self._readers.append(q)
        return q

    def close_reader(self, q: queue.Queue[Event]) -> None:
        with self._lock:
            if q in self._readers:
                self._readers.remove(q)


# --- getevent's output (AOSP toolbox getevent.c) -----------------------------------------------

def format_event(e: Event, *, labels: bool, timestamps: bool, with_device: bool,
                 device: InputDevice | None = None) -> str:
    out = ""
    if timestamps:
        sec, usec = divmod(int(round(e.time * 1e6)), 1_000_000)
        out += f"[{sec:8d}.{usec:06d}] "
    if with_device:
        out += f"{e.device}: "
    if not labels:
        return out + f"{e.type:04x} {e.code:04x} {e.value & 0xFFFFFFFF:08x}"
    t = C.EV_NAMES.get(e.type)
    code = device.label(e.type, e.code) if device is not None else C.code_name(e.type, e.code)
    val = C.value_name(e.type, e.code, e.value)
    out += f"{t:<12.12s}" if t else f"{e.type:04x}        "
    out += f" {code:<20.20s}" if code else f" {e.code:04x}                "
    out += f" {val:<20.20s}" if val else f" {e.value & 0xFFFFFFFF:08x}            "
    return out


def format_capabilities(dev: InputDevice, *, labels: bool) -> list[str]:
    """The ``events:`` and ``input props:`` blocks of ``getevent -p``."""
    lines = ["  events:"]
    for ev_type, codes in sorted(dev.capabilities().items()):
        text = f"    {C.EV_SHORT.get(ev_type, f'{ev_type:04x}')} ({ev_type:04x}):"
        for i, code in enumerate(codes):
            if i and ((i & (0x3 if labels else 0x7)) == 0 or ev_type == C.EV_ABS):
                text += "\n               "
            down = "*" if ev_type == C.EV_KEY and code in dev.keys_down else " "
            name = dev.label(ev_type, code) if labels else None
            if name:
                # getevent.c: " %.20s%c%*s" with 20 - strlen(label): a longer label's negative
                # width pads it on the left-justified side all the same
                pad = dev.pads.get((ev_type, code), abs(20 - len(name)))
                text += f" {name[:20]}{down}{'':{pad}}"
            elif labels:
                text += f" {code:04x}{down}                "
            else:
                text += f" {code:04x}{down}"
            if ev_type == C.EV_ABS:
                a = dev.abs[code]
                text += (f" : value {dev.abs_value(code)}, min {a.minimum}, max {a.maximum}, fuzz {a.fuzz}, "
                         f"flat {a.flat}, resolution {a.resolution}")
        lines.extend(text.split("\n"))
    lines.append("  input props:")
    lines.extend(f"    {C.PROP_NAMES.get(p, f'{p:04x}')}" for p in dev.props)
    if not dev.props:
        lines.append("    <none>")
    return lines
