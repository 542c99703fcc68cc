"""A Ray farm on this machine for tests and benchmarks: a head node and "hosts", each host a Ray
node started with Ray's own CLI (``ray start --address HEAD --block``), with its own adb server
(``ANDROID_ADB_SERVER_PORT`` in the node's environment, which reaches its workers) and its own
simulated phones in their own processes. A host can be killed at once, every process of its Ray
node with it, as a host that loses power.

Ray binds to the machine's outward address unless it runs in a network namespace that has only
loopback, so everything here must run inside one (:func:`in_own_netns`, :func:`netns_problem`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.device.adb_server import AdbServer, free_port
from tests.faults.helpers import ROOT, SMALL_SIZE, SimProc, write_suite

RAY = str(Path(sys.executable).with_name("ray"))
NODE_START_S = 240.0  # a Ray node on a busy 2-core machine takes 10-20 s; several at once, longer
# Ports `ray start --head` gives a node's own parts unless told otherwise (ray/scripts/scripts.py: the
# dashboard's DEFAULT_DASHBOARD_PORT, the dashboard agent's DEFAULT_DASHBOARD_AGENT_LISTEN_PORT, the
# client server 10001, worker ports 10002-19999); Ray refuses to start a head whose GCS port is one of
# them (ray/_private/parameter.py, update_pre_selected_port: "is trying to use a port number ... that
# is used by other components"). A fresh-clone run drew 52365 as its free port: the head exited at once.
RAY_CLIENT_SERVER_PORT, RAY_WORKER_PORTS = 10001, range(10002, 20000)


def gcs_port() -> int:
    """A free port for the head's GCS that is none of the ports Ray keeps for a node's own parts."""
    from ray._private import ray_constants

    taken = {ray_constants.DEFAULT_DASHBOARD_PORT, ray_constants.DEFAULT_DASHBOARD_AGENT_LISTEN_PORT,
             RAY_CLIENT_SERVER_PORT}
    while True:
        port = free_port()
        if port not in taken and port not in RAY_WORKER_PORTS:
            return port


def netns_problem() -> str | None:
    """Why a network namespace of our own cannot be made here (None when it can)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip (util-linux, iproute2) is not installed"
    try:
        p = subprocess.run(["unshare", "--net", "--fork", "ip", "link", "set", "lo", "up"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"unshare --net failed: {e}"
    if p.returncode != 0:
        return f"unshare --net failed (needs root or user namespaces): {p.stderr.strip()[:200]}"
    return None


def in_own_netns(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """Run ``argv`` inside a new network namespace whose only interface is loopback, brought up."""
    inner = "ip link set lo up && exec \"$@\""
    return subprocess.run(["unshare", "--net", "--fork", "bash", "-c", inner, "netns", *argv], cwd=cwd,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)


def inside_own_netns() -> bool:
    """True when this process sees no interface but loopback (so Ray cannot bind elsewhere)."""
    with open("/proc/net/dev", encoding="ascii") as f:  # this namespace's interfaces (/sys is the host's)
        names = [line.split(":", 1)[0].strip() for line in f.readlines()[2:] if ":" in line]
    return names == ["lo"]


def _tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


@dataclass
class Host:
    """A Ray node with its own adb server and phones."""

    name: str
    adb: AdbServer
    phones: list[SimProc] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)  # its `ray start` command, to start it again
    starts: int = 0                                # how many times it was started

    @property
    def serials(self) -> list[str]:
        return [p.serial for p in self.phones]

    def kill(self) -> None:
        """Every process of this host's Ray node, at once (SIGKILL): the host is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return
        for pid in _tree(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)


class FarmLab:
    """``lab = FarmLab(tmp).start_head()``; ``lab.add_host('hostB', phones=2)``; ``lab.address``."""

    def __init__(self, workdir: Path, cpus_per_node: int = 1):
        if not inside_own_netns():
            raise RuntimeError("FarmLab must run inside a network namespace of its own (see in_own_netns)")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cpus = cpus_per_node
        # unix socket paths under it must stay short (108 bytes): not under pytest's tmp_path
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="crate-ray-", dir="/tmp"))
        self.port = gcs_port()
        self.address = f"127.0.0.1:{self.port}"
        self.hosts: dict[str, Host] = {}
        self.head: subprocess.Popen | None = None
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(ROOT))
        self._logs: list[Any] = []

    def _log(self, name: str) -> Any:
        f = open(self.workdir / f"{name}.log", "a")
        self._logs.append(f)
        return f

    def _log_end(self, name: str, chars: int) -> str:
        """The last ``chars`` characters written to a node's log (``ray-hostC``), '' before any."""
        for f in self._logs:
            f.flush()
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.is_file() else ""

    def log_tail(self, name: str, chars: int = 4000) -> str:
        """The end of a node's log (``ray-hostC``), for a failure message."""
        return f"\n--- {self.workdir / f'{name}.log'} (end) ---\n{self._log_end(name, chars)}"

    def start_head(self, phones: int = 0, env: dict[str, str] | None = None) -> "FarmLab":
        """The head node (GCS), itself a host with ``phones`` phones when asked."""
        host = self._host("head", phones)
        host.env = dict(self.env, **host.adb.env(), **(env or {}))
        host.proc = self.head = subprocess.Popen(
            [RAY, "start", "--head", "--block", "--port", str(self.port), "--node-name", "head",
             "--num-cpus", str(self.cpus), "--include-dashboard", "false", "--disable-usage-stats",
             "--temp-dir", str(self.ray_tmp)], env=host.env, cwd=ROOT, stdout=self._log("ray-head"),
            stderr=subprocess.STDOUT, start_new_session=True)
        self.hosts["head"] = host
        return self

    def _host(self, name: str, phones: int) -> Host:
        adb = AdbServer().start()
        host = Host(name, adb)
        for _ in range(phones):
            host.phones.append(SimProc(adb, self.workdir, size=SMALL_SIZE).start())
        return host

    def add_host(self, name: str, phones: int = 1, env: dict[str, str] | None = None) -> Host:
        """A host that joins the cluster with its own adb server and phones (returns at once; see
        :meth:`wait_nodes`)."""
        host = self._host(name, phones)
        host.env = dict(self.env, **host.adb.env(), **(env or {}))
        host.argv = [RAY, "start", "--block", "--address", self.address, "--node-name", name, "--num-cpus",
                     str(self.cpus), "--disable-usage-stats"]
        self.hosts[name] = host
        self._start(host)
        return host

    def _start(self, host: Host) -> None:
        host.starts += 1
        host.proc = subprocess.Popen(host.argv, env=host.env, cwd=ROOT, stdout=self._log(f"ray-{host.name}"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def _last_lines(self, name: str, n: int = 6) -> str:
        """The last ``n`` non-empty lines of a node's log, one message (a CI log keeps few lines)."""
        lines = [line.strip() for line in self._log_end(name, 6000).splitlines() if line.strip()]
        return " | ".join(lines[-n:]) or "its log is empty"

    def alive_nodes(self) -> list[str]:
        """Names of the nodes the cluster holds alive (asked of the head by a driver of our own)."""
        import ray

        if not ray.is_initialized():
            ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        return sorted(n.get("NodeName") for n in ray.nodes() if n.get("Alive"))

    def wait_nodes(self, names: list[str], timeout: float = NODE_START_S) -> None:
        """Until every named node is alive in the cluster (a node joining is a state, not a delay)."""
        deadline = time.monotonic() + timeout
        want = sorted(names)
        alive: list[str] = []
        while time.monotonic() < deadline:
            # ray.init waits for a GCS that never comes without end (a head that exited: 13 minutes of
            # "Failed to get cluster ID" in a fresh-clone run), so the cluster is asked only while its
            # head runs and listens; a head that exited is said below at once, with its log
            alive = self.alive_nodes() if self._head_listens() else []
            if all(n in alive for n in want):
                return
            for n in want:
                h = self.hosts.get(n)
                if h is None or h.proc is None or h.proc.poll() is None or n in alive:
                    continue
                # A node's `ray start --block` exits 1 when any of its processes exits unexpectedly
                # (Ray's scripts.py), before it joined as well. CI lost a bench row that way once under
                # load (stop 41, its log not shown): a node that never joined is started again, once,
                # and said; a second exit, or a head's, is an error with the log's last lines.
                why = f"ray node {n} exited with {h.proc.returncode} before it joined"
                if n != "head" and h.starts < 2:
                    print(f"farm lab: {why}; starting it again ({self._last_lines(f'ray-{n}')})", file=sys.stderr)
                    self._start(h)
                    continue
                raise RuntimeError(f"{why}; see {self.workdir}/ray-{n}.log: {self._last_lines(f'ray-{n}')}")
            time.sleep(0.5)
        raise RuntimeError(f"nodes {want} not alive after {timeout:g}s (alive: {alive})")

    def _head_listens(self) -> bool:
        """Whether the cluster can be asked: a driver of ours is connected, or the head's process runs
        and its GCS port accepts a connection."""
        import ray

        if ray.is_initialized():
            return True
        if self.head is None or self.head.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Every host killed (never `ray stop`: it would end every Ray process of the machine, not of
        this namespace), its phones and adb server stopped."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        for host in reversed(list(self.hosts.values())):
            host.kill()
            for p in host.phones:
                p.stop()
            host.adb.stop()
        for f in self._logs:
            f.close()
        shutil.rmtree(self.ray_tmp, ignore_errors=True)

    def __enter__(self) -> "FarmLab":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def copies(path: Path, task: str, n: int, prefix: str | None = None, instruction: str | None = None) -> Path:
    """A suite of ``n`` copies of one task of tasks/sim, each with its own id (``PREFIX_NN``) and
    instruction (``INSTRUCTION (copy NN)``), so that a scripted model can tell the episodes apart."""
    import yaml

    write_suite(path, [task])
    [t] = yaml.safe_load(path.read_text(encoding="utf-8"))
    tasks = [{**t, "id": f"{prefix or task}_{i:02d}", "instruction": f"{instruction or t['instruction']} (copy {i:02d})",
              "safety": {"label": "safe"}} for i in range(n)]
    path.write_text(yaml.safe_dump(tasks, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path
