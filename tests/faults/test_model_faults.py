"""Model faults, against the scripted OpenAI-compatible test server: 429 with Retry-After, 500s,
timeouts, refused connections, replies that are not JSON, empty replies, a 1 MB reply, and an
endpoint that is down for a whole run (refused before the run when it is down at the start; once
the run has started, a model-backed agent's: every episode ends `model_error` with the cause, left
out of SR; a judge's: the verdict is `judge_error` and the run goes on). Nothing hangs: every
failure ends within a bound set by the retry and timeout settings."""

from __future__ import annotations

import json
import threading
import time

import pytest

from harness.client.calls import ModelClient
from harness.client.config import ModelConfig, ModelError
from harness.client.images import user_message
from harness.client.json_reply import ReplyError, parse_json_reply
from harness.records import iter_steps, read_manifest, read_results
from tests.fakes.model_server import Reply, ScriptedModelServer, dead_url
from tests.faults.helpers import SHORT, check_run_consistent, results_table, write_suite
from tests.faults.helpers import run_cli as _run

pytestmark = pytest.mark.faults

MB = 1_000_000


def _cfg(base_url: str, **kw) -> ModelConfig:
    base = dict(base_url=base_url, model="m", backoff_s=0.01, max_backoff_s=0.1, timeout_s=3, max_retries=2)
    base.update(kw)
    return ModelConfig(**base)


def _chat(cfg: ModelConfig):
    return ModelClient(cfg).chat([user_message("x")])


# --- the client --------------------------------------------------------------------------------
def test_429_retry_after_is_honoured_then_gives_up_with_the_status(monkeypatch):
    """The client waits exactly what Retry-After says between tries (recorded, not timed: a loaded
    machine cannot make it look wrong), and gives up after its retries naming the status."""
    import harness.client.calls as model

    waits: list[float] = []
    real_sleep = time.sleep

    def sleep(s: float) -> None:
        if threading.current_thread() is threading.main_thread():
            waits.append(s)
        real_sleep(s)

    monkeypatch.setattr(model.time, "sleep", sleep)
    with ScriptedModelServer([Reply(status=429, headers={"Retry-After": "0.2"}, error="slow down")]) as s:
        with pytest.raises(ModelError) as e:
            _chat(_cfg(s.base_url, max_backoff_s=1.0))
    assert e.value.kind == "exhausted" and e.value.status == 429 and e.value.attempts == 3
    assert "HTTP 429" in str(e.value) and "slow down" in str(e.value) and "after 3 attempt(s)" in str(e.value)
    assert len(s.requests) == 3 and waits == [0.2, 0.2]  # waited as asked, twice


@pytest.mark.parametrize("header", ["3600", "Wed, 21 Oct 2035 07:28:00 GMT", "Wed, 21 Oct 2015 07:28:00 GMT", "-5",
                                    "nan", "inf", "soon"])
def test_a_retry_after_of_an_hour_or_nonsense_never_stalls(header):
    """A wait longer than max_wait_s is a clear error at once (not an hour's stall, not a retry
    the server said it would refuse); a date in the past retries at once; nonsense is ignored."""
    with ScriptedModelServer([Reply(status=429, headers={"Retry-After": header}), Reply("fine")]) as s:
        # the client made before the clock starts: the first one imports the SDK (seconds on a busy machine)
        long_wait = header in ("3600", "Wed, 21 Oct 2035 07:28:00 GMT")
        client = ModelClient(_cfg(s.base_url, max_backoff_s=0.2, **({"max_wait_s": 60} if long_wait else {})))
        t0 = time.monotonic()
        if long_wait:
            with pytest.raises(ModelError) as e:
                client.chat([user_message("x")])
            assert e.value.kind == "rate_limited" and "longer than the 60s" in str(e.value)
            assert len(s.requests) == 1
        else:
            assert client.chat([user_message("x")]).text == "fine"
    assert time.monotonic() - t0 < 3


def test_500s_are_retried_then_reported_with_status_and_body():
    replies = [Reply(status=500, error="boom"), Reply(status=502, error="bad gateway"), Reply(status=503, error="overloaded")]
    with ScriptedModelServer(replies) as s:
        with pytest.raises(ModelError) as e:
            _chat(_cfg(s.base_url))
    assert e.value.kind == "exhausted" and e.value.status == 503 and "HTTP 503" in str(e.value) and "overloaded" in str(e.value)
    assert len(s.requests) == 3
    with ScriptedModelServer([Reply(status=500), Reply(status=500), Reply("recovered")]) as s:
        assert _chat(_cfg(s.base_url)).attempts == 3


def test_timeouts_are_bounded():
    """The server never answers (until the test lets it): the client gives up on its own, twice,
    while both requests are still held by the server, so it waited for neither reply."""
    never = threading.Event()
    with ScriptedModelServer([Reply("late", hold=never)]) as s:
        with pytest.raises(ModelError, match=r"timed out after 0.3s") as e:
            _chat(_cfg(s.base_url, timeout_s=0.3, max_retries=1))
        held = s.active
        never.set()
    assert e.value.kind == "exhausted" and e.value.attempts == 2 and held == 2 == len(s.requests)


