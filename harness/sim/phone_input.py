"""The simulated phone's input dispatch: taps (with Android's double-tap rule), long presses, swipes,
keys and typed text, each reaching the view under it or the focused field.

:class:`PhoneInput` is a part of :class:`harness.sim.phone.SimPhone` (its methods run on the phone,
which holds the screen, the focus, the lock screen and the lock); the public ones are
:class:`harness.sim.phone_api.PhoneAPI`'s input methods, and :meth:`PhoneInput.press_key` and
:meth:`PhoneInput.type_text` are what the phone's own parts use (:class:`harness.sim.app_host.PhoneParts`).
"""

from __future__ import annotations

import time
from typing import Any

from harness.sim import system_ui
from harness.sim.system_ui import LAUNCHER
from harness.sim.ui import Node

# Android keycodes we act on (android.view.KeyEvent constants).
KEYCODES = {
    "HOME": 3, "BACK": 4, "DPAD_UP": 19, "DPAD_DOWN": 20, "POWER": 26, "SPACE": 62, "ENTER": 66,
    "DEL": 67, "MENU": 82, "SEARCH": 84, "APP_SWITCH": 187, "WAKEUP": 224, "FORWARD_DEL": 112,
    "TAB": 61, "ESCAPE": 111, "VOLUME_UP": 24, "VOLUME_DOWN": 25, "SLEEP": 223,
    "MOVE_HOME": 122, "MOVE_END": 123,
}
CODE_NAMES = {v: k for k, v in KEYCODES.items()}
# letters and digits: KEYCODE_A=29..Z=54, KEYCODE_0=7..9=16
for _i, _c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
    CODE_NAMES[29 + _i] = _c
for _i in range(10):
    CODE_NAMES[7 + _i] = str(_i)

# android.view.ViewConfiguration: a second touch 40-300 ms after the first, within 100 dp, is a double tap
DOUBLE_TAP_MIN_MS, DOUBLE_TAP_TIMEOUT_MS, DOUBLE_TAP_SLOP_DP = 40, 300, 100


