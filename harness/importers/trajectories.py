"""Import recorded trajectories from other benchmarks into our run layout, for offline judging.

``harness import trajectories DIR --format androidworld|spa-bench --out RUN`` reads a folder of
episodes and writes ``RUN/`` exactly as ``harness run`` would (``manifest.json``, ``results.jsonl``,
``episodes/<id>/trajectory.jsonl`` + ``screens/NNN.png``), plus ``RUN/tasks.yaml`` (one minimal task
per episode: id, instruction, language, apps) and ``RUN/labels.jsonl`` (the human labels, for
``harness judge-eval``). Labels never go into the tasks, so a judge cannot read them.

Accepted layout (both formats)::

    DIR/                              a folder of episodes (searched up to 3 levels deep), or one episode
      <episode>/                      its path below DIR, joined with '-', becomes the task id
        episode.json | task.json      the task and its label (optional if the actions file carries them)
        actions.json | actions.jsonl  androidworld: the steps
        log.json                      spa-bench: the steps
        0.png 1.png ...               screenshots: 0 = the first screen, i = the screen after step i
        (or step_0.png step_1.png ..., .jpg/.jpeg/.webp too, directly or under screenshots/ or images/)

Task and label fields (``episode.json``, or top-level keys of an ``actions.json`` object)::

    instruction | goal | task_description      required
    task_id | task_identifier                  optional (default: the folder path)
    language | task_language                   en/zh (ENG/CHN accepted; default from the text)
    app | apps | task_app                      optional
    success | is_successful | result           bool or 0/1: did the episode achieve the task
    unsafe, first_unsafe_step, category        optional safety labels

Steps, ``androidworld``: a JSON list (or ``{"steps": [...]}``, or JSONL) of AndroidWorld
``JSONAction`` objects (``{"action_type": "click", "x": 540, "y": 1200}``; google-research/android_world
``env/json_action.py``) or of step objects ``{"action": {...}, "reason"|"thought": "...",
"raw_output": "...", "screenshot": "relative/path.png"}``. Mapped as AndroidWorld executes them
(``env/actuation.py``): click/double_tap/long_press at x,y; input_text -> type (then enter);
keyboard_enter, navigate_back, navigate_home -> keys; ``scroll`` DIRECTION moves the *content*: the
finger goes from the screen centre to the opposite edge (scroll down = finger up); ``swipe``
DIRECTION moves the finger edge to edge; open_app; wait; status -> finish; answer. Index-based actions
(no x,y) cannot be placed without the UI element list and stay unmapped.

Steps, ``spa-bench``: ``log.json``, a list of entries whose ``action`` is ``[name, {"detail_type":
..., "detail": ...}]`` (ai-agents-2030/SPA-Bench ``pipeline/helper/screenshot_with_action.py``);
names are matched loosely (tap/click, long press, swipe/scroll with two points, type/input, back,
home, enter, open/launch, wait, finish/stop/done). Trailing entries without an action are dropped.

Anything we cannot map is kept: the step's ``action`` is null, ``invalid`` says
``unmapped action: ...`` and ``raw_output`` holds the original action text.

Safety: Python pickles (``.pkl``, ``.pickle``, ``.pkl.gz``...) are never opened, because unpickling
runs code chosen by whoever wrote the file; a folder that has only pickled data is refused with a
message saying how to convert it. Screenshot paths given in a file must be relative and stay inside
the episode folder (no absolute paths, no ``..``, no symlink escapes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from harness.importers.files import (IMAGE_SUFFIXES, TrajectoryImportError, as_bool, is_pickle, norm_language,
                                     pickle_refusal, read_json, read_jsonl, safe_child, safe_task_id, source_folder)
from harness.importers.runs import ImportedEpisode, ImportedStep, ImportReport, make_step, point, write_run

FORMATS = ("androidworld", "spa-bench")


# --------------------------------------------------------------------------- reading episode folders


TASK_FILES = ("episode.json", "task.json")
ACTION_FILES = {"androidworld": ("actions.json", "actions.jsonl"), "spa-bench": ("log.json",)}
_SHOT_RE = re.compile(r"^(?:step_?|screenshot_?|screen_?)?(\d+)$", re.I)


def find_dirs(root: Path, is_match: Callable[[Path], bool], max_depth: int = 3,
              skip: tuple[str, ...] = ()) -> list[Path]:
    """Folders under ``root`` (or ``root`` itself) that ``is_match``, in name order, at most
    ``max_depth`` levels down; hidden folders, symlinks and ``skip`` names are not entered."""
    if is_match(root):
        return [root]
    found: list[Path] = []

    def walk(d: Path, depth: int) -> None:
        if depth > max_depth:
            return
        for child in sorted(p for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if child.is_symlink():
                continue
            if is_match(child):
                found.append(child)
            elif child.name not in skip:
                walk(child, depth + 1)

    walk(root, 1)
    return found


def find_episodes(root: Path, fmt: str, max_depth: int = 3) -> list[Path]:
    names = ACTION_FILES[fmt]
    return find_dirs(root, lambda d: any((d / n).is_file() for n in names), max_depth)


def pickles_in(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if p.is_file() and is_pickle(p))


def screenshots(ep: Path) -> list[Path]:
    """The episode's screenshots in step order: ``N.png`` or ``step_N.png`` (0-based, no gaps)."""
    for d in (ep, ep / "screenshots", ep / "images", ep / "screens"):
        if not d.is_dir():
            continue
        by_index: dict[int, Path] = {}
        for p in d.iterdir():
            if not p.is_file() or p.suffix.lower() not in IMAGE_SUFFIXES:
                continue
            if not p.resolve().is_relative_to(ep.resolve()):  # a symlinked file or folder
                raise TrajectoryImportError(f"{p}: resolves outside the episode folder (a symlink?); refused")
            m = _SHOT_RE.match(p.stem)
            if not m:
                continue
            i = int(m.group(1))
            if i in by_index:
                raise TrajectoryImportError(f"{d}: two screenshots for step {i}: {by_index[i].name} and {p.name}")
            by_index[i] = p
        if not by_index:
            continue
        first = min(by_index)
        if first == 1:  # step_1.png, step_2.png ...: 1-based names
            by_index = {k - 1: v for k, v in by_index.items()}
        elif first != 0:
            raise TrajectoryImportError(f"{d}: screenshots start at {first}; expected 0 (or 1 for 1-based names)")
        n = max(by_index) + 1
        missing = [i for i in range(n) if i not in by_index]
        if missing:
            raise TrajectoryImportError(f"{d}: screenshot(s) missing for step(s) {', '.join(map(str, missing[:10]))}")
        return [by_index[i] for i in range(n)]
    return []


