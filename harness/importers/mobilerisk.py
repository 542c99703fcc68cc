"""Import MobileRisk (OS-Sentinel's safety benchmark, FIELD_NOTES section 4) into our run layout.

``harness import mobilerisk DIR --out RUN`` writes a run folder (see :mod:`harness.importers.trajectories`)
plus ``RUN/labels.jsonl`` with, per case, ``unsafe``, ``first_unsafe_step`` (t*, 1-based) and
``category`` (the risk types), ready for ``harness judge RUN --judge crate-s`` and
``harness judge-eval --labels RUN/labels.jsonl RUN``.

Layout, as OS-Sentinel's own code reads and writes it (OS-Copilot/OS-Sentinel: the evaluators
``pipeline/eval.py`` and ``pipeline/cons.py`` walk ``data/<unit>/<task>/trajectory.json``; the
annotator ``pipeline/step.py`` writes ``meta``; ``pipeline/convert.py`` builds the ``safe_dual`` unit;
``pipeline/rename.py`` names tasks ``01``, ``02``...; the recorder ``recorder_handler`` in
``mobile_safety/environment.py`` writes MobileRisk-Live's recordings)::

    DIR/                                 data/ itself, a folder above it, one unit, or one case
      <unit>/                            unsafe_msb, safe_dual ... : safe_/unsafe_ is the label
        <task>/                          01, 02 ...
          trajectory.json
          images/ jsons/ xmls/ objects/

    trajectory.json = {"query": str, "application": str, "platform_type": str,
                       "trajectory": [{"observation": "images/001_....png", "action": ..., "objects"?: str}],
                       "meta": {"step": int | null, "type": [category, ...]}}

Case ids are OS-Sentinel's ``inner_id``, ``f"{unit}_{task}"`` (``unsafe_msb_01``), whatever folder is
given (a case folder named ``safe_...``/``unsafe_...`` is already an id and keeps its name). The
label is OS-Sentinel's ground truth (``pipeline/multi_method_consistency.py``: an id starting with
``unsafe_`` is unsafe): the unit's (or case's) ``safe``/``unsafe`` prefix; without one, ``meta`` says
(``step`` null = safe). A case with neither is refused, never guessed safe; an unsafe case without
``meta.step`` is imported with t* unknown (a warning). ``meta.step`` is the 1-based index of the first
unsafe entry, i.e. our step t* (``convert.py`` keeps ``trajectory[0:step-1]`` to cut a trajectory just
before the risky step; safe cases have ``step: null``). A ``query`` of ``N/A`` (the recorder's default)
is no instruction: refused, naming the file.

Entry i of ``trajectory`` is the screen the agent saw and the action it took there: our step i+1,
whose screen after is entry i+1's screen (the recorder saves the screenshot, then runs the action).

Actions, benchmark cases: a list of ``{name, parameters}`` in the ``mobile_use`` vocabulary:
click/tap and long_press (``coordinate``), swipe (``coordinate`` -> ``coordinate2``), type (``text``),
system_button (``button``: back/home/enter), key, open (``text``), wait (``time``), terminate
(``status``: success -> finish complete, anything else, e.g. ``refuse``, -> finish infeasible) and
answer. Coordinates are read as screenshot pixels unless ``--coords thousand|unit`` says otherwise.

Actions, MobileRisk-Live recordings: strings in MobileSafetyBench's action language, as
``mobile_safety/component/parser.py`` executes them, against the elements the recorder saved for
that step (``objects``: ``parse_obs``'s list of ``{numeric_tag, resource_id, class,
content_description, text, checked}``, in ``mobile_safety/agent/utils.py``): ``tap(N)`` taps the
centre of element N's box, ``long-tap(N)`` presses it 3 s, ``swipe(up|down|left|right)`` moves the
finger between the fractions of the screen parse_action uses (up: 0.8 -> 0.2 of the height),
``button(back|home|overview)``, ``replace-text(N, "...")`` (the field emptied first: ``clear``),
``append-text(N, "...")`` and ``input(...)`` type their text, ``enter()``, ``paste()``, ``open-chrome()``, ``open-youtube()``,
``complete()`` (finish), ``refuse()`` and ``ask-consent()`` (finish infeasible: the agent stopped for
safety), ``terminate()`` (the recorder's end of a recording: finish, ``terminate(refuse)`` infeasible)
and ``no-op()`` (wait). An element's box is its ``bbox location`` (``parse_obs(attribute_bbox=True)``:
``((x1, y1), (x2, y2))`` as fractions of the screen) or ``bounds`` (``[x1,y1][x2,y2]`` pixels); the
tapped element's description is kept with the step. An element without a box, web pages
(``open-webpage(...)``...), calls, SMS macros and ``share-memo()`` stay unmapped, with the reason.

Anything else is kept as raw text with ``action`` null and ``invalid: unmapped action: ...``.
Pickles are never opened.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.core.tasks import RISK_CATEGORIES
from harness.importers.files import (TrajectoryImportError, guess_language, is_pickle, pickle_refusal, read_json, safe_child,
                                     safe_task_id, source_folder)
from harness.importers.runs import ImportedEpisode, ImportedStep, ImportReport, make_step, point, write_run
from harness.importers.trajectories import find_dirs, pickles_in

COORD_SPACES = ("pixels", "thousand", "unit")

# MobileRisk / OS-Sentinel prompt spellings -> our RISK_CATEGORIES (harness/core/tasks.py)
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


def _label_from_name(name: str) -> bool | None:
    """OS-Sentinel's label of a unit or case name: ``unsafe...`` unsafe, ``safe...`` safe."""
    low = name.lower()
    if low.startswith("unsafe"):
        return True
    if low.startswith("safe"):
        return False
    return None


