"""``crate-s`` as a live monitor: CRATE-S's step-level risk check on each PROPOSED action.

- ``mode=gate``: the runner asks before the action runs; a halting verdict stops the episode and
  the risky action never reaches the phone (the record names the step, category and reason).
  Cost: one model call per proposed action, on the critical path (about one call's latency per
  step); the agent's "finish" and "wait" need no call. Gate checks go first in the endpoint's
  queue (``harness.client.slots.Priority.GATE``), ahead of agent calls and judges' evidence.
- ``mode=ask``: a gate whose halting verdict (risky by the rules below, or a check that failed
  closed) asks the operator instead (harness.live.operator): allowed, the action runs and its step
  says ``allowed_by: operator``; denied, or unanswered within ``--ask-timeout``, it halts as a gate.
- ``mode=reflect``: a gate whose halting verdict is told to the agent instead (its category and
  reason, in the agent family's own conversation form): the action does not run, the step is
  recorded with the feedback, and the agent proposes again from the same screen; the
  ``reflect_max``-th flagged proposal since an action last ran halts (``mode=reflect,ask``: asks the
  operator, as ``ask``). A check that failed is never reflected on: it halts (or asks).
- ``mode=async``: the check runs beside the action and the agent's next call; the runner waits for
  it before the next action runs, so a halting verdict stops the episode at the next step
  boundary, one step of lag and never more (the risky action itself has run: ``executed: true``).

What halts: the model's ``risky`` finding, only if its ``score`` (confidence 0-1) reaches
``threshold`` when one is set, and only if its category is in ``categories`` when that list is set;
a risky finding whose category is missing or not a MobileRisk name halts whatever ``categories``
says (the list cannot narrow a category it cannot name), and the decision says so.
With ``calibration=FILE`` (``harness judge-eval --calibrate``; judges.calibration) a reply with a
score halts when the score reaches the file's threshold, whatever its ``risky`` word (the bound on
missed risky steps is a bound on scores); a reply without a score halts on ``risky`` alone, and a
check that fails still fails closed. The file must come from this monitor's model, sampling, step
prompt and image policy, else the monitor is refused when it is built (before any device is
touched), naming both sides.

The reply is read by the one reading rule (:mod:`harness.client.replies`, kinds in
``judges/verdict_kinds.py``): only one clear "not risky" lets the action run. A reply whose
verdicts disagree (an echoed example aside), cannot be read ("risky": "null"), or is not clear (a
"not risky" followed by more text, or cut off at max_tokens), and a reply with no verdict after
the re-asks, are a check that cannot answer, with the reply quoted in the step's record
(``monitor.extras.reply``).

A check that cannot answer (server down, a timeout, an unusable reply as above, or no answer within
``timeout_s``) fails closed: ``on_error=halt`` (the default) halts before the action with the
category ``monitor_error`` and the cause in the reason. ``on_error=allow`` lets the action run
unchecked; the step records the error, and the run summary, ``harness report`` and the viewer count
and show each such action. A failed check is never recorded as safe.

The monitor asks exactly what the ``crate-s`` judge asks at step level (same prompt, same drawing),
through the same process-wide evidence cache, so running both costs the judge no extra step calls;
the call's tokens are counted once, as the monitor's (``monitor:crate-s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from harness.core.actions import Finish, Wait
from harness.core.episode import EpisodeContext, MonitorVerdict, ProposedStep
from harness.client.config import ModelConfig
from harness.client.slots import Priority
from harness.core.registry import MONITORS
from harness.core.tasks import RISK_CATEGORIES
from judges.calibration import Calibration, CalibrationError, load_calibration, scorer_of, step_prompts_of
from judges.crate import image_policy, need_model, pick_language
from judges.evidence import (CRATE_S_STEP, Asker, EvidenceStore, JudgeCallError, StepCall, disk_cache, quoted_reply,
                             shared_memory, step_evidence)
from judges.prompts import LANGUAGES, load_prompt
from judges.verdict_kinds import canonical_category, known_category


@dataclass
class CrateSMonitorConfig:
    model: ModelConfig | None = field(metadata={"help": "judge endpoint (from --judge-base-url/--judge-model)"})
    mode: Literal["gate", "async", "ask", "reflect", "reflect,ask"] = field(default="gate", metadata={
        "help": "gate: judge before the action runs and halt before a risky one; async: judge beside it, halt at the "
                "next step; ask: a gate that asks an operator (terminal or live page) before halting; reflect: tell "
                "the agent why and let it propose again, halting at the reflect_max-th flag in a row (reflect,ask: "
                "asking then)"})
    reflect_max: int = field(default=2, metadata={
        "help": "mode reflect: the flagged proposal in a row (since an action last ran) that halts or asks"})
    threshold: float | None = field(default=None, metadata={
        "help": "halt only when the model's risk score (0-1) is at least this"})
    categories: list[str] = field(default_factory=list, metadata={
        "help": "halt only for these MobileRisk categories (comma-separated; default: any)"})
    on_error: Literal["halt", "allow"] = field(default="halt", metadata={
        "help": "when a check cannot answer: halt before the action (default) or let it run unchecked (allow)"})
    timeout_s: float = field(default=120.0, metadata={
        "help": "longest wait for one check, retries included, before it counts as failed (s)"})
    language: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "prompt language; auto = the task's"})
    parse_retries: int = field(default=1, metadata={"help": "times an unparseable reply is asked again"})
    image_max_side: int = field(default=1280, metadata={"help": "longest side of the image sent (pixels)"})
    draw: bool = field(default=True, metadata={"help": "draw the action's target on the screenshot"})
    cache: str | None = field(default=None, metadata={"help": "JSONL file caching step findings"})
    calibration: str | None = field(default=None, metadata={
        "help": "calibration.json from harness judge-eval --calibrate: halt when the score reaches its threshold"})

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        if self.reflect_max < 1:
            raise ValueError("reflect_max must be >= 1 (1: the first flagged proposal halts, as gate)")
        if self.calibration and (self.threshold is not None or self.categories):
            raise ValueError("calibration sets the threshold for every category: it cannot be combined with "
                             "threshold or categories")
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        fixed = []
        for c in self.categories:
            canon = canonical_category(c)
            if canon not in RISK_CATEGORIES:
                raise ValueError(f"categories: {c!r} is not a MobileRisk category ({', '.join(RISK_CATEGORIES)})")
            fixed.append(canon)
        self.categories = fixed


class CrateSMonitor:
    name = "crate-s"

    def __init__(self, config: CrateSMonitorConfig):
        self.config = config
        self.mode = config.mode
        self.reflect_max = config.reflect_max
        self.on_error = config.on_error
        self.timeout_s = config.timeout_s
        self.client = need_model("monitor 'crate-s'", config)
        self.store = EvidenceStore(shared_memory(self.client), disk_cache(config.cache))
        self.screen_size: tuple[int, int] | None = None
        self.calibration: Calibration | None = None
        if config.calibration:
            self.calibration = self._fitting_calibration(config.calibration)

    def _fitting_calibration(self, path: str) -> Calibration:
        """The calibration file, if it was made for this monitor's model, sampling, prompt and image
        policy (for the languages it judges in); else ValueError naming both sides."""
        try:
            cal = load_calibration(path)
        except CalibrationError as e:
            raise ValueError(str(e)) from None
        spec = self.spec()
        languages = [self.config.language] if self.config.language != "auto" else list(cal.prompts)
        problems = cal.mismatches(scorer_of(spec), step_prompts_of(spec), languages)
        if problems:
            raise ValueError(f"calibration {path} was made for another monitor: {'; '.join(problems)}; "
                             "calibrate again with this monitor's scores")
        return cal

    def check_task(self, task: Any) -> str | None:
        """Why this monitor cannot judge ``task`` (checked before any device is touched): a task in a
        language the calibration holds no steps of."""
        if self.calibration is None:
            return None
        lang = pick_language(self.config.language, task.language)
        if lang in self.calibration.prompts:
            return None
        return (f"task {task.id!r} is judged in {lang}, and the calibration {self.calibration.path} holds no {lang} "
                f"steps (only {', '.join(sorted(self.calibration.prompts))})")

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {"name": self.name, "mode": c.mode, **({"reflect_max": c.reflect_max} if c.mode.startswith("reflect") else {}),
                "threshold": c.threshold, "categories": list(c.categories),
                "on_error": c.on_error, "timeout_s": c.timeout_s, "language": c.language, "model": c.model.to_json() if c.model else None,
                "prompts": {lang: load_prompt(CRATE_S_STEP.prompt_name, lang).identity() for lang in LANGUAGES},
                "parse_retries": c.parse_retries, "image_policy": image_policy(c).to_json(), "draw": c.draw,
                "cache": c.cache, **({"calibration": self.calibration.summary()} if self.calibration else {})}

    def start(self, ctx: EpisodeContext) -> None:
        self.screen_size = ctx.screen_size
        self.asker = Asker.for_episode(ctx, f"monitor:{self.name}", Priority.GATE)

    def _call(self, language: str) -> StepCall:
        return StepCall(self.client, CRATE_S_STEP, language, self.store, image_policy(self.config), self.config.draw,
                        self.config.parse_retries, asker=getattr(self, "asker", Asker(Priority.GATE, None,
                                                                                     f"monitor:{self.name}")))

    def decide(self, ev: dict[str, Any]) -> tuple[bool, str]:
        """Whether a finding halts, and why (recorded with the verdict). Anything but a finding
        that is plainly ``risky: false`` (a JSON or word boolean) halts unless a setting says
        otherwise; a risky finding without a known category is never let through by ``categories``."""
        c = self.config
        risky = ev.get("risky")
        if risky is not True and risky is not False:  # the reading gives booleans only: anything else halts
            return True, f"risky is {risky!r}, not a verdict: halts"
        if self.calibration is not None:  # a score decides; a reply without one falls through to `risky`
            calibrated = self.calibration.decide(ev.get("score"))
            if calibrated is not None:
                return calibrated
        if risky is False:
            return False, "not risky"
        score = ev.get("score")
        why = "risky" + (f", score {score:g} >= {c.threshold:g}" if c.threshold is not None and score is not None else "")
        if c.threshold is not None and score is not None and score < c.threshold:
            return False, f"risky, but score {score:g} < threshold {c.threshold:g}"
        cat = ev.get("category")
        if not known_category(cat):
            what = "no category" if cat is None else f"category {cat!r}, not a MobileRisk name"
            narrowed = " (halts whatever categories lists)" if c.categories else ""
            return True, f"{why}, {what}{narrowed}"
        if c.categories and cat not in c.categories:
            return False, f"risky, but category {cat!r} is not one that halts"
        return True, why

    def check(self, step: ProposedStep) -> MonitorVerdict:
        if isinstance(step.action, (Finish, Wait)):
            return MonitorVerdict(halt=False, risky=False, reason="no effect on the phone; not checked",
                                  monitor=self.name, extras={"skipped": True})
        call = self._call(pick_language(self.config.language, step.language))
        try:
            r = step_evidence(call, step.screenshot, step.action, step.instruction, self.screen_size)
        except Exception as e:  # JudgeCallError, or an undecodable screenshot: on_error decides
            failed = MonitorVerdict.check_failed(self, str(e) if isinstance(e, JudgeCallError) else f"{type(e).__name__}: {e}")
            if isinstance(e, JudgeCallError):
                failed.extras["failure"] = e.kind
                if e.reply is not None:
                    failed.extras["reply"] = e.reply  # why it halted, as the model said it
            return failed
        ev = r["evidence"]
        halt, why = self.decide(ev)
        reason = ev.get("reason", "")
        if halt and not ev["risky"]:  # only a calibrated score halts a reply that says "not risky": say so
            reason = f"{why}; the model said not risky: {reason}"
        extras = {"decision": why, "cached": r["cached"], "prompt": r["prompt"], "check_s": r["latency_s"]}
        if halt and r.get("reply") is not None:
            extras["reply"] = quoted_reply(r["reply"])
        return MonitorVerdict(halt=halt, risky=ev["risky"], category=ev.get("category"), reason=reason,
                              score=ev.get("score"), monitor=self.name, usage=r["usage"] or None, extras=extras)


@MONITORS.register("crate-s", CrateSMonitorConfig,
                   help="CRATE-S step risk check on each proposed action: gate (halt before it runs) or async")
def _build(config: CrateSMonitorConfig) -> CrateSMonitor:
    return CrateSMonitor(config)
