"""``milestones``: AndroidLens's milestone judge (seed 002, section 4.2 and appendix E.2;
FIELD_NOTES section 5), run beside the episode.

The run is cut into fixed segments of steps (10 by default). Milestones are taken in the task's
order; an entry ``{unordered: [...]}`` is a group judged together.

- An ordered milestone is looked for from the step after the previous milestone's "last
  completion step". Each call shows one segment and asks whether the milestone is completed there
  and at which step it last holds. If not, the next segment starts at the last step of this one
  (E.2) and the same milestone is asked again, until the run ends.
- An unordered group is asked about all at once; members completed in a segment are settled
  there, the rest are asked again over the next segments, and the milestone after the group is
  looked for from the step after the group's largest completion step.
- A milestone never completed does not move the starting point: the next one is looked for from
  the same step.

Each step of a segment is shown as its action and the screen after it (``evidence=screens``), or,
cheaper, as CRATE's text evidence for it (``evidence=crate``: the clues on the screen before the
action and its inferred effect; no images; the step calls are shared with a ``crate`` judge on the
same endpoint through the evidence cache). ``agreement()`` compares the two modes' findings.

The search runs beside the episode. With ``eager`` (the default) the current milestone is asked
again, over its segment so far, each time new steps have arrived (asks coalesce when the agent is
faster than the judge), so a milestone is settled soon after the step that completes it and the
end of the episode waits about one call. A milestone found done in a segment that is not full yet
is settled there; AndroidLens asks only full segments (or the last, partial one), so its "last
completion step" can be later by up to the rest of the segment: ``eager=false`` asks as AndroidLens
does, at the cost of a chain of calls after a short episode (every milestone's segment is full
only when the episode ends). Either way, a milestone never completed keeps the ones after it
waiting for its search to end (they start from the same step), so those are asked after the episode.

Verdict ``milestones``: SR, every milestone completed. Details: each milestone's completion step,
ATP (fraction completed) and MSR (mean over completed milestones that have a human
``reference_step`` of agent steps / human steps to reach it).

Hand-overs: a person's steps (``by: operator``) are shown to the model as such, and a milestone
whose completion step is one of them is marked ``by: operator`` and is not the agent's: SR, ATP and
MSR count the agent's milestones only, and MSR's agent steps leave out the person's steps before it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.core.episode import EpisodeContext, EpisodeEnd, StepEvent, Verdict
from harness.client.config import ModelConfig
from harness.client.images import EncodedImage
from harness.core.registry import JUDGES
from harness.core.tasks import Milestone, MilestoneGroup
from judges.crate import (StepCollector, evidence_lines, image_policy, need_model, pick_language, shown_action,
                          step_label)
from judges.evidence import (CRATE_STEP, Asker, CallLog, EvidenceStore, JudgeCallError, StepCall, ask_json,
                             disk_cache, encode_screen, shared_memory)
from judges.prompts import LANGUAGES, load_prompt
from judges.verdict_kinds import MILESTONES
from judges.workers import EpisodeWorkers

SCHEMA = MILESTONES.schema  # the strict schema asked for (judges/verdict_kinds.py)


@dataclass
class MilestonesConfig:
    model: ModelConfig | None = field(metadata={"help": "judge endpoint (from --judge-base-url/--judge-model)"})
    language: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "prompt language; auto = the task's"})
    segment: int = field(default=10, metadata={"help": "steps per segment (AndroidLens: 10)"})
    evidence: Literal["screens", "crate"] = field(default="screens", metadata={
        "help": "show each step as its screenshot (screens) or as CRATE's text evidence (crate: no images, cheaper)"})
    parse_retries: int = field(default=1, metadata={"help": "times an unparseable reply is asked again"})
    image_max_side: int = field(default=1280, metadata={"help": "longest side of images sent (pixels)"})
    workers: int = field(default=8, metadata={"help": "CRATE step calls in flight (evidence=crate)"})
    cache: str | None = field(default=None, metadata={"help": "JSONL step-evidence cache (evidence=crate)"})
    draw: bool = field(default=True, metadata={"help": "draw actions on step screenshots (evidence=crate)"})
    finish_timeout_s: float = field(default=900.0, metadata={"help": "longest wait after the episode"})
    eager: bool = field(default=True, metadata={
        "help": "ask the current milestone again as each step arrives (the verdict then waits about one call "
                "after the episode); false asks only full segments, as AndroidLens does"})

    def __post_init__(self) -> None:
        if self.segment < 1:
            raise ValueError("segment must be >= 1")


@dataclass
class Unit:
    """An ordered milestone (one member) or an unordered group (several), as indexes into the flat list."""

    members: list[int]
    group: bool


def flatten(milestones: list[Milestone | MilestoneGroup]) -> tuple[list[Milestone], list[Unit]]:
    flat: list[Milestone] = []
    units: list[Unit] = []
    for m in milestones:
        items = m.unordered if isinstance(m, MilestoneGroup) else [m]
        units.append(Unit(list(range(len(flat), len(flat) + len(items))), isinstance(m, MilestoneGroup)))
        flat.extend(items)
    return flat, units


def metrics(flat: list[Milestone], steps_done: list[int | None]) -> dict[str, Any]:
    """SR, ATP and MSR of one episode from each milestone's completion step (None = not done)."""
    total = len(flat)
    done = sum(1 for s in steps_done if s is not None)
    ratios = [s / m.reference_step for m, s in zip(flat, steps_done) if s is not None and m.reference_step]
    return {"sr": int(total > 0 and done == total), "atp": round(done / total, 4) if total else None,
            "msr": round(sum(ratios) / len(ratios), 4) if ratios else None, "done": done, "total": total}