def test_connection_refused_and_dropped_connections():
    url = dead_url()
    with pytest.raises(ModelError, match="connection failed") as e:
        _chat(_cfg(url))
    assert e.value.kind == "exhausted" and e.value.attempts == 3 and url in str(e.value)
    with ScriptedModelServer([Reply(drop=True)]) as s:
        with pytest.raises(ModelError, match="connection failed"):
            _chat(_cfg(s.base_url, max_retries=1))
    assert len(s.requests) == 2


@pytest.mark.parametrize("body", [b"<html><body>502 Bad Gateway</body></html>", b"",
                                  b'{"id": "x", "choices": [{"message": {"content": "cut sho'])
def test_a_reply_that_is_not_json_is_a_clear_error(body):
    with ScriptedModelServer([Reply(raw_body=body)]) as s:
        with pytest.raises(ModelError) as e:
            _chat(_cfg(s.base_url))
    assert e.value.kind == "malformed" and "malformed response" in str(e.value) and s.base_url in str(e.value)


@pytest.mark.parametrize("reply", [Reply(content=""), Reply(content=None),
                                   Reply(raw_body=b'{"id": "x", "object": "chat.completion", "choices": []}')],
                         ids=["empty-content", "null-content", "no-choices"])
def test_an_empty_reply_is_empty_text_and_no_json(reply):
    with ScriptedModelServer([reply]) as s:
        r = _chat(_cfg(s.base_url))
    assert r.text == ""
    with pytest.raises(ReplyError, match="empty"):
        parse_json_reply(r.text)


