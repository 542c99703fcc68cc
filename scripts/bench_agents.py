"""Benchmark: what the agent layer itself costs per step, model time excluded.

Each agent steps through distinct screens of an in-process simulated phone (launcher and app
pages) against a local stub model that answers at once. Per step we read the agent's own
``overhead_ms`` record: prompt building, hierarchy parsing and Set-of-Mark drawing (M3A), image
encoding (resize + PNG/JPEG + base64), output parsing; and the request round trip to the stub
(client-side JSON serialisation of the request with its images, loopback HTTP, the stub's reply),
which is a floor for any real endpoint. Every step sees a screen it has not seen before (the
encoder's cache is cleared per agent), while earlier screenshots sent again as history come from
the cache, as in a real run.

Writes bench/agents.json and prints a table (milliseconds, median over the steps).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import agents  # noqa: E402,F401
from harness import model as model_mod  # noqa: E402
from harness.episode import EpisodeContext, Observation  # noqa: E402
from harness.model import ModelConfig  # noqa: E402
from harness.registry import AGENTS  # noqa: E402
from harness.sim.phone import SimPhone  # noqa: E402
from harness.tasks import parse_task  # noqa: E402
from tests.fakes.model_server import Reply, ScriptedModelServer  # noqa: E402

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


def screens(size: tuple[int, int]) -> list[tuple[bytes, str]]:
    """Distinct (screenshot, hierarchy) pairs: the launcher and each app's first page."""
    phone = SimPhone(*size)
    phone.reset()
    out = [(phone.screencap_png(), phone.hierarchy_xml())]
    for app in APPS:
        phone.keyevent("HOME")
        pkg = phone.resolve_app(app)
        if pkg:
            phone.launch(pkg)
            out.append((phone.screencap_png(), phone.hierarchy_xml()))
    return out


def bench(label: str, name: str, opts: dict, size: tuple[int, int], shots: list[tuple[bytes, str]], steps: int) -> dict:
    with ScriptedModelServer([Reply(REPLIES[name])]) as srv:
        agent = AGENTS.build(name, {**opts, "model": ModelConfig(base_url=srv.base_url, model="stub", max_retries=0)})
        task = parse_task({"id": "bench", "instruction": "Go to the home screen.", "reference_steps": steps,
                           "setup": {"sim": {"preset": "default"}}})
        agent.reset(EpisodeContext(task=task, screen_size=size, seed=0, device_serial="bench"))
        rows = []
        model_mod.clear_encode_cache()
        for i in range(steps):
            png, xml = shots[i % len(shots)]
            obs = Observation(step=i + 1, screenshot=png, screen_size=size, hierarchy=lambda xml=xml: xml,
                              instruction=task.instruction, language="en")
            t0 = time.perf_counter()
            out = agent.step(obs)
            wall = (time.perf_counter() - t0) * 1000
            ex = out.extras
            rt = sum(c["latency_s"] for c in ex["calls"]) * 1000
            rows.append({"wall": wall, "round_trip": rt, "agent_layer": wall - rt, **ex["overhead_ms"],
                         "bytes_sent": ex["bytes_sent"], "images": len(ex["images"])})
    med = {k: round(statistics.median(r.get(k, 0.0) for r in rows), 1)
           for k in ("agent_layer", "prompt", "hierarchy", "som", "summary_prompt", "encode", "parse", "round_trip", "wall")}
    med["bytes_sent_kb"] = round(statistics.median(r["bytes_sent"] for r in rows) / 1024)
    med["images"] = max(r["images"] for r in rows)
    return {"agent": label, "size": f"{size[0]}x{size[1]}", **med}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=9, help="steps per agent and size (9 distinct screens)")
    ap.add_argument("--sizes", default="1080x2400,1440x3120,720x1600")
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    results = []
    cols = ("agent_layer", "prompt", "hierarchy", "som", "encode", "parse", "round_trip", "bytes_sent_kb", "images")
    print(f"agent layer per step, ms (median of {args.steps} steps; model time excluded, round_trip = local stub)")
    print(f"  {'agent':<18}{'size':<11}" + "".join(f"{c:>14}" for c in cols))
    for size in sizes:
        shots = screens(size)
        for label, name, opts in CONFIGS:
            r = bench(label, name, opts, size, shots, args.steps)
            results.append(r)
            print(f"  {label:<18}{r['size']:<11}" + "".join(f"{r[c]:>14}" for c in cols), flush=True)
    (ROOT / "bench").mkdir(exist_ok=True)
    (ROOT / "bench" / "agents.json").write_text(json.dumps(results, indent=1))
    print("wrote bench/agents.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
