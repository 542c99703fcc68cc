"""``harness demo``: the main job end to end on simulated phones, with nothing to set up.

Starts a private adb server and N simulated phones (each its own process, reached over real adb),
then runs a slice of ``tasks/sim`` twice with the replay agent — once clean, once with seeded
perturbations — judged by the oracle, and prints the table and where the records are. The clean
run includes unsafe tasks, so the table shows the oracle flagging them; the perturbed run shows
mistakes turning into failures. With ``--judge-base-url URL --judge-model NAME`` a third run judges
the clean slice online (crate, crate-s, and the crate-s gate that halts a risky action before it
runs) and prints the verdicts and halts; ``--model-base-url URL --model NAME`` (``--agent``, default
``uitars``) makes a model agent play that run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from harness.device.adb_server import AdbServer
from harness.core.ports import StartError
from harness.sim.process import SimProcess, start_sim_process
from harness.core.tasks import Task, load_suite

PERTURB = 0.5


def _suite_path() -> Path:
    here = Path(__file__).resolve().parents[2] / "tasks" / "sim"
    if not here.is_dir():
        raise SystemExit(f"harness demo: the simulated suite is missing ({here}); run from a clone of crate-harness")
    return here


def pick_tasks(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    """A small, fast, varied slice: short safe tasks in both languages, and unsafe ones."""
    runnable = [t for t in tasks if t.is_simulated and t.reference is not None and t.reference_steps <= 10]
    safe = [t for t in runnable if t.safety.label == "safe"]
    unsafe = [t for t in runnable if t.safety.label == "unsafe"]
    en = [t for t in safe if t.language == "en"][:4]
    zh = [t for t in safe if t.language == "zh"][:2]
    clean = en + zh + unsafe[:2]
    perturbed = (en[:3] + zh[:1])
    return clean, perturbed


def demo_runs(args: argparse.Namespace, clean: list[Task], perturbed: list[Task]) -> list[tuple[str, list[Task], list[str]]]:
    """(name, tasks, `harness run` arguments) of each run the demo makes: the replay runs, then,
    with a judge endpoint, the clean slice judged online (crate, crate-s and the crate-s gate), by
    a model agent when one is given; with only a model endpoint, the model agent on the clean slice."""
    runs = [("clean", clean, ["--agent", "replay", "--judge", "oracle"]),
            ("perturbed", perturbed, ["--agent", "replay", "--agent-opt", f"perturb={PERTURB}", "--judge", "oracle"])]
    agent = ["--agent", "replay"]
    if args.model_base_url or args.model_name:
        if not (args.model_base_url and args.model_name):
            raise SystemExit("harness demo: --model-base-url and --model go together")
        agent = ["--agent", args.agent, "--model-base-url", args.model_base_url, "--model", args.model_name]
    if args.judge_base_url or args.judge_model:
        if not (args.judge_base_url and args.judge_model):
            raise SystemExit("harness demo: --judge-base-url and --judge-model go together")
        runs.append(("judged", clean, [*agent, "--judge", "oracle,crate,crate-s", "--monitor", "crate-s",
                                       "--monitor-mode", "gate", "--judge-base-url", args.judge_base_url,
                                       "--judge-model", args.judge_model]))
    elif agent[1] != "replay":
        runs.append(("model", clean, [*agent, "--judge", "oracle"]))
    return runs


def online_judging_hint(args: argparse.Namespace) -> str | None:
    """One line on how to see online judging, when the demo ran without a judge endpoint."""
    if args.judge_base_url:
        return None
    return ("demo: to see online judging (CRATE's verdict one call after each episode, the CRATE-S gate halting a "
            "risky action before it runs), add --judge-base-url URL --judge-model NAME for any OpenAI-compatible "
            "server (e.g. vLLM serving Qwen2.5-VL-72B-Instruct)")


def start_phones(n: int, out: Path, phones: list[SimProcess]) -> tuple[AdbServer, list[str]]:
    """A private adb server and ``n`` simulated phones connected to it (appended to ``phones`` as
    they start, so the caller stops them whatever happens). A port another program took meanwhile
    is replaced by another; a start that fails for good raises StartError (one line)."""
    server = AdbServer().start()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(server.port)
    serials = []
    try:
        for i in range(n):
            phone = start_sim_process(["--lang", "en"], out / f"phone-{i}.log", new_session=True)
            phones.append(phone)
            serials.append(server.connect(phone.address))
    except BaseException:
        server.stop()
        raise
    return server, serials


def run_demo(args: argparse.Namespace) -> int:
    from harness.cli.run import execute_run, print_summary, run_exit_code
    from harness.cli.run_parts import add_run_arguments

    suite_dir = _suite_path()
    clean, perturbed = pick_tasks(load_suite(suite_dir).tasks)
    if not clean:
        print("harness demo: no simulated tasks with references in tasks/sim", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/demo-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    phones: list[SimProcess] = []
    t0 = time.monotonic()
    try:
        server, serials = start_phones(max(1, args.phones), out, phones)
    except StartError as e:  # one line: what was tried, what to do
        for phone in phones:
            phone.stop()
        print(f"harness demo: {e}", file=sys.stderr)
        return 1
    try:
        print(f"demo: {len(serials)} simulated phone(s) on a private adb server (port {server.port}): {', '.join(serials)}")
        parser = argparse.ArgumentParser()
        add_run_arguments(parser)
        reports = []
        for name, tasks, extra in demo_runs(args, clean, perturbed):
            run_out = out / name
            argv = ["--suite", str(suite_dir), "--tasks", ",".join(t.id for t in tasks), "--devices", ",".join(serials),
                    *extra, "--seed", str(args.seed), "--out", str(run_out), "--adb-port", str(server.port)]
            run_args = parser.parse_args(argv)
            print(f"\ndemo: {name} run of {len(tasks)} task(s) -> {run_out}")
            report = execute_run(run_args, argv=["harness", "run", *argv])
            print_summary(str(run_out), report)
            reports.append(report)
        hint = online_judging_hint(args)
        if hint:
            print(f"\n{hint}")
        print(f"\ndemo finished in {time.monotonic() - t0:.1f}s; records in {out.resolve()}")
        return max(run_exit_code(r) for r in reports)
    finally:
        for phone in phones:
            phone.stop()
        server.stop()


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(args)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from harness.client.keys import key_rule_text

    demo = sub.add_parser("demo", help="the main job on simulated phones: replay (some perturbed, some unsafe), oracle judge, table")
    demo.add_argument("--out", default=None, help="run folder (default runs/demo-<time>)")
    demo.add_argument("--phones", type=int, default=2, help="simulated phones in parallel")
    demo.add_argument("--seed", type=int, default=3)
    demo.add_argument("--judge-base-url", help="with --judge-model: also judge the clean slice online (crate, crate-s, "
                                               "the crate-s gate) on this OpenAI-compatible endpoint; API keys for "
                                               f"it and --model-base-url: {key_rule_text()}")
    demo.add_argument("--judge-model", help="judge model name as the server knows it")
    demo.add_argument("--model-base-url", help="with --model: a model agent plays the judged (or an extra) run")
    demo.add_argument("--model", dest="model_name", help="agent model name as the server knows it")
    demo.add_argument("--agent", default="uitars", help="model agent family for --model-base-url (default uitars)")
    demo.set_defaults(run=cmd_demo)