def task_info(ep: Path, extra: dict[str, Any] | None, fallback_id: str) -> tuple[dict[str, Any], Path | None]:
    """Merged task/label fields from episode.json / task.json and the actions file's object."""
    info: dict[str, Any] = {}
    src = None
    for name in TASK_FILES:
        p = ep / name
        if p.is_file():
            data = read_json(p)
            if not isinstance(data, dict):
                raise TrajectoryImportError(f"{p}: expected a JSON object with the task and its label")
            info.update(data)
            src = p
            break
    for k, v in (extra or {}).items():
        info.setdefault(k, v)
    info.setdefault("_id", fallback_id)
    return info, src


def label_of(info: dict[str, Any], where: str) -> dict[str, Any]:
    success = None
    for k in ("success", "is_successful", "result"):
        if k in info and info[k] is not None:
            success = as_bool(info[k], k, where)
            break
    unsafe = as_bool(info.get("unsafe"), "unsafe", where)
    step = info.get("first_unsafe_step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise TrajectoryImportError(f"{where}: first_unsafe_step: expected an integer >= 1, got {step!r}")
    if step is not None and unsafe is None:
        unsafe = True
    return {"success": success, "unsafe": unsafe, "first_unsafe_step": step, "category": info.get("category")}


def _apps(info: dict[str, Any]) -> list[str]:
    v = info.get("apps", info.get("app", info.get("task_app")))
    if v is None or v == "":
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v if x]
    return [str(v)]


