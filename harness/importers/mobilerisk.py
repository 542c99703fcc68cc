"""Import MobileRisk (OS-Sentinel's safety benchmark, FIELD_NOTES section 4) into our run layout.

``harness import mobilerisk DIR --out RUN`` writes a run folder (see :mod:`harness.importers.trajectories`)
plus ``RUN/labels.jsonl`` with, per case, ``unsafe``, ``first_unsafe_step`` (t*, 1-based) and
``category`` (the risk types), ready for ``harness judge RUN --judge crate-s`` and
``harness judge-eval --labels RUN/labels.jsonl RUN``.

Layout read (the published data, as OS-Sentinel's ``pipeline/eval.py`` and ``pipeline/7_convert.py``
read it)::

    DIR/                                   searched up to 3 levels deep for trajectory.json
      safe_xxx/ or unsafe_xxx/ ...         the case id is the path below DIR joined with '_';
        trajectory.json                      a component starting with safe_/unsafe_ gives the label
        images/ xmls/ jsons/

    trajectory.json = {"query": str, "application": str, "platform_type": str,
                       "trajectory": [{"observation": "images/001_....png",
                                       "action": [{"name": str, "parameters": {...}}]}, ...],
                       "meta": {"step": int | null, "type": [category, ...]}}

Entry i of ``trajectory`` is the screen the agent saw and the action it took there: our step i+1,
whose screen after is entry i+1's screen. ``meta.step`` is the 1-based index of the first unsafe
entry, i.e. our step t* (OS-Sentinel slices ``trajectory[0:step-1]`` to cut a trajectory just before
the risky step). Safe cases have ``step: null``.

Actions use the ``mobile_use`` tool vocabulary: click/tap and long_press (``coordinate``), swipe
(``coordinate`` -> ``coordinate2``), type (``text``), system_button (``button``: back/home/enter),
key, open (``text``), wait (``time``), terminate (``status``: success -> finish complete, anything
else, e.g. ``refuse``, -> finish infeasible) and answer. Coordinates are read as screenshot pixels
unless ``--coords thousand|unit`` says otherwise. Anything else is kept as raw text with ``action``
null and ``invalid: unmapped action: ...``. Pickles are never opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.importers.trajectories import (find_dirs, ImportedEpisode, ImportedStep, ImportReport, TrajectoryImportError,
                                            guess_language, is_pickle, make_step, pickle_refusal, pickles_in, point,
                                            read_json, safe_child, safe_task_id, source_folder, write_run)
from harness.tasks import RISK_CATEGORIES

COORD_SPACES = ("pixels", "thousand", "unit")

# MobileRisk / OS-Sentinel prompt spellings -> our RISK_CATEGORIES (harness/tasks.py)
_CATEGORY_ALIASES = {
    "legal and compliance issues": "Legal/Compliance", "legal/compliance": "Legal/Compliance",
    "legal compliance": "Legal/Compliance", "security mechanism evasion": "Security Evasion",
    "ui interference attacks": "UI Interference", "ui interference attack": "UI Interference",
    "harmful content generation and dissemination": "Harmful Content", "privacy violation": "Privacy Violations",
    "destructive action": "Destructive Actions", "prompt injections": "Prompt Injection",
}


def normalise_category(raw: Any) -> str | None:
    if not isinstance(raw, str) or not raw.strip():
        return None
    key = " ".join(raw.replace("_", " ").replace("-", " ").split()).lower()
    for c in RISK_CATEGORIES:
        if c.lower() == key or c.lower().replace("/", " ") == key:
            return c
    return _CATEGORY_ALIASES.get(key, raw.strip())


def _key(params: dict[str, Any], *names: str) -> Any:
    for n in names:
        if n in params:
            return params[n]
    return None


def map_action(items: Any, size: tuple[int, int] | None, where: str,
               space: str = "pixels") -> tuple[dict[str, Any] | None, str | None]:
    """A MobileRisk step action (a list of ``{name, parameters}``) -> unified action JSON, or None
    and the reason it does not map."""
    if isinstance(items, dict):
        items = [items]
    if not isinstance(items, list) or not items:
        return None, "no action"
    if len(items) > 1:
        return None, f"{len(items)} actions in one step"
    a = items[0]
    if not isinstance(a, dict):
        return None, "action is not an object"
    name = str(a.get("name") or a.get("action") or "").strip().lower().replace("-", "_").replace(" ", "_")
    params = a.get("parameters") or a.get("arguments") or {}
    if not isinstance(params, dict):
        return None, f"{name}: parameters are not an object"

    def pt(*keys: str) -> tuple[int, int] | None:
        return point(_key(params, *keys), size, where, space)

    if name in ("click", "tap", "left_click"):
        xy = pt("coordinate", "point", "position")
        return ({"type": "click", "x": xy[0], "y": xy[1]}, None) if xy else (None, f"{name} without a coordinate")
    if name in ("long_press", "longpress", "long_click"):
        xy = pt("coordinate", "point", "position")
        if not xy:
            return None, f"{name} without a coordinate"
        out: dict[str, Any] = {"type": "long_press", "x": xy[0], "y": xy[1]}
        t = params.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
            out["duration_ms"] = int(min(max(t * 1000, 1), 60_000))
        return out, None
    if name in ("swipe", "drag", "scroll"):
        a0, a1 = pt("coordinate", "start_coordinate", "start"), pt("coordinate2", "end_coordinate", "end")
        if a0 and a1:
            return {"type": "swipe", "start": list(a0), "end": list(a1)}, None
        return None, f"{name} without two coordinates (a direction alone is ambiguous across datasets)"
    if name in ("type", "input", "input_text", "text"):
        text = _key(params, "text", "content")
        return ({"type": "type", "text": str(text)}, None) if isinstance(text, str) else (None, f"{name} without text")
    if name in ("system_button", "key", "press_key", "navigate_back", "navigate_home", "back", "home", "enter"):
        button = _key(params, "button", "key", "text") or name
        b = str(button).strip().lower().removeprefix("keycode_").replace("navigate_", "")
        if b in ("back", "home", "enter", "menu", "app_switch", "recent", "recents"):
            if b == "menu":
                return {"type": "key", "key": 82}, None  # KEYCODE_MENU
            return {"type": "key", "key": b}, None
        return None, f"{name} {button!r}"
    if name in ("open", "open_app", "awake", "launch"):
        app = _key(params, "text", "app", "app_name")
        return ({"type": "open_app", "app": str(app)}, None) if app else (None, f"{name} without an app")
    if name == "wait":
        t = params.get("time", params.get("seconds", 1))
        secs = float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else 1.0
        return {"type": "wait", "seconds": min(max(secs, 0.0), 60.0)}, None
    if name in ("terminate", "finish", "finished", "status", "complete", "refuse"):
        status = str(params.get("status") or name).lower()
        done = status in ("success", "successful", "complete", "completed", "finish", "finished", "done")
        return {"type": "finish", "status": "complete" if done else "infeasible"}, None
    if name == "answer":
        return {"type": "answer", "text": str(_key(params, "text", "answer") or "")}, None
    return None, f"action {name or '(no name)'!r}"


def _label_from_path(parts: tuple[str, ...]) -> bool | None:
    for p in parts:
        low = p.lower()
        if low.startswith("unsafe"):
            return True
        if low.startswith("safe"):
            return False
    return None


def _fallback_image(case: Path, i: int) -> Path | None:
    images = case / "images"
    if not images.is_dir():
        return None
    for pattern in (f"{i + 1:03d}_*", f"{i + 1:03d}.*"):
        hits = sorted(p for p in images.glob(pattern) if p.suffix.lower() in (".png", ".jpg", ".jpeg", ".webp"))
        if hits:
            return hits[0]
    return None


def read_case(case: Path, root: Path, space: str, warnings: list[str]) -> ImportedEpisode:
    path = case / "trajectory.json"
    data = read_json(path)
    if not isinstance(data, dict):
        raise TrajectoryImportError(f"{path}: expected a JSON object")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise TrajectoryImportError(f"{path}: query: required, the instruction text")
    traj = data.get("trajectory")
    if not isinstance(traj, list) or not traj:
        raise TrajectoryImportError(f"{path}: trajectory: expected a non-empty list of {{observation, action}}")
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise TrajectoryImportError(f"{path}: meta: expected an object {{step, type}}")
    parts = case.relative_to(root).parts if case != root else (case.name,)
    case_id = safe_task_id("_".join(parts))
    step = meta.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise TrajectoryImportError(f"{path}: meta.step: expected a 1-based step number or null, got {step!r}")
    unsafe = _label_from_path(parts)
    if unsafe is None:
        unsafe = step is not None
    elif unsafe is False and step is not None:
        warnings.append(f"{path}: a safe case with meta.step {step}; the label follows the folder name (safe)")
        step = None
    if unsafe and step is not None and step > len(traj):
        warnings.append(f"{path}: meta.step {step} is past the last of {len(traj)} steps")
    types = meta.get("type") or []
    if isinstance(types, str):
        types = [types]
    categories = [c for c in (normalise_category(t) for t in types) if c]

    screens: list[Path] = []
    for i, entry in enumerate(traj):
        if not isinstance(entry, dict):
            raise TrajectoryImportError(f"{path}: trajectory[{i}]: expected an object {{observation, action}}")
        obs = entry.get("observation")
        if isinstance(obs, str) and obs:
            shot = safe_child(case, obs, f"trajectory[{i}].observation")
        else:
            shot = _fallback_image(case, i)
            if shot is None:
                raise TrajectoryImportError(f"{path}: trajectory[{i}]: no observation image")
        if not shot.is_file():
            raise TrajectoryImportError(f"{path}: trajectory[{i}].observation: {obs!r} does not exist")
        screens.append(shot)
    from PIL import Image
    try:
        with Image.open(screens[0]) as im:
            size = im.size
    except Exception:
        raise TrajectoryImportError(f"{screens[0]}: not a readable image") from None
    steps: list[ImportedStep] = []
    for i, entry in enumerate(traj):
        raw = entry.get("action")
        mapped, why = map_action(raw, size, f"{path}: trajectory[{i}]", space)
        s = make_step(raw, mapped, why, thought=entry.get("thought") if isinstance(entry.get("thought"), str) else None)
        s.before = i
        s.after = i + 1 if i + 1 < len(traj) else None
        steps.append(s)
    app = data.get("application")
    apps = [str(app)] if app else []
    label = {"unsafe": unsafe, "first_unsafe_step": step if unsafe else None,
             "category": categories or None, "source": "mobilerisk"}
    return ImportedEpisode(task_id=case_id, instruction=query.strip(), language=guess_language(query), apps=apps,
                           screens=screens, steps=steps, label=label, source="/".join(parts), screen_size=size)


def find_cases(root: Path, max_depth: int = 3) -> list[Path]:
    return find_dirs(root, lambda d: (d / "trajectory.json").is_file(), max_depth,
                     skip=("images", "xmls", "jsons", "objects"))


def import_mobilerisk(src: str | Path, out: str | Path, *, coords: str = "pixels",
                      argv: list[str] | None = None) -> ImportReport:
    if coords not in COORD_SPACES:
        raise TrajectoryImportError(f"--coords must be one of {', '.join(COORD_SPACES)}, got {coords!r}")
    root = source_folder(src)
    cases = find_cases(root)
    if not cases:
        pickled = [p for p in root.rglob("*") if p.is_file() and is_pickle(p)][:1]
        if pickled:
            raise pickle_refusal(pickled[0])
        raise TrajectoryImportError(f"{root}: no MobileRisk cases (folders holding trajectory.json) found")
    warnings: list[str] = []
    episodes = []
    for case in cases:
        for p in pickles_in(case):
            warnings.append(f"{p}: a pickle next to the JSON data; not opened (unpickling runs code)")
        episodes.append(read_case(case, root, coords, warnings))
    return write_run(episodes, out, kind="mobilerisk", source=root, argv=argv, warnings=warnings)

