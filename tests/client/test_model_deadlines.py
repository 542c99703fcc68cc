"""The model client against hostile endpoints (issue 28): a reply that trickles in a byte at a time,
one that never sends its headers, a huge one, a server that refuses response_format for one model
only; and the stop that cuts every call in flight (Ctrl-C). Deadlines here are a second or two; the
bounds asserted are generous ("well under the stuck server's minute"): they prove the deadline holds,
not how fast the machine is."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from harness.client import transport as model_transport
from harness.core.daemon_pool import DaemonPool
from harness.client.calls import ModelClient, allow_calls, calls_stopped
from harness.client.config import MAX_REPLY_BYTES, ModelConfig, ModelError
from harness.client.images import user_message
from harness.client.slots import Priority, endpoint_slots
from harness.client.structured import structured_counts, structured_report
from harness.core.usage import Meter
from tests.fakes.model_server import Reply, ScriptedModelServer, refusing_structured_output

SCHEMA = {"title": "verdict", "type": "object", "properties": {"risky": {"type": "boolean"}}, "required": ["risky"]}
STUCK_S = 60.0  # what a stuck server would cost without the deadline


def cfg(server, **kw):
    base = dict(base_url=server.base_url, model="m", backoff_s=0.01, max_backoff_s=0.05, timeout_s=1.5,
                max_retries=0)
    base.update(kw)
    return ModelConfig(**base)


def _fails(config, **chat) -> tuple[ModelError, float]:
    """The call's error, and how long the call took (the client is made first: the first one made
    imports the SDK, seconds on a busy machine, which is not the call's time)."""
    client = ModelClient(config)
    t0 = time.monotonic()
    with pytest.raises(ModelError) as e:
        client.chat([user_message("x")], **chat)
    return e.value, time.monotonic() - t0


# --- the deadline of an attempt, and of a call ------------------------------------------------------
def test_a_trickling_reply_is_cut_at_the_attempt_deadline():
    """Headers at once, then a byte every 0.2 s (a body of ~300 bytes would take a minute): httpx's
    per-read timeout never fires; the attempt's whole-reply deadline does, and the client stops
    reading (the server sent only the first few bytes)."""
    with ScriptedModelServer([Reply("x" * 200, trickle_s=0.2)]) as s:
        err, took = _fails(cfg(s, timeout_s=1.5))
        time.sleep(0.5)
        sent = s.bytes_sent
        assert s.trickle_started, "the server never began to trickle"
    assert err.kind == "exhausted" and "timed out after 1.5s" in str(err) and "headers and body" in str(err)
    assert took < STUCK_S / 4, took
    assert sent < 60, sent  # ~8 bytes in 1.5 s: the client left, the server's writes failed


def test_a_server_that_never_sends_headers_times_out():
    with ScriptedModelServer([Reply("x", silent=True)]) as s:
        err, took = _fails(cfg(s, timeout_s=1.0, max_retries=1))
    assert err.kind == "exhausted" and err.attempts == 2 and "timed out after 1s" in str(err)
    assert took < STUCK_S / 4, took


def test_deadline_s_bounds_the_call_with_its_retries():
    """Ten retries of a 1 s attempt, but a 2.5 s deadline for the call: it ends at the deadline,
    saying so, after about three attempts (the last one shortened)."""
    with ScriptedModelServer([Reply("x", silent=True)]) as s:
        err, took = _fails(cfg(s, timeout_s=1.0, max_retries=10, deadline_s=2.5))
    assert err.kind == "timeout" and "deadline of 2.5s" in str(err) and 2 <= err.attempts <= 4, (err, err.attempts)
    assert took < STUCK_S / 4, took


def test_a_callers_thread_deadline_bounds_every_call_inside_it():
    """What the runner does for a monitor's check: every call the check makes ends by the monitor's
    timeout, however long the client's own timeout is."""
    with ScriptedModelServer([Reply("x", silent=True)]) as s:
        t0 = time.monotonic()
        with model_transport.deadline(t0 + 1.0):
            err, took = _fails(cfg(s, timeout_s=STUCK_S, max_retries=3))
    assert err.kind == "timeout" and "the caller's deadline" in str(err)
    assert took < STUCK_S / 4, took
    assert model_transport.outer_deadline() is None  # the block's deadline is gone with it


def test_waiting_for_a_slot_counts_toward_the_deadline():
    """The endpoint's only slot is held: a call with a 1 s deadline gives up waiting for it."""
    with ScriptedModelServer([Reply("ok")]) as s:
        slots = endpoint_slots(s.base_url, 1)
        with slots.slot(Priority.GATE):
            err, took = _fails(cfg(s, concurrency=1, deadline_s=1.0))
        assert slots.in_flight == 0 and slots._waiting == []
        assert ModelClient(cfg(s, concurrency=1)).chat([user_message("x")]).text == "ok"
    assert err.kind == "timeout" and "slot" in str(err), err
    assert took < STUCK_S / 4