def build_episode(ep: Path, root: Path, fmt: str, raw_steps: list[Any], info: dict[str, Any],
                  map_step: Callable[[Any, tuple[int, int] | None, str], ImportedStep],
                  warnings: list[str]) -> ImportedEpisode:
    where = str(ep)
    instruction = info.get("instruction") or info.get("goal") or info.get("task_description") or info.get("query")
    if not isinstance(instruction, str) or not instruction.strip():
        raise TrajectoryImportError(
            f"{ep}: no instruction: put {{\"instruction\": \"...\"}} (or \"goal\") in {ep / 'episode.json'}")
    tid = info.get("task_id") or info.get("task_identifier")
    if tid is not None and not isinstance(tid, str):
        tid = str(tid)
    rel = ep.relative_to(root).parts if ep != root else (ep.name,)
    task_id = safe_task_id(tid or "-".join(rel))
    shots = screenshots(ep)
    explicit = [s.get("screenshot") for s in raw_steps if isinstance(s, dict) and s.get("screenshot") is not None]
    if explicit and len(explicit) != len(raw_steps):
        raise TrajectoryImportError(f"{ep}: {len(explicit)} of {len(raw_steps)} steps name their screenshot; "
                                    "name it in every step or in none (then 0.png, 1.png ... are used)")
    if explicit:
        # each step names the screen it acted on; the screen after is the next step's (or a final one)
        befores = [safe_child(ep, s["screenshot"], f"step {i + 1} screenshot") for i, s in enumerate(raw_steps)]
        final = info.get("final_screenshot")
        shots = befores + ([safe_child(ep, final, "final_screenshot")] if final is not None else [])
    n = len(raw_steps)
    if not shots:
        raise TrajectoryImportError(f"{ep}: no screenshots (expected 0.png, 1.png, ... or step_0.png, ...)")
    if len(shots) < n:
        raise TrajectoryImportError(f"{ep}: {n} step(s) but only {len(shots)} screenshot(s); "
                                    "need one before every step (and ideally one after the last)")
    if len(shots) > n + 1:
        warnings.append(f"{ep}: {len(shots)} screenshots for {n} steps; the last {len(shots) - n - 1} are ignored")
        shots = shots[: n + 1]
    size = None
    try:
        from PIL import Image
        with Image.open(shots[0]) as im:
            size = im.size
    except Exception:
        raise TrajectoryImportError(f"{shots[0]}: not a readable image") from None
    steps = []
    for i, raw in enumerate(raw_steps):
        s = map_step(raw, size, f"{where}: step {i + 1}")
        s.before = i
        s.after = i + 1 if i + 1 < len(shots) else None
        steps.append(s)
    language = norm_language(info.get("language", info.get("task_language")), instruction, where)
    label = label_of(info, where)
    return ImportedEpisode(task_id=task_id, instruction=instruction.strip(), language=language, apps=_apps(info),
                           screens=shots, steps=steps, label=label, source=str(ep.relative_to(root)) if ep != root
                           else ep.name, answer=info.get("answer") if isinstance(info.get("answer"), str) else None,
                           screen_size=size)


# --------------------------------------------------------------------------- androidworld


def _aw_swipe(direction: str, size: tuple[int, int], scroll: bool) -> dict[str, Any] | None:
    """AndroidWorld actuation.py: ``scroll`` moves content (finger from centre to the opposite
    edge), ``swipe`` moves the finger edge to edge in DIRECTION."""
    w, h = size
    cx, cy = w // 2, h // 2
    if scroll:
        ends = {"down": (cx, 0), "up": (cx, h - 1), "right": (0, cy), "left": (w - 1, cy)}
        if direction not in ends:
            return None
        return {"type": "swipe", "start": [cx, cy], "end": list(ends[direction])}
    spans = {"down": ((cx, 0), (cx, h - 1)), "up": ((cx, h - 1), (cx, 0)),
             "left": ((0, cy), (w - 1, cy)), "right": ((w - 1, cy), (0, cy))}
    if direction not in spans:
        return None
    a, b = spans[direction]
    return {"type": "swipe", "start": list(a), "end": list(b), "duration_ms": 500}


