"""Benchmark: ``harness judge`` throughput against a model with a fixed latency.

Builds N synthetic recorded episodes of S steps (distinct small screenshots, click actions) with the
real record writer, starts the scripted OpenAI-compatible server (tests/fakes/model_server.py, a
test double) answering every request after L seconds, and judges the run offline:

  pass 1   every step and aggregation call goes to the server. Ideal wall time = calls x L / K for
           concurrency K (K calls always in flight, nothing else costs time); ratio = wall / ideal.
  pass 2   a new judgement set against a fresh server process on the same address (the cache key
           holds the endpoint: another address is another judge, whose answers are its own), the
           judging process's memory caches emptied (as in a new process), and the same
           step-evidence cache file: step evidence is read from the cache, only the aggregation
           calls remain. Reported as its wall time and as a fraction of pass 1.

The default judge is ``crate`` (CRATE: one call per step, one per episode); ``--judge count`` uses
the test-only sequential judge of tests/offline_judge/count_judge.py (no cache; pass 2 is then skipped).

The server runs in its own process (a real model server is one), so its CPU time is not counted
against the judging process. Screenshots are small (270x600 by default, --size): the crate judge
draws on and re-encodes every step's screenshot, which at 1080x2400 costs ~0.2 s of CPU per step
and would measure the image work, not the pipeline.

``--scale 200,2000`` instead measures judging at scale: a run of each size (``--steps`` steps per
episode) judged by ``harness judge`` itself, each in its own process (peak RSS read as it exits,
harness.bench_all's _peak_rss_kb) against a fresh server process, at ``--concurrency`` (64 for the
targets): peak memory of the large run over the small one (target <= 1.10: nothing held per episode
judged) and the large run's wall / ideal (target <= 1.1), ideal = calls x L / K as above, wall the
judging pass's own (the set manifest's ``passes``; interpreter start-up excluded). Rows go to
bench/judges_scale.json (``scripts/bench_judges_scale``).

The test server's handler gets TCP_NODELAY here: with Nagle's algorithm on, its two-part replies
stall ~40 ms on every kept-alive connection (delayed ACK), which would measure the test double,
not the judging pipeline.
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)

from PIL import Image, ImageDraw  # noqa: E402

from harness.client.config import ModelConfig  # noqa: E402
from harness.offline_judge import judge_runs, prepare_judges  # noqa: E402
from harness.records import EpisodeResult, RunWriter, file_sha256  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text  # noqa: E402

CRATE_REPLIES = {
    "crate_step": {"clues": "Settings page, Wi-Fi switch on", "effect": "the tap turns Wi-Fi off"},
    "crate_traj": {"conditions": [{"condition": "Wi-Fi off", "met": True, "evidence": "switch off"}],
                   "success": True, "reason": "the only condition is met"},
}


def screenshot(w: int, h: int, seed: int) -> bytes:
    img = Image.new("RGB", (w, h), (seed * 37 % 256, seed * 91 % 256, seed * 53 % 256))
    d = ImageDraw.Draw(img)
    d.text((4, 4), f"screen {seed}", fill=(255, 255, 255))
    d.rectangle([seed % (w - 20), seed * 7 % (h - 20), seed % (w - 20) + 16, seed * 7 % (h - 20) + 16],
                fill=(255, 255, 0))
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def build_run(run: Path, episodes: int, steps: int, size: tuple[int, int]) -> None:
    suite = run.parent / "bench-suite.yaml"
    suite.write_text("".join(f"- id: ep{i:04d}\n  instruction: Turn off Wi-Fi on phone {i}\n"
                             f"  reference_steps: {steps}\n" for i in range(episodes)), encoding="utf-8")
    seed = 0
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"kind": "bench", "suite": {"path": str(suite), "files": {str(suite): file_sha256(suite)}}})
        for i in range(episodes):
            tid = f"ep{i:04d}"
            ep = w.start_episode(tid)
            seed += 1
            before = ep.write_screen(0, screenshot(*size, seed))
            for k in range(1, steps + 1):
                seed += 1
                after = ep.write_screen(k, screenshot(*size, seed))
                ep.append_step({"index": k, "action": {"type": "click", "x": 10 + k, "y": 20 + i % 50},
                                "screen_before": before, "screen_after": after})
                before = after
            w.append_result(EpisodeResult(task_id=tid, agent="bench", status="step_limit", steps=steps,
                                          cap=2 * steps + 1, verdicts={}))


def responder(latency: float, judge: str):
    def reply(req):
        if judge == "crate":
            name = ((req.get("response_format") or {}).get("json_schema") or {}).get("name", "crate_traj")
            body = json.dumps(CRATE_REPLIES.get(name, CRATE_REPLIES["crate_traj"]))
        else:
            body = '{"success": true}' if request_text(req).startswith("FINAL") else '{"ok": true}'
        return Reply(body, delay_s=latency, usage={"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960})
    return reply


def _serve(latency: float, judge: str, conn, port: int = 0) -> None:
    """The scripted server in its own process, as a real model server would be: its CPU time
    (HTTP, JSON bodies with base64 images) is not the judging process's."""
    with ScriptedModelServer(responder(latency, judge), port=port) as server:
        server.httpd.RequestHandlerClass.disable_nagle_algorithm = True  # see the module docstring
        conn.send(server.base_url)
        conn.recv()  # "stop"
        conn.send({"served": len(server.requests), "max_active": server.max_active})