def test_a_deadline_out_of_range_is_refused_naming_the_field():
    for kw, field in (({"timeout_s": 0}, "timeout_s"), ({"deadline_s": -1}, "deadline_s"),
                      ({"max_reply_bytes": 10}, "max_reply_bytes")):
        with pytest.raises(ValueError, match=field):
            ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", **kw)


# --- the byte limit ----------------------------------------------------------------------------------
def test_a_huge_reply_is_cut_at_the_byte_limit_and_marked():
    """5 MB of text: the client keeps the first max_reply_bytes of the body, closes the connection,
    and says it cut the reply (the text is what the body held up to there)."""
    with ScriptedModelServer([Reply("y" * 5_000_000)]) as s:
        r = ModelClient(cfg(s, timeout_s=30)).chat([user_message("x")])
    assert r.truncated and r.truncated_by == "max_reply_bytes" and r.cut_at == MAX_REPLY_BYTES
    assert MAX_REPLY_BYTES - 1000 < len(r.text) <= MAX_REPLY_BYTES and set(r.text) == {"y"}
    rec = r.to_json()
    assert rec["truncated"] is True and rec["truncated_by"] == "max_reply_bytes" and rec["reply_limit_bytes"] == MAX_REPLY_BYTES


def test_a_cut_verdict_is_an_error_never_read():
    """A verdict call (a JSON schema asked) whose reply passes the limit: the object at its start may
    be followed by a correction the cut lost, so nothing of it is read."""
    head = '{"risky": false, "reason": "fine"} ' + "z" * 20_000
    with ScriptedModelServer([Reply(head)]) as s:
        err, _ = _fails(cfg(s, max_reply_bytes=4096, timeout_s=10), json_schema=SCHEMA)
    assert err.kind == "too_large" and "4096-byte limit" in str(err) and "never read" in str(err)


def test_a_reply_under_the_limit_is_whole():
    text = "Thought: é " + "w" * 3000 + "\nAction: wait()"
    with ScriptedModelServer([Reply(text)]) as s:
        r = ModelClient(cfg(s, max_reply_bytes=64 * 1024)).chat([user_message("x")])
    assert r.text == text and not r.truncated and r.truncated_by is None and "truncated" not in r.to_json()


@pytest.mark.parametrize("content, cut_at, expect", [
    ("abc", None, "abc"),                                     # the whole string before the cut
    ("line\nnext \"quoted\" \\ done", None, "line\nnext \"quoted\" \\ done"),
    ("naïve 汉字 ✓", 10, None),                                # a UTF-8 or \\u escape cut in half is dropped
    ("a\\tb", 3, None),
])
def test_partial_content_reads_a_cut_body(content, cut_at, expect):
    import json

    body = json.dumps({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})
    raw = body.encode()
    start = raw.index(b'"content"') + len(b'"content": "')
    if cut_at is not None:
        raw = raw[:start + cut_at]
    got = model_transport.partial_content(raw)
    if expect is not None:
        assert got == expect
    else:  # a prefix of the content, never garbage
        assert content.startswith(got) and len(got) >= 1, got
    assert model_transport.partial_content(b'{"id": "x", "choi') == ""


