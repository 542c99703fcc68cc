"""Benchmark: the device farm (``harness run --cluster``) on a real Ray cluster on this machine.

A head node and two "hosts", each a Ray node started with ``ray start`` beside its own adb server
and two simulated phones (tests/farm/lab.py), inside a network namespace of our own whose only
interface is loopback (outside one, Ray binds to the machine's outward address). The agent is
UI-TARS against the tests' scripted OpenAI-compatible server, which answers every call after a
fixed latency L: each episode makes ``--calls`` model calls (``press_home()`` then ``finished()``),
so the agents spend their time waiting on the model, as they do against a real one.

The same N equal episodes run in three ways, each through ``harness run`` as a user runs it:
  local   the local pool on host A's two phones (``--devices``, host A's adb server)
  1x2     the farm with host A's two phones only (``--cluster ... --device hostA/SERIAL`` x2)
  2x2     the farm with both hosts' four phones
Rows: throughput 2x2 / 1x2 (target >= 1.8), and wall per episode through Ray / the local pool on
the same two phones (target <= 1.1). Wall per episode is the span from the first episode's start
to the last one's end (results.jsonl) over N: the steady cost of an episode, shipping and
installing included. What each command spends before its first episode (connecting to the
cluster, probing the nodes, starting the actors) is reported beside it.

L defaults to 4 s, a vision model's answer on a screenshot (UI-TARS-7B on one GPU takes seconds):
all "hosts" here share one machine's 2 cores, which real hosts do not, so a shorter L measures
that shared CPU more than the farm (at L = 2 s under a load of 10, 2x2 / 1x2 came out 1.6).

The three run ``--rounds`` times, interleaved, so that all see the machine's load alike; the
rows are medians. Usage: scripts/bench_farm [--latency 4.0] [--episodes 8] [--calls 3]
[--rounds 2]. Writes bench/farm.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def row(name: str, value: Any, target: str | None = None) -> dict[str, Any]:
    holds = None
    if target is not None:
        op, x = target.split()
        holds = isinstance(value, (int, float)) and (value <= float(x) if op == "<=" else value >= float(x))
    return {"name": name, "value": round(value, 4) if isinstance(value, float) else value, "target": target,
            "holds": holds}


def _suite(path: Path, tag: str, n: int) -> Path:
    from tests.farm.lab import copies

    return copies(path, "settings_wifi_off", n, prefix=f"bench_{tag}", instruction=f"Bench {tag}: press home, then stop.")


def _iso(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def _run(args: list[str], out: Path, n: int, env: dict[str, str] | None = None) -> dict[str, float]:
    """One ``harness run``; its episode span, and what it spent before the first episode."""
    from harness.records import read_results

    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "harness.cli", *args, "--out", str(out), "--quiet"], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                       timeout=1800)
    wall = time.time() - t0
    rows = read_results(out) if out.exists() else []
    bad = [(r.task_id, r.status, r.error) for r in rows if r.status != "finished"]
    if p.returncode != 0 or len(rows) != n or bad:
        raise RuntimeError(f"harness {' '.join(args)} did not finish cleanly (logs in {out.parent}) (exit {p.returncode}, {len(rows)}/{n} "
                           f"episodes, {bad[:3]}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    first, last = min(_iso(r.started_at) for r in rows), max(_iso(r.ended_at) for r in rows)
    return {"span": last - first, "startup": first - t0, "wall": wall}


def inside(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
    from tests.farm.lab import FarmLab

    work = Path(tempfile.mkdtemp(prefix="crate-bench-farm-"))
    asked: dict[str, int] = {}

    def reply(req: dict[str, Any]) -> Reply:
        text = request_text(req)
        key = re.search(r"Bench \S+: press home, then stop\. \(copy \d+\)", text)
        key = key.group() if key else text  # one episode: its tag and copy number
        asked[key] = asked.get(key, 0) + 1
        done = asked[key] >= args.calls
        return Reply("Thought: done.\nAction: finished()" if done else "Thought: go home.\nAction: press_home()",
                     delay_s=args.latency)

    n, L = args.episodes, args.latency
    spans: dict[str, list[dict[str, float]]] = {"local": [], "one": [], "two": []}
    with FarmLab(work) as lab, ScriptedModelServer(reply) as server:
        t0 = time.monotonic()
        lab.start_head()
        lab.wait_nodes(["head"])
        a = lab.add_host("hostA", phones=2)
        lab.add_host("hostB", phones=2)
        lab.wait_nodes(["head", "hostA", "hostB"])
        cluster_s = time.monotonic() - t0
        model = ["--agent", "uitars", "--model-base-url", server.base_url, "--model", "bench-model",
                 "--model-concurrency", "8"]
        runs = {
            "local": (["--devices", ",".join(a.serials)], {"ANDROID_ADB_SERVER_PORT": str(a.adb.port)}),
            "one": (["--cluster", lab.address, *[x for s in a.serials for x in ("--device", f"hostA/{s}")]], None),
            "two": (["--cluster", lab.address], None),
        }
        for k in range(args.rounds):  # interleaved, so that all three see the machine's load alike
            for name, (where, env) in runs.items():
                tag = f"{name}{k}"
                suite = _suite(work / f"{tag}.yaml", tag, n)
                spans[name].append(_run(["run", "--suite", str(suite), *where, *model], work / tag, n, env=env))
    shutil.rmtree(work, ignore_errors=True)  # kept when a run failed: its logs are there
    med = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for name, rs in spans.items()}
    per_local, per_one = med["local"]["span"] / n, med["one"]["span"] / n
    each = f"{n} episodes of {args.calls} model calls, L={L:g}s, median of {args.rounds}"
    return [
        row("cluster of 3 nodes on this machine up (ray start to all alive, s)", cluster_s),
        row(f"1 node x 2 phones, {each} (episodes/min)", n / med["one"]["span"] * 60),
        row("2 nodes x 2 phones, same episodes (episodes/min)", n / med["two"]["span"] * 60),
        row("throughput 2 nodes x 2 phones / 1 node x 2 phones",
            statistics.median(o["span"] / t["span"] for o, t in zip(spans["one"], spans["two"])), ">= 1.8"),
        row("the same 2 phones, local pool: wall per episode (s)", per_local),
        row("the same 2 phones, through Ray: wall per episode (s)", per_one),
        row("wall per episode, Ray / local pool (same 2 phones)",
            statistics.median(o["span"] / lo["span"] for o, lo in zip(spans["one"], spans["local"])), "<= 1.1"),
        row("before the first episode, local pool (s)", med["local"]["startup"]),
        row("before the first episode, --cluster: connect, probe nodes, start actors (s)", med["one"]["startup"]),
        row("whole command, local pool (s)", med["local"]["wall"]),
        row("whole command, --cluster with the same 2 phones (s)", med["one"]["wall"]),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=4.0, help="seconds the model takes per call (L)")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="each configuration this often, interleaved (medians)")
    ap.add_argument("--calls", type=int, default=3, help="model calls per episode")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = ROOT / "bench" / "farm.json"
    out.parent.mkdir(exist_ok=True)
    from tests.farm.lab import in_own_netns, inside_own_netns, netns_problem

    if not args.inside:
        if inside_own_netns():
            args.inside = True
        else:
            problem = netns_problem()
            if problem:
                print(f"bench_farm: no network namespace of our own can be made, so no Ray cluster is started "
                      f"(it would bind to the machine's outward address): {problem}", file=sys.stderr)
                return 1
            p = in_own_netns([sys.executable, str(Path(__file__).resolve()), "--inside", *sys.argv[1:]], timeout=3600)
            sys.stdout.write(p.stdout)
            sys.stderr.write(p.stderr[-5000:] if p.returncode else "")
            return p.returncode
    try:
        rows = inside(args)
    except RuntimeError as e:
        print(f"bench_farm: {e}", file=sys.stderr)
        return 1
    out.write_text(json.dumps({"rows": rows}, indent=1), encoding="utf-8")
    width = max(len(r["name"]) for r in rows)
    print(f"farm benchmark (bench/farm.json); L = {args.latency:g}s")
    for r in rows:
        mark = "" if r["holds"] is None else ("  holds" if r["holds"] else "  MISSES")
        print(f"  {r['name']:<{width}}  {r['value']:>9}  {r['target'] or '':>7}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