class ServerProcess:
    def __init__(self, latency: float, judge: str, port: int = 0):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(latency, judge, child, port), daemon=True)
        self.proc.start()
        self.base_url = self.conn.recv()
        self.stats: dict = {}

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.conn.send("stop")
        self.stats = self.conn.recv()
        self.proc.join(timeout=10)


def one_pass(run: Path, judge: str, latency: float, k: int, cache: str | None, set_id: str,
             in_flight: int | None, port: int = 0) -> dict:
    with ServerProcess(latency, judge, port) as server:
        cfg = ModelConfig(base_url=server.base_url, model="bench-judge", max_retries=0, timeout_s=120)
        setup = prepare_judges([judge], {}, cfg, k, cache=cache)
        t0 = time.monotonic()
        report = judge_runs([run], setup, concurrency=k, set_id=set_id, episodes_in_flight=in_flight)
        wall = time.monotonic() - t0
    calls = report.usage["calls"]
    ideal = calls * latency / k
    errors = sum(v["judge_error"] for v in report.verdicts.values())
    return {"wall_s": round(wall, 3), "calls": calls, "served": server.stats.get("served"),
            "ideal_s": round(ideal, 3), "ratio": round(wall / ideal, 4) if ideal else None,
            "max_calls_in_flight": server.stats.get("max_active"), "judged": report.judged, "judge_errors": errors,
            "workers": report.workers, "port": int(server.base_url.rsplit(":", 1)[1].split("/", 1)[0])}


def scale(args: argparse.Namespace, judge: str, size: tuple[int, int]) -> int:
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_all import _peak_rss_kb, row

    sizes = [int(x) for x in args.scale.split(",")]
    found: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-judges-scale-") as tmp:
        for n in sizes:
            run = Path(tmp) / f"run-{n}"
            build_run(run, n, args.steps, size)
            with ServerProcess(args.latency, judge) as server:
                rss, rc, text = _peak_rss_kb(
                    ["judge", str(run), "--judge", judge, "--model-base-url", server.base_url, "--model", "bench-judge",
                     "--concurrency", str(args.concurrency), "--retries", "0", "--judge-set", "scale", "--no-progress"],
                    dict(os.environ), Path(tmp) / f"peak-{n}")
            if rc != 0:
                raise SystemExit(f"harness judge over {n} episodes failed ({rc}): {text[-2000:]}")
            last = json.loads((run / "judgements" / "scale" / "manifest.json").read_text(encoding="utf-8"))["passes"][-1]
            calls = last["usage"]["calls"]
            ideal = calls * args.latency / args.concurrency
            found[n] = {"peak_rss_mb": rss / 1024, "wall_s": last["wall_s"], "calls": calls, "ideal_s": ideal,
                        "judged": last["judged"], "most_in_flight": server.stats.get("max_active")}
            print(f"{n} episodes x {args.steps} steps: judged {last['judged']}, {calls} calls in {last['wall_s']:.1f}s "
                  f"(ideal {ideal:.1f}s, most in flight {found[n]['most_in_flight']}), peak RSS {rss / 1024:.0f} MB",
                  flush=True)
            if last["judged"] != n:
                raise SystemExit(f"harness judge judged {last['judged']} of {n} episodes: {text[-2000:]}")
    small, large = sizes[0], sizes[-1]
    k, lat = args.concurrency, args.latency
    rows = [
        row(f"{judge} {small} episodes: peak RSS of `harness judge` (MB)", found[small]["peak_rss_mb"]),
        row(f"{judge} {large} episodes: peak RSS of `harness judge` (MB)", found[large]["peak_rss_mb"]),
        row(f"peak RSS {large} / {small} episodes", found[large]["peak_rss_mb"] / found[small]["peak_rss_mb"], "<= 1.1"),
        row(f"{judge} {small} episodes, K={k}, L={lat}s: wall / ideal", found[small]["wall_s"] / found[small]["ideal_s"]),
        row(f"{judge} {large} episodes, K={k}, L={lat}s: wall / ideal", found[large]["wall_s"] / found[large]["ideal_s"],
            "<= 1.1"),
    ]
    out = Path(args.out if args.out != DEFAULT_OUT else bench_dir() / "judges_scale.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "detail": {str(n): v for n, v in found.items()}, "steps": args.steps,
                               "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}, indent=1)
                   + "\n", encoding="utf-8")
    for r in rows:
        print(f"  {r['name']}: {r['value']}" + (f" (target {r['target']}: {'holds' if r['holds'] else 'NO'})"
                                                 if r["target"] else ""))
    print(f"written: {out}")
    return 0 if all(r["holds"] is not False for r in rows) else 1


