"""``harness run --repeats N``: every task of the selection run N times, each repeat an episode of
its own (``TASK#r``, harness.core.episode_ids) with its own seed derived from ``--seed``.

The episodes are queued repeat by repeat (every task's first repeat, then every task's second,
...), so the stations spread them like any episodes and a run stopped early holds whole passes
over the suite; ``--resume`` redoes exactly the episodes without a result line, as for a single
run. The manifest records ``repeats``; a resume must ask for the same number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.episode_ids import MAX_REPEATS, episode_id, repeat_seed
from harness.core.tasks import Task
from harness.run.options import RunError


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode to run: its task, its id in the run folder, its repeat (None: the task runs
    once) and its seed."""

    task: Task
    id: str
    repeat: int | None
    seed: int

    def result_fields(self) -> dict[str, Any]:
        """What its result line adds for a repeated task: the task and the repeat."""
        return {} if self.repeat is None else {"task": self.task.id, "repeat": self.repeat}


def plan_episodes(tasks: Iterable[Task], repeats: int, seed: int) -> list[PlannedEpisode]:
    """The episodes of ``tasks`` run ``repeats`` times, repeat by repeat."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise RunError(f"--repeats must be between 1 and {MAX_REPEATS}, got {repeats}")
    tasks = list(tasks)
    return [PlannedEpisode(t, episode_id(t.id, r, repeats), r if repeats > 1 else None, repeat_seed(seed, r))
            for r in range(1, repeats + 1) for t in tasks]


def as_planned(item: "Task | PlannedEpisode", seed: int) -> PlannedEpisode:
    """A task given where an episode is expected: the task run once with the run's seed."""
    return item if isinstance(item, PlannedEpisode) else PlannedEpisode(item, item.id, None, seed)


def check_resume_repeats(old_manifest: dict[str, Any], repeats: int, out: str) -> None:
    """A resumed run asks for the repeats it was started with (a run from before repeats had 1)."""
    was = old_manifest.get("repeats", 1)
    if was != repeats:
        raise RunError(f"--resume: --repeats differs from the run in {out} (was {was!r}, now {repeats!r}); "
                       "resume with the same command")
