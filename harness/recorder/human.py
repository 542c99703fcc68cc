"""``harness sim human``: a stand-in for a person doing a task's reference on a phone, with raw
touches on its touchscreen (``sendevent``), so ``harness record`` can be tested without hands.

It looks at the screen as a person would (the accessibility tree), finds each reference step's
target there, and touches it: a tap is a contact down and up in one frame sequence, a long press
holds the contact for its duration, a swipe moves it in small steps. Keys are buttons: Back, Home
and Overview on the navigation bar, Enter and Delete on the keyboard. ``open_app`` goes Home
(when the launcher is not showing) and taps the app's icon. ``type`` is tapped out on the on-screen
keyboard key by key: Shift for capitals, the symbol pages for digits and signs, and for Chinese
the pinyin of each character followed by a tap on the character in the candidate strip (paging
with ``›`` until it shows), switching between English and 中 with the globe key, as a person types.
It knows the simulated keyboard's layout (``harness.sim.keyboard``) and the readings of
characters (``harness.sim.pinyin``); it needs that keyboard on screen.

Pacing: a person waits for the recorder's cue before each step. With ``--follow`` it reads the
recorder's output on stdin (``harness record ... | harness sim human ... --follow``), passes it
through, and makes its next step only after a ``[ready] gestures=N`` line counts every touch it
has made; keys of one ``type`` step are tapped without waiting, as a person types (and before
Enter it waits, so the text is on screen when the recorder looks). Without ``--follow`` it pauses
``--pause`` seconds between steps.
"""

from __future__ import annotations

import re
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from harness.core import hierarchy
from harness.core import input_codes as C
from harness.core.actions import (NO_DEVICE_EFFECT, Action, Answer, Click, DoubleTap, Key, LongPress, OpenApp, Swipe, TypeText,
                                  Wait)
from harness.device.adb import AdbDevice
from harness.recorder.evdev import Touchscreen
from harness.sim import pinyin
from harness.sim.keyboard import COMMA, PERIOD, PKG as KEYBOARD_PKG, SYMBOL_ROWS
from harness.core.tasks import Task

NAV = {"back": "back", "home": "home", "app_switch": "app_switch"}
MODE_KEYS = {"Shift", "Language", "Symbols", "Letters", "More symbols", "Enter"}
READY = re.compile(r"^\[ready\] gestures=(\d+)")


class HumanError(RuntimeError):
    """A step the stand-in cannot do (its target is not on screen, a character the keyboard lacks)."""


class Cues:
    """``[ready] gestures=N`` lines from the recorder's output, passed through to ``echo``."""

    def __init__(self, stream: TextIO, echo: Callable[[str], None]):
        self.ready = -1
        self.closed = False
        self._cond = threading.Condition()
        self._stream, self._echo = stream, echo
        threading.Thread(target=self._read, name="cues", daemon=True).start()

    def _read(self) -> None:
        for line in self._stream:
            self._echo(line.rstrip("\n"))
            m = READY.match(line)
            if m:
                with self._cond:
                    self.ready = max(self.ready, int(m.group(1)))
                    self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def until_closed(self) -> None:
        """Wait until the recorder's output ends, every line passed through: its closing lines (the
        steps recorded, c, where the task and the trajectory went) come after the last gesture, once
        it stops (``--until-idle``, or Ctrl-C: the recorder then ends, and this wait with it)."""
        with self._cond:
            self._cond.wait_for(lambda: self.closed)

    def wait(self, gestures: int, timeout: float) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.ready >= gestures or self.closed, timeout):
                raise HumanError(f"the recorder gave no [ready] cue for {gestures} gesture(s) within {timeout:.0f} s")
            if self.ready < gestures:
                raise HumanError("the recorder's output ended before it was ready for the next step")


_LANDINGS: dict[str, int] = {}  # touches put down on each phone by this process (harness.recorder.human.Finger)


