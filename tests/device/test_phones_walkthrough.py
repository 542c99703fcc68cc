"""docs/phones.md, line by line: every shell block of the page is run in order, as written, in a
fresh folder (with ``tasks/android`` in it, as in a checkout), against the simulated phone playing a
Pixel 8 (``harness sim serve --as-phone``) attached to a private adb server. Only these are changed:
the port of the page's simulated phone (6520) for a free one, the two model endpoints for a scripted
stand-in, where SPA-Bench's CSVs are (``../shared/reference/spa-bench/``), and the viewer's port.
A block the page marks ``<!-- walkthrough: not run (why) -->`` is left out (a pairing code, a GPU,
another machine); every other command must end with exit 0, and what the page says it prints, it
prints. A command ending in ``&`` runs in the background until the end; one whose comment says
"until Ctrl-C" is stopped with Ctrl-C once it serves."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from harness.device.adb_server import free_port, wait_port
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.judges.helpers import good_reply
from tests.shared_data import reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "phones.md"
NOT_RUN = re.compile(r"<!-- walkthrough: not run \((.+)\) -->")
PAGE_PORT = "6520"
ENDPOINTS = ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1")
SPA = "../shared/reference/spa-bench/"
FINISH = "Thought: the task needs nothing more.\nAction: finished()"  # UI-TARS-1.5's mobile template

pytestmark = pytest.mark.slow


@dataclass
class Command:
    section: str
    line: str       # as the page writes it (continuations joined)
    comment: str    # what the page says after '#'


def page_commands(text: str) -> tuple[list[Command], list[tuple[str, str]]]:
    """The page's shell commands in order, and the blocks it marks as not run (section, why)."""
    commands, skipped = [], []
    section, before, block = "", "", None
    for raw in text.splitlines():
        if raw.startswith("## "):
            section = raw[3:].strip()
        if block is None:
            if raw.strip() == "```bash":
                why = NOT_RUN.fullmatch(before.strip())
                block = [] if why is None else None
                if why is not None:
                    skipped.append((section, why.group(1)))
                    block = "skip"
            elif raw.strip():
                before = raw
            continue
        if raw.strip() == "```":
            if block != "skip":
                joined = "\n".join(block).replace("\\\n", " ")
                for line in joined.splitlines():
                    parts = re.split(r"\s{2,}#\s?", line, maxsplit=1)
                    cmd, comment = parts[0], parts[1] if len(parts) > 1 else ""
                    if cmd.strip():
                        commands.append(Command(section, re.sub(r"\s+", " ", cmd.strip()), comment))
            block, before = None, ""
            continue
        if block != "skip":
            block.append(raw)
    return commands, skipped


def test_the_page_is_read_as_the_test_runs_it():
    commands, skipped = page_commands(PAGE.read_text(encoding="utf-8"))
    lines = [c.line for c in commands]
    assert "harness adb --path" in lines and "harness devices restore" in lines
    assert any(line.startswith("harness sim serve --port 6520 --as-phone") and line.endswith("&") for line in lines)
    assert not any(line.startswith(("adb ", "vllm ")) for line in lines)  # adb is `harness adb`; vLLM is not run
    assert {why for _, why in skipped} >= {"needs a GPU machine; the test serves a scripted stand-in at these two "
                                           "addresses", "needs a phone's pairing code"}


def _reply(req: dict) -> Reply:
    """Judges and the gate (structured output) get valid verdicts; the agent says it is done."""
    return Reply(good_reply(req) if req.get("response_format") else FINISH)


