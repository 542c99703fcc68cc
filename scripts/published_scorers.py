"""Run the published AndroidControl scorers' own code on steps and predictions, one decision per step.

Used by ``scripts/compare_static_scorers.py`` and by ``tests/report/fixtures/make_scorer_fixture.py``
(which wrote the fixture the profile tests check). It never imports the harness: it runs under a
Python that has the scorers' own dependencies (numpy, jax + jaxlib, Levenshtein, jsonschema,
pillow), which the harness does not need::

    python -m venv /tmp/scorers-venv && /tmp/scorers-venv/bin/pip install numpy jax jaxlib levenshtein jsonschema pillow

The scorers' code is never part of this repository. ``DIR`` (``--scorers``) holds one checkout per
repository, each at the commit our profiles cite (harness/report/static/*.py)::

    git clone https://github.com/X-PLUG/MobileAgent DIR/MobileAgent              # 11cea57
    git clone https://github.com/Reallm-Labs/InfiGUI-R1 DIR/InfiGUI-R1           # d280ab8
    git clone https://github.com/OpenBMB/AgentCPM-GUI DIR/AgentCPM-GUI           # acbaf50
    git clone https://github.com/OS-Copilot/OS-Atlas DIR/OS-Atlas                # bad0840
    git clone https://github.com/lll6gg/UI-R1 DIR/UI-R1                          # 2fe9bf0
    git clone https://github.com/OpenGVLab/GUI-Odyssey DIR/GUI-Odyssey           # fefcbe9
    git clone https://github.com/ritzz-ai/GUI-R1 DIR/GUI-R1                      # d43eea2
    # google-research is huge: only android_in_the_wild/{action_matching,action_type}.py are needed
    git clone --filter=blob:none --sparse https://github.com/google-research/google-research DIR/google-research
    git -C DIR/google-research sparse-checkout set android_in_the_wild

The scorers' logic is run unchanged. What each needs around it:

* stub modules for imports unrelated to scoring: ``torch``, ``requests``, ``x.qwen.image``,
  ``x.data.agent.json``, ``x.qwen.data_format`` (UI-S1: model and training code), ``colorama``
  (AgentCPM-GUI's image annotation), ``tqdm`` (AgentCPM-GUI's progress bars);
* functions taken from files whose module body does other work, by executing only their ``def``
  (``ast``): AgentCPM-GUI's ``process_ac.py`` (reads AndroidControl's TFRecords at import) for
  ``transform_action_data``, ``turn_ui_trees``, ``transform_action_data_and_build_test_data``;
  GUI-Odyssey's ``evaluate_GUIOdyssey.py`` (loads a model) for ``simple_decode`` and
  ``format_converter.py`` for ``decode_action``;
* scripts that only print totals are run one step at a time and their totals read back:
  OS-Atlas's ``evaluate`` (its loop's counters are read by a trace hook, and its subsplit file is
  written with the one episode as IDD), UI-R1's ``eval_ac.py`` (run on a one-line file), GUI-R1's
  ``eval_omni.evaluate`` (on a one-record file; its ``score_dict`` read by a trace hook), the record
  made by its inference script's own ``extract_action``, ``extract_coord`` and ``extract_input_text``
  (their ``def`` only: the script's body starts Ray) from the prediction written as its model answers.

A prediction that is null (a model output that did not parse) goes to each scorer as its own
pipeline gives it an unreadable output: UI-S1 and InfiGUI-R1 get ``None`` (their function raises: a
step that raises is wrong), AgentCPM-GUI's evaluator is not asked (no parsed action: wrong), OS-Atlas
a prediction line without ``actions:`` (its ``evaluate`` reads it as ``invalid action``), UI-R1 a
response without ``{...}``, GUI-Odyssey an empty action string, AITW an action of no type (code 0,
an unused value), GUI-R1 an empty answer (no action, no text, the point [0, 0]).

Input (``--cases FILE``): JSONL, one episode per line ``{"episode", "episode_id", "steps":
[{"action_content", "check_options", "size": [W, H]}], "predictions": {"j": action or null}}``
(AndroidControl actions in screen pixels; key ``len(steps)`` is the finish step). Output: JSONL,
``{"episode", "profile", "decisions": [[type_ok, ok] | [null, ok] | "skip: reason", ...]}``;
AgentCPM-GUI's list has one more entry, the finish step. How each prediction is written in each
scorer's own format is said at its function below.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import importlib
import io
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable

# The commit of each repository our profiles follow (harness/report/static/*.py cite the same).
COMMITS = {
    "MobileAgent": "11cea575561fb7800b5fb6b6cafa56f7a91de11f",
    "InfiGUI-R1": "d280ab8786cb3b063ae5cc62dc5fa91c4ceb348e",
    "AgentCPM-GUI": "acbaf509b8afb3f58b782486f4e8c0e33d8a486b",
    "OS-Atlas": "bad08407ab54b5bf6c17a69fe1ced476b9494926",
    "UI-R1": "2fe9bf00c8aae85fcedaf56eb3e2780dbfe8075e",
    "GUI-Odyssey": "fefcbe9d76e2f010c68225ae7f378c4c550a89c1",
    "google-research": "1d49f2c0d5506a6e11115726164d42f6b7b7b95a",   # android_in_the_wild/action_matching.py's last change
    "GUI-R1": "d43eea2f1c52356077034ff2524642fc05e06c6a",
}
FINGER = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def _finger_direction(p: list, q: list, size: list) -> str:
    """The finger's direction on screen fractions, ties vertical (as the harness reads a path)."""
    dx, dy = float(q[0]) / size[0] - float(p[0]) / size[0], float(q[1]) / size[1] - float(p[1]) / size[1]
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def checkout_commits(root: Path) -> dict[str, str]:
    """The commit each checkout under ``root`` is at (a warning on stderr where it is not the one
    our profiles follow)."""
    import subprocess

    out = {}
    for name, want in COMMITS.items():
        try:
            got = subprocess.run(["git", "-C", str(root / name), "rev-parse", "HEAD"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            got = "not a git checkout"
        if got != want:
            print(f"published_scorers: {name} is at {got}, our profiles follow {want}", file=sys.stderr)
        out[name] = got
    return out


def counters_of(func: Callable, name: str, call: Callable[[], Any]) -> dict:
    """The last value of local ``name`` in ``func`` while ``call()`` runs (a trace hook): the counters
    of a scorer that only prints its totals. A ``ZeroDivisionError`` in its summary (a lone step leaves
    other totals at 0) comes after the counters are read and is ignored."""
    seen: dict[str, Any] = {}
    code = func.__code__

    def tracer(frame, event, arg):
        if frame.f_code is code:
            def local(f, ev, a):
                if name in f.f_locals:
                    seen["d"] = dict(f.f_locals[name])
                return local
            return local
        return None

    sys.settrace(tracer)
    try:
        call()
    except ZeroDivisionError:
        pass
    finally:
        sys.settrace(None)
    return seen["d"]


def _stub(name: str, **attrs: Any) -> None:
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        mod = ".".join(parts[:i])
        if mod not in sys.modules:
            sys.modules[mod] = types.ModuleType(mod)
    for k, v in attrs.items():
        setattr(sys.modules[name], k, v)


def _defs_of(path: Path, names: set[str], namespace: dict[str, Any]) -> dict[str, Any]:
    """Execute only the named top-level function definitions of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    code = compile(ast.Module(body=body, type_ignores=[]), str(path), "exec")
    exec(code, namespace)
    return namespace


@contextlib.contextmanager
def _quiet():
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _import_from(folder: Path, module: str):
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(module)
    finally:
        sys.path.remove(str(folder))


def _grid(v: float, size: float, scale: int = 1000) -> int:
    return round(v / size * scale)


# --------------------------------------------------------------------------- UI-S1 and InfiGUI-R1


class UIS1:
    """``evaluate_android_control_action`` (predictions are screen pixels: the resized size passed
    is the screen's, so their normalisation is x / W for both)."""

    def __init__(self, root: Path):
        _stub("torch")
        _stub("requests")
        _stub("x.qwen.image", smart_resize=None)
        _stub("x.data.agent.json", JsonFormat=None)
        _stub("x.qwen.data_format", slim_messages=None)
        ev = root / "MobileAgent" / "UI-S1" / "evaluation"
        self.fn = _import_from(ev, "qwenvl_utils").evaluate_android_control_action
        self.fix_line = _import_from(ev, "eval_qwenvl").fix_line

    def decide(self, pred: dict, check: dict, size: list) -> list:
        w, h = size
        try:
            with _quiet():
                t, ok = self.fn(pred, check, w, h, w, h)
            return [bool(t), bool(ok)]
        except Exception:  # an error is no match (process_line: the episode fails)
            return [False, False]

    def episode(self, ep: dict) -> list:
        return [self.decide(_pred(ep, j), s["check_options"], s["size"]) for j, s in enumerate(ep["steps"])]

    def pipeline(self, ep: dict) -> list:
        line = self.fix_line(copy.deepcopy({"steps": [{k: v for k, v in s.items() if k != "size"} for s in ep["steps"]]}))
        return [self.decide(_pred(ep, j), line["steps"][j]["check_options"], s["size"]) for j, s in enumerate(ep["steps"])]


def _pred(ep: dict, j: int) -> dict:
    return ep["predictions"].get(str(j))


def _with_end(pred: dict, size: list) -> dict:
    """A swipe given as a start and a finger direction gets an end 0.2 screens away (InfiGUI-R1
    reads ``coordinate2``)."""
    if pred.get("action") == "swipe" and "coordinate2" not in pred:
        dx, dy = FINGER[pred["direction"]]
        x, y = pred["coordinate"]
        pred = {**pred, "coordinate2": [x + dx * 0.2 * size[0], y + dy * 0.2 * size[1]]}
    return pred


class InfiGUI:
    def __init__(self, root: Path):
        self.fn = _import_from(root / "InfiGUI-R1" / "eval" / "android_control", "evaluate_android_control").evaluate_android_control_action

    def episode(self, ep: dict) -> list:
        out = []
        for j, s in enumerate(ep["steps"]):
            w, h = s["size"]
            try:  # compute_scores: a step that raises counts in the denominator only
                t, ok = self.fn(_with_end(_pred(ep, j), s["size"]), s["check_options"], w, h, w, h)
                out.append([bool(t), bool(ok)])
            except Exception:
                out.append([False, False])
        return out


# --------------------------------------------------------------------------- AgentCPM-GUI


def raw_androidcontrol(step: dict) -> dict | None:
    """UI-S1's step as AndroidControl's raw action (what process_ac.py reads)."""
    a, c = step["action_content"], step["check_options"]
    k = a["action"]
    if k in ("click", "long_press"):
        return {"action_type": k, "x": a["coordinate"][0], "y": a["coordinate"][1]}
    if k == "swipe":
        return {"action_type": "scroll", "direction": c.get("direction")}
    if k == "type":
        return {"action_type": "input_text", "text": a["text"]}
    if k == "open":
        return {"action_type": "open_app", "app_name": a["text"]}
    if k == "wait":
        return {"action_type": "wait"}
    if k == "system_button":
        b = str(a["button"]).lower().strip()
        return {"action_type": {"back": "navigate_back", "home": "navigate_home"}.get(b, "press_" + b)}
    return None


def agentcpm_output(pred: dict, size: list) -> dict:
    """A prediction as AgentCPM-GUI's model writes it (its schema: points on the 0-1000 grid;
    durations in ms). Open, answer and double tap have no form there (an empty object fails its schema)."""
    w, h = size
    k = pred["action"]

    def pt(p: list) -> list:
        return [_grid(p[0], w), _grid(p[1], h)]

    if k == "click":
        return {"POINT": pt(pred["coordinate"])}
    if k == "long_press":
        return {"POINT": pt(pred["coordinate"]), "duration": round(float(pred.get("time", 1)) * 1000)}
    if k == "swipe":
        return {"POINT": pt(pred["coordinate"]), "to": pt(pred["coordinate2"]) if "coordinate2" in pred else pred["direction"]}
    if k == "type":
        return {"TYPE": pred["text"]}
    if k == "system_button":
        b = str(pred["button"]).lower().strip()
        return {"PRESS": {"back": "BACK", "home": "HOME", "enter": "ENTER", "recent": "APPSELECT",
                          "app_switch": "APPSELECT"}.get(b, b.upper())}
    if k == "wait":
        return {"duration": round(float(pred.get("time", 1)) * 1000)}
    if k == "finish":
        return {"STATUS": "finish"}
    return {"ACTION": k}


class AgentCPM:
    def __init__(self, root: Path):
        _stub("colorama", init=lambda *a, **k: None, Fore=None, Style=None)
        _stub("tqdm", tqdm=lambda x=None, **k: x)
        ev = root / "AgentCPM-GUI" / "eval"
        self.evaluator = _import_from(ev, "utils.evaluator").ActionEvaluator(tempfile.mkdtemp(), eval_android_control=True)
        self.parse_action = _import_from(ev, "utils.convert_output").parse_action
        ns = _defs_of(ev / "eval_data" / "process_ac.py",
                      {"transform_action_data", "turn_ui_trees", "transform_action_data_and_build_test_data"},
                      {"json": json, "re": __import__("re")})
        self.build = ns["transform_action_data_and_build_test_data"]

    @staticmethod
    def tree(boxes: list) -> str:
        """Candidate boxes written as accessibility-tree bounds, the text turn_ui_trees reads."""
        return "".join(f"bounds_in_screen {{\n  left: {b[0]}\n  top: {b[1]}\n  right: {b[2]}\n  bottom: {b[3]}\n}}\n"
                       for b in boxes)

    def _gt(self, ep: dict, j: int, raw: dict, size: list, boxes: list) -> dict | None:
        return self.build({"action": json.dumps(raw), "screenshot_width": size[0], "screenshot_height": size[1],
                           "screenshot_path": f"{ep['episode']}_{j}.png", "low_instruction": "", "goal": "",
                           "episode_id": ep["episode"], "step": j, "episode_length": len(ep["steps"]) + 1,
                           "ui_trees": self.tree(boxes)})

    def _decide(self, gt: dict, pred: dict | None, size: list) -> list:
        if pred is None:
            return [False, False]
        with _quiet():
            actions, params, status = self.parse_action(agentcpm_output(pred, size))
            r = self.evaluator(gt, {"action_predict": {"COA": {"txt": {"ACTION": actions, "ARGS": params, "STATUS": status}}}})
        return [bool(r["type_match"]), bool(r["exact_match"])]

    def episode(self, ep: dict) -> list:
        out: list = []
        for j, s in enumerate(ep["steps"]):
            raw = raw_androidcontrol(s)
            gt = self._gt(ep, j, raw, s["size"], s["check_options"].get("candidate_bbox") or []) if raw else None
            if gt is None:
                out.append("skip: dropped by process_ac.py")
                continue
            out.append(self._decide(gt, _pred(ep, j), s["size"]))
        n = len(ep["steps"])
        fin = ep["predictions"].get(str(n))
        if str(n) not in ep["predictions"]:
            out.append("skip: no finish prediction (run_eval_agent.py scores predicted steps only)")
        else:
            size = ep["steps"][-1]["size"]
            out.append(self._decide(self._gt(ep, n, {"action_type": "finish"}, size, []), fin, size))
        return out


# --------------------------------------------------------------------------- OS-Atlas


WORD_OF_FINGER = {"up": "DOWN", "down": "UP", "left": "LEFT", "right": "RIGHT"}


def os_atlas_string(a: dict, size: list, check: dict | None = None) -> str:
    """An action in OS-Atlas's action strings (its prompt, eval/data/ac_test.jsonl); points on the
    0-1000 grid; swipes with the dataset's word (ground truth) or the word the dataset uses for the
    predicted finger direction."""
    k = a["action"]
    if k in ("click", "long_press", "double_tap"):
        x, y = a["coordinate"]
        return f"{k.upper()} <point>[[{_grid(x, size[0])},{_grid(y, size[1])}]]</point>"
    if k == "swipe":
        if check and check.get("direction"):
            return f"SCROLL [{str(check['direction']).upper()}]"
        d = _finger_direction(a["coordinate"], a["coordinate2"], size) if "coordinate2" in a else a["direction"]
        return f"SCROLL [{WORD_OF_FINGER[d]}]"
    if k in ("type", "open", "answer"):
        word = {"type": "TYPE", "open": "OPEN_APP", "answer": "ANSWER"}[k]
        return f"{word} [{a['text']}]"
    if k == "system_button":
        b = str(a["button"]).lower().strip()
        return {"back": "PRESS_BACK", "home": "PRESS_HOME", "recent": "PRESS_RECENT", "app_switch": "PRESS_RECENT"}.get(
            b, "PRESS_" + b.upper())
    if k == "finish":
        return "COMPLETE"
    return k.upper()


class OSAtlas:
    def __init__(self, root: Path):
        self.mod = _import_from(root / "OS-Atlas" / "eval" / "eval_scripts" / "android_control", "evaluation_unify")
        self.dir = Path(tempfile.mkdtemp())

    def _one(self, gt_s: str, pred_s: str | None, episode: int) -> list:
        d = self.dir
        (d / "gt.jsonl").write_text(json.dumps({"image": f"/x/episode_{episode}_screenshot_0.png",
                                                "conversations": [{}, {"value": "actions:\n" + gt_s}]}) + "\n")
        # an unparsed output has no "actions:" part: evaluate reads it as "invalid action"
        (d / "pred.jsonl").write_text(json.dumps({"pred": "" if pred_s is None else "actions:\n" + pred_s}) + "\n")
        (d / "android_control_test_subsplits.json").write_text(json.dumps({"IDD": [episode]}))
        args = argparse.Namespace(prediction_file_path=str(d / "pred.jsonl"), ground_truth_file_path=str(d / "gt.jsonl"),
                                  split="low")
        cwd = os.getcwd()
        os.chdir(d)
        try:
            # its summary divides by the other subsplits' (empty) counts: the step's counters are read by then
            c = counters_of(self.mod.evaluate, "step_acc_res_dict", lambda: self.mod.evaluate(args))
        finally:
            os.chdir(cwd)
        return [c.get("type_match", 0) == 1, c.get("full", 0) == 1]

    def episode(self, ep: dict) -> list:
        out = []
        for j, s in enumerate(ep["steps"]):
            gt_s = os_atlas_string(s["action_content"], s["size"], s["check_options"])
            pred = _pred(ep, j)
            out.append(self._one(gt_s, None if pred is None else os_atlas_string(pred, s["size"]), int(ep["episode"])))
        return out


# --------------------------------------------------------------------------- UI-R1


def ui_r1_ground_truth(step: dict) -> dict | None:
    """The step as UI-R1's dataset/ac_test.json writes it (None: a step that file does not have)."""
    raw = raw_androidcontrol(step)
    if raw is None or raw["action_type"] in ("wait", "long_press", "navigate_home") or raw["action_type"].startswith("press_"):
        return None
    if raw["action_type"] == "open_app":
        return {"action_type": "open_app", "app_name": raw["app_name"]}
    return raw


def ui_r1_answer(pred: dict | None, size: list) -> str:
    """UI-R1's answer format ({'action': ..., 'coordinate': [x, y]}, a point on the model's 644x1484 image);
    an unparsed output: a response without {...}, which its pattern does not find."""
    if pred is None:
        return ""
    k = pred["action"]
    word = {"swipe": "scroll", "type": "input_text", "open": "open_app"}.get(k, k)
    if k == "system_button":
        word = "navigate_" + str(pred["button"]).lower().strip()
    if k in ("click", "long_press", "double_tap"):
        x, y = pred["coordinate"]
        return "{'action': '%s', 'coordinate': [%d, %d]}" % (word, round(x / size[0] * 644), round(y / size[1] * 1484))
    return "{'action': '%s'}" % word


class UIR1:
    def __init__(self, root: Path):
        path = root / "UI-R1" / "evaluation" / "eval_ac.py"
        self.code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        self.dir = Path(tempfile.mkdtemp())

    def _one(self, gt: dict, answer: str) -> list:
        line = json.dumps({"content": json.dumps(gt, ensure_ascii=False), "response": answer}, ensure_ascii=False)
        (self.dir / "ac_test_xxx.jsonl").write_text(line + "\n", encoding="utf-8")
        cwd = os.getcwd()
        os.chdir(self.dir)
        g: dict[str, Any] = {"__name__": "eval_ac"}
        try:
            with _quiet():
                exec(self.code, g)
        finally:
            os.chdir(cwd)
        type_ok = sum(g["correct"].values()) == 1
        if sum(g["total"].values()) == 0:
            return ["skip: not counted (an answer without two numbers)"]  # pragma: no cover - not produced here
        click = g["correct"]["click"] == 1
        return [type_ok, type_ok and (g["click_correct"] == 1 if click else True)]

    def episode(self, ep: dict) -> list:
        out: list = []
        for j, s in enumerate(ep["steps"]):
            gt = ui_r1_ground_truth(s)
            out.append("skip: not in ac_test.json" if gt is None else self._one(gt, ui_r1_answer(_pred(ep, j), s["size"])))
        return out


# --------------------------------------------------------------------------- GUI-Odyssey


class Odyssey:
    """GUI-Odyssey's matcher on ``decode_action`` strings read back by ``simple_decode``; points on
    the 0-1000 grid; each candidate box in turn as the step's SAM2 box (None when there is none)."""

    def __init__(self, root: Path):
        import numpy as np

        src = root / "GUI-Odyssey"
        self.match = _import_from(src / "src" / "eval_mm", "GUIOdyssey_action_matching").action_matching
        self.simple_decode = _defs_of(src / "src" / "eval_mm" / "evaluate_GUIOdyssey.py", {"simple_decode"}, {})["simple_decode"]
        self.decode_action = _defs_of(src / "data" / "format_converter.py", {"decode_action"}, {"np": np})["decode_action"]

    def string(self, a: dict | None, size: list) -> str:
        if a is None:  # an unparsed output: an empty action string (simple_decode reads action "")
            return ""
        k = a["action"]

        def pt(p: list) -> list:
            return [_grid(p[0], size[0]), _grid(p[1], size[1])]

        if k in ("click", "long_press"):
            return self.decode_action(k.upper(), [pt(a["coordinate"])])
        if k == "swipe":
            if "coordinate2" in a:
                return self.decode_action("SCROLL", [pt(a["coordinate"]), pt(a["coordinate2"])])
            return f"SCROLL: {a['direction'].upper()}"
        if k == "type":
            return self.decode_action("TEXT", a["text"])
        if k == "system_button":
            b = str(a["button"]).lower().strip()
            key = {"back": "KEY_BACK", "home": "KEY_HOME", "recent": "KEY_APPSELECT", "recents": "KEY_APPSELECT"}.get(b)
            return self.decode_action("CLICK", key) if key else "PRESS_" + b.upper()
        if k == "finish":
            return self.decode_action("COMPLETE", None)
        if k in ("open", "answer"):
            return f"{'OPEN_APP' if k == 'open' else 'ANSWER'}: {a['text']}"
        return k.upper()

    def decide(self, pred: dict, step: dict) -> list:
        size = step["size"]
        g = self.simple_decode(self.string(step["action_content"], size))
        p = self.simple_decode(self.string(pred, size))
        w, h = size
        boxes = [[_grid(b[0], w), _grid(b[1], h), _grid(b[2], w), _grid(b[3], h)]
                 for b in step["check_options"].get("candidate_bbox") or []] or [None]
        results = [self.match(p["action"], p["info"], g["action"], g["info"], b) for b in boxes]
        return [results[0]["info"] != "action_fail", any(r["is_correct"] == "yes" for r in results)]

    def episode(self, ep: dict) -> list:
        return [self.decide(_pred(ep, j), s) for j, s in enumerate(ep["steps"])]


# --------------------------------------------------------------------------- AITW (Google)


class AITW:
    """``check_actions_match`` on (y, x) fractions; annotation boxes as AITW writes them, float32 as
    its dataset stores them; one box off the screen when the step has none (the function needs one)."""

    CODES = {"TYPE": 3, "DUAL_POINT": 4, "PRESS_BACK": 5, "PRESS_HOME": 6, "PRESS_ENTER": 7, "STATUS_TASK_COMPLETE": 10}

    def __init__(self, root: Path):
        import numpy as np

        self.np = np
        self.fn = _import_from(root / "google-research", "android_in_the_wild.action_matching").check_actions_match
        self.other: dict[str, int] = {}

    def code(self, a: dict | None) -> int:
        if a is None:  # an unparsed output: an action of no type (0, an unused value of ActionType)
            return 0
        k = a["action"]
        if k in ("click", "long_press", "swipe"):
            name = "DUAL_POINT"
        elif k == "type":
            name = "TYPE"
        elif k == "system_button":
            b = str(a["button"]).lower().strip()
            name = {"back": "PRESS_BACK", "home": "PRESS_HOME", "enter": "PRESS_ENTER"}.get(b, "KEY_" + b)
        elif k == "finish":
            name = "STATUS_TASK_COMPLETE"
        else:
            name = k.upper()
        return self.CODES.get(name) or self.other.setdefault(name, 100 + len(self.other))

    @staticmethod
    def gesture(a: dict | None, size: list) -> tuple[list, list]:
        w, h = size
        if a is None or "coordinate" not in a:
            return [0.0, 0.0], [0.0, 0.0]
        x, y = float(a["coordinate"][0]) / w, float(a["coordinate"][1]) / h
        if a["action"] != "swipe":
            return [y, x], [y, x]
        if "coordinate2" in a:
            return [y, x], [float(a["coordinate2"][1]) / h, float(a["coordinate2"][0]) / w]
        dx, dy = FINGER[a["direction"]]
        return [y, x], [y + dy * 0.2, x + dx * 0.2]

    def decide(self, pred: dict, step: dict) -> list:
        w, h = step["size"]
        boxes = [[b[1] / h, b[0] / w, (b[3] - b[1]) / h, (b[2] - b[0]) / w] for b in step["check_options"].get("candidate_bbox") or []]
        ann = self.np.array(boxes or [[2.0, 2.0, 0.0, 0.0]], dtype=self.np.float32)
        pt, pl = self.gesture(pred, step["size"])
        gt, gl = self.gesture(step["action_content"], step["size"])
        ok = self.fn(pt, pl, self.code(pred), gt, gl, self.code(step["action_content"]), ann)
        return [None, bool(ok)]

    def episode(self, ep: dict) -> list:
        return [self.decide(_pred(ep, j), s) for j, s in enumerate(ep["steps"])]


# --------------------------------------------------------------------------- GUI-R1


def _button_word(button: Any) -> str:
    b = str(button).lower().strip()
    return {"back": "press_back", "home": "navigate_home"}.get(b, "press_" + b)


def gui_r1_ground_truth(step: dict) -> dict:
    """The step's record fields as GUI-R1's AndroidControl test file holds them (the fork
    YangRui2015/GUI-R1 publishes them with its predictions): the target point in screen pixels, the
    typed text's first word, the scroll word upper-cased."""
    a, c = step["action_content"], step["check_options"]
    k = a["action"]
    rec = {"gt_bbox": [-100, -100], "gt_input_text": "no input text"}
    if k in ("click", "long_press"):
        rec.update(gt_action=k, gt_bbox=list(a["coordinate"]))
    elif k == "swipe":
        rec.update(gt_action="scroll", gt_input_text=str(c.get("direction") or "").upper())
    elif k == "type":
        words = str(a.get("text", "")).split()
        rec.update(gt_action="type", gt_input_text=words[0] if words else "")
    elif k == "open":
        rec.update(gt_action="open_app", gt_input_text=a["text"])
    elif k == "system_button":
        rec.update(gt_action=_button_word(a["button"]))
    else:
        rec.update(gt_action=k)
    return rec


def gui_r1_answer(pred: dict | None, size: list, image: list) -> str:
    """The prediction as GUI-R1's model answers ([{'action', 'point', 'input_text'}], a point in its
    resized image ``image``); "" for an output that did not parse."""
    if pred is None:
        return ""
    k, point, text = pred["action"], [-100, -100], "no input text"
    word = {"swipe": "scroll", "open": "open_app"}.get(k, k)
    if k == "system_button":
        word = _button_word(pred["button"])
    if k in ("click", "long_press", "double_tap"):
        x, y = pred["coordinate"]
        point = [round(x / size[0] * image[0]), round(y / size[1] * image[1])]
    elif k == "swipe":
        d = _finger_direction(pred["coordinate"], pred["coordinate2"], size) if "coordinate2" in pred else pred["direction"]
        text = {"up": "down", "down": "up", "left": "left", "right": "right"}[d]
    elif k in ("type", "open", "answer"):
        text = pred["text"]
    return "<answer>[{'action': '%s', 'point': [%d, %d], 'input_text': '%s'}]</answer>" % (word, point[0], point[1], text)


class GUIR1:
    """``eval_omni.evaluate`` on one record per step, the record's prediction fields made by the
    inference script's own extract functions from the prediction written as the model answers."""

    GROUNDING = ("click", "long_press", "moveto", "doubleclick", "rightclick")
    TEXT = ("open_app", "type", "scroll", "select")

    def __init__(self, root: Path):
        import re

        src = root / "GUI-R1" / "guir1"
        self.mod = _import_from(src / "eval", "eval_omni")
        ns = _defs_of(src / "inference" / "inference_vllm_android.py",
                      {"extract_action", "extract_coord", "extract_input_text"}, {"re": re})
        self.extract_action, self.extract_coord, self.extract_input_text = (
            ns["extract_action"], ns["extract_coord"], ns["extract_input_text"])
        self.dir = Path(tempfile.mkdtemp())

    @staticmethod
    def image(size: list) -> list:
        import math

        def by(n: float) -> int:
            return round(n / 28) * 28
        h, w = size[1], size[0]   # qwen-vl-utils smart_resize: factor 28, 3136 to 12845056 pixels
        hb, wb = max(28, by(h)), max(28, by(w))
        if hb * wb > 12845056:
            beta = math.sqrt(h * w / 12845056)
            hb, wb = math.floor(h / beta / 28) * 28, math.floor(w / beta / 28) * 28
        elif hb * wb < 3136:
            beta = math.sqrt(3136 / (h * w))
            hb, wb = math.ceil(h * beta / 28) * 28, math.ceil(w * beta / 28) * 28
        return [wb, hb]

    def _one(self, rec: dict) -> list:
        path = self.dir / "pred.json"
        path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
        with _quiet():
            # its totals divide by the Type or Step counts a lone step leaves at 0: the counters are read by then
            d = counters_of(self.mod.evaluate, "score_dict",
                            lambda: self.mod.evaluate(argparse.Namespace(prediction_file_path=str(path))))
        cat = rec["group"] + "-" + rec["gt_action"]
        type_ok = d.get(cat, 0) == 1
        if rec["gt_action"] in self.GROUNDING:
            return [type_ok, d.get(cat + "-grounding", 0) == 1]
        if rec["gt_action"] in self.TEXT:
            return [type_ok, d.get(cat + "-text", 0) == 1]
        return [f"skip: {rec['gt_action']} step: not in GUI-R1's Step"]  # pragma: no cover - replaced below

    def episode(self, ep: dict) -> list:
        out: list = []
        for j, s in enumerate(ep["steps"]):
            gt = gui_r1_ground_truth(s)
            if gt["gt_action"] not in self.GROUNDING + self.TEXT:
                out.append(f"skip: {gt['gt_action']} step: not in GUI-R1's Step (only grounding and text steps are)")
                continue
            image = self.image(s["size"])
            content = gui_r1_answer(_pred(ep, j), s["size"], image)
            coord, _ = self.extract_coord(content)
            rec = {"group": "android", "image_size": image, **gt, "pred_action": self.extract_action(content),
                   "pred_input_text": self.extract_input_text(content), "pred_coord": coord[:2]}
            out.append(self._one(rec))
        return out


SCORERS: dict[str, Callable[[Path], Any]] = {
    "androidcontrol": UIS1, "uis1-pipeline": UIS1, "infigui-r1": InfiGUI, "agentcpm-gui": AgentCPM,
    "os-atlas": OSAtlas, "ui-r1": UIR1, "guiodyssey": Odyssey, "aitw": AITW, "gui-r1": GUIR1,
}


def run(cases: list[dict], root: Path, profiles: list[str], progress: bool = False) -> list[dict]:
    built: dict[Any, Any] = {}
    out = []
    for name in profiles:
        cls = SCORERS[name]
        scorer = built.setdefault(cls, cls(root))
        method = scorer.pipeline if name == "uis1-pipeline" else scorer.episode
        for ep in cases:
            out.append({"episode": ep["episode"], "profile": name, "decisions": method(ep)})
        if progress:
            print(f"published_scorers: {name} done", file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scorers", required=True, help="folder with the scorers' checkouts (see this file's docstring)")
    ap.add_argument("--cases", required=True, help="JSONL of episodes with predictions")
    ap.add_argument("--out", required=True, help="JSONL of decisions")
    ap.add_argument("--profile", action="append", help="profiles to run (default all with public code)")
    args = ap.parse_args()
    cases = [json.loads(line) for line in Path(args.cases).read_text(encoding="utf-8").splitlines() if line.strip()]
    res = run(cases, Path(args.scorers).resolve(), args.profile or list(SCORERS), progress=True)
    Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in res), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
