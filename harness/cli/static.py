"""``harness static``: static evaluation of predicted actions (``score``), and asking an agent for
every step of a dataset first (``run``)."""

from __future__ import annotations

import argparse
import sys

from harness.cli.options import size_arg, write_or_print
from harness.core.user_error import UserError



def _profiles(values: list[str] | None) -> list[str]:
    from harness.report.static_eval import PROFILES

    names = [k.strip() for v in (values or ["all"]) for k in v.split(",") if k.strip()]
    if "all" in names:
        return list(PROFILES)
    bad = [n for n in names if n not in PROFILES]
    if bad:
        raise UserError(f"--profile: unknown profile(s) {', '.join(bad)} (choose from {', '.join(PROFILES)} or all)")
    return names


def _print_static(reports: list, args: argparse.Namespace) -> None:
    from harness.report.static_table import render

    fmt = "json" if args.json else (getattr(args, "format", None) or "md")
    out = getattr(args, "out_file", None)
    text = render(reports, fmt)
    write_or_print(text if text.endswith("\n") else text + "\n", out, "static report")


def cmd_static_score(args: argparse.Namespace) -> int:
    from harness.importers.androidcontrol import DatasetError
    from harness.report.static_eval import StaticEvalError, score_files

    if not args.predictions and not args.ground_truth:
        raise UserError("static score: pass --predictions FILE (or --ground-truth to score the dataset against itself)")
    try:
        reports = score_files(args.dataset, None if args.ground_truth else args.predictions, _profiles(args.profile),
                              screen=args.screen)
    except (DatasetError, StaticEvalError) as e:
        raise UserError(str(e)) from None
    _print_static(reports, args)
    return 0


def cmd_static_run(args: argparse.Namespace) -> int:
    import agents  # noqa: F401  (registers agents)
    from harness.importers.androidcontrol import DatasetError
    from harness.core.registry import AGENTS, RegistryError, parse_options
    from harness.report.static_eval import StaticEvalError, score_files
    from harness.run.static_run import StaticRunError, check_screenshots, run_static
    from harness.importers.androidcontrol import load_dataset
    from harness.run.options import RunError
    from pathlib import Path

    profiles = _profiles(args.profile)
    try:
        episodes = load_dataset(args.dataset)  # refuse a dataset without screenshots before building the agent
        check_screenshots(episodes[: args.limit] if args.limit else episodes, Path(args.dataset),
                          Path(args.images) if args.images else None)
        opts = parse_options(args.agent_opt, "--agent-opt")
        try:
            from harness.run.options import with_model
            from harness.cli.run_parts import model_configs
        except ImportError:  # pragma: no cover - older run_command without model endpoints
            pass
        else:
            opts = with_model(AGENTS, args.agent, opts, model_configs(args)["agent"], "--model-base-url URL --model NAME")
        agent = AGENTS.build(args.agent, opts)
        out = args.out or f"predictions-{args.agent}-{args.level}.jsonl"
        res = run_static(args.dataset, agent, out, level=args.level, images=args.images, limit=args.limit, seed=args.seed)
        print(f"{res.steps} steps -> {res.predictions} (history: {res.history_mode}; invalid outputs: {res.invalid}; "
              f"agent errors: {res.agent_errors})", file=sys.stderr)
        reports = score_files(args.dataset, res.predictions, profiles, screen=args.screen, limit=args.limit)
    except (DatasetError, StaticEvalError, StaticRunError, RegistryError, RunError) as e:
        raise UserError(str(e)) from None
    _print_static(reports, args)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("static", help="static evaluation of predicted actions (AndroidControl JSONL)").add_subparsers(
        dest="static_cmd", required=True)
    sc = st.add_parser("score", help="score predictions against ground-truth episodes")
    sc.add_argument("--dataset", required=True, help="AndroidControl-shaped JSONL (e.g. androidcontrol_test_300.jsonl)")
    sc.add_argument("--predictions", help='JSONL: {"episode": i, "step": j, "action": {...}} per line')
    sc.add_argument("--ground-truth", action="store_true", help="score the dataset's own actions (sanity check)")
    sc.add_argument("--profile", action="append",
                    help="a profile (aitw, androidcontrol, guiodyssey, androidlens, uis1-pipeline, infigui-r1, "
                         "agentcpm-gui, os-atlas, ui-r1; comma-separated or repeated) or all (default all)")
    sc.add_argument("--screen", type=size_arg, default=(1080, 2400), help="screen size when the dataset has none (default 1080x2400)")
    sc.add_argument("--format", choices=["md", "json", "html"], default="md",
                    help="md (printed table), json, or html (a standalone page)")
    sc.add_argument("--out", dest="out_file", help="write to this file instead of printing")
    sc.add_argument("--json", action="store_true", help="print JSON (same as --format json)")
    sc.set_defaults(run=cmd_static_score)
    sr = st.add_parser("run", help="ask an agent for every step (ground-truth history), then score")
    sr.add_argument("--dataset", required=True, help="AndroidControl-shaped JSONL whose screenshots exist")
    sr.add_argument("--agent", required=True, help="agent name (see `harness agents`)")
    sr.add_argument("--agent-opt", action="append", metavar="KEY=VALUE", help="agent option (repeatable)")
    sr.add_argument("--level", choices=["high", "low"], default="high", help="goal only, or goal + the step's instruction")
    sr.add_argument("--images", help="folder holding the screenshots (by dataset path or by file name)")
    sr.add_argument("--limit", type=int, help="only the first N episodes")
    sr.add_argument("--out", help="predictions file (default predictions-AGENT-LEVEL.jsonl)")
    sr.add_argument("--profile", action="append", help="profiles to score with (default all)")
    sr.add_argument("--screen", type=size_arg, default=(1080, 2400), help="screen size when neither dataset nor image gives one")
    sr.add_argument("--seed", type=int, default=0)
    sr.add_argument("--format", choices=["md", "json", "html"], default="md",
                    help="the scores as md (printed table), json, or html (a standalone page)")
    sr.add_argument("--json", action="store_true", help="print JSON (same as --format json)")
    try:
        from harness.cli.run_parts import add_model_arguments
    except ImportError:  # pragma: no cover - older run_command without model endpoints
        pass
    else:
        add_model_arguments(sr)
    sr.set_defaults(run=cmd_static_run)
