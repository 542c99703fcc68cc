"""Benchmark: how fast `harness static score` scores steps, per profile.

The shared AndroidControl sample (300 episodes, 1,579 steps) is repeated until it holds --steps steps
(default 10,000); predictions are the ground truth with every third step moved (clicks shifted by
150 px, texts edited, swipes reversed) so that every rule runs both ways. Loading and parsing are
timed apart from scoring. Target: well under a second per 1,000 steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.importers.androidcontrol import load_dataset  # noqa: E402
from harness.report.static_eval import PROFILES, Prediction, score  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "reference" / "androidcontrol_test_300.jsonl"


def perturb(a: dict, k: int) -> dict:
    a = dict(a)
    if k % 3:
        return a
    if "coordinate" in a and a["action"] != "swipe":
        a["coordinate"] = [a["coordinate"][0] + 150, a["coordinate"][1]]
    elif a["action"] == "swipe":
        a["coordinate"], a["coordinate2"] = a["coordinate2"], a["coordinate"]
    elif "text" in a:
        a["text"] = a["text"][::-1]
    return a


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=str(DEFAULT))
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not Path(args.dataset).is_file():
        print(f"bench_static: {args.dataset} not found (pass --dataset)", file=sys.stderr)
        return 2
    text = Path(args.dataset).read_text(encoding="utf-8").splitlines()
    per_copy = sum(len(json.loads(line)["steps"]) for line in text if line.strip())
    copies = -(-args.steps // per_copy)
    big = Path("/tmp") / f"bench_static_{copies}x.jsonl"
    big.write_text("\n".join(text * copies) + "\n", encoding="utf-8")
    t0 = time.perf_counter()
    episodes = load_dataset(big)
    load_s = time.perf_counter() - t0
    preds = {}
    k = 0
    for e in episodes:
        for j, s in enumerate(e.steps):
            preds[(e.index, j)] = Prediction(perturb(s.options[0].action, k))
            k += 1
    n = sum(len(e.steps) for e in episodes)
    rows = []
    for profile in PROFILES:
        t0 = time.perf_counter()
        rep = score(episodes, preds, profile)
        dt = time.perf_counter() - t0
        rows.append({"profile": profile, "steps": n, "seconds": round(dt, 4), "ms_per_1000_steps": round(1000 * dt / n * 1000, 2),
                     "ams": rep.summary["ams"]})
    big.unlink()
    if args.json:
        print(json.dumps({"load_s": round(load_s, 4), "profiles": rows}, indent=1))
        return 0
    print(f"{n} steps ({copies} copies of {args.dataset}); loading the dataset took {load_s * 1000:.0f} ms")
    print(f"{'profile':<16}{'ms / 1000 steps':>16}{'total s':>10}{'AMS':>8}")
    for r in rows:
        print(f"{r['profile']:<16}{r['ms_per_1000_steps']:>16.1f}{r['seconds']:>10.3f}{r['ams']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
