"""The tasks a recorded run ran, from the task files its manifest names.

A run's manifest lists its suite's files with their sha256 (``suite.files``; older manifests a
list, or only ``suite.path``). Commands that read runs later (``harness judge``, ``report``,
``view``, ``judge-eval``) rebuild the tasks from those files: a relative name is looked for beside
the run folder's records first, then from the current folder, then beside the run folder; a file
that is missing, invalid or changed since the run is a warning, never an error (its episodes are
then judged or grouped without their task).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.records import RecordError, read_manifest
from harness.core.tasks import Task, TaskError, load_file, load_suite


def load_run_tasks(run_dir: str | Path, manifest: dict[str, Any] | None = None, suite: str | Path | None = None,
                   warnings: list[str] | None = None, *, consequence: str = "") -> dict[str, Task]:
    """Task id -> Task: from ``suite`` if given, else from the files ``manifest`` (read from the run
    when not given) lists. Problems go to ``warnings``, each ending with ``consequence`` (what the
    caller does with the episodes of a file it could not load)."""
    warnings = warnings if warnings is not None else []
    if suite is not None:
        return {t.id: t for t in load_suite(suite).tasks}
    run_dir = Path(run_dir)
    if manifest is None:
        try:
            manifest = read_manifest(run_dir)
        except RecordError:
            return {}
    info = manifest.get("suite")
    if not isinstance(info, dict):
        return {}
    files = info.get("files") or {}
    if isinstance(files, list):
        files = {f: None for f in files if isinstance(f, str)}
    if not isinstance(files, dict):
        files = {}
    if not files and isinstance(info.get("path"), str):
        files = {info["path"]: None}
    tail = f"; {consequence}" if consequence else ""
    tasks: dict[str, Task] = {}
    for name, sha in files.items():
        p = Path(name)
        candidates = [p] if p.is_absolute() else [run_dir / p, Path.cwd() / p, run_dir.parent / p]
        found = next((c for c in candidates if c.exists()), None)
        if found is None:
            warnings.append(f"{run_dir}: task file {name} is missing (tried {', '.join(map(str, candidates))}){tail}")
            continue
        try:
            if found.is_dir():
                loaded, digest = load_suite(found).tasks, None
            else:
                loaded, digest = load_file(found)
        except TaskError as e:
            warnings.append(f"{run_dir}: cannot load the run's suite file: {e}{tail}")
            continue
        if sha and digest and sha != digest:
            warnings.append(f"{found}: changed since the run (sha256 differs); using it as it is now")
        for t in loaded:
            tasks.setdefault(t.id, t)
    return tasks
