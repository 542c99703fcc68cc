"""The one entry point a command calls before it touches a device: :func:`preflight` runs every check
its :class:`Plan` asks for, the slow ones (each model endpoint, each device) at once, and either
returns what passed (the devices opened, their descriptions, the tasks some device cannot start)
or raises :class:`harness.preflight.problems.PreflightFailed` with every problem found, each one
line. Nothing here prepares, resets, locks or changes a device: it reads."""

from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.preflight.devices import (DeviceFindings, DeviceNeeds, attached_states, check_attached, check_device,
                                       describe_attached)
from harness.preflight.endpoints import Endpoint, check_endpoint
from harness.preflight.problems import Passed, PreflightFailed, Problem
from harness.preflight.run_setup import (check_run_folder, check_unguarded_unsafe, check_watch_port,
                                         started_before_its_manifest)


@dataclass
class Plan:
    """What a command is about to use. ``device_config`` None: no device (``harness judge``);
    ``serials`` empty with a config: every device adb lists as ready. ``out``: a run folder to
    write (``resume``: to continue). ``watch``: the live page's (host, port). ``gates``: the
    monitors that judge each action before it runs; ``allow_unguarded``: unsafe tasks may run on a
    real device without one. ``needs.tasks`` with ``all_tasks_needed`` False: a task some device
    cannot start is skipped (said), and only none left to run is a problem."""

    endpoints: list[Endpoint] = field(default_factory=list)
    device_config: Any = None
    serials: list[str] = field(default_factory=list)
    needs: DeviceNeeds = field(default_factory=DeviceNeeds)
    reconnect_timeout: float = 0.0
    out: str | Path | None = None
    resume: bool = False
    watch: tuple[str, int] | None = None
    gates: list[str] | None = None
    allow_unguarded: bool = False
    all_tasks_needed: bool = False


def _devices(plan: Plan, pool: cf.Executor) -> tuple[list[Problem], list[cf.Future[DeviceFindings]]]:
    """The devices' checks, started in ``pool``; problems found before any device is opened."""
    states, problem = attached_states(plan.device_config)
    if problem is not None or states is None:
        return [problem] if problem else [], []
    serials = list(plan.serials)
    if not serials:
        serials = [s for s, st in states.items() if st == "device"]
        if not serials:
            return [Problem("device", "no usable device is attached (attached: " + describe_attached(states) +
                                      "); connect one (docs/phones.md section 1), or name the serial of one it lists")], []
    problems = check_attached(serials, states)
    futures = [pool.submit(check_device, plan.device_config.open(s), plan.needs, plan.reconnect_timeout)
               for s in serials if s in states]
    return problems, futures


def preflight(plan: Plan) -> Passed:
    """Every check of ``plan``; :class:`Passed`, or :class:`PreflightFailed` listing every problem."""
    t0 = time.monotonic()
    passed = Passed()
    problems: list[Problem] = []
    if plan.out is not None and (p := check_run_folder(plan.out, plan.resume)):
        problems.append(p)
    elif plan.out is not None and plan.resume and started_before_its_manifest(Path(plan.out)):
        passed.notes.append(f"{plan.out} holds a run stopped before it wrote its manifest: nothing was recorded, "
                            "so --resume starts it")
    if plan.watch is not None and (p := check_watch_port(*plan.watch)):
        problems.append(p)
    workers = len(plan.endpoints) + max(1, len(plan.serials) or 4)
    with cf.ThreadPoolExecutor(workers, thread_name_prefix="preflight") as pool:
        endpoint_checks = [pool.submit(check_endpoint, ep) for ep in plan.endpoints]
        found: list[DeviceFindings] = []
        if plan.device_config is not None:
            early, futures = _devices(plan, pool)
            problems.extend(early)
            found = [f.result() for f in futures]
        for f in endpoint_checks:
            problem, line = f.result()
            if problem is not None:
                problems.append(problem)
            else:
                passed.lines.append(line)
    for d in found:
        problems.extend(d.problems)
        passed.lines.extend(d.lines)
        passed.devices.append(d.device)
        passed.descriptions.append(d.description)
        for tid, why in d.unavailable.items():
            passed.unavailable[tid] = f"{passed.unavailable[tid]}; {why}" if tid in passed.unavailable else why
    if found and not any(d.problems for d in found):
        problems.extend(_task_problems(plan, passed))
    if problems:
        # a device opened here is closed again: the command stops before using it
        for d in found:
            close = getattr(d.device, "close", None)
            if callable(close):
                close()
        raise PreflightFailed(problems)
    passed.wall_s = time.monotonic() - t0
    return passed


def _task_problems(plan: Plan, passed: Passed) -> list[Problem]:
    """The chosen tasks against the devices found: none left to run, some that every device needs
    and one cannot start (``all_tasks_needed``), unsafe ones with nothing to stop them."""
    tasks = plan.needs.tasks
    problems: list[Problem] = []
    if tasks and passed.unavailable:
        if plan.all_tasks_needed or len(passed.unavailable) == len(tasks):
            why = "; ".join(f"{tid} {w}" for tid, w in list(passed.unavailable.items())[:5])
            more = f" (and {len(passed.unavailable) - 5} more)" if len(passed.unavailable) > 5 else ""
            problems.append(Problem("tasks", f"nothing to run: {why}{more}. Install the apps, pick tasks this phone can "
                                             "run, or edit the tasks' packages (docs/phones.md section 7)"))
        else:
            passed.notes.extend(f"skipped {tid}: {why}" for tid, why in passed.unavailable.items())
    runnable = [t for t in tasks if t.id not in passed.unavailable]
    if plan.gates is not None:
        problem, note = check_unguarded_unsafe(runnable, plan.gates, passed.descriptions, plan.allow_unguarded)
        if problem is not None:
            problems.append(problem)
        if note is not None:
            passed.notes.append(note)
    return problems


def check_described(plan: Plan, descriptions: list[dict[str, Any]]) -> None:
    """The checks that need only the devices' descriptions (a farm's phones, which their nodes
    describe and check themselves): kinds every judge can judge, and unsafe tasks on real devices
    with no gate. :class:`PreflightFailed`, or nothing."""
    from types import SimpleNamespace

    from harness.preflight.devices import check_kind

    problems: list[Problem] = []
    for d in descriptions:
        desc = SimpleNamespace(simulated=bool(d.get("simulated")), kind=d.get("kind") or "", model=d.get("model") or "")
        where = f"{d['node']}/{d['serial']}" if d.get("node") else d["serial"]
        problems.extend(check_kind(where, desc, plan.needs))
    if plan.gates is not None:
        problem, _ = check_unguarded_unsafe(plan.needs.tasks, plan.gates, descriptions, plan.allow_unguarded)
        if problem is not None:
            problems.append(problem)
    if problems:
        raise PreflightFailed(problems)
