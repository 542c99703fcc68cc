"""Seeded predictions for AndroidControl steps, and synthetic episodes in the dataset's shape: the
inputs on which our static profiles are compared with the published scorers' own code.

``predict(step, size, rng, edges=...)`` draws one prediction (an AndroidControl action in screen
pixels) from a realistic mix: right, near misses at several distances, wrong types, swipes the
right way, reversed, across and diagonal, text variants (case, spaces, containment, the first
word, a typo, Chinese, a colon), app names, buttons, long presses, waits and finishes. With
``edges`` it adds the points where scorers differ: exactly on a box's edge, on the edge of each
scorer's enlarged box, at each distance threshold, off the screen, swipes of length 0 and exact
diagonals. ``synthetic_episodes(seed)`` makes our own episodes covering the cases the published
test set has and some it has not (several screen sizes, boxes covering most of the screen, nested
boxes whose largest is not last, tiny boxes, empty box lists, open-app steps with and without an
icon box, Home, long presses, Chinese text).

Stdlib only: it runs under the harness's Python and under the scorers' (scripts/published_scorers.py).
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

FINGER = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
OPPOSITE = {"up": "down", "down": "up", "left": "right", "right": "left"}
# the dataset's swipe word for a finger direction (vertical: the scroll word)
WORD = {"up": "down", "down": "up", "left": "left", "right": "right"}
DISTANCES = (0.005, 0.02, 0.035, 0.04, 0.045, 0.07, 0.1, 0.139, 0.14, 0.141, 0.2, 0.35)
APPS = ("ZARA", "Google Chrome", "Gmail", "Settings", "WhatsApp Messenger", "微信", "Clock", "ReadMore")
TEXTS = ("2 Piece sweatshirt", "weather in Paris", "alex.moreau@example.org", "10:30 am", "北京 天气",
         "Hello", "pizza near me", "The Cat's Cradle")


def _finger(p: list, q: list) -> str:
    dx, dy = q[0] - p[0], q[1] - p[1]
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"


def _pt(x: float, y: float) -> list:
    return [round(x), round(y)] if float(x).is_integer() and float(y).is_integer() else [round(x, 3), round(y, 3)]


def _near(p: list, d: float, size: list, rng: random.Random) -> list:
    a = rng.uniform(0, 2 * math.pi)
    return [round(p[0] + math.cos(a) * d * size[0]), round(p[1] + math.sin(a) * d * size[1])]


def _text_variant(t: str, rng: random.Random) -> str:
    words = t.split()
    return rng.choice([
        t, t, t.lower(), t.upper(), "  " + t + " ", t.replace(" ", "  "), t[: max(1, len(t) // 2)],
        t + " please", words[0] if words else t, (words[0] + " x") if words else t, t[:-1] + "#" if len(t) > 1 else "#",
        "something else entirely", "", t.replace(" ", ""), "天气" if rng.random() < 0.5 else t + ":", t.title(),
    ])


def _click_preds(a: dict, check: dict, size: list, rng: random.Random, edges: bool) -> dict:
    kind = a["action"]
    p = a["coordinate"]
    boxes = check.get("candidate_bbox") or []
    options = ["exact", "jitter", "near", "near", "near", "box", "wrong_kind", "swipe", "type", "far"]
    if edges:
        options += ["box_edge", "enlarged_edge", "enlarged_edge", "threshold", "threshold", "off_screen", "corner"]
    c = rng.choice(options)
    other = "long_press" if kind == "click" else "click"
    if c == "exact":
        return {"action": kind, "coordinate": list(p), **({"time": 2} if kind == "long_press" else {})}
    if c == "jitter":
        return {"action": kind, "coordinate": _near(p, 0.01, size, rng)}
    if c == "near":
        return {"action": kind, "coordinate": _near(p, rng.choice(DISTANCES), size, rng)}
    if c == "box" and boxes:
        b = rng.choice(boxes)
        return {"action": kind, "coordinate": [rng.randint(min(b[0], b[2]), max(b[0], b[2])),
                                               rng.randint(min(b[1], b[3]), max(b[1], b[3]))]}
    if c == "wrong_kind":
        return {"action": other, "coordinate": list(p), **({"time": rng.choice([0.2, 1, 2])} if other == "long_press" else {})}
    if c == "swipe":
        return {"action": "swipe", "coordinate": list(p), "coordinate2": [p[0], p[1] - rng.choice([10, 60, 400])]}
    if c == "type":
        return {"action": "type", "text": rng.choice(TEXTS)}
    if c == "box_edge" and boxes:
        b = rng.choice(boxes)
        x = rng.choice([b[0], b[2], (b[0] + b[2]) / 2])
        y = rng.choice([b[1], b[3], (b[1] + b[3]) / 2])
        return {"action": kind, "coordinate": _pt(x, y)}
    if c == "enlarged_edge" and boxes:
        b = rng.choice(boxes)
        w, h = b[2] - b[0], b[3] - b[1]
        f = rng.choice([0.1, 0.2, 0.7, 0.1001, 0.0999, 0.7001])   # half-growth of x1.2 and of AITW's 1.4x size
        side = rng.choice(["l", "r", "t", "b"])
        cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
        x = {"l": b[0] - f * w, "r": b[2] + f * w}.get(side, cx)
        y = {"t": b[1] - f * h, "b": b[3] + f * h}.get(side, cy)
        return {"action": kind, "coordinate": _pt(x, y)}
    if c == "threshold":
        d = rng.choice((0.04, 0.14, 0.14 * 1080 / size[0]))
        axis = rng.choice(["x", "y", "d"])
        if axis == "x":
            return {"action": kind, "coordinate": _pt(p[0] + rng.choice([-1, 1]) * d * size[0], p[1])}
        if axis == "y":
            return {"action": kind, "coordinate": _pt(p[0], p[1] + rng.choice([-1, 1]) * d * size[1])}
        return {"action": kind, "coordinate": _pt(p[0] + d * size[0] / math.sqrt(2), p[1] + d * size[1] / math.sqrt(2))}
    if c == "off_screen":
        return {"action": kind, "coordinate": [rng.choice([-15, -1, size[0] + 4]), p[1]]}
    if c == "corner":
        return {"action": kind, "coordinate": rng.choice([[0, 0], [0, p[1]], [p[0], 0], [size[0], size[1]]])}
    return {"action": kind, "coordinate": [rng.randint(0, size[0]), rng.randint(0, size[1])]}


def _swipe_preds(a: dict, size: list, rng: random.Random, edges: bool) -> dict:
    p, q = a["coordinate"], a["coordinate2"]
    d = _finger(p, q)
    options = ["same", "same", "same", "reversed", "across", "direction", "direction", "diagonal", "shifted", "click"]
    if edges:
        options += ["exact_diagonal", "zero", "short", "direction_wrong", "off_screen"]
    c = rng.choice(options)
    if c == "same":
        return {"action": "swipe", "coordinate": list(p), "coordinate2": list(q)}
    if c == "reversed":
        return {"action": "swipe", "coordinate": list(q), "coordinate2": list(p)}
    if c == "across":
        cx, cy = size[0] / 2, size[1] / 2
        horizontal = d in ("up", "down")
        sign = rng.choice([-1, 1])
        end = [cx + sign * 0.3 * size[0], cy] if horizontal else [cx, cy + sign * 0.3 * size[1]]
        return {"action": "swipe", "coordinate": _pt(cx, cy), "coordinate2": _pt(*end)}
    if c == "direction":
        return {"action": "swipe", "coordinate": list(p), "direction": d}
    if c == "direction_wrong":
        return {"action": "swipe", "coordinate": list(p), "direction": rng.choice([OPPOSITE[d], WORD[d]])}
    if c == "diagonal":
        dx, dy = FINGER[d]
        k = rng.uniform(0.5, 0.99)
        return {"action": "swipe", "coordinate": list(p),
                "coordinate2": [round(p[0] + (dx or k) * 300 * (1 if dx >= 0 else 1)), round(p[1] + (dy or k) * 300)]}
    if c == "exact_diagonal":
        sx, sy = rng.choice([-1, 1]), rng.choice([-1, 1])
        n = rng.choice([100, 300, 540])
        return {"action": "swipe", "coordinate": [540, 1200], "coordinate2": [540 + sx * n, 1200 + sy * n]}
    if c == "zero":
        return {"action": "swipe", "coordinate": list(p), "coordinate2": list(p)}
    if c == "short":
        return {"action": "swipe", "coordinate": list(p), "coordinate2": [p[0], p[1] + rng.choice([-30, 30, -96, 97])]}
    if c == "off_screen":
        return {"action": "swipe", "coordinate": list(p), "coordinate2": [p[0], -50]}
    if c == "shifted":
        return {"action": "swipe", "coordinate": _near(p, 0.1, size, rng), "coordinate2": _near(q, 0.1, size, rng)}
    return {"action": "click", "coordinate": list(p)}


def predict(step: dict, size: list, rng: random.Random, edges: bool = False) -> dict:
    """One seeded prediction for a step of the dataset (``step``: its JSON object)."""
    a, c = step["action_content"], step.get("check_options") or {}
    k = a["action"]
    if k in ("click", "long_press"):
        return _click_preds(a, c, size, rng, edges)
    if k == "swipe":
        return _swipe_preds(a, size, rng, edges)
    if k == "type":
        r = rng.random()
        if r < 0.8:
            return {"action": "type", "text": _text_variant(a["text"], rng)}
        return rng.choice([{"action": "click", "coordinate": [540, 1200]}, {"action": "open", "text": a["text"]},
                           {"action": "system_button", "button": "Enter"}])
    if k == "open":
        boxes = c.get("candidate_bbox") or []
        r = rng.random()
        if r < 0.55:
            return {"action": "open", "text": _text_variant(a["text"], rng) if rng.random() < 0.5 else rng.choice(APPS)}
        if r < 0.8:
            if boxes and rng.random() < 0.7:
                b = boxes[0]
                return {"action": "click", "coordinate": [round((b[0] + b[2]) / 2) + rng.choice([0, 5, 60, 200]),
                                                          round((b[1] + b[3]) / 2)]}
            return {"action": "click", "coordinate": [rng.randint(0, size[0]), rng.randint(0, size[1])]}
        return rng.choice([{"action": "type", "text": a["text"]}, {"action": "wait", "time": 2},
                           {"action": "system_button", "button": "Home"}])
    if k == "wait":
        return rng.choice([{"action": "wait", "time": 2}, {"action": "wait", "time": 2}, {"action": "wait", "time": 1},
                           {"action": "finish"}, {"action": "click", "coordinate": [540, 1200]},
                           {"action": "swipe", "coordinate": [540, 1800], "coordinate2": [540, 600]},
                           {"action": "system_button", "button": "Back"}])
    if k == "system_button":
        return rng.choice([{"action": "system_button", "button": a["button"]}, {"action": "system_button", "button": a["button"]},
                           {"action": "system_button", "button": str(a["button"]).lower()},
                           {"action": "system_button", "button": "Home"}, {"action": "system_button", "button": "Enter"},
                           {"action": "system_button", "button": "Recent"}, {"action": "click", "coordinate": [100, 2300]},
                           {"action": "wait", "time": 2}])
    return {"action": "wait", "time": 2}


def finish_prediction(rng: random.Random) -> dict:
    return rng.choice([{"action": "finish"}, {"action": "finish"}, {"action": "wait", "time": 2},
                       {"action": "click", "coordinate": [540, 1200]}, {"action": "system_button", "button": "Back"}])


# --------------------------------------------------------------------------- synthetic episodes

SIZES = ([1080, 2400], [1080, 2400], [1440, 3120], [720, 1600], [1355, 2952])


def _box_around(x: int, y: int, w: int, h: int, size: list) -> list:
    return [max(0, x - w // 2), max(0, y - h // 2), min(size[0], x + w // 2), min(size[1], y + h // 2)]


def _click_step(rng: random.Random, size: list, kind: str = "click") -> dict:
    W, H = size
    x, y = rng.randint(0, W), rng.randint(0, H)
    shape = rng.choice(["one", "one", "several", "screen", "tiny", "none", "nested_unsorted", "past_edge"])
    if shape == "one":
        boxes = [_box_around(x, y, rng.randint(60, 900), rng.randint(40, 300), size)]
    elif shape == "several":
        boxes = sorted((_box_around(x, y, rng.randint(30, 1000), rng.randint(30, 800), size) for _ in range(rng.randint(2, 4))),
                       key=lambda b: (b[2] - b[0]) * (b[3] - b[1]))
    elif shape == "screen":
        boxes = [_box_around(x, y, 120, 90, size), [0, 0, W + rng.choice([0, 4]), H + rng.choice([0, 2])]]
    elif shape == "tiny":
        boxes = [_box_around(x, y, rng.randint(2, 12), rng.randint(2, 12), size)]
    elif shape == "none":
        boxes = []
    elif shape == "nested_unsorted":
        boxes = [[0, 0, W, H], _box_around(x, y, 400, 200, size)]
    else:
        boxes = [[x - 50, y - 40, x + 50, y + 40]]
    boxes = [[int(v) for v in b] for b in boxes]
    a: dict[str, Any] = {"action": kind, "coordinate": [x, y]}
    if kind == "long_press":
        a["time"] = 2
    return {"action_content": a, "check_options": {"action": kind, "candidate_bbox": boxes, "coordinate": [x, y]}}


def synthetic_step(rng: random.Random, size: list) -> dict:
    W, H = size
    k = rng.choice(["click"] * 8 + ["long_press", "swipe", "swipe", "swipe", "type", "type", "open", "open", "wait", "back", "home"])
    if k in ("click", "long_press"):
        return _click_step(rng, size, k)
    if k == "swipe":
        d = rng.choice(["up", "up", "up", "down", "left", "right"])
        dx, dy = FINGER[d]
        x, y = (W // 2, round(H * 0.75) if d == "up" else round(H * 0.25)) if dy else (round(W * 0.75) if d == "left" else round(W * 0.25), H // 2)
        end = [float(x + dx * W // 2), float(y + dy * H // 2)]
        return {"action_content": {"action": "swipe", "coordinate": [float(x), float(y)], "coordinate2": end},
                "check_options": {"action": "swipe", "direction": WORD[d]}}
    if k == "type":
        t = rng.choice(TEXTS)
        return {"action_content": {"action": "type", "text": t}, "check_options": {"action": "type", "text": t}}
    if k == "open":
        app = rng.choice(APPS)
        check: dict[str, Any] = {"action": "open", "text": app}
        if rng.random() < 0.5:
            check["candidate_bbox"] = [_box_around(rng.randint(100, W - 100), rng.randint(300, H - 300), 210, 270, size)]
        return {"action_content": {"action": "open", "text": app}, "check_options": check}
    if k == "wait":
        return {"action_content": {"action": "wait", "time": 2}, "check_options": {"action": "wait", "time": 2}}
    b = "Back" if k == "back" else "Home"
    return {"action_content": {"action": "system_button", "button": b}, "check_options": {"action": "system_button", "button": b}}


def synthetic_episodes(seed: int, episodes: int) -> list[dict]:
    """Our own AndroidControl-shaped episodes (with ``width``/``height``), seeded."""
    rng = random.Random(seed)
    out = []
    for i in range(episodes):
        size = rng.choice(SIZES)
        steps = [synthetic_step(rng, size) for _ in range(rng.randint(1, 8))]
        out.append({"goal": f"synthetic episode {i}", "episode_id": 900000 + i, "width": size[0], "height": size[1],
                    "steps": steps})
    return out


INVALID_SHARE = 0.04   # predictions that are null: a model output that did not parse


def cases(episodes: list[dict], seed: int, *, edges: bool, default_size: list | None = None,
          finish_share: float = 0.0, invalid_share: float = 0.0) -> list[dict]:
    """Episodes with one seeded prediction per step (and, for a ``finish_share`` of them, one for
    the finish step), in the shape scripts/published_scorers.py reads. An ``invalid_share`` of the
    step predictions are null (an output that did not parse), drawn from a generator of their own so
    that the other predictions are those of the same seed without them."""
    rng = random.Random(seed)
    invalid = random.Random(seed * 7919 + 1)
    out = []
    for i, ep in enumerate(episodes):
        size = [ep.get("width") or (default_size or [1080, 2400])[0], ep.get("height") or (default_size or [1080, 2400])[1]]
        steps, preds = [], {}
        for j, s in enumerate(ep["steps"]):
            steps.append({"action_content": s["action_content"], "check_options": s.get("check_options") or {}, "size": size})
            preds[str(j)] = predict(s, size, rng, edges)
            if invalid_share and invalid.random() < invalid_share:
                preds[str(j)] = None
        if rng.random() < finish_share:
            preds[str(len(ep["steps"]))] = finish_prediction(rng)
        out.append({"episode": i, "episode_id": ep.get("episode_id"), "steps": steps, "predictions": preds})
    return out


def predictions_jsonl(case_list: list[dict]) -> str:
    """The cases' predictions as a ``harness static score --predictions`` file."""
    return "".join(json.dumps({"episode": c["episode"], "step": int(j), "action": a}, ensure_ascii=False) + "\n"
                   for c in case_list for j, a in sorted(c["predictions"].items(), key=lambda kv: int(kv[0])))
