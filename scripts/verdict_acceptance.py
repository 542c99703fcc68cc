"""Measure the verdict grammar against the reader it replaced (issue 34), on the same replies.

Two figures, each for "today's reader" (the scanning reader of an earlier commit, ``--before``,
default edc9a31, read from git and run in a child process with that tree first on its path) and
for the grammar of this tree:

1. **The hostile shapes** (tests/judges/hostile_replies.py, English and Chinese): what a CRATE-S
   gate with default options does with each reply to a risky step: ``ran`` (the reply read as
   "not risky") or ``halted`` (a risky finding, or no verdict). The rows of issue 34's table first;
   then the table's trajectory rows, as the CRATE-S aggregation reads them (``read as safe``,
   ``read as unsafe`` or ``judge_error``).
2. **Real judge replies** (tests/judges/fixtures/real_judge_replies.json, public sources named
   there): the share each reader accepts as one JSON object holding the keys its prompt asked for
   (the replies come from other judges, so their own schemas are not ours: the measure is the
   grammar's shape rule), and so the share the grammar would ask again (each refused reply costs
   one re-ask; a second refusal fails closed).

    .venv/bin/python scripts/verdict_acceptance.py [--before REV] [--json]

Prints both tables and writes bench/verdict_acceptance.json.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.client.replies import VerdictError, any_object, read_verdict  # noqa: E402
from judges.verdict_kinds import CRATE_S_STEP, CRATE_S_TRAJ  # noqa: E402
from tests.judges.hostile_replies import JUDGE_SHAPES_BY_LANG, STEP_SHAPES_BY_LANG  # noqa: E402

FIXTURES = ROOT / "tests" / "judges" / "fixtures" / "real_judge_replies.json"

# run inside the earlier tree: the same questions of its reader
CHILD = r"""
import json, sys
# the reader's module before issue 39 moved harness/ into packages, then after; in this order, as
# the editable install's finder serves this tree's modules the earlier tree lacks (harness.client)
try:
    from harness.replies import VerdictError, any_object, read_verdict
except ImportError:
    from harness.client.replies import VerdictError, any_object, read_verdict
from judges.evidence import CRATE_S_STEP, read_answer
from judges.prompts import load_prompt
from judges.verdict_kinds import CRATE_S_TRAJ
out = []
for case in json.load(sys.stdin):
    try:
        if case["what"] == "traj":
            v = read_answer(case["text"], CRATE_S_TRAJ, load_prompt("crate_s_traj", case["lang"]), case["truncated"]).value
            out.append("read as unsafe" if v["unsafe"] else "read as safe")
        elif case["what"] == "gate":
            v = read_answer(case["text"], CRATE_S_STEP.verdict, load_prompt("crate_s_step", case["lang"]),
                            case["truncated"]).value
            out.append("ran" if v["risky"] is False else "halted")
        else:
            read_verdict(case["text"], any_object(tuple(case["required"])), truncated=case["truncated"])
            out.append("accepted")
    except VerdictError:
        out.append({"gate": "halted", "traj": "judge_error"}.get(case["what"], "refused"))
json.dump(out, sys.stdout)
"""


def earlier_tree(rev: str, into: Path) -> None:
    """The harness and judges packages as they were at ``rev``."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "harness", "judges"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tar.stdout)) as t:
        t.extractall(into, filter="data")


def before(rev: str, cases: list[dict]) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        earlier_tree(rev, Path(tmp))
        env = {**os.environ, "PYTHONPATH": tmp}
        p = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(cases), capture_output=True, text=True,
                           env=env, cwd=tmp, check=True)
    return json.loads(p.stdout)


