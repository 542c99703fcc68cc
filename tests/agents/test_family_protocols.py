"""Each family's release, as its official documents have it: the prompts the three UI-TARS agents
send (UI-TARS-1.5's released text byte for byte, by its sha256), the Qwen versions' action lists and
history forms, what the manifest records per variant, a reply cut off at max_tokens, and
AndroidWorld's ``clear_text``."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import agents  # noqa: F401  (registers the agents)
from agents import m3a, uitars
from harness.core.actions import TypeText
from harness.core.episode import EpisodeContext, Observation
from harness.client.config import ModelConfig
from harness.core.registry import AGENTS
from harness.sim.phone import SimPhone
from harness.core.tasks import Task
from tests.agents.drivers import QWEN_ENUM, TARS15_RELEASED_SHA256, TARS_V1_ACTIONS
from tests.fakes.model_server import Reply, ScriptedModelServer

SCREEN = (1080, 2400)


def model(url: str, **kw: Any) -> ModelConfig:
    return ModelConfig(base_url=url, model="test-model", max_retries=0, timeout_s=10, **kw)


def one_step(name: str, opts: dict[str, Any], reply: Reply, max_tokens: int = 1024) -> tuple[Any, list[dict[str, Any]]]:
    phone = SimPhone(*SCREEN)
    phone.reset()
    with ScriptedModelServer([reply]) as srv:
        agent = AGENTS.build(name, {**opts, "model": model(srv.base_url, max_tokens=max_tokens)})
        agent.reset(EpisodeContext(task=Task(id="t", instruction="Turn off Wi-Fi.", reference_steps=3),
                                   screen_size=SCREEN, seed=0, device_serial="x"))
        out = agent.step(Observation(step=1, screenshot=phone.screencap_png(), screen_size=SCREEN,
                                     hierarchy=phone.hierarchy_xml, instruction="Turn off Wi-Fi.", language="en"))
    return out, list(srv.requests)


# --- the UI-TARS family ------------------------------------------------------------------------------
def test_uitars_15_sends_its_released_prompt_byte_for_byte() -> None:
    """Built from the ui-tars package's constant by the notation swap; equal to the released text."""
    text = uitars.PROMPTS["uitars"].text
    assert hashlib.sha256(text.encode()).hexdigest() == TARS15_RELEASED_SHA256 == uitars.RELEASED_SHA256["uitars"]
    assert "<point>" not in text and "click(start_box='<|box_start|>(x1,y1)<|box_end|>')" in text


def test_each_uitars_release_sends_its_own_prompt_and_turns() -> None:
    from ui_tars.prompt import MOBILE_USE_DOUBAO

    reply = Reply("Thought: open settings\nAction: open_app(app_name='Settings')")
    for name in ("uitars", "uitars-v1", "doubao"):
        out, reqs = one_step(name, {}, reply)
        msgs = reqs[0]["messages"]
        prompt = next(m for m in msgs if m["role"] == "user")["content"][0]["text"]
        assert prompt.endswith("## User Instruction\nTurn off Wi-Fi.\n") and "Use English in `Thought` part." in prompt
        if name == "uitars":
            assert msgs[0] == {"role": "system", "content": "You are a helpful assistant."}
        else:
            assert msgs[0]["role"] == "user"  # no system turn in these releases' examples
        if name == "uitars-v1":
            assert all(a in prompt for a in TARS_V1_ACTIONS) and "direction=" not in prompt and "open_app" not in prompt
        if name == "doubao":
            assert prompt == MOBILE_USE_DOUBAO.replace("{language}", "English").replace("{instruction}", "Turn off Wi-Fi.")
        assert out.action.to_json() == {"type": "open_app", "app": "Settings"}
        spec = AGENTS.build(name, {"model": model("http://127.0.0.1:9/v1")}).spec()
        assert spec["variant"] == name and spec["prompt"]["sha256_12"] == hashlib.sha256(
            uitars.PROMPTS[name].text.encode()).hexdigest()[:12]
        assert spec["coordinate_space"] == ("resized (smart_resize, factor 28)" if name == "uitars" else "thousand (0-1000)")


