"""``harness judge`` on the command line: its flags, the command, and the summary it prints."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness.client.config import MAX_REPLY_BYTES
from harness.offline_judge.errors import OfflineJudgeError
from harness.offline_judge.heap import limit_malloc_arenas
from harness.offline_judge.passes import OfflineReport, judge_runs, prepare_judges
from harness.offline_judge.targets import check_writable, read_episodes
from harness.core.user_error import UserError
from harness.core.verdicts import JUDGEMENTS_DIR


EXIT_ALL_FAILED = 4  # every verdict of the pass was a judge_error (as `harness run` exits when no episode could play)


def every_verdict_failed(report: OfflineReport) -> bool:
    """The pass judged episodes and not one verdict came back true or false."""
    counts = report.verdicts.values()
    return report.judged > 0 and sum(c["judge_error"] for c in counts) > 0 and \
        not any(c["true"] or c["false"] for c in counts)


def print_summary(report: OfflineReport, file: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=140)
    console.print(f"judgement set [bold]{report.set_id}[/bold]: {report.judged} episode(s) judged in this pass")
    table = Table()
    for col in ("judge", "true", "false", "judge_error"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for name in sorted(report.verdicts):
        c = report.verdicts[name]
        table.add_row(name, str(c["true"]), str(c["false"]), str(c["judge_error"]))
    if report.verdicts:
        console.print(table)
    u = report.usage or {}
    calls = u.get("calls", 0)
    rate = f", {calls / report.wall_s:.1f} calls/s" if report.wall_s > 0 and calls else ""
    skipped = (f"skipped; {report.skipped_errors} of them with a judge_error: judge those again with --retry-errors"
               if report.skipped_errors else "skipped")
    console.print(f"episodes: {report.total} selected, {report.judged} judged, {report.already_judged} already judged "
                  f"({skipped}){', ' + str(report.retried) + ' with judge_error judged again' if report.retried else ''}"
                  + "".join(f", {n} not judged ({why})" for why, n in report.not_judged.items()), highlight=False)
    console.print(f"cost: {calls} model call(s) ({u.get('failed_calls', 0)} failed), "
                  f"{u.get('prompt_tokens', 0)} prompt + {u.get('completion_tokens', 0)} completion tokens, "
                  f"wall time {report.wall_s:.1f}s{rate}, concurrency {report.concurrency}")
    for n, why in sorted(report.errors.values(), key=lambda x: -x[0])[:5]:  # each kind of reason once, commonest first
        console.print(f"[red]judge_error[/red] x{n}: {escape(why)}", highlight=False)
    if len(report.errors) > 5:
        console.print(f"... and {len(report.errors) - 5} other reason(s) (each line's details.JUDGE.error)")
    if every_verdict_failed(report):
        console.print("[red]every verdict of this pass is a judge_error: nothing was judged[/red] (the reasons are "
                      "above); fix the cause, then run the same command with --retry-errors", highlight=False)
    for w in report.warnings[:10]:
        console.print(f"[yellow]warning: {w}[/yellow]")
    if len(report.warnings) > 10:
        console.print(f"[yellow]... and {len(report.warnings) - 10} more warning(s)[/yellow]")
    if report.interrupted:
        console.print("[yellow]interrupted: run the same command again to judge the rest[/yellow]")
    for o in report.outputs:
        console.print(f"verdicts: {o}")


def add_judge_arguments(p: Any) -> None:
    """Flags of ``harness judge`` (the endpoint flags also answer to their ``--judge-*`` names)."""
    from harness.client.keys import key_rule_text

    p.add_argument("paths", nargs="+", metavar="RUN_OR_EPISODE", help="run folders, or episode folders RUN/episodes/ID")
    p.add_argument("--judge", action="append", required=True, metavar="NAMES",
                   help="judges, comma-separated or repeated (e.g. crate,crate-s,holistic,milestones)")
    p.add_argument("--judge-opt", action="append", metavar="KEY=VALUE", help="judge option (repeatable)")
    p.add_argument("--concurrency", type=int, default=8, metavar="K",
                   help="most model calls in flight at once (default 8)")
    p.add_argument("--episodes-in-flight", type=int, default=None, metavar="N",
                   help="episodes judged at once (default 2 x concurrency)")
    p.add_argument("--fresh-judges", action="store_true",
                   help="build new judge objects for every episode (default: each worker starts its judges again)")
    p.add_argument("--judge-set", default=None, metavar="NAME",
                   help="name of the judgement set (default: the judge model's name, MODEL-2... when a set of "
                   "that name holds other judge settings); "
                   "verdicts go to RUN/judgements/NAME/results.jsonl")
    p.add_argument("--suite", default=None, metavar="PATH",
                   help="task file or folder to take tasks from (default: the run's own)")
    p.add_argument("--cache", default=None, metavar="PATH", help="step-evidence cache file for judges that have one "
                   "(default RUN/judgements/evidence-cache.jsonl of the first run)")
    p.add_argument("--no-cache", action="store_true", help="do not give judges a step-evidence cache file")
    p.add_argument("--retry-errors", action="store_true", help="judge again episodes whose line has a judge_error")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    g = p.add_argument_group("judge model endpoint (OpenAI-compatible: vLLM, SGLang, OpenAI, DashScope)")
    g.add_argument("--model-base-url", "--judge-base-url", dest="judge_base_url", metavar="URL",
                   help="e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", "--judge-model", dest="judge_model", metavar="NAME",
                   help="model name as the server knows it")
    g.add_argument("--api-key-env", "--judge-api-key-env", dest="judge_api_key_env", default=None,
                   metavar="VAR",
                   help="environment variable holding this endpoint's API key, sent to --model-base-url and to no "
                        f"other endpoint (set but empty or unset: an error); without it: {key_rule_text()}")
    g.add_argument("--temperature", "--judge-temperature", dest="judge_temperature", type=float, default=0.0,
                   metavar="T")
    g.add_argument("--max-tokens", "--judge-max-tokens", dest="judge_max_tokens", type=int, default=1024, metavar="N")
    g.add_argument("--timeout", "--judge-timeout", dest="judge_timeout", type=float, default=120.0, metavar="S",
                   help="seconds per attempt of a model call, whole: connecting, the headers and the entire reply")
    g.add_argument("--retries", "--judge-retries", dest="judge_retries", type=int, default=4, metavar="N",
                   help="retries of a failed call (429, 5xx, timeouts)")
    g.add_argument("--deadline", "--judge-deadline", dest="judge_deadline", type=float, default=None, metavar="S",
                   help="seconds per model call, its retries and their waits included (default: no bound but the "
                        "attempts' own)")
    g.add_argument("--max-reply-bytes", "--judge-max-reply-bytes", dest="judge_max_reply_bytes", type=int,
                   default=MAX_REPLY_BYTES, metavar="N",
                   help=f"a reply body longer than this is cut, and a cut verdict is a judge_error (default {MAX_REPLY_BYTES})")
    g.add_argument("--max-wait", "--judge-max-wait", dest="judge_max_wait", type=float, default=300.0, metavar="S",
                   help="longest Retry-After wait honoured (s); a server asking for more fails the call")


def run_judge_command(args: Any, argv: list[str] | None = None) -> OfflineReport:
    """``harness judge``: build the judges from the flags, judge, print the summary."""
    from harness.core.registry import RegistryError, parse_options
    from harness.run.options import RunError
    from harness.cli.run_parts import model_configs, split_list

    if args.concurrency < 1:
        raise OfflineJudgeError("--concurrency must be >= 1")
    limit_malloc_arenas()  # before any thread of the pass exists (harness.offline_judge.heap)
    args.judge_concurrency = args.concurrency
    try:
        model = model_configs(args)["judge"]
        opts = parse_options(args.judge_opt, "--judge-opt")
    except (RunError, RegistryError) as e:
        raise OfflineJudgeError(str(e)) from None
    names = split_list(args.judge)
    read = read_episodes(args.paths, args.suite)  # before the judges' imports: see read_episodes
    targets = [te.target for te in read.targets]
    for t in targets:  # before any judge is built or model called: the verdicts must have somewhere to go
        check_writable(t.run_dir)
    cache = None
    if not args.no_cache:
        if args.cache:
            cache = args.cache
        else:
            cache = str(targets[0].run_dir / JUDGEMENTS_DIR / "evidence-cache.jsonl")
    setup = prepare_judges(names, opts, model, args.concurrency, cache=cache)
    if model is not None:  # the endpoint answers, as the judges will call it, before the pass starts
        from harness.client.slots import Priority
        from harness.preflight import Endpoint, Plan, preflight

        preflight(Plan(endpoints=[Endpoint("judges", "--model-base-url/--model", setup.model, structured=True,
                                           priority=Priority.OFFLINE)]))
    report = judge_runs(read, setup, concurrency=args.concurrency, set_id=args.judge_set,
                        retry_errors=args.retry_errors, episodes_in_flight=args.episodes_in_flight,
                        fresh_judges=args.fresh_judges,
                        progress=not args.no_progress and not args.json, argv=argv)
    if args.json:
        print(json.dumps(report.to_json(), indent=1, ensure_ascii=False))
    else:
        print_summary(report)
    return report


def cmd_judge(args: argparse.Namespace) -> int:
    from harness.offline_judge import OfflineJudgeError
    from harness.records import RecordError
    from harness.core.registry import RegistryError

    try:
        report = run_judge_command(args, argv=sys.argv)
    except (OfflineJudgeError, RecordError, RegistryError) as e:
        raise UserError(str(e)) from None
    except OSError as e:  # a folder that cannot be written after all: one line, not a traceback
        raise UserError(f"{e.filename or 'judgements'}: {e.strerror or e}") from None
    if report.interrupted:
        return 130
    return EXIT_ALL_FAILED if every_verdict_failed(report) else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    jd = sub.add_parser("judge", help="judge recorded episodes after the fact (resumable, cached, with a cost summary)")
    add_judge_arguments(jd)
    jd.set_defaults(run=cmd_judge)
