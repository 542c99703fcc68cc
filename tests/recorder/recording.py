"""Recording a task in this process: ``harness record``'s Recorder and ``harness sim human``'s
stand-in on one phone over real adb, the recorder's output piped to the human's cues, as the
command-line pipeline ``harness record ... | harness sim human ... --follow`` does."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.device.adb import AdbDevice
from harness.recorder.human import Cues, HumanReport, SimHuman
from harness.recorder.session import Recorder, RecordResult, touchscreen_of
from harness.recorder.task_build import TaskSpec
from harness.core.tasks import Task


@dataclass
class Recorded:
    result: RecordResult
    human: HumanReport
    log: list[str]


def record_task(device: AdbDevice, task: Task, run_dir: Path, out: Path | None = None, **recorder_kw: Any) -> Recorded:
    """Record ``task`` re-recorded from itself (``--from``), done by the stand-in human."""
    r, w = os.pipe()
    writer = os.fdopen(w, "w", buffering=1, encoding="utf-8")
    log: list[str] = []

    def say(line: str) -> None:
        log.append(line)
        writer.write(line + "\n")

    spec = TaskSpec(id=task.id, instruction=task.instruction, language=task.language, template=task)
    rec = Recorder(device, spec, run_dir, out, say=say, argv=["harness", "record", "--id", task.id], **recorder_kw)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = rec.run()
        except BaseException as e:  # handed to the test thread
            box["error"] = e
        finally:
            writer.close()

    thread = threading.Thread(target=run, name=f"record-{task.id}")
    thread.start()
    try:
        screen, _ = touchscreen_of(device)
        cues = Cues(os.fdopen(r, encoding="utf-8"), lambda line: None)
        human = SimHuman(device, screen, cues=cues, say=log.append).perform(task)
    finally:
        rec.stop.set()
        thread.join(120)
    if "error" in box:
        raise box["error"]
    return Recorded(box["result"], human, log)
