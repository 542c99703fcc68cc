"""The device actor: one per phone, on the phone's own node. It owns the device, the agent and each
episode's fresh judges and monitors; it runs an episode with the same runner as a local run into a
folder on its node, streams the step events to the driver as they happen, and ships the finished
episode's files back whole (the driver installs them into the run folder).

It holds the phone as a local run does: the node's lock of the phone (harness.device.phone_lock:
no local run or other command on that node drives it meanwhile), and the phone's journal in the
node's own state folder (harness.device.prepare): prepare's changes when the run prepares, and any
change made later (the first non-ASCII text switching the keyboard to ADBKeyboard) are recorded
there before they are made, and put back by ``close`` when the run ends. An actor that dies leaves
its journal on the node: the driver puts it back with :func:`restore_on_node` while the node
lives, ``harness devices restore`` on the node does at any time, and the phone's next run keeps
its originals."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import ray

from harness.device.phone_lock import hold
from harness.device.prepare import DeviceSession, Journal, RestoreReport, restore
from harness.client.calls import allow_calls, stop_calls
from harness.records import RunWriter
from harness.records.layout import is_side_file
from harness.run.conditions import episode_conditions
from harness.run.runner import Interrupted
from harness.run.suite import Plugins, StepProgress, play_episode
from harness.core.tasks import Task


class Secrets:
    """The model API keys the driver hands its actors, by variable name, so that a node needs no key
    of its own (read through :func:`harness.client.keys.key_for`, ahead of the node's environment). Never
    printed: the repr names only the variables."""

    def __init__(self, values: dict[str, str]):
        self.values = dict(values)

    def __repr__(self) -> str:
        return f"Secrets({', '.join(sorted(self.values))})"


def episode_files(path: Path) -> dict[str, bytes]:
    """An episode folder's trajectory, screens and side records (the live view's started.json and
    evidence.jsonl), by their path inside it: what the driver installs, so a farm episode's folder
    holds what a local one does. Its summary the driver writes itself."""
    out = {"trajectory.jsonl": (path / "trajectory.jsonl").read_bytes()}
    for png in sorted((path / "screens").glob("*.png")):
        out[f"screens/{png.name}"] = png.read_bytes()
    for f in sorted(path.iterdir()):
        if f.is_file() and is_side_file(f.name):
            out[f.name] = f.read_bytes()
    return out


LOCK_WAIT_S = 30.0   # the phone's lock, still held by the actor of a run that is ending, is waited for
CLOSE_WAIT_S = 60.0  # an episode still under way when the run ends is waited for before restoring


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=4)
class DeviceActor:
    """``run`` one episode at a time; ``halt`` stops it at its next step (Ctrl-C on the driver);
    ``reconnect`` waits for a phone that dropped off, as a local run does; ``close`` puts back what
    the run changed on the phone and lets go of it.

    ``prepare``: the run's PrepareConfig (None: ``--no-prepare``; later changes are still
    journaled); ``holder``: the driver's command line, named when a local command finds the phone
    held."""

    def __init__(self, serial: str, device_config: Any, plugins: Plugins, secrets: Secrets, name: str,
                 prepare: Any = None, holder: str = ""):
        from harness.client.keys import provide_keys

        # the driver's keys go to this process's key lookup, not its environment: the processes it
        # starts (an adb, a uiautomator2 helper) inherit the environment, and would hold them too
        provide_keys(secrets.values)
        import agents  # noqa: F401  (registers agents: the plugin factories build them by name)
        import judges  # noqa: F401

        self.name, self.plugins = name, plugins
        self.device = device_config.open(serial)
        self.agent: Any = None
        self._stop = threading.Event()
        self._busy = threading.Lock()
        what = f"{holder} (its farm actor for {name}, pid {os.getpid()})" if holder else f"farm actor for {name}"
        self.lock = hold(serial, self.device.host, self.device.port, command=what, wait_s=LOCK_WAIT_S)
        self.session = DeviceSession([self.device], prepare, owner={"pid": os.getpid(), "farm": name,
                                                                     "driver": holder})
        try:
            self.session.__enter__()  # journal on this node; prepare, or PrepareRefused ("unlock the phone")
        except BaseException:
            self.lock.release()
            raise
        self.restored: dict[str, Any] | None = None

    def hello(self) -> dict[str, Any]:
        """Who the actor is, what prepare did (and what an earlier run had left to put back), and
        the phone's frame sources measured on the node before any episode (the choice every episode
        then settles with; a local run records the same per device)."""
        return {"pid": os.getpid(), "node_id": ray.get_runtime_context().get_node_id(), "frames": self._frames(),
                "session": self.session.prepared.get(self.device.serial, {}), "lock_note": self.lock.note}

    def close(self) -> dict[str, Any]:
        """Put back every value the run changed on the phone (read back to check), and let go of
        it; the restore report. An episode still under way is stopped first (waited for)."""
        if self.restored is not None:
            return self.restored
        got = self._busy.acquire(timeout=CLOSE_WAIT_S)
        if not got:
            self._stop.set()  # stop it at its next step, then restore whatever it is doing
            got = self._busy.acquire(timeout=CLOSE_WAIT_S)
        try:
            self.session.restore_all()
            self.restored = self.session.restored.get(self.device.serial) or RestoreReport(self.device.serial).to_json()
        finally:
            self.lock.release()
            if got:
                self._busy.release()
        return self.restored

    def _frames(self) -> dict[str, Any]:
        from harness.device.base import DeviceError, InfraError

        try:
            return self.device.frame_choice()
        except (InfraError, DeviceError) as e:  # noted; its episodes meet the failure as a local run's do
            return {"error": str(e)}

    def halt(self) -> None:
        self._stop.set()
        stop_calls("the run is stopping (the driver halted this phone's episode)")  # this actor's calls only

    def reconnect(self, timeout: float) -> bool:
        return self.device.reconnect(timeout)

    def run(self, task: Task, cap: int, seed: int, episode: str | None = None) -> Iterator[dict[str, Any]]:
        """Episode ``episode`` (the task's id when it runs once; ``TASK#r`` for a repeat, with its own
        ``seed``). A streaming generator: ``started``, then ``step`` events, then ``done`` with the
        outcome, the episode's files and what its reset did, or ``interrupted``. A failure of the node's own
        (records on its disk, the agent's construction) is raised, and reaches the driver."""
        with self._busy:
            self._stop.clear()
            allow_calls()  # a halt cut the last episode's calls; this one's may go out
            yield {"kind": "started", "pid": os.getpid()}
            tmp = Path(tempfile.mkdtemp(prefix="crate-farm-"))
            writer = RunWriter(tmp / "run", fsync=False)  # a scratch copy: the driver's is the record
            try:
                if self.agent is None:
                    self.agent = self.plugins.agent()
                ep = writer.start_episode(episode or task.id)
                events: "queue.Queue[tuple[str, dict[str, Any]] | None]" = queue.Queue()
                box: dict[str, Any] = {}

                def play() -> None:
                    try:
                        box["out"] = play_episode(task, self.agent, self.device, ep, self.plugins, cap=cap, seed=seed,
                                                  should_stop=self._stop.is_set,
                                                  progress=StepProgress(lambda k, d: events.put((k, d)), self.name,
                                                                        episode or task.id))
                    except BaseException as e:  # noqa: BLE001 (handed to the generator's thread)
                        box["error"] = e
                    finally:
                        events.put(None)

                t = threading.Thread(target=play, name=f"episode-{task.id}", daemon=True)
                t.start()
                while (item := events.get()) is not None:
                    yield {**item[1], "kind": item[0]}
                t.join()
                if isinstance(box.get("error"), Interrupted):
                    yield {"kind": "interrupted"}
                    return
                if "error" in box:
                    raise box["error"]
                files = episode_files(ep.path)
                yield {"kind": "done", "outcome": box["out"], "files": files,
                       "reset": getattr(self.device, "last_reset", None),
                       "conditions": episode_conditions(self.name, self.device, self.agent, box["out"].usage,
                                                        files.get("screens/000.png"))}
            finally:
                writer.close()
                shutil.rmtree(tmp, ignore_errors=True)


@ray.remote(num_cpus=0, max_retries=0)
def restore_on_node(device_config: Any, serial: str, holder: str) -> dict[str, Any]:
    """Run on the node of a phone whose actor died: put back what its journal there holds (the
    phone's lock taken first, as ``harness devices restore`` does)."""
    journal = next((j for j in Journal.pending() if j.serial == serial), None)
    if journal is None:
        return RestoreReport(serial).to_json()
    device = device_config.open(serial)
    with hold(serial, device.host, device.port, command=f"{holder} (restoring after its actor died)",
              wait_s=LOCK_WAIT_S):
        return restore(device, journal).to_json()