class Finger:
    """Contacts on a multi-touch touchscreen, written with sendevent in the protocol it speaks
    (the kernel's ``Documentation/input/multi-touch-protocol.rst``): type B (``ABS_MT_SLOT``) puts
    the contact in slot 0 with a new tracking id and lifts it with tracking id -1; type A (no slots)
    reports the whole contact in every frame, each contact closed by ``SYN_MT_REPORT``, and the lift
    is a frame without contacts (``BTN_TOUCH`` up, or an empty ``SYN_MT_REPORT`` where the device
    has no ``BTN_TOUCH``), as Cartucho's recording of a type A phone shows. Codes the device does not
    list are left out.

    A finger never lands on the same raw point twice running: every other touch on a phone is put
    down one raw unit further right and lower (inside the pixel aimed at where an axis has several
    units a pixel, the next pixel where it has one), as a person's touches always differ by a
    little. A type B kernel drops a position equal to the one its slot holds, and a reader that
    starts after the last touch lifted cannot know that one (the listing shows the axes' idle
    values): the recorder says such a touch could not be placed (harness.recorder.evdev), so a
    stand-in that made one would record a step that says so, not the task's."""

    def __init__(self, device: AdbDevice, screen: Touchscreen):
        self.device = device
        self.screen = screen
        self.path = screen.device.path
        self.type_a = screen.device.multitouch and not screen.device.slotted
        self.tracking = 0
        self.touches = 0
        self._offset = False

    def _ev(self, ev_type: int, code: int, value: int) -> str | None:
        if ev_type != C.EV_SYN and not self.screen.device.has(ev_type, code):
            return None
        return f"sendevent {shlex.quote(self.path)} {ev_type} {code} {value}"

    def _raw(self, x: int, y: int) -> tuple[int, int]:
        rx, ry = self.screen.to_raw(x, y)
        if self._offset:
            rx, ry = min(rx + 1, self.screen.x.maximum), min(ry + 1, self.screen.y.maximum)
        return rx, ry

    def _land(self) -> None:
        n = _LANDINGS.get(self.device.serial, 0)
        _LANDINGS[self.device.serial] = n + 1
        self._offset = n % 2 == 1

    def _contact(self, x: int, y: int) -> list[str | None]:
        """A type A frame's report of the one contact."""
        rx, ry = self._raw(x, y)
        return [self._ev(C.EV_ABS, C.ABS_MT_POSITION_X, rx), self._ev(C.EV_ABS, C.ABS_MT_POSITION_Y, ry),
                self._ev(C.EV_ABS, C.ABS_MT_TOUCH_MAJOR, 6), self._ev(C.EV_ABS, C.ABS_MT_WIDTH_MAJOR, 6),
                self._ev(C.EV_ABS, C.ABS_MT_PRESSURE, 48), self._ev(C.EV_ABS, C.ABS_MT_TRACKING_ID, 0),
                self._ev(C.EV_SYN, C.SYN_MT_REPORT, 0)]

    def _down(self, x: int, y: int) -> list[str | None]:
        self._land()
        if self.type_a:
            return [self._ev(C.EV_KEY, C.BTN_TOUCH, 1), *self._contact(x, y), self._ev(C.EV_SYN, C.SYN_REPORT, 0)]
        rx, ry = self._raw(x, y)
        self.tracking = (self.tracking + 1) % 65536
        return [self._ev(C.EV_ABS, C.ABS_MT_SLOT, 0), self._ev(C.EV_ABS, C.ABS_MT_TRACKING_ID, self.tracking),
                self._ev(C.EV_ABS, C.ABS_MT_POSITION_X, rx), self._ev(C.EV_ABS, C.ABS_MT_POSITION_Y, ry),
                self._ev(C.EV_ABS, C.ABS_MT_TOUCH_MAJOR, 6), self._ev(C.EV_ABS, C.ABS_MT_PRESSURE, 48),
                self._ev(C.EV_KEY, C.BTN_TOUCH, 1), self._ev(C.EV_KEY, C.BTN_TOOL_FINGER, 1),
                self._ev(C.EV_SYN, C.SYN_REPORT, 0)]

    def _move(self, x: int, y: int) -> list[str | None]:
        if self.type_a:
            return [*self._contact(x, y), self._ev(C.EV_SYN, C.SYN_REPORT, 0)]
        rx, ry = self._raw(x, y)
        return [self._ev(C.EV_ABS, C.ABS_MT_POSITION_X, rx), self._ev(C.EV_ABS, C.ABS_MT_POSITION_Y, ry),
                self._ev(C.EV_SYN, C.SYN_REPORT, 0)]

    def _up(self) -> list[str | None]:
        if self.type_a:
            lift = (self._ev(C.EV_KEY, C.BTN_TOUCH, 0) if self.screen.device.has(C.EV_KEY, C.BTN_TOUCH)
                    else self._ev(C.EV_SYN, C.SYN_MT_REPORT, 0))
            return [lift, self._ev(C.EV_SYN, C.SYN_REPORT, 0)]
        return [self._ev(C.EV_ABS, C.ABS_MT_TRACKING_ID, -1), self._ev(C.EV_KEY, C.BTN_TOUCH, 0),
                self._ev(C.EV_KEY, C.BTN_TOOL_FINGER, 0), self._ev(C.EV_SYN, C.SYN_REPORT, 0)]

    def _run(self, parts: list[str | None]) -> None:
        script = " && ".join(p for p in parts if p)
        out = self.device.shell(["sh", "-c", script])
        if out.strip():
            raise HumanError(f"sendevent failed on {self.device.serial}: {out.strip()[:200]}")
        self.touches += 1

    def tap(self, x: int, y: int) -> None:
        self._run(self._down(x, y) + self._up())

    def long_press(self, x: int, y: int, duration_ms: int) -> None:
        self._run(self._down(x, y) + [f"sleep {duration_ms / 1000:.3f}"] + self._up())

    def swipe(self, start: tuple[int, int], end: tuple[int, int], duration_ms: int, moves: int = 8) -> None:
        parts = self._down(*start)
        pause = f"sleep {duration_ms / 1000 / moves:.3f}"
        for k in range(1, moves + 1):
            x = round(start[0] + (end[0] - start[0]) * k / moves)
            y = round(start[1] + (end[1] - start[1]) * k / moves)
            parts += [pause] + self._move(x, y)
        self._run(parts + self._up())


