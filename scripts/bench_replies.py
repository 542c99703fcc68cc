"""Benchmark: reading untrusted model text grows with the text, never with its square.

A model's reply is untrusted: a megabyte of reasoning before the JSON, a megabyte of ``{``, quotes
that never close, brackets nested a hundred thousand deep. Two readers meet it first:

- ``harness.client.json_reply.parse_json_reply``, the verdict grammar the judges' and monitors' replies are read by;
- each agent family's output parser (``agents.parsing.PARSERS``), which reads an action from it.

Each shape is read at a small size n (``--small``, default 125,000 characters) and at 8n (a
megabyte by default); the row is time(8n) / time(n), the best of ``--repeat`` reads each. A reader
that is linear gives about 8, one that rescans from every brace gives about 64: target <= 16
(a big read under 10 ms holds whatever its ratio: too short to time, too fast to be square-law).
The seconds at 8n are in the detail. This replaces the unit tests' old "under 5 s" clocks (a speed
target belongs here); those tests still prove every shape is refused or read right.

Writes bench/replies.json: ``{"rows": [{"name", "value", "target", "holds"}], "detail": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench_rows import bench_dir  # noqa: E402  (scripts/, beside this file)

import agents  # noqa: E402,F401  (registers every agent family's parser)
from agents.parsing import PARSERS, ParseError  # noqa: E402
from harness.client.json_reply import ReplyError, parse_json_reply  # noqa: E402

TARGET = 16.0
FAST_S = 0.01
ANSWER = '{"success": true, "reason": "done"}'

# shape name -> text of about n characters
REPLY_SHAPES: dict[str, Callable[[int], str]] = {
    "reasoning then fenced JSON": lambda n: "<think>" + "Let me think. " * (n // 14) + "</think>```json\n" + ANSWER
                                            + "\n```",
    "prose then JSON (refused)": lambda n: "Let me think. " * (n // 14) + ANSWER,
    "no JSON at all": lambda n: "x" * n,
    "only opening braces": lambda n: "{" * n,
    "only fences": lambda n: "```" * (n // 3),
    "a string that never closes": lambda n: '{"a": "' + "\\" * n,
    "brackets nested deep": lambda n: "[" * (n // 10) + "]" * (n // 10),
    "objects nested deep": lambda n: '{"a": ' * (n // 12) + "1" + "}" * (n // 12),
}
ACTION_SHAPES: dict[str, Callable[[int], str]] = {
    "open parentheses": lambda n: "Action: " + "(" * n,
    "a box of many numbers": lambda n: "Action: click(start_box='(" + "1," * (n // 2) + "1)')",
    "opening braces": lambda n: "{" * n,
    "a tool call nested deep": lambda n: '<tool_call>{"name": "mobile_use", "arguments": ' + "[" * (n // 20)
                                         + "]" * (n // 20) + "}</tool_call>",
    "no action at all": lambda n: "z" * n,
}


def best_of(read: Callable[[str], object], text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            read(text)
        except (ReplyError, ParseError):
            pass  # refusing is the expected answer for most shapes; only the time is measured
        best = min(best, time.perf_counter() - t0)
    return best


def measure(label: str, read: Callable[[str], object], shape: str, make: Callable[[int], str], n: int,
            repeat: int) -> dict:
    small_text, big_text = make(n), make(8 * n)
    small, big = best_of(read, small_text, repeat), best_of(read, big_text, repeat)
    ratio = big / max(small, 1e-6)
    return {"reader": label, "shape": shape, "small_chars": len(small_text), "big_chars": len(big_text),
            "small_s": round(small, 5), "big_s": round(big, 5), "ratio": round(ratio, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=125_000, help="characters of the small text (the big one is 8x)")
    ap.add_argument("--repeat", type=int, default=3, help="reads of each text; the best one counts")
    args = ap.parse_args()
    if args.small < 1000 or args.repeat < 1:
        ap.error("--small must be >= 1000 and --repeat >= 1")
    detail = [measure("reply JSON read", lambda t: parse_json_reply(t, required=("success",)), shape, make,
                      args.small, args.repeat) for shape, make in REPLY_SHAPES.items()]
    for family in sorted(PARSERS):
        parser = PARSERS[family]
        detail += [measure(f"{family} parser", lambda t, p=parser: p.parse(t, (1080, 2400)), shape, make,
                           args.small, args.repeat) for shape, make in ACTION_SHAPES.items()]
    # a read of the big text under FAST_S holds whatever its ratio: far too fast to be a square-law
    # scan of a megabyte, and too short for the ratio of two such clocks to mean anything
    rows = [{"name": f"{d['reader']}: {d['shape']}, time at 8n / at n", "value": d["ratio"],
             "target": f"<= {TARGET:g}", "holds": d["ratio"] <= TARGET or d["big_s"] < FAST_S} for d in detail]
    out = bench_dir() / "replies.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "detail": detail}, indent=1) + "\n", encoding="utf-8")
    width = max(len(r["name"]) for r in rows)
    for r, d in zip(rows, detail):
        print(f"{r['name']:<{width}}  {r['value']:>7.2f}  {r['target']}  {'holds' if r['holds'] else 'FAILS'}"
              f"  ({d['big_s']:.3f} s at {d['big_chars']:,} chars)")
    failing = [r for r in rows if not r["holds"]]
    print(f"{len(rows) - len(failing)} of {len(rows)} hold; wrote {out}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
