"""``holistic``: the whole trajectory in one call, SPA-Bench style (FIELD_NOTES section 3), the
paradigm CRATE replaces; kept as the baseline for ablations.

An optional key-component pre-check comes first, as SPA-Bench does: if the task lists
``key_components`` (SPA-Bench's ``key_component_final``), each must appear in the text of the
final screen (or in the agent's answer); if one is missing the verdict is False without any model
call. The screen's text comes from an OCR engine: RapidOCR (``pip install rapidocr_onnxruntime``)
when installed, or any ``screen_text(png) -> str`` function given to the judge. With
``key_components=auto`` the check runs when the task has components and an engine is there, and is
skipped (and says so) otherwise; ``on`` makes a missing engine a ``judge_error``; ``off`` never checks.

Then one call sees every screenshot in order (s_0 .. s_n; the first is the screen before the first
action) with the list of actions, and answers a reason and 0/1. Screens are encoded as they arrive,
so the end of the episode costs exactly that one call. Many servers cap the images in one request
(vLLM ``--limit-mm-per-prompt``); ``max_images`` keeps the first and last screens and an even
spread between them, and the model client names the limit to raise when a server refuses.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from harness.core.episode import EpisodeContext, EpisodeEnd, StepEvent, Verdict
from harness.client.config import ModelConfig
from harness.core.registry import JUDGES
from judges.crate import image_policy, need_model, pick_language, shown_action, step_label
from judges.evidence import Asker, CallLog, JudgeCallError, ask_json, encode_screen
from judges.prompts import LANGUAGES, load_prompt
from judges.verdict_kinds import HOLISTIC
from judges.workers import EpisodeWorkers

SCHEMA = HOLISTIC.schema  # the strict schema asked for (judges/verdict_kinds.py)


@dataclass
class HolisticConfig:
    model: ModelConfig | None = field(metadata={"help": "judge endpoint (from --judge-base-url/--judge-model)"})
    language: Literal["auto", "en", "zh"] = field(default="auto", metadata={"help": "prompt language; auto = the task's"})
    key_components: Literal["auto", "on", "off"] = field(default="auto", metadata={
        "help": "SPA-Bench's key-component text pre-check on the final screen (needs an OCR engine)"})
    max_images: int | None = field(default=None, metadata={
        "help": "most screenshots in the one request (first, last and an even spread); default all"})
    parse_retries: int = field(default=1, metadata={"help": "times an unparseable reply is asked again"})
    image_max_side: int = field(default=1280, metadata={"help": "longest side of images sent (pixels)"})

    def __post_init__(self) -> None:
        if self.max_images is not None and self.max_images < 2:
            raise ValueError("max_images must be >= 2 (the first and the last screen)")


def _norm(s: str) -> str:
    return "".join(unicodedata.normalize("NFKC", s).casefold().split())


def missing_components(components: list[str], text: str) -> list[str]:
    """The components not found in ``text`` (case, width and spacing ignored)."""
    hay = _norm(text)
    return [c for c in components if _norm(c) and _norm(c) not in hay]


def rapidocr_text() -> Callable[[bytes], str] | None:
    """An OCR function from RapidOCR when it is installed, else None."""
    try:
        from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-not-found]
    except Exception:
        return None
    engine = RapidOCR()

    def read(png: bytes) -> str:
        result, _ = engine(png)
        return "\n".join(r[1] for r in (result or []))

    return read


def spread(n: int, k: int) -> list[int]:
    """k indexes out of range(n): the first, the last and an even spread between them."""
    if n <= k:
        return list(range(n))
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


class HolisticJudge:
    name = "holistic"

    def __init__(self, config: HolisticConfig, screen_text: Callable[[bytes], str] | None = None):
        self.config = config
        self.client = need_model(f"judge {self.name!r}", config)
        self.screen_text = screen_text
        self._ocr_looked = screen_text is not None
        self.image_workers = EpisodeWorkers(2, "judge-holistic")

    def spec(self) -> dict[str, Any]:
        c = self.config
        return {"name": self.name, "model": c.model.to_json() if c.model else None, "language": c.language,
                "prompts": {lang: load_prompt("holistic", lang).identity() for lang in LANGUAGES},
                "key_components": c.key_components, "max_images": c.max_images, "parse_retries": c.parse_retries,
                "image_policy": image_policy(c).to_json()}

    def close(self) -> None:
        self.image_workers.close()

    def start(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.lang = pick_language(self.config.language, ctx.task.language)
        self.log = CallLog()
        self.asker = Asker.for_episode(ctx, self.name)
        self.image_workers.end_episode()  # what the last episode left (queued work, its own threads)
        self.image_workers.use(ctx.workers)
        self.screens: list[tuple[bytes, cf.Future]] = []  # (png, its encoding)
        self.actions: list[str] = []

    def _add_screen(self, png: bytes) -> None:
        if self.screens and self.screens[-1][0] == png:
            return  # the screen did not change: one image is enough
        self.screens.append((png, self.image_workers.submit(encode_screen, png, image_policy(self.config))))

    def on_step(self, event: StepEvent) -> None:
        if not self.screens:
            self._add_screen(event.screenshot_before)
        self.actions.append(f"{step_label(self.lang, event.index)}: {shown_action(event, self.lang)}")
        if event.screenshot_after is not None:
            self._add_screen(event.screenshot_after)

    def _precheck(self, end: EpisodeEnd) -> dict[str, Any] | None:
        comps = list(self.ctx.task.key_components)
        mode = self.config.key_components
        if mode == "off" or not comps:
            return None
        if not self._ocr_looked:
            self.screen_text, self._ocr_looked = rapidocr_text(), True
        if self.screen_text is None or end.final_screenshot is None:
            why = "no OCR engine (install rapidocr_onnxruntime)" if self.screen_text is None else "no final screen"
            if mode == "on":
                raise JudgeCallError(f"key-component pre-check: {why}", kind="precheck")
            return {"ran": False, "why": why}
        text = self.screen_text(end.final_screenshot) + "\n" + (end.answer or "")
        missing = missing_components(comps, text)
        return {"ran": True, "components": comps, "missing": missing, "passed": not missing}

    def finish(self, end: EpisodeEnd) -> dict[str, tuple[Verdict, dict[str, Any]]]:
        t0 = time.monotonic()
        details: dict[str, Any] = {"language": self.lang, "prompt": load_prompt("holistic", self.lang).id}

        def done(verdict: Verdict) -> dict[str, tuple[Verdict, dict[str, Any]]]:
            details.update(self.log.to_json())
            details["latency"] = {"finish_wait_s": round(time.monotonic() - t0, 4)}
            self.image_workers.end_episode()
            return {self.name: (verdict, details)}

        try:
            pre = self._precheck(end)
            if pre is not None:
                details["precheck"] = pre
                if pre.get("ran") and not pre["passed"]:
                    details["reason"] = f"key component(s) not on the final screen: {', '.join(pre['missing'])}"
                    return done(False)
            if end.final_screenshot is not None:
                self._add_screen(end.final_screenshot)
            keep = spread(len(self.screens), self.config.max_images or len(self.screens))
            images = [self.screens[i][1].result() for i in keep]
            details["images"] = len(images)
            if len(keep) < len(self.screens):
                details["images_dropped"] = len(self.screens) - len(keep)
            values = {"instruction": self.ctx.task.instruction, "count": str(len(self.actions)),
                      "steps": "\n".join(self.actions) or "-", "answer": end.answer or "-", "images": str(len(images))}
            out = ask_json(self.client, load_prompt("holistic", self.lang), values, images, verdict=HOLISTIC,
                           parse_retries=self.config.parse_retries, log=self.log, kind="holistic",
                           asker=self.asker).value
        except JudgeCallError as e:
            details["error"] = str(e)
            if e.reply:
                details["reply"] = e.reply
            return done("judge_error")
        except Exception as e:  # an undecodable screenshot is this judge's error, not the run's
            details["error"] = f"{type(e).__name__}: {e}"
            return done("judge_error")
        details.update(out)
        return done(bool(out["result"]))


@JUDGES.register("holistic", HolisticConfig,
                 help="baseline: every screenshot in one call, reason + 0/1 (SPA-Bench style, key-component pre-check)")
def _build(config: HolisticConfig) -> HolisticJudge:
    return HolisticJudge(config)
