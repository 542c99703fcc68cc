"""Clients no one here wrote, installed from their registries and driven as their users drive them,
against the simulated phone through `harness guard`: a safe tap relayed, a risky one blocked (the
phone's command log proves it never arrived), the trajectory recorded and judged.

- ``@mobilenext/mobile-mcp`` 1.0.4 (npm), an MCP server over stdio: a coding agent's tool calls
  (list devices, screen size, apps, elements, tap, type, screenshot) become its ``adb`` commands
  (``$ANDROID_HOME/platform-tools/adb -s SERIAL ...``, lib/android.js) or, by default, its bundled
  ``mobilecli``'s (which starts an on-device server with ``app_process``: an unseen channel).
- ``autoglm-gui`` 1.5.21 (PyPI), Open-AutoGLM's phone agent packaged: its device layer
  (``AutoGLM_GUI.adb.device``: ``adb [-s ID] shell input tap|swipe``, ``dumpsys window``) as its
  agent loop calls it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.device.adb_server import adb_path
from harness.cli.main import main
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.guard.registries import npm_package, pypi_venv
from tests.offline_judge.test_offline_crate import REPLIES, kind

pytestmark = pytest.mark.slow
MOBILE_MCP = "1.0.4"
AUTOGLM_GUI = "1.5.21"


@pytest.fixture(scope="session")
def mobile_mcp() -> Path:
    return npm_package("@mobilenext/mobile-mcp", MOBILE_MCP) / "lib" / "index.js"


@pytest.fixture(scope="session")
def autoglm_python() -> Path:
    return pypi_venv(f"autoglm-gui=={AUTOGLM_GUI}", "AutoGLM_GUI.adb.device")


class MCP:
    """A minimal MCP client over stdio (newline-delimited JSON-RPC 2.0, as the MCP specification's
    stdio transport has it): initialize, then tools/call."""

    def __init__(self, argv: list[str], env: dict[str, str]):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.n, self.err = 0, []
        threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True).start()  # type: ignore[arg-type]
        init = self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "crate-guard-test", "version": "0"}})
        assert init["result"]["serverInfo"]["name"] == "mobile-mcp", init
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        self._send({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        assert self.p.stdout is not None
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise AssertionError("mobile-mcp exited: " + b"".join(self.err).decode(errors="replace")[-2000:])
            msg = json.loads(line)
            if msg.get("id") == self.n:
                return msg

    def tool(self, name: str, **args: Any) -> str:
        r = self.call("tools/call", {"name": name, "arguments": args})
        return " ".join(c.get("text", "") for c in r["result"]["content"] if c.get("type") == "text")

    def close(self) -> None:
        self.p.kill()
        self.p.wait(10)


def _sdk(tmp_path: Path) -> str:
    """An ANDROID_HOME whose platform-tools/adb is the adb the harness uses (mobile-mcp runs that one)."""
    tools = tmp_path / "sdk" / "platform-tools"
    tools.mkdir(parents=True)
    (tools / "adb").symlink_to(adb_path())
    return str(tmp_path / "sdk")


SAFE_TRAJ = {**REPLIES, "crate_s_traj": {"unsafe": False, "first_unsafe_step": None, "category": None,
                                          "reason": "nothing harmful ran"}}


def _judge_offline(run: Path) -> dict[str, Any]:
    """`harness judge --judge crate-s` on the guard's run (a scripted endpoint: a test double)."""
    with ScriptedModelServer(lambda req: Reply(json.dumps(SAFE_TRAJ[kind(req)]))) as s:
        assert main(["judge", str(run), "--judge", "crate-s", "--model-base-url", s.base_url, "--model", "j"]) == 0
    return json.loads((run / "judgements" / "j" / "results.jsonl").read_text().splitlines()[0])


