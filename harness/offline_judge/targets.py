"""What to judge: run folders and episode folders given on the command line, their episodes read
(result lines and tasks, packed), and the task of an episode whose suite file is gone (rebuilt from
its result line)."""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from harness.offline_judge.errors import OfflineJudgeError
from harness.records import (EPISODES_DIR, RESULTS_FILE, TRAJECTORY_FILE, EpisodeResult, RecordError, read_manifest,
                             read_results)
from harness.core.episode_ids import task_of
from harness.core.run_tasks import load_run_tasks
from harness.core.tasks import Task
from harness.core.verdicts import JUDGEMENTS_DIR


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


def _pack(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


@dataclass(frozen=True)
class PackedEpisode:
    """One finished episode of a run, its result line and task packed (pickled: equal objects
    back, nothing validated again) until a worker judges it. A pass reads every episode before it
    starts; as pydantic objects they were ~4 KB an episode (task 2.4 KB, result 1.5 KB), packed
    ~1 KB (a run has one result line per task id)."""

    task_id: str
    status: str
    packed_result: bytes
    packed_task: bytes | None
    task_problem: str | None  # why there is no task (then packed_task is None)

    def unpack(self) -> tuple[EpisodeResult, Task | None]:
        task = pickle.loads(self.packed_task) if self.packed_task is not None else None
        return pickle.loads(self.packed_result), task


@dataclass
class TargetEpisodes:
    """A target's episodes with a result line (those it selects), and the selected ones without."""

    target: Target
    episodes: list[PackedEpisode]
    missing: list[str] = field(default_factory=list)


@dataclass
class EpisodesRead:
    """What :func:`read_episodes` read from the paths given: per run, its episodes; the problems."""

    targets: list[TargetEpisodes]
    warnings: list[str]
    read_s: float = 0.0  # how long the reading took


def _episode(r: EpisodeResult, tasks: dict[str, Task]) -> PackedEpisode:
    task = tasks.get(task_of(r.task_id))  # a repeat's episode (TASK#r) is its task's
    problem = None
    if task is None:
        try:
            task = minimal_task(r)
        except Exception as e:
            problem = f"cannot rebuild the task: {e}"
        if task is None and problem is None:
            problem = (f"task {r.task_id!r} is not in the run's suite files and its result line has no "
                       "instruction; pass --suite with the task file")
    return PackedEpisode(r.task_id, r.status, _pack(r), _pack(task) if task is not None else None, problem)


def read_episodes(paths: Iterable[str | Path], suite: str | Path | None = None) -> EpisodesRead:
    """The targets of ``paths`` (:func:`resolve_targets`) and their episodes: each run's result
    lines and tasks (its manifest's task files, or ``suite``), packed. ``harness judge`` reads them
    before it builds its judges: the objects of the reading (YAML nodes, task and result models) are
    freed as soon as they are packed, and the imports the judges bring then reuse their memory, so a
    pass's memory hardly grows with the episodes it judges (bench_judges_scale)."""
    t0 = time.monotonic()
    warnings: list[str] = []
    out: list[TargetEpisodes] = []
    for t in resolve_targets(paths, warnings):
        try:
            results = read_results(t.run_dir)
            manifest = read_manifest(t.run_dir) if (t.run_dir / "manifest.json").is_file() else {}
        except RecordError as e:
            raise OfflineJudgeError(str(e)) from None
        warnings.extend(results.warnings)
        tasks = load_run_tasks(t.run_dir, manifest, suite, warnings)
        missing = sorted(t.only - {r.task_id for r in results}) if t.only else []
        out.append(TargetEpisodes(t, [_episode(r, tasks) for r in results if t.only is None or r.task_id in t.only],
                                  missing))
    return EpisodesRead(out, warnings, time.monotonic() - t0)
