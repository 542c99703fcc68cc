"""The small typed interfaces between the runner and what plugs into it: agents, pre-action
monitors, post-step observers (judges that consume the step stream while the run goes on), the
operator (a person the runner can ask), and the live records (what a live view is told while an
episode runs).

Data flows one way: the runner builds an :class:`Observation`, an :class:`Agent` answers with an
:class:`AgentOutput`, each :class:`Monitor` may veto it, the device executes it, and every
:class:`StepObserver` receives the finished :class:`StepEvent`. Agents, monitors and judges never
see the device itself, only what the runner hands them (the oracle gets the phone's state through
``EpisodeContext.query_state``, which the runner routes to the device). The runner tells a
:class:`LiveRecorder` what it is doing and puts a :class:`Question` to the :class:`Operator`;
``harness.live`` implements both (the run folder's live records, the terminal and the live page),
and the runner knows nothing of them but these protocols.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, runtime_checkable

from harness.core.actions import Action
from harness.records import now_iso
from harness.core.tasks import Task
from harness.core.usage import Meter

Status = Literal["finished", "halted", "step_limit", "agent_error", "model_error", "infra_error", "task_error",
                 "needs_user"]
Verdict = bool | Literal["judge_error"]


@dataclass
class EpisodeContext:
    """What plugins may know about the episode: the task, the device's size, the run's seed, and
    (for judges that need it) the phone's state. ``query_state`` returns None on a real phone.

    ``meter`` is the episode's usage meter: plugins pass it to every model call they make (with
    their own role name), so the episode's cost is counted where it is spent. ``live`` is False
    when recorded episodes are judged after the fact (their calls then wait behind live ones).

    ``report_evidence(judge, finding)``: a judge hands over a finding about one step as soon as it
    has it (``finding`` holds ``step`` and the judge's own fields); during a run it goes to the
    episode's ``evidence.jsonl``, which the live view shows. Offline it goes nowhere."""

    task: Task
    screen_size: tuple[int, int]
    seed: int
    device_serial: str
    query_state: Callable[[], dict[str, Any] | None] = lambda: None
    cap: int = 0
    episode_dir: str | None = None
    meter: Meter = field(default_factory=Meter)
    live: bool = True
    report_evidence: Callable[[str, dict[str, Any]], None] = lambda judge, finding: None
    workers: Any = None


@dataclass
class Observation:
    step: int                             # 1-based index of the step about to be taken
    screenshot: bytes                     # PNG of the current screen
    screen_size: tuple[int, int]
    hierarchy: Callable[[], str]          # the uiautomator dump, fetched only if asked for
    instruction: str
    language: str


@dataclass
class AgentOutput:
    """An agent's answer for one step: an action, or why its output was not a valid action."""

    action: Action | None
    raw_output: str | None = None
    invalid: str | None = None
    thought: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)  # prompt identity, usage, image sizes
    # the agent asks first (AutoGLM's sensitive Tap, "message"): its words; the action runs only if the
    # operator allows it, and the episode halts before it otherwise (nobody to ask: it halts)
    confirm: str | None = None


@runtime_checkable
class Agent(Protocol):
    name: str

    def reset(self, ctx: EpisodeContext) -> None:
        """Start a new episode (clear history)."""

    def step(self, obs: Observation) -> AgentOutput: ...

    def spec(self) -> dict[str, Any]:
        """Everything needed to rebuild this agent (for the manifest); no secrets."""


@dataclass(frozen=True)
class Feedback:
    """Why the agent's proposal of step ``step`` did not run (``--monitor-mode reflect``): the
    verdict of ``monitor`` that flagged it (``category``, ``reason``: model text, untrusted), and
    how many proposals in a row were flagged with it (``in_row``); the ``limit``-th halts (or asks)
    instead of being reflected on. The agent proposes again from the same screen."""

    step: int
    action: str                           # the flagged action, described (Action.describe)
    monitor: str
    category: str | None
    reason: str
    in_row: int
    limit: int
    score: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "action": self.action, "monitor": self.monitor, "category": self.category,
                "reason": self.reason, "score": self.score, "in_row": self.in_row, "limit": self.limit}


@runtime_checkable
class ReflectingAgent(Protocol):
    """An agent that can be told why its proposal was refused and propose again (optional; mode
    ``reflect`` needs it, and refuses an agent without it before any device is touched)."""

    def reflect(self, feedback: Feedback) -> str:
        """The proposal of the last step did not run, for ``feedback``'s reason: the next
        ``step()``'s request carries it, in the agent's own conversation form, and the proposal is
        out of the agent's plan (a queued second half of it is dropped). Returns exactly the text
        added to the conversation (recorded with the step)."""


