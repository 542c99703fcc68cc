"""The simulated phone's screen power and lock screen.

A phone is awake or asleep (``dumpsys power``: ``mWakefulness``); its lock is ``none``, ``swipe``
(opens with an upward swipe or ``wm dismiss-keyguard``) or ``pin`` (a secure lock: only the PIN
opens it). Going to sleep locks a phone that has a lock, as Android does. What the phone shows and
what input does follow: asleep, the screen is black and only the power and wake-up keys act; locked,
the lock screen covers every app and takes the input (``dumpsys window policy`` reports it in the
KeyguardServiceDelegate block: ``showing=``, ``secure=``).
"""

from __future__ import annotations

from harness.sim import ui
from harness.sim.app_host import AppHost
from harness.sim.system_ui import SYSTEMUI
from harness.sim.ui import Node

LOCK_MODES = ("none", "swipe", "pin")


class Keyguard:
    def __init__(self, mode: str = "none", pin: str = "1234"):
        if mode not in LOCK_MODES:
            raise ValueError(f"lock must be one of {', '.join(LOCK_MODES)}, got {mode!r}")
        self.mode = mode
        self.pin = pin
        self.awake = True
        self.showing = mode != "none"
        self.entry = ""

    @property
    def secure(self) -> bool:
        return self.mode == "pin"

    def set_mode(self, mode: str, showing: bool | None = None) -> None:
        if mode not in LOCK_MODES:
            raise ValueError(f"lock must be one of {', '.join(LOCK_MODES)}, got {mode!r}")
        self.mode = mode
        self.showing = (mode != "none") if showing is None else (showing and mode != "none")
        self.entry = ""

    def sleep(self) -> None:
        self.awake = False
        self.entry = ""
        if self.mode != "none":
            self.showing = True

    def wake(self) -> None:
        self.awake = True

    def dismiss(self) -> bool:
        """``wm dismiss-keyguard``: opens a lock that needs no secret."""
        if self.showing and not self.secure:
            self.showing = False
        return not self.showing

    def swipe_up(self) -> None:
        if self.mode == "swipe":
            self.showing = False

    def type(self, text: str) -> None:
        if self.secure:
            self.entry += "".join(ch for ch in text if ch.isdigit())[:16]

    def key(self, name: str) -> None:
        """A key while the lock screen shows (names as harness.sim.phone_input.KEYCODES)."""
        if name == "ENTER":
            if self.secure and self.entry == self.pin:
                self.showing = False
            self.entry = ""
        elif name in ("DEL", "FORWARD_DEL"):
            self.entry = self.entry[:-1]
        elif len(name) == 1 and name.isdigit():
            self.type(name)

    # --- what it shows ------------------------------------------------------------------------
    def build(self, phone: AppHost, root: Node, status_h: int) -> None:
        """The lock screen's content under the status bar: the clock, and a swipe hint or a PIN pad."""
        w, h = phone.size
        dp = phone.dp
        zh = phone.locale == "zh"
        clock = phone.by_key.get("clock")
        now = clock.state.get("now", "09:41") if clock else "09:41"
        top = status_h + int(90 * dp)
        root.children.append(Node((0, top, w, top + int(96 * dp)), cls="android.widget.TextView", text=now,
                                  rid=f"{SYSTEMUI}:id/keyguard_clock", package=SYSTEMUI, paint="label",
                                  style={"size": 64, "color": ui.TEXT, "align": "center"}))
        hint_y = top + int(120 * dp)
        if not self.secure:
            text = "向上滑动即可解锁" if zh else "Swipe up to open"
            root.children.append(Node((0, h - int(160 * dp), w, h - int(120 * dp)), cls="android.widget.TextView",
                                      text=text, rid=f"{SYSTEMUI}:id/keyguard_indication_text", package=SYSTEMUI,
                                      paint="label", style={"size": 16, "color": ui.TEXT_2, "align": "center"}))
            return
        text = "输入 PIN 码" if zh else "Enter PIN"
        root.children.append(Node((0, hint_y, w, hint_y + int(32 * dp)), cls="android.widget.TextView", text=text,
                                  rid=f"{SYSTEMUI}:id/keyguard_message_area", package=SYSTEMUI, paint="label",
                                  style={"size": 18, "color": ui.TEXT, "align": "center"}))
        dots = "•" * len(self.entry)
        root.children.append(Node((0, hint_y + int(40 * dp), w, hint_y + int(80 * dp)), cls="android.widget.EditText",
                                  text=dots, rid=f"{SYSTEMUI}:id/pinEntry", package=SYSTEMUI, password=True,
                                  paint="label", style={"size": 24, "color": ui.TEXT, "align": "center"}))
        key = int(72 * dp)
        x0 = (w - 3 * key) // 2
        y0 = hint_y + int(100 * dp)
        labels = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "⌫", "0", "⏎"]
        for i, label in enumerate(labels):
            r, c = divmod(i, 3)
            x, y = x0 + c * key, y0 + r * key
            name = {"⌫": "DEL", "⏎": "ENTER"}.get(label, label)
            root.children.append(Node((x, y, x + key, y + key), cls="android.widget.Button", text=label,
                                      desc={"DEL": "Delete", "ENTER": "Enter"}.get(name, label),
                                      rid=f"{SYSTEMUI}:id/key{name.lower()}", package=SYSTEMUI, clickable=True,
                                      on_click=lambda n=name: self.key(n), paint="key", style={"label": label}))
