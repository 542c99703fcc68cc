"""API keys of any shape stay out of everything the harness writes or prints.

The keys here match none of the redaction patterns (no ``sk-``, no ``Bearer`` before them in most
places, a ``/``, ``+`` and ``=`` inside one), so only knowing the key's value can keep it out: a
vLLM-style ``token-abc123``, sixteen hex digits, and a base64-looking key. Servers are careless on
purpose: they echo the request's Authorization header back in error bodies (a 401, a 500) and in the
text of ordinary replies. The key must still reach its own endpoint, and nothing else: not the
records (trajectory, results, evidence, judgements, the manifest), not the logs, not what is printed,
not an error message, not the live page."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.client.calls import ModelClient
from harness.client.config import ModelConfig, ModelError
from harness.client.images import user_message
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.faults.helpers import SHORT, check_run_consistent, write_suite

AGENT_KEY = "token-abc123"
JUDGE_KEY = "0123456789abcdef"
OFFLINE_KEY = "Zm9v/YmFy=cXV4+w=="
KEYS = (AGENT_KEY, JUDGE_KEY, OFFLINE_KEY)


def _forms(key: str) -> list[str]:
    """The key as it would appear in text or in a JSON string (a ``/`` may be written ``\\/``)."""
    return sorted({key, json.dumps(key)[1:-1], key.replace("/", "\\/")})


def assert_no_key(text: str | bytes, where: str) -> None:
    blob = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    for key in KEYS:
        for form in _forms(key):
            assert form not in blob, f"the key {key!r} is in {where}"


def echoing(server: Callable[[], ScriptedModelServer], reply: Callable[[dict[str, Any], str], Reply]) -> Any:
    """A responder that hands ``reply`` the Authorization header this very request carried."""
    def respond(req: dict[str, Any]) -> Reply:
        return reply(req, server().headers[-1].get("authorization", "(none)"))
    return respond


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("status", [401, 500])
def test_an_error_body_that_echoes_the_authorization_header_keeps_no_key(key, status, monkeypatch) -> None:
    monkeypatch.setenv("ANY_SHAPE_KEY", key)
    box: list[ScriptedModelServer] = []
    body = echoing(lambda: box[0], lambda req, auth: Reply(status=status, error=f"bad request; you sent "
                                                                              f"Authorization: {auth} (key {auth[7:]})"))
    with ScriptedModelServer(body) as s:
        box.append(s)
        c = ModelClient(ModelConfig(base_url=s.base_url, model="m", api_key_env="ANY_SHAPE_KEY", max_retries=1,
                                    backoff_s=0.01))
        with pytest.raises(ModelError) as e:
            c.chat([user_message("x")])
        assert s.headers and all(h["authorization"] == f"Bearer {key}" for h in s.headers)
    chain, exc = [], e.value
    while exc is not None:  # the error and every exception chained to it (a traceback prints them all)
        chain.append(str(exc) + repr(exc) + "".join(map(str, exc.args)))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    assert_no_key("\n".join(chain), f"the HTTP {status} error")
    assert f"HTTP {status}" in str(e.value)


@pytest.mark.parametrize("key", KEYS)
def test_a_reply_that_echoes_the_key_comes_back_without_it(key, monkeypatch) -> None:
    """A server that pastes the caller's credential into its answer (text and tool calls): the
    client knows its key and takes it out before anyone records the reply."""
    monkeypatch.setenv("ANY_SHAPE_KEY", key)
    box: list[ScriptedModelServer] = []
    reply = echoing(lambda: box[0], lambda req, auth: Reply(
        f"Thought: the header was {auth}, the key {auth[7:]}\nAction: press_back()",
        tool_calls=[{"name": "mobile_use", "arguments": json.dumps({"action": "type", "text": auth[7:]})}]))
    with ScriptedModelServer(reply) as s:
        box.append(s)
        res = ModelClient(ModelConfig(base_url=s.base_url, model="m", api_key_env="ANY_SHAPE_KEY",
                                      max_retries=0)).chat([user_message("x")])
    assert_no_key(res.text + json.dumps(res.tool_calls), "the reply")
    assert res.text.endswith("Action: press_back()") and res.tool_calls[0]["name"] == "mobile_use"


@pytest.mark.parametrize("key", KEYS)
def test_a_reply_body_with_the_key_in_any_field_comes_back_without_it(key, monkeypatch) -> None:
    """Every field of the result is taken from the server (the model's name, the finish reason, the
    text): the key is out of all of them, whichever the server put it in."""
    monkeypatch.setenv("ANY_SHAPE_KEY", key)
    box: list[ScriptedModelServer] = []

    def body(req: dict[str, Any], auth: str) -> Reply:
        return Reply(raw_body=json.dumps({
            "id": "x", "object": "chat.completion", "created": 0, "model": f"served-as-{auth[7:]}",
            "choices": [{"index": 0, "finish_reason": f"stop {auth[7:]}",
                         "message": {"role": "assistant", "content": f"ok {auth}"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode())

    with ScriptedModelServer(echoing(lambda: box[0], body)) as s:
        box.append(s)
        res = ModelClient(ModelConfig(base_url=s.base_url, model="m", api_key_env="ANY_SHAPE_KEY",
                                      max_retries=0)).chat([user_message("x")])
    assert_no_key(repr(res), "the result")
    assert res.model == "served-as-***redacted***" and res.text == "ok Bearer ***redacted***" and res.finish_reason == "stop ***redacted***"


def _judge_reply(req: dict[str, Any], auth: str) -> Reply:
    """A valid judge or monitor answer whose free text carries the credential it was sent."""
    from tests.judges.helpers import good_reply

    data = json.loads(good_reply(req))
    for field in ("reason", "clues", "effect"):
        if field in data:
            data[field] = f"{data[field]} (seen: {auth}, {auth[7:]})"
    return Reply(json.dumps(data))


def _get(port: int, path: str) -> bytes:
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    r = c.getresponse()
    body = r.read()
    c.close()
    assert r.status == 200, (path, r.status)
    return body


def test_keys_of_any_shape_reach_their_endpoints_and_nothing_else(adb, serve_sim, tmp_path, monkeypatch, caplog,
                                                                  capsys) -> None:
    """A run (a model agent, CRATE's evidence and verdict, the CRATE-S gate: agent and judge keys
    named), then ``harness judge`` offline with a third key: every server gets its own key and only
    it; the records, the judgements, the manifest, the logs, the printed output, the errors and the
    live page hold none of them."""
    import agents  # noqa: F401
    import judges  # noqa: F401
    from harness.cli.main import main
    from harness.live.server import LiveServer
    from harness.records import read_results

    monkeypatch.setenv("AGENT_KEY", AGENT_KEY)
    monkeypatch.setenv("JUDGE_KEY", JUDGE_KEY)
    monkeypatch.setenv("OFFLINE_KEY", OFFLINE_KEY)
    caplog.set_level(logging.DEBUG)  # the SDK's and the HTTP library's debug lines too
    phone = serve_sim(width=540, height=1200)
    calls: list[int] = []

    def agent_reply(req: dict[str, Any], auth: str) -> Reply:
        calls.append(1)
        if len(calls) <= 2:  # the first episode: a 500 that echoes it, retried once
            return Reply(status=500, error=f"upstream failed for Authorization: {auth}")
        if len(calls) == 3:  # the second (the live page's last): an answer that repeats it, then a 401
            return Reply(f"Thought: I was called with Authorization: {auth} ({auth[7:]})\nAction: press_back()")
        return Reply(status=401, error=f"invalid key {auth[7:]} in header Authorization: {auth}")

    boxes: dict[str, ScriptedModelServer] = {}
    suite = write_suite(tmp_path / "suite.yaml", SHORT[:2])
    with ScriptedModelServer(echoing(lambda: boxes["agent"], agent_reply)) as agent_srv, \
            ScriptedModelServer(echoing(lambda: boxes["judge"], _judge_reply)) as judge_srv:
        boxes.update(agent=agent_srv, judge=judge_srv)
        rc = main(["run", "--suite", str(suite), "--device", phone.serial, "--agent", "uitars",
                   "--model-base-url", agent_srv.base_url, "--model", "m", "--model-api-key-env", "AGENT_KEY",
                   "--model-retries", "1", "--judge", "oracle,crate", "--monitor", "crate-s", "--monitor-mode", "gate",
                   "--judge-base-url", judge_srv.base_url, "--judge-model", "j", "--judge-api-key-env", "JUDGE_KEY",
                   "--judge-retries", "0", "--adb-port", str(adb.port), "--out", str(tmp_path / "run")])
        printed = capsys.readouterr()
        assert rc == 4, printed.err  # every episode ended model_error: the agent's endpoint failed them all
        agent_headers, judge_headers = list(agent_srv.headers), list(judge_srv.headers)
        # the preflight's probes (before the phone was touched) went under the same rule
        agent_headers += agent_srv.probe_headers
        judge_headers += judge_srv.probe_headers
        assert agent_srv.probe_headers and judge_srv.probe_headers
    with ScriptedModelServer(echoing(lambda: boxes["offline"], _judge_reply)) as offline_srv:
        boxes["offline"] = offline_srv
        rc = main(["judge", str(tmp_path / "run"), "--judge", "crate", "--model-base-url", offline_srv.base_url,
                   "--model", "j", "--api-key-env", "OFFLINE_KEY", "--retries", "0", "--no-progress"])
        judged = capsys.readouterr()
        assert rc == 0, judged.err
        offline_headers = [*offline_srv.headers, *offline_srv.probe_headers]
        assert offline_srv.probe_headers
    # each key went to its own endpoint, every time, and to no other
    for headers, key in ((agent_headers, AGENT_KEY), (judge_headers, JUDGE_KEY), (offline_headers, OFFLINE_KEY)):
        assert headers and all(h.get("authorization") == f"Bearer {key}" for h in headers)
    rows = {r.task_id: r for r in read_results(tmp_path / "run")}
    assert len(calls) >= 4 and all(r.status == "model_error" for r in rows.values()), rows
    errors = " ".join(r.error or "" for r in rows.values())
    assert "HTTP 401" in errors and "HTTP 500" in errors and "***redacted***" in errors  # the echoed credential, replaced
    assert (tmp_path / "run" / "judgements").is_dir() and any((tmp_path / "run" / "judgements").iterdir())
    # ... and is nowhere we write, print or serve
    server = LiveServer(tmp_path / "run").start()
    try:
        page = _get(server.port, "/") + _get(server.port, "/live/state")
    finally:
        server.stop()
    # the live state holds the step's thought, the gate's reason, the evidence and the error, replaced
    assert b"I was called with Authorization: Bearer ***redacted*** (***redacted***)" in page and b"HTTP 401" in page
    assert b"routine (seen: Bearer ***redacted***, ***redacted***)" in page and b"(seen: Bearer ***redacted***, ***redacted***)" in page
    assert_no_key(page, "the live page")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "trajectory.jsonl" for p in written) and any(p.name == "evidence.jsonl" for p in written)
    for p in written:
        assert_no_key(p.read_bytes(), str(p.relative_to(tmp_path)))
    for out, what in ((printed.out, "run's stdout"), (printed.err, "run's stderr"), (judged.out, "judge's stdout"),
                      (judged.err, "judge's stderr"), (caplog.text, "the logs")):
        assert_no_key(out, what)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert {"AGENT_KEY", "JUDGE_KEY"} <= set(json.dumps(manifest).replace('"', " ").split())  # the names only
    check_run_consistent(tmp_path / "run")


def test_keys_handed_to_a_process_stay_out_of_its_environment(monkeypatch) -> None:
    """How a farm actor gets the driver's keys (harness.farm.actor.DeviceActor): key_for reads them,
    ahead of the process's own variables, and neither os.environ nor a process started afterwards
    (an adb server the actor restarts, say) holds them."""
    import os
    import subprocess
    import sys

    from harness.client import keys as model_keys

    monkeypatch.setattr(model_keys, "_PROVIDED_KEYS", {})  # where key_for reads them
    monkeypatch.setenv("FARM_KEY_VAR", "the node's own, not sent")
    model_keys.provide_keys({"FARM_KEY_VAR": OFFLINE_KEY, "OPENAI_API_KEY": AGENT_KEY})
    assert model_keys.key_for(ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="FARM_KEY_VAR")).key \
        == OFFLINE_KEY
    assert model_keys.key_for(ModelConfig(base_url="https://api.openai.com/v1", model="m")).key == AGENT_KEY
    assert model_keys.key_for(ModelConfig(base_url="http://127.0.0.1:9/v1", model="m")).key is None  # the rule stands
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.environ.items()))"],
                           capture_output=True, text=True, check=True).stdout
    assert_no_key(repr(sorted(os.environ.items())) + child, "the environment")