@runtime_checkable
class PreparingAgent(Protocol):
    """An agent that starts work on a screenshot as soon as it arrives (optional)."""

    def prepare(self, obs: Observation) -> None:
        """The next step's observation is here and the step has not started: start, in the
        background, what the step will do with it that depends on nothing else (encoding the
        screenshot). Called while the device is still confirming that the screen has settled, so it
        may come more than once per step (for a frame that then changed) and must not change what
        the step decides."""


@dataclass(frozen=True)
class CandidatePixels:
    """A frame settling may make the next observation, as pixels, before its PNG is encoded (a raw
    frame's pixels arrive tens of ms before the PNG). The observation that follows carries the same
    image object (``harness.core.screenshot.image_of(obs.screenshot) is pixels``) when it is this frame."""

    step: int                             # the step it would be the observation of
    pixels: Any                           # PIL.Image.Image, RGB; do not modify
    screen_size: tuple[int, int]
    hierarchy: Callable[[], str]          # as Observation.hierarchy


@runtime_checkable
class PixelPreparingAgent(Protocol):
    """An agent that starts work on a frame's pixels before its PNG exists (optional; earlier than
    :class:`PreparingAgent`'s ``prepare``, under the same rules: best effort, maybe more than once
    per step, never changing what the step decides)."""

    def prepare_pixels(self, frame: CandidatePixels) -> None: ...


@dataclass
class MonitorVerdict:
    halt: bool
    risky: bool | None = None
    category: str | None = None
    reason: str = ""
    score: float | None = None
    monitor: str = ""
    error: str | None = None
    latency_s: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] | None = None   # tokens the check spent (None: no model call, or cached)
    operator: dict[str, Any] | None = None  # mode ask: the operator's decision (Decision.to_json)
    feedback: dict[str, Any] | None = None  # mode reflect: what the agent was told instead of a halt

    @property
    def failed(self) -> bool:
        """The check could not answer: its verdict is neither safe nor risky."""
        return self.error is not None

    @classmethod
    def check_failed(cls, monitor: Any, error: str) -> "MonitorVerdict":
        """The verdict of a check of ``monitor`` that could not answer: it halts unless the monitor
        lets such actions through (``on_error=allow``); it is never a safe verdict."""
        halt = getattr(monitor, "on_error", "halt") != "allow"
        return cls(halt=halt, risky=None, category="monitor_error" if halt else None,
                   reason=f"the check failed ({error}); " + ("halted before the action" if halt
                                                             else "the action ran unchecked (on_error=allow)"),
                   monitor=getattr(monitor, "name", ""), error=error, extras={"on_error": "halt" if halt else "allow"})

    def to_json(self) -> dict[str, Any]:
        out = {"monitor": self.monitor, "halt": self.halt, "risky": self.risky, "category": self.category,
               "reason": self.reason, "score": self.score, "latency_s": round(self.latency_s, 4)}
        if self.error:
            out["error"] = self.error
        if self.usage:
            out["usage"] = self.usage
        if self.extras:
            out["extras"] = self.extras
        if self.operator:
            out["operator"] = self.operator
            if self.operator.get("decision") == "allow":
                out["allowed_by"] = "operator"
        if self.feedback:
            out["reflected"] = True  # the action did not run, and the episode went on
        return out


MonitorMode = Literal["gate", "async", "ask", "reflect", "reflect,ask"]
REFLECT_MODES = ("reflect", "reflect,ask")
REFLECT_MAX = 2  # mode reflect: the flagged proposal in a row that halts, for a monitor that does not say


@dataclass
class ProposedStep:
    """What a pre-action monitor judges: the screen before the step and the proposed action."""

    index: int
    screenshot: bytes
    action: Action
    raw_output: str | None
    instruction: str
    language: str


@runtime_checkable
class Monitor(Protocol):
    """A pre-action check. ``mode``: ``gate`` judges before the action runs; ``async`` judges beside
    it, and the runner waits for the verdict before the next action runs (one step of lag, never
    more); ``ask`` is a gate whose halting verdict asks the :class:`Operator` first:
    the action runs if a person allows it; ``reflect`` is a gate whose halting verdict is told to
    the agent (:class:`ReflectingAgent`), which proposes again, until the ``reflect_max``-th
    flagged proposal in a row halts (``reflect,ask``: asks). ``on_error``: what a check that
    cannot answer (it raised, or took longer than ``timeout_s``) does: ``halt`` (the default when a
    monitor does not say) or ``allow``; a failed check is never reflected on."""

    name: str
    mode: MonitorMode
    on_error: Literal["halt", "allow"]
    timeout_s: float

    def start(self, ctx: EpisodeContext) -> None: ...

    def check(self, step: ProposedStep) -> MonitorVerdict: ...

    def spec(self) -> dict[str, Any]: ...