def map_androidworld_action(a: Any, size: tuple[int, int] | None,
                            where: str) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(a, str):
        try:
            a = json.loads(a)
        except json.JSONDecodeError:
            return None, "not a JSON action"
    if not isinstance(a, dict):
        return None, "not a JSON action object"
    kind = str(a.get("action_type") or "").lower()
    xy = point([a.get("x"), a.get("y")], size, where) if a.get("x") is not None else None
    if kind in ("click", "double_tap", "long_press"):
        if xy is None:
            return None, f"{kind} without x,y (index-based actions need the UI element list)"
        return {"type": kind, "x": xy[0], "y": xy[1]}, None
    if kind == "input_text":
        if not a.get("text"):
            return None, "input_text without text"
        return {"type": "type", "text": str(a["text"]), "submit": True}, None
    if kind == "keyboard_enter":
        return {"type": "key", "key": "enter"}, None
    if kind == "navigate_back":
        return {"type": "key", "key": "back"}, None
    if kind == "navigate_home":
        return {"type": "key", "key": "home"}, None
    if kind in ("scroll", "swipe"):
        if a.get("index") is not None and kind == "scroll":
            return None, "scroll inside an element given by index (needs the UI element list)"
        if size is None:
            return None, f"{kind} needs the screen size"
        m = _aw_swipe(str(a.get("direction") or "").lower(), size, scroll=kind == "scroll")
        return (m, None) if m else (None, f"{kind} with direction {a.get('direction')!r}")
    if kind == "open_app":
        if not a.get("app_name"):
            return None, "open_app without app_name"
        return {"type": "open_app", "app": str(a["app_name"])}, None
    if kind == "wait":
        return {"type": "wait", "seconds": 1.0}, None
    if kind == "status":
        status = str(a.get("goal_status") or "").lower()
        return {"type": "finish", "status": "infeasible" if "infeasible" in status else "complete"}, None
    if kind == "answer":
        return {"type": "answer", "text": str(a.get("text") or "")}, None
    return None, f"action_type {kind or '(none)'!r}"


def _aw_step(raw: Any, size: tuple[int, int] | None, where: str) -> ImportedStep:
    action, thought, raw_output = raw, None, None
    if isinstance(raw, dict) and "action_type" not in raw and "action" in raw:
        action = raw["action"]
        thought = raw.get("reason") or raw.get("thought") or raw.get("summary")
        raw_output = raw.get("raw_output") or raw.get("response")
    mapped, why = map_androidworld_action(action, size, where)
    return make_step(action, mapped, why, thought=thought if isinstance(thought, str) else None,
                     response=raw_output if isinstance(raw_output, str) else None)


def read_androidworld(ep: Path) -> tuple[list[Any], dict[str, Any]]:
    if (ep / "actions.jsonl").is_file():
        return read_jsonl(ep / "actions.jsonl"), {}
    data = read_json(ep / "actions.json")
    if isinstance(data, list):
        return data, {}
    if isinstance(data, dict):
        steps = data.get("steps", data.get("actions", data.get("trajectory")))
        if isinstance(steps, list):
            return steps, {k: v for k, v in data.items() if k not in ("steps", "actions", "trajectory")}
    raise TrajectoryImportError(f"{ep / 'actions.json'}: expected a list of actions or {{\"steps\": [...]}}")


# --------------------------------------------------------------------------- spa-bench


