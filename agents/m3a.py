"""``m3a``: an M3A-style agent (AndroidWorld's Multimodal Autonomous Agent for Android), with our
own prompts (``agents/prompts/m3a_en.md``, ``m3a_summary_en.md``).

Protocol (facts from ``google-research/android_world`` ``agents/m3a.py``, ``agents/infer.py``,
``env/json_action.py`` and ``env/actuation.py``):

- Each step sends the prompt, then the plain screenshot and a Set-of-Mark copy (numbered boxes on UI
  elements, drawn here from the uiautomator dump with Pillow), at full size as JPEG (AndroidWorld's
  Gpt4Wrapper); the prompt holds the element list in M3A's form (``UI element N: {"index": N, "text":
  ..., "is_clickable": True, ...}``) and the history.
- The model answers ``Reason: ...`` then ``Action: {json}`` over element indexes: click,
  long_press, input_text, keyboard_enter, navigate_home, navigate_back, scroll, open_app, wait,
  answer, status (complete / infeasible). AndroidWorld's action space also has ``double_tap`` and
  ``input_text``'s ``clear_text``, which are read too.
- A second call summarises each executed step from the screens before and after it (labelled
  "before" and "after"); the summary becomes the step's history line
  (``Step N- Action selected: {...}. <summary>``). Here that call is made at the start of the next
  step, when the after-screen is the new observation; its usage is recorded with that step.
- ``scroll`` direction is the content direction: ``down`` shows what is below, the finger moves
  up, from the centre of the element (or the screen) to its top edge (AndroidWorld's actuation).
  ``swipe`` (not in the prompt, but GPT models send it) is the finger's direction.
- ``input_text`` with an index taps that element, types, and presses Enter (AndroidWorld's
  actuation). That is two device steps here: the tap now, the typing (``submit`` =
  ``enter_after_input``) on the next step without a model call.
- Absolute ``x``/``y`` clicks (AndroidControl's JSON) are accepted as screen pixels; a function
  call such as ``open_app(app_name='Recorder')`` where JSON was asked for is read as the JSON action
  it spells (noted).

An index that is not in the list, JSON that does not parse, a call that is no M3A action: invalid
steps, each with a history line saying so (as M3A does).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from PIL import Image, ImageDraw, ImageFont

from harness.core import hierarchy
from harness.core.actions import (Action, Answer, Click, CoordSpace, DoubleTap, Finish, Key, LongPress, OpenApp, Swipe,
                                  TypeText, Wait, from_device)
from harness.device.base import DeviceError
from harness.core.episode import AgentOutput, CandidatePixels, EpisodeContext, Feedback, Observation
from harness.core.hierarchy import Element
from harness.client.config import ModelConfig
from harness.client.images import EncodedImage, ImagePolicy, encode_pixels, run_in_background
from harness.core import resample
from harness.core.screenshot import image_of
from harness.core.registry import AGENTS

from agents.common import ModelAgent, StepTrace, feedback_text, image_record, language_name
from agents.parsing import (ElementAction, ParseError, Parsed, as_int, clean_text, content_direction, device_point,
                            direction_of, finger_swipe, json_spans, key_action, loads_lenient, parse_call,
                            read_reply, register_parser, type_text)
from agents.prompts import load_prompt

# --- elements and Set-of-Mark ----------------------------------------------------------------------


def select_elements(elements: list[Element], screen: tuple[int, int]) -> list[Element]:
    """The elements that get a number: on screen, with an area, and either interactive or carrying
    text or a description; full-screen containers are left out."""
    w, h = screen
    out = []
    for e in elements:
        x1, y1, x2, y2 = e.bounds
        if x2 <= x1 or y2 <= y1 or x2 <= 0 or y2 <= 0 or x1 >= w or y1 >= h:
            continue
        if (x2 - x1) * (y2 - y1) >= 0.9 * w * h:
            continue
        editable = "EditText" in e.cls
        if e.clickable or e.long_clickable or e.scrollable or e.checkable or editable or e.text or e.desc:
            out.append(e)
    return out


def visible_bounds(e: Element, screen: tuple[int, int]) -> tuple[int, int, int, int]:
    w, h = screen
    x1, y1, x2, y2 = e.bounds
    return max(0, x1), max(0, y1), min(w, x2), min(h, y2)


def element_center(e: Element, screen: tuple[int, int]) -> tuple[int, int]:
    x1, y1, x2, y2 = visible_bounds(e, screen)
    return (x1 + x2) // 2, (y1 + y2) // 2


def describe_element(i: int, e: Element) -> str:
    """One line of the element list, the same text AndroidWorld's M3A writes for the same element
    (android_world agents/m3a.py ``_generate_ui_element_description``, commit d9c569f): ``UI element N:
    {"index": N, "text": "...", ...}`` built by concatenation, not JSON (strings as they are, quotes and
    line breaks included), booleans as Python writes them; text, content description and hint only
    when not empty, ``is_scrollable`` and ``is_focusable`` only when true, no enabled or focused flag.
    ``is_editable`` is read from the class (an EditText): a uiautomator dump does not carry the
    accessibility node's isEditable. AndroidWorld's ``tooltip`` field is never written: no uiautomator
    dumper holds a tooltip, and AndroidWorld's own accessibility reader never sets one.
    tests/agents/test_m3a_parity.py compares this with AndroidWorld's function's output."""
    parts = [f'"index": {i}']
    parts += [f'"{name}": "{value}"' for name, value in
              (("text", e.text), ("content_description", e.desc), ("hint_text", e.hint)) if value]
    parts += [f'"is_clickable": {e.clickable}', f'"is_long_clickable": {e.long_clickable}',
              f'"is_editable": {"EditText" in e.cls}']
    parts += [f'"{name}": True' for name, on in (("is_scrollable", e.scrollable), ("is_focusable", e.focusable)) if on]
    parts += [f'"is_selected": {e.selected}', f'"is_checked": {e.checked}']
    return f"UI element {i}: {{{', '.join(parts)}}}"


def describe_elements(elements: list[Element]) -> str:
    return "\n".join(describe_element(i, e) for i, e in enumerate(elements)) or "(no elements)"


_COLORS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
           (240, 50, 230), (128, 128, 0)]
_fonts: dict[int, Any] = {}


def _font(px: int) -> Any:
    if px not in _fonts:
        try:
            _fonts[px] = ImageFont.load_default(size=px)
        except TypeError:  # Pillow < 10.1: a fixed small bitmap font
            _fonts[px] = ImageFont.load_default()
    return _fonts[px]


def screen_image(screen: bytes | Image.Image, policy: ImagePolicy) -> Image.Image:
    """The screenshot (a frame's pixels, a PNG's own pixels when it carries them, else decoded)
    scaled to the size it is sent at (the policy's caps)."""
    img = screen if isinstance(screen, Image.Image) else image_of(screen)
    img = img if img.mode == "RGB" else img.convert("RGB")
    target = policy.target(img.size)
    return img if target == img.size else resample.resize(img, target, Image.Resampling.BILINEAR)


def draw_som(base: Image.Image, elements: list[Element], screen: tuple[int, int]) -> Image.Image:
    """Numbered boxes on a copy of ``base`` (which may be smaller than the screen)."""
    img = base.copy()
    sx, sy = img.width / screen[0], img.height / screen[1]
    draw = ImageDraw.Draw(img)
    line = max(2, round(img.width / 360))
    font = _font(max(12, round(img.width / 36)))
    for i, e in enumerate(elements):
        x1, y1, x2, y2 = visible_bounds(e, screen)
        box = (round(x1 * sx), round(y1 * sy), max(round(x1 * sx), round(x2 * sx) - 1), max(round(y1 * sy), round(y2 * sy) - 1))
        color = _COLORS[i % len(_COLORS)]
        draw.rectangle(box, outline=color, width=line)
        label = str(i)
        l, t, r, b = draw.textbbox((0, 0), label, font=font)
        tw, th = r - l, b - t
        lx, ly = box[0], box[1]
        draw.rectangle((lx, ly, lx + tw + 2 * line, ly + th + 2 * line), fill=color)
        draw.text((lx + line - l, ly + line - t), label, fill=(255, 255, 255), font=font)
    return img


def label_image(img: Image.Image, text: str) -> Image.Image:
    """A copy with ``text`` ("before" / "after") in the bottom-right corner."""
    out = img.copy()
    draw = ImageDraw.Draw(out)
    font = _font(max(14, round(out.width / 20)))
    l, t, r, b = draw.textbbox((0, 0), text, font=font)
    pad = max(4, round(out.width / 100))
    x2, y2 = out.width - pad, out.height - pad
    draw.rectangle((x2 - (r - l) - 2 * pad, y2 - (b - t) - 2 * pad, x2, y2), fill=(0, 0, 0))
    draw.text((x2 - (r - l) - pad - l, y2 - (b - t) - pad - t), text, fill=(255, 255, 0), font=font)
    return out


# --- parsing -------------------------------------------------------------------------------------------
# AndroidWorld's JSONAction keys (env/json_action.py): clear_text and keycode are in it, not in M3A's prompt
_KNOWN_KEYS = {"action_type", "index", "x", "y", "text", "direction", "app_name", "goal_status", "clear_text",
               "keycode", "key"}
_CALL = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")
# the action types a call form may name (M3A's prompt plus AndroidWorld's JSONAction)
_M3A_TYPES = {"click", "long_press", "double_tap", "input_text", "keyboard_enter", "navigate_home", "navigate_back",
              "scroll", "swipe", "open_app", "wait", "answer", "status", "press_keyboard"}


# the finger's end for a scroll in each content direction: an edge of the region (down: its top)
_SCROLL_END = {"down": lambda r: ((r[0] + r[2]) // 2, r[1]), "up": lambda r: ((r[0] + r[2]) // 2, r[3]),
               "right": lambda r: (r[0], (r[1] + r[3]) // 2), "left": lambda r: (r[2], (r[1] + r[3]) // 2)}


def scroll_swipe(direction: str, screen: tuple[int, int], region: tuple[int, int, int, int] | None = None) -> Swipe:
    """M3A's ``scroll``, as AndroidWorld's actuation does it (env/actuation.py ``execute_adb_action``,
    commit d9c569f): from the centre of the element's bounds (cut to the screen; no element: the
    screen) to its edge on the side opposite to ``direction`` (``down``: the top edge; the content
    moves up, showing what is below). An end on the screen's far edge is its last pixel here (AndroidWorld
    sends the edge itself, one pixel off the screen). The duration is ours (AndroidWorld leaves it to
    ``input swipe``)."""
    w, h = screen
    x1, y1, x2, y2 = region or (0, 0, w, h)
    r = (max(x1, 0), max(y1, 0), min(x2, w), min(y2, h))
    ex, ey = _SCROLL_END[direction](r)
    return Swipe(start=((r[0] + r[2]) // 2, (r[1] + r[3]) // 2), end=(min(ex, w - 1), min(ey, h - 1)), duration_ms=400)


def _element(idx: Any, elements: list[Element], what: str) -> Element:
    i = as_int(idx, f"{what}: index")
    if not 0 <= i < len(elements):
        top = f"0-{len(elements) - 1}" if elements else "the list is empty"
        raise ParseError(f"{what}: index {i} is not in the element list ({top})")
    return elements[i]


def _call_action(t: str, at: int, notes: list[str]) -> dict[str, Any] | None:
    """``Action: open_app(app_name='Recorder')``: a function call where M3A asks for JSON (models
    trained on UI-TARS-style calls answer so) read as the JSON action it spells, when its name is
    an M3A action."""
    m = _CALL.match(t[at:])
    if not m or m.group(1) not in _M3A_TYPES:
        return None
    call = parse_call(t, at)
    notes += call.notes
    obj: dict[str, Any] = {"action_type": call.name}
    for k, v in call.args.items():
        obj[k] = int(v) if k in ("index", "x", "y") and v.strip().lstrip("-").isdigit() else v
    notes.append(f"a function call where M3A's JSON was asked for; read as {json.dumps(obj, ensure_ascii=False)}")
    return obj



def parse_detailed(text: str, screen_size: tuple[int, int], elements: list[Element] | None = None,
                   enter_after_input: bool = True) -> Parsed:
    """One M3A output as unified actions. ``elements`` is the screen's element list the indexes refer
    to; without it (None) an action on an index is kept as an :class:`ElementAction` (unresolved:
    the element and its point are unknown), which only ``harness agents parse`` produces."""
    t, notes = clean_text(text)
    m = re.search(r"Reason:\s*(.*?)(?=\n\s*Action:|\Z)", t, re.S)
    thought = m.group(1).strip() if m else None
    labels = [lab.end() for lab in re.finditer(r"Action:\s*", t)]
    label_at = labels[-1] if labels else None
    found: list[tuple[int, dict[str, Any]]] = []
    bad: list[tuple[int, ParseError]] = []
    for s, e in json_spans(t):
        try:
            obj = loads_lenient(t[s:e])
        except ParseError as err:
            bad.append((s, err))
            continue
        if isinstance(obj, dict) and "action_type" in obj:
            found.append((s, obj))
    if not found:
        called = _call_action(t, label_at, notes) if label_at is not None else None
        if called is not None:
            found = [(label_at, called)]
        elif bad:
            pick = next((err for s, err in bad if label_at is not None and s >= label_at), bad[-1][1])
            raise ParseError(f"the action JSON is not valid: {pick}")
        elif label_at is not None and _CALL.match(t[label_at:]):
            call = t[label_at:].strip().splitlines()[0][:60]
            raise ParseError(f"expected a JSON action after 'Action:', got a function call {call!r}")
        else:
            raise ParseError('no JSON action (an object with "action_type") in the output')
    chosen = next((o for s, o in found if label_at is not None and s >= label_at), found[0][1])
    others = [o for s, o in found if o is not chosen]
    if others:
        same = all(o == chosen for o in others)
        notes.append(f"took one of {len(found)} JSON actions" + (" (the others repeat it)" if same else
                     f"; dropped {', '.join(str(o.get('action_type')) for o in others if o != chosen)}"))
    if thought is None:
        first = min(s for s, _ in found)
        thought = re.sub(r"\s*Action:\s*$", "", t[:first]).strip() or None
    obj = chosen
    extra = sorted(set(obj) - _KNOWN_KEYS)
    if extra:
        notes.append(f"ignored keys: {', '.join(extra)}")
    kind = str(obj.get("action_type", "")).strip().lower()
    raw: dict[str, Any] = dict(obj)

    def element(what: str) -> Element | None:
        """The indexed element, or None when parsing without the list (the index is still checked)."""
        i = as_int(obj["index"], f"{what}: index")
        if elements is None:
            return None
        el = _element(i, elements, what)
        raw["element"] = {"text": el.text, "desc": el.desc, "id": el.short_rid, "bounds": list(el.bounds)}
        return el

    def point_action(unified: str, what: str, make: Any) -> Action | ElementAction:
        """``make(x, y)`` at the indexed element's centre or at M3A/AndroidControl's x, y pixels."""
        if obj.get("index") is not None:
            el = element(what)
            if el is None:
                return ElementAction(unified, as_int(obj["index"], f"{what}: index"))
            return make(*element_center(el, screen_size))
        if obj.get("x") is not None and obj.get("y") is not None:
            x, y = as_int(obj["x"], f"{what}: x"), as_int(obj["y"], f"{what}: y")
            return make(*device_point(x, y, CoordSpace.PIXELS, screen_size, what=f"{what} point"))
        raise ParseError(f"{what} needs an index (or x and y)")

    acts: list[Action | ElementAction]
    if kind == "click":
        acts = [point_action("click", "click", lambda x, y: Click(x=x, y=y))]
    elif kind == "long_press":
        acts = [point_action("long_press", "long_press", lambda x, y: LongPress(x=x, y=y))]
    elif kind == "double_tap":  # in AndroidWorld's action space (json_action.py), not in M3A's prompt
        acts = [point_action("double_tap", "double_tap", lambda x, y: DoubleTap(x=x, y=y))]
    elif kind in ("input_text", "type"):
        text_v = obj.get("text")
        if not isinstance(text_v, str) or text_v == "":
            raise ParseError("input_text needs a non-empty text")
        typing = type_text(text_v, submit=enter_after_input, clear=obj.get("clear_text") is True)
        if obj.get("index") is not None or obj.get("x") is not None:
            acts = [point_action("click", "input_text", lambda x, y: Click(x=x, y=y)), typing]
        else:
            acts = [typing]
    elif kind == "keyboard_enter":
        acts = [Key(key="enter")]
    elif kind == "navigate_home":
        acts = [Key(key="home")]
    elif kind == "navigate_back":
        acts = [Key(key="back")]
    elif kind in ("press_keyboard", "key"):
        acts = [key_action(obj.get("keycode") or obj.get("key"), kind)]
    elif kind in ("scroll", "swipe"):
        d = direction_of(obj.get("direction"), f"{kind} direction")
        geometry = scroll_swipe if kind == "scroll" else finger_swipe
        if obj.get("index") is not None:
            el = element(kind)
            if el is None:
                # a scroll names the content's direction, a swipe the finger's
                acts = [ElementAction("swipe", as_int(obj["index"], f"{kind}: index"),
                                      {"scroll" if kind == "scroll" else "finger": d})]
            else:
                acts = [geometry(d, screen_size, region=visible_bounds(el, screen_size))]
        else:
            acts = [geometry(d, screen_size)]
    elif kind == "open_app":
        app = str(obj.get("app_name") or "").strip()
        if not app:
            raise ParseError("open_app needs app_name")
        acts = [OpenApp(app=app)]
    elif kind == "wait":
        acts = [Wait(seconds=1.0)]
    elif kind == "answer":
        if not isinstance(obj.get("text"), str):
            raise ParseError("answer needs a text")
        acts = [Answer(text=obj["text"])]
    elif kind == "status":
        st = str(obj.get("goal_status", "")).strip().lower()
        if st in ("complete", "completed", "successful", "success", "done"):
            acts = [Finish(status="complete")]
        elif st in ("infeasible", "failed", "failure", "impossible"):
            acts = [Finish(status="infeasible")]
        else:
            raise ParseError(f"status: goal_status must be complete or infeasible, got {obj.get('goal_status')!r}")
    else:
        raise ParseError(f"unknown action_type {obj.get('action_type')!r}")
    return Parsed(actions=acts, raw=raw, thought=thought, notes=notes)


def parse_output(text: str, screen_size: tuple[int, int], **opts: Any) -> Action:
    return parse_detailed(text, screen_size, **opts).action


_KEY_ACTIONS = {"enter": "keyboard_enter", "home": "navigate_home", "back": "navigate_back"}


def action_json(action: Action, screen: tuple[int, int]) -> dict[str, Any]:
    """A unified action as M3A's JSON action (for a ground-truth history line). Earlier screens'
    elements are not known, so points are AndroidControl's ``x``/``y`` screen pixels (which
    :func:`parse_detailed` accepts); a swipe is a ``scroll`` in the content direction; keys without
    an M3A action (delete, app switch, key codes) are written ``{"action_type": "key", "key": ...}``."""
    def xy(x: int, y: int) -> dict[str, int]:
        px, py = from_device(x, y, CoordSpace.PIXELS, screen)
        return {"x": round(px), "y": round(py)}

    if isinstance(action, Click):
        return {"action_type": "click", **xy(action.x, action.y)}
    if isinstance(action, LongPress):
        return {"action_type": "long_press", **xy(action.x, action.y)}
    if isinstance(action, DoubleTap):
        return {"action_type": "double_tap", **xy(action.x, action.y)}
    if isinstance(action, Swipe):
        return {"action_type": "scroll", "direction": content_direction(action)}
    if isinstance(action, TypeText):
        return {"action_type": "input_text", "text": action.text}
    if isinstance(action, Key):
        kind = _KEY_ACTIONS.get(action.key) if isinstance(action.key, str) else None
        return {"action_type": kind} if kind else {"action_type": "key", "key": action.key}
    if isinstance(action, OpenApp):
        return {"action_type": "open_app", "app_name": action.app}
    if isinstance(action, Wait):
        return {"action_type": "wait"}
    if isinstance(action, Answer):
        return {"action_type": "answer", "text": action.text}
    if isinstance(action, Finish):
        return {"action_type": "status", "goal_status": action.status}
    raise ValueError(f"no M3A form for {action!r}")


def elements_from_xml(xml: str, screen_size: tuple[int, int]) -> list[Element]:
    return select_elements(hierarchy.parse(xml), screen_size)


def _cli(text: str, screen_size: tuple[int, int], hierarchy_xml: str | None = None,
         enter_after_input: str | bool = True, **_: Any) -> Parsed:
    els = elements_from_xml(hierarchy_xml, screen_size) if hierarchy_xml else None
    enter = enter_after_input if isinstance(enter_after_input, bool) else str(enter_after_input).lower() in ("1", "true", "yes")
    return parse_detailed(text, screen_size, elements=els, enter_after_input=enter)


register_parser("m3a", _cli, {"enter_after_input": "input_text presses Enter after typing: true (default) or false",
                              "hierarchy_xml": "set by --hierarchy FILE: the uiautomator dump the indexes refer to"})


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class M3AConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    lang: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "language of Reason and summaries"})
    summarize: bool = field(default=True, metadata={"help": "the second call that summarises each step"})
    enter_after_input: bool = field(default=True, metadata={"help": "input_text presses Enter after typing (M3A)"})
    # AndroidWorld's Gpt4Wrapper sends the screenshots at full size as JPEG (agents/infer.py,
    # image_to_jpeg_bytes: Image.save(format='JPEG') with no options, i.e. Pillow's default quality 75)
    max_side: int = field(default=0, metadata={"help": "longest side of the images sent (0: full size, as M3A)"})
    image_format: Literal["png", "jpeg"] = field(default="jpeg", metadata={"help": "image encoding"})
    jpeg_quality: int = field(default=75, metadata={"help": "JPEG quality when image_format=jpeg (75: Pillow's "
                                                            "default, as AndroidWorld's M3A sends them)"})


@dataclass
class _Done:
    """The last executed model step, waiting for its summary."""

    index: int
    som: Image.Image
    elements_text: str
    action_json: str
    reason: str
    before: "Future[EncodedImage] | None" = None  # its marked screen labelled "before", encoded meanwhile


@dataclass
class _Marks:
    """What a step makes of its screenshot and hierarchy: the marked elements, the Set-of-Mark image
    and its encodings (the "after" copy only when the last step waits for its summary)."""

    elements: list[Element]
    elements_text: str
    som: Image.Image
    marked: "Future[EncodedImage]"  # encoded on the image workers: first needed by the action call
    after: EncodedImage | None      # needed first (the summary call), so encoded in the job itself
    notes: dict[str, Any]


class M3AAgent(ModelAgent):
    family = "m3a"

    def __init__(self, config: M3AConfig, name: str = "m3a"):
        super().__init__(config, name)
        self.action_prompt = load_prompt("m3a_en")
        self.summary_prompt = load_prompt("m3a_summary_en")
        self.history: list[str] = []
        self.done: _Done | None = None
        self.proposed: tuple[int, str] | None = None  # the last model step's history number and action JSON
        self.later: list[str] = []  # feedback lines that follow the line of the step waiting for its summary

    def _prompts(self) -> dict[str, Any]:
        p = {"id": self.action_prompt.id, "action": self.action_prompt.to_json()}
        if self.config.summarize:
            p["id"] += "+" + self.summary_prompt.id
            p["summary"] = self.summary_prompt.to_json()
        return p

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {**self.base_spec(), "prompt": self._prompts(), "coordinate_space": "element index (Set-of-Mark)",
                "image_encoding": f"{c.image_format} (quality {c.jpeg_quality}) at "
                                  f"{'full size' if not c.max_side else f'long side {c.max_side}'}, as AndroidWorld's "
                                  "M3A; the screenshot, its Set-of-Mark copy and the summary images are made and "
                                  "encoded as the screenshot arrives"}

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        return json.dumps(action_json(action, screen))  # as history_action writes the model's own

    def replace_history(self, texts: list[str]) -> None:
        """The history lines become ``Step N- Action selected: {...}.`` per ground-truth step, without
        a summary (the summary call needs the agent's own before/after screens of its own action:
        none is made for them, as with ``summarize=false``)."""
        self.history = [history_line(i + 1, t) for i, t in enumerate(texts)]
        self.done = None
        self.later = []
        self.proposed = None

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.history = []
        self.done = None
        self._prepared = None
        self.proposed = None
        self.later = []

    def reflect(self, feedback: Feedback) -> str:
        """M3A's history is lines in its one prompt: the refused step gets its line now, without a
        summary (nothing ran to summarise), ``Step N- Action selected: {...}. Not carried out: `` and
        the feedback on one line; a queued second half is dropped. A refused second half of an
        action whose first half ran (input_text's typing after its tap) gets ``Step N- Its second
        part was not carried out: `` and the feedback, after that step's own line (which comes with
        its summary). Returns the line."""
        self.pending = []
        told = " ".join(feedback_text(feedback, self.feedback_language()).split())
        if self.queued_step and self.done is not None:
            line = f"Step {self.done.index}- Its second part was not carried out: {told}"
            self.later.append(line)
            return line
        self.done = None
        n, action = self.proposed or (len(self.history) + 1, "(none)")
        line = history_line(n, action, f"Not carried out: {told}")
        self.history.append(line)
        self.proposed = None
        return line

    def _marks(self, shown: CandidatePixels, summarize: bool) -> _Marks:
        """The hierarchy (a device call), the elements, the Set-of-Mark copy and its encodings."""
        notes: dict[str, Any] = {}
        try:
            elements = select_elements(hierarchy.parse(shown.hierarchy()), shown.screen_size)
            notes["elements"] = len(elements)
        except (hierarchy.HierarchyError, DeviceError) as e:  # no dump this time: no marks (InfraError propagates)
            elements = []
            notes["hierarchy_error"] = str(e)
        policy = self.policy()
        som = draw_som(screen_image(shown.pixels, policy), elements, shown.screen_size)
        # the summary call (the first to go) needs only the "after" copy: it is encoded here, the
        # marked screen beside it on the other image worker, still encoding while that call is on
        # the wire if it must (already at the sent size: encode_pixels does not resize them again)
        marked = run_in_background(encode_pixels, som, policy)
        after = encode_pixels(label_image(som, "after"), policy) if summarize else None
        return _Marks(elements, describe_elements(elements), som, marked, after, notes)

    def _plain(self, shown: CandidatePixels) -> EncodedImage:
        policy = self.policy()
        return encode_pixels(screen_image(shown.pixels, policy), policy)

    def _before(self, done: _Done | None) -> EncodedImage | None:
        """The last step's marked screen labelled "before", for its summary call (encoded while that
        step's action ran, see :meth:`model_step`)."""
        if done is None or not self.config.summarize:
            return None
        if done.before is not None:
            return done.before.result()
        return encode_pixels(label_image(done.som, "before"), self.policy())

    def _screen_work(self, shown: CandidatePixels, done: _Done | None) -> list[Callable[[], Any]]:
        """The step's image work as three independent jobs: marks, the plain screenshot, "before"."""
        summarize = done is not None and self.config.summarize
        return [lambda: self._marks(shown, summarize), lambda: self._plain(shown), lambda: self._before(done)]

    @staticmethod
    def _shown(obs: Observation) -> CandidatePixels:
        """The observation as the screen work reads it: its PNG stands for the pixels (decoded by
        the job that needs them, when the PNG does not carry them)."""
        return CandidatePixels(step=obs.step, pixels=obs.screenshot, screen_size=obs.screen_size,
                               hierarchy=obs.hierarchy)

    def prepare_pixels(self, frame: CandidatePixels) -> None:
        """Start the step's image work as soon as a frame's pixels arrive (harness.core.episode
        .PixelPreparingAgent; :meth:`prepare` when the PNG comes first): the three jobs of
        :meth:`_screen_work` run on the shared image workers, the longest (marks) first."""
        if self.pending:
            return
        if self._prepared is not None and self._prepared[0] is frame.pixels and self._prepared[1] is self.done:
            return  # started from this frame's pixels already
        marks, plain, before = self._screen_work(frame, self.done)
        done = self.done
        # "before" is already being encoded since the last action (done.before, made only when
        # summarizing): no worker need wait for it
        futures = [run_in_background(marks), run_in_background(plain),
                   done.before if done is not None and done.before is not None else run_in_background(before)]
        self._prepared = (frame.pixels, self.done, futures)

    def prepare(self, obs: Observation) -> None:
        """The same when the screenshot arrives, unless it was started from its pixels already."""
        pixels = getattr(obs.screenshot, "_image", None)
        if pixels is not None and self._prepared is not None and self._prepared[0] is pixels:
            return
        self.prepare_pixels(self._shown(obs))

    def _prepared_for(self, obs: Observation) -> list[Any] | None:
        """The jobs :meth:`prepare_pixels` or :meth:`prepare` started for this screenshot, if any."""
        prepared, self._prepared = self._prepared, None
        if prepared is None or prepared[1] is not self.done:
            return None
        made_from = prepared[0]
        if made_from is obs.screenshot or made_from is getattr(obs.screenshot, "_image", None):
            return prepared[2]
        return None

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        trace = StepTrace(prompt=self._prompts())
        lang = language_name(c.lang, obs.language)
        prepared = self._prepared_for(obs)
        if prepared is not None:
            # made by prepare(); an InfraError from the hierarchy is raised here, as inline
            marks_f, plain_f, before_f = prepared
            marks, before = marks_f.result(), before_f.result()
            trace.extra["prepared"] = True
        else:
            marks_job, plain_job, before_job = self._screen_work(self._shown(obs), self.done)
            plain_f = run_in_background(plain_job)
            marks, before = marks_job(), before_job()
        # the plain screenshot is first needed by the action call: it may still be encoding while
        # the summary call (which sends the marked screens) is on the wire
        trace.extra.update(marks.notes)
        elements, elements_text, som = marks.elements, marks.elements_text, marks.som
        trace.lap("screen")
        # --- the second call for the previous step, now that its after-screen is here ------------
        if self.done is not None:
            d, self.done = self.done, None
            if before is not None and marks.after is not None:
                after = marks.after
                trace.images += [image_record(before, "summary before"), image_record(after, "summary after")]
                text = self.summary_prompt.render(goal=obs.instruction, before_elements=d.elements_text,
                                                  after_elements=elements_text, action=d.action_json,
                                                  reason=d.reason or "-", language=lang)
                trace.lap("summary_prompt")
                # AndroidWorld's predict_mm: the prompt's text, then the images
                res = self.chat([{"role": "user", "content": [{"type": "text", "text": text}, before.part(),
                                                              after.part()]}], trace, "summary")
                summary = _one_line(res.text)
                trace.extra["summary"] = summary
            else:
                summary = ""
            self.history.append(history_line(d.index, d.action_json, summary))
        self.history += self.later
        self.later = []
        # --- action selection -------------------------------------------------------------------
        history = "\n".join(self.history) or "None yet: this is the first step."
        text = self.action_prompt.render(goal=obs.instruction, history=history, elements=elements_text, language=lang)
        trace.lap("prompt")
        raw_enc, som_enc = plain_f.result(), marks.marked.result()
        trace.images += [image_record(raw_enc, "screenshot"), image_record(som_enc, "set-of-mark")]
        trace.lap("encode")
        trace.extra.update({"history_lines": len(self.history), "language": lang})
        res = self.chat([{"role": "user", "content": [{"type": "text", "text": text}, raw_enc.part(), som_enc.part()]}],
                        trace, "action")
        parsed, err = read_reply(lambda t: parse_detailed(t, obs.screen_size, elements, c.enter_after_input), res.text)
        n = len(self.history) + 1
        self.proposed = None
        if parsed is None:
            self.history.append(f"Step {n}- The output could not be used ({str(err)[:120]}); nothing was done. "
                                "Answer with one action from the list in the JSON format.")
        elif not isinstance(parsed.action, Finish):
            policy = self.policy()
            # the summary call at the next step sends this marked screen as "before": it is encoded
            # now, while the action runs and the phone settles, not on that step's clock
            before = run_in_background(lambda: encode_pixels(label_image(som, "before"), policy)) \
                if c.summarize else None
            self.done = _Done(index=n, som=som, elements_text=elements_text,
                              action_json=history_action(parsed.raw), reason=parsed.thought or "",
                              before=before)
            self.proposed = (n, self.done.action_json)
        return self.output(res.text, parsed, err, trace, obs.step)


def history_action(raw: dict[str, Any]) -> str:
    """The model's JSON action as M3A's history line and summary prompt show it: AndroidWorld's
    ``json.dumps`` of the parsed object with the defaults (non-ASCII as ``\\u`` escapes, ``", "`` and
    ``": "``; m3a_utils.py ``parse_reason_action_output``, commit d9c569f), keys in the model's order;
    the element we resolved it to (``raw["element"]``) is ours and left out."""
    return json.dumps({k: v for k, v in raw.items() if k != "element"})


def history_line(n: int, action: str, summary: str = "") -> str:
    """Step ``n``'s history line as M3A writes it (m3a.py: ``'Step ' + str(i + 1) + '- '`` and
    ``f'Action selected: {action}. {summary}'``); without a summary it ends at the full stop."""
    return f"Step {n}- Action selected: {action}. {summary}".rstrip()


def _one_line(text: str) -> str:
    t = re.sub(r"^\s*(Summary of this step|Summary)\s*:\s*", "", (text or "").strip(), flags=re.I)
    t = " ".join(t.split())
    return t[:400] if t else "(no summary)"


@AGENTS.register("m3a", M3AConfig, help="M3A-style: Set-of-Mark screenshot, JSON action over element indexes, step summaries")
def _build(config: M3AConfig) -> M3AAgent:
    return M3AAgent(config, "m3a")