class PhoneInput:
    """Input dispatch, mixed into :class:`harness.sim.phone.SimPhone`."""

    def _hit(self, x: int, y: int, attr: str) -> Node | None:
        """The topmost node at (x, y) with a handler ``attr``; a modal overlay blocks what is under it."""
        root = self.tree()
        found: list[Node | None] = [None]

        def visit(n: Node) -> bool:
            # children later in the list are drawn on top: search them first
            if not n.contains(x, y) and n.paint != "scrim":
                return False
            for c in reversed(n.children):
                if visit(c):
                    return True
            if n.paint == "scrim":
                return True  # modal: nothing under it gets the event
            if getattr(n, attr) is not None and n.enabled:
                found[0] = n
                return True
            return False

        for top in reversed(root.children):
            if visit(top):
                break
        return found[0]

    def tap(self, x: int, y: int) -> None:
        """One tap. On a view with a double-tap gesture, a tap that follows the previous one on that
        same view 40-300 ms later is the second tap of a double tap (Android's GestureDetector, which
        sees only the touches of its own view: DOUBLE_TAP_MIN_TIME 40 ms, DOUBLE_TAP_TIMEOUT 300 ms,
        DOUBLE_TAP_SLOP 100 dp; ViewConfiguration.java). Anywhere else two taps are two taps."""
        with self.lock:
            if not self.keyguard.awake:  # asleep: nothing to touch
                self.events.append({"type": "tap", "x": x, "y": y})
                return
            now = time.monotonic()
            target = self._double_tap_target(x, y)
            last, self._last_tap = self._last_tap, None
            if target is not None and last is not None and last[3] == target \
                    and DOUBLE_TAP_MIN_MS <= round((now - last[0]) * 1000, 6) <= DOUBLE_TAP_TIMEOUT_MS \
                    and (x - last[1]) ** 2 + (y - last[2]) ** 2 <= (DOUBLE_TAP_SLOP_DP * self.dp) ** 2:
                self._second_tap(x, y)  # a third tap then starts a new sequence
                return
            self._single_tap(x, y)
            if target is not None:
                self._last_tap = (now, x, y, target)

    def double_tap(self, x: int, y: int) -> None:
        """Both taps of a double tap as one gesture (in-process callers; over adb and uiautomator2 the
        two taps arrive separately and :meth:`tap` pairs them)."""
        with self.lock:
            self._last_tap = None
            if not self.keyguard.awake:  # asleep: two taps on nothing
                self.events += [{"type": "tap", "x": x, "y": y}, {"type": "tap", "x": x, "y": y}]
                return
            self._single_tap(x, y)
            if self._double_tap_target(x, y) is not None:
                self._second_tap(x, y)
            else:
                self._single_tap(x, y)

    def _double_tap_target(self, x: int, y: int) -> tuple[Any, ...] | None:
        """Which view with a double-tap gesture is under (x, y), as a comparable identity."""
        node = self._hit(x, y, "on_double_click")
        return None if node is None else (self.foreground, node.rid, node.desc, node.bounds)

    def _single_tap(self, x: int, y: int) -> None:
        self.events.append({"type": "tap", "x": x, "y": y})
        node = self._hit(x, y, "on_click")
        if node is not None:
            if node.on_click_at is not None:
                self._mutate(lambda: node.on_click_at(x, y))
            else:
                self._mutate(node.on_click)

    def _second_tap(self, x: int, y: int) -> None:
        node = self._hit(x, y, "on_double_click")
        self.events.append({"type": "tap", "x": x, "y": y, "double_tap": True})
        self._mutate(node.on_double_click)

    def long_press(self, x: int, y: int, duration_ms: int = 1000) -> None:
        with self.lock:
            self.events.append({"type": "long_press", "x": x, "y": y})
            node = self._hit(x, y, "on_long_click")
            if node is not None:
                self._mutate(node.on_long_click)
            elif duration_ms < 500:
                self.tap(x, y)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        with self.lock:
            self.events.append({"type": "swipe", "start": [x1, y1], "end": [x2, y2], "ms": duration_ms})
            dx, dy = x1 - x2, y1 - y2
            if not self.keyguard.awake:
                return
            if self.keyguard.showing and dy > 0.15 * self.height:
                self._mutate(self.keyguard.swipe_up)
                return
            if abs(dx) < 0.02 * self.width and abs(dy) < 0.02 * self.height:
                # a swipe that does not move is a tap (long if held), as on a touchscreen
                if duration_ms >= 500:
                    self.long_press(x1, y1, duration_ms)
                else:
                    self.tap(x1, y1)
                return
            node = self._hit(x1, y1, "on_scroll")
            if node is not None:
                self._mutate(lambda: node.on_scroll(dx, dy))

    def keyevent(self, key: str | int) -> bool:
        with self.lock:
            name = self._key_name(key)
            self.events.append({"type": "key", "key": name or str(key)})
            if name is None:
                return False
            self._mutate(lambda: self.press_key(name))
            return True

    def _key_name(self, key: str | int) -> str | None:
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            return CODE_NAMES.get(int(key), f"CODE_{int(key)}")
        name = key.upper().removeprefix("KEYCODE_")
        if name in KEYCODES or (len(name) == 1 and name.isalnum()):
            return name
        return None

    def press_key(self, name: str) -> None:
        """A key by its name (KEYCODES), the caller holding the lock (:meth:`keyevent` takes it)."""
        kg = self.keyguard
        if name in ("POWER", "WAKEUP", "SLEEP"):
            if name == "WAKEUP" or (name == "POWER" and not kg.awake):
                kg.wake()
            else:
                kg.sleep()
                self.clear_focus()
            return
        if not kg.awake:
            return
        if kg.showing:
            kg.key(name)
            return
        if name == "HOME":
            self.show_recents = False
            self.clear_focus()
            self.foreground = LAUNCHER
        elif name == "BACK":
            if self.anomalies.get("ad_open"):
                self.anomalies["ad_open"] = False
            elif self.anomalies.get("pending_permission") == self.foreground:
                system_ui.answer_permission(self, False)
            elif self.show_recents:
                self.show_recents = False
            elif self._keyboard_visible():
                self.clear_focus()
            else:
                app = self._app()
                if app is None or not app.back():
                    self.foreground = LAUNCHER
        elif name == "APP_SWITCH":
            self.clear_focus()
            self.show_recents = not self.show_recents
        elif name == "ENTER":
            node = self._focused_field()
            if node is not None and node.on_submit is not None:
                node.on_submit()
        elif name in ("DEL", "FORWARD_DEL"):
            node = self._focused_field()
            if node is not None and node.value:
                node.on_text("" if self.text_menu == self.focus_key else node.value[:-1])
            self.text_menu = None
        elif name == "SPACE":
            self.type_text(" ")
        elif len(name) == 1:
            self.type_text(name.lower())

    def _focused_field(self) -> Node | None:
        self.tree()
        return self._focused if self.focus_key is not None else None

    def type_text(self, text: str) -> None:
        """Text typed into the focused field (or the lock screen's PIN), the caller holding the lock."""
        if not self.keyguard.awake:
            return
        if self.keyguard.showing:
            self.keyguard.type(text)
            return
        node = self._focused_field()
        if node is None or node.on_text is None:
            return  # like Android: text with no focused field goes nowhere
        selected = self.text_menu == self.focus_key
        self.text_menu = None
        node.on_text(text if selected else node.value + text)  # typing over a selection replaces it

    def input_text(self, text: str) -> None:
        with self.lock:
            self.events.append({"type": "text", "text": text})
            self._mutate(lambda: self.type_text(text))