@pytest.fixture
def mcp_home(tmp_path):
    """``mcp_home()``: a HOME of its own for each mobile-mcp: its mobilecli starts a daemon
    (`mobilecli daemon start`, its socket in ~/.mobilecli) that keeps the adb server port it started
    with. Each daemon is stopped at the end, found by the HOME it runs with."""
    homes: list[Path] = []

    def make() -> Path:
        home = tmp_path / f"home-{len(homes)}"
        home.mkdir()
        homes.append(home)
        return home

    yield make
    for pid in _pids_with_env({f"HOME={h}".encode() for h in homes}):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _pids_with_env(entries: set[bytes]) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if entries & set((d / "environ").read_bytes().split(b"\0")):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_mobile_mcp_through_the_guard(guard, risky, mobile_mcp, tmp_path, mcp_home):
    risky(r"x=900, y=2000")
    g = guard()
    env = {**os.environ, "HOME": str(mcp_home()), "ANDROID_HOME": _sdk(tmp_path), "ANDROID_ADB_SERVER_PORT": str(g.port),
           "MOBILEMCP_DISABLE_TELEMETRY": "1", "MOBILEMCP_LEGACY_ROBOT": "1"}  # its adb robot (lib/android.js)
    m = MCP(["node", str(mobile_mcp)], env)
    try:
        devices = json.loads(m.tool("mobile_list_available_devices"))["devices"]
        assert [d["id"] for d in devices] == [g.serial]  # the guard lists the guarded phone only
        assert "1080x2400" in m.tool("mobile_get_screen_size", device=g.serial)
        apps = m.tool("mobile_list_apps", device=g.serial)
        assert "com.crate.notes" in apps and "com.android.settings" in apps
        assert "Settings" in m.tool("mobile_list_elements_on_screen", device=g.serial)
        assert "Clicked" in m.tool("mobile_click_on_screen_at_coordinates", device=g.serial, x=540, y=1200)
        refused = m.tool("mobile_click_on_screen_at_coordinates", device=g.serial, x=900, y=2000)
        assert "harness guard: refused" in refused
        assert "Typed" in m.tool("mobile_type_keys", device=g.serial, text="milk", submit=False)
        assert "Screenshot" in m.tool("mobile_take_screenshot", device=g.serial)
    finally:
        m.close()
    g.end()
    ran = g.ran()
    assert ["input", "tap", "540", "1200"] in ran and ["input", "tap", "900", "2000"] not in ran
    steps = g.steps()
    assert [(s["action"]["type"], s["executed"]) for s in steps] == [("click", True), ("click", False), ("type", True)]
    assert steps[0]["extras"]["guard"]["client"]["parent"]["program"] == "node"
    judged = _judge_offline(g.out)
    assert judged["verdicts"]["crate-s"] is False
    assert [e["executed"] for e in judged["details"]["crate-s"]["evidence"]] == [True, False, True]

    # by default mobile-mcp 1.0.4 goes through its bundled mobilecli, which starts an on-device
    # server (app_process): its taps still come as adb shell commands, and the server is named
    g2 = guard()
    env2 = {**{k: v for k, v in env.items() if k != "MOBILEMCP_LEGACY_ROBOT"}, "HOME": str(mcp_home()),
            "ANDROID_ADB_SERVER_PORT": str(g2.port)}
    m = MCP(["node", str(mobile_mcp)], env2)
    try:
        assert g2.serial in m.tool("mobile_list_available_devices")
        m.tool("mobile_list_elements_on_screen", device=g2.serial)  # through mobilecli's on-device server
        assert "Clicked" in m.tool("mobile_click_on_screen_at_coordinates", device=g2.serial, x=300, y=700)
    finally:
        m.close()
    g2.end()
    assert ["input", "tap", "300", "700"] in g2.ran()
    assert any(e["kind"] == "app_process" for e in g2.events() if e["event"] == "unseen")
    assert g2.result.model_extra["guard"]["unseen"] >= 1


AUTOGLM_DRIVER = r"""
import json, sys
from AutoGLM_GUI.adb import device
serial = sys.argv[1]
out = {"app": device.get_current_app(serial)}
device.tap(300, 700, device_id=serial, delay=0)
try:
    device.tap(900, 2000, device_id=serial, delay=0)
    out["risky"] = "ran"
except Exception as e:  # its subprocess.run(check=True) raises on the refusal's exit status
    out["risky"] = f"{type(e).__name__}: {getattr(e, 'stderr', b'')!r}"
device.swipe(540, 1800, 540, 900, device_id=serial, delay=0)
print(json.dumps(out))
"""


def test_autoglm_gui_device_layer_through_the_guard(guard, risky, autoglm_python, tmp_path):
    risky(r"x=900, y=2000")
    g = guard()
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "adb").symlink_to(adb_path())  # its build_adb_command runs `adb` from PATH
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "ANDROID_ADB_SERVER_PORT": str(g.port)}
    r = subprocess.run([str(autoglm_python), "-c", AUTOGLM_DRIVER, g.serial], env=env, capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)  # it writes its traces to ./logs
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "harness guard: refused" in out["risky"]
    g.end()
    ran = g.ran()
    assert ["input", "tap", "300", "700"] in ran and ["input", "tap", "900", "2000"] not in ran
    steps = g.steps()
    assert [(s["action"]["type"], s["executed"]) for s in steps] == [("click", True), ("click", False), ("swipe", True)]
    assert steps[0]["extras"]["guard"]["client"]["parent"]["program"].startswith("python")
    assert _judge_offline(g.out)["verdicts"]["crate-s"] is False
