"""``autoglm``: AutoGLM-Phone as Open-AutoGLM runs it (zai-org/Open-AutoGLM @6b18d7b: phone_agent/agent.py,
model/client.py, actions/handler.py, config/prompts_zh.py and prompts_en.py). The prompts'
wording (``agents/prompts/autoglm_zh.md``, ``autoglm_en.md``) is ours; their action lists, output
format and coordinate statement are the source's.

- Output: ``<think>...</think><answer>do(action="Tap", element=[x, y])</answer>`` or
  ``finish(message="...")``. The client splits a reply where its parser does (``_parse_response``:
  at ``finish(message=``, else at ``do(action=``, else at ``<answer>``) and writes the model's turn
  back into the conversation as ``<think>{thinking}</think><answer>{action}</answer>`` from those two
  parts, as it does (:func:`split_response`, :func:`history_turn`).
- Points: the prompt's grid runs from (0,0) to (999,999); the handler maps ``x / 1000 * width``
  (``_convert_relative_to_absolute``), so a point is read on the 0-1000 grid (the nearest pixel; the
  handler truncates with ``int()``: at most one pixel apart).
- Actions (the Chinese prompt's; the English one offers Tap, Type, Swipe, Long Press, Launch, Back
  and finish only, and any is read in either): Launch (open_app), Tap, Type and Type_Name (the
  field is cleared first: "any text in it is cleared before the new text"), Swipe (the finger's
  path, 1-2 s by distance as ``adb/device.py swipe`` times it), Long Press (3 s, its default),
  Double Tap, Back, Home, Wait (``duration="x seconds"``; unreadable: 1 s, as the handler does),
  finish (an answer with the message, then finish).
- Take_over ("help from the user at login and verification") is ``needs_user`` with its message;
  Interact ("several options fit: ask the user which") is ``needs_user`` too, with the thought as
  the question. A Tap with ``message`` is a sensitive action: the handler asks for confirmation
  and ends the task when it is refused; here the runner asks the operator before the tap
  (:attr:`harness.core.episode.AgentOutput.confirm`) and the episode halts when it is refused or
  nobody can answer. Note and Call_API do nothing on the phone in the handler (placeholders): they
  are :class:`harness.core.actions.Note` steps, recorded and not run.
- Requests (``agent.py _execute_step``): the system prompt (today's date, then the prompt; ``lang``
  zh or en); per step a user turn with the screenshot then ``{task}\\n\\n{screen info}`` on the
  first step and ``** Screen Info **\\n\\n{screen info}`` later, the screen info being
  ``{"current_app": ...}``; once answered, the turn's screenshot is removed, so only the current one
  is sent. The screenshot goes as captured (PNG): the grid is relative, the size does not matter.
- ``current_app``: Open-AutoGLM names the app from its own table of packages and says "System Home"
  for any other; here it is the package in front in the uiautomator dump ("System Home" on a
  launcher).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from harness.core.actions import (Action, Answer, Click, CoordSpace, DoubleTap, Finish, Key, LongPress, NeedsUser, Note,
                                  OpenApp, Swipe, TypeText, Wait, from_device)
from harness.core.episode import AgentOutput, EpisodeContext, Observation
from harness.core.hierarchy import parse as parse_hierarchy
from harness.client.config import ModelConfig
from harness.client.images import encode_image
from harness.core.registry import AGENTS

from agents.common import ModelAgent, StepTrace, image_record
from agents.parsing import (ParseError, Parsed, answer_then_finish, clean_text, device_point, point_of, read_reply,
                            register_parser)
from agents.prompts import load_prompt, sha12
from agents.tars_calls import parse_call

SOURCE = "zai-org/Open-AutoGLM @6b18d7bed0a8b5696760b06f7d18065b150901a2"
SPACE = CoordSpace.THOUSAND        # handler: x / 1000 * width (the prompt states 0-999)
LONG_PRESS_MS = 3000               # adb/device.py long_press(duration_ms=3000)
ACTIONS_ZH = ("Launch", "Tap", "Type", "Type_Name", "Interact", "Swipe", "Note", "Call_API", "Long Press",
              "Double Tap", "Take_over", "Back", "Home", "Wait", "finish")
ACTIONS_EN = ("Tap", "Type", "Swipe", "Long Press", "Launch", "Back", "finish")
_NAMES = {a.lower().replace(" ", "_"): a for a in ACTIONS_ZH}
_WEEKDAYS = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
SYSTEM_HOME = "System Home"        # the client's word for a screen of no app in its table


def split_response(content: str) -> tuple[str, str]:
    """(thinking, action) of a reply, split where Open-AutoGLM's client splits it (model/client.py
    ``_parse_response``): before ``finish(message=``, else before ``do(action=``, else at ``<answer>``
    (tags removed), else no thinking and the whole reply as the action."""
    for marker in ("finish(message=", "do(action="):
        if marker in content:
            head, tail = content.split(marker, 1)
            return head.strip(), marker + tail
    if "<answer>" in content:
        head, tail = content.split("<answer>", 1)
        return head.replace("<think>", "").replace("</think>", "").strip(), tail.replace("</answer>", "").strip()
    return "", content


def history_turn(thinking: str, action: str) -> str:
    """The model's turn as the client writes it back (agent.py ``create_assistant_message``)."""
    return f"<think>{thinking}</think><answer>{action}</answer>"


def _thought(thinking: str) -> str | None:
    t = re.sub(r"</?(think|answer)>", "", thinking).strip()
    return t or None


_TEXT_ARG = re.compile(r'^(do\(\s*action\s*=\s*"(?:Type|Type_Name)"\s*,\s*text\s*=|finish\(\s*message\s*=)\s*')


def _text_argument(action: str, notes: list[str]) -> str | None:
    """The text of Type, Type_Name and finish, read as the handler reads it: everything from the
    opening quote to the last quote before the closing parenthesis (a text may hold quotes and line
    breaks of its own); None for other calls."""
    m = _TEXT_ARG.match(action)
    if not m:
        return None
    rest = action[m.end():]
    if not rest or rest[0] not in "\"'":
        raise ParseError(f"{action[:m.end()]}... has no quoted text")
    q, body = rest[0], rest[1:]
    end = body.rfind(q + ")")
    if end < 0:
        end = body.rfind(q)
        notes.append("the call is not closed (truncated output?)")
        if end < 0:
            end = len(body)
    tail = body[end + 1:].lstrip(")").strip()
    if tail:
        notes.append(f"ignored text after the call: {tail[:30]!r}")
    return body[:end]  # as written: the handler types the text between the quotes, escapes and all


def _point(args: dict[str, str], key: str, name: str, screen: tuple[int, int], notes: list[str]) -> tuple[int, int]:
    if not args.get(key):
        raise ParseError(f"{name} needs {key}=[x,y]")
    x, y = point_of(args[key], key, notes)
    return device_point(x, y, SPACE, screen, what=key)


def _swipe_ms(start: tuple[int, int], end: tuple[int, int]) -> int:
    """adb/device.py swipe: ``int(dist_sq / 1000)`` clamped to 1000-2000 ms (device pixels)."""
    dist_sq = (start[0] - end[0]) ** 2 + (start[1] - end[1]) ** 2
    return max(1000, min(int(dist_sq / 1000), 2000))


def parse_detailed(text: str, screen_size: tuple[int, int]) -> Parsed:
    """One AutoGLM reply as unified actions. ``raw`` holds the action as written (``action``), its
    arguments, and ``sensitive`` (its message) when a Tap is marked sensitive."""
    t, notes = clean_text(text, keep_think=True)
    thinking, action = split_response(t)
    action = re.sub(r"\s*</answer>\s*$", "", action.strip())  # the format's own closing tag
    thought = _thought(thinking)
    if not action.startswith(("do(", "finish(")):
        m = re.search(r"\b(do|finish)\s*\(", action)
        if not m:
            raise ParseError(f"no do(action=...) or finish(message=...) in the output: {action[:60]!r}")
        action = action[m.start():]
        notes.append("text before the call ignored")
    text_arg = _text_argument(action, notes)
    if action.startswith("finish"):
        return Parsed(actions=answer_then_finish(text_arg), raw={"action": "finish", "message": text_arg},
                      thought=thought, notes=notes)
    call = parse_call(action)
    notes += call.notes
    args = dict(call.args)
    if text_arg is not None:
        args["text"] = text_arg
    tail = action[call.end:].strip()
    if tail and text_arg is None:
        notes.append(f"ignored text after the call: {tail[:30]!r}")
    written = args.pop("action", "")
    name = _NAMES.get(written.strip().lower().replace(" ", "_").replace("-", "_"))
    if name is None:
        raise ParseError(f"unknown AutoGLM action {written!r} (known: {', '.join(ACTIONS_ZH)})")
    acts: list[Action]
    if name == "Tap":
        x, y = _point(args, "element", name, screen_size, notes)
        acts = [Click(x=x, y=y)]
    elif name == "Long Press":
        x, y = _point(args, "element", name, screen_size, notes)
        acts = [LongPress(x=x, y=y, duration_ms=LONG_PRESS_MS)]
    elif name == "Double Tap":
        x, y = _point(args, "element", name, screen_size, notes)
        acts = [DoubleTap(x=x, y=y)]
    elif name == "Swipe":
        start = _point(args, "start", name, screen_size, notes)
        end = _point(args, "end", name, screen_size, notes)
        acts = [Swipe(start=start, end=end, duration_ms=_swipe_ms(start, end))]
    elif name in ("Type", "Type_Name"):
        if "text" not in args:
            raise ParseError(f"{name} needs text")
        acts = [TypeText(text=args["text"], clear=True)]  # "any text in the field is cleared first"
    elif name == "Launch":
        app = (args.get("app") or "").strip()
        if not app:
            raise ParseError("Launch needs app")
        acts = [OpenApp(app=app)]
    elif name in ("Back", "Home"):
        acts = [Key(key=name.lower())]
    elif name == "Wait":
        raw_d = args.get("duration") or "1 seconds"
        try:
            seconds = float(str(raw_d).lower().replace("seconds", "").replace("second", "").strip())
            if not math.isfinite(seconds):
                raise ValueError(raw_d)
        except ValueError:
            seconds = 1.0  # handler: a duration it cannot read waits 1 s
            notes.append(f"Wait duration {raw_d!r} unreadable: 1 s, as Open-AutoGLM's handler waits")
        acts = [Wait(seconds=min(max(seconds, 0.0), 60.0))]
    elif name == "Take_over":
        acts = [NeedsUser(text=(args.get("message") or "").strip())]
    elif name == "Interact":
        acts = [NeedsUser(text="")]  # the question is the step's thought (Parsed fills it in)
    else:  # Note, Call_API: placeholders in the handler; recorded here, nothing runs on the phone
        said = args.get("message") if name == "Note" else args.get("instruction")
        acts = [Note(text=f"{name}: {said or ''}".strip()[:10_000])]
    raw = {"action": name, "args": args}
    if name == "Tap" and "message" in args:  # a sensitive tap: the operator is asked first
        raw["sensitive"] = args["message"]
    return Parsed(actions=acts, raw=raw, thought=thought, notes=notes)


def parse_output(text: str, screen_size: tuple[int, int], **_: Any) -> Action:
    return parse_detailed(text, screen_size).action


register_parser("autoglm", lambda text, size, **_: parse_detailed(text, size), {})


# --- writing an action as AutoGLM does (ground-truth history) ----------------------------------------
def autoglm_call(action: Action, screen: tuple[int, int]) -> str:
    """A unified action as AutoGLM's pseudo-code, points on its 0-999 grid."""
    def xy(x: int, y: int) -> str:
        fx, fy = from_device(x, y, SPACE, screen)
        return f"[{min(round(fx), 999)},{min(round(fy), 999)}]"

    def q(s: str) -> str:
        return json.dumps(s, ensure_ascii=False)

    if isinstance(action, Click):
        return f'do(action="Tap", element={xy(action.x, action.y)})'
    if isinstance(action, LongPress):
        return f'do(action="Long Press", element={xy(action.x, action.y)})'
    if isinstance(action, DoubleTap):
        return f'do(action="Double Tap", element={xy(action.x, action.y)})'
    if isinstance(action, Swipe):
        return f'do(action="Swipe", start={xy(*action.start)}, end={xy(*action.end)})'
    if isinstance(action, TypeText):
        return f'do(action="Type", text={q(action.text)})'
    if isinstance(action, OpenApp):
        return f'do(action="Launch", app={q(action.app)})'
    if isinstance(action, Key) and action.key in ("back", "home"):
        return f'do(action="{action.key.title()}")'
    if isinstance(action, Wait):
        return f'do(action="Wait", duration="{action.seconds:g} seconds")'
    if isinstance(action, Answer):
        return f"finish(message={q(action.text)})"
    if isinstance(action, Finish):
        return 'finish(message="")'
    if isinstance(action, NeedsUser):
        return f'do(action="Take_over", message={q(action.text)})'
    if isinstance(action, Note):
        return f'do(action="Note", message={q(action.text)})'
    raise ValueError(f"no AutoGLM form for {action!r}")


def screen_info(app: str) -> str:
    """The client's ``build_screen_info``: ``{"current_app": app}`` as JSON (non-ASCII as is)."""
    return json.dumps({"current_app": app}, ensure_ascii=False)


def app_in_front(xml: str) -> str:
    """The package of the app in front in a uiautomator dump; "System Home" for a launcher."""
    packages = [e.package for e in parse_hierarchy(xml) if e.package and e.package != "com.android.systemui"]
    if not packages:
        return SYSTEM_HOME
    pkg = max(set(packages), key=packages.count)
    return SYSTEM_HOME if "launcher" in pkg or pkg.endswith(".home") else pkg


def date_line(lang: str, today: date) -> str:
    """The date the source puts first in its prompt: ``%Y年%m月%d日 星期X`` (zh), ``%Y-%m-%d, %A`` (en)."""
    if lang == "zh":
        return today.strftime("%Y年%m月%d日") + " " + _WEEKDAYS[today.weekday()]
    return today.strftime("%Y-%m-%d, %A")


# --- the agent ---------------------------------------------------------------------------------
@dataclass
class AutoGLMConfig:
    model: ModelConfig | None = field(default=None, metadata={"help": "endpoint (from --model-base-url/--model)"})
    lang: Literal["auto", "zh", "en"] = field(default="zh", metadata={
        "help": "system prompt: zh (Open-AutoGLM's default, the full action list), en, or auto (the task's)"})
    image_format: Literal["png", "jpeg"] = field(default="png", metadata={"help": "screenshot encoding"})
    jpeg_quality: int = field(default=90, metadata={"help": "JPEG quality when image_format=jpeg"})


class AutoGLMAgent(ModelAgent):
    family = "autoglm"

    def __init__(self, config: AutoGLMConfig, name: str = "autoglm"):
        super().__init__(config, name)
        self.prompts = {"zh": load_prompt("autoglm_zh"), "en": load_prompt("autoglm_en")}
        self.users: list[str] = []        # each earlier step's user text (its screenshot removed)
        self.infos: dict[int, str] = {}   # step -> the screen info it was sent (for a ground-truth history)

    def spec(self) -> dict[str, Any]:
        return {**self.base_spec(), "prompt": {k: p.to_json() for k, p in self.prompts.items()}, "source": SOURCE,
                "coordinate_space": "0-999 grid read as x / 1000 of the screen (the handler's mapping)",
                "image_encoding": f"{self.config.image_format}, the screenshot as captured (relative points)",
                "history_form": "<think>{thinking}</think><answer>{action}</answer> per step, screenshots removed"}

    def encodings(self, screen: tuple[int, int]) -> list[tuple[Any, tuple[int, int] | None]]:
        return [(self.policy(), None)]

    def reset(self, ctx: EpisodeContext) -> None:
        super().reset(ctx)
        self.users = []
        self.infos = {}

    def _lang(self, obs_language: str) -> str:
        code = obs_language if self.config.lang == "auto" else self.config.lang
        return code if code in self.prompts else "zh"

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        return history_turn("", autoglm_call(action, screen))

    def replace_history(self, texts: list[str]) -> None:
        """Ground-truth turns: each step's user text with the screen info it was sent (a static run
        asks every step in order, so the agent saw each earlier screen), then the action."""
        task = self.ctx.task.instruction if self.ctx else ""
        self.users = [self._user_text(k, task, self.infos.get(k + 1, screen_info("unknown")))
                      for k in range(len(texts))]
        self.turns = [(b"", t) for t in texts]

    @staticmethod
    def _user_text(k: int, task: str, info: str) -> str:
        return f"{task}\n\n{info}" if k == 0 else f"** Screen Info **\n\n{info}"

    def model_step(self, obs: Observation) -> AgentOutput:
        c = self.config
        lang = self._lang(obs.language)
        prompt = self.prompts[lang]
        trace = StepTrace(prompt=prompt.to_json())
        today = date.today()
        system = prompt.render(date=date_line(lang, today))
        try:
            app = app_in_front(obs.hierarchy())
        except Exception as e:  # noqa: BLE001  (a dump that failed: the step goes on, and says so)
            app = SYSTEM_HOME
            trace.extra["current_app_error"] = f"{type(e).__name__}: {e}"[:300]
        info = screen_info(app)
        self.infos[obs.step] = info
        user_text = self._user_text(len(self.turns), obs.instruction, info)
        trace.prompt = {**trace.prompt, "rendered_sha256_12": sha12(system)}
        trace.lap("prompt")
        enc = encode_image(obs.screenshot, self.policy())
        trace.images.append(image_record(enc, "current"))
        trace.lap("encode")
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
        if -1 in self.told:
            messages.append({"role": "user", "content": [{"type": "text", "text": self.told[-1]}]})
        for i, ((_, said), earlier) in enumerate(zip(self.turns, self.users)):
            messages.append({"role": "user", "content": [{"type": "text", "text": earlier}]})
            messages.append({"role": "assistant", "content": said})
            if i in self.told:  # the turn's action was refused: what the agent was told (reflect)
                messages.append({"role": "user", "content": [{"type": "text", "text": self.told[i]}]})
        messages.append({"role": "user", "content": [enc.part(), {"type": "text", "text": user_text}]})
        trace.extra.update({"lang": lang, "date": today.isoformat(), "current_app": app})
        res = self.chat(messages, trace, "action")
        parsed, err = read_reply(lambda t: parse_detailed(t, obs.screen_size), res.text)
        try:
            thinking, action = split_response(clean_text(res.text, keep_think=True)[0])
        except ParseError:
            thinking, action = "", res.text or ""
        self.turns.append((obs.screenshot, history_turn(thinking, action)))
        self.users.append(user_text)
        out = self.output(res.text, parsed, err, trace, obs.step)
        if parsed is not None and "sensitive" in parsed.raw:  # a sensitive Tap: the operator decides first
            out.confirm = str(parsed.raw["sensitive"]) or "sensitive action"
        return out


@AGENTS.register("autoglm", AutoGLMConfig, help="AutoGLM-Phone (Open-AutoGLM): do(action=...) on a 0-999 grid, "
                                                 "take-over and sensitive-action confirmation")
def _build(config: AutoGLMConfig) -> AutoGLMAgent:
    return AutoGLMAgent(config, "autoglm")
