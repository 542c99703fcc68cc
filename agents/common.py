"""What the model-driven agents share: the model client, the per-step record (prompt identity,
images sent, bytes, usage and latency per call, parse notes, the agent layer's own time), and the
queue for model actions that take two device steps.

A :class:`ModelError` from the client (after its retries, or when its deadline passed: every
attempt must bring the whole reply within ``--model-timeout``) is raised out of ``step()``: the
runner ends the episode as ``model_error`` with the message (the endpoint failed, not the agent;
left out of SR like an infrastructure error). An output that does not parse is not
an error: it is an invalid step (``AgentOutput(action=None, invalid=reason)``) that counts toward
the step cap while the episode goes on. A reply cut by the client at its byte limit
(``--model-max-reply-bytes``) or by the server at ``max_tokens`` is marked ``truncated`` (with
``truncated_by``) in the step's extras, and an unparseable one says which limit to raise.

Every model agent reflects (:class:`harness.core.episode.ReflectingAgent`, ``--monitor-mode reflect``):
``reflect(feedback)`` turns a monitor's refusal into the feedback prompt (``agents/prompts/
feedback_en.md``, ``feedback_zh.md``) and puts it where the family's conversation takes a user's
word (docs/agents.md, "Feedback after a refused action"); the multi-turn families (uitars, vlm)
keep it after the refused turn, Qwen and M3A override where it goes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from harness.core.actions import Action, action_to_json
from harness.core.episode import AgentOutput, CandidatePixels, EpisodeContext, Feedback, Observation
from harness.client.calls import ModelClient
from harness.client.config import ChatResult, ModelConfig
from harness.client.images import EncodedImage, ImagePolicy, prefetch, prefetch_pixels
from harness.client.slots import Priority
from harness.records import THOUGHT_CHARS
from harness.core.registry import RegistryError

from agents.parsing import Parsed, ParseError, clean_text, read_reply, with_tool_calls
from agents.prompts import Prompt, load_prompt

RAW_STRING_CHARS = 1000  # the most of one string a cut raw_action keeps


def kept_raw_action(raw: Any) -> tuple[Any, dict[str, Any] | None]:
    """The model's own action as parsed, as a step's ``extras.raw_action`` keeps it, and the note a
    cut one gets (``raw_action_cut``). Its strings repeat the reply's (UI-TARS: the call, its
    arguments and the package's inputs each hold a typed text), so a raw action whose JSON passes
    THOUGHT_CHARS keeps the first RAW_STRING_CHARS of each longer string: the whole is in the
    step's ``raw_output``, and a reply is stored once."""
    size = len(json.dumps(raw, ensure_ascii=False, default=str))
    if size <= THOUGHT_CHARS:
        return raw, None

    def cut(v: Any) -> Any:
        if isinstance(v, str):
            return v[:RAW_STRING_CHARS]
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [cut(x) for x in v]
        return v

    return cut(raw), {"chars": size, "strings_kept": RAW_STRING_CHARS, "whole_in": "raw_output"}


LANGUAGES = {"en": "English", "zh": "Chinese"}
FEEDBACK_REASON_CHARS = 600  # a monitor's reason is cut here before it goes to the agent (one line)
FEEDBACK_CATEGORY_CHARS = 80  # ... and its category (MobileRisk's names are under 30 characters)


def feedback_prompts() -> dict[str, Prompt]:
    return {code: load_prompt(f"feedback_{code}") for code in LANGUAGES}


def feedback_text(feedback: Feedback, language: str = "en") -> str:
    """The feedback prompt in ``language`` (en, zh; others: en) filled in from ``feedback``: the
    monitor, the category (``unspecified`` when it gave none) and the reason, model text each on
    one line and cut, the category at :data:`FEEDBACK_CATEGORY_CHARS` characters and the reason at
    :data:`FEEDBACK_REASON_CHARS`."""
    prompts = feedback_prompts()
    return prompts.get(language, prompts["en"]).render(
        monitor=feedback.monitor or "monitor", category=_one_line(feedback.category, FEEDBACK_CATEGORY_CHARS,
                                                                  "unspecified"),
        reason=_one_line(feedback.reason, FEEDBACK_REASON_CHARS, "-")).strip()


