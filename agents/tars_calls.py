"""A tolerant reader of function-call actions such as ``click(start_box='(x,y)')`` (UI-TARS and the
``vlm`` prompt; M3A's calls too), their mapping to unified actions, and the inverse: a unified action
written as such a call for a model's own history turns."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal

from agents.gestures import content_direction, direction_of, finger_swipe, reveal_swipe
from agents.parsing import ParseError, answer_then_finish, clean_text, key_action, type_action
from harness.core.actions import Action, Answer, Click, DoubleTap, Finish, Key, LongPress, NeedsUser, OpenApp, Swipe, TypeText, Wait


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