def _layout_of(ch: str, prefer: str) -> tuple[str, str] | None:
    """(language, layout) of the simulated keyboard that has a key for ``ch``, in the ``prefer``
    language when it has one."""
    for lang in sorted(("en", "zh"), key=lambda lang: lang != prefer):
        if ch in (COMMA[lang], PERIOD[lang]):
            return lang, "letters"
        for layout in ("symbols", "symbols2"):
            if any(ch in row for row in SYMBOL_ROWS[(lang, layout)]):
                return lang, layout
    return None


@dataclass
class HumanReport:
    task: str
    gestures: int = 0                # steps' gestures: what a recording of this should count as c
    touches: int = 0                 # raw touches (every key tap included)
    steps: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "gestures": self.gestures, "touches": self.touches, "steps": self.steps,
                "answer": self.answer}


class SimHuman:
    def __init__(self, device: AdbDevice, screen: Touchscreen, *, cues: Cues | None = None, pause: float = 1.0,
                 cue_timeout: float = 120.0, say: Callable[[str], None] | None = None):
        self.device = device
        self.finger = Finger(device, screen)
        self.cues = cues
        self.pause = pause
        self.cue_timeout = cue_timeout
        self.say = say or (lambda m: print(m, file=sys.stderr, flush=True))
        self._kb: dict[str, hierarchy.Element] | None = None

    # --- looking at the screen --------------------------------------------------------------------
    def _look(self) -> list[hierarchy.Element]:
        return hierarchy.parse(self.device.hierarchy())

    def _settle(self) -> None:
        """Wait for the recorder's cue (or a person's pause) before the next step."""
        if self.cues is not None:
            self.cues.wait(self.finger.touches, self.cue_timeout)
        elif self.pause:
            time.sleep(self.pause)

    def _keys(self) -> dict[str, hierarchy.Element]:
        """The keyboard's keys by name, as last seen (a person does not re-read the keyboard
        before every key; they look again when they switch it)."""
        if self._kb is None:
            self._kb = {(e.desc or e.text): e for e in self._look()
                        if e.package == KEYBOARD_PKG and e.clickable and (e.desc or e.text)}
        return self._kb

    def _press(self, name: str) -> None:
        keys = self._keys()
        if name not in keys:
            raise HumanError(f"no {name!r} key on the keyboard (keys shown: {' '.join(sorted(keys))[:200]})")
        self.finger.tap(*keys[name].center)
        if name in MODE_KEYS or (len(name) == 1 and name.isupper()):
            self._kb = None  # the keyboard changed (layout, language, or Shift let go)

    # --- the keyboard -----------------------------------------------------------------------------
    def _mode(self) -> tuple[str, str]:
        keys = self._keys()
        lang = "zh" if "，" in keys else "en"
        if "a" in keys or "A" in keys:
            return lang, "letters"
        return lang, "symbols2" if "Symbols" in keys else "symbols"

    def _goto(self, lang: str, layout: str) -> None:
        if not self._keys():
            self._kb = None
            raise HumanError("no keyboard on screen to type on")
        for _ in range(6):
            now_lang, now_layout = self._mode()
            if (now_lang, now_layout) == (lang, layout):
                return
            if now_lang != lang:
                self._press("Language")
            elif layout == "letters":
                self._press("Letters")
            elif now_layout == "letters" or layout == "symbols":
                self._press("Symbols")
            else:
                self._press("More symbols")
        raise HumanError(f"could not switch the keyboard to {lang}/{layout}")

    def _han(self, ch: str) -> None:
        for syllable in pinyin.readings(ch):
            self._goto("zh", "letters")
            for letter in syllable:
                self._press(letter)
            for _ in range(60):
                els = self._look()
                found = [e for e in els if e.short_rid == "candidate" and e.text == ch]
                if found:
                    self.finger.tap(*found[0].center)
                    return
                more = [e for e in els if e.short_rid == "candidates_next"]
                shown = [e.text for e in els if e.short_rid == "candidate"]
                if not more or not shown:
                    break
                self.finger.tap(*more[0].center)
                if [e.text for e in self._look() if e.short_rid == "candidate"] == shown:
                    break  # the last page
            for _ in syllable:  # not this reading: delete what was composed
                self._press("Delete")
        raise HumanError(f"cannot type {ch!r}: no pinyin reading brings it up on the keyboard")

    def type_text(self, text: str) -> None:
        for ch in text:
            if "\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf":
                self._han(ch)
            elif ch == " ":
                self._press("Space")
            elif ch.isascii() and ch.isalpha():
                # a capital is Shift and the letter in either language; a small letter needs English
                self._goto("en" if ch.islower() else self._mode()[0], "letters")
                if ch.isupper():
                    self._press("Shift")
                self._press(ch)
            elif ch in ("\n", "\t"):
                raise HumanError(f"cannot type {ch!r} on the keyboard (a line break is the Enter key: a key step)")
            else:
                where = _layout_of(ch, self._mode()[0])
                if where is None:
                    raise HumanError(f"cannot type {ch!r}: the keyboard has no key for it")
                self._goto(*where)
                self._press(ch)

    # --- steps ------------------------------------------------------------------------------------
    def _nav(self, name: str) -> None:
        els = self._look()
        hit = [e for e in els if e.package == "com.android.systemui" and e.short_rid == NAV[name]]
        if not hit:
            raise HumanError(f"no {name} button on the navigation bar")
        self.finger.tap(*hit[0].center)

    def _open_app(self, app: str) -> int:
        state = self.device.state() or {}
        locale = state.get("device", {}).get("locale", "en")
        pkg = self.device.resolve_app(app)
        labels = [a for a in state.get("device", {}).get("apps", []) if a.get("package") == pkg]
        label = (labels[0].get("label_zh" if locale == "zh" else "label_en") if labels else None) or app
        gestures = 0
        if state.get("screen", {}).get("page") != "launcher/home":
            self._nav("home")
            gestures += 1
            self._settle()
        icons = [e for e in self._look() if e.text == label and e.clickable]
        if not icons:
            raise HumanError(f"open_app {app!r}: no {label!r} icon on the home screen")
        self.finger.tap(*icons[0].center)
        return gestures + 1

    def _clear_field(self) -> int:
        """Empty the focused field as a person does: its clear (x) button, or a long press that
        selects all its text (what is typed next replaces it). Returns the gestures made."""
        els = self._look()
        field = next((e for e in els if e.focused and "EditText" in e.cls), None)
        if field is None:
            raise HumanError("type with clear: no focused text field")
        if not field.text:
            return 0
        clear = [e for e in els if e.clickable and e.short_rid == f"{field.short_rid}_clear"]
        if clear:
            self.finger.tap(*clear[0].center)
        else:
            self.finger.long_press(*field.center, 800)
        self._kb = None
        self._settle()
        return 1

    def find(self, label: str) -> Click:
        """A tap on the element showing ``label`` (its text, else its description), as a person finds it."""
        els = [e for e in self._look() if e.area > 0 and label in (e.text, e.desc)]
        hit = [e for e in els if e.clickable] or els
        if not hit:
            raise HumanError(f"nothing on the screen shows {label!r}")
        x, y = hit[0].center
        return Click(x=x, y=y)

    def act(self, action: Action) -> int:
        """Do one action with a finger; returns how many gestures a recorder should count for it."""
        if isinstance(action, NO_DEVICE_EFFECT):
            return 0
        if isinstance(action, Wait):
            time.sleep(action.seconds)
            return 0
        if isinstance(action, OpenApp):
            return self._open_app(action.app)
        if isinstance(action, Key):
            if action.key in NAV:
                self._nav(str(action.key))
            elif action.key in ("enter", "delete"):
                self._kb = None
                self._press("Enter" if action.key == "enter" else "Delete")
            else:
                raise HumanError(f"key {action.key!r} has no button to press")
            return 1
        if isinstance(action, TypeText):
            made = self._clear_field() if action.clear else 0
            self._kb = None
            self.type_text(action.text)
            if action.submit:
                self._settle()  # let the recorder see the text before Enter takes it away
                self._press("Enter")
            return made + 1
        if isinstance(action, Click):
            self.finger.tap(action.x, action.y)
        elif isinstance(action, DoubleTap):
            self.finger.tap(action.x, action.y)
            self.finger.tap(action.x, action.y)
            return 2  # the recorder takes a double tap for two clicks
        elif isinstance(action, LongPress):
            self.finger.long_press(action.x, action.y, action.duration_ms)
        elif isinstance(action, Swipe):
            self.finger.swipe(action.start, action.end, action.duration_ms)
        else:  # pragma: no cover - the union is closed
            raise HumanError(f"{action.type} is not something a finger does")
        return 1

    def perform(self, task: Task) -> HumanReport:
        """Play the task's reference as the replay agent does (targets aimed on the screen, lists
        scrolled to ``scroll_to`` targets), each action done with a finger."""
        if task.reference is None:
            raise HumanError(f"task {task.id} has no reference to perform")
        report = HumanReport(task.id)
        player = hierarchy.ReferencePlayer(task.reference)
        size = self.device.screen_size()
        self._settle()  # the recorder's first cue: it is watching
        while not player.finished:
            play = player.next(self._look, size)
            if play.action is None:
                raise HumanError(f"{task.id}: {play.invalid}")
            if isinstance(play.action, Answer):
                report.answer = play.action.text
            try:
                g = self.act(play.action)
            except HumanError as e:
                raise HumanError(f"{task.id}: reference step {play.step} ({play.action.type}): {e}") from None
            report.gestures += g
            report.steps.append({"step": play.step, "type": play.action.type, "gestures": g,
                                 **({"seeking": play.seeking} if play.seeking else {})})
            if g:
                self.say(f"step {play.step}: {play.action.type}{' (' + play.seeking + ')' if play.seeking else ''} "
                         f"({g} gesture{'s' if g > 1 else ''})")
                self._settle()
        report.touches = self.finger.touches
        return report