def test_docs_phones_md_runs_line_by_line_on_the_pixel_persona(adb, sim_process, tmp_path):
    spa = reference("spa-bench", "single-app-ENG.csv")  # skips, naming it, where the shared data is absent
    commands, _ = page_commands(PAGE.read_text(encoding="utf-8"))
    phone = sim_process("--as-phone")  # the phone plugged in over USB
    work, env = page_folder(tmp_path, adb.port)
    port = str(free_port())
    background: list[subprocess.Popen] = []
    try:
        with ScriptedModelServer(_reply) as model:
            seen = walk(PAGE.name, commands, work, env, int(port), background,
                        lambda line: (line.replace(PAGE_PORT, port).replace(SPA, f"{spa.parent}/")
                                      .replace(ENDPOINTS[0], model.base_url).replace(ENDPOINTS[1], model.base_url)))
    finally:
        for b in background:
            b.terminate()
            b.wait(10)
        adb.disconnect(f"127.0.0.1:{port}")
    print("\n".join(f"$ {line}\n{said.strip()[:1500]}\n" for line, said in seen))  # the newcomer's transcript
    out = dict(seen)

    def said(cmd: str) -> str:
        return next(v for k, v in seen if k.startswith(cmd))

    assert said("harness adb --path").strip().endswith("adb")
    assert phone in said("harness adb devices")
    assert "phone" in said("harness devices") and "Pixel 8" in said("harness devices")
    assert "35 tasks" in said("harness tasks list --suite tasks/android")
    first = said("harness run --suite tasks/android --tasks android_settings_dark_theme")
    assert f"{phone} (phone): prepared: global stay_on_while_plugged_in" in first, first
    assert f"{phone}: put back 5 value(s)" in first and "2 episodes in runs/phone1" in first, first
    assert "retrying" not in first and "not installed" not in first, first
    assert "serving" in said("harness view runs/phone1")
    assert "nothing to restore" in out["harness devices restore"]
    assert "150 tasks in tasks/spa" in said("harness tasks list --suite tasks/spa")
    assert f"connected to 127.0.0.1:{port}" in said("harness adb connect 127.0.0.1:6520")
    assert said("grep '\"pm\", \"clear\"' cmds.jsonl").strip() == "0"
    android = said("harness run --suite tasks/android --tasks android_calendar_dentist")
    assert (f"skipped android_calendar_dentist: needs com.google.android.calendar, not installed on 127.0.0.1:{port}"
            in android), android
    assert "android_clock_alarm_7am" in android and "1 episodes in runs/try-android" in android, android


def page_folder(tmp_path: Path, adb_port: int) -> tuple[Path, dict[str, str]]:
    """A fresh folder with ``tasks/android`` in it (as in a checkout), and the environment the
    page's commands run in: this test's adb server, a state folder of its own, the harness on PATH."""
    work = tmp_path / "work"
    (work / "tasks").mkdir(parents=True)
    (work / "tasks" / "android").symlink_to(ROOT / "tasks" / "android")
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(adb_port), "CRATE_HARNESS_STATE": str(tmp_path / "state"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("ANDROID_ADB_SERVER_ADDRESS", None)
    return work, env


def walk(page: str, commands: list[Command], work: Path, env: dict, port: int, background: list[subprocess.Popen],
         replace: Callable[[str], str]) -> list[tuple[str, str]]:
    """Run a page's commands in order in ``work``, each as written but for ``replace`` (ports,
    endpoints): one ending in ``&`` in the background (appended to ``background``, waited for on
    ``port``), one whose comment says "until Ctrl-C" stopped once it serves, every other asserted to
    exit 0 with no traceback. (line as written, what it printed) for each."""
    seen: list[tuple[str, str]] = []
    for c in commands:
        line = replace(c.line)
        if line.endswith("&"):
            background.append(subprocess.Popen(["bash", "-c", f"exec {line[:-1]}"], cwd=work, env=env,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(port, 60)
            seen.append((c.line, "(serving in the background)"))
            continue
        if "until Ctrl-C" in c.comment:
            seen.append((c.line, _serve_then_interrupt(f"{line} --port 0", work, env)))
            continue
        p = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        said = p.stdout + p.stderr
        assert p.returncode == 0, f"docs/{page} ({c.section}): `{c.line}` exited {p.returncode}:\n{said}"
        assert "Traceback" not in said, f"docs/{page} ({c.section}): `{c.line}`:\n{said}"
        seen.append((c.line, said))
    return seen


def _serve_then_interrupt(line: str, cwd: Path, env: dict) -> str:
    """Start a command that serves until Ctrl-C, fetch what it serves, then press Ctrl-C."""
    p = subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        first = p.stdout.readline()
        url = re.search(r"https?://\S+", first)
        assert url, f"`{line}` did not say where it serves: {first!r}"
        with urllib.request.urlopen(url.group(0), timeout=30) as r:
            assert r.status == 200
        os.killpg(p.pid, signal.SIGINT)
        rest, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode in (0, 130), f"`{line}` ended {p.returncode} on Ctrl-C: {first}{rest}"
    return first + rest
