"""The ``mobile_use`` function call as Qwen-VL-based mobile agents write it, read into unified actions:
Qwen2.5-VL / Qwen3-VL (``qwen``), GUI-Owl (``gui-owl``, Mobile-Agent-v3) and MAI-UI (``mai-ui``), each
with its own coordinate space and action list (the caller passes both).

Shapes read (besides each cookbook's own): ``<tool_call>`` blocks or a bare JSON call, OpenAI
``tool_calls`` written back as blocks (agents.parsing.with_tool_calls), ``arguments`` as a JSON string,
a box of four numbers where a point is expected (its centre, noted), the actions of the families
sharing the tool (MAI-UI's ``drag`` with ``start_coordinate``/``end_coordinate``, ``ask_user``,
``double_click``; GUI-Owl's ``tap`` read as ``click`` as its AndroidWorld agent does), and a call to
another function (an MCP tool, which MAI-UI calls by its own name): a :class:`harness.core.actions.Note`,
recorded and not run, since this harness serves no such tool.

- ``swipe`` with ``coordinate2`` is the finger's path; with a ``direction`` it is the finger's
  direction (MobileWorld's MAI-UI agent turns ``swipe up`` into AndroidWorld's ``scroll down``:
  ``reverse_swipe_direction`` in Tongyi-MAI/MobileWorld agents/utils/action_translation.py @d42de47).
- ``ask_user`` (MAI-UI, MobileWorld's Qwen3-VL prompt: "Ask user for clarification") hands the phone
  to a person: ``needs_user`` with the question.
- ``terminate`` success -> complete, failure (or fail) -> infeasible; ``answer`` is an Answer.
"""

from __future__ import annotations

import json
from typing import Any

from harness.core.actions import (Action, Answer, Click, CoordSpace, DoubleTap, Finish, LongPress, NeedsUser, Note, OpenApp,
                                  Swipe, Wait)

from agents.gestures import direction_of, finger_swipe
from agents.parsing import (ParseError, Parsed, as_point, clean_text, device_point, json_spans, key_action,
                            loads_lenient, type_action)

_TAG_OPEN = "<tool_call>"
_TAG_CLOSE = "</tool_call>"
_BUTTONS = {"back": "back", "home": "home", "menu": "menu", "enter": "enter"}
TOOL_NAMES = ("mobile_use", "computer_use")
_THINK_TAGS = ("<thinking>", "</thinking>")


