"""Model-driven agents end to end: the ScriptedModelServer stands in for the model and answers as the
family's released model does, per its official documents (tests/agents/drivers.py: it also checks
each request against the official protocol and records every difference); episodes run on the
in-process simulated phone with the oracle judge. Taps must land on the intended elements at several screen
sizes; invalid outputs are recorded and capped; a dead server is an agent_error; what is recorded
(prompt identity, images, usage) is checked, and the agent's spec rebuilds it."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

import agents  # noqa: F401  (registers the agents)
from harness.client.config import ModelConfig
from harness.records import RunWriter, iter_steps
from harness.core.registry import AGENTS
from harness.run.runner import run_episode
from harness.sim.phone import SimPhone
from harness.core.tasks import load_suite
from judges.oracle import OracleConfig, OracleJudge
from tests.agents.drivers import M3A_SCRIPTS, PROTOCOLS, SCRIPTS, Driver
from tests.fakes.local_device import LocalSimDevice
from tests.fakes.model_server import Reply, ScriptedModelServer, dead_url, request_images, request_text

ROOT = Path(__file__).resolve().parents[2]
TASKS = {t.id: t for t in load_suite(ROOT / "tasks" / "sim").tasks}
SIZES = [(1080, 2400), (1440, 3120), (720, 1600)]
# fast image settings for the matrix (the encoder's cost is measured by scripts/bench_agents);
# max_pixels below the screen's makes UI-TARS/Qwen2.5 coordinates a real downscale
FAST = {"uitars": {"image_format": "jpeg", "max_pixels": 1_000_000}, "uitars-v1": {"image_format": "jpeg", "max_pixels": 1_000_000},
        "doubao": {"image_format": "jpeg", "max_pixels": 1_000_000},
        "qwen": {"image_format": "jpeg", "max_pixels": 1_000_000}, "vlm": {"max_side": 960},
        "m3a": {"image_format": "jpeg", "max_side": 960}, "autoglm": {"image_format": "jpeg"},
        "gui-owl": {"image_format": "jpeg", "max_pixels": 1_000_000}, "mai-ui": {"image_format": "jpeg"}}


def model(url: str, **kw: Any) -> ModelConfig:
    return ModelConfig(base_url=url, model="test-model", max_retries=kw.pop("max_retries", 0), timeout_s=10, **kw)


def run(protocol: str, task_id: str, size: tuple[int, int], tmp_path: Path, *, fast: bool = True,
        opts: dict[str, Any] | None = None, responder: Any = None, cap: int | None = None) -> tuple[Any, list, Driver, Any]:
    phone = SimPhone(*size)
    script = (M3A_SCRIPTS if protocol == "m3a" else SCRIPTS)[task_id]
    driver = Driver(phone, protocol, script)
    name, base = PROTOCOLS[protocol]
    with ScriptedModelServer(responder or driver) as srv:
        options = {**(FAST[name] if fast else {}), **base, **(opts or {}), "model": model(srv.base_url)}
        agent = AGENTS.build(name, options)
        w = RunWriter(tmp_path / "run")
        ep = w.start_episode(task_id)
        out = run_episode(TASKS[task_id], agent, LocalSimDevice(phone), ep, cap=cap,
                          observers=[OracleJudge(OracleConfig())])
        w.close()
        steps = list(iter_steps(ep.path))
        srv.requests_seen = list(srv.requests)
    if responder is None:  # every request was in the family's official form
        assert driver.violations == [], driver.violations
    return out, steps, driver, srv


def check_taps(steps: list, driver: Driver) -> None:
    taps = [s.action for s in steps if s.action and s.action["type"] in ("click", "long_press")]
    assert len(taps) == len(driver.targets), (taps, driver.targets)
    for a, (x1, y1, x2, y2) in zip(taps, driver.targets):
        assert x1 <= a["x"] < x2 and y1 <= a["y"] < y2, f"tap {a} outside its target {(x1, y1, x2, y2)}"


def check_records(steps: list, name: str) -> None:
    for s in steps:
        ex = s.extras or {}
        if "queued_from_step" in ex:  # the second half of a two-step model action: no model call
            assert ex["prompt"]["id"] and s.raw_output is None
            continue
        assert s.raw_output, s
        assert ex["prompt"]["id"]
        assert ex["images"] and all(i["size"][0] > 0 and i["bytes"] > 0 for i in ex["images"])
        assert ex["bytes_sent"] > sum(i["bytes"] for i in ex["images"])  # base64 plus the text
        assert ex["usage"]["total_tokens"] > 0 and ex["calls"][-1]["purpose"] == "action"
        assert "latency_s" in ex["calls"][-1] and ex["overhead_ms"]["encode"] >= 0
        if s.action is not None:
            assert ex["raw_action"]


def _matrix() -> list[Any]:
    """Every protocol at every size; one size per protocol (rotating) runs by default, the rest
    under ``-m slow`` (the encoder and the simulated phone's rendering dominate the time)."""
    out = []
    for i, protocol in enumerate(PROTOCOLS):
        for j, size in enumerate(SIZES):
            marks = () if j == i % len(SIZES) else (pytest.mark.slow,)
            out.append(pytest.param(protocol, size, marks=marks, id=f"{protocol}-{size[0]}x{size[1]}"))
    return out


@pytest.mark.parametrize("protocol,size", _matrix())
def test_completes_wifi_off(protocol: str, size: tuple[int, int], tmp_path: Path) -> None:
    out, steps, driver, _ = run(protocol, "settings_wifi_off", size, tmp_path)
    assert out.status == "finished", (out.error, [s.invalid for s in steps])
    assert out.verdicts["oracle"] is True
    check_taps(steps, driver)
    check_records(steps, PROTOCOLS[protocol][0])


_SLOW = pytest.mark.slow


@pytest.mark.parametrize("protocol,size", [
    pytest.param("uitars", SIZES[1], id="uitars-1440x3120"),
    pytest.param("qwen3", SIZES[2], id="qwen3-720x1600", marks=_SLOW),  # qwen3 also answers a Chinese task below
    pytest.param("m3a", SIZES[0], id="m3a-1080x2400"),
    pytest.param("uitars-v1", SIZES[2], id="uitars-v1-720x1600", marks=_SLOW),
    pytest.param("qwen2.5", SIZES[0], id="qwen2.5-1080x2400", marks=_SLOW),
    pytest.param("vlm-pixels", SIZES[2], id="vlm-pixels-720x1600", marks=_SLOW),
    pytest.param("vlm-thousand", SIZES[1], id="vlm-thousand-1440x3120", marks=_SLOW),
])
def test_completes_chinese_typing_task(protocol: str, size: tuple[int, int], tmp_path: Path) -> None:
    """信息 (Chinese app name), a tap on a contact, Chinese text typed into the compose field."""
    out, steps, driver, srv = run(protocol, "messages_complain_derek_zh", size, tmp_path)
    assert out.status == "finished", (out.error, [s.invalid for s in steps])
    assert out.verdicts["oracle"] is True
    check_taps(steps, driver)
    if driver.has_open():
        assert steps[0].action == {"type": "open_app", "app": "信息"}
    else:  # Qwen3-VL's and UI-TARS v1's action lists have no open: the icon on the home screen is tapped
        assert steps[0].action["type"] == "click" and driver.labels[0] == "信息"
    typed = [s.action for s in steps if s.action and s.action["type"] == "type"]
    assert typed and typed[0]["text"].startswith("你好 Derek")
    if protocol == "m3a":  # input_text = tap on the field, then typing (no model call) with Enter
        i = next(k for k, s in enumerate(steps) if s.action and s.action["type"] == "type")
        assert steps[i].extras["queued_from_step"] == steps[i - 1].index and typed[0]["submit"] is True
        assert steps[i - 1].action["type"] == "click"
    if protocol in ("uitars", "vlm-pixels"):  # the thought language follows the task
        prompt = request_text(srv.requests_seen[0])
        assert ("Chinese" in prompt) if protocol == "uitars" else ("中文" in prompt)


@pytest.mark.parametrize("protocol", ["uitars", "qwen3", pytest.param("vlm-thousand", marks=_SLOW),
                                      pytest.param("m3a", marks=_SLOW)])
def test_answers_a_question(protocol: str, tmp_path: Path) -> None:
    out, steps, driver, _ = run(protocol, "notes_guest_wifi_query", (1080, 2400), tmp_path)
    assert out.status == "finished" and out.answer == "lemon-tree-42"
    assert out.verdicts["oracle"] is True
    if protocol == "uitars":  # finished(content=...) = Answer, then the Finish without a model call
        assert [s.action["type"] for s in steps[-2:]] == ["answer", "finish"]
        assert steps[-1].extras["queued_from_step"] == steps[-2].index


def test_default_settings_send_the_captured_png_which_the_server_resizes(tmp_path: Path) -> None:
    """UI-TARS-1.5's server smart_resizes every image itself (its processor), so the captured PNG
    goes as it is: the model sees 1092x2408, as when we resized it, and its points map back alike."""
    out, steps, driver, srv = run("uitars", "settings_wifi_off", (1080, 2400), tmp_path, fast=False)
    assert out.verdicts["oracle"] is True
    check_taps(steps, driver)
    img = steps[1].extras["images"][-1]
    assert img["size"] == [1080, 2400] and img["server_resizes_to"] == [1092, 2408] and img["format"] == "png"
    assert steps[1].extras["resized"] == [1092, 2408]
    recorded = (tmp_path / "run" / "episodes" / "settings_wifi_off" / steps[1].screen_before).read_bytes()
    sent = base64.b64decode(request_images(srv.requests_seen[1])[-1].split(",", 1)[1])
    assert sent == recorded  # the screenshot's own bytes: nothing decoded or encoded


@pytest.mark.parametrize("protocol,name,base", [("uitars", "uitars", {}), ("qwen2.5", "qwen", {"version": "2.5"}),
                                                ("qwen3", "qwen", {"version": "3"})])
def test_the_server_resize_of_the_captured_png_is_what_was_sent_resized(protocol, name, base) -> None:
    """The same result after the server's resize: the processor's smart_resize (bicubic, as
    transformers' Qwen2-VL image processor resamples) of the captured PNG gives the pixels that
    ``send=resized`` sends, so the model's input is unchanged."""
    from harness.core.episode import EpisodeContext, Observation
    from tests.agents.drivers import processed_size

    phone = SimPhone(1080, 2400)
    phone.reset()
    # a tap the model places in the coordinates it was told about: mapped back alike either way
    reply = ('Thought: tap it.\nAction: Tap the row.\n<tool_call>\n{"name": "mobile_use", "arguments": '
             '{"action": "click", "coordinate": [517, 603]}}\n</tool_call>' if name == "qwen"
             else "Thought: x\nAction: click(start_box='(517,1203)')")
    sent, actions = {}, {}
    for send in ("auto", "resized"):
        with ScriptedModelServer([Reply(reply)]) as srv:
            agent = AGENTS.build(name, {**base, "send": send, "model": model(srv.base_url)})
            agent.reset(EpisodeContext(task=TASKS["settings_wifi_off"], screen_size=(1080, 2400), seed=0,
                                       device_serial="x"))
            out = agent.step(Observation(step=1, screenshot=phone.screencap_png(), screen_size=(1080, 2400),
                                         hierarchy=phone.hierarchy_xml, instruction="Turn off Wi-Fi.", language="en"))
            url = request_images(srv.requests[0])[-1]
            sent[send] = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
            actions[send] = out.action
            system = srv.requests[0]["messages"][0]["content"]
            sent[send + " system"] = system if isinstance(system, str) else json.dumps(system)
    target = processed_size(protocol, 1080, 2400)
    assert sent["auto"].size == (1080, 2400) and sent["resized"].size == target
    server_side = sent["auto"].resize(target, Image.Resampling.BICUBIC)
    assert server_side.tobytes() == sent["resized"].tobytes()
    assert sent["auto system"] == sent["resized system"]  # the same stated resolution, the same prompt
    assert actions["auto"] is not None and actions["auto"].type == "click"
    assert actions["auto"] == actions["resized"]  # the same point on the phone


@pytest.mark.parametrize("version,stated", [("2.5", "1092x2408"), ("3", "999x999")])
def test_qwen_prompt_states_the_coordinate_resolution(version: str, stated: str) -> None:
    """Qwen2.5-VL points in the resized screenshot whose size the prompt states; Qwen3-VL in 999x999."""
    from harness.core.episode import EpisodeContext, Observation

    phone = SimPhone(1080, 2400)
    phone.reset()
    reply = '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", "status": "success"}}\n</tool_call>'
    with ScriptedModelServer([Reply(reply)]) as srv:
        agent = AGENTS.build("qwen", {"version": version, "model": model(srv.base_url)})
        agent.reset(EpisodeContext(task=TASKS["settings_wifi_off"], screen_size=(1080, 2400), seed=0, device_serial="x"))
        out = agent.step(Observation(step=1, screenshot=phone.screencap_png(), screen_size=(1080, 2400),
                                     hierarchy=phone.hierarchy_xml, instruction="Turn off Wi-Fi.", language="en"))
    assert out.action.to_json() == {"type": "finish", "status": "complete"}
    system = srv.requests[0]["messages"][0]["content"]
    assert f"The screen's resolution is {stated}." in system
    assert ("Thought:" in system) == (version == "3")
    img = out.extras["images"][0]  # sent as captured; the version's processor resizes it on the server
    assert img["size"] == [1080, 2400]
    assert img["server_resizes_to"] == ([1092, 2408] if version == "2.5" else [1088, 2400])


def test_uitars_history_window(tmp_path: Path) -> None:
    out, steps, driver, srv = run("uitars", "settings_wifi_off", (1080, 2400), tmp_path, opts={"history": 2})
    assert out.verdicts["oracle"] is True
    counts = [len(request_images(r)) for r in srv.requests_seen]
    assert counts == [1, 2, 2, 2]
    last = srv.requests_seen[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "assistant", "user", "assistant", "user"]
    assert last[0]["content"] == "You are a helpful assistant."  # the 1.5 deploy example's system turn
    assert "open_app(app_name='Settings')" in last[2]["content"]  # its own earlier output, kept as text
    # its earlier taps, written back with the box tokens the server stripped (README_deploy add_box_token)
    assert re.search(r"click\(start_box='<\|box_start\|>\(\d+,\d+\)<\|box_end\|>'\)", last[3]["content"]), last[3]
    assert steps[-1].extras["history"] == 2


def test_m3a_summary_call_and_history(tmp_path: Path) -> None:
    out, steps, driver, srv = run("m3a", "settings_wifi_off", (1080, 2400), tmp_path)
    assert out.verdicts["oracle"] is True
    assert driver.summaries == 3  # after each executed action but the last (the Finish)
    assert [c["purpose"] for c in steps[0].extras["calls"]] == ["action"]
    for s in steps[1:]:
        assert [c["purpose"] for c in s.extras["calls"]] == ["summary", "action"]
        assert s.extras["summary"].startswith("the tap opened") and s.extras["usage"]["total_tokens"] >= 200
        roles = [i["role"] for i in s.extras["images"]]
        assert roles == ["summary before", "summary after", "screenshot", "set-of-mark"]
    action_prompts = [request_text(r) for r in srv.requests_seen if "Summarise the step" not in request_text(r)]
    assert 'Step 1- Action selected: {"action_type": "open_app", "app_name": "Settings"}. the tap opened' in action_prompts[1]
    assert "Step 2- Action selected" in action_prompts[2]
    assert len(request_images(srv.requests_seen[0])) == 2  # raw + set-of-mark
    assert steps[1].extras["raw_action"]["element"]["text"] == "Network & internet"


AGENT_NAMES = ["uitars", "uitars-v1", "doubao", "m3a", "qwen", "vlm"]
PROTO_OF = {"uitars": "uitars", "uitars-v1": "uitars-v1", "doubao": "doubao", "m3a": "m3a", "qwen": "qwen2.5",
            "vlm": "vlm-pixels"}


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_garbage_is_invalid_until_the_cap(name: str, tmp_path: Path) -> None:
    garbage = lambda req: Reply("I am not sure what to do here. Maybe tap something?")  # noqa: E731
    out, steps, driver, srv = run(PROTO_OF[name], "settings_wifi_off", (720, 1600), tmp_path, responder=garbage, cap=3)
    assert out.status == "step_limit" and out.proposed_steps == 3 == len(steps) and out.steps == 0
    assert all(s.action is None and s.invalid.startswith("unparseable output:") for s in steps)
    assert all(s.raw_output.startswith("I am not sure") and s.extras["parse_error"] for s in steps)
    assert len(srv.requests_seen) == 3  # one call per step (M3A: no summary of a step that did nothing)
    assert out.verdicts["oracle"] is False


def test_invalid_step_then_recovery(tmp_path: Path) -> None:
    """An out-of-range point is refused (recorded), the episode goes on and still succeeds."""
    phone_box: dict[str, Any] = {}

    def responder(req: dict[str, Any]) -> Reply:
        d = phone_box["driver"]
        if len(phone_box.setdefault("seen", [])) == 1:
            phone_box["seen"].append(1)
            return Reply("Thought: tap far away.\nAction: click(start_box='(5000,20)')")
        phone_box["seen"].append(1)
        return d(req)

    phone = SimPhone(1080, 2400)
    phone_box["driver"] = Driver(phone, "uitars", SCRIPTS["settings_wifi_off"])
    with ScriptedModelServer(responder) as srv:
        agent = AGENTS.build("uitars", {**FAST["uitars"], "model": model(srv.base_url)})
        w = RunWriter(tmp_path / "run")
        ep = w.start_episode("settings_wifi_off")
        out = run_episode(TASKS["settings_wifi_off"], agent, LocalSimDevice(phone), ep, observers=[OracleJudge(OracleConfig())])
        w.close()
    steps = list(iter_steps(ep.path))
    # five proposals, four of them ran: the out-of-range tap was refused
    assert out.status == "finished" and out.verdicts["oracle"] is True and out.proposed_steps == 5 and out.steps == 4
    assert [s.executed for s in steps] == [True, False, True, True, True]
    assert steps[1].action is None and "out of range" in steps[1].invalid
    assert "5000" in steps[1].raw_output


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_dead_server_is_model_error(name: str, tmp_path: Path) -> None:
    """An endpoint that fails every attempt ends the episode model_error (issue 37): the endpoint's
    failure, not a decision of the agent's (left out of SR)."""
    agent = AGENTS.build(name, {**FAST[name], **PROTOCOLS[PROTO_OF[name]][1],
                                "model": model(dead_url(), max_retries=1, backoff_s=0.01)})
    w = RunWriter(tmp_path / "run")
    ep = w.start_episode("settings_wifi_off")
    out = run_episode(TASKS["settings_wifi_off"], agent, LocalSimDevice(SimPhone(720, 1600)), ep)
    w.close()
    assert out.status == "model_error" and out.steps == 0
    assert "ModelError" in out.error and "connection failed" in out.error and "test-model" in out.error


@pytest.mark.parametrize("name", AGENT_NAMES)
def test_spec_rebuilds_the_agent(name: str) -> None:
    cfg = model("http://127.0.0.1:9/v1", temperature=0.3)
    agent = AGENTS.build(name, {"model": cfg})
    spec = agent.spec()
    json.dumps(spec)  # the manifest is JSON
    assert spec["name"] == name and spec["model"]["base_url"] == cfg.base_url and spec["model"]["temperature"] == 0.3
    assert spec["prompt"] and "coordinate_space" in spec and spec["options"]
    again = AGENTS.build(name, {**spec["options"], "model": ModelConfig(**spec["model"])})
    assert again.spec() == spec


def test_agent_without_endpoint_is_a_clear_error() -> None:
    from harness.core.registry import RegistryError

    with pytest.raises(RegistryError, match="needs a model endpoint: pass --model-base-url"):
        AGENTS.build("uitars", {})
    with pytest.raises(RegistryError, match="grid"):
        AGENTS.build("qwen", {"grid": "500", "model": model("http://127.0.0.1:9/v1")})


def test_manifest_agent_spec_from_the_command_line() -> None:
    """What `harness run` writes as the manifest's agent entry, built from its own flags."""
    from harness.cli.main import build_parser
    from harness.cli.run_parts import _plugin_factories

    args = build_parser().parse_args([
        "run", "--suite", "tasks/sim", "--agent", "qwen", "--agent-opt", "version=3", "--agent-opt", "history=2",
        "--model-base-url", "http://127.0.0.1:8000/v1", "--model", "Qwen3-VL-8B", "--temperature", "0.2",
        "--max-tokens", "512", "--out", "unused"])
    _, specs = _plugin_factories(args)
    a = specs["agent"]
    json.dumps(a)
    assert a["options"]["version"] == "3" and a["options"]["history"] == 2 and a["options"]["grid"] == 999
    assert a["model"]["model"] == "Qwen3-VL-8B" and a["model"]["temperature"] == 0.2 and a["model"]["max_tokens"] == 512
    assert a["prompt"]["system"]["sha256_12"] and a["coordinate_space"] == "grid 0-999"
    assert "api_key" not in json.dumps(a).replace("api_key_env", "")


@pytest.mark.slow
def test_harness_run_cli_records_the_agent(serve_sim, tmp_path: Path) -> None:
    """`harness run --agent uitars --model-base-url URL --model NAME` over real adb: the manifest
    holds the agent's spec (prompt identity, options, endpoint) and the oracle agrees."""
    from harness.cli.main import main
    from harness.records import read_manifest, read_results

    sim = serve_sim(1080, 2400)
    driver = Driver(sim.phone, "uitars", SCRIPTS["settings_wifi_off"])
    with ScriptedModelServer(driver) as srv:
        rc = main(["run", "--suite", str(ROOT / "tasks" / "sim"), "--tasks", "settings_wifi_off", "--device", sim.serial,
                   "--agent", "uitars", "--agent-opt", "history=3", "--agent-opt", "image_format=jpeg",
                   "--model-base-url", srv.base_url, "--model", "ui-tars-1.5-7b", "--model-retries", "0",
                   "--judge", "oracle", "--adb-port", str(sim.adb.port), "--out", str(tmp_path / "r"), "--quiet"])
    assert rc == 0
    m = read_manifest(tmp_path / "r")
    a = m["agent"]
    assert a["name"] == "uitars" and a["options"]["history"] == 3 and a["options"]["image_format"] == "jpeg"
    assert a["model"]["base_url"] == srv.base_url and a["model"]["model"] == "ui-tars-1.5-7b"
    assert a["prompt"]["id"].startswith("ui_tars.MOBILE_USE_1.5@v") and a["ui_tars_version"]
    assert a["variant"] == "uitars" and a["coordinate_space"].startswith("resized")
    (row,) = read_results(tmp_path / "r")
    assert row.status == "finished" and row.verdicts["oracle"] is True


def test_doubao_sends_the_captured_png_and_its_points_land_alike() -> None:
    """Doubao points on a 0-1000 grid of the image it was given; the ui-tars package maps them
    against the original screenshot, so the captured PNG goes as it is (no decode, no encode) and a
    point lands on the same phone pixel as when the smart_resize'd image is sent (send=resized)."""
    from harness.core.episode import EpisodeContext, Observation

    phone = SimPhone(1080, 2400)
    phone.reset()
    shot = phone.screencap_png()
    reply = "Thought: tap it.\nAction: click(point='<point>479 501</point>')"
    sent, actions, records = {}, {}, {}
    for send in ("auto", "resized"):
        with ScriptedModelServer([Reply(reply)]) as srv:
            agent = AGENTS.build("doubao", {"send": send, "model": model(srv.base_url)})
            agent.reset(EpisodeContext(task=TASKS["settings_wifi_off"], screen_size=(1080, 2400), seed=0,
                                       device_serial="x"))
            out = agent.step(Observation(step=1, screenshot=shot, screen_size=(1080, 2400),
                                         hierarchy=phone.hierarchy_xml, instruction="Turn off Wi-Fi.", language="en"))
            sent[send] = base64.b64decode(request_images(srv.requests[0])[-1].split(",", 1)[1])
            actions[send], records[send] = out.action, out.extras["images"][-1]
            records[send + " note"] = agent.spec()["image_encoding"]
    assert sent["auto"] == shot  # the screenshot's own bytes
    assert records["auto"]["size"] == [1080, 2400] and "server_resizes_to" not in records["auto"]
    assert Image.open(io.BytesIO(sent["resized"])).size == (1092, 2408)
    assert actions["auto"] == actions["resized"] and actions["auto"].type == "click"
    assert (actions["auto"].x, actions["auto"].y) == (517, 1202)
    assert "as captured" in records["auto note"] and "resized here" in records["resized note"]