def test_a_1mb_reply_is_read_and_megabytes_of_junk_are_refused():
    """A megabyte of reasoning (a thinking model's <think> block) before the JSON comes through the
    client whole and is read; a
    megabyte with no JSON, or of nested braces, unclosed strings and fences, is refused as a
    ReplyError, nothing else. How the time grows with the text (8x the text, 8x the time; a scan
    that rescans from every brace would take 64x) is measured by scripts/bench_replies, not clocked
    here."""
    answer = '{"success": true, "reason": "done"}'
    big = "<think>" + "Let me think. " * (MB // 14) + "</think>\n```json\n" + answer + "\n```"
    with ScriptedModelServer([Reply(big)]) as s:
        r = _chat(_cfg(s.base_url))
        got = parse_json_reply(r.text, required=("success",))
    assert len(r.text) > MB and got == {"success": True, "reason": "done"}
    for junk in ("x" * MB, "{" * MB, "```" * (MB // 3), '{"a": "' + "\\" * MB, "[" * 100_000 + "]" * 100_000,
                 '{"a": ' * 100_000 + "1" + "}" * 100_000):
        with pytest.raises(ReplyError):
            parse_json_reply(junk, required=("success",))


# --- end to end: a model-backed agent whose endpoint is down for the whole run ------------------------
AGENT = "uitars"  # a model-backed agent of ours: were it not registered, `harness run` would refuse it and the test fail


@pytest.fixture
def phone(adb, serve_sim):
    return serve_sim(width=540, height=1200)


@pytest.mark.slow
def test_agent_endpoint_down_for_the_whole_run(adb, phone, tmp_path, capsys):
    """Down when the run starts: refused before the phone is touched, one line with the URL (issue
    37). Down once the run has started (it answered the preflight, then refuses every call): each
    episode ends model_error, not agent_error: the endpoint's failure is no decision of the agent's,
    so it is left out of SR, its whole reason is in the progress line and the summary, and the run
    exits 4 since nothing was measured."""
    agent = AGENT
    url = dead_url()
    ids = SHORT[:3]
    suite = write_suite(tmp_path / "suite.yaml", ids)
    args = ["run", "--suite", str(suite), "--device", phone.serial, "--agent", agent, "--judge", "oracle",
            "--model", "m", "--model-retries", "1", "--model-timeout", "3",
            "--adb-port", str(adb.port), "--out", str(tmp_path / "run")]
    t0 = time.monotonic()
    rc, out, err = _run([*args, "--model-base-url", url], capsys)
    assert rc == 2 and url in err and "does not answer" in err and err.count("\n") == 1, err
    assert time.monotonic() - t0 < 30 and not (tmp_path / "run").exists()
    with ScriptedModelServer(lambda req: Reply(status=503, error="the model is overloaded")) as s:
        rc, out, err = _run([*args, "--model-base-url", s.base_url], capsys)
    assert rc == 4, err
    rows = read_results(tmp_path / "run")
    assert sorted(r.task_id for r in rows) == sorted(ids)  # the run completed
    for r in rows:
        assert r.status == "model_error" and r.steps == 0, r
        assert "ModelError" in r.error and "HTTP 503" in r.error and s.base_url in r.error, r.error
        # the whole reason on its progress line (a log has no terminal: one line per episode)
        assert f"{r.task_id}: model_error in 0/" in err and f"(why: {' '.join(r.error.split())})" in err, err
        assert f"model_error: {r.task_id}: {' '.join(r.error.split())}" in " ".join(out.split()), out
    assert "every episode ended model_error" in out and "oracle success: 0/0" not in out, out
    assert f"in {len(ids)} calls ({len(ids)} failed)" in out, out
    check_run_consistent(tmp_path / "run")
    rep = json.loads(_run(["report", str(tmp_path / "run"), "--format", "json", "--resamples", "10"], capsys)[1])
    g = rep["groups"][0]
    assert g["model_errors"] == len(ids) and g["scored"] == 0 and g["sr"]["oracle"]["n"] == 0  # not the agent's failure
    assert sorted(m["task_id"] for m in rep["model_errors"]) == sorted(ids) and "HTTP 503" in rep["model_errors"][0]["error"]
    md = _run(["report", str(tmp_path / "run"), "--resamples", "10"], capsys)[1]
    assert "model err" in md and "Not played: the agent's model failed" in md and md.count("HTTP 503") == len(ids)
    with ScriptedModelServer(lambda req: Reply(status=503, error="the model is overloaded")) as s:
        rc, out, err = _run([*args, "--model-base-url", s.base_url, "--resume"], capsys)
    assert rc == 0, err  # resumable: nothing left to do, nothing duplicated
    assert len(read_results(tmp_path / "run")) == len(ids)
    assert read_manifest(tmp_path / "run")["resumed"] == 1


@pytest.mark.slow
def test_agent_endpoint_that_fails_mid_episode_and_odd_replies(adb, phone, tmp_path, capsys):
    """Empty and 1 MB replies are invalid steps (the episode goes on to its cap); a 500 that
    outlasts the retries mid-episode ends it as model_error with the status; the record keeps the
    steps before the failure."""
    agent = AGENT
    replies = {"settings_wifi_off": [Reply(""), Reply("z" * MB)],
               "clock_earliest_alarm": [Reply("Thought: wait\nAction: wait()"), Reply(status=500, error="boom")]}

    def responder(req):
        text = json.dumps(req)[:200000]
        key = "settings_wifi_off" if "Wi-Fi" in text or "wifi" in text.lower() else "clock_earliest_alarm"
        q = replies[key]
        return q.pop(0) if len(q) > 1 else q[0]

    suite = write_suite(tmp_path / "suite.yaml", ["settings_wifi_off", "clock_earliest_alarm"])
    with ScriptedModelServer(responder) as s:
        rc, out, err = _run(["run", "--suite", str(suite), "--device", phone.serial, "--agent", agent,
                             "--model-base-url", s.base_url, "--model", "m", "--model-retries", "1",
                             "--max-steps", "3", "--adb-port", str(adb.port), "--out", str(tmp_path / "run")], capsys)
    assert rc == 0, err
    rows = {r.task_id: r for r in read_results(tmp_path / "run")}
    wifi = rows["settings_wifi_off"]
    assert wifi.status == "step_limit" and wifi.proposed_steps == 3 and wifi.steps == 0, wifi
    steps = list(iter_steps(tmp_path / "run" / "episodes" / "settings_wifi_off"))
    assert all(st.action is None and st.invalid for st in steps), [st.invalid for st in steps]
    assert any(st.raw_output and len(st.raw_output) >= MB for st in steps)  # recorded whole
    clock = rows["clock_earliest_alarm"]
    assert clock.status == "model_error" and clock.steps == 1 and "HTTP 500" in clock.error, clock
    check_run_consistent(tmp_path / "run")


# --- end to end: a judge whose endpoint is down for the whole run --------------------------------------
def test_judge_endpoint_down_gives_judge_error_and_the_run_goes_on(adb, phone, tmp_path, capsys):
    """The judge's endpoint answered the preflight, then drops every call: each verdict is
    judge_error with the cause, the agent's result stands, and the run goes on."""
    ids = SHORT[:2]
    suite = write_suite(tmp_path / "suite.yaml", ids)
    with ScriptedModelServer(lambda req: Reply(drop=True)) as down:
        args = ["run", "--suite", str(suite), "--device", phone.serial, "--agent", "replay", "--judge", "oracle,crate",
                "--judge-base-url", down.base_url, "--judge-model", "j", "--judge-retries", "0", "--judge-timeout", "3",
                "--adb-port", str(adb.port), "--out", str(tmp_path / "run")]
        t0 = time.monotonic()
        rc, out, err = _run(args, capsys)
        assert rc == 0, err
        assert time.monotonic() - t0 < 90
        rows = read_results(tmp_path / "run")
        assert sorted(r.task_id for r in rows) == sorted(ids)
        for r in rows:
            assert r.status == "finished" and r.verdicts["oracle"] is True, r  # the agent's result stands
            assert r.verdicts["crate"] == "judge_error", r.verdicts
            assert "connection failed" in json.dumps(r.judge_details["crate"]), r.judge_details["crate"]
        check_run_consistent(tmp_path / "run")
        before = results_table(tmp_path / "run")
        rc, _, err = _run([*args, "--resume"], capsys)
    assert rc == 0, err
    assert results_table(tmp_path / "run") == before