def case_identity(case: Path) -> tuple[str, bool | None, str]:
    """(OS-Sentinel's case id, the label its folder names give, the case's ``unit/task`` path) of a
    case folder, the same whichever folder the import was pointed at: ``data/unsafe_msb/01`` is
    ``unsafe_msb_01`` (``f"{unit_name}_{task_name}"`` in ``pipeline/eval.py``); a case folder that is
    itself named ``safe_...``/``unsafe_...`` keeps its name."""
    real = case.resolve()
    task, unit = real.name, real.parent.name
    own = _label_from_name(task)
    if own is not None or not unit:
        return safe_task_id(task), own, task
    return safe_task_id(f"{unit}_{task}"), _label_from_name(unit), f"{unit}/{task}"


# MobileSafetyBench's swipe: finger from (x1, y1) to (x2, y2), fractions of the screen
# (``_SCROLL_MAP`` in OS-Sentinel's mobile_safety/component/parser.py)
_LIVE_SWIPES = {"up": (0.5, 0.8, 0.5, 0.2), "down": (0.5, 0.2, 0.5, 0.8), "left": (0.2, 0.5, 0.8, 0.5),
                "right": (0.8, 0.5, 0.2, 0.5)}
_LIVE_CALL = re.compile(r"\s*([A-Za-z][A-Za-z_-]*)\s*\((.*)\)\s*$", re.DOTALL)
_LIVE_INDEX = re.compile(r"\s*(?:numeric_tag\s*=\s*)?['\"]?(\d+)['\"]?\s*(?:,|$)")
_LIVE_UNMAPPED = {
    "open-webpage": "opens a web page in Chrome (a URL has no unified action)",
    "open-wikipedia": "opens a web page in Chrome (a URL has no unified action)",
    "open-wikihow": "opens a web page in Chrome (a URL has no unified action)",
    "open-walmart": "opens a web page in Chrome (a URL has no unified action)",
    "call": "a phone call placed by MobileSafetyBench's helper, not a screen action",
    "send-sms": "an SMS sent by MobileSafetyBench's helper, not a screen action",
    "share-memo": "MobileSafetyBench's Joplin sharing macro, not a screen action",
}


def _element_box(el: dict[str, Any], size: tuple[int, int] | None) -> tuple[int, int, int, int] | None:
    """An element's box in screenshot pixels: ``bbox location`` (fractions, parse_obs with
    attribute_bbox) or ``bounds`` (``[x1,y1][x2,y2]`` pixels, as uiautomator dumps write it)."""
    frac = el.get("bbox location") or el.get("bbox_location")
    if isinstance(frac, str) and size:
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", frac)]
        if len(nums) == 4:
            w, h = size
            return (round(nums[0] * w), round(nums[1] * h), round(nums[2] * w), round(nums[3] * h))
    px = el.get("bounds") or el.get("bbox")
    if isinstance(px, str):
        nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", px)]
        px = nums if len(nums) == 4 else None
    if isinstance(px, (list, tuple)) and len(px) == 2 and all(isinstance(p, (list, tuple)) for p in px):
        px = [*px[0], *px[1]]
    if isinstance(px, (list, tuple)) and len(px) == 4 and all(isinstance(v, (int, float)) for v in px):
        return tuple(int(v) for v in px)  # type: ignore[return-value]
    return None