# --- stopping every call (Ctrl-C) ----------------------------------------------------------------------
def test_stop_calls_cuts_a_call_in_flight_and_refuses_new_ones():
    """A call blocked reading from a silent server, and one waiting for the only slot: both end at
    once when the calls are stopped (interrupted, not retried), later calls are refused until the
    stop is lifted."""
    with ScriptedModelServer([Reply("x", silent=True)]) as s:
        c = ModelClient(cfg(s, timeout_s=STUCK_S, max_retries=5, concurrency=1))
        errors: list[ModelError] = []

        def call() -> None:
            try:
                c.chat([user_message("x")])
            except ModelError as e:
                errors.append(e)

        threads = [threading.Thread(target=call) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while (not s.requests or not endpoint_slots(s.base_url, 1)._waiting) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.requests and endpoint_slots(s.base_url, 1)._waiting, "the calls never got under way"
        t0 = time.monotonic()
        try:
            with calls_stopped("test stop"):
                for t in threads:
                    t.join(STUCK_S / 4)
                took = time.monotonic() - t0
                err, _ = _fails(cfg(s))
                assert err.kind == "interrupted" and "test stop" in str(err) and not s.requests[1:]
        finally:
            allow_calls()
        assert sorted(e.kind for e in errors) == ["interrupted", "interrupted"], errors
        assert took < STUCK_S / 4, took
        assert endpoint_slots(s.base_url, 1).in_flight == 0
    with ScriptedModelServer([Reply("back")]) as s2:  # after the stop, calls go out again
        assert ModelClient(cfg(s2)).chat([user_message("x")]).text == "back"


def test_an_attempt_begun_after_the_stop_is_cut_before_it_sends():
    """A call that got its slot just as the run stopped (the slot given back by a call the stop cut)
    begins its attempt after the cut: it is cut too, and nothing of it reaches the network."""
    try:
        with calls_stopped("test stop"):
            with model_transport.attempt(time.monotonic() + 5) as a:
                assert a.cut == "test stop"
                with pytest.raises(Exception, match="stopped: test stop"):
                    model_transport.DeadlineBackend().connect_tcp("127.0.0.1", 9)
        with model_transport.attempt(time.monotonic() + 5) as a:
            assert a.cut is None
    finally:
        allow_calls()


def test_stop_calls_ends_a_wait_between_attempts():
    """A call told to wait 30 s before its retry (Retry-After) is not left sleeping through a stop."""
    with ScriptedModelServer([Reply(status=429, headers={"Retry-After": "30"}, error="later")]) as s:
        errors: list[ModelError] = []
        t = threading.Thread(target=lambda: errors.append(_fails(cfg(s, max_retries=3, max_wait_s=STUCK_S))[0]))
        t.start()
        end = time.monotonic() + 10
        while not s.requests and time.monotonic() < end:
            time.sleep(0.01)
        assert s.requests, "the call never went out"
        time.sleep(0.2)  # in its wait now
        try:
            with calls_stopped("test stop"):
                t.join(STUCK_S / 4)
        finally:
            allow_calls()
        assert not t.is_alive() and len(s.requests) == 1, "the call slept through the stop"
    assert errors[0].kind == "interrupted" and "test stop" in str(errors[0]), errors


# --- structured output per endpoint and model ---------------------------------------------------------
def test_structured_output_is_remembered_per_endpoint_and_model_and_reported():
    """One server, two models: it refuses response_format for "plain-m" only. plain-m is asked in
    plain text after its first refusal (and stays so), schema-m keeps its JSON schema; each result,
    the caller's meter and structured_report say which was used."""
    responder = refusing_structured_output({"plain-m"}, lambda req: Reply('{"risky": false}'))
    with ScriptedModelServer(responder) as s:
        mark = structured_counts()
        meter = Meter()
        plain, schema = ModelClient(cfg(s, model="plain-m")), ModelClient(cfg(s, model="schema-m"))
        r1 = plain.chat([user_message("a")], json_schema=SCHEMA, meter=meter, role="judge")
        r2 = schema.chat([user_message("b")], json_schema=SCHEMA, meter=meter, role="judge")
        r3 = plain.chat([user_message("c")], json_schema=SCHEMA, meter=meter, role="judge")
        agent = schema.chat([user_message("d")], meter=meter, role="agent")  # no schema asked: not counted
        report = {e["model"]: e for e in structured_report(since=mark) if e["base_url"] == s.base_url}
        reqs = [(r["model"], "response_format" in r) for r in s.requests]
    assert (r1.structured, r2.structured, r3.structured, agent.structured) == ("none", "json_schema", "none", "none")
    assert reqs == [("plain-m", True), ("plain-m", False), ("schema-m", True), ("plain-m", False), ("schema-m", False)]
    assert report["plain-m"]["used"] == {"none": 2} and "response_format" in report["plain-m"]["refused"]["json_schema"]
    assert report["schema-m"]["used"] == {"json_schema": 1} and report["schema-m"]["refused"] == {}
    roles = meter.to_json()["by_role"]
    assert roles["judge"]["structured"] == {"none": 2, "json_schema": 1} and "structured" not in roles["agent"]
    # the server goes: what was learned about it goes too (tests/fakes/model_server.py forgets it)
    assert not [e for e in structured_report() if e["base_url"] == s.base_url]


# --- threads that never hold the process --------------------------------------------------------------
def test_daemon_pool_runs_work_like_an_executor():
    pool = DaemonPool(2, thread_name_prefix="t")
    try:
        assert pool.submit(pow, 2, 10).result(5) == 1024
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(5)
        gate = threading.Event()
        busy = [pool.submit(gate.wait, 10) for _ in range(2)]
        end = time.monotonic() + 10
        while not all(f.running() for f in busy) and time.monotonic() < end:
            time.sleep(0.01)
        queued = pool.submit(pow, 3, 2)
        assert all(t.daemon for t in pool._threads) and len(pool._threads) == 2
        pool.shutdown(wait=False, cancel_futures=True)
        assert queued.cancelled()
        gate.set()
        assert all(f.result(5) for f in busy)
        with pytest.raises(RuntimeError):
            pool.submit(pow, 1, 1)
    finally:
        pool.shutdown(wait=True)


def test_a_stuck_worker_does_not_hold_the_process_at_exit():
    """A worker stuck for a minute: the program still ends at once (a ThreadPoolExecutor's would be
    joined at exit for the whole minute)."""
    code = ("import time; from harness.core.daemon_pool import DaemonPool; p = DaemonPool(1); p.submit(time.sleep, 60); "
            "p.shutdown(wait=False); print('done')")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=STUCK_S)
    assert out.returncode == 0 and out.stdout.strip() == "done", out.stderr
    assert time.monotonic() - t0 < STUCK_S / 2