@dataclass
class StepEvent:
    """A finished step, as observers (judges) receive it. ``executed`` is False when the proposed
    action never reached the phone (a monitor halted it, the device refused it, the output was not
    a valid action): judges take such a step as known (nothing happened), never ask a model about
    it, credit no effect to it and never name it the first unsafe step."""

    index: int
    action: Action | None
    raw_output: str | None
    invalid: str | None
    screenshot_before: bytes
    screenshot_after: bytes | None
    screen_before_path: str
    screen_after_path: str | None
    thought: str | None = None
    monitor: dict[str, Any] | None = None
    executed: bool = True
    by: Literal["agent", "operator"] = "agent"  # operator: a person's touch during a hand-over

    @property
    def by_operator(self) -> bool:
        """A person did this step (a hand-over): judges see its effect on the phone and never
        credit or blame the agent for it."""
        return self.by == "operator"


@dataclass
class EpisodeEnd:
    status: Status
    steps: int                           # steps recorded (1..steps), executed or not
    final_screenshot: bytes | None
    answer: str | None                   # the agent's last answer(text), if any
    agent_finished: bool                 # the agent itself declared the episode over
    executed: frozenset[int] | None = None  # indexes of the steps whose action ran (None: all of them)
    by_operator: frozenset[int] = frozenset()  # indexes of the steps a person did (hand-overs)

    def ran(self, index: int) -> bool:
        return self.executed is None or index in self.executed


@runtime_checkable
class StepObserver(Protocol):
    """A judge that consumes the step stream during the run and gives verdicts at the end."""

    name: str

    def start(self, ctx: EpisodeContext) -> None: ...

    def on_step(self, event: StepEvent) -> None:
        """Called right after each step is recorded; must not block for long (start background
        work instead)."""

    def finish(self, end: EpisodeEnd) -> dict[str, tuple[Verdict, dict[str, Any]]]:
        """Verdicts by judge name, each with its details (conditions, reasons, marks)."""

    def spec(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------- live view and operator


@runtime_checkable
class LiveRecorder(Protocol):
    """What the runner tells a live view about one episode while it runs (``harness.live.records.
    EpisodeLive`` writes it into the episode's folder). Every method returns at once and never
    raises: a live view that cannot be told is the view's loss, never the episode's."""

    def started(self, **info: Any) -> None:
        """The episode began (task, device, cap, instruction, language)."""

    def step(self, index: int | None, state: str, **fields: Any) -> None:
        """Step ``index`` is being decided, in ``state`` (thinking, checking, asking, running,
        halted...); ``index`` None: the episode is past its steps (resetting, judging)."""

    def update(self, **fields: Any) -> None:
        """More about the step being decided (its state, thought, action, a question asked)."""

    def verdict(self, verdict: dict[str, Any]) -> None:
        """A monitor's verdict on the step being decided, as it arrives."""

    def recorded(self, index: int) -> None:
        """Step ``index`` is in the trajectory: what was shown of it as pending goes."""

    def evidence(self, judge: str, finding: dict[str, Any]) -> None:
        """A judge's finding about one step, as it lands (any thread)."""

    def clear(self) -> None:
        """Nothing is pending any more (the episode ended)."""


class NoLiveView:
    """The live recorder of an episode nobody watches: it is told everything and keeps nothing."""

    def started(self, **info: Any) -> None:
        pass

    def step(self, index: int | None, state: str, **fields: Any) -> None:
        pass

    def update(self, **fields: Any) -> None:
        pass

    def verdict(self, verdict: dict[str, Any]) -> None:
        pass

    def recorded(self, index: int) -> None:
        pass

    def evidence(self, judge: str, finding: dict[str, Any]) -> None:
        pass

    def clear(self) -> None:
        pass


# the answers each kind of question takes (the first word: what lets the episode go on as asked)
ANSWERS: dict[str, tuple[str, ...]] = {"flagged_action": ("allow", "deny"), "needs_user": ("hand_back", "give_up")}


@dataclass
class Question:
    """What the operator is asked about one step of one episode. ``kind`` says what is asked and
    which answers it takes (:data:`ANSWERS`): ``flagged_action``, the proposed ``action`` of
    ``step`` that ``monitor``'s verdict (``category``, ``reason``, ``error``, ``score``) would
    halt, answered allow or deny; ``needs_user``, the agent's call for a person at ``step``
    (``reason``: what the agent asks for), answered hand_back (the person did it on the phone) or
    give_up. The text fields are untrusted (model output): a channel shows them escaped."""

    episode_dir: Path
    task_id: str
    device: str
    step: int
    cap: int
    action: str
    monitor: str
    category: str | None
    reason: str
    error: str | None = None
    score: float | None = None
    kind: str = "flagged_action"


@dataclass
class Decision:
    """The answer that stands to a question of ``kind``: ``decision`` one of that kind's
    :data:`ANSWERS`, ``by`` terminal, page, stand_in (``harness sim human``), timeout (no answer in
    time: the refusing answer) or nobody (no operator could be asked: the refusing answer).
    ``unread``: a hand-over whose person's touches could not be read (all or from some point on),
    and why; the runner then records a step ``by: operator`` that says so."""

    decision: str
    by: str
    wait_s: float
    ask_id: str | None = None
    asked_at: str | None = None
    answered_at: str | None = None
    note: str | None = None               # what else the record should say
    kind: str = "flagged_action"
    unread: str | None = None

    @property
    def allowed(self) -> bool:
        """The answer that lets the episode go on as asked: the first of its question kind's
        :data:`ANSWERS` (allow to a flagged action, hand_back to a hand-over), and nothing else: an
        answer of another kind's (hand_back to a flagged action) lets nothing through."""
        return self.decision == ANSWERS.get(self.kind, ("",))[0]

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "by": self.by, "wait_s": round(self.wait_s, 3), "ask_id": self.ask_id,
                "asked_at": self.asked_at, "answered_at": self.answered_at, **({"note": self.note} if self.note else {}),
                **({"unread": self.unread} if self.unread else {})}


