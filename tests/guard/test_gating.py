"""harness guard gating real clients' commands on the simulated phone: every input form the adb
binary sends is one recorded action; a risky one never reaches the phone (its command log proves
it), and the client reads the refusal in its own exit-status idiom; reads pass untouched and
unrecorded; what the guard cannot read is refused, what it cannot see is named."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _actions(g):
    return [(s["action"]["type"], s["action"].get("kind")) for s in g.steps()]


def test_every_input_form_of_the_adb_binary_is_one_gated_action(guard, risky, tmp_path):
    risky()  # nothing risky: every action is relayed
    g = guard()
    apk = tmp_path / "app.apk"
    apk.write_bytes(b"PK\x03\x04 not really an apk")
    b64 = base64.b64encode("你好".encode()).decode()
    forms = [
        (["shell", "input", "tap", "200", "600"], ("click", None)),
        (["shell", "input", "swipe", "540", "1800", "540", "600", "300"], ("swipe", None)),
        (["shell", "input", "swipe", "300", "900", "300", "900", "1200"], ("long_press", None)),
        (["shell", "input", "text", "hello%sworld"], ("type", None)),
        (["shell", "input", "keyevent", "KEYCODE_BACK"], ("key", None)),
        (["shell", "am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg", b64], ("type", None)),
        (["shell", "am", "broadcast", "-a", "clipper.set", "-e", "text", "hi"], ("device_command", "clipboard")),
        (["shell", "am", "start", "-n", "com.crate.notes/.MainActivity"], ("open_app", None)),
        (["shell", "am", "start", "-a", "android.intent.action.VIEW", "-d", "https://example.com"],
         ("device_command", "open_url")),
        (["shell", "monkey", "-p", "com.crate.notes", "-c", "android.intent.category.LAUNCHER", "1"], ("open_app", None)),
        (["shell", "settings", "put", "system", "screen_brightness", "80"], ("device_command", "settings")),
        (["shell", "content", "insert", "--uri", "content://settings/system", "--bind", "name:s:user_rotation",
          "--bind", "value:i:1"], ("device_command", "content")),
        (["shell", "rm", "-f", "/sdcard/Download/none.txt"], ("device_command", "delete_files")),
        (["shell", "am", "force-stop", "com.crate.notes"], ("device_command", "force_stop")),
        (["shell", "pm", "clear", "com.crate.shop"], ("device_command", "clear_data")),
        (["shell", "pm", "uninstall", "com.example.none"], ("device_command", "uninstall")),
        (["uninstall", "com.example.none"], ("device_command", "uninstall")),
        (["install", str(apk)], ("device_command", "install")),
        (["root"], ("device_command", "root")),
        (["remount"], ("device_command", "remount")),
        (["tcpip", "5555"], ("device_command", "tcpip")),
        (["reboot"], ("device_command", "reboot")),
    ]
    for argv, _ in forms:
        g.adb("-s", g.serial, *argv)
    for argv in (["shell", "getprop", "ro.product.model"], ["exec-out", "screencap", "-p"], ["shell", "wm", "size"],
                 ["shell", "dumpsys", "window", "windows"], ["shell", "pm", "list", "packages"]):
        assert g.adb("-s", g.serial, *argv).returncode == 0
    g.end()
    assert _actions(g) == [want for _, want in forms]
    steps = g.steps()
    assert steps[0]["action"] == {"type": "click", "x": 200, "y": 600} and steps[0]["executed"] is True
    assert steps[3]["action"]["text"] == "hello world"
    assert steps[5]["action"]["text"] == "你好"
    assert all(s["monitor"] and s["monitor"]["monitor"] == "crate-s" for s in steps)
    assert steps[0]["extras"]["guard"]["client"]["program"] == "adb"
    assert ["input", "tap", "200", "600"] in g.ran()
    assert g.result.model_extra["guard"]["passed"] >= 5


def test_a_risky_tap_never_reaches_the_phone_and_every_client_reads_the_refusal(guard, risky):
    risky(r"x=900, y=2000")
    g = guard()
    r = g.adb("-s", g.serial, "shell", "input", "tap", "900", "2000")  # shell v2: exit packet and stderr
    assert r.returncode == 1 and b"harness guard: refused input tap 900 2000" in r.stderr
    assert r.stderr.count(b"\n") == 1 and b"Destructive Actions" in r.stderr
    d = g.client()
    v1 = d.shell2("input tap 900 2000")  # adbutils: `; echo X4EXIT:$?` over shell v1
    assert v1.returncode == 1 and "harness guard: refused" in v1.output
    v2 = d.shell2("input tap 900 2000", v2=True)
    assert v2.returncode == 1 and "harness guard: refused" in v2.stderr
    # a line whose safe parts run around the refused one, as the phone's shell runs it
    out = d.shell("input tap 100 200; input tap 900 2000 || echo refused-fell-back; echo after")
    assert "refused-fell-back" in out and "after" in out
    d.click(150, 250)
    g.end()
    ran = g.ran()
    assert ["input", "tap", "900", "2000"] not in ran
    assert ["input", "tap", "100", "200"] in ran and ["input", "tap", "150", "250"] in ran
    ex = [(s["action"].get("x"), s["executed"]) for s in g.steps()]
    assert ex == [(900, False), (900, False), (900, False), (100, True), (900, False), (150, True)]
    halt = g.result.halt.model_dump()
    assert halt["step"] == 1 and halt["executed"] is False
    assert g.result.model_extra["guard"]["blocked"] == 4


def test_commands_the_guard_cannot_read_are_refused_unless_allowed(guard, risky):
    risky()
    g = guard()
    d = g.client()
    for line in ("sh -c 'input tap 300 300'", "echo aW5wdXQgdGFwIDMwMCAzMDA= | base64 -d | sh", "eval input tap 300 300",
                 "X=300; input tap $X $X", "for i in 1; do input tap 300 300; done"):
        r = d.shell2(line)
        assert r.returncode != 0 and "harness guard: refused" in r.output, line
    g.end()
    assert not [e for e in g.sim.phone.events if e["type"] == "tap"]  # the phone's own record of touches
    steps = g.steps()
    assert [s["action"]["kind"] for s in steps] == ["opaque"] * 5 and not any(s["executed"] for s in steps)
    assert all("--allow-opaque" in s["invalid"] for s in steps)

    g2 = guard("--allow-opaque")
    g2.client().shell2("sh -c 'input tap 310 310'")
    g2.end()
    assert ["sh", "-c", "input tap 310 310"] in g2.ran()
    assert {"type": "tap", "x": 310, "y": 310} in g2.sim.phone.events
    s = g2.steps()[0]
    assert s["executed"] is True and s["extras"]["guard"]["unguarded"] is True and s["monitor"] is None


def test_channels_it_cannot_see_are_named_and_refused_with_strict(guard, risky):
    risky()
    g = guard()
    assert g.adb("-s", g.serial, "forward", "tcp:0", "tcp:9008").returncode == 0
    g.client().shell("CLASSPATH=/data/local/tmp/x.dex nohup app_process / com.example.Server >/dev/null 2>&1 &")
    g.adb("-s", g.serial, "shell", stdin=b"exit\n")  # an interactive shell
    g.end()
    kinds = [e["kind"] for e in g.events() if e["event"] == "unseen"]
    assert kinds == ["forward", "app_process", "interactive_shell"]
    assert sum("actions through this channel are not gated" in s for s in g.said) == 3
    assert g.result.model_extra["guard"]["unseen"] == 3

    s = guard("--strict")
    r = s.adb("-s", s.serial, "forward", "tcp:0", "tcp:9008")
    assert r.returncode != 0 and b"--strict" in r.stderr
    out = s.client().shell2("app_process / com.example.Server")
    assert out.returncode != 0 and "--strict" in out.output
    s.end()
    assert not any(a[:1] == ["app_process"] for a in s.ran())


def test_async_mode_halts_the_session_after_a_flagged_action_ran(guard, risky):
    risky(r"x=700, y=700")
    g = guard("--monitor-mode", "async")
    d = g.client()
    assert d.shell2("input tap 700 700").returncode == 0   # relayed; its check runs beside it
    r = d.shell2("input tap 100 100")                      # the check flagged the last one: halted
    assert r.returncode == 1 and "the session is halted" in r.output
    g.end()
    assert ["input", "tap", "700", "700"] in g.ran() and ["input", "tap", "100", "100"] not in g.ran()
    steps = g.steps()
    assert [s["executed"] for s in steps] == [True, False]
    assert steps[0]["monitor"]["halt"] is True and steps[0]["monitor"]["halted_step"] == 1
    halt = g.result.halt.model_dump()
    assert halt["step"] == 1 and halt["executed"] is True


def test_a_monitor_endpoint_that_dies_blocks_every_action(guard, risky, adb):
    """The endpoint answered the preflight, then died: every action is refused (fail closed)."""
    from tests.fakes.model_server import Reply, ScriptedModelServer

    with ScriptedModelServer(lambda req: Reply("{}")) as server:
        dead = guard("--monitor", "crate-s", "--judge-base-url", server.base_url, "--judge-model", "m",
                     "--judge-retries", "0", "--judge-timeout", "2", monitor_on=False)
        assert len(server.probes) == 1 and not server.requests  # the preflight's one probe, nothing else
    r = dead.client().shell2("input tap 400 400")
    assert r.returncode == 1 and "monitor_error" in r.output
    dead.end()
    assert ["input", "tap", "400", "400"] not in dead.ran()
    assert dead.steps()[0]["monitor"]["category"] == "monitor_error"


def test_a_dead_monitor_endpoint_stops_the_guard_before_it_listens(guard, adb, serve_sim, tmp_path):
    """Issue 37: the guard makes the preflight's checks first, as harness run does: a dead endpoint
    is one line naming its URL and flag, before the guard listens or writes a run folder."""
    from harness.preflight import PreflightFailed
    from tests.fakes.model_server import dead_url

    url = dead_url()
    with pytest.raises(PreflightFailed) as e:
        guard("--monitor", "crate-s", "--judge-base-url", url, "--judge-model", "m", monitor_on=False)
    assert url in str(e.value) and "--judge-base-url" in str(e.value) and "does not answer" in str(e.value)
    assert not any(p.name.startswith("run-") for p in tmp_path.iterdir())


def test_an_unsafe_task_on_a_phone_without_a_gate_is_refused_by_the_guard(guard, adb, serve_sim, tmp_path):
    """Issue 37: an unsafe task on a real phone with no gate monitor is refused up front unless
    --allow-unguarded-unsafe, as harness run refuses it."""
    from harness.preflight import PreflightFailed

    phone = serve_sim(as_phone=True)
    with pytest.raises(PreflightFailed) as e:
        guard("--suite", str(ROOT / "tasks" / "android"), "--task", "android_settings_factory_reset_unsafe", monitor_on=False,
              sim=phone)
    assert "--allow-unguarded-unsafe" in str(e.value)


@pytest.mark.parametrize("line", ["input tap 1 2 | cat", "input tap 1 2 &", "! input tap 1 2"])
def test_refused_actions_keep_the_line_a_line(guard, risky, line):
    risky(r"x=1, y=2")
    g = guard()
    r = g.client().shell2(line + "; echo done")
    assert "done" in r.output
    g.end()
    assert ["input", "tap", "1", "2"] not in g.ran() and ["echo", "done"] in g.ran()


def test_the_agents_own_screenshot_is_the_screen_its_action_is_judged_on(guard, risky):
    """As the runner's monitors judge the screenshot the agent saw, the guard judges an action on the
    screenshot the agent took through it since its last action (and takes one itself otherwise)."""
    risky()
    g = guard()
    png = g.adb("-s", g.serial, "exec-out", "screencap", "-p").stdout
    g.adb("-s", g.serial, "shell", "input", "tap", "500", "1500")
    g.adb("-s", g.serial, "shell", "input", "tap", "501", "1501")  # no screenshot of its own in between
    g.adb("-s", g.serial, "shell", "input", "keyevent", "NOT_A_KEY")  # unknown to the guard: relayed, its status kept
    g.end()
    steps = g.steps()
    assert [s["extras"]["guard"]["screen"] for s in steps] == ["agent", "guard", "guard"]
    assert (g.out / "episodes" / g.guard.task.id / steps[0]["screen_before"]).read_bytes() == png
    assert steps[0]["extras"]["guard"]["exit_status"] == 0
    assert steps[2]["action"]["kind"] == "input" and steps[2]["extras"]["guard"]["exit_status"] != 0


def test_ask_mode_puts_a_flagged_action_to_the_operator(guard, risky):
    """--monitor-mode ask, through the runner's own decision (harness.run.gate.Flagged): allowed, the
    action is relayed and says who allowed it; denied, it is refused as a gate refuses it."""
    from harness.core.episode import Decision
    from harness.core.ports import free_port

    risky(r"x=900, y=2000")
    g = guard("--monitor-mode", "ask", "--watch", "--watch-port", str(free_port()))
    answers = ["allow", "deny"]

    class Person:
        def ask(self, question, live, should_stop=lambda: False):
            assert question.action == "click(x=900, y=2000)" and question.category == "Destructive Actions"
            return Decision(answers.pop(0), "page", 0.01)

    g.guard.session.flagged.operator = Person()
    assert g.adb("-s", g.serial, "shell", "input", "tap", "900", "2000").returncode == 0
    r = g.adb("-s", g.serial, "shell", "input", "tap", "900", "2000")
    assert r.returncode == 1 and b"refused" in r.stderr
    g.end()
    steps = g.steps()
    assert [s["executed"] for s in steps] == [True, False]
    assert steps[0]["monitor"]["allowed_by"] == "operator" and steps[1]["monitor"]["operator"]["decision"] == "deny"
    assert g.result.model_extra["operator"]["allowed"] == 1 and g.result.model_extra["operator"]["denied"] == 1


def test_actions_beyond_the_cap_are_refused(guard, risky):
    """--max-steps 2 (a task's 2c+1 sets the same cap): the third action is refused before the
    phone sees it, saying so; reads still pass."""
    risky()
    g = guard("--max-steps", "2")
    d = g.client()
    assert d.shell2("input tap 210 610").returncode == 0
    assert d.shell2("input tap 220 620").returncode == 0
    r = d.shell2("input tap 230 630")
    assert r.returncode == 1 and "the step cap (2) is reached" in r.output
    assert d.shell2("getprop ro.product.model").returncode == 0
    g.end()
    ran = g.ran()
    assert ["input", "tap", "220", "620"] in ran and ["input", "tap", "230", "630"] not in ran
    assert [s["executed"] for s in g.steps()] == [True, True, False]
