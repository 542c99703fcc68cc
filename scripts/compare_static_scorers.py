"""Our static profiles against the published scorers' own code, step by step.

Makes one seeded prediction per step of an AndroidControl-shaped dataset (by default the whole test
set in ``../shared/reference/``: ``androidcontrol_test_300.jsonl`` + ``androidcontrol_test_rest.jsonl``,
1,543 episodes, 8,444 steps; the mix of right answers, near misses, wrong types, swipes both ways,
text variants and so on is :func:`static_predictions.predict`), scores it with our profiles and,
given ``--scorers DIR``, with each scorer's own code (``scripts/published_scorers.py``, run by
``--scorers-python``, a Python with the scorers' dependencies), and prints per profile: steps
scored, step accuracy ours and theirs, the steps judged differently (count and share) and each
difference with its step. Without ``--scorers`` it prints our figures only (the cross-scorer table).

How to get the scorers (their code is never part of this repository) and a Python for them: see
the docstring of ``scripts/published_scorers.py``. Example::

    .venv/bin/python scripts/compare_static_scorers.py --scorers /tmp/scorers --scorers-python /tmp/scorers-venv/bin/python

``--synthetic N`` adds N of our own synthetic episodes (several screen sizes, boxes covering the
screen, tiny boxes, ...) and ``--edges`` the points where scorers differ (box edges, thresholds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import static_predictions  # noqa: E402

from harness.importers.androidcontrol import load_dataset  # noqa: E402
from harness.report.static_eval import PROFILES, StaticReport, decisions, load_predictions, score  # noqa: E402

SHARED = ROOT.parent / "shared" / "reference"
DEFAULT_DATASETS = [SHARED / "androidcontrol_test_300.jsonl", SHARED / "androidcontrol_test_rest.jsonl"]
PUBLISHED = ("androidcontrol", "uis1-pipeline", "infigui-r1", "agentcpm-gui", "os-atlas", "ui-r1", "guiodyssey", "aitw",
             "gui-r1")


def build_cases(datasets: list[Path], seed: int, synthetic: int, edges: bool, finish_share: float) -> list[dict]:
    episodes: list[dict] = []
    for path in datasets:
        episodes += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    episodes += static_predictions.synthetic_episodes(seed, synthetic) if synthetic else []
    cases = static_predictions.cases(episodes, seed, edges=edges, default_size=[1080, 2400], finish_share=finish_share,
                                     invalid_share=static_predictions.INVALID_SHARE)
    for c, ep in zip(cases, episodes):
        c["source"] = ep
    return cases


def ours(cases: list[dict], profiles: list[str], work: Path) -> dict[str, StaticReport]:
    data, preds = work / "dataset.jsonl", work / "predictions.jsonl"
    data.write_text("".join(json.dumps(c["source"], ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    preds.write_text(static_predictions.predictions_jsonl(cases), encoding="utf-8")
    episodes = load_dataset(data)
    p = load_predictions(preds, episodes)
    return {name: score(episodes, p, name) for name in profiles}


def theirs(cases: list[dict], profiles: list[str], scorers: Path, python: str, work: Path) -> dict[str, dict[int, list]]:
    path, out = work / "cases.jsonl", work / "decisions.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in c.items() if k != "source"}, ensure_ascii=False) + "\n"
                            for c in cases), encoding="utf-8")
    cmd = [python, str(ROOT / "scripts" / "published_scorers.py"), "--scorers", str(scorers), "--cases", str(path),
           "--out", str(out)] + [a for n in profiles for a in ("--profile", n)]
    subprocess.run(cmd, check=True)
    got: dict[str, dict[int, list]] = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        got.setdefault(r["profile"], {})[r["episode"]] = r["decisions"]
    return got


def agree(mine, their) -> bool:
    """One step: a skip matches a skip; AITW's function gives no type decision (``None``)."""
    if isinstance(their, str) or isinstance(mine, str):
        return isinstance(their, str) and isinstance(mine, str)
    return mine[1] == their[1] and (their[0] is None or mine[0] == their[0])


def _acc(ds: list) -> tuple[int, float | None]:
    scored = [d for d in ds if not isinstance(d, str)]
    return len(scored), (round(100.0 * sum(bool(d[1]) for d in scored) / len(scored), 2) if scored else None)


