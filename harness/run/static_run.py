"""``harness static run``: ask an agent for every step of a static dataset, then score the answers.

Each step is asked on its own screenshot with the ground-truth history (AndroidLens's and
AndroidControl's static protocol): the agent is reset at the start of every episode and, before
each step, agents that implement ``set_history(actions)`` receive the unified ground-truth actions
of the earlier steps. Every model agent does (``agents.common.ModelAgent.set_history``): its next
request shows those actions, in its own output format, where it would show its own earlier answers
(docs/agents.md, "Ground-truth history"). An agent without it (replay, script, random) is given no
history and goes on from its own earlier answers; the run says which (``history_mode``).

``--level high`` gives the goal only; ``--level low`` appends the step's low-level instruction the
way AndroidLens's prompt does (``## The action you need to take now``). The agent answers in the
unified action space (device pixels of the screenshot); :mod:`harness.importers.androidcontrol`
converts between that and the dataset's actions, and :mod:`harness.report.static_eval` scores.

A dataset whose screenshots are not on disk is refused before any agent is built or called.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from harness.core.actions import Action
from harness.core.episode import Agent, AgentOutput, EpisodeContext, Observation
from harness.importers.androidcontrol import StaticEpisode, from_unified, load_dataset, to_unified
from harness.core.tasks import Task

LEVELS = ("high", "low")


class StaticRunError(ValueError):
    pass


def find_screenshot(shot: str | None, dataset_dir: Path, images: Path | None) -> Path | None:
    """Where a step's screenshot is: as written, relative to the dataset's folder, or under
    ``images`` (by its path without the leading '/', then by its file name)."""
    if not shot:
        return None
    p = Path(shot)
    candidates = []
    if images is not None:
        candidates += [images / shot.lstrip("/"), images / p.name]
    candidates += [p] if p.is_absolute() else [dataset_dir / p, p]
    return next((c for c in candidates if c.is_file()), None)


def ground_truth_histories(episodes: list[StaticEpisode], dataset: Path) -> dict[int, list[Action]]:
    """Each episode's ground-truth actions (the first option of every step) as unified actions, for
    the agents' ``set_history``; StaticRunError naming episode and step when one has no unified form
    (a history with a gap would pair later actions with the wrong screens)."""
    out: dict[int, list[Action]] = {}
    for ep in episodes:
        actions: list[Action] = []
        for j, step in enumerate(ep.steps):
            try:
                actions.append(to_unified(step.options[0].action))
            except ValueError as e:
                raise StaticRunError(f"{dataset}: episode {ep.index}, step {j}: the ground truth cannot be given "
                                     f"to the agent as history: {e}") from None
        out[ep.index] = actions
    return out


def check_screenshots(episodes: list[StaticEpisode], dataset: Path, images: Path | None) -> dict[tuple[int, int], Path]:
    """Every step's screenshot path, or StaticRunError naming the first missing file."""
    found: dict[tuple[int, int], Path] = {}
    missing: list[str] = []
    total = 0
    for ep in episodes:
        for j, s in enumerate(ep.steps):
            total += 1
            path = find_screenshot(s.screenshot, dataset.parent, images)
            if path is None:
                missing.append(s.screenshot or f"(episode {ep.index} step {j} names no screenshot)")
            else:
                found[(ep.index, j)] = path
    if missing:
        where = f" or under --images {images}" if images else ""
        raise StaticRunError(
            f"{dataset}: the dataset has no screenshots here: {missing[0]} is missing{where} "
            f"({len(missing)} of {total} steps lack their screenshot). A static run needs the images the agent "
            "must look at; pass --images DIR where they live (scoring predictions you already have needs none: "
            "`harness static score`).")
    return found


def _image(path: Path) -> tuple[bytes, tuple[int, int]]:
    """PNG bytes and size of a screenshot (converted to PNG when stored otherwise)."""
    from PIL import Image

    data = path.read_bytes()
    with Image.open(io.BytesIO(data)) as im:
        size = im.size
        if im.format != "PNG":
            buf = io.BytesIO()
            im.save(buf, "PNG")
            data = buf.getvalue()
    return data, size


def instruction_for(ep: StaticEpisode, step: int, level: str) -> str:
    if level == "low" and ep.steps[step].instruction:
        return f"{ep.goal}\n## The action you need to take now\n{ep.steps[step].instruction}"
    return ep.goal


@dataclass
class StaticRunResult:
    predictions: Path
    steps: int
    invalid: int
    agent_errors: int
    history_mode: str   # "ground truth" or "own answers"


def run_static(dataset: str | Path, agent: Agent, out: str | Path, *, level: str = "high",
               images: str | Path | None = None, limit: int | None = None, seed: int = 0,
               progress: Callable[[int, int], None] | None = None) -> StaticRunResult:
    if level not in LEVELS:
        raise StaticRunError(f"--level: expected high or low, got {level!r}")
    dpath = Path(dataset)
    episodes = load_dataset(dpath)
    if limit is not None:
        episodes = episodes[:limit]
    shots = check_screenshots(episodes, dpath, Path(images) if images else None)
    total = sum(len(e.steps) for e in episodes)
    gt_history = callable(getattr(agent, "set_history", None))
    histories = ground_truth_histories(episodes, dpath) if gt_history else {}
    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    done = invalid = errors = 0
    with open(tmp, "w", encoding="utf-8") as fh:
        for ep in episodes:
            task = Task(id=f"static-{ep.index}", instruction=ep.goal or "(no goal)", reference_steps=max(1, len(ep.steps)))
            first_size = _image(shots[(ep.index, 0)])[1] if ep.steps else (1080, 2400)
            agent.reset(EpisodeContext(task=task, screen_size=first_size, seed=seed, device_serial="static",
                                       cap=len(ep.steps)))
            for j, step in enumerate(ep.steps):
                png, size = _image(shots[(ep.index, j)])
                obs = Observation(step=j + 1, screenshot=png, screen_size=size, hierarchy=lambda: "",
                                  instruction=instruction_for(ep, j, level), language="en")
                line: dict[str, Any] = {"episode": ep.index, "step": j}
                try:
                    if gt_history:  # inside the try: an agent that cannot take this history fails this step only
                        agent.set_history(histories[ep.index][:j])  # type: ignore[attr-defined]
                    res: AgentOutput = agent.step(obs)
                    line["action"] = from_unified(res.action) if res.action is not None else None
                    if res.action is None:
                        line["invalid"] = res.invalid or "no action"
                        invalid += 1
                    line["raw_output"] = res.raw_output
                except Exception as e:  # an agent failure is this step's wrong answer, not the run's end
                    line["action"] = None
                    line["invalid"] = f"agent error: {type(e).__name__}: {e}"
                    errors += 1
                fh.write(json.dumps(line, ensure_ascii=False) + "\n")
                done += 1
                if progress:
                    progress(done, total)
    os.replace(tmp, out_path)
    return StaticRunResult(out_path, done, invalid, errors, "ground truth" if gt_history else "own answers")
