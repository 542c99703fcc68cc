"""Shared parsing of model outputs: clean-up of known failure shapes, a tolerant reader for
UI-TARS-style function calls, JSON extraction, coordinate checks, and the scroll geometry.

Every family module (uitars, m3a, qwen, vlm) exposes a pure ``parse_output(text, screen_size,
**opts) -> Action`` built on this module; it raises :class:`ParseError` (a ValueError) with a
message that says what was wrong. Agents turn a ParseError into a recorded invalid step; the
``harness agents parse`` command prints it as ``{"error": ...}``.

Known failure shapes handled here (FIELD_NOTES section 7; ``../shared/reference/model_outputs.jsonl``):

- special tokens leaked by servers that do not skip them (``<|box_start|>``, ``<|box_end|>``,
  ``<|im_end|>``, ``<|endoftext|>``) are removed;
- ``<think>...</think>`` blocks are removed (an unclosed one is unwrapped);
- a full-width colon after a label (``Action：``) becomes ``Action: ``;
- boxes where a point is expected (``<bbox>x1 y1 x2 y2</bbox>``, ``[x1, y1, x2, y2]``) become their
  centre point, with a note;
- two actions after one ``Action:`` (or two tool calls, or two JSON actions): the first is taken
  and the rest are reported in ``Parsed.notes``;
- coordinates outside the protocol's range, or 0-1 fractions where pixels or the 0-1000 grid are
  expected, are refused (never clamped silently: a refused step is recorded, a wrong tap is not
  obviously wrong).

All conversions to device pixels go through :func:`harness.core.actions.to_device`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import ValidationError

from harness.core.actions import (Action, Answer, Click, CoordSpace, DoubleTap, Finish, Key, LongPress, NeedsUser, OpenApp,
                                  Swipe, TypeText, Wait, action_to_json, to_device)


class ParseError(ValueError):
    """A model output that does not hold a usable action; the message says why."""


def read_reply(parse: Callable[[str], "Parsed"], text: str) -> tuple["Parsed | None", "ParseError | None"]:
    """``parse(text)``, or the ParseError that says why the reply holds no usable action: one the
    parser raised, or a value an action refuses (an answer or a typed text over
    harness.core.actions.MAX_TEXT, a wait over 60 s...), which is the model's mistake too, an invalid
    step, never an error ending the episode."""
    try:
        return parse(text), None
    except ParseError as e:
        return None, e
    except ValidationError as e:
        fields = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        return None, ParseError(f"{e.title.lower()}: {fields}")


@dataclass(frozen=True)
class ElementAction:
    """An action on an element of the screen's list (an M3A index) read without that list, as
    ``harness agents parse --agent m3a`` does when no ``--hierarchy`` is given: what the model asked
    for (``type`` is the unified action it becomes), not yet a point on a screen. Agents always have
    the list, so they never produce one."""

    type: str                      # click, long_press, double_tap or swipe
    index: int
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "index": self.index, **self.extra, "resolved": False}


@dataclass
class Parsed:
    """The result of parsing one output: the unified action(s) in device pixels, the model's own
    action before conversion (``raw``), its thought, and notes on every repair that was made.

    ``actions`` has more than one element when one model action is two device actions (UI-TARS
    ``finished(content=...)`` is an Answer then a Finish; M3A ``input_text`` on an element is a tap
    on it then the typing)."""

    actions: list[Action | ElementAction]
    raw: dict[str, Any]
    thought: str | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        # a call for help without words of its own (UI-TARS ``call_user()``) asks what its thought says
        if self.thought and any(isinstance(a, NeedsUser) and not a.text for a in self.actions):
            self.actions = [NeedsUser(text=self.thought.strip()[:10_000]) if isinstance(a, NeedsUser) and not a.text
                            else a for a in self.actions]

    @property
    def action(self) -> Action:
        return self.actions[0]

    def to_json(self) -> dict[str, Any]:
        return {"actions": [a.to_json() for a in self.actions], "raw": self.raw, "thought": self.thought,
                "notes": list(self.notes)}


# --- text clean-up --------------------------------------------------------------------------------
_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>")
_THINK = re.compile(r"<think>.*?</think>", re.S)
_FULLWIDTH_LABEL = re.compile(r"\b(Action|Thought|Reason|Reflection|Summary|Action_Summary)\s*：\s*")
_TIGHT_LABEL = re.compile(r"\b(Action|Thought|Reason):(?=\S)")


def clean_text(text: Any) -> tuple[str, list[str]]:
    """Remove what servers and models add around an answer; return the text and what was done."""
    if not isinstance(text, str):
        raise ParseError(f"the output is not text (got {type(text).__name__})")
    notes: list[str] = []
    t = text.replace("\r\n", "\n")
    if _THINK.search(t):
        t = _THINK.sub("", t)
        notes.append("removed a <think> block")
    if "</think>" in t:  # the opening tag was eaten by the chat template
        t = t.rsplit("</think>", 1)[1]
        notes.append("removed reasoning before a lone </think>")
    if "<think>" in t:
        t = t.replace("<think>", "")
        notes.append("unwrapped an unclosed <think>")
    tokens = sorted(set(_SPECIAL.findall(t)))
    if tokens:
        t = _SPECIAL.sub("", t)
        notes.append("removed special tokens " + " ".join(tokens))
    if "[EOS]" in t:
        t = t.replace("[EOS]", "")
        notes.append("removed [EOS]")
    if _FULLWIDTH_LABEL.search(t):
        t = _FULLWIDTH_LABEL.sub(lambda m: m.group(1) + ": ", t)
        notes.append("full-width colon after a label")
    t = _TIGHT_LABEL.sub(lambda m: m.group(1) + ": ", t)
    t = t.strip()
    if not t:
        raise ParseError("the output is empty")
    return t, notes


def with_tool_calls(text: str | None, tool_calls: list[dict[str, Any]] | None) -> str:
    """A reply's text with the tool calls a server returned the OpenAI way (``message.tool_calls``,
    parsed out of the model's text by vLLM's ``--tool-call-parser hermes`` or DashScope) written back
    as the hermes ``<tool_call>`` blocks the model produced, so one parser reads both forms. Each call
    is ``{"name", "arguments"}`` (or OpenAI's ``{"type": "function", "function": {...}}``);
    ``arguments`` stays as sent (a JSON string or an object)."""
    out = [text or ""]
    for tc in tool_calls or []:
        fn = tc.get("function", tc) if isinstance(tc, dict) else {}
        out.append("<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": fn.get("arguments")},
                                                 ensure_ascii=False) + "\n</tool_call>")
    return "\n".join(p for p in out if p)


# --- coordinates ------------------------------------------------------------------------------------
_NUM = re.compile(r"-?\d+(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    return [float(v) for v in _NUM.findall(text)]


def point_of(values: list[float] | str, what: str, notes: list[str]) -> tuple[float, float]:
    """A point from 2 numbers, or the centre of a box of 4 (noted)."""
    try:
        nums = numbers_in(values) if isinstance(values, str) else [float(v) for v in values]
    except OverflowError:  # a JSON integer of hundreds of digits: too large for a float
        raise ParseError(f"{what}: a coordinate is too large to be a point: {str(values)[:60]}...") from None
    if len(nums) == 2:
        return nums[0], nums[1]
    if len(nums) == 4:
        x1, y1, x2, y2 = nums
        notes.append(f"{what}: a box ({_fmt(x1)},{_fmt(y1)},{_fmt(x2)},{_fmt(y2)}) where a point was expected; "
                     "used its centre")
        return (x1 + x2) / 2, (y1 + y2) / 2
    shown = values if isinstance(values, str) else list(values)
    raise ParseError(f"{what} holds no point: {shown!r} (expected x,y)")


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


_SPACE_TEXT = {
    CoordSpace.PIXELS: "screen pixels",
    CoordSpace.RESIZED: "pixels of the resized screenshot",
    CoordSpace.THOUSAND: "the 0-1000 grid",
    CoordSpace.GRID_999: "the 0-999 grid",
    CoordSpace.UNIT: "0-1 fractions",
}


def space_limits(space: CoordSpace, screen: tuple[int, int], resized: tuple[int, int] | None) -> tuple[float, float]:
    """The largest x and y a model may give in ``space`` (inclusive: the far edge means the last pixel)."""
    if space is CoordSpace.PIXELS:
        return float(screen[0]), float(screen[1])
    if space is CoordSpace.RESIZED:
        if not resized:
            raise ParseError("resized coordinates need the resized image size")
        return float(resized[0]), float(resized[1])
    if space is CoordSpace.THOUSAND:
        return 1000.0, 1000.0
    if space is CoordSpace.GRID_999:
        return 1000.0, 1000.0  # 999 is the last cell; 1000 is accepted as the edge and clamped
    return 1.0, 1.0


def device_point(x: float, y: float, space: CoordSpace | str, screen: tuple[int, int],
                 resized: tuple[int, int] | None = None, what: str = "point") -> tuple[int, int]:
    """Check a model's point against its space's range, then map it to device pixels."""
    space = CoordSpace(space)
    mx, my = space_limits(space, screen, resized)
    if space is not CoordSpace.UNIT and max(mx, my) > 1.5 and 0 <= x <= 1 and 0 <= y <= 1 \
            and not (float(x).is_integer() and float(y).is_integer()):
        raise ParseError(f"{what} ({_fmt(x)}, {_fmt(y)}) looks like 0-1 fractions, but this protocol expects "
                         f"{_SPACE_TEXT[space]} (0-{_fmt(mx)} x 0-{_fmt(my)})")
    if not (0 <= x <= mx and 0 <= y <= my):
        raise ParseError(f"{what} ({_fmt(x)}, {_fmt(y)}) is out of range for {_SPACE_TEXT[space]} "
                         f"(0-{_fmt(mx)} x 0-{_fmt(my)})")
    return to_device(x, y, space, screen, resized)


# --- scroll and swipe geometry ---------------------------------------------------------------------
DIRECTIONS = ("up", "down", "left", "right")
_UNIT = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def direction_of(value: Any, what: str = "direction") -> str:
    d = str(value or "").strip().lower()
    if d not in DIRECTIONS:
        raise ParseError(f"{what} must be up, down, left or right, got {value!r}")
    return d


def _clamp(v: float, hi: int) -> int:
    return int(min(max(round(v), 0), hi - 1))


def finger_swipe(direction: str, screen: tuple[int, int], start: tuple[int, int] | None = None,
                 region: tuple[int, int, int, int] | None = None, duration_ms: int = 400) -> Swipe:
    """The finger moves towards ``direction`` (``up`` = from lower to higher on the screen), from
    ``start`` (default: the region's centre) by half the region (default: the whole screen)."""
    w, h = screen
    x1, y1, x2, y2 = region or (0, 0, w, h)
    x1, y1, x2, y2 = max(0, x1), max(0, y1), min(w, x2), min(h, y2)
    sx, sy = start if start is not None else ((x1 + x2) // 2, (y1 + y2) // 2)
    ux, uy = _UNIT[direction]
    ex = sx + ux * (x2 - x1) / 2
    ey = sy + uy * (y2 - y1) / 2
    return Swipe(start=(_clamp(sx, w), _clamp(sy, h)), end=(_clamp(ex, w), _clamp(ey, h)), duration_ms=duration_ms)


_OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}


def reveal_swipe(direction: str, screen: tuple[int, int], start: tuple[int, int] | None = None,
                 region: tuple[int, int, int, int] | None = None, duration_ms: int = 400) -> Swipe:
    """``scroll(direction)`` in the content sense: show what lies towards ``direction``. ``down``
    reveals what is below, so the finger moves up (AndroidWorld's ``scroll``, UI-TARS's
    ``scroll`` "show more information on the direction side")."""
    return finger_swipe(_OPPOSITE[direction], screen, start, region, duration_ms)


# --- keys and text ----------------------------------------------------------------------------------
# names models use for keys -> what harness.core.actions.Key accepts (a named key or an Android keycode)
_KEYS: dict[str, str | int] = {
    "back": "back", "home": "home", "enter": "enter", "return": "enter", "delete": "delete", "del": "delete",
    "backspace": "delete", "app_switch": "app_switch", "recent": "app_switch", "recents": "app_switch",
    "overview": "app_switch", "menu": 82, "volume_up": 24, "volume_down": 25, "power": 26, "camera": 27,
    "clear": 28, "tab": 61, "space": 62, "search": 84, "escape": 111, "esc": 111,
}


def key_action(name: Any, what: str = "key") -> Key:
    raw = str(name or "").strip()
    low = raw.lower().removeprefix("keycode_").replace(" ", "_")
    if low.isdigit():
        return Key(key=int(low))
    if low not in _KEYS:
        raise ParseError(f"{what}: unknown key {raw!r}")
    return Key(key=_KEYS[low])


def type_action(content: Any, what: str = "type") -> TypeText:
    """A trailing newline submits (UI-TARS's convention: ``type(content='...\\n')`` presses Enter)."""
    if not isinstance(content, str):
        raise ParseError(f"{what}: text must be a string, got {content!r}")
    submit = content.endswith("\n")
    return TypeText(text=content.rstrip("\n") if submit else content, submit=submit)


def type_text(text: str, *, submit: bool, clear: bool = False) -> TypeText:
    """Typing, clearing the field first when the family asked for it (AndroidWorld's ``clear_text``:
    the unified ``type`` action's ``clear``)."""
    return TypeText(text=text, submit=submit, clear=clear)


def answer_then_finish(content: Any) -> list[Action]:
    text = "" if content is None else str(content).strip()
    return [Answer(text=text), Finish(status="complete")] if text else [Finish(status="complete")]


# --- a tolerant reader for function-call actions: click(start_box='(x,y)') -------------------------
BOX_KEYS = ("start_box", "end_box", "point", "start_point", "end_point")
_CALL_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")
_COORD = re.compile(r"\s*(<point>[^<]*</point>|<bbox>[^<]*</bbox>|\([^()]*\)|\[[^\[\]]*\]"
                    r"|-?\d+(?:\.\d+)?(?:\s*[,\s]\s*-?\d+(?:\.\d+)?)+)\s*")
_TEXT_KEYS = ("content", "text", "app_name", "key")


@dataclass
class Call:
    name: str
    args: dict[str, str]
    end: int                 # index just after the call in the text it was read from
    notes: list[str]


def decode_escapes(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            out.append({"n": "\n", "t": "\t", "'": "'", '"': '"', "\\": "\\"}.get(n, c + n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def parse_call(text: str, pos: int = 0) -> Call:
    """Read ``name(key='value', ...)`` starting at ``pos``. Tolerates what real outputs do: quotes
    escaped as ``\\'`` (a log's repr), an unescaped apostrophe inside text, a missing closing quote
    or parenthesis (a truncated output), coordinates without quotes."""
    m = _CALL_NAME.match(text, pos)
    if not m:
        raise ParseError(f"expected a function call such as click(...), got {text[pos:pos + 40]!r}")
    name, i, n = m.group(1), m.end(), len(text)
    args: dict[str, str] = {}
    notes: list[str] = []
    while True:
        while i < n and text[i] in " \t\n,":
            i += 1
        if i >= n:
            notes.append(f"{name}(...) is not closed (truncated output?)")
            break
        if text[i] == ")":
            i += 1
            break
        km = _KEY.match(text, i)
        if not km:
            raise ParseError(f"cannot read the arguments of {name}(...) at {text[i:i + 30]!r}")
        key, i = km.group(1), km.end()
        quote = None
        if text.startswith("\\'", i) or text.startswith('\\"', i):
            quote = text[i:i + 2]
            notes.append(f"{key}: backslash-escaped quotes around the value")
        elif i < n and text[i] in "'\"":
            quote = text[i]
        if quote:
            i += len(quote)
        if key in BOX_KEYS:
            cm = _COORD.match(text, i)
            if cm:
                args[key] = cm.group(1)
                i = cm.end()
                if quote:
                    if text.startswith(quote, i):
                        i += len(quote)
                    else:
                        notes.append(f"{key}: closing quote missing")
                continue
        if quote:
            j, buf, closed = i, [], False
            while j < n:
                if len(quote) == 1 and text[j] == "\\" and j + 1 < n:
                    buf.append(text[j:j + 2])
                    j += 2
                    continue
                if text.startswith(quote, j):
                    after = text[j + len(quote):].lstrip(" \t")
                    # an apostrophe inside text ("it's") is not the closing quote
                    if key in _TEXT_KEYS and after and after[0] not in ",)" and not after.startswith("\n"):
                        buf.append(text[j:j + len(quote)])
                        j += len(quote)
                        continue
                    closed = True
                    break
                buf.append(text[j])
                j += 1
            value = "".join(buf)
            if closed:
                i = j + len(quote)
            else:
                notes.append(f"{key}: closing quote missing (truncated output?)")
                if value.rstrip().endswith(")"):
                    value = value.rstrip()[:-1]
                i = n
            args[key] = decode_escapes(value) if len(quote) == 1 else value
        else:
            j, depth = i, 0
            while j < n:
                c = text[j]
                if c in "([":
                    depth += 1
                elif c in ")]":
                    if depth == 0:
                        break
                    depth -= 1
                elif c == "," and depth == 0:
                    break
                j += 1
            args[key] = text[i:j].strip()
            i = j
    return Call(name=name, args=args, end=i, notes=notes)


def find_action_call(text: str, known: set[str]) -> tuple[int, str | None, list[str]]:
    """Where the action call starts: after the last ``Action:`` label followed by a call, else on
    the last line that starts with a known action name. Returns (position, thought, notes)."""
    notes: list[str] = []
    labels = list(re.finditer(r"Action:\s*", text))
    for lab in reversed(labels):
        if _CALL_NAME.match(text, lab.end()):
            return lab.end(), _thought_before(text[:lab.start()]), notes
    if labels:
        after = text[labels[-1].end():].strip().splitlines()
        shown = after[0][:60] if after else ""
        raise ParseError(f"the Action line holds no function call: {shown!r}")
    for mm in reversed(list(re.finditer(r"(?m)^[ \t]*([A-Za-z_][A-Za-z0-9_]*)\s*\(", text))):
        if mm.group(1) in known:
            notes.append("no 'Action:' label; used the bare call")
            return mm.start(), _thought_before(text[:mm.start()]), notes
    raise ParseError("no 'Action:' line in the output")


def _thought_before(prefix: str) -> str | None:
    t = prefix.strip()
    t = re.sub(r"^(Thought|Reason|Reflection|Action_Summary):\s*", "", t).strip()
    return t or None


def following_calls(text: str, end: int, known: set[str]) -> list[str]:
    """Other action calls after the first one (the "two actions after one Action:" shape)."""
    rest = text[end:]
    return [m.group(1) for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(", rest) if m.group(1) in known]


def map_tars_call(name: str, args: dict[str, str], point: Callable[[str], tuple[int, int]],
                  screen: tuple[int, int], notes: list[str]) -> list[Action]:
    """UI-TARS-style calls (also the ``vlm`` prompt's) -> unified actions. ``point(key)`` maps the
    ``start_box``/``end_box`` argument to device pixels."""
    if name in ("click", "left_single", "tap"):
        x, y = point("start_box")
        return [Click(x=x, y=y)]
    if name in ("long_press", "long_click"):
        x, y = point("start_box")
        ms = 1000
        t = args.get("time")
        if t not in (None, ""):
            try:
                ms = int(min(max(float(t), 0.1), 60.0) * 1000)
            except ValueError:
                raise ParseError(f"long_press: time must be seconds, got {t!r}") from None
        return [LongPress(x=x, y=y, duration_ms=ms)]
    if name in ("left_double", "double_tap", "double_click"):
        if name == "left_double":
            notes.append("left_double (the desktop's double click) done as a double tap")
        x, y = point("start_box")
        return [DoubleTap(x=x, y=y)]
    if name == "type":
        if "content" not in args:
            raise ParseError("type(...) has no content")
        return [type_action(args["content"])]
    if name == "scroll":
        if args.get("end_box"):  # UI-TARS v1's mobile scroll: two points, no direction: the finger's path
            if args.get("direction"):
                notes.append(f"scroll gave both an end point and direction={args['direction']!r}; followed the points")
            return [Swipe(start=point("start_box"), end=point("end_box"), duration_ms=600)]
        d = direction_of(args.get("direction"), "scroll direction")
        start = point("start_box") if args.get("start_box") else None
        return [reveal_swipe(d, screen, start=start)]
    if name in ("drag", "swipe"):
        if args.get("end_box"):
            s, e = point("start_box"), point("end_box")
            return [Swipe(start=s, end=e, duration_ms=600)]
        d = direction_of(args.get("direction"), f"{name} direction")
        return [finger_swipe(d, screen, start=point("start_box") if args.get("start_box") else None)]
    if name == "open_app":
        app = (args.get("app_name") or args.get("app") or "").strip()
        if not app:
            raise ParseError("open_app(...) has no app_name")
        return [OpenApp(app=app)]
    if name == "press_home":
        return [Key(key="home")]
    if name == "press_back":
        return [Key(key="back")]
    if name in ("press_enter", "enter"):
        return [Key(key="enter")]
    if name in ("hotkey", "press", "key"):
        return [key_action(args.get("key") or args.get("keys") or "", name)]
    if name == "wait":
        return [Wait(seconds=5.0)]
    if name == "finished":
        return answer_then_finish(args.get("content"))
    if name == "call_user":
        # UI-TARS's MOBILE_USE prompt: "call_user() # Submit the task and call the user when the task
        # is unsolvable, or when you need the user's help" (bytedance/UI-TARS codes/prompts.py @6b315cc):
        # the phone is handed to a person (with nobody watching the episode ends needs_user, not as a
        # failure); the question is the call's content if it has one, else the step's thought
        return [NeedsUser(text=(args.get("content") or "").strip())]
    raise ParseError(f"unknown action {name}(...)")


def quote_text(value: str) -> str:
    """The body of a single-quoted call argument (``\\``, ``'`` and line breaks escaped, as the
    prompts ask); :func:`parse_call` reads it back."""
    return value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def content_direction(swipe: Swipe) -> str:
    """The ``scroll(direction)`` word (the content direction) for a finger's swipe: the finger moving
    up shows what is below, ``down`` (the inverse of :func:`reveal_swipe`)."""
    dx, dy = swipe.end[0] - swipe.start[0], swipe.end[1] - swipe.start[1]
    finger = ("right" if dx > 0 else "left") if abs(dx) > abs(dy) else ("down" if dy > 0 else "up")
    return _OPPOSITE[finger]


@dataclass(frozen=True)
class TarsNotation:
    """How a UI-TARS-style protocol writes its calls (for the model's own history turns and for a
    ground-truth history): ``points`` ``box`` is ``start_box='(x,y)'`` (UI-TARS v1/1.5, vlm),
    ``point`` is Doubao's ``point='<point>x y</point>'`` (``start_point``/``end_point`` for a drag);
    ``swipe`` ``direction`` writes a swipe as ``scroll(start, direction)`` in the content direction,
    ``two_points`` as ``scroll(start_box, end_box)``, the finger's path (UI-TARS v1's mobile scroll)."""

    points: Literal["box", "point"] = "box"
    swipe: Literal["direction", "two_points"] = "direction"


def tars_call(action: Action, point: Callable[[int, int], tuple[float, float]],
              notation: TarsNotation = TarsNotation()) -> str:
    """A unified action as a UI-TARS-style call (the ``uitars`` and ``vlm`` protocols; the inverse of
    :func:`map_tars_call`), e.g. ``click(start_box='(546,1204)')``. ``point`` maps device pixels to
    the protocol's space (:func:`harness.core.actions.from_device`); points are written as integers.

    A swipe is written ``scroll(start_box, direction)`` with the content direction (how the prompts
    describe moving the content), or with both points (``notation.swipe``); other keys than Home and
    Back as ``hotkey(key='...')``; an answer as ``finished(content='...')`` and a finish (complete or
    infeasible) as ``finished()``."""
    def box(x: int, y: int, key: str = "start_box") -> str:
        fx, fy = point(x, y)
        px, py = round(fx), round(fy)
        if notation.points == "point":
            name = {"start_box": "point", "end_box": "end_point"}[key]
            return f"{name}='<point>{px} {py}</point>'"
        return f"{key}='({px},{py})'"

    if isinstance(action, Click):
        return f"click({box(action.x, action.y)})"
    if isinstance(action, LongPress):
        return f"long_press({box(action.x, action.y)})"
    if isinstance(action, DoubleTap):
        return f"double_tap({box(action.x, action.y)})"
    if isinstance(action, Swipe):
        if notation.swipe == "two_points":
            return f"scroll({box(*action.start)}, {box(*action.end, key='end_box')})"
        return f"scroll({box(*action.start)}, direction='{content_direction(action)}')"
    if isinstance(action, TypeText):
        content = action.text + ("\n" if action.submit else "")
        return f"type(content='{quote_text(content)}')"
    if isinstance(action, Key):
        if action.key in ("home", "back"):
            return f"press_{action.key}()"
        return f"hotkey(key='{action.key}')"
    if isinstance(action, OpenApp):
        return f"open_app(app_name='{quote_text(action.app)}')"
    if isinstance(action, Wait):
        return "wait()"
    if isinstance(action, Answer):
        return f"finished(content='{quote_text(action.text)}')"
    if isinstance(action, Finish):
        return "finished()"
    if isinstance(action, NeedsUser):
        return "call_user()"
    raise ValueError(f"no UI-TARS form for {action!r}")


def canonical_box(args: dict[str, str], notes: list[str]) -> dict[str, str]:
    """``point``/``start_point``/``end_point`` -> ``start_box``/``end_box`` (the names UI-TARS-1.5
    uses; Doubao's prompt says ``point``)."""
    out = dict(args)
    for old, new in (("point", "start_box"), ("start_point", "start_box"), ("end_point", "end_box")):
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def first_tars_call(text: Any, known: set[str]) -> tuple[Call, dict[str, str], str | None, list[str]]:
    """The first UI-TARS-style call of a reply (the ``uitars`` and ``vlm`` protocols): the call, its
    arguments with canonical box names (:func:`canonical_box`), the thought before it and the notes
    on what was cleaned, repaired or dropped (later calls are dropped: one action per step)."""
    t, notes = clean_text(text)
    pos, thought, more = find_action_call(t, known)
    notes += more
    call = parse_call(t, pos)
    notes += call.notes
    dropped = following_calls(t, call.end, known)
    if dropped:
        notes.append(f"took the first of {len(dropped) + 1} actions; dropped {', '.join(dropped)}(...)")
    return call, canonical_box(call.args, notes), thought, notes


# --- JSON in prose ----------------------------------------------------------------------------------
def json_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every top-level {...} span, respecting '...' and "..." strings."""
    out, depth, start, quote, esc = [], 0, -1, "", False
    for i, ch in enumerate(text):
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'" and depth > 0:
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append((start, i + 1))
    if depth and start >= 0:
        out.append((start, len(text)))  # an unclosed object (truncated): tried, then refused clearly
    return out


def loads_lenient(s: str) -> Any:
    """JSON, or what models send instead: trailing commas, Python literals, single quotes."""
    try:
        return json.loads(s)
    except json.JSONDecodeError as e:
        first = e
    except RecursionError:  # thousands of nested brackets: refused, not a crash of the agent
        raise ParseError(f"JSON nested too deeply {s[:80]!r}") from None
    t = re.sub(r",\s*([}\]])", r"\1", s)
    try:
        return json.loads(t)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        v = ast.literal_eval(t)
        if isinstance(v, (dict, list)):
            return v
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    raise ParseError(f"invalid JSON {s[:80]!r}: {first.msg} at column {first.colno}")


def fenced_blocks(text: str) -> list[tuple[int, str]]:
    return [(m.start(1), m.group(1)) for m in re.finditer(r"```[A-Za-z]*[ \t]*\n?(.*?)```", text, re.S)]


def as_int(v: Any, what: str) -> int:
    if isinstance(v, bool):
        raise ParseError(f"{what} must be a number, got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    raise ParseError(f"{what} must be an integer, got {v!r}")


def as_point(v: Any, what: str, notes: list[str]) -> tuple[float, float]:
    if isinstance(v, str):
        return point_of(v, what, notes)
    if isinstance(v, (list, tuple)) and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v):
        return point_of(list(v), what, notes)
    raise ParseError(f"{what} must be [x, y], got {v!r}")


# --- the parsers the CLI knows, by agent name ---------------------------------------------------------
CliParser = Callable[..., Parsed]


@dataclass(frozen=True)
class CliEntry:
    parse: CliParser                # (text, screen_size, **options as strings) -> Parsed
    options: dict[str, str]         # option name -> help


PARSERS: dict[str, CliEntry] = {}


def register_parser(name: str, fn: CliParser, options: dict[str, str]) -> None:
    """Make ``harness agents parse --agent NAME`` know a family's parser and its options."""
    PARSERS[name] = CliEntry(fn, options)