def compare(report: StaticReport, their: dict[int, list], cases: list[dict]) -> dict:
    mine = decisions(report)
    diffs, all_mine, all_theirs = [], [], []
    for c in cases:
        e = c["episode"]
        m, t = mine.get(e, []), their.get(e, [])
        if len(m) != len(t):
            diffs.append({"episode": e, "step": None, "ours": f"{len(m)} decisions", "theirs": f"{len(t)} decisions"})
            continue
        all_mine += m
        all_theirs += t
        for j, (a, b) in enumerate(zip(m, t)):
            if not agree(a, b):
                steps = c["steps"]
                gt = steps[j] if j < len(steps) else {"action_content": {"action": "finish"}}
                diffs.append({"episode": e, "episode_id": c.get("episode_id"), "step": j, "ours": a, "theirs": b,
                              "ground_truth": gt["action_content"], "check_options": gt.get("check_options"),
                              "prediction": c["predictions"].get(str(j))})
    n_m, acc_m = _acc(all_mine)
    n_t, acc_t = _acc(all_theirs)
    return {"profile": report.profile, "steps_ours": n_m, "steps_theirs": n_t, "acc_ours": acc_m, "acc_theirs": acc_t,
            "different": len(diffs), "different_pct": round(100.0 * len(diffs) / max(1, len(all_mine)), 3), "diffs": diffs}


def pairwise(reports: dict[str, StaticReport]) -> str:
    """The share of steps (scored by both) two profiles judge differently (right vs wrong), as a table."""
    ok = {name: {(st.episode, st.step): st.ok for st in r.steps if st.skipped is None} for name, r in reports.items()}
    names = list(reports)
    lines = ["steps judged differently (% of the steps both score)", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for a in names:
        cells = []
        for b in names:
            both = ok[a].keys() & ok[b].keys()
            cells.append(f"{100.0 * sum(ok[a][k] != ok[b][k] for k in both) / len(both):.1f}" if both else "-")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", action="append", help="AndroidControl-shaped JSONL (default: the whole test set in "
                    "../shared/reference; 'none': only the --synthetic episodes)")
    ap.add_argument("--scorers", type=Path, help="folder with the scorers' checkouts (scripts/published_scorers.py)")
    ap.add_argument("--scorers-python", default=sys.executable, help="a Python with the scorers' dependencies")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--synthetic", type=int, default=0, help="add this many synthetic episodes")
    ap.add_argument("--edges", action="store_true", help="add the points where scorers differ (box edges, thresholds)")
    ap.add_argument("--finish-share", type=float, default=0.0,
                    help="share of episodes that also get a finish-step prediction (read by agentcpm-gui)")
    ap.add_argument("--profile", action="append", help="profiles to compare (default every one with public code)")
    ap.add_argument("--show", type=int, default=5, help="differences printed per profile")
    ap.add_argument("--json", type=Path, help="also write every figure and difference here")
    args = ap.parse_args()
    datasets = DEFAULT_DATASETS if args.dataset is None else [Path(p) for p in args.dataset if p != "none"]
    for p in datasets:
        if not p.is_file():
            print(f"compare_static_scorers: {p} not found (pass --dataset FILE, or --dataset none --synthetic N)", file=sys.stderr)
            return 2
    profiles = args.profile or (list(PUBLISHED) if args.scorers else list(PROFILES))
    cases = build_cases(datasets, args.seed, args.synthetic, args.edges, args.finish_share)
    n_steps = sum(len(c["steps"]) for c in cases)
    n_preds = sum(len(c["predictions"]) for c in cases)
    print(f"{len(cases)} episodes, {n_steps} steps, {n_preds} seeded predictions (seed {args.seed})")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        mine = ours(cases, profiles, work)
        t_ours = time.perf_counter() - t0
        if not args.scorers:
            from harness.report.static_table import format_md

            print(format_md(list(mine.values())))
            print("\n" + pairwise(mine))
            return 0
        t0 = time.perf_counter()
        their = theirs(cases, [p for p in profiles if p in PUBLISHED], args.scorers.resolve(), args.scorers_python, work)
        t_theirs = time.perf_counter() - t0
    rows = [compare(mine[p], their[p], cases) for p in profiles if p in their]
    print(f"ours: {t_ours:.1f} s, the scorers' code: {t_theirs:.1f} s")
    print(f"\n| profile | steps scored (ours / theirs) | step accuracy ours | theirs | steps judged differently |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['profile']} | {r['steps_ours']} / {r['steps_theirs']} | {r['acc_ours']} | {r['acc_theirs']} | "
              f"{r['different']} ({r['different_pct']} %) |")
    for r in rows:
        for d in r["diffs"][:args.show]:
            print(f"{r['profile']}: {json.dumps(d, ensure_ascii=False)}")
    if args.json:
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0 if all(r["different"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
