"""The new families' own paths through an episode on the simulated phone, the scripted server answering in
each family's format: AutoGLM's Take_over and MAI-UI's ask_user hand the phone to a person (nobody
there: the episode ends needs_user), AutoGLM's sensitive Tap asks the operator first (denied, or
nobody to ask: halted before the tap; allowed: the tap runs), its Note and Call_API are recorded and
nothing runs on the phone, and what each request holds follows the family's history form."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import agents  # noqa: F401  (registers the agents)
from harness.live.operator import Operator
from harness.client.config import ModelConfig
from harness.records import RunWriter, iter_steps
from harness.core.registry import AGENTS
from harness.run.runner import run_episode
from harness.sim.phone import SimPhone
from harness.core.tasks import load_suite
from tests.fakes.local_device import LocalSimDevice
from tests.fakes.model_server import Reply, ScriptedModelServer, request_text
from tests.live.test_ask_runner import _answer_on_page

ROOT = Path(__file__).resolve().parents[2]
TASK = {t.id: t for t in load_suite(ROOT / "tasks" / "sim").tasks}["settings_wifi_off"]


def _run(name: str, replies: list[str], tmp_path: Path, operator: Any = None, answer: str | None = None,
         opts: dict[str, Any] | None = None) -> tuple[Any, list, ScriptedModelServer, LocalSimDevice]:
    dev = LocalSimDevice(SimPhone(1080, 2400))
    with ScriptedModelServer([Reply(r) for r in replies]) as srv:
        agent = AGENTS.build(name, {**(opts or {}), "image_format": "jpeg",
                                    "model": ModelConfig(base_url=srv.base_url, model="m", max_retries=0, timeout_s=10)})
        w = RunWriter(tmp_path / "run")
        ep = w.start_episode(TASK.id)
        stop = threading.Event()
        thread = _answer_on_page(ep.path, answer, stop) if answer else None
        out = run_episode(TASK, agent, dev, ep, cap=6, operator=operator)
        stop.set()
        if thread:
            thread.join(5)
        w.close()
        srv.seen = list(srv.requests)
    return out, list(iter_steps(ep.path)), srv, dev


def _taps(dev: LocalSimDevice) -> list[dict[str, Any]]:
    return [e for e in dev.phone.events if e["type"] == "tap"]


def test_autoglm_take_over_hands_the_phone_over_and_nobody_ends_it_needs_user(tmp_path: Path) -> None:
    replies = ['<think>需要登录，请用户输入密码。</think>\n<answer>do(action="Take_over", message="请输入账号密码后交还")</answer>']
    out, steps, srv, _ = _run("autoglm", replies, tmp_path)
    assert out.status == "needs_user" and steps[0].action == {"type": "needs_user", "text": "请输入账号密码后交还"}
    assert out.handovers[0]["outcome"] == "nobody"


def test_autoglm_interact_asks_a_person_with_its_thought(tmp_path: Path) -> None:
    replies = ['<think>有两个同名联系人，请用户选择。</think>\n<answer>do(action="Interact")</answer>']
    out, steps, _, _ = _run("autoglm", replies, tmp_path)
    assert out.status == "needs_user" and steps[0].action == {"type": "needs_user", "text": "有两个同名联系人，请用户选择。"}


@pytest.mark.parametrize("decision", [None, "deny", "allow"])
def test_autoglm_sensitive_tap_asks_the_operator_before_it_runs(tmp_path: Path, decision: str | None) -> None:
    """Open-AutoGLM asks for confirmation before a Tap with a message and ends the task when refused
    (actions/handler.py _handle_tap): here the operator is asked, and denied or nobody to ask halts
    the episode before the tap reaches the phone."""
    tap = '<think>点击支付。</think>\n<answer>do(action="Tap", element=[500,500], message="支付订单")</answer>'
    done = '<think>完成</think><answer>finish(message="已支付")</answer>'
    operator = Operator(30, page=True) if decision else None
    out, steps, _, dev = _run("autoglm", [tap, done], tmp_path, operator=operator, answer=decision)
    if decision == "allow":
        assert out.status == "finished" and steps[0].executed and len(_taps(dev)) == 1
        assert steps[0].extras["confirmed"]["decision"] == "allow" and steps[0].extras["confirmed"]["text"] == "支付订单"
    else:
        assert out.status == "halted" and not steps[0].executed and not _taps(dev)
        assert out.halt["category"] == "sensitive_action" and out.halt["monitor"] == "agent"
        assert out.halt["reason"] == "支付订单"
        assert out.halt["operator"]["by"] == ("page" if decision else "nobody")


def test_autoglm_note_and_call_api_are_recorded_and_nothing_runs(tmp_path: Path) -> None:
    replies = ['<think>记下页面内容。</think>\n<answer>do(action="Note", message="True")</answer>',
               '<think>总结。</think>\n<answer>do(action="Call_API", instruction="总结已记录的价格")</answer>',
               '<think>完成</think><answer>finish(message="没有需要做的")</answer>']
    out, steps, srv, dev = _run("autoglm", replies, tmp_path)
    assert [s.action["type"] for s in steps[:2]] == ["note", "note"] and all(s.executed for s in steps[:2])
    assert steps[1].action["text"] == "Call_API: 总结已记录的价格"
    assert not dev.phone.events or all(e["type"] not in ("tap", "swipe", "key", "text") for e in dev.phone.events)
    # the model's turn comes back as the client writes it: <think>{before do(action=}</think><answer>{from it on}</answer>
    second = srv.seen[1]["messages"]
    assert second[2] == {"role": "assistant", "content": '<think><think>记下页面内容。</think>\n<answer></think><answer>'
                                                           'do(action="Note", message="True")</answer></answer>'}
    assert sum(1 for m in second for c in (m["content"] if isinstance(m["content"], list) else [])
               if c.get("type") == "image_url") == 1  # only the current screenshot
    assert out.status == "finished"


def test_mai_ui_ask_user_hands_the_phone_over(tmp_path: Path) -> None:
    replies = ['<thinking>\nI need the PIN.\n</thinking>\n<tool_call>\n'
               '{"name": "mobile_use", "arguments": {"action": "ask_user", "text": "What is the SIM PIN?"}}\n</tool_call>']
    out, steps, _, _ = _run("mai-ui", replies, tmp_path)
    assert out.status == "needs_user" and steps[0].action == {"type": "needs_user", "text": "What is the SIM PIN?"}


def test_mai_ui_keeps_history_screenshots_as_history_n_says(tmp_path: Path) -> None:
    wait = '<thinking>\nwait\n</thinking>\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "wait"}}\n</tool_call>'
    out, steps, srv, _ = _run("mai-ui", [wait] * 4 + ['<thinking>\nend\n</thinking>\n<tool_call>\n{"name": "mobile_use", '
                                                      '"arguments": {"action": "terminate", "status": "success"}}\n</tool_call>'],
                              tmp_path)
    last = srv.seen[4]["messages"]
    images = sum(1 for m in last for c in m["content"] if isinstance(c, dict) and c.get("type") == "image_url")
    assistants = [m for m in last if m["role"] == "assistant"]
    assert images == 3 and len(assistants) == 4  # history_n 3: the last two steps' screenshots and the current one
    assert assistants[0]["content"][0]["text"] == ('<thinking>\nwait\n</thinking>\n<tool_call>\n'
                                                   '{"name":"mobile_use","arguments":{"action":"wait"}}\n</tool_call>')
    assert out.status == "finished"


def test_gui_owl_progress_holds_its_conclusions(tmp_path: Path) -> None:
    first = ('<thinking>\nOpen settings.\n</thinking>\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "open", '
             '"text": "Settings"}}\n</tool_call>\n<conclusion>\nOpened the "Settings" app.\n</conclusion>')
    end = ('<thinking>\nDone.\n</thinking>\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", '
           '"status": "success"}}\n</tool_call>\n<conclusion>\nEnded.\n</conclusion>')
    out, steps, srv, _ = _run("gui-owl", [first, end], tmp_path)
    assert out.status == "finished" and steps[0].action == {"type": "open_app", "app": "Settings"}
    assert "Step 1: Opened the Settings app.; ." in request_text(srv.seen[1])
