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
Rows, at each L of ``--latency`` (default 4 s and 0.5 s):
  throughput 2x2 / 1x2 (target >= 1.8): twice the phones on a second node, the same episodes;
      what it measures is how close the farm comes to doubling, i.e. whether the driver, Ray and
      shipping the episodes home keep the second node's phones waiting.
  wall per episode through Ray / the local pool on the same two phones (target <= 1.1): what an
      episode costs on the farm over what it costs locally, shipping and installing included.
Wall per episode is the span from the first episode's start to the last one's end (results.jsonl)
over N: the steady cost of an episode. What each command spends before its first episode
(connecting to the cluster, probing the nodes, starting the actors) is reported beside it.

At L = 4 s (a vision model's answer on a screenshot: UI-TARS-7B on one GPU takes seconds) the
model's wait is most of an episode, so both ratios say little about the harness beyond "it does not
get in the way". At L = 0.5 s the harness's own work (the phones' screenshots, the agent's request,
records, Ray, installs) is a large part of each step: there the ratios measure the farm. All
"hosts" share one machine's 2 cores, which real hosts do not, so 2x2 / 1x2 at a short L is bounded
by that shared CPU (four phones' work on two cores), not by the farm; the row says so when it misses.

Driver ceiling: how many step events one driver follows. Phones simulated as cheaply as can be:
fake device actors (``--ceiling-actors`` Ray actors on the cluster, each hosting many fake
phones on threads) that emit an episode's step events as fast as they can, with no phone, no
screenshot, no agent and no model. The driver is the farm's own: a ``FarmStation`` per fake phone
(a thread waiting on its actor's stream), ``run_stations``'s queue, the line-per-event progress
printer ``harness run`` uses in logs (to /dev/null) and a real record writer (fsync on) installing
every episode. Rows per number of phones (``--ceiling-phones``): step events per second followed, and
the driver's CPU per event (its process's CPU time over the events): 1 / that is what one core of
the driver follows; the fake actors share the machine, so the first is a lower bound.

The three run ``--rounds`` times, interleaved, so that all see the machine's load alike; the
rows are medians. Usage: scripts/bench_farm [--latency 4,0.5] [--episodes 8] [--calls 3]
[--rounds 2] [--ceiling-phones 16,64,256] [--only ratios,ceiling]. Writes bench/farm.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
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

from bench_rows import bench_dir, row, write_rows  # noqa: E402  (scripts/, beside this file)


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


def ratios(lab: Any, a: Any, server: Any, asked: dict[str, int], args: argparse.Namespace, L: float,
           work: Path) -> list[dict[str, Any]]:
    """The three configurations at latency ``L``, ``--rounds`` times interleaved; the rows."""
    n = args.episodes
    asked.clear()
    spans: dict[str, list[dict[str, float]]] = {"local": [], "one": [], "two": []}
    model = ["--agent", "uitars", "--model-base-url", server.base_url, "--model", "bench-model",
             "--model-concurrency", "8"]
    runs = {
        "local": (["--devices", ",".join(a.serials)], {"ANDROID_ADB_SERVER_PORT": str(a.adb.port)}),
        "one": (["--cluster", lab.address, *[x for s in a.serials for x in ("--device", f"hostA/{s}")]], None),
        "two": (["--cluster", lab.address], None),
    }
    for k in range(args.rounds):  # interleaved, so that all three see the machine's load alike
        for name, (where, env) in runs.items():
            tag = f"L{L:g}-{name}{k}"
            suite = _suite(work / f"{tag}.yaml", tag, n)
            spans[name].append(_run(["run", "--suite", str(suite), *where, *model], work / tag, n, env=env))
    med = {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for name, rs in spans.items()}
    per_local, per_one = med["local"]["span"] / n, med["one"]["span"] / n
    at = f"L={L:g}s"
    each = f"{n} episodes of {args.calls} model calls, {at}, median of {args.rounds}"
    return [
        row(f"1 node x 2 phones, {each} (episodes/min)", n / med["one"]["span"] * 60),
        row(f"2 nodes x 2 phones, same episodes, {at} (episodes/min)", n / med["two"]["span"] * 60),
        row(f"throughput 2 nodes x 2 phones / 1 node x 2 phones, {at}",
            statistics.median(o["span"] / t["span"] for o, t in zip(spans["one"], spans["two"])), ">= 1.8"),
        row(f"the same 2 phones, local pool: wall per episode, {at} (s)", per_local),
        row(f"the same 2 phones, through Ray: wall per episode, {at} (s)", per_one),
        row(f"wall per episode, Ray / local pool (same 2 phones), {at}",
            statistics.median(o["span"] / lo["span"] for o, lo in zip(spans["one"], spans["local"])), "<= 1.1"),
        row(f"before the first episode, local pool, {at} (s)", med["local"]["startup"]),
        row(f"before the first episode, --cluster: connect, probe nodes, start actors, {at} (s)",
            med["one"]["startup"]),
    ]


def driver_ceiling(phones: int, actors: int, steps: int, episodes: int, work: Path) -> list[dict[str, Any]]:
    """The farm's driver (FarmStation per phone, run_stations, the log progress printer, a record
    writer with fsync) following ``phones`` fake phones on ``actors`` fake device actors, each fake
    episode ``steps`` step events emitted as fast as they can be: events per second, CPU per event."""
    import threading

    import ray

    from harness.farm.driver import FarmStation
    from harness.farm.nodes import Node
    from harness.records import RunWriter
    from harness.run.suite import SuiteConfig, describe_progress, run_stations
    from harness.core.tasks import parse_task
    from tests.fakes.phoneless_actor import PhonelessActor

    hosts = [PhonelessActor.remote(steps) for _ in range(actors)]
    ray.get([h.hello.remote() for h in hosts], timeout=300)
    node = Node(node_id="fake", label="fake", address="127.0.0.1")
    stations = [FarmStation(hosts[i % actors], node, {"serial": f"phone-{i:03d}"}) for i in range(phones)]
    tasks = [parse_task({"id": f"fake_{i:05d}", "instruction": "fake", "reference_steps": steps})
             for i in range(phones * episodes)]
    lock, seen = threading.Lock(), {"steps": 0}
    with open(os.devnull, "w") as null:
        lines = describe_progress(stream=null)

        def progress(kind: str, data: dict[str, Any]) -> None:
            if kind == "step":
                with lock:
                    seen["steps"] += 1
            lines(kind, data)

        with RunWriter(work / f"ceiling-{phones}") as w:
            cpu0, t0 = time.process_time(), time.monotonic()
            rep = run_stations(tasks, stations, w, SuiteConfig(agent_name="fake"), progress=progress)
            wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    for h in hosts:
        ray.kill(h, no_restart=True)
    want = phones * episodes * steps
    bad = [r for r in rep.results if r.status != "finished"]
    if rep.error or bad or len(rep.results) != len(tasks) or seen["steps"] != want:
        raise RuntimeError(f"driver ceiling with {phones} fake phones: {rep.error or bad[:3]}, "
                           f"{len(rep.results)}/{len(tasks)} episodes, {seen['steps']}/{want} step events")
    what = f"{phones} fake phones (no phone: {actors} fake device actors emitting step events)"
    return [
        row(f"driver ceiling, {what}: step events followed per second", want / wall),
        row(f"driver ceiling, {what}: driver CPU per step event (ms)", cpu / want * 1000),
        row(f"driver ceiling, {what}: step events one driver core follows per second (1 / CPU per event)",
            want / cpu if cpu else None),
    ]


def inside(args: argparse.Namespace) -> list[dict[str, Any]]:
    from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
    from tests.farm.lab import FarmLab

    work = Path(tempfile.mkdtemp(prefix="crate-bench-farm-"))
    asked: dict[str, int] = {}

    latency = {"s": 0.0}  # set per L

    def reply(req: dict[str, Any]) -> Reply:
        text = request_text(req)
        key = re.search(r"Bench \S+: press home, then stop\. \(copy \d+\)", text)
        key = key.group() if key else text  # one episode: its tag and copy number
        asked[key] = asked.get(key, 0) + 1
        done = asked[key] >= args.calls
        return Reply("Thought: done.\nAction: finished()" if done else "Thought: go home.\nAction: press_home()",
                     delay_s=latency["s"])

    rows: list[dict[str, Any]] = []
    with FarmLab(work) as lab, ScriptedModelServer(reply) as server:
        t0 = time.monotonic()
        lab.start_head()
        lab.wait_nodes(["head"])
        a = lab.add_host("hostA", phones=2)
        lab.add_host("hostB", phones=2)
        lab.wait_nodes(["head", "hostA", "hostB"])
        rows.append(row("cluster of 3 nodes on this machine up (ray start to all alive, s)", time.monotonic() - t0))
        if "ratios" in args.only:
            for L in args.latency:
                latency["s"] = L
                rows += ratios(lab, a, server, asked, args, L, work)
        if "ceiling" in args.only:
            for phones in args.ceiling_phones:
                rows += driver_ceiling(phones, args.ceiling_actors, args.ceiling_steps, args.ceiling_episodes, work)
    shutil.rmtree(work, ignore_errors=True)  # kept when a run failed: its logs are there
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    floats = lambda text: [float(x) for x in text.split(",") if x.strip()]  # noqa: E731
    ints = lambda text: [int(x) for x in text.split(",") if x.strip()]  # noqa: E731
    ap.add_argument("--latency", type=floats, default=[4.0, 0.5], help="seconds the model takes per call (L), "
                    "comma-separated: the ratios are measured at each (default 4,0.5)")
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2, help="each configuration this often, interleaved (medians)")
    ap.add_argument("--calls", type=int, default=3, help="model calls per episode")
    ap.add_argument("--only", type=lambda t: set(t.split(",")), default={"ratios", "ceiling"},
                    help="ratios, ceiling, or both (default)")
    ap.add_argument("--ceiling-phones", type=ints, default=[16, 64, 256], help="fake phones the driver follows")
    ap.add_argument("--ceiling-actors", type=int, default=4, help="fake device actors hosting them")
    ap.add_argument("--ceiling-steps", type=int, default=50, help="step events per fake episode")
    ap.add_argument("--ceiling-episodes", type=int, default=2, help="fake episodes per fake phone")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = bench_dir() / "farm.json"
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
    write_rows(out, rows, f"farm benchmark (bench/farm.json); L = {', '.join(f'{x:g}' for x in args.latency)} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
