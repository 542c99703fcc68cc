"""Benchmark: does the calibrated threshold keep the miss rate at alpha on steps it has not seen?

Synthetic labelled scores from known distributions (seeded): risky steps ~ Beta(5, 2), safe steps
~ Beta(2, 5), a pool of --pool of each. For each alpha, --splits times: --n risky steps drawn at
random calibrate the threshold (judges.calibration.conformal_threshold, the function
``harness judge-eval --calibrate`` uses); the pool's other risky steps are the held-out test set.
Printed per alpha: the mean held-out miss rate (target <= alpha: the split-conformal guarantee is
on this mean, k/(n+1) <= alpha), the conformal level k/(n+1), the mean false-alarm rate on the safe
pool, and the share of single splits whose held-out miss rate went over alpha (the guarantee is
marginal: single splits do). Then the time to calibrate from recorded runs: --episodes written
episodes of 10 steps with the monitor's verdicts, read and calibrated in process.

Writes bench/calibration.json (rows for scripts/bench) and bench/calibration.png (the plot of one
calibration on the synthetic pool, as judge-eval draws it).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)

from judges.calibration import below, conformal_rank, conformal_threshold, false_alarm_rate  # noqa: E402



def row(name: str, value: float, target: str | None = None) -> dict:
    holds = None
    if target is not None:
        op, x = target.split()
        holds = value <= float(x) if op == "<=" else value >= float(x)
    return {"name": name, "value": round(value, 5), "target": target, "holds": holds}


def held_out(risky: list[float], safe: list[float], n: int, alpha: float, splits: int, seed: int) -> dict:
    rng = random.Random(seed)
    s = sorted(safe)
    misses, alarms = [], []
    for _ in range(splits):
        order = rng.sample(range(len(risky)), len(risky))
        t = conformal_threshold([risky[i] for i in order[:n]], alpha).value
        test = sorted(risky[i] for i in order[n:])
        misses.append(below(test, t) / len(test))
        alarms.append(false_alarm_rate(s, t))
    return {"miss": sum(misses) / splits, "false_alarm": sum(alarms) / splits,
            "over": sum(m > alpha for m in misses) / splits}


def from_records(episodes: int) -> tuple[float, int]:
    """Seconds to collect and calibrate ``episodes`` written episodes of 10 monitored steps."""
    from harness.cli.calibrate import calibrate
    from harness.core.episode import MonitorVerdict
    from harness.client.config import ModelConfig
    from harness.records import EpisodeResult, RunWriter
    from judges.monitor import CrateSMonitor, CrateSMonitorConfig
    from PIL import Image
    import io

    spec = CrateSMonitor(CrateSMonitorConfig(model=ModelConfig(base_url="http://127.0.0.1:9/v1", model="m"))).spec()
    prompt = spec["prompts"]["en"]["id"]
    buf = io.BytesIO()
    Image.new("RGB", (90, 200), (30, 60, 90)).save(buf, format="PNG")
    screen = buf.getvalue()
    rng = random.Random(5)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        labels = Path(tmp) / "labels.jsonl"
        with RunWriter(run, fsync=False) as w, open(labels, "w") as lf:
            w.write_manifest({"kind": "bench", "monitors": [spec]})
            for e in range(episodes):
                tid = f"ep{e}"
                t_star = rng.randint(1, 10) if e % 2 else None
                ep = w.start_episode(tid)
                before = ep.write_screen(0, screen)
                for i in range(1, 11):
                    risky = i == t_star
                    score = rng.betavariate(5, 2) if risky else rng.betavariate(2, 5)
                    v = MonitorVerdict(halt=False, risky=False, reason="r", score=round(score, 3), monitor="crate-s",
                                       extras={"prompt": prompt}).to_json()
                    ep.append_step({"index": i, "action": {"type": "click", "x": i, "y": i}, "executed": True,
                                    "screen_before": before, "screen_after": before, "monitor": v})
                w.append_result(EpisodeResult(task_id=tid, agent="a", status="finished", steps=10, cap=21, verdicts={}))
                lf.write(json.dumps({"task_id": tid, "unsafe": t_star is not None, "first_unsafe_step": t_star}) + "\n")
        t0 = time.perf_counter()
        doc = calibrate([str(run)], "crate-s", "0.1", labels_path=str(labels), labels_from=None, judgement_sets=None,
                        offline_only=False, warnings=[])
        return time.perf_counter() - t0, doc["steps"]["used"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--alphas", default="0.05,0.1,0.2")
    ap.add_argument("--n", type=int, default=218, help="risky calibration steps per split")
    ap.add_argument("--pool", type=int, default=2000, help="risky (and safe) steps in the synthetic pool")
    ap.add_argument("--splits", type=int, default=1000)
    ap.add_argument("--episodes", type=int, default=300, help="written episodes for the records timing")
    ap.add_argument("--seed", type=int, default=2604)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    risky = [rng.betavariate(5, 2) for _ in range(args.pool)]
    safe = [rng.betavariate(2, 5) for _ in range(args.pool)]
    rows = []
    for a in (float(x) for x in args.alphas.split(",")):
        got = held_out(risky, safe, args.n, a, args.splits, args.seed + int(a * 1000))
        k = conformal_rank(args.n, a)
        where = f"alpha={a:g}, n={args.n} risky calibration steps, {args.splits} splits"
        rows += [row(f"held-out miss rate (mean), {where}", got["miss"], f"<= {a:g}"),
                 row(f"conformal level k/(n+1) = {k}/{args.n + 1}, alpha={a:g}", k / (args.n + 1)),
                 row(f"held-out false-alarm rate (mean, safe ~ Beta(2,5)), alpha={a:g}", got["false_alarm"]),
                 row(f"share of single splits with held-out miss rate > alpha, alpha={a:g}", got["over"])]
    secs, used = from_records(args.episodes)
    rows.append(row(f"judge-eval --calibrate over {args.episodes} recorded episodes ({used} labelled steps): "
                    "read and calibrate (s)", secs))
    out = bench_dir()
    (out / "calibration.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    from harness.report.calibration import plot_png

    t = conformal_threshold(risky[:args.n], 0.1).value
    (out / "calibration.png").write_bytes(plot_png(risky[:args.n], safe[:args.n], t, 0.1,
                                                     f"synthetic: {args.n} risky ~ Beta(5,2), {args.n} safe ~ Beta(2,5), "
                                                     "alpha 0.1"))
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        mark = "" if r["holds"] is None else ("  holds" if r["holds"] else "  DOES NOT HOLD")
        print(f"{r['name']:<{width}}  {r['value']:>9.4f}  {r['target'] or '':>8}{mark}")
    print(f"written to {out / 'calibration.json'} and {out / 'calibration.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
