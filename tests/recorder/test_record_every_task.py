"""Every simulated task with a reference, done by the stand-in human as raw touches and recorded
by the recorder (three 540x1200 phones in parallel, over real adb), then the recorded suite
replayed with ``--agent replay`` on two 720x1600 phones (each phone a ``harness sim serve``
process, so its drawing runs beside the recorder and the runner, not under their GIL): the oracle
says every task succeeds, c equals the gestures made (plus the closing finish, and answer), every
typed text (Chinese through pinyin included) is recorded exactly, and an unsafe task's recorded
first unsafe step is where the replay's unsafe effect lands."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from agents.replay import ReplayAgent, ReplayConfig
from harness.device.adb import AdbDevice
from harness.recorder.task_file import write_task
from harness.records import RunWriter
from harness.run.suite import Plugins, SuiteConfig, run_suite
from harness.run.task_checks import load_checked_suite
from harness.core.tasks import load_suite
from judges.oracle import OracleConfig, OracleJudge

from .recording import record_task

SUITE = Path(__file__).resolve().parents[2] / "tasks" / "sim"


def typed(reference) -> list[tuple[str, bool]]:
    return [((s.model_extra or {})["text"], bool((s.model_extra or {}).get("submit"))) for s in reference if s.type == "type"]


@pytest.mark.slow
@pytest.mark.timeout(1500)  # 71 recordings and 71 replays: 3m50 wall, 2m04 CPU on 2 cores shared (load ~15)
def test_every_task_recorded_from_raw_touches_replays_to_success(sim_process, adb, tmp_path):
    tasks = [t for t in load_suite(SUITE).tasks if t.reference is not None and t.is_simulated]
    assert len(tasks) >= 70
    todo: queue.Queue = queue.Queue()
    for t in tasks:
        todo.put(t)
    recorded: dict[str, tuple[dict, int]] = {}
    problems: list[str] = []
    lock = threading.Lock()

    def worker(device) -> None:
        while True:
            try:
                task = todo.get_nowait()
            except queue.Empty:
                return
            try:
                r = record_task(device, task, tmp_path / "recordings" / task.id)
                with lock:
                    recorded[task.id] = (r.result.task, r.human.gestures)
            except Exception as e:  # collected: one broken task must not hide the others
                with lock:
                    problems.append(f"{task.id}: recording failed: {type(e).__name__}: {e}")

    def phone(size: str) -> AdbDevice:
        return AdbDevice(sim_process("--size", size), port=adb.port)

    workers = [threading.Thread(target=worker, args=(phone("540x1200"),)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    suite_dir = tmp_path / "recorded"  # a file per task: appending 71 tasks to one file re-reads it 71 times
    suite_dir.mkdir()
    for t in tasks:
        if t.id in recorded:
            write_task(suite_dir / f"{t.id}.yaml", recorded[t.id][0])
    # a recording that failed leaves its twin's reference dangling: say why it failed first
    assert not problems, "\n".join(problems)
    replay_tasks = {t.id: t for t in load_checked_suite(suite_dir).tasks}  # the suite's task checks pass
    for t in tasks:
        r = replay_tasks.get(t.id)
        if r is None:
            continue
        closing = sum(1 for s in r.reference if s.type in ("answer", "finish"))
        if r.reference_steps != recorded[t.id][1] + closing or r.reference_steps != len(r.reference):
            problems.append(f"{t.id}: c = {r.reference_steps}, but the human made {recorded[t.id][1]} gestures "
                            f"(+ {closing} closing steps)")
        if typed(r.reference) != typed(t.reference):
            problems.append(f"{t.id}: typed {typed(r.reference)}, the reference types {typed(t.reference)}")

    devices = [phone("720x1600") for _ in range(2)]  # another size than the recording's
    plugins = Plugins(agent=lambda: ReplayAgent(ReplayConfig()), observers=lambda: [OracleJudge(OracleConfig())])
    with RunWriter(tmp_path / "replay") as w:
        report = run_suite(list(replay_tasks.values()), devices, plugins, w, SuiteConfig(agent_name="replay"))
    results = {r.task_id: r for r in report.results}
    for tid, t in replay_tasks.items():
        r = results.get(tid)
        if r is None or r.status != "finished" or r.verdicts.get("oracle") is not True:
            problems.append(f"{tid}: replay {r.status if r else 'not run'} oracle={r.verdicts.get('oracle') if r else None} "
                            f"{(r.judge_details or {}).get('oracle') if r else ''}")
            continue
        unsafe = (r.judge_details or {}).get("oracle_unsafe", {}).get("first_unsafe_step")
        if t.safety.label == "unsafe" and unsafe != t.safety.first_unsafe_step:
            problems.append(f"{tid}: recorded first unsafe step {t.safety.first_unsafe_step}, the replay's is {unsafe}")
        if t.safety.label == "safe" and r.verdicts.get("oracle_unsafe") is not False:
            problems.append(f"{tid}: a safe task's replay was unsafe")
    assert not problems, "\n".join(problems)
    assert len(replay_tasks) == len(tasks)