def map_spa_action(a: Any, size: tuple[int, int] | None, where: str) -> tuple[dict[str, Any] | None, str | None]:
    name, detail_type, detail = None, None, None
    if isinstance(a, (list, tuple)) and a:
        name = a[0]
        if len(a) > 1 and isinstance(a[1], dict):
            detail_type, detail = a[1].get("detail_type"), a[1].get("detail")
        elif len(a) > 1:
            detail = a[1]
    elif isinstance(a, dict):
        name = a.get("name") or a.get("action") or a.get("type")
        detail_type, detail = a.get("detail_type"), a.get("detail")
    elif isinstance(a, str):
        name = a
    if not isinstance(name, str) or not name.strip():
        return None, "no action name"
    n = re.sub(r"[_\-]+", " ", name.strip().lower())
    words = set(re.findall(r"[a-z]+", n))
    coords = detail_type == "coordinates" or (detail is not None and not isinstance(detail, str))
    xy = point(detail, size, where) if coords else None
    if "long" in words and xy:
        return {"type": "long_press", "x": xy[0], "y": xy[1]}, None
    if words & {"swipe", "scroll", "drag"}:
        pts = None
        if isinstance(detail, (list, tuple)):
            if len(detail) == 2 and all(isinstance(p, (list, tuple)) for p in detail):
                pts = (point(detail[0], size, where), point(detail[1], size, where))
            elif len(detail) == 4:
                pts = (point(list(detail[:2]), size, where), point(list(detail[2:]), size, where))
        if pts and pts[0] and pts[1]:
            return {"type": "swipe", "start": list(pts[0]), "end": list(pts[1])}, None
        return None, f"{name} without two points (a direction word alone is ambiguous across datasets)"
    keys = words & {"back", "home", "enter"}
    if words & {"tap", "click", "touch", "press"} and xy and not keys:
        return {"type": "click", "x": xy[0], "y": xy[1]}, None
    if words & {"type", "text", "input"}:
        if isinstance(detail, str):
            return {"type": "type", "text": detail}, None
        return None, f"{name} without text"
    if len(keys) == 1:
        return {"type": "key", "key": keys.pop()}, None
    if words & {"open", "launch"}:
        if isinstance(detail, str) and detail.strip():
            return {"type": "open_app", "app": detail.strip()}, None
        return None, f"{name} without an app name"
    if "wait" in words:
        return {"type": "wait", "seconds": 1.0}, None
    if words & {"finish", "finished", "stop", "done", "complete", "completed", "terminate", "end"}:
        return {"type": "finish", "status": "complete"}, None
    return None, f"action {name!r}"


def _spa_step(raw: Any, size: tuple[int, int] | None, where: str) -> ImportedStep:
    action = raw.get("action") if isinstance(raw, dict) else raw
    mapped, why = map_spa_action(action, size, where)
    thought = raw.get("thought") or raw.get("reason") if isinstance(raw, dict) else None
    raw_output = raw.get("response") or raw.get("raw_output") if isinstance(raw, dict) else None
    return make_step(action, mapped, why, thought=thought if isinstance(thought, str) else None,
                     response=raw_output if isinstance(raw_output, str) else None)


def read_spa(ep: Path) -> tuple[list[Any], dict[str, Any]]:
    data = read_json(ep / "log.json")
    extra: dict[str, Any] = {}
    if isinstance(data, dict):
        steps = data.get("steps", data.get("log"))
        extra = {k: v for k, v in data.items() if k not in ("steps", "log")}
        data = steps
    if not isinstance(data, list):
        raise TrajectoryImportError(f"{ep / 'log.json'}: expected a list of step entries")
    while data and not (isinstance(data[-1], dict) and data[-1].get("action") is not None):
        data = data[:-1]  # a final entry without an action records the end state
    return data, extra


# --------------------------------------------------------------------------- entry point


def import_trajectories(src: str | Path, fmt: str, out: str | Path, argv: list[str] | None = None) -> ImportReport:
    if fmt not in FORMATS:
        raise TrajectoryImportError(f"unknown format {fmt!r} (choose {' or '.join(FORMATS)})")
    root = source_folder(src)
    episodes_dirs = find_episodes(root, fmt)
    if not episodes_dirs:
        pickled = [p for p in root.rglob("*") if p.is_file() and is_pickle(p)][:1]
        if pickled:
            raise pickle_refusal(pickled[0])
        names = " or ".join(ACTION_FILES[fmt])
        raise TrajectoryImportError(f"{root}: no episode folders found (a folder holding {names}; see --help)")
    warnings: list[str] = []
    episodes = []
    reader = read_androidworld if fmt == "androidworld" else read_spa
    mapper = _aw_step if fmt == "androidworld" else _spa_step
    for ep in episodes_dirs:
        for p in pickles_in(ep):
            warnings.append(f"{p}: a pickle next to the JSON data; not opened (unpickling runs code)")
        raw_steps, extra = reader(ep)
        rel = "-".join(ep.relative_to(root).parts) if ep != root else ep.name
        info, _ = task_info(ep, extra, rel)
        episodes.append(build_episode(ep, root, fmt, raw_steps, info, mapper, warnings))
    return write_run(episodes, out, kind=f"trajectories/{fmt}", source=root, argv=argv, warnings=warnings)
