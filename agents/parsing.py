"""Shared parsing of model outputs: clean-up of known failure shapes, coordinate checks, keys and
text, JSON extraction, and the registry of the parsers ``harness agents parse`` knows. The reader of
UI-TARS-style function calls is agents.tars_calls; the scroll and swipe geometry is agents.gestures.
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
from typing import Any, Callable

from pydantic import ValidationError

from harness.core.actions import Action, Answer, CoordSpace, Finish, Key, NeedsUser, TypeText, to_device


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


def _drop_think(t: str, notes: list[str]) -> str:
    if _THINK.search(t):
        t = _THINK.sub("", t)
        notes.append("removed a <think> block")
    if "</think>" in t:  # the opening tag was eaten by the chat template
        t = t.rsplit("</think>", 1)[1]
        notes.append("removed reasoning before a lone </think>")
    if "<think>" in t:
        t = t.replace("<think>", "")
        notes.append("unwrapped an unclosed <think>")
    return t


def clean_text(text: Any, keep_think: bool = False) -> tuple[str, list[str]]:
    """Remove what servers and models add around an answer; return the text and what was done.
    ``keep_think``: leave ``<think>`` blocks in place (AutoGLM writes its thought there)."""
    if not isinstance(text, str):
        raise ParseError(f"the output is not text (got {type(text).__name__})")
    notes: list[str] = []
    t = text.replace("\r\n", "\n")
    if not keep_think:
        t = _drop_think(t, notes)
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
