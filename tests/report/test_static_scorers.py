"""Each static profile against its published scorer's own code, step by step.

The decisions in ``fixtures/static_scorers*.jsonl`` were made once by running each scorer's code
(``fixtures/make_scorer_fixture.py``; how, which commits and which stubs: ``fixtures/README.md``).
Every decision is asserted; one test per fixture part lists all the steps judged differently.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.importers.androidcontrol import load_dataset
from harness.report.static_eval import decisions, load_predictions, score
from tests.shared_data import reference

FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import make_scorer_fixture  # noqa: E402  (the generator: it makes the shared part's predictions again)
# every profile with public scorer code (androidlens has none: its paper publishes no scorer)
WITH_CODE = ("androidcontrol", "uis1-pipeline", "infigui-r1", "agentcpm-gui", "os-atlas", "ui-r1", "guiodyssey", "aitw",
             "gui-r1")
MIN_SCORED = 2000


def _read(name: str) -> tuple[dict, list[dict]]:
    lines = (FIXTURES / name).read_text(encoding="utf-8").splitlines()
    return json.loads(lines[0]), [json.loads(line) for line in lines[1:] if line.strip()]


# the fixture's letters (its header says the same): one per step decision
LETTER = {"R": (True, True), "T": (True, False), "W": (False, False), "X": (False, True), "r": (None, True),
          "w": (None, False), "S": None}


def _agree(mine, letter: str) -> bool:
    """Ours (``[type_ok, ok]`` or ``"skip: ..."``) against the scorer's letter; AITW's function gives
    no type decision (r, w): only the action's is compared."""
    theirs = LETTER[letter]
    if theirs is None or isinstance(mine, str):
        return theirs is None and isinstance(mine, str)
    return mine[1] == theirs[1] and (theirs[0] is None or mine[0] == theirs[0])


def _differences(dataset: Path, rows: list[dict], tmp_path: Path) -> tuple[list[str], Counter]:
    preds = tmp_path / "predictions.jsonl"
    preds.write_text("".join(json.dumps({"episode": r["episode"], "step": int(j), "action": a}, ensure_ascii=False) + "\n"
                             for r in rows for j, a in r["predictions"].items()), encoding="utf-8")
    episodes = load_dataset(dataset)
    p = load_predictions(preds, episodes)
    out, scored = [], Counter()
    for profile in WITH_CODE:
        mine = decisions(score(episodes, p, profile))
        for r in rows:
            theirs, ours = r["decisions"][profile], mine[r["episode"]]
            if len(theirs) != len(ours):
                out.append(f"{profile} episode {r['episode']}: {len(ours)} decisions, the scorer {len(theirs)}")
                continue
            for j, (a, b) in enumerate(zip(ours, theirs)):
                scored[profile] += b != "S"
                if not _agree(a, b):
                    out.append(f"{profile} episode {r['episode']} step {j}: ours {a}, the scorer's {b}; "
                               f"prediction {r['predictions'].get(str(j))}")
    return out, scored


def _assert_no_differences(diffs: list[str]) -> None:
    assert not diffs, f"{len(diffs)} steps judged differently from the scorers' code:\n" + "\n".join(diffs[:60])