def _one_line(text: str | None, limit: int, empty: str) -> str:
    s = " ".join(str(text or "").split()) or empty
    return s if len(s) <= limit else s[:limit - 1] + "…"


def need_model(name: str, model: ModelConfig | None) -> ModelConfig:
    if model is None:
        raise RegistryError(f"agent {name!r} needs a model endpoint: pass --model-base-url URL --model NAME")
    return model


def language_name(option: str, task_language: str) -> str:
    """``auto`` follows the task's language (Chinese tasks get Chinese thoughts)."""
    code = task_language if option == "auto" else option
    return LANGUAGES.get(code, "English")


def image_record(enc: EncodedImage, role: str, server_size: tuple[int, int] | None = None) -> dict[str, Any]:
    """What was sent: its size, bytes and format; ``server_resizes_to`` when it went as captured and
    the server's processor resizes it to the size the model points in."""
    rec = {"role": role, "size": [enc.width, enc.height], "source_size": list(enc.source_size),
           "bytes": enc.bytes, "format": enc.format}
    if server_size is not None and tuple(server_size) != (enc.width, enc.height):
        rec["server_resizes_to"] = list(server_size)
    return rec


@dataclass(frozen=True)
class ServerResize:
    """The resize a model's server does itself: vLLM, SGLang and transformers run the model's own
    image processor (``preprocessor_config.json``), Qwen2-VL's ``smart_resize`` with ``factor`` and
    pixel limits, resampling bicubic. A screenshot it turns into the size the agent would send can go
    as captured: the model sees the same size and the coordinate mapping is unchanged."""

    factor: int
    min_pixels: int
    max_pixels: int
    source: str

    def size(self, screen: tuple[int, int]) -> tuple[int, int]:
        from ui_tars.action_parser import smart_resize

        w, h = screen
        rh, rw = smart_resize(h, w, factor=self.factor, min_pixels=self.min_pixels, max_pixels=self.max_pixels)
        return rw, rh

    def to_json(self) -> dict[str, Any]:
        return {"factor": self.factor, "min_pixels": self.min_pixels, "max_pixels": self.max_pixels,
                "source": self.source}


def send_size(screen: tuple[int, int], size: tuple[int, int], server: ServerResize | None, send: str,
              image_format: str, as_captured: str | None = None) -> tuple[int, int] | None:
    """The size to encode a screenshot of ``screen`` at, for a model that points in ``size``: None
    (as captured) when ``send`` is ``auto``, the image goes as PNG and either ``server`` resizes it
    to ``size`` itself or ``as_captured`` says why the family's deployment takes the screenshot as
    it is (a model pointing on a 0-1000 grid of the image it was given: the point maps to the same
    phone pixel at any image size); else ``size``."""
    if send == "auto" and image_format == "png":
        if as_captured or (server is not None and server.size(screen) == tuple(size)):
            return None
    return size


def encoding_note(server: ServerResize | None, send: str, image_format: str, as_captured: str | None = None) -> str:
    """The encoding choice in words, for the agent's spec (the manifest)."""
    if image_format != "png":
        return f"{image_format} at the smart_resize size, encoded here"
    if send == "auto" and as_captured:
        return f"the captured PNG as it is: {as_captured}"
    if send == "auto" and server is not None:
        return ("the captured PNG as it is when the server's processor resizes it to the smart_resize size itself "
                f"({server.source}); else resized here and sent as a lossless PNG")
    return "resized here to the smart_resize size, sent as a lossless PNG (the same pixels at any zlib level)"


def request_bytes(messages: list[dict[str, Any]]) -> int:
    """Approximate size of a request body: text plus base64 image payloads."""
    total = 0
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            total += len(c.encode("utf-8"))
            continue
        for p in c or []:
            if p.get("type") == "text":
                total += len(p["text"].encode("utf-8"))
            elif p.get("type") == "image_url":
                total += len(p["image_url"]["url"])
    return total


def sum_usage(calls: list[dict[str, Any]]) -> dict[str, int]:
    out = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for c in calls:
        for k in out:
            out[k] += int((c.get("usage") or {}).get(k, 0) or 0)
    return out


