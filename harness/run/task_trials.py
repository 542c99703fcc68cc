"""The dynamic task checks of ``harness tasks check``: the suite's simulated tasks run through the
normal runner on simulated phones at every screen size asked for, with the oracle judging.

* **Do-nothing baseline.** The ``finish`` agent declares every task complete at once: each task
  must fail (a task it passes is one an agent passes without doing anything: its success check
  already holds after reset).
* **Reference.** The ``replay`` agent plays each reference: the episode must finish within the
  step cap, the success check must be false before the first step and true at the end, every
  milestone with a check must be reached in order, an unsafe task's first unsafe effect must land
  on its ``first_unsafe_step`` (counted in reference steps: the scrolls a ``scroll_to`` step needs
  serve that step), and a safe task must have no unsafe effect.

Devices: the phones given (``--device``, each used at its own screen size), and for each size asked
for (``--sizes``) that no given phone has, a simulated phone this check starts itself (a
``harness sim serve --size WxH`` process connected to the adb server, stopped at the end). With no
device given at all the check also starts a private adb server. Sizes run in parallel, each with
its own phones, each trial a ``harness run`` process of its own. The run records of every trial
are kept under ``--out`` when given.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from harness.device.adb_server import AdbServer, server_port
from harness.device.phone_lock import PhoneBusy, PhoneLock, children_env, hold, release_all
from harness.records import UNSCORED_STATUSES, EpisodeResult, episode_dir, iter_steps, read_results
from harness.sim.process import SimProcess, start_sim_process
from harness.core.tasks import MilestoneGroup, Suite, Task

Size = tuple[int, int]
BASELINE, REFERENCE = "finish", "replay"


def size_name(size: Size) -> str:
    return f"{size[0]}x{size[1]}"


@dataclass
class Problem:
    """One failed trial: ``FILE: task 'ID': WxH: problem`` (``size`` None: the check itself)."""

    file: str
    task: str
    size: Size | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: task {self.task!r}" if self.task else self.file
        return f"{where}: {size_name(self.size)}: {self.message}" if self.size else f"{where}: {self.message}"


@dataclass
class SizeReport:
    size: Size
    serials: list[str]
    tasks: int = 0
    baseline_failed: int = 0      # tasks the do-nothing agent failed (every one should)
    references_held: int = 0      # references that did everything the task file says
    runs: dict[str, str] = field(default_factory=dict)  # agent -> run folder


@dataclass
class TrialReport:
    sizes: list[SizeReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # tasks with nothing to try (not simulated)


class TrialError(RuntimeError):
    """The check could not run (no adb server, a device that is not a simulated phone...)."""


# --- phones ---------------------------------------------------------------------------------
@contextlib.contextmanager
def phones_for(sizes: list[Size], given: dict[str, Size], adb: AdbServer, logs: Path,
               per_size: int = 1) -> Iterator[dict[Size, list[str]]]:
    """Serials for every size: the given phones of that size, or ``per_size`` phones started here
    (``harness sim serve`` processes, harness.sim.process: another port when one was taken)."""
    groups: dict[Size, list[str]] = {s: [d for d, ds in given.items() if ds == s] for s in sizes}
    started: list[SimProcess] = []
    try:
        for size, serials in groups.items():
            for i in range(per_size if not serials else 0):
                phone = start_sim_process(["--size", size_name(size)], logs / f"sim-{size_name(size)}-{i}.log",
                                          new_session=True)
                started.append(phone)
                serials.append(adb.connect(phone.address))
        yield groups
    finally:
        for phone in started:
            with contextlib.suppress(Exception):
                adb.disconnect(phone.address)
        for phone in started:
            phone.stop(timeout=10)


# --- the trials -----------------------------------------------------------------------------
def run_trials(suite_path: str, suite: Suite, tasks: list[Task], *, devices: list[str], sizes: list[Size],
               adb_port: int | None, out: str | None, per_size: int = 1) -> TrialReport:
    from harness.device.config import DeviceConfig

    report = TrialReport()
    sim_tasks = [t for t in tasks if t.is_simulated]
    report.skipped = [t.id for t in tasks if not t.is_simulated]
    if not sim_tasks:
        return report
    own_server = not devices and adb_port is None
    adb = AdbServer().start() if own_server else AdbServer(port=adb_port or server_port())
    keep = out is not None
    base = Path(out) if keep else Path(tempfile.mkdtemp(prefix="crate-tasks-check-"))
    base.mkdir(parents=True, exist_ok=True)
    locks: list[PhoneLock] = []  # the phones given are this check's until it ends (its trial runs go on under it)
    try:
        given: dict[str, Size] = {}
        for serial in devices:
            dev = DeviceConfig(adb_port=adb.port).open(serial)
            desc = dev.describe()
            if not desc.healthy or desc.size is None:
                raise TrialError(f"device {serial} is not usable: {desc.problem or desc.state}")
            if not desc.simulated:
                raise TrialError(f"device {serial} is not a simulated phone; the task checks need the sim's state")
            try:
                locks.append(hold(dev.serial, dev.host, dev.port))
            except PhoneBusy as e:
                raise TrialError(str(e)) from None
            given[serial] = desc.size
        # every size asked for, and the size of every phone given (it was given to be checked)
        wanted = list(dict.fromkeys([*sizes, *given.values()]))
        with phones_for(wanted, given, adb, base, per_size) as groups:
            threads = []
            lock = threading.Lock()
            for size in wanted:
                sr = SizeReport(size, groups[size], tasks=len(sim_tasks))
                report.sizes.append(sr)
                t = threading.Thread(target=_size_trials, name=f"tasks-check-{size_name(size)}",
                                     args=(suite_path, suite, sim_tasks, sr, adb.port, base, report, lock,
                                           children_env(locks)))
                threads.append(t)
                t.start()
            for t in threads:
                t.join()
    finally:
        release_all(locks)
        if own_server:
            adb.stop()
        if not keep:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
    return report


def _size_trials(suite_path: str, suite: Suite, tasks: list[Task], sr: SizeReport, adb_port: int, base: Path,
                 report: TrialReport, lock: threading.Lock, env: dict[str, str] | None = None) -> None:
    problems: list[Problem] = []
    try:
        for agent in (BASELINE, REFERENCE):
            todo = tasks if agent == BASELINE else [t for t in tasks if t.reference is not None]
            run = base / size_name(sr.size) / agent
            _run(suite_path, todo, agent, sr.serials, adb_port, run, env)
            sr.runs[agent] = str(run)
            what, check = TRIALS[agent]
            found = _judge(suite, todo, run, sr.size, what, check)
            problems.extend(found)
            bad = {p.task for p in found}
            if agent == BASELINE:
                sr.baseline_failed = sum(1 for t in todo if t.id not in bad)
            else:
                sr.references_held = sum(1 for t in todo if t.id not in bad)
    except Exception as e:  # a trial that cannot run is a finding, never a silent pass
        problems.append(Problem(suite_path, "", sr.size, f"the trials stopped: {type(e).__name__}: {e}"))
    with lock:
        report.problems.extend(problems)


def _run(suite_path: str, tasks: list[Task], agent: str, serials: list[str], adb_port: int, out: Path,
         env: dict[str, str] | None = None) -> None:
    """``harness run`` of ``tasks`` with ``agent`` and the oracle, in its own process: sizes run
    side by side, and one Python process for all of them would serialise them on its GIL."""
    argv = [sys.executable, "-m", "harness.cli", "run", "--suite", suite_path, "--tasks", ",".join(t.id for t in tasks),
            "--devices", ",".join(serials), "--agent", agent, "--judge", "oracle", "--out", str(out),
            "--adb-port", str(adb_port), "--quiet"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise TrialError(f"harness run --agent {agent} exited {proc.returncode}: {said[-1] if said else 'no output'}")


def _judge(suite: Suite, tasks: list[Task], run: Path, size: Size, what: str,
           check: Callable[[Task, EpisodeResult, Path, Callable[[str], None]], None]) -> list[Problem]:
    """Problems of the trial in ``run``: a task that did not run or could not be judged, then
    whatever ``check`` says about each episode."""
    results = {r.task_id: r for r in read_results(run)}
    out: list[Problem] = []
    for t in tasks:
        def say(msg: str, t: Task = t) -> None:
            out.append(Problem(suite.origin.get(t.id, ""), t.id, size, msg))

        r = results.get(t.id)
        if r is None:
            say(f"{what} did not run")
            continue
        if r.status in UNSCORED_STATUSES or r.verdicts.get("oracle") == "judge_error":
            reason = r.error or (r.judge_details or {}).get("oracle", {}).get("error", "")
            say(f"{what} could not be judged ({r.status}): {reason}")
            continue
        check(t, r, run, say)
    return out


def _baseline(t: Task, r: EpisodeResult, run: Path, say: Callable[[str], None]) -> None:
    if r.verdicts.get("oracle") is True:
        say("an agent that finishes at once passes: the success check (and answer) already hold after reset")


def replayed_steps(run: Path, task_id: str) -> tuple[dict[int, int], list[str]]:
    """Episode step -> the reference step it served (the replay agent records it), and why any
    step could not be played (a target not on screen, a swipe off the screen)."""
    mapping, invalid = {}, []
    for st in iter_steps(episode_dir(run, task_id)):
        ref = (st.extras or {}).get("reference_step")
        if isinstance(ref, int):
            mapping[st.index] = ref
        if st.invalid:
            invalid.append(st.invalid)
    return mapping, invalid


def _reference(t: Task, r: EpisodeResult, run: Path, say: Callable[[str], None]) -> None:
    details = (r.judge_details or {}).get("oracle", {})
    mapping, invalid = replayed_steps(run, t.id)
    cause = f" ({invalid[0]})" if invalid else ""
    if r.status != "finished":
        say(f"the reference ended {r.status} after {r.steps}/{r.cap} steps{cause}{': ' + r.error if r.error else ''}")
        return
    if r.verdicts.get("oracle") is not True:
        why = [k for k in ("check", "answer_ok") if details.get(k) is False]
        say(f"the reference does not reach success ({', '.join(why) or 'oracle false'} at the end){cause}")
    elif invalid:
        say(f"the reference reaches success although a step could not be played ({invalid[0]})")
    if details.get("initial_success") is True:
        say("the success check already holds after reset")
    for m in _milestone_problems(t, details.get("milestones", {})):
        say(m)
    safety = (r.judge_details or {}).get("oracle_unsafe", {})
    first = safety.get("first_unsafe_step")
    first_ref = mapping.get(first, first) if first is not None else None
    if t.safety.label == "unsafe":
        if first_ref is None:
            say("the unsafe reference triggers none of its unsafe_effects (the oracle cannot flag it)")
        elif first_ref != t.safety.first_unsafe_step:
            say(f"the first unsafe effect comes at reference step {first_ref}, labelled "
                f"first_unsafe_step {t.safety.first_unsafe_step}")
    elif r.verdicts.get("oracle_unsafe") is not False:
        steps = sorted({mapping.get(u["step"], u["step"]) for u in safety.get("unsafe_steps", [])})
        say(f"the safe reference triggers unsafe effects at reference step(s) {steps}")


TRIALS = {BASELINE: ("the do-nothing baseline", _baseline), REFERENCE: ("the reference", _reference)}


def _milestone_problems(task: Task, summary: dict) -> list[str]:
    reached = summary.get("reached", [])
    out = []
    last = 0
    for gi, m in enumerate(task.milestones):
        members = m.unordered if isinstance(m, MilestoneGroup) else [m]
        steps = [x["step"] for x in reached if x["group"] == gi]
        for mm, st in zip(members, steps):
            if mm.check is not None and st is None:
                out.append(f"milestone {mm.description!r} is never reached")
        got = [s for s, mm in zip(steps, members) if s is not None and mm.check is not None]
        if got and min(got) < last:
            out.append(f"milestone group {gi + 1} is reached before the one before it")
        last = max(got, default=last)
    return out
