"""What to judge: run folders and episode folders given on the command line, and the task of an
episode whose suite file is gone (rebuilt from its result line)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from harness.offline_judge.errors import OfflineJudgeError
from harness.records import EPISODES_DIR, RESULTS_FILE, TRAJECTORY_FILE, EpisodeResult
from harness.tasks import Task
from harness.verdicts import JUDGEMENTS_DIR


def minimal_task(result: EpisodeResult) -> Task | None:
    """A Task from what an imported episode's result line carries (instruction, language, app)."""
    extra = result.model_extra or {}
    instruction = extra.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        return None
    language = extra.get("language") if extra.get("language") in ("en", "zh") else "en"
    app = extra.get("app")
    apps = [a for a in (app.split("+") if isinstance(app, str) else app or []) if a]
    return Task(id=result.task_id, instruction=instruction, language=language, apps=apps,
                reference_steps=max(1, (result.cap - 1) // 2))


@dataclass
class Target:
    """A run folder and, optionally, the only episodes of it to judge."""

    run_dir: Path
    only: set[str] | None = None


def check_writable(run_dir: Path) -> None:
    """Refuse, in one line, a run whose ``judgements/`` folder cannot be written (a read-only copy,
    a mount without write access): verdicts are only ever written there."""
    d = run_dir / JUDGEMENTS_DIR
    where = d if d.is_dir() else run_dir
    if not os.access(where, os.W_OK | os.X_OK):
        raise OfflineJudgeError(f"{where}: cannot write here (read-only); harness judge writes its verdicts to "
                                f"{d}, so copy the run to a writable folder and judge the copy")


def resolve_targets(paths: Iterable[str | Path], warnings: list[str] | None = None) -> list[Target]:
    """Run folders (``RUN`` holding results.jsonl) or episode folders (``RUN/episodes/<id>``); a run
    folder given twice (or through a symlink) is judged once, with a warning."""
    targets: dict[Path, Target] = {}
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise OfflineJudgeError(f"{p}: no such folder")
        if (p / RESULTS_FILE).is_file():
            if p.resolve() in targets and targets[p.resolve()].only is None and warnings is not None:
                warnings.append(f"{p}: the same run folder as {targets[p.resolve()].run_dir} (given twice); "
                                "it is judged once")
            t = targets.setdefault(p.resolve(), Target(p))
            t.only = None
            continue
        in_run = p.parent.name == EPISODES_DIR and (p.parent.parent / RESULTS_FILE).is_file()
        if (p / TRAJECTORY_FILE).is_file() and in_run:
            run = p.parent.parent
            t = targets.setdefault(run.resolve(), Target(run, set()))
            if t.only is not None:
                t.only.add(p.name)
            continue
        hint = ""
        if (p / "trajectory.json").is_file() or any(p.glob("*/trajectory.json")):
            hint = "; it looks like MobileRisk data: run `harness import mobilerisk DIR --out RUN` first"
        elif any(p.glob("*.pkl*")) or any(p.glob("*/log.json")) or any(p.glob("*/actions.json")):
            hint = "; import it first with `harness import trajectories DIR --format androidworld|spa-bench --out RUN`"
        raise OfflineJudgeError(f"{p}: not a run folder (no results.jsonl) nor an episode folder of one{hint}")
    return list(targets.values())
