"""From gestures and the screens around them to reference steps.

``StepBuilder`` is fed, in order, the screen before the first gesture, every gesture the phone's
touchscreen and keys reported, and every screen captured after a gesture. It turns them into
unified actions with node targets:

* a tap, long press or swipe outside the keyboard becomes ``click``/``long_press``/``swipe``
  aimed at the node under the finger in the screen captured before it (``harness.recorder.targets``);
  with no node to name it keeps its pixels (and says the step replays only at this size);
* a tap on the navigation bar's Back, Home or Overview button, or a press of a hardware Back /
  Home / App-switch key, becomes ``key``;
* taps on the keyboard become typing: one ``type`` with the text the focused field gained (read
  from the screen, never guessed from key positions), ``submit: true`` when Enter ended it, and a
  ``key delete`` for each character of the field's earlier text that was deleted. Enter alone is
  ``key enter``. Typing ends at Enter or at the first gesture off the keyboard. An empty field
  shows its hint as its text, so earlier text counts as deleted only when Delete taps could reach
  it: tapped while the field showed a prefix of it, not after letters that left the field as it
  was (a pinyin syllable being composed, whose Delete taps remove letters of the syllable).

The keyboard is found in the screen's accessibility tree: the nodes of the current input method's
package. Its keys are identified by their names when the keyboard exposes them (the simulated one
does); otherwise the recorder cannot tell Enter or Delete from a letter, and typing ends only at a
gesture off the keyboard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.core.actions import Action, Click, Key, LongPress, Swipe, TypeText
from harness.core.hierarchy import Element
from harness.recorder.evdev import UNPLACED, Gesture, KeyPress, Touch, classify
from harness.recorder.targets import element_at, selector_for, swipe_target
from harness.core import input_codes as C

SYSTEMUI = "com.android.systemui"
# navigation-bar buttons (AOSP SystemUI's ids; the simulated phone's overview id is app_switch)
NAV_KEYS = {"back": "back", "home": "home", "recent_apps": "app_switch", "app_switch": "app_switch"}
# a phone's Home key is KEY_HOMEPAGE (AOSP Generic.kl: key 172 HOME) or KEY_HOME, which boards' own
# key layouts map to HOME (Rockchip's rk29-keypad.kl: key 102 HOME; the MK802's remote lists 0066) though
# Generic.kl maps a keyboard's 102 to MOVE_HOME
HW_KEYS = {C.KEY_BACK: "back", C.KEY_HOMEPAGE: "home", C.KEY_HOME: "home", C.KEY_APPSELECT: "app_switch"}
LONG_PRESS_MS = 400  # ViewConfiguration.DEFAULT_LONG_PRESS_TIMEOUT (400 ms since Android 12)
TOUCH_SLOP_DP = 8    # ViewConfiguration.TOUCH_SLOP


@dataclass
class Screen:
    """One capture of the phone: screenshot, accessibility tree and where the phone was."""

    png: bytes
    xml: str
    elements: list[Element]
    page: str                       # package/activity, or the simulated phone's app/page (+ dialog)
    state: dict[str, Any] | None    # the simulated phone's state, None on a real phone
    valid: bool = True              # no touch began while it was captured
    rel: str | None = None          # its file in the run folder, once written

    def focused_field(self) -> Element | None:
        fields = [e for e in self.elements if e.focused and "EditText" in e.cls]
        return fields[0] if fields else None

    def keyboard(self, ime_packages: set[str]) -> tuple[int, int, int, int] | None:
        boxes = [e.bounds for e in self.elements if e.package in ime_packages and e.area > 0]
        if not boxes:
            return None
        return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))

    def title(self) -> str | None:
        """The first short text at the top of the app (its app bar title, usually)."""
        texts = [e for e in self.elements if e.text and e.package not in (SYSTEMUI,) and len(e.text) <= 40
                 and "EditText" not in e.cls and any(ch.isalnum() for ch in e.text)]
        texts.sort(key=lambda e: (e.clickable, e.bounds[1], e.bounds[0]))
        return texts[0].text if texts else None


@dataclass
class Step:
    action: Action | None           # what the finger did, in this screen's pixels; None: a touch that
                                    # could not be placed (its warning says why): no reference step
    ref: dict[str, Any]             # the reference step (with a target where one was found)
    before: Screen
    after: Screen | None = None
    gesture: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# keys that change the keyboard and type nothing (the simulated keyboard's names for them)
LAYOUT_KEYS = {"Shift", "Language", "Symbols", "Letters", "More symbols"}


@dataclass
class _Typing:
    before: Screen
    field: Element | None
    initial: str
    keys: int = 0
    deletes: int = 0
    identified: bool = True
    start: float = 0.0
    end: float = 0.0
    # Delete taps that can have removed a character of ``initial``: tapped while the field showed
    # a prefix of it with no key that may type tapped since the field was last seen to change
    initial_deletes: int = 0
    seen: str = ""      # the field's text when last seen changed (by a key's screen)
    pending: int = 0    # keys that may type (or compose) tapped since then


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


class StepBuilder:
    def __init__(self, ime_packages: set[str], density: int, size: tuple[int, int]):
        self.ime = set(ime_packages)
        self.slop = max(1, round(TOUCH_SLOP_DP * density / 160))
        self.size = size
        self.latest: Screen | None = None
        self.steps: list[Step] = []      # every step, in order
        self.waiting: list[Step] = []    # steps whose after-screen is not captured yet
        self.ready: list[Step] = []      # steps with their after-screen, not yet handed out
        self.typing: _Typing | None = None
        self.warnings: list[str] = []

    # --- feeding ----------------------------------------------------------------------------------
    def start(self, screen: Screen) -> None:
        self.latest = screen

    def capture(self, screen: Screen) -> list[Step]:
        """A screen captured after the gestures so far; returns the steps it completes."""
        self.latest = screen
        for s in self.waiting:
            s.after = screen
        return self._complete()

    def glimpse(self, screen: Screen) -> None:
        """A look at the tree between key taps: the next key's screen, completing no step."""
        self.latest = screen

    def _complete(self) -> list[Step]:
        done = sorted(self.ready + self.waiting, key=self.steps.index)
        self.ready, self.waiting = [], []
        return done

    def gesture(self, g: Gesture) -> None:
        before = self.latest
        assert before is not None, "start() first"
        if isinstance(g, KeyPress):
            key = HW_KEYS.get(g.code)
            if key is None:
                self._warn(f"the {g.name} key was pressed; it is not a step (only Back, Home and App switch are)")
                return
            self._end_typing(before)
            self._emit(Key(key=key), {"type": "key", "key": key}, before, {"kind": "hardware_key", "key": g.name})
            return
        if not g.points:  # nothing of where it was could be read: a step that says so, never (0, 0)
            self._end_typing(before)
            self._emit(None, {}, before, {"kind": "unplaced", "duration_ms": g.duration_ms},
                       f"the touch could not be placed: {UNPLACED}")
            return
        kind = classify(g, self.slop, LONG_PRESS_MS)
        x, y = g.points[0]
        info = {"kind": kind, "point": [x, y], "duration_ms": g.duration_ms}
        if g.unplaced:
            self._warn(f"a touch's start could not be read ({UNPLACED}); it is read from where it first moved, "
                       f"({x}, {y})")
        if kind == "multi":
            self._warn(f"a {g.contacts}-finger gesture at ({x}, {y}) is not a step (pinch and rotate are not recorded)")
            return
        box = before.keyboard(self.ime)
        # a press on the keyboard is a key however long it was held: a key held past the long-press
        # timeout still types (the field says what), and a tap's touch can reach the kernel that late
        # on a loaded phone; read as a long press on a key's pixels it split the typing around it
        if kind in ("tap", "long_press") and box is not None and box[0] <= x < box[2] and box[1] <= y < box[3]:
            self._key_tap(before, x, y, g)
            return
        self._end_typing(before)
        if kind == "swipe":
            end = g.points[-1]
            action: Action = Swipe(start=(x, y), end=end, duration_ms=max(1, g.duration_ms))
            info.update(end=list(end))
            aimed = swipe_target(before.elements, (x, y), end)
            ref = {"type": "swipe", **aimed, "duration_ms": action.duration_ms} if aimed else action.to_json()
            self._emit(action, ref, before, info, None if aimed else "no scrollable node under the swipe")
            return
        node = element_at(before.elements, x, y, "click" if kind == "tap" else kind)
        if node is not None and node.package == SYSTEMUI and NAV_KEYS.get(node.short_rid):
            key = NAV_KEYS[node.short_rid]
            self._emit(Key(key=key), {"type": "key", "key": key}, before, {**info, "kind": "nav_" + key})
            return
        action = Click(x=x, y=y) if kind == "tap" else LongPress(x=x, y=y, duration_ms=g.duration_ms)
        sel = selector_for(before.elements, node, x, y) if node is not None else None
        ref = ({"type": action.type, "target": sel} if sel else action.to_json())
        if sel and kind == "long_press":
            ref["duration_ms"] = g.duration_ms
        self._emit(action, ref, before, info, None if sel else "no named node under the finger")

    def finish(self, final: Screen | None) -> list[Step]:
        """End of the recording: close typing with the last screen; returns the steps still
        waiting for their after-screen (given ``final``, or left without one)."""
        last = final or self.latest
        if last is not None:
            self._end_typing(last)
        for s in self.waiting:
            s.after = final
        return self._complete()

    # --- typing -----------------------------------------------------------------------------------
    def _key_tap(self, before: Screen, x: int, y: int, g: Touch) -> None:
        key = element_at(before.elements, x, y)
        name = (key.desc or key.text) if key is not None and key.package in self.ime else None
        f = before.focused_field()
        if self.typing is None:
            # a keyboard that names its keys in the tree lets Delete and Enter be told apart
            named = any(e.package in self.ime and e.desc for e in before.elements)
            initial = f.text if f is not None else ""
            self.typing = _Typing(before, f, initial, identified=named, start=g.start, seen=initial)
        t = self.typing
        t.keys += 1
        t.end = g.end
        shown = f.text if f is not None else t.seen
        if shown != t.seen:  # the field changed since it was last seen: every key before is in it
            t.seen, t.pending = shown, 0
        if name == "Delete":
            t.deletes += 1
            # a Delete reaches the field's earlier text only once what was typed after it is gone;
            # a Delete after letters that did not change the field (a pinyin syllable being
            # composed) or after keys not yet seen to land removes those, not the earlier text
            if t.pending == 0 and t.initial.startswith(shown):
                t.initial_deletes += 1
        elif name is not None and name not in LAYOUT_KEYS:
            t.pending += 1
        if name == "Enter":
            self._end_typing(before, submit=True)

    def _end_typing(self, now: Screen, submit: bool = False) -> None:
        """Close the typing session with ``now``, the screen after its last key (before Enter)."""
        t, self.typing = self.typing, None
        if t is None:
            return
        notes: list[str] = []
        f = now.focused_field()
        if f is None:
            notes.append("no focused text field after typing; the typed text could not be read")
        elif not now.valid:
            notes.append("the screen after typing was captured while the next touch began; the text may be incomplete")
        text = f.text if f is not None else t.initial
        if f is not None and f.rid and t.field is not None and t.field.rid and f.rid != t.field.rid:
            notes.append(f"focus moved from {t.field.short_rid} to {f.short_rid} while typing")
        keep = _common_prefix(t.initial, text)
        removed = len(t.initial) - keep
        # the earlier text was deleted from when enough Delete taps could reach it, or when part
        # of it stayed (a hint goes whole) and there were Delete taps enough (keys tapped faster
        # than the field was looked at leave ``initial_deletes`` short)
        deleted = removed <= t.initial_deletes or (keep > 0 and removed <= t.deletes)
        if removed and t.identified and not deleted:
            # what the field showed first was its hint (an empty field shows its hint as its text)
            keep, removed = 0, 0
        elif removed and not t.identified:
            if t.initial:
                notes.append(f"the field showed {t.initial!r} before typing (a hint, or text replaced); "
                             "recorded as typing the whole new text")
            keep, removed = 0, 0
        typed = text[keep:]
        info = {"kind": "typing", "keys": t.keys, "deletes": t.deletes, "field": t.field.short_rid if t.field else None,
                "text_before": t.initial, "text_after": text, "duration_ms": int(round((t.end - t.start) * 1000))}
        # typing ended by a gesture off the keyboard: ``now`` is the screen after it; ended by
        # Enter: the screen after Enter is the next capture
        after = None if submit else now
        for _ in range(removed):
            self._emit(Key(key="delete"), {"type": "key", "key": "delete"}, t.before, info, after=after)
        if typed:
            action = TypeText(text=typed, submit=submit)
            ref: dict[str, Any] = {"type": "type", "text": typed}
            if submit:
                ref["submit"] = True
            self._emit(action, ref, t.before, info, *notes, after=after)
        elif submit:
            self._emit(Key(key="enter"), {"type": "key", "key": "enter"}, t.before, info, *notes)
        elif not removed:
            self._warn(f"{t.keys} keyboard tap(s) changed no text; not a step")

    # --- output -----------------------------------------------------------------------------------
    def _emit(self, action: Action | None, ref: dict[str, Any], before: Screen, gesture: dict[str, Any],
              *notes: str | None, after: Screen | None = None) -> None:
        step = Step(action, ref, before, after, gesture=dict(gesture), warnings=[n for n in notes if n])
        if action is not None and "target" not in ref and action.type in ("click", "long_press", "swipe"):
            step.warnings.append(f"kept as pixels: replays only at {self.size[0]}x{self.size[1]}")
        self.steps.append(step)
        if after is None:
            self.waiting.append(step)
        else:
            self.ready.append(step)

    def _warn(self, message: str) -> None:
        self.warnings.append(f"after step {len(self.steps)}: {message}")
