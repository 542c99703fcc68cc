"""``harness agents``: the registered agents and their options, and ``agents parse``: raw model
outputs read by a family's parser into unified actions."""

from __future__ import annotations

import argparse
import json
import sys

from harness.cli.options import size_arg
from harness.core.user_error import UserError


def cmd_agents(args: argparse.Namespace) -> int:
    import agents  # noqa: F401
    from harness.core.registry import AGENTS

    info = AGENTS.describe()
    if args.json:
        print(json.dumps(info, indent=1, default=str))
        return 0
    for a in info:
        print(f"{a['name']}: {a['help']}")
        for o in a["options"]:
            print(f"    {o['name']} = {o['default']!r}  {o['help']}")
    return 0


def cmd_agents_parse(args: argparse.Namespace) -> int:
    """Raw model outputs (one JSON string per line, or a JSON object with a "text" field, or an
    OpenAI assistant message with "content" and "tool_calls") -> the unified action per line in
    device pixels (a list when one output is two device actions), or {"error": ...}: for checking a
    model's output format against a family's parser."""
    import agents  # noqa: F401  (registers the families' parsers)
    from agents.parsing import PARSERS, read_reply, with_tool_calls
    from harness.core.registry import RegistryError, parse_options

    entry = PARSERS.get(args.agent)
    if entry is None:
        raise UserError(f"no output parser for agent {args.agent!r} (parsers: {', '.join(sorted(PARSERS))})")
    try:
        opts = parse_options(args.opt, "--opt")
    except RegistryError as e:
        raise UserError(str(e)) from None
    unknown = sorted(set(opts) - set(entry.options))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in entry.options.items())
        raise UserError(f"agent {args.agent!r} has no parse option {', '.join(unknown)} (options: {known})")
    if args.hierarchy:
        if "hierarchy_xml" not in entry.options:
            raise UserError(f"--hierarchy applies to m3a, not {args.agent!r}")
        try:
            with open(args.hierarchy, encoding="utf-8") as f:
                opts["hierarchy_xml"] = f.read()
        except OSError as e:
            raise UserError(f"{args.hierarchy}: {e.strerror}") from None
    try:
        src = open(args.file, encoding="utf-8") if args.file and args.file != "-" else sys.stdin
    except OSError as e:
        raise UserError(f"{args.file}: {e.strerror}") from None
    with src:
        for n, line in enumerate(src, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                print(json.dumps({"error": f"line {n} is not JSON ({e.msg}); give one JSON string per line"}))
                continue
            text = item.get("text", item.get("content")) if isinstance(item, dict) else item
            calls = item.get("tool_calls") if isinstance(item, dict) else None
            if calls:  # an OpenAI message whose tool calls the server parsed out of the text
                if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                    print(json.dumps({"error": f"line {n}: tool_calls must be a list of objects"}))
                    continue
                text = with_tool_calls(text if isinstance(text, str) else "", calls)
            if not isinstance(text, str):
                print(json.dumps({"error": f"line {n}: expected a JSON string or an object with a \"text\" string"}))
                continue
            try:
                parsed, error = read_reply(lambda t: entry.parse(t, args.size, **opts), text)
            except Exception as e:  # a parser bug must not stop the listing; say what it was
                print(json.dumps({"error": f"parser failure: {type(e).__name__}: {e}"}, ensure_ascii=False))
                continue
            if parsed is None:
                print(json.dumps({"error": str(error)}, ensure_ascii=False))
                continue
            if args.details:
                out = parsed.to_json()
            else:
                acts = parsed.to_json()["actions"]
                out = acts[0] if len(acts) == 1 else acts
            print(json.dumps(out, ensure_ascii=False), flush=True)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    ag = sub.add_parser("agents", help="list agents and their options (or: agents parse)")
    ag.add_argument("--json", action="store_true")
    ag.set_defaults(run=cmd_agents)
    ag_sub = ag.add_subparsers(dest="agents_cmd", required=False)
    ap = ag_sub.add_parser("parse", help="parse raw model outputs (one JSON string per line) into unified actions")
    ap.add_argument("file", nargs="?", help="file of outputs (default stdin)")
    ap.add_argument("--agent", required=True, help="uitars, uitars-v1, doubao, m3a, qwen or vlm")
    ap.add_argument("--size", type=size_arg, required=True, help="device screen WIDTHxHEIGHT, e.g. 1080x2400")
    ap.add_argument("--opt", action="append", metavar="KEY=VALUE",
                    help="parser option, e.g. coords=thousand, version=3 (repeatable)")
    ap.add_argument("--hierarchy", help="m3a: the uiautomator dump (XML) the element indexes refer to")
    ap.add_argument("--details", action="store_true", help="print the raw action, thought and repair notes too")
    ap.set_defaults(run=cmd_agents_parse)