def after(cases: list[dict]) -> list[str]:
    out = []
    for case in cases:
        try:
            if case["what"] == "traj":
                v = read_verdict(case["text"], CRATE_S_TRAJ, case["truncated"]).value
                out.append("read as unsafe" if v["unsafe"] else "read as safe")
            elif case["what"] == "gate":
                v = read_verdict(case["text"], CRATE_S_STEP, case["truncated"]).value
                out.append("ran" if v["risky"] is False else "halted")
            else:
                read_verdict(case["text"], any_object(tuple(case["required"])), truncated=case["truncated"])
                out.append("accepted")
        except VerdictError:
            out.append({"gate": "halted", "traj": "judge_error"}.get(case["what"], "refused"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="edc9a31", help="the commit whose reader is 'today's' (default edc9a31)")
    ap.add_argument("--json", action="store_true", help="print the JSON written to bench/verdict_acceptance.json")
    args = ap.parse_args()

    shapes = [(lang, s) for lang in STEP_SHAPES_BY_LANG for s in STEP_SHAPES_BY_LANG[lang]]
    shapes.sort(key=lambda c: (not c[1].issue, c[0] != "en"))
    gate = [{"what": "gate", "lang": lang, "text": s.text, "truncated": s.truncated} for lang, s in shapes]
    trajs = [(lang, s) for lang in JUDGE_SHAPES_BY_LANG for s in JUDGE_SHAPES_BY_LANG[lang]["crate_s_traj"] if s.issue]
    gate += [{"what": "traj", "lang": lang, "text": s.text, "truncated": s.truncated} for lang, s in trajs]
    shapes += trajs
    real = json.loads(FIXTURES.read_text(encoding="utf-8"))["replies"]
    judged = [{"what": "real", "text": r["text"], "required": r["required"], "truncated": bool(r.get("truncated"))}
              for r in real]
    old = before(args.before, gate + judged)
    new = after(gate + judged)

    rows = [{"lang": lang, "shape": s.id, "issue_table": s.issue, "kind": case["what"], "before": b, "after": a}
            for (lang, s), case, b, a in zip(shapes, gate, old, new)]
    steps = [r for r in rows if r["kind"] == "gate"]
    replies = [{"id": r["id"], "source": r["source"], "before": b, "after": a}
               for r, b, a in zip(real, old[len(gate):], new[len(gate):])]
    n = len(replies)
    acc_old = sum(r["before"] == "accepted" for r in replies)
    acc_new = sum(r["after"] == "accepted" for r in replies)
    summary = {
        "before": args.before,
        "shapes": len(steps), "ran_before": sum(r["before"] == "ran" for r in steps),
        "ran_after": sum(r["after"] == "ran" for r in steps),
        "issue_rows_ran_before": sum(r["before"] == "ran" for r in steps if r["issue_table"]),
        "issue_rows_ran_after": sum(r["after"] == "ran" for r in steps if r["issue_table"]),
        "issue_rows": sum(r["issue_table"] for r in steps),
        "issue_traj_rows": sum(r["kind"] == "traj" for r in rows),
        "issue_traj_read_as_safe_before": sum(r["before"] == "read as safe" for r in rows if r["kind"] == "traj"),
        "issue_traj_read_as_safe_after": sum(r["after"] == "read as safe" for r in rows if r["kind"] == "traj"),
        "real_replies": n, "accepted_before": acc_old, "accepted_after": acc_new,
        "reask_rate_after": round((n - acc_new) / n, 3) if n else None,
    }
    doc = {"summary": summary, "shapes": rows, "real_replies": replies}
    out = ROOT / "bench" / "verdict_acceptance.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, ensure_ascii=False, indent=1))
        return 0
    print(f"hostile shapes at a gate (today's reader = {args.before}):")
    print(f"  {'lang':4} {'shape':48} {'today':14} {'grammar':14}")
    for r in rows:
        mark = "*" if r["issue_table"] else " "
        print(f" {mark}{r['lang']:4} {r['shape'][:48]:48} {r['before']:14} {r['after']:14}")
    s = summary
    print(f"issue 34's rows (*): ran {s['issue_rows_ran_before']}/{s['issue_rows']} today, "
          f"{s['issue_rows_ran_after']}/{s['issue_rows']} with the grammar; all shapes: ran {s['ran_before']}/"
          f"{s['shapes']} today, {s['ran_after']}/{s['shapes']} with the grammar; the table's trajectory rows read "
          f"as safe: {s['issue_traj_read_as_safe_before']}/{s['issue_traj_rows']} today, "
          f"{s['issue_traj_read_as_safe_after']}/{s['issue_traj_rows']} with the grammar")
    print("\nreal judge replies:")
    for r in replies:
        print(f"  {r['id']:40} {r['before']:9} {r['after']:9}")
    print(f"accepted: {acc_old}/{n} today, {acc_new}/{n} with the grammar; the grammar asks again for "
          f"{n - acc_new}/{n}; wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
