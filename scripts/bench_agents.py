"""Benchmark: what the agent layer itself costs per step, model and device time excluded.

Each agent steps through a simulated phone in its own process over the real adb server, as the
runner drives it: the bench taps the phone to a new screen (apps' first pages and the launcher in
turn), the device settles on its cheapest frames (harness.device.frame_sources), and the agent is
asked for its step against a local stub model that answers at once. Two ways, in the same run:

  prepared  as the runner does it: the agent's ``prepare_pixels`` gets each candidate frame's
            pixels as soon as they arrive (before the frame's PNG is encoded) and ``prepare`` the
            candidate observation (encoding starts while the device confirms the frame); the step's
            wall time is what remains on the critical path
  inline    no ``prepare``: the step does all of its image work itself

Only steps on a screen the bench has not shown before count (the launcher between apps is seen
again and its encodings are in the cache, which is not the cost of a new screenshot); the column
``counted`` says how many. Per step: the agent step's wall time minus the model round trip its
client measured (request serialisation, loopback HTTP, the stub's reply: a floor for any endpoint)
is the agent layer. The hierarchy is fetched by the bench when the new screen shows (device time,
not the agent's) and handed over in memory. ``settle`` is the device's settling wall time that step
(the prepared work runs inside it: ``settle_and_agent``, settle plus agent layer, says whether it
only moved there or was hidden behind the device; on the simulated phone device and agent share the
same two cores). Earlier screenshots sent again as history come from the encode cache, as in a run.

Writes bench/agents.json: rows ``{"name", "value", "target", "holds"}`` (target: <= 30 ms per step
at 1080x2400 for every family) and the per-part medians; prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)
sys.path.insert(0, str(ROOT / "scripts"))

import agents  # noqa: E402,F401
from bench_all import Lab, row  # noqa: E402
from harness.client import images as model_mod  # noqa: E402
from harness.core.actions import Key, OpenApp  # noqa: E402
from harness.core.episode import CandidatePixels, EpisodeContext, Observation, PixelPreparingAgent  # noqa: E402
from harness.client.config import ModelConfig  # noqa: E402
from harness.core.registry import AGENTS  # noqa: E402
from harness.core.tasks import parse_task  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402

TARGET_MS = 30.0
REPLIES = {
    "uitars": "Thought: go home.\nAction: press_home()",
    "uitars-v1": "Thought: go home.\nAction: press_home()",
    "doubao": "Thought: go home.\nAction: press_home()",
    "qwen": '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Home"}}\n</tool_call>',
    "vlm": "Thought: go home.\nAction: press_home()",
    "m3a": 'Reason: go home.\nAction: {"action_type": "navigate_home"}',
}
CONFIGS = [
    ("uitars", "uitars", {}),
    ("uitars-v1", "uitars-v1", {}),
    ("doubao", "doubao", {}),
    ("qwen2.5", "qwen", {"version": "2.5"}),
    ("qwen3", "qwen", {"version": "3"}),
    ("vlm", "vlm", {}),
    ("m3a", "m3a", {}),
    ("m3a (no summary)", "m3a", {"summarize": False}),
]
APPS = ["Settings", "Contacts", "Messages", "Clock", "Notes", "Files", "Wallet", "Shop"]
PARTS = ("agent_layer", "encode", "screen", "prompt", "parse", "round_trip", "settle", "settle_and_agent")


def bench(lab: Lab, dev, label: str, name: str, opts: dict, steps: int, prepared: bool) -> dict:
    size = dev.screen_size()
    with ScriptedModelServer([Reply(REPLIES[name])]) as srv:
        agent = AGENTS.build(name, {**opts, "model": ModelConfig(base_url=srv.base_url, model="stub", max_retries=0)})
        task = parse_task({"id": "bench", "instruction": "Go to the home screen.", "reference_steps": steps,
                           "setup": {"sim": {"preset": "default"}}})
        agent.reset(EpisodeContext(task=task, screen_size=size, seed=0, device_serial=dev.serial))
        model_mod.clear_encode_cache()  # every step sees a screen this agent has not encoded yet
        xml: dict[int, str] = {}

        def observe(step: int, shot: bytes) -> Observation:
            return Observation(step=step, screenshot=shot, screen_size=size, hierarchy=lambda: xml[step],
                               instruction=task.instruction, language="en")

        rows = []
        shot = dev.screenshot()
        # only steps on a screen not seen before in this bench count: a screen seen again (the
        # launcher between apps) is in the encode cache, as it would be in a run, which is not the
        # cost of a new screenshot (these hits made the median of 10 steps swing between 2 and 38 ms)
        seen = {hashlib.sha256(shot).digest()}
        for i in range(steps):
            # a new screen: the next app's first page, or the launcher (device time, not measured)
            dev.execute(OpenApp(app=APPS[(i // 2) % len(APPS)]) if i % 2 == 0 else Key(key="home"))
            # the simulated phone shows the new screen at once: its dump (device time) is read here,
            # before settling, and handed to the agent in memory (M3A reads it)
            xml[i + 1] = dev.hierarchy()
            on_frame = (lambda s, k=i + 1: agent.prepare(observe(k, s))) if prepared else None
            on_pixels = (lambda p, k=i + 1: agent.prepare_pixels(CandidatePixels(k, p, size, lambda k=k: xml[k])))\
                if prepared and isinstance(agent, PixelPreparingAgent) else None
            t_settle = time.perf_counter()
            shot, _ = dev.settle(shot, on_frame=on_frame, on_pixels=on_pixels)
            settle = (time.perf_counter() - t_settle) * 1000
            t0 = time.perf_counter()
            out = agent.step(observe(i + 1, shot))
            wall = (time.perf_counter() - t0) * 1000
            ex = out.extras
            digest = hashlib.sha256(shot).digest()
            if digest in seen:
                continue
            seen.add(digest)
            rt = sum(c["latency_s"] for c in ex["calls"]) * 1000
            rows.append({"wall": wall, "round_trip": rt, "agent_layer": wall - rt, "settle": settle,
                         "settle_and_agent": settle + wall - rt, **ex["overhead_ms"],
                         "bytes_sent": ex["bytes_sent"], "images": len(ex["images"])})
    med = {k: round(statistics.median(r.get(k, 0.0) for r in rows), 1) for k in (*PARTS, "wall")}
    med["bytes_sent_kb"] = round(statistics.median(r["bytes_sent"] for r in rows) / 1024)
    med["images"] = max(r["images"] for r in rows)
    med["counted"] = len(rows)
    return {"agent": label, "size": f"{size[0]}x{size[1]}", "mode": "prepared" if prepared else "inline", **med}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=16, help="steps per agent, size and mode (those on a new screen count)")
    ap.add_argument("--sizes", default="1080x2400", help="screen sizes, e.g. 1080x2400,1440x3120,720x1600")
    ap.add_argument("--agents", help="only these labels (comma-separated)")
    args = ap.parse_args()
    only = set(args.agents.split(",")) if args.agents else None
    results, out_rows = [], []
    cols = (*PARTS, "bytes_sent_kb", "images", "counted")
    print(f"agent layer per step, ms (median of the steps on a new screen, of {args.steps}; model and device time excluded)")
    print(f"  {'agent':<18}{'size':<11}{'mode':<10}" + "".join(f"{c:>14}" for c in cols))
    lab = Lab()
    try:
        for size in args.sizes.split(","):
            dev = lab.device(lab.phone(size))
            frames = dev.frame_choice()
            print(f"  settling on {frames['chosen']} frames (estimated per step: {frames['per_step_ms']})")
            for label, name, opts in CONFIGS:
                if only and label not in only:
                    continue
                for prepared in (True, False):  # interleaved per agent: the same conditions for both
                    r = bench(lab, dev, label, name, opts, args.steps, prepared)
                    results.append(r)
                    print(f"  {label:<18}{r['size']:<11}{r['mode']:<10}" + "".join(f"{r[c]:>14}" for c in cols),
                          flush=True)
                p, i = results[-2], results[-1]
                target = f"<= {TARGET_MS:g}" if size == "1080x2400" else None
                out_rows += [
                    row(f"{label} at {size}: agent layer per step, no model time (ms)", p["agent_layer"], target),
                    row(f"{label} at {size}: the same without prepare (ms)", i["agent_layer"]),
                    row(f"{label} at {size}: request bytes per step (KB, {p['images']} images)", p["bytes_sent_kb"]),
                ]
    finally:
        lab.close()
    (bench_dir() / "agents.json").write_text(json.dumps({"rows": out_rows, "detail": results}, indent=1))
    print("wrote bench/agents.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