DEFAULT_OUT = "bench/judges_offline.json"  # (in bench_dir(): CRATE_BENCH_DIR, else bench/)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=1.0, help="seconds the server waits before each reply (L)")
    ap.add_argument("--judge", choices=["crate", "count"], default="crate")
    ap.add_argument("--size", default="270x600", help="screenshot size WxH")
    ap.add_argument("--episodes-in-flight", type=int, default=None)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--scale", metavar="N1,N2", help="judging at scale instead: `harness judge` over runs of N1 and "
                    "N2 episodes, each in its own process (peak memory, wall / ideal); e.g. 200,2000")
    args = ap.parse_args()
    if args.judge == "count":
        import tests.offline_judge.count_judge as cj
        judge = cj.NAME
    else:
        judge = "crate"
    w, h = (int(v) for v in args.size.lower().split("x"))
    if args.scale:
        return scale(args, judge, (w, h))
    with tempfile.TemporaryDirectory(prefix="bench-judges-") as tmp:
        run = Path(tmp) / "run"
        t0 = time.monotonic()
        build_run(run, args.episodes, args.steps, (w, h))
        build_s = time.monotonic() - t0
        cache = str(Path(tmp) / "evidence-cache.jsonl") if judge == "crate" else None
        p1 = one_pass(run, judge, args.latency, args.concurrency, cache, "pass1", args.episodes_in_flight)
        p2 = None
        if judge == "crate":
            from judges.evidence import _shared

            _shared.clear()  # what this process remembers of pass 1: a new process would not have it
            p2 = one_pass(run, judge, args.latency, args.concurrency, cache, "pass2", args.episodes_in_flight,
                          port=p1["port"])
            p2["fraction_of_pass1"] = round(p2["wall_s"] / p1["wall_s"], 4)
    result = {
        "bench": "judges_offline", "judge": judge, "episodes": args.episodes, "steps": args.steps,
        "concurrency": args.concurrency, "latency_s": args.latency, "screenshot": [w, h],
        "ideal": "calls x latency / concurrency", "target_ratio": 1.15,
        "pass1": p1, "pass2_cached": p2, "build_run_s": round(build_s, 2),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
    }
    out = bench_dir() / "judges_offline.json" if args.out == DEFAULT_OUT else Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"judge {judge}: {args.episodes} episodes x {args.steps} steps, concurrency {args.concurrency}, "
          f"latency {args.latency}s per call")
    print(f"pass 1: {p1['calls']} calls in {p1['wall_s']:.2f}s; ideal {p1['ideal_s']:.2f}s; "
          f"wall/ideal = {p1['ratio']:.3f} (target <= 1.15); most calls in flight {p1['max_calls_in_flight']}")
    if p2 is not None:
        print(f"pass 2 (step-evidence cache): {p2['calls']} calls in {p2['wall_s']:.2f}s = "
              f"{p2['fraction_of_pass1']:.1%} of pass 1 (ideal for its calls {p2['ideal_s']:.2f}s)")
    print(f"written: {out}")
    ok = p1["ratio"] is not None and p1["ratio"] <= 1.15 and p1["judge_errors"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
