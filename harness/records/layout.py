"""Where a run's records live, and path safety: task ids that are safe folder names, relative
paths that cannot leave the run folder (no ``..``, no symlink out), one run folder given twice."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from harness.records.errors import RecordError


MANIFEST_FILE = "manifest.json"


RESULTS_FILE = "results.jsonl"


EPISODES_DIR = "episodes"


TRAJECTORY_FILE = "trajectory.jsonl"


SCREENS_DIR = "screens"


SUMMARY_FILE = "episode.json"


LOCK_FILE = ".lock"


INCOMING_PREFIX = ".incoming-"  # RUN/episodes/.incoming-<task>.<id>: an episode being installed


# a task id, or a repeated run's episode id: the task id and ``#r`` (harness.core.episode_ids)
_TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}(#[1-9][0-9]{0,4})?")


def validate_task_id(task_id: str) -> str:
    """Return ``task_id`` if it is safe as a folder name, else raise :class:`RecordError`.

    Allowed: ``^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`` (so no ``/``, ``\\``, leading dot,
    ``.``/``..``, spaces or newlines), with ``#r`` after it for repeat r of a repeated run.
    """
    if not isinstance(task_id, str):
        raise RecordError(f"must be a string, got {type(task_id).__name__}", field="task_id")
    if task_id in (".", "..") or not _TASK_ID_RE.fullmatch(task_id):
        raise RecordError(
            f"{task_id!r} is not a valid task id (1-128 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit; a repeat's episode id adds #N)",
            field="task_id",
        )
    return task_id


def check_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """``path`` if it resolves (symlinks followed) to ``root`` or below it, else RecordError: what a
    command reads from a run folder, it reads from inside that folder only."""
    p = Path(path)
    if not p.resolve().is_relative_to(Path(root).resolve()):
        raise RecordError(f"resolves outside {root} (a symlink leading out of the folder); refused", path=p)
    return p


def own_file(folder: str | os.PathLike[str], name: str) -> Path:
    """``folder/name``, refused (RecordError) if it is a symlink leading out of ``folder``."""
    return check_inside(folder, Path(folder) / name)


def distinct_runs(paths: Any, warnings: list[str]) -> list[Path]:
    """The run folders ``paths`` names, each once: a folder given again (the same path, another
    spelling of it, or a symlink to it) is left out with a warning, so no episode counts twice."""
    seen: dict[Path, Path] = {}
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        real = p.resolve()
        if real in seen:
            warnings.append(f"{p}: the same run folder as {seen[real]} (given twice); it is used once")
            continue
        seen[real] = p
        out.append(p)
    return out


def episode_dir(run_dir: str | os.PathLike[str], task_id: str) -> Path:
    """``RUN/episodes/<task_id>``, after checking the id and that the resolved path is a
    direct child of ``RUN/episodes`` inside ``RUN`` (so neither ``../``, nor a symlinked episode
    folder, nor a symlinked ``episodes`` folder can lead out of the run)."""
    validate_task_id(task_id)
    base = Path(run_dir) / EPISODES_DIR
    path = base / task_id
    if path.resolve().parent != Path(run_dir).resolve() / EPISODES_DIR:
        raise RecordError(f"episode folder for {task_id!r} resolves outside {base}", path=path)
    return path


_DRIVE_RE = re.compile(r"[A-Za-z]:")


def check_relative_path(rel: str) -> str:
    """Return ``rel`` if it is a relative path without ``..`` components, else raise ValueError."""
    if not isinstance(rel, str) or not rel:
        raise ValueError("must be a non-empty relative path")
    if "\x00" in rel:
        raise ValueError("must not contain NUL characters")
    # plain string checks (pathlib would intern every component of every path it parses)
    if rel.startswith(("/", "\\")) or _DRIVE_RE.match(rel):
        raise ValueError(f"must be a relative path inside the episode folder, got absolute path {rel!r}")
    if ".." in re.split(r"[\\/]", rel):
        raise ValueError(f"must not contain '..' components, got {rel!r}")
    return rel


def resolve_screen(episode_path: str | os.PathLike[str], rel: str) -> Path:
    """Turn a screen path read from a record (e.g. ``screens/003.png``) into a path under
    ``episode_path``; refuses absolute paths, ``..`` and symlink escapes."""
    try:
        check_relative_path(rel)
    except ValueError as e:
        raise RecordError(str(e), path=episode_path) from None
    base = Path(episode_path)
    path = base / rel
    if not path.resolve().is_relative_to(base.resolve()):
        raise RecordError(f"screen path {rel!r} resolves outside the episode folder", path=base)
    return path


_SCREEN_RE = re.compile(rf"{SCREENS_DIR}/\d{{3,}}\.png")
# other records an episode's observers write beside its trajectory (the live view's started.json
# and evidence.jsonl): plain lower-case names, JSON or JSON lines, never a path
_SIDE_FILE_RE = re.compile(r"[a-z][a-z0-9_]*\.jsonl?")


def is_side_file(rel: str) -> bool:
    """Whether ``rel`` names one of an episode's side records (not its trajectory or summary)."""
    return bool(_SIDE_FILE_RE.fullmatch(rel)) and rel not in (TRAJECTORY_FILE, SUMMARY_FILE)


def screen_name(index: int) -> str:
    """Relative path of screen ``index``: ``screens/000.png`` (initial), ``screens/012.png``…"""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise RecordError(f"screen index must be an int >= 0, got {index!r}")
    return f"{SCREENS_DIR}/{index:03d}.png"
