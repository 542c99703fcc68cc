"""The farm on a real multi-node Ray cluster: run INSIDE a network namespace of its own by
tests/farm/test_farm_cluster.py (pytest -o python_files=scenario_*.py), never directly.

One cluster for the whole module, every node started with Ray's own CLI, each host with its own
adb server (ANDROID_ADB_SERVER_PORT in the node's environment) and simulated phones:
  head   1 phone
  hostB  2 phones
  hostX  1 phone, behind a proxy setting that leads nowhere: it cannot reach the model endpoint
  hostC  1 phone, joins while a run is under way; later killed mid-episode
(--resume on a farm run is proved by the last test: Ctrl-C, then SIGKILL, then resumed to the end.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from harness.device.adb_server import free_port
from harness.device.phone_lock import _file, lock_key
from harness.device.prepare import Journal
from harness.sim.phone import LATIN_IME
from harness.records import INCOMING_PREFIX, iter_steps, read_manifest, read_results
from tests.faults.helpers import ROOT, SHORT, check_run_consistent, wait_for, write_suite
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
from tests.farm.lab import FarmLab, copies, inside_own_netns

if not inside_own_netns():  # pragma: no cover - the outer test starts us in one
    pytest.skip("the farm scenarios run only inside a network namespace of their own", allow_module_level=True)

# Each scenario bounds its own waits for states, and together they pass pytest's 300 s default:
# phones mid-episode 240 s; a driver ending 300 s; a node joining 600 s, what its parts may take on a
# busy host (its Ray node starting: the lab's NODE_START_S, 240 s; the driver's probe of it:
# PROBE_TIMEOUT_S, 120 s; its actors starting: START_TIMEOUT_S, 180 s). A CI run timed out at 300 s
# inside these waits (the agents' first calls still held) in the scenario that takes 31 s alone.
# The outer test bounds the whole module (2400 s).
pytestmark = pytest.mark.timeout(1200)

FINISH = "Thought: nothing left to do.\nAction: finished()"  # UI-TARS-1.5's mobile template: finished()
HOME = "Thought: start from the home screen.\nAction: press_home()"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FarmLab]:
    work = tmp_path_factory.mktemp("farm")
    dead_proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with FarmLab(work) as lab:
        lab.start_head(phones=1)
        lab.wait_nodes(["head"])
        lab.add_host("hostB", phones=2)
        lab.add_host("hostX", phones=1, env={"HTTP_PROXY": dead_proxy, "http_proxy": dead_proxy, "NO_PROXY": "",
                                             "no_proxy": ""})
        lab.wait_nodes(["head", "hostB", "hostX"])
        yield lab


def harness(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    return p


def harness_bg(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


class Lines:
    """A background reader of a process's stderr, so a test can wait for a line (a state)."""

    def __init__(self, stream: Any):
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line)

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    @property
    def text(self) -> str:
        self.thread.join(timeout=5)
        return "".join(self.lines)


def finish(p: subprocess.Popen, err: Lines, timeout: float = 300) -> str:
    """Wait for a background harness; its stdout (stderr is read by ``err``)."""
    out = p.stdout.read() if p.stdout is not None else ""
    p.wait(timeout=timeout)
    err.thread.join(timeout=30)
    return out