def tool_calls(text: str, notes: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The tool calls in order, and where the first one starts."""
    blocks: list[tuple[int, str]] = []
    pos = 0
    while True:
        i = text.find(_TAG_OPEN, pos)
        if i < 0:
            break
        start = i + len(_TAG_OPEN)
        j_close = text.find(_TAG_CLOSE, start)
        j_next = text.find(_TAG_OPEN, start)
        if j_close < 0 or (0 <= j_next < j_close):
            end = j_next if j_next >= 0 else len(text)
            notes.append("missing </tool_call>")
        else:
            end = j_close
        blocks.append((i, text[start:end]))
        pos = end
    first_at = blocks[0][0] if blocks else -1
    if not blocks:
        spans = json_spans(text)
        bare = []
        for s, e in spans:
            try:
                obj = loads_lenient(text[s:e])
            except ParseError:
                continue
            if isinstance(obj, dict) and ("arguments" in obj or "action" in obj):
                bare.append((s, text[s:e]))
        if not bare:
            raise ParseError("no <tool_call> in the output")
        notes.append("no <tool_call> tags; used a bare JSON call")
        blocks, first_at = bare, bare[0][0]
    calls = []
    for k, (_, body) in enumerate(blocks):
        spans = json_spans(body)
        if not spans:
            if k == 0:
                raise ParseError(f"the tool call holds no JSON object: {body.strip()[:60]!r}")
            continue
        s, e = spans[0]
        tail = body[e:].strip()
        if tail and k == 0:
            notes.append(f"ignored text after the call: {tail[:20]!r}")
        try:
            obj = loads_lenient(body[s:e])
        except ParseError as err:
            if k == 0:
                raise ParseError(f"the tool call is not valid JSON: {err}") from None
            continue
        if not isinstance(obj, dict):
            if k == 0:
                raise ParseError("the tool call is not a JSON object")
            continue
        calls.append(obj)
    return calls, first_at



def read_call(text: str, screen_size: tuple[int, int], space: CoordSpace, resized: tuple[int, int] | None,
              listed: tuple[str, ...], who: str) -> Parsed:
    """The first ``mobile_use`` call of ``text`` as unified actions: points in ``space`` (``resized``:
    the size its pixels refer to); an action not in ``listed`` (the release's own list) is done
    with a note naming ``who``. ``raw`` holds the call's name and arguments as written."""
    t, notes = clean_text(text)
    calls, first_at = tool_calls(t, notes)
    thought = t[:first_at].strip() if first_at > 0 else None
    if thought:
        for tag in _THINK_TAGS:  # MAI-UI and GUI-Owl wrap the thought in <thinking></thinking>
            thought = thought.replace(tag, "")
        thought = thought.strip()
    call = calls[0]
    if len(calls) > 1:
        same = all(c == call for c in calls[1:])
        notes.append(f"took the first of {len(calls)} tool calls" + (" (the others repeat it)" if same else ""))
    name = call.get("name", "mobile_use")
    args = call.get("arguments", call if "action" in call else None)
    if isinstance(args, str):
        args = loads_lenient(args)
    if not isinstance(args, dict):
        raise ParseError(f"the tool call has no arguments object: {json.dumps(call, ensure_ascii=False)[:80]}")
    if not isinstance(name, str) or not name.strip():
        raise ParseError(f"the tool call has no function name: {json.dumps(call, ensure_ascii=False)[:80]}")
    if name not in TOOL_NAMES:  # another function (an MCP tool): recorded, nothing runs on the phone
        notes.append(f"a call of {name!r}, a tool this harness does not serve: recorded, not run")
        told = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        return Parsed(actions=[Note(text=told[:10_000])], raw={"name": name, "arguments": args},
                      thought=thought or None, notes=notes)
    if name != "mobile_use":
        notes.append(f"function {name!r} instead of mobile_use")

    def pt(key: str) -> tuple[int, int]:
        if key not in args:
            raise ParseError(f"{action}: needs {key}")
        x, y = as_point(args[key], key, notes)
        return device_point(x, y, space, screen_size, resized, what=key)

    action = str(args.get("action", "")).strip().lower()
    if action == "tap":  # GUI-Owl's AndroidWorld agent: action.replace('tap', 'click')
        notes.append("'tap' read as click")
        action = "click"
    if action and action not in listed:
        notes.append(f"{action!r} is not in {who}'s mobile_use action list; done as asked")
    acts: list[Action]
    if action == "click":
        x, y = pt("coordinate")
        acts = [Click(x=x, y=y)]
    elif action == "long_press":
        x, y = pt("coordinate")
        acts = [LongPress(x=x, y=y, duration_ms=_ms(args.get("time"), 1000))]
    elif action in ("double_tap", "double_click"):
        x, y = pt("coordinate")
        acts = [DoubleTap(x=x, y=y)]
    elif action == "swipe":
        if "coordinate2" in args:
            acts = [Swipe(start=pt("coordinate"), end=pt("coordinate2"), duration_ms=400)]
        else:
            d = direction_of(args.get("direction"), "swipe direction")
            start = pt("coordinate") if "coordinate" in args else None
            acts = [finger_swipe(d, screen_size, start=start)]
    elif action == "drag":  # MAI-UI: start_coordinate to end_coordinate, the finger's path
        acts = [Swipe(start=pt("start_coordinate"), end=pt("end_coordinate"), duration_ms=600)]
    elif action == "type":
        acts = [type_action(args.get("text"), "type")]
    elif action == "key":
        acts = [key_action(args.get("text") or args.get("key"), "key")]
    elif action == "system_button":
        b = str(args.get("button", "")).strip().lower()
        if b not in _BUTTONS:
            raise ParseError(f"system_button: unknown button {args.get('button')!r} (Back, Home, Menu, Enter)")
        acts = [key_action(_BUTTONS[b], "system_button")]
    elif action in ("open", "open_app", "awake"):
        app = str(args.get("text") or args.get("app_name") or "").strip()
        if not app:
            raise ParseError("open: no app name in text")
        acts = [OpenApp(app=app)]
    elif action == "wait":
        acts = [Wait(seconds=min(max(_num(args.get("time"), 2.0), 0.0), 60.0))]
    elif action == "answer":
        acts = [Answer(text=str(args.get("text", "")))]
    elif action == "ask_user":
        acts = [NeedsUser(text=str(args.get("text") or "").strip())]
    elif action == "terminate":
        status = str(args.get("status", "success")).strip().lower()
        if status not in ("success", "failure", "fail", "failed"):
            raise ParseError(f"terminate: status must be success or failure, got {args.get('status')!r}")
        acts = [Finish(status="complete" if status == "success" else "infeasible")]
    else:
        raise ParseError(f"unknown mobile_use action {args.get('action')!r}")
    raw = {"name": name, "arguments": args, "coordinate_space": space.value,
           **({"resized": list(resized)} if resized else {})}
    return Parsed(actions=acts, raw=raw, thought=thought or None, notes=notes)


def _num(v: Any, default: float) -> float:
    if v in (None, ""):
        return default
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ParseError(f"expected a number of seconds, got {v!r}") from None


def _ms(v: Any, default: int) -> int:
    return int(min(max(_num(v, default / 1000), 0.1), 60.0) * 1000)
