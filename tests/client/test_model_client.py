"""The model client against the scripted OpenAI-compatible test server: retries, Retry-After,
limits, structured output fallback, concurrency bounds, key hygiene, tolerant JSON parsing."""

from __future__ import annotations

import base64
import io
import random
import threading
import time

import pytest
from PIL import Image

from harness.client.calls import ModelClient
from harness.client.config import ModelConfig, ModelError
from harness.client.images import ImagePolicy, encode_image, user_message
from harness.client.json_reply import ReplyError, parse_json_reply
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images, request_text


def cfg(server, **kw):
    base = dict(base_url=server.base_url, model="m", backoff_s=0.01, max_backoff_s=0.05, timeout_s=5)
    base.update(kw)
    return ModelConfig(**base)


def png(w=1080, h=2400, color=(10, 20, 30)):
    buf = io.BytesIO()
    Image.new("RGB", (w, h), color).save(buf, format="PNG")
    return buf.getvalue()


def test_plain_chat_records_usage_and_sampling():
    with ScriptedModelServer([Reply("hello", usage={"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9})]) as s:
        r = ModelClient(cfg(s, temperature=0.3, top_p=0.9, max_tokens=55, seed=4)).chat([user_message("hi")])
    assert r.text == "hello" and r.usage == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    req = s.requests[0]
    assert req["temperature"] == 0.3 and req["top_p"] == 0.9 and req["max_tokens"] == 55 and req["seed"] == 4
    assert r.attempts == 1 and r.latency_s >= 0


def test_retries_429_honouring_retry_after_then_succeeds():
    with ScriptedModelServer([Reply(status=429, headers={"Retry-After": "0.3"}), Reply(status=503), Reply("fine")]) as s:
        t0 = time.monotonic()
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert r.text == "fine" and r.attempts == 3
    assert time.monotonic() - t0 >= 0.3  # waited as the server asked


def test_gives_up_with_a_clear_error():
    with ScriptedModelServer([Reply(status=500, error="boom")]) as s:
        with pytest.raises(ModelError) as e:
            ModelClient(cfg(s, max_retries=2)).chat([user_message("x")])
    assert e.value.kind == "exhausted" and e.value.attempts == 3 and "HTTP 500" in str(e.value)
    assert len(s.requests) == 3


def test_timeout_and_refused_connection():
    with ScriptedModelServer([Reply("late", delay_s=1.0)]) as s:
        with pytest.raises(ModelError, match="timed out"):
            ModelClient(cfg(s, timeout_s=0.2, max_retries=1)).chat([user_message("x")])
    dead = ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(ModelError, match="connection failed"):
        ModelClient(dead).chat([user_message("x")])


def test_image_limit_refusal_names_the_setting():
    msg = "At most 1 image(s) may be provided in one request. You can set --limit-mm-per-prompt"
    with ScriptedModelServer([Reply(status=400, error=msg)]) as s:
        with pytest.raises(ModelError, match="limit-mm-per-prompt") as e:
            ModelClient(cfg(s)).chat([user_message("x")])
    assert e.value.kind == "limit"


def test_structured_output_falls_back_when_unsupported():
    def responder(req):
        if "response_format" in req:
            return Reply(status=400, error="response_format json_schema is not supported")
        return Reply('{"a": 1}')

    schema = {"title": "t", "type": "object", "properties": {"a": {"type": "integer"}}}
    with ScriptedModelServer(responder) as s:
        client = ModelClient(cfg(s))
        r = client.chat([user_message("x")], json_schema=schema)
        r2 = client.chat([user_message("y")], json_schema=schema)
    assert r.text == '{"a": 1}' and r.structured == "none"
    assert "response_format" in s.requests[0] and "response_format" not in s.requests[1]
    assert "response_format" not in s.requests[2]  # remembered for the endpoint


def test_what_was_learned_about_an_endpoint_is_forgotten_with_its_server():
    """A port is given out again soon after it is closed: a later server there must not inherit an
    earlier one's slots (the largest concurrency asked for) or its refusal of response_format."""
    from harness.client.slots import endpoint_slots
    from harness.client.structured import forget_endpoint

    schema = {"title": "t", "type": "object", "properties": {"a": {"type": "integer"}}}
    with ScriptedModelServer([Reply(status=400, error="response_format is not supported"), Reply('{"a": 1}')]) as s:
        url = s.base_url
        ModelClient(cfg(s, concurrency=8)).chat([user_message("x")], json_schema=schema)
        assert endpoint_slots(url, 1).capacity == 8
    # a later server at the same address: fresh slots, and structured output asked for again
    assert endpoint_slots(url, 3).capacity == 3
    with ScriptedModelServer([Reply('{"a": 1}')], port=s.httpd.server_address[1]) as s2:
        assert s2.base_url == url
        r = ModelClient(cfg(s2)).chat([user_message("x")], json_schema=schema)
    assert r.structured == "json_schema" and "response_format" in s2.requests[0]
    forget_endpoint(url)
    forget_endpoint(url)  # forgetting an endpoint twice, or one never used, is harmless
    assert endpoint_slots(url, 2).capacity == 2


def test_guided_json_goes_in_extra_body():
    with ScriptedModelServer([Reply("{}")]) as s:
        ModelClient(cfg(s, structured="guided")).chat([user_message("x")], json_schema={"type": "object"})
    assert s.requests[0]["guided_json"] == {"type": "object"}


def test_concurrency_is_bounded_per_endpoint():
    with ScriptedModelServer([Reply("x", delay_s=0.1)]) as s:
        c = ModelClient(cfg(s, concurrency=2))
        threads = [threading.Thread(target=c.chat, args=([user_message("x")],)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert s.max_active == 2 and len(s.requests) == 6


def test_api_key_from_env_is_sent_but_never_in_spec_or_errors(monkeypatch):
    monkeypatch.setenv("CRATE_TEST_KEY", "sk-secret-123456789")
    with ScriptedModelServer([Reply(status=401, error="bad key sk-secret-123456789")]) as s:
        c = ModelClient(cfg(s, api_key_env="CRATE_TEST_KEY"))
        with pytest.raises(ModelError) as e:
            c.chat([user_message("x")])
    assert s.headers[0]["authorization"] == "Bearer sk-secret-123456789"
    assert "sk-secret" not in str(e.value)
    assert "sk-secret" not in repr(c.spec()) and c.spec()["api_key_env"] == "CRATE_TEST_KEY"


def test_encode_image_policy_and_cache():
    shot = png()
    e1 = encode_image(shot, ImagePolicy(max_long_side=1000, format="jpeg"))
    assert (e1.width, e1.height) == (450, 1000) and e1.data_url.startswith("data:image/jpeg;base64,")
    assert encode_image(shot, ImagePolicy(max_long_side=1000, format="jpeg")) is e1
    e2 = encode_image(shot, ImagePolicy(max_long_side=None, max_pixels=1080 * 2400 // 4, format="png"))
    assert (e2.width, e2.height) == (540, 1200) and e2.format == "png"
    e3 = encode_image(shot, ImagePolicy(), size=(1092, 2408))
    assert (e3.width, e3.height) == (1092, 2408) and e3.source_size == (1080, 2400)
    with ScriptedModelServer([Reply("ok")]) as s:
        ModelClient(cfg(s)).chat([user_message("look", [e1])])
    assert request_images(s.requests[0]) == [e1.data_url] and request_text(s.requests[0]) == "look"


@pytest.mark.parametrize("text,expected", [
    ('{"a": 1}', {"a": 1}),
    ('Sure!\n```json\n{"a": 1, "b": [1, 2,],}\n```\nDone.', {"a": 1, "b": [1, 2]}),
    ('Reasoning... {"clues": "x", "effect": "y"} trailing', {"clues": "x", "effect": "y"}),
    ('{“risky”： true， “reason”： “转账”}', {"risky": True, "reason": "转账"}),
    ("<think>{\"a\": 1}</think>{'a': 1}".replace("'", '"'), {"a": 1}),  # the objects in <think> count too
    ('{"success": True, "reason": None}', {"success": True, "reason": None}),
])
def test_parse_json_reply_tolerates_real_shapes(text, expected):
    assert parse_json_reply(text) == expected


def test_parse_json_reply_skips_decoys_and_fails_clearly():
    assert parse_json_reply('example: {"x": 1} answer: {"success": false, "reason": "r"}',
                            required=("success",)) == {"success": False, "reason": "r"}
    with pytest.raises(ReplyError, match="empty"):
        parse_json_reply("  ")
    with pytest.raises(ReplyError, match="no JSON object"):
        parse_json_reply("I cannot judge this.")
    with pytest.raises(ReplyError, match="disagree"):  # a draft in <think> is not overruled silently
        parse_json_reply('<think>{"success": true}</think>{"success": false}', required=("success",))


# --- priorities on a shared endpoint, and usage metered by the caller ------------------------------
def _wait_until(state, step_s: float = 0.001) -> None:
    """Wait for ``state()`` to hold (30 s at most: a bound on waiting for the state, not a speed target)."""
    deadline = time.monotonic() + 30
    while not state():
        assert time.monotonic() < deadline
        time.sleep(step_s)


def _queue_and_release(slots, arrivals):
    """Hold every slot, queue one waiter per priority of ``arrivals`` (in that order), release:
    the order in which the waiters got a slot."""
    from harness.client.slots import EndpointSlots  # noqa: F401  (the type under test)

    got, lock = [], threading.Lock()
    holders = [threading.Event() for _ in range(slots.capacity)]
    started = threading.Barrier(slots.capacity + 1)

    def hold(ev):
        with slots.slot(0):
            started.wait()
            ev.wait(10)

    hs = [threading.Thread(target=hold, args=(e,)) for e in holders]
    for t in hs:
        t.start()
    started.wait()

    def wait_for(p):
        with slots.slot(p):
            with lock:
                got.append(p)

    ws = []
    for k, p in enumerate(arrivals):
        t = threading.Thread(target=wait_for, args=(p,))
        t.start()
        ws.append(t)
        _wait_until(lambda: len(slots._waiting) >= k + 1)  # this waiter is queued before the next one arrives
    for e in holders:
        e.set()
    for t in hs + ws:
        t.join(10)
    return got


def test_waiting_calls_are_served_by_priority_then_arrival():
    from harness.client.slots import EndpointSlots, Priority

    order = _queue_and_release(EndpointSlots(1), [Priority.OFFLINE, Priority.LIVE, Priority.AGENT, Priority.LIVE,
                                                  Priority.GATE])
    assert order == [Priority.GATE, Priority.AGENT, Priority.LIVE, Priority.LIVE, Priority.OFFLINE]


def test_a_gate_check_finds_a_slot_while_evidence_calls_fill_the_rest():
    """Four slots, an endpoint a gate uses: live evidence calls (blocked in the server) may take
    three; a gate check then runs at once instead of waiting for one of them to end."""
    from harness.client.slots import Priority

    release = threading.Event()

    def responder(req):
        return Reply("ok", hold=release if "evidence" in request_text(req) else None)

    with ScriptedModelServer(responder) as s:
        c = ModelClient(cfg(s, concurrency=4))
        c.chat([user_message("gate")], priority=Priority.GATE)  # the endpoint now serves a gate
        live = [threading.Thread(target=c.chat, args=([user_message("evidence")],), kwargs={"priority": Priority.LIVE})
                for _ in range(5)]
        for t in live:
            t.start()
        _wait_until(lambda: s.active >= 3, 0.005)
        assert c.chat([user_message("gate")], priority=Priority.GATE).text == "ok"
        assert s.active == 3  # the evidence calls were still in flight, two more still waiting
        release.set()
        for t in live:
            t.join(10)
    assert s.max_active == 4 and len(s.requests) == 7


def test_an_endpoint_only_judges_use_keeps_every_slot():
    with ScriptedModelServer([Reply("x", delay_s=0.1)]) as s:
        c = ModelClient(cfg(s, concurrency=3))
        threads = [threading.Thread(target=c.chat, args=([user_message("x")],)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert s.max_active == 3


def test_slots_are_numbered_lowest_free_first_and_a_release_wakes_only_the_next_waiter():
    from harness.client.slots import EndpointSlots, Priority

    slots = EndpointSlots(3)
    with slots.slot(Priority.OFFLINE) as a, slots.slot(Priority.OFFLINE) as b:
        assert (a, b) == (0, 1)
        with slots.slot(Priority.OFFLINE) as c:
            assert c == 2
        with slots.slot(Priority.OFFLINE) as c:
            assert c == 2
    with slots.slot(Priority.OFFLINE) as a:
        assert a == 0  # the lowest free number again
    slots.grow(5)
    held = [slots.slot(Priority.OFFLINE) for _ in range(5)]
    assert sorted(h.__enter__() for h in held) == [0, 1, 2, 3, 4]
    woken, kept = [], []

    def wait():
        cm = slots.slot(Priority.OFFLINE)
        kept.append(cm)  # kept: a context manager dropped gives its slot back
        woken.append(cm.__enter__())

    waiters = [threading.Thread(target=wait) for _ in range(3)]
    for t in waiters:
        t.start()
    _wait_until(lambda: len(slots._waiting) == 3)
    held[1].__exit__(None, None, None)  # frees number 1: one waiter gets it, two still wait
    # the hand-over happens inside the release, under the slots' lock: once it returns, the two
    # left in the queue have not been woken (their events unset), so no later wake-up can come
    assert [w[2][0].is_set() for w in slots._waiting] == [False, False]
    assert len(slots._waiting) == 2 and slots.in_flight == 5
    _wait_until(lambda: woken)
    assert woken == [1]
    for h in held[2:4]:
        h.__exit__(None, None, None)
    for t in waiters:
        t.join(10)
    assert sorted(woken) == [1, 2, 3] and slots._waiting == []


def test_a_waiter_interrupted_leaves_the_queue_and_takes_no_slot(monkeypatch):
    from harness.client.slots import EndpointSlots, Priority

    slots = EndpointSlots(1)
    holder = slots.slot(Priority.OFFLINE)
    holder.__enter__()

    class Interrupted(threading.Event):
        def wait(self, timeout=None):
            raise KeyboardInterrupt

    monkeypatch.setattr("harness.client.calls.threading.Event", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        with slots.slot(Priority.OFFLINE):
            pass
    monkeypatch.undo()
    assert slots._waiting == [] and slots.in_flight == 1
    holder.__exit__(None, None, None)
    with slots.slot(Priority.OFFLINE) as n:
        assert n == 0 and slots.in_flight == 1
    assert slots.in_flight == 0


def test_calls_in_flight_share_a_connection_pool_by_eights():
    """20 calls held in the server at once: three connection pools (slots 0-7, 8-15, 16-19)."""
    from harness.client.slots import SLOTS_PER_POOL

    release = threading.Event()
    with ScriptedModelServer(lambda req: Reply("ok", hold=release)) as s:
        c = ModelClient(cfg(s, concurrency=20))
        threads = [threading.Thread(target=c.chat, args=([user_message("x")],)) for _ in range(20)]
        for t in threads:
            t.start()
        _wait_until(lambda: s.active >= 20, 0.005)
        release.set()
        for t in threads:
            t.join(10)
    assert SLOTS_PER_POOL == 8 and len(c._pools) == 3 and s.max_active == 20


def test_usage_goes_to_the_callers_meter_by_role():
    from harness.core.usage import Meter

    run = Meter()
    ep = Meter(parent=run)
    with ScriptedModelServer([Reply("a", usage={"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}),
                              Reply(status=400, error="bad request"), Reply("c")]) as s:
        c = ModelClient(cfg(s, max_retries=0))
        c.chat([user_message("x")], meter=ep, role="monitor:crate-s")
        with pytest.raises(ModelError):
            c.chat([user_message("x")], meter=ep, role="agent")
        c.chat([user_message("x")])  # no meter: counted nowhere
    j = ep.to_json()
    assert j["total_tokens"] == 6 and j["calls"] == 2 and j["failed"] == 1
    assert j["by_role"]["monitor:crate-s"]["total_tokens"] == 6 and j["by_role"]["agent"]["failed"] == 1
    assert run.to_json()["total_tokens"] == 6  # the parent saw the same calls


# --- keys go only where they belong -----------------------------------------------------------------
SECRET = "sk-openai-real-key-0123456789"


def test_no_key_named_sends_no_authorization_to_a_local_endpoint(monkeypatch):
    """The default used to send OPENAI_API_KEY as a bearer token to any endpoint (a local vLLM, a
    third-party judge); now an endpoint that is not OpenAI's or DashScope's gets no key at all."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-real-key-0123")
    with ScriptedModelServer([Reply("ok")]) as s:
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert r.text == "ok"
    assert "authorization" not in s.headers[0]
    assert SECRET not in repr(s.headers) and "sk-dashscope" not in repr(s.headers)


def test_a_named_variable_goes_to_its_endpoint_and_only_there(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("VLLM_KEY", "token-for-vllm-42")
    with ScriptedModelServer([Reply("ok")]) as a, ScriptedModelServer([Reply("ok")]) as b:
        ModelClient(cfg(a, api_key_env="VLLM_KEY")).chat([user_message("x")])
        ModelClient(cfg(b)).chat([user_message("x")])
    assert a.headers[0]["authorization"] == "Bearer token-for-vllm-42"
    assert "authorization" not in b.headers[0]
    assert SECRET not in repr(a.headers) + repr(b.headers)


def test_named_openai_key_is_sent_when_the_user_names_it(monkeypatch):
    """OPENAI_API_KEY reaches a non-OpenAI endpoint only when that variable is named for it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with ScriptedModelServer([Reply("ok")]) as s:
        ModelClient(cfg(s, api_key_env="OPENAI_API_KEY")).chat([user_message("x")])
    assert s.headers[0]["authorization"] == f"Bearer {SECRET}"


@pytest.mark.parametrize("url,var", [
    ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    ("https://dashscope.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    ("https://dashscope-intl.aliyuncs.com/compatible-mode/v1", "DASHSCOPE_API_KEY"),
    ("http://api.openai.com/v1", None),            # never in clear text
    ("https://api.openai.com.evil.example/v1", None),
    ("https://openai.example.com/v1", None),
    ("https://evil-dashscope.aliyuncs.com.example/v1", None),
    ("http://127.0.0.1:8000/v1", None),
    ("https://judge.third-party.example/v1", None),
])
def test_default_keys_by_host(monkeypatch, url, var):
    from harness.client.keys import key_for

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dashscope-real-key-0123")
    choice = key_for(ModelConfig(base_url=url, model="m"))
    assert choice.variable == var
    assert choice.key == (None if var is None else {"OPENAI_API_KEY": SECRET,
                                                    "DASHSCOPE_API_KEY": "sk-dashscope-real-key-0123"}[var])
    assert SECRET not in choice.reason


def test_401_without_a_key_says_how_to_name_one(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with ScriptedModelServer([Reply(status=401, error="Incorrect API key provided")]) as s:
        with pytest.raises(ModelError) as e:
            ModelClient(cfg(s)).chat([user_message("x")])
    msg = str(e.value)
    assert e.value.status == 401 and e.value.kind == "refused" and len(s.requests) == 1
    assert "none was sent" in msg and "--model-api-key-env" in msg and "--judge-api-key-env" in msg
    assert SECRET not in msg


def test_a_named_but_unset_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("CRATE_NOT_SET_KEY", raising=False)
    with pytest.raises(ValueError, match="CRATE_NOT_SET_KEY .*is not set"):
        ModelClient(ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="CRATE_NOT_SET_KEY"))


# --- Retry-After, 408, truncation ------------------------------------------------------------------------
def test_retry_after_as_an_http_date():
    from email.utils import formatdate

    from harness.client.calls import retry_after_s

    now = 1_700_000_000.0
    assert retry_after_s(formatdate(now + 120, usegmt=True), now=now) == pytest.approx(120, abs=1)
    assert retry_after_s(formatdate(now - 50, usegmt=True), now=now) == 0.0
    assert retry_after_s("7") == 7.0 and retry_after_s("soon") is None and retry_after_s("-3") is None
    # a date already past: retried at once, and the date form does not break the client
    with ScriptedModelServer([Reply(status=429, headers={"Retry-After": formatdate(time.time() - 5, usegmt=True)}),
                              Reply("fine")]) as s:
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert r.text == "fine" and r.attempts == 2


def test_a_wait_above_the_backoff_cap_is_honoured_up_to_the_limit():
    """Retry-After 0.4 s with a 0.05 s backoff cap: the client waits what the server asked (the cap
    used to cut every Retry-After short)."""
    with ScriptedModelServer([Reply(status=503, headers={"Retry-After": "0.4"}), Reply("fine")]) as s:
        t0 = time.monotonic()
        r = ModelClient(cfg(s, max_backoff_s=0.05, max_wait_s=5)).chat([user_message("x")])
    assert r.text == "fine" and time.monotonic() - t0 >= 0.4


def test_a_wait_beyond_the_limit_is_a_clear_error_at_once():
    from email.utils import formatdate

    for ra in ("3600", formatdate(time.time() + 3600, usegmt=True)):
        with ScriptedModelServer([Reply(status=429, headers={"Retry-After": ra}), Reply("never")]) as s:
            with pytest.raises(ModelError) as e:
                ModelClient(cfg(s, max_wait_s=30)).chat([user_message("x")])
        assert e.value.kind == "rate_limited" and len(s.requests) == 1
        assert "longer than the 30s" in str(e.value) and "--model-max-wait" in str(e.value)


def test_408_is_retried():
    with ScriptedModelServer([Reply(status=408), Reply("fine")]) as s:
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert r.text == "fine" and r.attempts == 2 and len(s.requests) == 2
    with ScriptedModelServer([Reply(status=404)]) as s:  # other 4xx are still refused at once
        with pytest.raises(ModelError, match="refused"):
            ModelClient(cfg(s)).chat([user_message("x")])
    assert len(s.requests) == 1


def test_a_reply_cut_at_max_tokens_is_marked_truncated_and_not_asked_again():
    with ScriptedModelServer([Reply("Thought: tap it\nAction: click(start_box='(12", finish_reason="length")]) as s:
        r = ModelClient(cfg(s, max_tokens=16)).chat([user_message("x")])
    assert r.truncated and r.finish_reason == "length" and r.to_json()["truncated"] is True
    assert len(s.requests) == 1
    with ScriptedModelServer([Reply("ok")]) as s:
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert not r.truncated and "truncated" not in r.to_json() and r.finish_reason == "stop"


def test_openai_tool_calls_are_kept():
    call = {"name": "mobile_use", "arguments": '{"action": "click", "coordinate": [10, 20]}'}
    with ScriptedModelServer([Reply(None, tool_calls=[call], finish_reason="tool_calls")]) as s:
        r = ModelClient(cfg(s)).chat([user_message("x")])
    assert r.text == "" and r.tool_calls == [call] and r.to_json()["tool_calls"] == 1


# --- the image cache is bounded by bytes ------------------------------------------------------------------
def test_encode_cache_is_bounded_by_bytes(monkeypatch):
    import harness.client.images as model_mod

    model_mod.clear_encode_cache()
    first = encode_image(png(400, 800, (1, 2, 3)), ImagePolicy(format="png", max_long_side=None))
    budget = len(first.data_url) * 3 + 10
    monkeypatch.setattr(model_mod, "ENCODE_CACHE_BYTES", budget)
    model_mod.clear_encode_cache()
    shots = [png(400, 800, (i, 2, 3)) for i in range(6)]
    encoded = [encode_image(p, ImagePolicy(format="png", max_long_side=None)) for p in shots]
    assert model_mod.encode_cache_bytes() <= budget
    assert len(model_mod._encode_cache) == 3  # the three most recent
    assert encode_image(shots[-1], ImagePolicy(format="png", max_long_side=None)) is encoded[-1]  # a hit
    assert encode_image(shots[0], ImagePolicy(format="png", max_long_side=None)) is not encoded[0]  # evicted
    noise = Image.frombytes("RGB", (200, 200), random.Random(1).randbytes(200 * 200 * 3))
    buf = io.BytesIO()
    noise.save(buf, format="PNG")
    big = encode_image(buf.getvalue(), ImagePolicy(format="png", max_long_side=None))
    assert len(big.data_url) > budget  # larger than the whole budget: encoded, not kept
    assert model_mod.encode_cache_bytes() <= budget and len(model_mod._encode_cache) == 3
    model_mod.clear_encode_cache()


def test_the_key_choice_never_shows_the_key(monkeypatch):
    from harness.client.keys import key_for

    monkeypatch.setenv("CRATE_TEST_KEY", "sk-secret-123456789")
    choice = key_for(ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="CRATE_TEST_KEY"))
    assert choice.key == "sk-secret-123456789" and "sk-secret" not in repr(choice) + choice.reason


# --- the cheapest encoding that gives the model the same pixels ------------------------------------------
def _decoded(enc) -> Image.Image:
    img = Image.open(io.BytesIO(base64.b64decode(enc.data_url.split(",", 1)[1])))
    img.load()
    return img


def test_a_png_sent_at_its_own_size_goes_as_it_is():
    shot = png()
    enc = encode_image(shot, ImagePolicy(format="png", max_long_side=None))
    assert enc.passthrough and base64.b64decode(enc.data_url.split(",", 1)[1]) == shot
    assert (enc.width, enc.height, enc.bytes) == (1080, 2400, len(shot))
    same_size = encode_image(shot, ImagePolicy(format="png"), size=(1080, 2400))
    assert same_size.passthrough  # a forced size that is the screenshot's own: no resize, no encode


def test_resized_png_is_lossless_at_any_level_and_jpeg_is_unchanged():
    """PNG levels change bytes and time, never pixels: a resized PNG decodes to exactly Pillow's
    bicubic resize; JPEG keeps Pillow's encoder and quality (the pixels models got before)."""
    shot = png()
    src = Image.open(io.BytesIO(shot)).convert("RGB")
    want = src.resize((1092, 2408), Image.Resampling.BICUBIC)
    for level in (1, 6):
        enc = encode_image(shot, ImagePolicy(format="png", png_level=level), size=(1092, 2408))
        assert not enc.passthrough and _decoded(enc).convert("RGB").tobytes() == want.tobytes()
    jpeg = encode_image(shot, ImagePolicy(max_long_side=1280, format="jpeg", jpeg_quality=85))
    buf = io.BytesIO()
    src.resize((576, 1280), Image.Resampling.BICUBIC).save(buf, format="JPEG", quality=85)
    assert base64.b64decode(jpeg.data_url.split(",", 1)[1]) == buf.getvalue()


def test_a_screenshot_that_carries_its_pixels_is_not_decoded_again(monkeypatch):
    import harness.core.screenshot as shots
    from harness.core.screenshot import Screenshot

    img = Image.new("RGB", (1080, 2400), (9, 99, 199))
    shot = Screenshot(png(color=(9, 99, 199)), image=img)
    monkeypatch.setattr(shots.Image, "open", lambda *a, **k: pytest.fail("decoded a PNG whose pixels were given"))
    enc = encode_image(shot, ImagePolicy(max_long_side=1280, format="jpeg"))
    assert (enc.width, enc.height) == (576, 1280)


def test_prefetch_and_the_step_share_one_encode(monkeypatch):
    """An agent's prepare() starts the encode; the step's own encode_image waits for it (or finds
    it cached) instead of encoding twice."""
    import harness.client.images as model_mod

    model_mod.clear_encode_cache()
    calls = []
    real = model_mod.encode_pixels
    started, release = threading.Event(), threading.Event()

    def slow(*a, **k):
        calls.append(1)
        started.set()
        release.wait(10)
        return real(*a, **k)

    monkeypatch.setattr(model_mod, "encode_pixels", slow)
    shot = png(color=(4, 5, 6))
    policy = ImagePolicy(format="jpeg")
    model_mod.prefetch(shot, policy)
    assert started.wait(10)  # the worker is encoding it now
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("enc", encode_image(shot, policy)))
    t.start()
    release.set()
    t.join(10)
    assert len(calls) == 1 and box["enc"] is encode_image(shot, policy)


def test_an_encode_started_from_a_frames_pixels_is_the_one_the_step_takes(monkeypatch):
    """prefetch_pixels starts encoding a raw frame's pixels before its PNG exists; encode_image of
    the Screenshot that carries those pixels takes that result (equal to encoding it then) and
    encodes nothing again; a pixel job that failed is redone; a PNG sent as it is needs no job."""
    import harness.client.images as model_mod
    from harness.core.screenshot import Screenshot, encode_png_fast

    img = Image.new("RGB", (1080, 2400), (40, 50, 60))
    policy = ImagePolicy(max_long_side=1280, format="jpeg")
    model_mod.clear_encode_cache()
    expected = model_mod.encode_pixels(img, policy)
    calls = []
    real = model_mod.encode_pixels
    monkeypatch.setattr(model_mod, "encode_pixels", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    model_mod.prefetch_pixels(img, policy)
    shot = Screenshot(encode_png_fast(img), image=img)
    model_mod.prefetch(shot, policy)  # the PNG arrives: nothing more to start
    enc = encode_image(shot, policy)
    assert enc == expected and calls == [img]
    assert encode_image(shot, policy) is enc and calls == [img]  # cached by content from then on
    # another frame's pixels are not this screenshot's
    other, mine = Image.new("RGB", (1080, 2400), (1, 2, 3)), Image.new("RGB", (1080, 2400), (7, 8, 9))
    model_mod.prefetch_pixels(other, policy)
    assert encode_image(Screenshot(encode_png_fast(mine), image=mine), policy) == real(mine, policy)
    assert calls[0] is img and [c for c in calls if c is mine] == [mine]  # other's job runs on its own

    # a pixel job that failed: the step encodes itself
    model_mod.clear_encode_cache()
    calls.clear()
    def fails_once(*a, **k):
        calls.append(a[0])
        if len(calls) == 1:
            raise OSError("out of memory")
        return real(*a, **k)

    monkeypatch.setattr(model_mod, "encode_pixels", fails_once)
    model_mod.prefetch_pixels(img, policy)
    assert encode_image(Screenshot(encode_png_fast(img), image=img), policy) == expected and len(calls) == 2

    # a PNG at its own size goes as it is: no job is started
    model_mod.clear_encode_cache()
    monkeypatch.setattr(model_mod, "run_in_background", lambda *a: pytest.fail("started a job for a passthrough"))
    model_mod.prefetch_pixels(img, ImagePolicy(max_long_side=None, format="png"))