def test_every_profile_agrees_with_its_scorer_on_every_synthetic_step(tmp_path):
    head, rows = _read("static_scorers.jsonl")
    assert head["fixture"] == "synthetic"
    data = tmp_path / "synthetic.jsonl"
    data.write_text("".join(json.dumps({k: r[k] for k in ("episode_id", "width", "height", "steps")} | {"goal": "g"},
                                       ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    diffs, scored = _differences(data, rows, tmp_path)
    _assert_no_differences(diffs)
    assert all(scored[p] >= MIN_SCORED for p in WITH_CODE), scored


def test_every_profile_agrees_with_its_scorer_on_the_shared_sample(tmp_path):
    sample = reference("androidcontrol_test_300.jsonl")
    head, rows = _read("static_scorers_shared.jsonl")
    assert head["fixture"].endswith("androidcontrol_test_300.jsonl")
    ids = [e.episode_id for e in load_dataset(sample)]
    assert [r["episode_id"] for r in rows] == ids  # the fixture refers to this very file
    # the predictions are made again from the sample (the repository keeps none of its content)
    cases = make_scorer_fixture.shared_cases(sample)
    assert make_scorer_fixture.predictions_digest(cases) == head["predictions_sha256"], (
        "scripts/static_predictions.py no longer makes the predictions the fixture was made with: "
        "run tests/report/fixtures/make_scorer_fixture.py again")
    for r, c in zip(rows, cases):
        r["predictions"] = c["predictions"]
    diffs, scored = _differences(sample, rows, tmp_path)
    _assert_no_differences(diffs)
    assert all(scored[p] >= 1000 for p in WITH_CODE), scored


def _kinds(rows: list[dict]) -> Counter:
    c: Counter = Counter()
    for r in rows:
        for j, s in enumerate(r["steps"]):
            g, p = s["action_content"], r["predictions"][str(j)]
            c["gt " + g["action"]] += 1
            c["pred " + (p["action"] if p is not None else "invalid")] += 1  # None: an output that did not parse
            p = p or {}
            boxes = s["check_options"].get("candidate_bbox") or []
            w, h = r["width"], r["height"]
            c["large box"] += any((b[2] - b[0]) * (b[3] - b[1]) >= 0.8 * w * h for b in boxes)
            c["several boxes"] += len(boxes) > 1
            c["no box"] += g["action"] == "click" and not boxes
            c["tiny box"] += any((b[2] - b[0]) * (b[3] - b[1]) <= 144 for b in boxes)
            c["open with icon"] += g["action"] == "open" and bool(boxes)
            c["chinese"] += any("\u4e00" <= ch <= "\u9fff" for ch in json.dumps(p, ensure_ascii=False))
            if g["action"] == "swipe" and p.get("action") == "swipe" and "coordinate2" in p:
                dx = p["coordinate2"][0] - p["coordinate"][0]
                dy = p["coordinate2"][1] - p["coordinate"][1]
                c["swipe diagonal"] += dx != 0 and dy != 0
                c["swipe zero"] += dx == 0 and dy == 0
        c["finish predicted"] += str(len(r["steps"])) in r["predictions"]
        c[f"screen {r['width']}x{r['height']}"] += 1
    return c


def test_the_synthetic_fixture_covers_the_cases_scorers_differ_on():
    _, rows = _read("static_scorers.jsonl")
    c = _kinds(rows)
    for k in ("gt click", "gt long_press", "gt swipe", "gt type", "gt open", "gt wait", "gt system_button",
              "pred click", "pred long_press", "pred swipe", "pred type", "pred open", "pred wait", "pred finish",
              "pred system_button", "pred invalid", "large box", "several boxes", "no box", "tiny box", "open with icon", "chinese",
              "swipe diagonal", "swipe zero", "finish predicted", "screen 1440x3120", "screen 720x1600"):
        assert c[k] >= 5, (k, c[k])
    # every profile's scorer said both right and wrong many times (no fixture of one answer)
    for profile in WITH_CODE:
        ok = Counter(LETTER[d][1] for r in rows for d in r["decisions"][profile] if d != "S")
        assert ok[True] >= 500 and ok[False] >= 500, (profile, ok)


@pytest.mark.parametrize("profile,reason", [("ui-r1", "wait step"), ("ui-r1", "long press step"),
                                            ("agentcpm-gui", "open-app step"), ("agentcpm-gui", "finish step")])
def test_skipped_steps_are_reported_with_their_reason(tmp_path, profile, reason):
    head, rows = _read("static_scorers.jsonl")
    data = tmp_path / "synthetic.jsonl"
    data.write_text("".join(json.dumps({k: r[k] for k in ("episode_id", "width", "height", "steps")} | {"goal": "g"},
                                       ensure_ascii=False) + "\n" for r in rows[:200]), encoding="utf-8")
    episodes = load_dataset(data)
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"episode": r["episode"], "step": int(j), "action": a}) + "\n"
                             for r in rows[:200] for j, a in r["predictions"].items()), encoding="utf-8")
    r = score(episodes, load_predictions(preds, episodes), profile)
    s = r.summary
    skipped = {k: v for k, v in s["skipped_by_reason"].items() if k.startswith(reason)}
    assert skipped and all(v > 0 for v in skipped.values()), s["skipped_by_reason"]
    assert s["scored"] + s["skipped"] == len(r.steps) and s["steps"] == s["scored"]
    assert all(not st.ok and not st.type_ok for st in r.steps if st.skipped)


def test_the_comparison_script_prints_every_profile_and_the_pairwise_table():
    """scripts/compare_static_scorers.py without --scorers: our figures on seeded predictions (the
    run with the scorers' code needs their checkouts: docs/reports.md gives its measurement)."""
    import subprocess

    root = FIXTURES.parents[2]
    out = subprocess.run([sys.executable, str(root / "scripts" / "compare_static_scorers.py"), "--dataset", "none",
                          "--synthetic", "40", "--edges"], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.startswith("40 episodes, ") and "seeded predictions (seed 0)" in out
    rows = {line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")}
    assert set(WITH_CODE) | {"androidlens"} <= rows
    assert "steps judged differently (% of the steps both score)" in out
    assert "| androidcontrol | " in out.split("steps judged differently")[1]