def test_a_doubao_point_is_not_read_as_uitars_15_pixels() -> None:
    """The issue's failure: a Doubao model's 0-1000 point passes a 1.5 range check and lands in the
    wrong place. Each variant reads it in its own space, and 1.5 refuses the notation."""
    text = "Thought: tap\nAction: click(point='<point>892 351</point>')"
    assert uitars.parse_output(text, SCREEN, variant="doubao").to_json() == {"type": "click", "x": 963, "y": 842}
    with pytest.raises(ValueError, match="Doubao's <point>/<bbox> notation.*--agent doubao"):
        uitars.parse_output(text, SCREEN, variant="uitars")


def test_the_v1_scroll_with_two_boxes_is_the_fingers_path() -> None:
    up = uitars.parse_output("Action: scroll(start_box='(500,800)', end_box='(500,200)')", SCREEN, variant="uitars-v1")
    assert up.to_json() == {"type": "swipe", "start": [540, 1920], "end": [540, 480], "duration_ms": 600}
    # and a ground-truth swipe is written back the v1 way
    agent = AGENTS.build("uitars-v1", {"model": model("http://127.0.0.1:9/v1")})
    assert agent.history_text(up, SCREEN) == "Action: scroll(start_box='(500,800)', end_box='(500,200)')"


# --- Qwen -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["2.5", "3"])
def test_qwen_versions_declare_their_cookbooks_action_lists(version: str) -> None:
    import json
    import re

    reply = Reply('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", "status": "success"}}\n</tool_call>')
    out, reqs = one_step("qwen", {"version": version}, reply)
    system = reqs[0]["messages"][0]["content"]
    tool = json.loads(re.search(r"<tools>\n(.*)\n</tools>", system, re.S).group(1))["function"]
    assert tool["parameters"]["properties"]["action"]["enum"] == QWEN_ENUM[version]
    assert ("name_for_human" in tool) == (version == "2.5")
    assert system.startswith("You are a helpful assistant.") == (version == "2.5")
    spec = AGENTS.build("qwen", {"version": version, "model": model("http://127.0.0.1:9/v1")}).spec()
    assert spec["actions"] == QWEN_ENUM[version] and spec["options"]["max_pixels"] == 16384 * (28 if version == "2.5" else 32) ** 2


def test_qwen3_history_is_the_plain_language_action_line() -> None:
    replies = [Reply('Thought: open it.\nAction: "I tapped the Settings icon on the home screen."\n<tool_call>\n'
                     '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 500]}}\n</tool_call>'),
               Reply('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", "status": "success"}}\n</tool_call>')]
    phone = SimPhone(*SCREEN)
    phone.reset()
    with ScriptedModelServer(replies) as srv:
        agent = AGENTS.build("qwen", {"version": "3", "model": model(srv.base_url)})
        agent.reset(EpisodeContext(task=Task(id="t", instruction="x", reference_steps=3), screen_size=SCREEN, seed=0,
                                   device_serial="x"))
        for k in (1, 2):
            agent.step(Observation(step=k, screenshot=phone.screencap_png(), screen_size=SCREEN,
                                   hierarchy=phone.hierarchy_xml, instruction="x", language="en"))
    text = srv.requests[1]["messages"][1]["content"][0]["text"]  # the user turn's query and progress
    assert "Step 1: I tapped the Settings icon on the home screen.;" in text and '{"name"' not in text