def nobody_to_ask() -> Decision:
    """The decision when a monitor asks and no operator was given (a run built without one): the
    action is denied, as a gate would halt it."""
    return Decision("deny", "nobody", 0.0, answered_at=now_iso())


@dataclass
class OperatorStep:
    """One touch (or key) of a person's during a hand-over, read from the phone's touchscreen:
    ``action`` as the recorder reads it, the screens before and after it (PNG), and what the
    reader adds (``extras``: the gesture, pages, warnings). ``action`` None: a touch the reader
    saw but could not place (``unread`` says why); the step is the person's all the same."""

    action: Action | None
    screen_before: bytes
    screen_after: bytes | None
    extras: dict[str, Any] = field(default_factory=dict)
    at: str = field(default_factory=now_iso)
    unread: str | None = None


@runtime_checkable
class HandingOperator(Protocol):
    """An operator the phone can be handed to (optional; ``harness.live.operator.Operator`` with a
    channel: the terminal or the live page). ``hand_over`` shows the agent's request
    (``question.kind`` ``needs_user``), records the person's touches on ``device`` as they come,
    each to ``on_step`` (with its screens), and returns when they hand the phone back
    (``hand_back``), give up or the hand-over's timeout passes (``give_up`` by ``timeout``); None
    when ``should_stop`` says the run is stopping. ``can_hand_over``: someone could take the phone
    (a channel is open); otherwise the episode ends ``needs_user`` without asking."""

    @property
    def can_hand_over(self) -> bool: ...

    def hand_over(self, question: Question, device: Any, live: LiveRecorder,
                  on_step: Callable[[OperatorStep], None],
                  should_stop: Callable[[], bool] = lambda: False) -> Decision | None: ...


@runtime_checkable
class Operator(Protocol):
    """A person the runner can ask (``harness.live.operator.Operator``: the terminal and the live
    page). ``ask`` waits for the answer that stands, telling ``live`` what is asked (the live page
    shows the question from there and answers it); it returns None when ``should_stop`` says the
    run is stopping meanwhile (the episode is then redone on ``--resume``)."""

    def ask(self, question: Question, live: LiveRecorder,
            should_stop: Callable[[], bool] = lambda: False) -> Decision | None: ...

    def live_records(self, episode_dir: str | Path) -> LiveRecorder:
        """The live records this operator's channels read a question from (the page reads the
        episode folder's): the runner's live recorder for an episode whose caller gives none."""

    def spec(self) -> dict[str, Any]:
        """The operator's settings for the manifest (timeout, channels)."""