def _described(el: dict[str, Any]) -> dict[str, Any]:
    """What a step keeps of the element it acts on (what parse_action reports: all but its box)."""
    return {k: v for k, v in el.items() if k not in ("bbox location", "bbox_location", "bounds", "bbox")}


def _string_arg(text: str) -> str | None:
    """The text argument of ``replace-text(5, "...")``, ``input("...")``, ``type(text='...')``."""
    m = re.search(r"""(?:value\s*=\s*|text\s*=\s*|content\s*=\s*|,\s*|^\s*)(["'])(.*)\1\s*$""", text, re.DOTALL)
    if m:
        return m.group(2).replace("\\n", "\n")
    m = re.match(r"\s*\d+\s*,\s*(.+?)\s*$", text, re.DOTALL)  # replace-text(5, unquoted words)
    return m.group(1) if m else (text.strip() or None)


def map_live_action(text: str, elements: list[Any] | None, size: tuple[int, int] | None,
                    where: str) -> tuple[dict[str, Any] | None, str | None, dict[str, Any] | None]:
    """A MobileRisk-Live step action (MobileSafetyBench's string form) -> (unified action JSON or
    None, why it does not map, the element it acts on)."""
    m = _LIVE_CALL.match(text)
    if not m:
        return None, f"{text[:60]!r} is not an action call", None
    name, args = m.group(1).lower().replace("_", "-"), m.group(2)

    def element() -> tuple[dict[str, Any] | None, str | None]:
        im = _LIVE_INDEX.match(args)
        if not im:
            return None, f"{name}() without an element index"
        idx = int(im.group(1))
        if not elements:
            return None, f"{name}({idx}): the step has no objects file listing its elements"
        el = next((e for e in elements if isinstance(e, dict) and e.get("numeric_tag") == idx), None)
        if el is None and idx < len(elements) and isinstance(elements[idx], dict):
            el = elements[idx]
        if el is None:
            return None, f"{name}({idx}): no element {idx} in the step's objects ({len(elements)} elements)"
        return el, None

    if name in ("tap", "long-tap", "click", "long-press"):
        el, why = element()
        if el is None:
            return None, why, None
        box = _element_box(el, size)
        info = _described(el)
        if box is None:
            return None, (f"{name}({el.get('numeric_tag')}): the element has no box (OS-Sentinel's recorder saves "
                          "boxes only with parse_obs(attribute_bbox=True))"), info
        x, y = (box[0] + box[2]) // 2, (box[1] + box[3]) // 2  # the centre, as parse_action taps it
        if name in ("tap", "click"):
            return {"type": "click", "x": x, "y": y}, None, info
        return {"type": "long_press", "x": x, "y": y, "duration_ms": 3000}, None, info
    if name in ("swipe", "scroll"):
        d = next((k for k in _LIVE_SWIPES if k in args.lower()), None)
        if d is None or not size:
            return None, f"swipe({args.strip()[:20]}) without a direction or screen size", None
        fx1, fy1, fx2, fy2 = _LIVE_SWIPES[d]
        w, h = size
        return {"type": "swipe", "start": [int(fx1 * w), int(fy1 * h)], "end": [int(fx2 * w), int(fy2 * h)],
                "duration_ms": 100}, None, None
    if name == "button":
        b = args.strip().strip("'\"").lower()
        key = "back" if "back" in b else "home" if "home" in b else "app_switch" if "overview" in b else None
        return ({"type": "key", "key": key}, None, None) if key else (None, f"button({b})", None)
    if name in ("replace-text", "append-text", "input", "type", "input-text"):
        value = _string_arg(args)
        info = None
        if _LIVE_INDEX.match(args) and name != "type":
            el, _ = element()
            info = _described(el) if el is not None else None
        if value is None:
            return None, f"{name} without text", None
        # replace-text empties the field first (parse_action: clear(), then send_keys); the others add to it
        return {"type": "type", "text": value, "clear": name == "replace-text"}, None, info
    if name == "enter":
        return {"type": "key", "key": "enter"}, None, None
    if name == "paste":
        return {"type": "key", "key": 279}, None, None  # KEYCODE_PASTE, as parse_action sends it
    if name in ("open-chrome", "open-youtube"):
        return {"type": "open_app", "app": "Chrome" if name == "open-chrome" else "YouTube"}, None, None
    if name == "complete":
        return {"type": "finish", "status": "complete"}, None, None
    if name in ("refuse", "ask-consent"):
        return {"type": "finish", "status": "infeasible"}, None, None
    if name in ("terminate", "finish", "finished"):
        status = args.strip().strip("'\"").lower().removeprefix("status=").strip("'\"")
        done = status in ("", "success", "successful", "complete", "completed", "done")
        return {"type": "finish", "status": "complete" if done else "infeasible"}, None, None
    if name in ("no-op", "noop", "wait"):
        return {"type": "wait", "seconds": 1.0}, None, None
    return None, _LIVE_UNMAPPED.get(name, f"action {name!r}"), None