# --- a reply cut off at max_tokens ------------------------------------------------------------------------
def test_a_truncated_reply_is_recorded_as_truncated_and_not_asked_again() -> None:
    cut = Reply("Thought: I will type the long message now\nAction: type(content='Dear Derek, about last ni",
                finish_reason="length")
    out, reqs = one_step("uitars", {}, cut, max_tokens=24)
    assert len(reqs) == 1
    assert out.extras["truncated"] is True and out.extras["calls"][-1]["truncated"] is True
    assert out.action is not None and any("truncated" in n for n in out.extras["parse_notes"])  # repaired, noted
    garbage = Reply("Thought: the screen shows a long list of settings and I think the next", finish_reason="length")
    out, reqs = one_step("vlm", {}, garbage, max_tokens=16)
    assert len(reqs) == 1 and out.action is None
    assert "cut off at max_tokens=16" in out.invalid and "--max-tokens" in out.invalid


# --- M3A: AndroidWorld's clear_text ---------------------------------------------------------------------
def test_m3a_clear_text_clears_the_field_first() -> None:
    phone = SimPhone(*SCREEN)
    phone.reset()
    els = m3a.elements_from_xml(phone.hierarchy_xml(), SCREEN)
    p = m3a.parse_detailed('Reason: replace it\nAction: {"action_type": "input_text", "text": "20:00", "index": 0, '
                           '"clear_text": true}', SCREEN, elements=els)
    tap, typing = p.actions
    assert tap.type == "click" and isinstance(typing, TypeText) and typing.text == "20:00" and typing.submit
    assert typing.clear is True and not any("clear_text" in n for n in p.notes)  # the field is cleared first


# --- prepare(): the same requests, started earlier ----------------------------------------------------
@pytest.mark.parametrize("name,opts", [("m3a", {}), ("vlm", {}), ("doubao", {}), ("uitars", {}),
                                       ("qwen", {"version": "3"})])
def test_prepare_changes_nothing_the_model_is_sent(name: str, opts: dict[str, Any]) -> None:
    """Three steps over changing screens, with prepare() called on each screenshot as it arrives,
    with prepare_pixels() on its pixels before that (as the runner does with raw frames), and with
    neither: the requests are identical, images included."""
    from harness.client import images as model_mod
    from harness.core.episode import CandidatePixels
    from harness.core.screenshot import Screenshot, image_of

    phone = SimPhone(*SCREEN)
    phone.reset()
    shots = []
    for app in ("Settings", "Clock", "Notes"):
        phone.keyevent("HOME")
        phone.launch(phone.resolve_app(app))
        shots.append((phone.screencap_png(), phone.hierarchy_xml()))
    reply = (Reply('Reason: next.\nAction: {"action_type": "navigate_home"}') if name == "m3a" else
             Reply('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Home"}}'
                   "\n</tool_call>") if name == "qwen" else Reply("Thought: next\nAction: press_home()"))
    sent = {}
    for way in ("pixels", "prepare", "inline"):
        model_mod.clear_encode_cache()
        with ScriptedModelServer([reply]) as srv:
            agent = AGENTS.build(name, {**opts, "model": model(srv.base_url)})
            agent.reset(EpisodeContext(task=Task(id="t", instruction="Look around.", reference_steps=3),
                                       screen_size=SCREEN, seed=0, device_serial="x"))
            for k, (png, xml) in enumerate(shots, start=1):
                shot = png
                if way == "pixels":  # a raw frame: its pixels first, then the PNG that carries them
                    pixels = image_of(png).convert("RGB")
                    agent.prepare_pixels(CandidatePixels(step=k, pixels=pixels, screen_size=SCREEN,
                                                         hierarchy=lambda xml=xml: xml))
                    shot = Screenshot(png, image=pixels)
                obs = Observation(step=k, screenshot=shot, screen_size=SCREEN, hierarchy=lambda xml=xml: xml,
                                  instruction="Look around.", language="en")
                if way != "inline":
                    agent.prepare(obs)
                out = agent.step(obs)
                assert out.action is not None
                if way != "inline" and name == "m3a":
                    assert out.extras["prepared"] is True  # the step used what prepare() made
        sent[way] = [r["messages"] for r in srv.requests]
    assert sent["pixels"] == sent["prepare"] == sent["inline"] and len(sent["inline"]) >= 3