@dataclass
class StepTrace:
    """Collects what one step records in ``AgentOutput.extras``."""

    prompt: dict[str, Any]
    images: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    overhead_ms: dict[str, float] = field(default_factory=dict)
    bytes_sent: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    _t: float = field(default_factory=time.perf_counter)

    def lap(self, what: str) -> None:
        """Add the time since the last lap to ``overhead_ms[what]``."""
        now = time.perf_counter()
        self.overhead_ms[what] = round(self.overhead_ms.get(what, 0.0) + (now - self._t) * 1000, 3)
        self._t = now

    def skip(self) -> None:
        """Restart the lap clock without counting (time spent waiting on the model)."""
        self._t = time.perf_counter()

    def to_json(self) -> dict[str, Any]:
        out = {"prompt": self.prompt, "images": self.images, "bytes_sent": self.bytes_sent, "calls": self.calls,
               "usage": sum_usage(self.calls), "latency_s": round(sum(c.get("latency_s", 0) for c in self.calls), 4),
               "overhead_ms": self.overhead_ms}
        out.update(self.extra)
        return out


class ModelAgent:
    """Base for the model-driven agents: a client, a pending-action queue, recorded calls, and the
    conversation so far (``turns``).

    A subclass writes ``model_step(obs)``: one model call (or more) and its output. ``step()`` calls
    it unless the last model action left a second device step queued."""

    name = "model"
    family = "model"

    def __init__(self, config: Any, name: str):
        self.name = name
        self.config = config
        self.model = need_model(name, config.model)
        self.client = ModelClient(self.model)
        self.pending: list[tuple[Action, dict[str, Any]]] = []
        self.step_no = 0
        self.ctx: EpisodeContext | None = None
        self.turns: list[tuple[bytes, str]] = []  # (screenshot, the model's output) per earlier model step
        self.told: dict[int, str] = {}  # turn index -> the feedback the agent was given after that turn
        self.queued_step = False  # the last step was the queued second half of a model action

    # --- episode ------------------------------------------------------------------------------
    def encodings(self, screen: tuple[int, int]) -> list[tuple[ImagePolicy, tuple[int, int] | None]]:
        """The encodings of a new screenshot of ``screen`` a model step asks :func:`harness.client.images
        .encode_image` for, ``(policy, size)`` (what :meth:`prepare` and :meth:`prepare_pixels`
        start early)."""
        return []

    def prepare(self, obs: Observation) -> None:
        """Start encoding the new screenshot as soon as it arrives (harness.core.episode.PreparingAgent),
        unless the next step is the queued second half of the last action (no model call)."""
        if self.pending:
            return
        for policy, size in self.encodings(obs.screen_size):
            prefetch(obs.screenshot, policy, size)

    def prepare_pixels(self, frame: CandidatePixels) -> None:
        """The same from a raw frame's pixels, before its PNG is encoded
        (harness.core.episode.PixelPreparingAgent)."""
        if self.pending:
            return
        for policy, size in self.encodings(frame.screen_size):
            prefetch_pixels(frame.pixels, policy, size)

    def reset(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.pending = []
        self.step_no = 0
        self.turns = []
        self.told = {}

    # --- feedback after a refused action (harness.core.episode.ReflectingAgent) --------------------
    def feedback_language(self) -> str:
        """The language of the feedback turn: English, the language of the families' prompts (vlm
        follows its prompt's language)."""
        return "en"

    def reflect(self, feedback: Feedback) -> str:
        """The multi-turn families (uitars, vlm): the feedback is a user turn right after the turn
        whose action was refused (the model's output stays in the history, as it was written; for a
        refused second half, after the turn it came from, whose first half ran); a queued second
        half of the refused action is dropped. Several in a row follow each other. Returns the
        turn's text."""
        self.pending = []
        text = feedback_text(feedback, self.feedback_language())
        at = len(self.turns) - 1
        self.told[at] = f"{self.told[at]}\n{text}" if at in self.told else text
        return text

    def feedback_spec(self) -> dict[str, Any]:
        """The feedback prompts' identities (the manifest's agent spec)."""
        return {code: p.to_json() for code, p in feedback_prompts().items()}

    def step(self, obs: Observation) -> AgentOutput:
        """The queued second half of the last model action when there is one, else ``model_step``."""
        self.step_no = obs.step
        queued = self.take_pending()
        self.queued_step = queued is not None  # (what reflect() refuses: a model step, or a queued half)
        if queued is not None:
            return queued
        return self.model_step(obs)

    def model_step(self, obs: Observation) -> AgentOutput:
        """Ask the model for the next action (the agent's own protocol)."""
        raise NotImplementedError(f"{type(self).__name__} has no model_step")

    def first_kept(self, history: int) -> int:
        """Index of the first earlier turn whose screenshot still goes with the request, when a
        request carries ``history`` screenshots, the current one included."""
        return max(0, len(self.turns) - (history - 1))

    def take_pending(self) -> AgentOutput | None:
        """The second half of a model action that needs two device steps; no model call."""
        if not self.pending:
            return None
        action, extras = self.pending.pop(0)
        return AgentOutput(action=action, raw_output=None, thought=extras.get("note"), extras=extras)

    def queue_rest(self, parsed: Parsed, step: int, prompt: dict[str, Any]) -> None:
        for a in parsed.actions[1:]:
            self.pending.append((a, {"queued_from_step": step, "prompt": prompt,
                                     "note": f"continues the model action of step {step}"}))

    # --- model calls --------------------------------------------------------------------------
    def chat(self, messages: list[dict[str, Any]], trace: StepTrace, purpose: str) -> ChatResult:
        trace.bytes_sent += request_bytes(messages)
        trace.lap("build")
        # ModelError propagates: the runner records model_error (the endpoint's failure, not the agent's)
        res = self.client.chat(messages, priority=Priority.AGENT, meter=self.ctx.meter if self.ctx else None,
                               role="agent")
        trace.calls.append({"purpose": purpose, **res.to_json()})
        if res.tool_calls:  # returned the OpenAI way: read (and recorded) as the model wrote them
            res = dataclasses.replace(res, text=with_tool_calls(res.text, res.tool_calls))
        if res.truncated and purpose == "action":
            trace.extra["truncated"] = True
            trace.extra["truncated_by"] = res.truncated_by
        trace.skip()
        return res

    def policy(self) -> ImagePolicy:
        c = self.config
        return ImagePolicy(max_pixels=None, max_long_side=getattr(c, "max_side", None) or None,
                           format=c.image_format, jpeg_quality=c.jpeg_quality)

    # --- outputs ------------------------------------------------------------------------------
    def conclude(self, res: ChatResult, parse: Any, screenshot: bytes, trace: StepTrace, step: int,
                 empty: str = "") -> AgentOutput:
        """Parse a reply that answers with one action, remember what the model said for the history
        (the cleaned text, or the raw text when even cleaning fails), and build the step's output."""
        parsed, err = read_reply(parse, res.text)
        try:
            said = clean_text(res.text)[0]
        except ParseError:
            said = res.text or empty
        self.turns.append((screenshot, said))
        return self.output(res.text, parsed, err, trace, step)

    def output(self, text: str, parsed: Parsed | None, error: ParseError | None, trace: StepTrace,
               step: int) -> AgentOutput:
        trace.lap("parse")
        extras = trace.to_json()
        if parsed is None:
            extras["parse_error"] = str(error)
            cut = ""
            if extras.get("truncated_by") == "max_reply_bytes":
                cut = (f" (the reply passed {self.model.max_reply_bytes} bytes and was cut there: raise "
                       "--model-max-reply-bytes)")
            elif extras.get("truncated"):
                cut = f" (the reply was cut off at max_tokens={self.model.max_tokens}: raise --max-tokens)"
            return AgentOutput(action=None, raw_output=text, invalid=f"unparseable output: {error}{cut}", extras=extras)
        extras["raw_action"], raw_cut = kept_raw_action(parsed.raw)
        if raw_cut:
            extras["raw_action_cut"] = raw_cut
        if parsed.notes:
            extras["parse_notes"] = parsed.notes
        if len(parsed.actions) > 1:
            extras["then"] = [action_to_json(a) for a in parsed.actions[1:]]
        self.queue_rest(parsed, step, trace.prompt)
        return AgentOutput(action=parsed.actions[0], raw_output=text, thought=parsed.thought, extras=extras)

    def base_spec(self) -> dict[str, Any]:
        opts = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config) if f.name != "model"}
        return {"name": self.name, "family": self.family, "options": opts, "model": self.model.to_json(),
                "feedback_prompt": self.feedback_spec()}

    # --- static evaluation: the ground-truth history ------------------------------------------
    def set_history(self, actions: list[Action]) -> None:
        """Replace what the agent remembers of the earlier steps by ``actions``, the ground truth
        (``harness static run`` calls this before every step): the next request shows them, in the
        agent's own output format, where it would show its own earlier answers. A queued second half
        of the agent's own last action is dropped (it is not what happened).

        Per-agent hooks: ``history_text(action, screen)`` writes one action as the agent's model
        would (its points converted from device pixels of the episode's screen,
        ``EpisodeContext.screen_size``, by :func:`harness.core.actions.from_device`);
        ``replace_history(texts)`` puts those texts where the agent keeps its history (the default
        is for the multi-turn agents, ``uitars`` and ``vlm``)."""
        if self.ctx is None:
            raise RuntimeError(f"{self.name}: set_history() before reset(): no episode")
        self.pending = []
        self.told = {}
        self.replace_history([self.history_text(a, self.ctx.screen_size) for a in actions])

    def history_text(self, action: Action, screen: tuple[int, int]) -> str:
        """One ground-truth action as this agent's model writes it (hook of :meth:`set_history`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot render a ground-truth history")

    def replace_history(self, texts: list[str]) -> None:
        """The multi-turn agents: ``turns`` becomes one (screenshot, text) turn per ground-truth
        step, the text in place of the model's own output. The screenshot of step N is the one this
        agent was shown at step N of this episode (a static run asks every step in order, so the
        agent holds the earlier screens); only the turns in the request's screenshot window
        (``history`` - 1) need one, see :func:`ground_truth_turns`."""
        shown = self._screens_shown()
        rows = [(shown.screens.get(i + 1), text) for i, text in enumerate(texts)]
        self.turns = ground_truth_turns(rows, self.config.history - 1, self.name)
        shown.mark = len(self.turns)

    def _screens_shown(self) -> ScreensShown:
        """The screenshots this agent was shown in this episode, by step number: the turns added by
        its own steps since the last :meth:`set_history` (they end at ``step_no``)."""
        shown: ScreensShown | None = getattr(self, "_shown", None)
        if shown is None or shown.ctx is not self.ctx or len(self.turns) < shown.mark:
            shown = self._shown = ScreensShown(self.ctx)
        new = self.turns[shown.mark:]
        for k, (png, _) in enumerate(new):
            shown.screens[self.step_no - len(new) + 1 + k] = png
        return shown


@dataclass
class ScreensShown:
    """What :meth:`ModelAgent.set_history` keeps between calls within one episode."""

    ctx: EpisodeContext | None
    screens: dict[int, bytes] = field(default_factory=dict)
    mark: int = 0           # len(turns) after the last set_history: later turns are the agent's own


def ground_truth_turns(rows: list[tuple[bytes | None, str]], keep: int, who: str = "agent") -> list[tuple[bytes, str]]:
    """Turns of a multi-turn agent from (screenshot or None, text) per ground-truth step, oldest
    first, when a request shows the screenshots of the last ``keep`` turns.

    Older turns need no screenshot (their text goes alone). A step in the window whose screenshot
    the agent was never shown (its own call at that step failed) cannot be a turn of its own: its
    text joins the turn before it (the first steps: the first turn with a screenshot), so the
    request holds every ground-truth action, in order, and only screens the agent really saw.
    ValueError when the window needs a screenshot and the agent was shown none of these steps."""
    out: list[tuple[bytes, str]] = []      # newest first
    waiting: list[str] = []                # texts, oldest first, waiting for an older turn with a screen
    for png, text in reversed(rows):
        if len(out) < keep and png is None:
            waiting.insert(0, text)
            continue
        out.append((png or b"", "\n".join([text, *waiting])))
        waiting = []
    if waiting:
        if not out:
            raise ValueError(f"{who}: its requests show the screenshots of up to {keep} earlier steps, and it was "
                             f"shown none of the {len(rows)} steps of this ground-truth history (history=1 shows "
                             "the history as text only)")
        png, text = out[-1]
        out[-1] = (png, "\n".join([*waiting, text]))
    return out[::-1]