def _read_objects(case: Path, rel: Any, where: str) -> list[Any] | None:
    if rel is None:
        return None
    data = read_json(safe_child(case, rel, where))
    if isinstance(data, dict):  # a wrapper object around the list
        data = next((v for v in data.values() if isinstance(v, list)), None)
    if not isinstance(data, list):
        raise TrajectoryImportError(f"{case / str(rel)}: expected a JSON list of elements")
    return data


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
    if query.strip().upper() == "N/A":
        raise TrajectoryImportError(f"{path}: query: 'N/A' is what OS-Sentinel's recorder writes by default, not an "
                                    "instruction; put the task's instruction in query before importing")
    traj = data.get("trajectory")
    if not isinstance(traj, list) or not traj:
        raise TrajectoryImportError(f"{path}: trajectory: expected a non-empty list of {{observation, action}}")
    meta = data.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise TrajectoryImportError(f"{path}: meta: expected an object {{step, type}}")
    case_id, unsafe, source = case_identity(case)
    step = (meta or {}).get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 1):
        raise TrajectoryImportError(f"{path}: meta.step: expected a 1-based step number or null, got {step!r}")
    if unsafe is None:
        if meta is None:
            raise TrajectoryImportError(
                f"{path}: no label: the folder names ({source}) do not start with safe/unsafe and there is no meta "
                "{step, type}; annotate it (OS-Sentinel's pipeline/step.py) or put it under a safe_/unsafe_ unit")
        unsafe = step is not None
    elif unsafe is False and step is not None:
        warnings.append(f"{path}: a safe case with meta.step {step}; the label follows the folder name (safe)")
        step = None
    elif unsafe and step is None:
        warnings.append(f"{path}: an unsafe case without meta.step: imported with the first unsafe step unknown "
                        "(step localisation is not scored for it)")
    if unsafe and step is not None and step > len(traj):
        warnings.append(f"{path}: meta.step {step} is past the last of {len(traj)} steps")
    types = (meta or {}).get("type") or []
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
        where = f"{path}: trajectory[{i}]"
        element = None
        if isinstance(raw, str):  # MobileRisk-Live: MobileSafetyBench's action strings against the step's objects
            objects = _read_objects(case, entry.get("objects"), f"trajectory[{i}].objects")
            mapped, why, element = map_live_action(raw, objects, size, where)
        else:
            mapped, why = map_action(raw, size, where, space)
        s = make_step(raw, mapped, why, thought=entry.get("thought") if isinstance(entry.get("thought"), str) else None)
        if element is not None:
            s.extras = {**(s.extras or {}), "element": element}
        s.before = i
        s.after = i + 1 if i + 1 < len(traj) else None
        steps.append(s)
    app = data.get("application")
    apps = [str(app)] if app else []
    label = {"unsafe": unsafe, "first_unsafe_step": step if unsafe else None,
             "category": categories or None, "source": "mobilerisk"}
    return ImportedEpisode(task_id=case_id, instruction=query.strip(), language=guess_language(query), apps=apps,
                           screens=screens, steps=steps, label=label, source=source, screen_size=size)


def find_cases(root: Path, max_depth: int = 4) -> list[Path]:
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
    seen: dict[str, Path] = {}
    for case in cases:
        for p in pickles_in(case):
            warnings.append(f"{p}: a pickle next to the JSON data; not opened (unpickling runs code)")
        ep = read_case(case, root, coords, warnings)
        if ep.task_id in seen:  # two copies of one case (data/ and a copy of it): ids must stay OS-Sentinel's
            raise TrajectoryImportError(f"{case}: the same case id {ep.task_id!r} as {seen[ep.task_id]}; "
                                        "import one of them at a time")
        seen[ep.task_id] = case
        episodes.append(ep)
    return write_run(episodes, out, kind="mobilerisk", source=root, argv=argv, warnings=warnings)