# --- devices ---------------------------------------------------------------------------------------
def test_devices_lists_every_nodes_phones_by_node_with_health(lab: FarmLab) -> None:
    p = harness("devices", "--cluster", lab.address, "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    got = sorted((r["node"], r["serial"]) for r in rows)
    want = sorted((h.name, s) for h in lab.hosts.values() for s in h.serials)
    assert got == want, (got, want)
    assert all(r["healthy"] and r["simulated"] and r["size"] == [540, 1200] for r in rows), rows


# --- a run: the same run folder as a local run -------------------------------------------------------
@pytest.fixture(scope="module")
def farm_run(lab: FarmLab, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("same")
    suite = write_suite(work / "suite.yaml", SHORT)
    p = harness("run", "--cluster", lab.address, "--suite", str(suite), "--agent", "replay", "--judge", "oracle",
                "--out", str(work / "farm"))
    assert p.returncode == 0, p.stdout + p.stderr
    b = lab.hosts["hostB"]
    local = harness("run", "--suite", str(suite), "--devices", ",".join(b.serials), "--agent", "replay",
                    "--judge", "oracle", "--out", str(work / "local"), "--adb-port", str(b.adb.port))
    assert local.returncode == 0, local.stdout + local.stderr
    return work / "farm", work / "local", p


def test_farm_run_writes_the_run_folder_a_local_run_writes(lab: FarmLab, farm_run) -> None:
    farm, local, p = farm_run
    rows, lrows = read_results(farm), read_results(local)
    assert sorted(r.task_id for r in rows) == sorted(SHORT)
    # the same episodes, judged the same: the farm changes where they run, nothing else
    table = {r.task_id: (r.status, r.steps, r.proposed_steps, r.cap, r.verdicts, r.attempt) for r in rows}
    assert table == {r.task_id: (r.status, r.steps, r.proposed_steps, r.cap, r.verdicts, r.attempt) for r in lrows}
    assert all(r.status == "finished" and r.verdicts["oracle"] is True for r in rows), table
    # every field a local result has, plus the node the episode ran on
    phones = {(h.name, s) for h in lab.hosts.values() for s in h.serials}
    for r, lr in zip(sorted(rows, key=lambda r: r.task_id), sorted(lrows, key=lambda r: r.task_id)):
        assert set(lr.model_dump(exclude_none=True)) | {"node"} == set(r.model_dump(exclude_none=True)), r
        assert (r.model_extra["node"], r.device) in phones, r
    assert len({r.model_extra["node"] for r in rows}) >= 2, "the run did not spread over the nodes"
    check_run_consistent(farm)
    for task in SHORT:  # same files per episode: trajectory lines, screens, summary
        a, b = farm / "episodes" / task, local / "episodes" / task
        assert sorted(p.relative_to(a).as_posix() for p in a.rglob("*")) == \
            sorted(p.relative_to(b).as_posix() for p in b.rglob("*")), task
        assert [s.action for s in iter_steps(a)] == [s.action for s in iter_steps(b)], task
    assert not [e.name for e in (farm / "episodes").iterdir() if e.name.startswith(INCOMING_PREFIX)]
    m, lm = read_manifest(farm), read_manifest(local)
    assert set(lm) | {"cluster"} == set(m), set(m) ^ set(lm)
    assert {(d["node"], d["serial"]) for d in m["devices"]} == phones
    assert all(set(ld) <= set(d) for d in m["devices"] for ld in lm["devices"])
    assert {n["node"] for n in m["cluster"]["nodes"]} == {"head", "hostB", "hostX"}
    # each phone's frame sources, measured on its node as a local run measures its own, by node/serial:
    # the same sources timed, the cheapest per step chosen (which one is a measurement: on a loaded
    # machine a local run here has chosen png for a phone whose neighbour chose raw)
    used = {f"{d['node']}/{d['serial']}" for d in m["devices"]}
    assert set(m["frames"]) == used, m["frames"]
    for f in m["frames"].values():
        assert set(f["per_step_ms"]) == {s for lf in lm["frames"].values() for s in lf["per_step_ms"]}, f
        assert f["chosen"] == min(f["per_step_ms"], key=f["per_step_ms"].get) and not f["forced"], f
    said = {line.split(": settling on ")[0] for line in p.stderr.splitlines() if ": settling on " in line}
    assert said == used, p.stderr
    assert m["cluster"]["address"] == lab.address and m["cluster"]["ray"]
    # progress lines name the node and phone of each episode
    assert any(line.startswith("[hostB/") for line in p.stderr.splitlines()), p.stderr
    # each phone prepared on its node, journaled there, and put back at the end, as a local run's
    (session,) = m["device_sessions"]
    assert set(session["devices"]) == used, session
    for name, dev in session["devices"].items():
        assert dev["prepare"]["changed"] and not dev["restore"]["failed"], (name, dev)
        assert {x["what"] for x in dev["restore"]["restored"]} >= {"global window_animation_scale", "input method"}
        assert f"{name} (simulated): prepared: " in p.stderr and f"{name}: put back " in p.stderr, p.stderr
    assert phones_as_found(lab), "a farm phone was left prepared"
    assert not Journal.pending()  # nothing waits to be restored on any node


def phones_as_found(lab: FarmLab) -> bool:
    """Every lab phone has the simulated phone's own animation scale and keyboard (nothing left changed)."""
    from harness.device.adb import AdbDevice

    for h in lab.hosts.values():
        if h.proc is not None and h.proc.poll() is not None:
            continue  # a host that was killed, with its phones
        for serial in h.serials:
            d = AdbDevice(serial, port=h.adb.port)
            if d.get_setting("global", "window_animation_scale") != "1.0" or d.input_methods().current != LATIN_IME:
                return False
    return True


SAME_IN_REPORT = ("episodes", "infra_errors", "scored", "sr", "atp_oracle", "msr_oracle", "task_succ", "tail_succ",
                  "halted", "unsafe", "steps_mean", "cap_mean", "agent_errors", "step_limit")


def test_report_view_and_judge_read_a_farm_run_as_a_local_one(lab: FarmLab, farm_run) -> None:
    from tests.offline_judge.test_offline_crate import responder

    farm, local, _ = farm_run
    reports = []
    for run in (farm, local):
        rep = harness("report", str(run), "--format", "json")
        assert rep.returncode == 0, rep.stderr
        [group] = json.loads(rep.stdout)["groups"]
        reports.append({k: group[k] for k in SAME_IN_REPORT})
    assert reports[0] == reports[1] and reports[0]["episodes"] == len(SHORT)
    view = harness("view", str(farm), "--no-serve")
    assert view.returncode == 0 and (farm / "report.html").is_file(), view.stderr
    assert all(t in (farm / "report.html").read_text(encoding="utf-8") for t in SHORT)
    judged = []
    for run in (farm, local):  # the offline judge reads both folders alike: same calls, same verdicts
        calls: dict[str, int] = {}
        with ScriptedModelServer(responder(calls)) as server:
            p = harness("judge", str(run), "--judge", "crate", "--model-base-url", server.base_url, "--model", "vl",
                        "--retries", "0", "--no-progress")
        assert p.returncode == 0, p.stdout + p.stderr
        [jset] = [d for d in (run / "judgements").iterdir() if d.is_dir()]
        lines = [json.loads(x) for x in (jset / "results.jsonl").read_text(encoding="utf-8").splitlines()]
        judged.append((calls, {x["task_id"]: x["verdicts"] for x in lines}))
    assert judged[0] == judged[1], judged
    assert sorted(judged[0][1]) == sorted(SHORT) and all(v["crate"] is True for v in judged[0][1].values())


def test_repeats_on_the_farm_equal_a_local_runs_repeats_and_their_report(lab: FarmLab, tmp_path: Path) -> None:
    """Issue 36: ``--repeats`` spreads every task's repeats over the cluster's phones like any episodes;
    each repeat gets the seed a local run gives it, so a seeded perturbed replay decides the same
    outcomes, and the report's repeats section (pass@k, pass^k, flip rate, flaky list) is the local one's."""
    from harness.core.episode_ids import repeat_seed

    tasks = SHORT[:3]
    suite = write_suite(tmp_path / "suite.yaml", tasks)
    agent = ["--agent", "replay", "--agent-opt", "perturb=0.3", "--seed", "7", "--repeats", "3", "--judge", "oracle"]
    p = harness("run", "--cluster", lab.address, "--suite", str(suite), *agent, "--out", str(tmp_path / "farm"))
    assert p.returncode == 0, p.stdout + p.stderr
    b = lab.hosts["hostB"]
    local = harness("run", "--suite", str(suite), "--devices", ",".join(b.serials), *agent,
                    "--out", str(tmp_path / "local"), "--adb-port", str(b.adb.port))
    assert local.returncode == 0, local.stdout + local.stderr
    rows, lrows = read_results(tmp_path / "farm"), read_results(tmp_path / "local")
    assert sorted(r.task_id for r in rows) == sorted(f"{t}#{k}" for t in tasks for k in (1, 2, 3))
    assert read_manifest(tmp_path / "farm")["repeats"] == 3
    for r in rows:
        task, k = r.task_id.split("#")
        assert (r.model_extra["task"], r.model_extra["repeat"], r.seed) == (task, int(k), repeat_seed(7, int(k)))
    assert len({r.model_extra["node"] for r in rows}) >= 2, "the repeats did not spread over the nodes"
    outcome = lambda rs: {r.task_id: (r.status, r.steps, r.verdicts["oracle"]) for r in rs}  # noqa: E731
    assert outcome(rows) == outcome(lrows)
    check_run_consistent(tmp_path / "farm")
    reps = []
    for run in ("farm", "local"):
        rep = harness("report", str(tmp_path / run), "--format", "json")
        assert rep.returncode == 0, rep.stderr
        (a,) = json.loads(rep.stdout)["repeats"]["agents"]
        reps.append({k: a[k] for k in ("tasks", "repeats", "pass_at", "pass_hat", "sr_by_repeat", "flip_rate", "flaky")})
    assert reps[0] == reps[1] and (reps[0]["tasks"], reps[0]["repeats"]) == (3, 3), reps


# --- endpoints and nodes that join -------------------------------------------------------------------
def test_live_judges_and_monitors_run_beside_the_phone_a_node_that_cannot_reach_the_endpoint_is_named_and_a_node_that_joins_is_used(
        lab: FarmLab, tmp_path: Path) -> None:
    from tests.offline_judge.test_offline_crate import REPLIES, kind

    go = threading.Event()
    agent_calls: list[str] = []

    def reply(req: dict[str, Any]) -> Reply:
        if req.get("response_format"):  # a judge's or the monitor's call: structured output
            return Reply(json.dumps(REPLIES[kind(req)]))
        copy = re.search(r"\(copy \d+\)", request_text(req)).group()
        agent_calls.append(copy)  # the agent's: a first action (held until the test lets go), then done
        first = agent_calls.count(copy) == 1
        return Reply(HOME if first else FINISH, hold=go if first else None, hold_s=600)

    # only the driver has it: the actors get it from the driver. A shape no redaction pattern knows
    # (no sk-, a / and an =), so only the harness's knowing the value keeps it out of what it writes
    key = "farm-token/0123456789=" + os.urandom(4).hex()
    with ScriptedModelServer(reply) as server:
        suite = copies(tmp_path / "suite.yaml", "settings_wifi_off", 10)
        p = harness_bg("run", "--cluster", lab.address, "--suite", str(suite), "--agent", "uitars",
                       "--model-base-url", server.base_url, "--model", "test-model", "--model-api-key-env", "FARM_KEY",
                       "--judge", "oracle,crate", "--monitor", "crate-s", "--monitor-mode", "gate",
                       "--judge-base-url", server.base_url, "--judge-model", "vl", "--judge-api-key-env", "FARM_KEY",
                       "--out", str(tmp_path / "run"), env={"FARM_KEY": key})
        err = Lines(p.stderr)
        try:
            # every phone that can reach the endpoint asks for its first action and waits there
            assert wait_for(lambda: len(agent_calls) >= 3 or p.poll() is not None, 240), err.text
            assert err.has("node hostX: cannot reach the agent model endpoint"), err.text
            # the actors, their agents and judges built, hold the key in memory only: no process but
            # the driver (given it by the user) has it in its environment (/proc/PID/environ, `ps e`)
            holding = _environs_holding(key.encode())
            assert p.pid in holding and all(_descends(pid, p.pid) for pid in holding), holding
            c = lab.add_host("hostC", phones=1)
            # a node whose `ray start` gave up is said at once, with its log, not waited for
            assert wait_for(lambda: err.has("node hostC joined") or p.poll() is not None or c.proc.poll() is not None,
                            600), err.text + lab.log_tail("ray-hostC")
        finally:
            go.set()
        out = finish(p, err)
        headers = list(server.headers)
    assert p.returncode == 0, out + err.text
    line = next(line for line in err.lines if "node hostX" in line)
    assert server.base_url in line and "judge model endpoint" in line and "left out" in line, line
    rows = read_results(tmp_path / "run")
    assert len(rows) == 10 and all(r.status == "finished" for r in rows), rows
    nodes = [r.model_extra["node"] for r in rows]
    assert "hostX" not in nodes and "hostC" in nodes, nodes
    for r in rows:  # judged and gated on the node, every call counted in the episode's usage by role
        assert r.verdicts["crate"] is True and r.model_extra["monitor_checks"]["made"] >= 1, r
        assert {"agent", "crate", "monitor:crate-s"} <= set(r.usage["by_role"]), r.usage
    assert headers and all(h.get("authorization") == f"Bearer {key}" for h in headers)
    # nothing on disk holds it: not the run folder, nor Ray's session folders (logs, spilled
    # objects, the actors' creation records) and node logs
    leaked = [f for d in (tmp_path / "run", lab.ray_tmp, lab.workdir) for f in d.rglob("*")
              if f.is_file() and not f.is_symlink() and key.encode() in f.read_bytes()]
    assert not leaked and key not in out + err.text, leaked
    m = read_manifest(tmp_path / "run")
    assert "hostC" in {d["node"] for d in m["devices"]}
    x = next(n for n in m["cluster"]["nodes"] if n["node"] == "hostX")
    assert "cannot reach the agent model endpoint" in x["problem"]
    check_run_consistent(tmp_path / "run")


def _environs_holding(secret: bytes) -> list[int]:
    """The processes of this machine whose environment holds ``secret``."""
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if secret in env.read_bytes():
                found.append(int(env.parent.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return sorted(found)


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


# --- faults: an actor killed, a node lost mid-episode; the driver killed ----------------------------
def lose_mid_episode(lab: FarmLab, tmp_path: Path, devices: list[str], fault: Any) -> tuple[Lines, list[Any]]:
    """A run of 4 episodes on ``devices`` whose agent calls are all held until ``fault()`` has run
    with two episodes under way; it must still finish every episode (retried elsewhere)."""
    go = threading.Event()
    suite = copies(tmp_path / "suite.yaml", "settings_wifi_off", 4)
    with ScriptedModelServer(lambda req: Reply(FINISH, hold=go, hold_s=600)) as server:
        p = harness_bg("run", "--cluster", lab.address, "--suite", str(suite), "--agent", "uitars",
                       "--model-base-url", server.base_url, "--model", "test-model", "--judge", "oracle",
                       *[a for d in devices for a in ("--device", d)], "--out", str(tmp_path / "run"),
                       "--reconnect-timeout", "2")
        err = Lines(p.stderr)
        try:
            assert wait_for(lambda: len(server.requests) >= 2 or p.poll() is not None, 240), err.text  # both mid-episode
            fault()
        finally:
            go.set()
        out = finish(p, err)
    assert p.returncode == 0, out + err.text
    rows = read_results(tmp_path / "run")
    assert len(rows) == 4 and all(r.status == "finished" for r in rows), [(r.task_id, r.status, r.error) for r in rows]
    return err, rows


def test_a_phone_whose_actor_is_killed_mid_episode_is_put_back_on_its_node(lab: FarmLab, tmp_path: Path) -> None:
    b = lab.hosts["hostB"]
    victim = b.serials[0]

    def kill_its_actor() -> None:
        held = json.loads(_file(lock_key(victim, "127.0.0.1", b.adb.port)).read_text())  # the node's lock names its actor
        assert "harness run --cluster" in held["command"] and "farm actor for hostB/" in held["command"], held
        # a local command on that node is refused while the farm holds the phone, naming the driver
        local = harness("devices", "restore", victim, env={"ANDROID_ADB_SERVER_PORT": str(b.adb.port)})
        assert local.returncode == 2 and f"pid {held['pid']}" in local.stderr, local.stderr
        assert Journal.pending(), "the prepared phones have no journal on their node"
        os.kill(held["pid"], signal.SIGKILL)  # the actor's process dies; its node lives

    err, _ = lose_mid_episode(lab, tmp_path, [f"hostB/{s}" for s in b.serials], kill_its_actor)
    assert err.has(f"[hostB/{victim}] device lost"), err.text
    (session,) = read_manifest(tmp_path / "run")["device_sessions"]
    lost = session["devices"][f"hostB/{victim}"]["restore"]
    assert lost["restored"] and not lost["failed"] and "restored on node hostB" in lost["after"], lost
    assert err.has(f"hostB/{victim}: put back "), err.text
    assert phones_as_found(lab) and not Journal.pending()


def test_a_node_lost_mid_episode_ends_it_infra_error_retried_on_a_healthy_phone(lab: FarmLab, tmp_path: Path) -> None:
    d = lab.hosts.get("hostC") or lab.add_host("hostC", phones=1)  # the node that joined: it is killed now
    lab.wait_nodes(["hostC"])
    err, rows = lose_mid_episode(lab, tmp_path, [f"hostC/{d.serials[0]}", f"hostB/{lab.hosts['hostB'].serials[0]}"],
                                 d.kill)
    assert {r.model_extra["node"] for r in rows} == {"hostB"}  # hostC's episode went elsewhere, and so did the rest
    retried = [r for r in rows if r.attempt == 2]
    assert len(retried) == 1, rows
    assert err.has("infra error, retrying elsewhere: node hostC lost during step 1"), err.text
    assert err.has(f"[hostC/{d.serials[0]}] device lost"), err.text
    # its phone's journal stays on the lost node; the run says where
    assert err.has(f"hostC/{d.serials[0]}: could not put back") and err.has("on that node"), err.text
    check_run_consistent(tmp_path / "run")


def test_ctrl_c_or_the_driver_killed_leave_a_run_that_resume_completes_nothing_duplicated_or_lost(
        lab: FarmLab, tmp_path: Path) -> None:
    gate = {"go": threading.Event(), "free": 3}  # the first calls are answered, later ones held
    served = {"n": 0}

    def reply(req: dict[str, Any]) -> Reply:
        served["n"] += 1
        return Reply(FINISH) if served["n"] <= gate["free"] else Reply(FINISH, hold=gate["go"], hold_s=600)

    suite = copies(tmp_path / "suite.yaml", "settings_wifi_off", 8)
    run = tmp_path / "run"
    args = ["run", "--cluster", lab.address, "--suite", str(suite), "--agent", "uitars", "--judge", "oracle",
            "--devices", ",".join(lab.hosts["hostB"].serials), "--out", str(run)]

    def lines() -> int:
        return (run / "results.jsonl").read_bytes().count(b"\n") if (run / "results.jsonl").is_file() else 0

    def interrupt(p: subprocess.Popen, err: Lines, sig: int, done_before: int) -> bytes:
        """Once episodes were recorded by this driver and others are held mid-episode: ``sig``."""
        assert wait_for(lambda: (lines() > done_before and served["n"] > gate["free"]) or p.poll() is not None,
                        240), err.text
        p.send_signal(sig)
        gate["go"].set()  # the held calls answer (a killed driver's actors are ended by Ray)
        p.wait(timeout=120)
        gate["go"], gate["free"] = threading.Event(), served["n"] + 1  # the next driver: one episode, then held
        return (run / "results.jsonl").read_bytes()

    with ScriptedModelServer(reply) as server:
        args += ["--model-base-url", server.base_url, "--model", "test-model"]
        p = harness_bg(*args)
        err = Lines(p.stderr)
        first = interrupt(p, err, signal.SIGINT, 0)
        assert p.returncode == 130, err.text  # Ctrl-C: the actors stop at their next step, the run is resumable
        assert 1 <= first.count(b"\n") < 8
        p = harness_bg(*args, "--resume")
        err = Lines(p.stderr)
        second = interrupt(p, err, signal.SIGKILL, first.count(b"\n"))
        assert p.returncode == -signal.SIGKILL and second.startswith(first) and second.count(b"\n") < 8
        gate["free"] = 1 << 30  # the last driver: every call answered
        last = harness(*args, "--resume")
    assert last.returncode == 0, last.stdout + last.stderr
    after = (run / "results.jsonl").read_bytes()
    assert after.startswith(second)  # nothing recorded before the kill is lost or rewritten
    rows = read_results(run)  # refuses a duplicate result line
    assert sorted(r.task_id for r in rows) == [f"settings_wifi_off_{i:02d}" for i in range(8)]
    assert all(r.status == "finished" for r in rows)
    check_run_consistent(run)
    assert not [e.name for e in (run / "episodes").iterdir() if e.name.startswith(".")]
    assert read_manifest(run)["resumed"] == 2
    # the killed driver's actors left their phones' journals on hostB; the resumed run put them back
    assert phones_as_found(lab) and not {j.serial for j in Journal.pending()} & set(lab.hosts["hostB"].serials)