def agreement(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """How two milestone judgements of one episode agree (e.g. evidence=screens vs evidence=crate):
    per-milestone completion, completion step, and SR."""
    ma, mb = a.get("milestones") or [], b.get("milestones") or []
    n = min(len(ma), len(mb))
    same_done = sum(1 for x, y in zip(ma, mb) if x["done"] == y["done"])
    same_step = sum(1 for x, y in zip(ma, mb) if x["done"] and y["done"] and x["step"] == y["step"])
    both = sum(1 for x, y in zip(ma, mb) if x["done"] and y["done"])
    return {"milestones": n, "done_agree": same_done, "done_agreement": round(same_done / n, 4) if n else None,
            "step_agree": same_step, "both_done": both, "sr_agree": a.get("sr") == b.get("sr")}


class MilestoneJudge:
    name = "milestones"

    def __init__(self, config: MilestonesConfig):
        self.config = config
        self.client = need_model(f"judge {self.name!r}", config)
        self.store = EvidenceStore(shared_memory(self.client), disk_cache(config.cache))
        self.step_workers = EpisodeWorkers(config.workers, "judge-milestones-steps")
        self.image_workers = EpisodeWorkers(2, "judge-milestones")
        self.collector: StepCollector | None = None
        self.worker: threading.Thread | None = None

    def spec(self) -> dict[str, Any]:
        c = self.config
        prompts = {lang: [load_prompt("milestones", lang).identity()] for lang in LANGUAGES}
        if c.evidence == "crate":
            for lang in LANGUAGES:
                prompts[lang].append(load_prompt(CRATE_STEP.prompt_name, lang).identity())
        return {"name": self.name, "model": c.model.to_json() if c.model else None, "language": c.language,
                "segment": c.segment, "eager": c.eager, "evidence": c.evidence, "prompts": prompts, "parse_retries": c.parse_retries,
                "image_policy": image_policy(c).to_json(), "draw": c.draw, "cache": c.cache}

    # --- the step stream -----------------------------------------------------------------------
    def start(self, ctx: EpisodeContext) -> None:
        self._end_episode()
        self.step_workers.use(ctx.workers)
        self.image_workers.use(ctx.workers)
        self.ctx = ctx
        self.lang = pick_language(self.config.language, ctx.task.language)
        self.log = CallLog()
        self.flat, self.units = flatten(ctx.task.milestones)
        self.cond = threading.Condition()
        self.steps: list[dict[str, Any]] = []  # per step: action text, screen encoding future or evidence future
        self.ended = False
        self.completion: list[int | None] = [None] * len(self.flat)
        self.found: list[str] = [""] * len(self.flat)
        self.segments: list[dict[str, Any]] = []
        self.by_operator: set[int] = set()
        self.error: str | None = None
        self.current = b""
        self.asker = Asker.for_episode(ctx, self.name)
        if self.config.evidence == "crate":
            call = StepCall(self.client, CRATE_STEP, self.lang, self.store, image_policy(self.config), self.config.draw,
                            self.config.parse_retries, self.log, self.asker)
            self.collector = StepCollector(call, self.step_workers)
            self.collector.start(ctx.task.instruction, ctx.screen_size,
                                 report=lambda finding: ctx.report_evidence(self.name, finding))
        if self.flat:
            self.worker = threading.Thread(target=self._search, name="judge-milestones-search", daemon=True)
            self.worker.start()

    def on_step(self, event: StepEvent) -> None:
        entry: dict[str, Any] = {"index": event.index, "action": shown_action(event, self.lang)}
        if event.by_operator:
            self.by_operator.add(event.index)
        if self.collector is not None:
            self.collector.add(event)
        else:
            screen = event.screenshot_after or event.screenshot_before
            entry["image"] = self.image_workers.submit(encode_screen, screen, image_policy(self.config))
        with self.cond:
            self.steps.append(entry)
            self.cond.notify_all()

    # --- the search (a background thread) ------------------------------------------------------
    def _available(self, want: int) -> tuple[int, bool]:
        """Wait until ``want`` steps are recorded or the episode ended: (steps recorded, ended)."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.steps) >= want or self.ended)
            return len(self.steps), self.ended

    def _search(self) -> None:
        seg = self.config.segment
        pos = 1
        try:
            for u, unit in enumerate(self.units):
                remaining = list(unit.members)
                first = pos
                asked = first - 1  # the last step the current window was asked with
                while remaining:
                    full = first + seg - 1
                    have, ended = self._available(asked + 1 if self.config.eager else full)
                    if first > have:
                        break  # the run ended before this milestone could be looked for
                    last = min(full, have)
                    if last > asked:  # steps of this window not yet shown to the model
                        for k, step in self._ask(u, remaining, first, last).items():
                            self.completion[k] = step
                            remaining.remove(k)
                        asked = last
                    if not remaining or (ended and last >= have):
                        break
                    if last == full:  # a full window without it: the next one starts at its last step (E.2)
                        first = last if last > first else last + 1
                        asked = first - 1
                done = [self.completion[k] for k in unit.members if self.completion[k] is not None]
                if done:
                    pos = max(done) + 1  # type: ignore[type-var]
        except JudgeCallError as e:
            self.error = str(e)
        except Exception as e:  # never let the thread die silently
            self.error = f"{type(e).__name__}: {e}"

    def _step_lines(self, first: int, last: int) -> tuple[str, list[EncodedImage]]:
        """Steps first..last as the prompt shows them, and their screenshots (screens mode)."""
        if self.collector is not None:
            entries, errors = self.collector.gather(self.config.finish_timeout_s, upto=last)
            if errors:
                raise JudgeCallError(errors[0], kind="step")
            return evidence_lines([e for e in entries if e["step"] >= first], self.lang), []
        with self.cond:
            chosen = self.steps[first - 1:last]
        lines, images = [], []
        for j, s in enumerate(chosen, 1):
            images.append(s["image"].result())
            shot = f"screenshot {j}" if self.lang == "en" else f"第 {j} 张截图"
            lines.append(f"{step_label(self.lang, s['index'])}: {s['action']} -> {shot}")
        return "\n".join(lines), images

    def _ask(self, unit: int, members: list[int], first: int, last: int) -> dict[int, int]:
        """One call: which of ``members`` are completed in steps first..last, and when."""
        listing = [{"idx": i, "sub-target": self.flat[k].description,
                    **({"key_text": self.flat[k].key_text} if self.flat[k].key_text else {}),
                    **({"region": list(self.flat[k].region)} if self.flat[k].region else {})}
                   for i, k in enumerate(members)]
        steps, images = self._step_lines(first, last)
        values = {"instruction": self.ctx.task.instruction, "first": str(first), "last": str(last), "steps": steps,
                  "milestones": "\n".join(json.dumps(x, ensure_ascii=False) for x in listing)}

        answer = ask_json(self.client, load_prompt("milestones", self.lang), values, images, verdict=MILESTONES,
                          parse_retries=self.config.parse_retries, log=self.log, kind="segment", asker=self.asker)
        # entries for milestones not asked about here are left out
        reply = {e["idx"]: e for e in answer.value["milestones"] if 0 <= e["idx"] < len(members)}
        settled: dict[int, int] = {}
        record = {"unit": unit, "first": first, "last": last, "asked": [members[i] for i in range(len(members))],
                  "completed": {}}
        for i, it in reply.items():
            if not it["done"]:
                continue
            step = it["last_step"]
            if step is None or not first <= step <= last:
                record.setdefault("guessed_steps", []).append(members[i])
                step = last  # done, but the step given is not in this segment: take the segment's end
            settled[members[i]] = step
            self.found[members[i]] = it["evidence"]
            record["completed"][str(members[i])] = step
        self.segments.append(record)
        return settled

    # --- the verdict -----------------------------------------------------------------------------
    def finish(self, end: EpisodeEnd) -> dict[str, tuple[Verdict, dict[str, Any]]]:
        t0 = time.monotonic()
        with self.cond:
            self.ended = True
            self.cond.notify_all()
        details: dict[str, Any] = {"language": self.lang, "evidence_mode": self.config.evidence,
                                   "prompt": load_prompt("milestones", self.lang).id, "segment": self.config.segment}
        verdict: Verdict
        if not self.flat:
            details["error"] = "the task has no milestones"
            verdict = "judge_error"
        else:
            assert self.worker is not None
            self.worker.join(self.config.finish_timeout_s)
            if self.worker.is_alive():
                self.error = self.error or f"milestone search not done after {self.config.finish_timeout_s:g}s"
            ops = self.by_operator
            # the agent's: a milestone completed at a person's step is theirs; MSR counts agent steps
            mine = [None if c is None or c in ops else c - sum(1 for o in ops if o < c) for c in self.completion]
            details["milestones"] = [
                {"idx": k, "description": m.description, "group": next(u for u, un in enumerate(self.units) if k in un.members),
                 "done": self.completion[k] is not None, "step": self.completion[k], "reference_step": m.reference_step,
                 "step_ratio": round(mine[k] / m.reference_step, 4)
                 if mine[k] is not None and m.reference_step else None, "evidence": self.found[k],
                 **({"by": "operator"} if self.completion[k] is not None and self.completion[k] in ops else {})}
                for k, m in enumerate(self.flat)]
            details["segments"] = self.segments
            details.update(metrics(self.flat, mine))
            if ops:
                details["done_by_operator"] = sum(1 for c in self.completion if c is not None and c in ops)
            if self.error:
                details["error"] = self.error
                verdict = "judge_error"
            else:
                verdict = bool(details["sr"])
        details.update(self.log.to_json())
        details["latency"] = {"finish_wait_s": round(time.monotonic() - t0, 4)}
        self._end_episode()
        return {self.name: (verdict, details)}

    def _end_episode(self) -> None:
        """What the episode left queued is cancelled, and the judge's own threads for it let go."""
        if self.collector is not None:
            self.collector.close()
            self.collector = None
        self.image_workers.end_episode()

    def close(self) -> None:
        self._end_episode()
        self.step_workers.close()
        self.image_workers.close()


@JUDGES.register("milestones", MilestonesConfig,
                 help="AndroidLens milestones over 10-step segments: SR verdict, ATP and MSR (evidence=crate: text only)")
def _build(config: MilestonesConfig) -> MilestoneJudge:
    return MilestoneJudge(config)
