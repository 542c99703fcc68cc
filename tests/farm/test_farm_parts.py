"""The farm's parts that need no cluster: Ray stays an optional extra that only harness/farm imports,
``--cluster`` without Ray says how to install it, tasks travel to nodes intact, and the run's queue
(``run_stations``) takes stations that join, and gives back unattempted the job of a station lost
before it started."""

from __future__ import annotations

import ast
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.records import RunWriter, read_results
from harness.run.runner import EpisodeOutcome
from harness.run.suite import Attempt, StationLost, SuiteConfig, run_stations
from harness.core.tasks import load_suite, parse_task
from harness.core.usage import Meter
from tests.faults.helpers import ROOT


def _ray_imports(tree: ast.AST) -> list[ast.stmt]:
    out = []
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if any(n == "ray" or n.startswith("ray.") for n in names):
            out.append(node)
    return out


def test_only_harness_farm_imports_ray():
    importers = []
    for folder in ("harness", "agents", "judges"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if _ray_imports(ast.parse(path.read_text(encoding="utf-8"))):
                importers.append(path.relative_to(ROOT).as_posix())
    assert importers and all(p.startswith("harness/farm/") for p in importers), importers
    # the package itself imports Ray only when asked to (to say how to install it when it is missing)
    init = ast.parse((ROOT / "harness" / "farm" / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in init.body if n in _ray_imports(init)]


def _without_ray(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import ray` fails, as on an install without the farm extra."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['ray'] = None\n", encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


@pytest.mark.parametrize("argv", [
    ["run", "--cluster", "127.0.0.1:6379", "--suite", "tasks/sim", "--agent", "replay", "--out", "{out}"],
    ["devices", "--cluster", "auto"],
])
def test_cluster_without_ray_says_how_to_install_it(tmp_path, argv):
    argv = [a.replace("{out}", str(tmp_path / "run")) for a in argv]
    p = subprocess.run([sys.executable, "-m", "harness.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                       env=_without_ray(tmp_path), timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "pip install -e '.[farm]'" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "run").exists()  # refused before any record is written


def test_every_simulated_task_travels_to_a_node_intact():
    """Tasks are pickled to the nodes' actors: each must come back equal, its checks judging alike
    (a sentinel compared with ``is`` once made every success check false on a farm)."""
    suite = load_suite(ROOT / "tasks" / "sim")
    for t in suite.tasks:
        back = pickle.loads(pickle.dumps(t))
        assert back == t, t.id
    t = parse_task({"id": "p", "instruction": "x", "reference_steps": 1, "setup": {"sim": {"preset": "default"}},
                    "success": {"all": [{"path": "a", "eq": 1}, {"path": "b", "len": 2}]}})
    back = pickle.loads(pickle.dumps(t))
    for state in ({"a": 1, "b": [1, 2]}, {"a": 2, "b": [1, 2]}, {"a": 1, "b": []}):
        assert back.success.evaluate(state) == t.success.evaluate(state)


def test_meter_add_counts_an_episode_metered_elsewhere():
    node = Meter()
    node.record("agent", {"prompt_tokens": 10, "completion_tokens": 2}, 0.5)
    node.record("monitor:crate-s", None, 0.1, failed=True)
    run = Meter()
    episode = Meter(parent=run)
    episode.add(node.to_json())
    episode.add(None)
    assert episode.to_json() == node.to_json() == run.to_json()


# --- the queue with stations that come and go --------------------------------------------------------
class FakeStation:
    """A station whose episodes finish at once (or whose node is gone before it starts)."""

    def __init__(self, name: str, lost: bool = False, gate: threading.Event | None = None):
        self.name, self.lost, self.gate, self.ran = name, lost, gate, []

    def run(self, job, writer, cfg, should_stop, emit, meter) -> Attempt:
        if self.lost:
            raise StationLost(f"node of {self.name} is gone")
        if self.gate is not None:
            self.gate.wait(30)
        self.ran.append(job.task.id)
        out = EpisodeOutcome(status="finished", steps=1, cap=job.task.cap, proposed_steps=1,
                             started_at="2026-01-01T00:00:00.000+00:00", ended_at="2026-01-01T00:00:01.000+00:00")
        return Attempt(out, lambda res: writer.install_episode(res, {}), {"device": self.name, "node": "n"})

    def reconnect(self, timeout: float) -> bool:
        return True


def _tasks(n: int) -> list[Any]:
    return [parse_task({"id": f"t{i}", "instruction": "x", "reference_steps": 1,
                        "setup": {"sim": {"preset": "default"}}}) for i in range(n)]


def test_a_station_lost_before_it_starts_hands_its_job_back_unattempted(tmp_path):
    lost, good = FakeStation("lost", lost=True), FakeStation("good")
    events: list[tuple[str, str]] = []
    with RunWriter(tmp_path / "run", fsync=False) as w:
        rep = run_stations(_tasks(3), [lost, good], w, SuiteConfig(agent_name="a"),
                           progress=lambda kind, data: events.append((kind, data["device"])))
    rows = read_results(tmp_path / "run")
    assert sorted(r.task_id for r in rows) == ["t0", "t1", "t2"] and all(r.attempt == 1 for r in rows)
    assert {r.device for r in rows} == {"good"} and all(r.model_extra["node"] == "n" for r in rows)
    assert rep.dead_devices == ["lost"] and ("dead", "lost") in events and not rep.not_run


def test_a_station_that_joins_mid_run_takes_jobs_from_the_same_queue(tmp_path):
    gate = threading.Event()
    first, late = FakeStation("first", gate=gate), FakeStation("late")
    offered: list[FakeStation] = [late]

    def joining() -> list[FakeStation]:
        out = list(offered)
        offered.clear()
        return out

    events: list[tuple[str, str]] = []

    def progress(kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data["device"]))
        if kind == "start" and data["device"] == "late":
            gate.set()  # the first station is held until the late one has taken a job

    with RunWriter(tmp_path / "run", fsync=False) as w:
        rep = run_stations(_tasks(4), [first], w, SuiteConfig(agent_name="a"), progress=progress, joining=joining)
    assert ("joined", "late") in events and late.ran and not rep.not_run
    assert sorted(first.ran + late.ran) == ["t0", "t1", "t2", "t3"]
    assert len(read_results(tmp_path / "run")) == 4


def test_devices_cluster_table_groups_phones_by_node_and_shows_node_problems(monkeypatch, capsys):
    import harness.farm
    from harness.cli.main import main

    rows = [{"serial": "emulator-5554", "node": "hostB", "state": "device", "model": "Pixel 7", "size": [1080, 2400],
             "density": 420, "simulated": False, "healthy": True, "problem": ""},
            {"serial": "emulator-5554", "node": "hostA", "state": "unauthorized", "healthy": False,
             "problem": "unauthorized"},
            {"serial": "-", "node": "hostC", "state": "-", "healthy": False,
             "problem": "cannot reach its adb server on port 5037: [Errno 111] Connection refused"}]
    monkeypatch.setattr(harness.farm, "cluster_devices", lambda address, cfg: rows)
    assert main(["devices", "--cluster", "HEAD:6379"]) == 0  # in a pipe: whole values, tab-separated
    piped = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert piped[0][:2] == ["node", "serial"] and [c[0] for c in piped[1:]] == ["hostA", "hostB", "hostC"], piped
    assert piped[3][-1] == rows[2]["problem"], piped
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # on a terminal: a table
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["devices", "--cluster", "HEAD:6379"]) == 0
    out = capsys.readouterr().out
    assert "2 device(s) on 3 node(s) of HEAD:6379" in out and "node" in out.splitlines()[2]
    lines = [line for line in out.splitlines() if "emulator-5554" in line or "hostC" in line]
    assert [line.split()[1] for line in lines] == ["hostA", "hostB", "hostC"]  # by node
    words = set(out.split())  # a long problem may wrap inside its cell
    assert {"adb", "Connection", "refused", "unauthorized"} <= words


def test_an_actor_keeps_the_drivers_keys_out_of_its_environment(monkeypatch, tmp_path):
    """A device actor is handed the driver's keys (``Secrets``): its key lookup has them, while its
    environment, and so every process it starts (an adb server it restarts), does not; the repr
    names the variable only. The key has a shape no redaction pattern knows. (The cluster scenario
    checks the processes of a real farm run; this checks the actor's own environment, which
    /proc/PID/environ does not show once a process changes it.)"""
    pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[farm]')")
    from harness.client import keys as model_keys
    from harness.client.config import ModelConfig
    from harness.farm.actor import DeviceActor, Secrets

    key, var = "farm-token/0123456789=" + os.urandom(4).hex(), "FARM_ONLY_TEST_KEY"
    monkeypatch.setattr(model_keys, "_PROVIDED_KEYS", {})  # where key_for reads them
    monkeypatch.delenv(var, raising=False)

    from types import SimpleNamespace

    from harness.device import phone_lock

    # the actor holds the phone's lock and journals it (no prepare: nothing reaches a phone)
    monkeypatch.setenv(phone_lock.LOCKS_ENV, str(tmp_path / "locks"))
    monkeypatch.setenv("CRATE_HARNESS_STATE", str(tmp_path / "state"))

    class Config:
        def open(self, serial: str) -> SimpleNamespace:
            return SimpleNamespace(serial=serial, host="127.0.0.1", port=9, kind=lambda: "phone")

    before = dict(os.environ)
    try:
        actor = DeviceActor.__ray_actor_class__("s1", Config(), None, Secrets({var: key}), "hostA/s1")
        env_after = dict(os.environ)
    finally:
        os.environ.pop(var, None)  # what a regression would have left behind
    assert actor.close()["failed"] == [] and actor.device.serial == "s1" and env_after == before
    assert model_keys.key_for(ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=var)).key == key
    child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ.get({var!r}))"],
                           capture_output=True, text=True, check=True).stdout
    assert child.strip() == "None"
    assert key not in repr(Secrets({var: key})) and var in repr(Secrets({var: key}))
