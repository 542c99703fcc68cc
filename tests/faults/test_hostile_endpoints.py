"""Hostile model endpoints against whole runs on the simulated phone (issue 28): a reply that trickles
in a byte at a time ends the agent's step as an error within its deadline and fails the CRATE-S gate
closed within its own (the risky transfer never runs); Ctrl-C while a model thread is stuck ends
`harness run` in seconds, the phone put back and the run resumable; a huge reply is cut at the byte
limit, marked truncated and stored once (its thought is not a second copy), and the viewer's pages
stay small; the structured output each endpoint and model used is in the manifests.

Deadlines are a second or two; bounds are generous (well under what a stuck server would cost)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from harness.device.prepare import Journal
from harness.records import THOUGHT_CHARS, iter_steps, read_manifest, read_results
from harness.sim.phone import LATIN_IME
from tests.fakes.model_server import Reply, ScriptedModelServer, refusing_structured_output
from tests.faults.helpers import SMALL_SIZE, harness_popen, write_suite
from tests.faults.helpers import run_cli as _run
from tests.judges.helpers import SUITE, good_reply, kind_of

pytestmark = pytest.mark.faults

STUCK_S = 60.0       # what the stuck endpoint would cost without a deadline (its --*-timeout)
WAIT = "Thought: nothing to do yet\nAction: wait()"


@pytest.fixture
def phone(serve_sim):
    """An in-process simulated phone, small (PNG encoding dominates a step)."""
    w, h = (int(n) for n in SMALL_SIZE.split("x"))
    return serve_sim(width=w, height=h)


def test_a_trickling_agent_endpoint_ends_the_step_as_an_error_within_its_deadline(adb, phone, tmp_path, capsys):
    """Headers at once, then a byte every 0.5 s: with --model-timeout 2 the first step is a
    model_error naming the deadline, about 2 s after the first byte (httpx alone waited forever)."""
    suite = write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])
    with ScriptedModelServer(lambda req: Reply(WAIT, trickle_s=0.5)) as s:
        t0 = time.monotonic()
        rc, out, err = _run(["run", "--suite", str(suite), "--device", phone.serial, "--agent", "uitars",
                             "--model-base-url", s.base_url, "--model", "m", "--model-timeout", "2",
                             "--model-retries", "0", "--judge", "oracle", "--adb-port", str(adb.port),
                             "--out", str(tmp_path / "run"), "--quiet"], capsys)
        took = time.monotonic() - t0
        first_byte = s.trickle_started[0] if s.trickle_started else None
    assert rc == 4, err  # its one episode ended model_error: nothing of the agent's was measured
    (row,) = read_results(tmp_path / "run")
    assert row.status == "model_error" and row.steps == 0, row
    assert "step 1" in row.error and "timed out after 2s" in row.error and "headers and body" in row.error, row.error
    assert first_byte is not None and took < STUCK_S / 2, took
    print(f"agent: episode {row.duration_s:.2f}s, the step's error about 2 s after the first byte")


def test_a_trickling_gate_fails_closed_within_its_deadline_and_the_risky_step_never_runs(adb, phone, tmp_path,
                                                                                         capsys):
    """The gate's endpoint answers every check at once, except the transfer's (the 8th check), which
    it trickles. With --judge-timeout 2 --judge-retries 0 that check fails closed (monitor_error)
    ~2 s after its first byte; the money never moves. The same endpoint refuses response_format for
    the judge model: the manifest says plain text was used, and why; `harness judge` over the run
    records what its pass used."""
    checks = []

    def answer(req):
        if kind_of(req) == "crate_s_step":
            checks.append(req)
            if len(checks) == 8:
                return Reply(json.dumps({"risky": False, "category": None, "reason": "fine", "score": 0.0}),
                             trickle_s=0.5)
        return Reply(good_reply(req))

    run = tmp_path / "run"
    with ScriptedModelServer(refusing_structured_output({"judge-m"}, answer)) as s:
        rc, out, err = _run(["run", "--suite", str(SUITE), "--tasks", "wallet_pay_landlord_unsafe",
                             "--device", phone.serial, "--agent", "replay",
                             "--judge", "oracle", "--monitor", "crate-s", "--monitor-mode", "gate",
                             "--judge-base-url", s.base_url, "--judge-model", "judge-m", "--judge-timeout", "2",
                             "--judge-retries", "0", "--adb-port", str(adb.port), "--out", str(run), "--quiet"], capsys)
        first_byte = s.trickle_started[0] if s.trickle_started else None
        assert rc == 0, err
        (row,) = read_results(run)
        assert row.status == "halted" and row.halt.step == 8 and row.halt.category == "monitor_error", row
        assert row.steps == 7 and "timed out" in row.halt.reason, row.halt
        assert row.verdicts["oracle_unsafe"] is False  # the transfer never happened
        assert phone.phone.state_json()["apps"]["wallet"]["transfers"] == []
        last = list(iter_steps(run / "episodes" / "wallet_pay_landlord_unsafe"))[-1]
        assert last.index == 8 and last.executed is False and last.monitor["halt"] is True
        assert first_byte is not None and last.monitor["latency_s"] < STUCK_S / 4, last.monitor
        print(f"gate: the check failed closed {last.monitor['latency_s']:.2f}s after it was asked")
        # what structured output was used: plain text, after the endpoint refused the schema
        (entry,) = [e for e in read_manifest(run)["structured_output"] if e["model"] == "judge-m"]
        assert entry["base_url"] == s.base_url and set(entry["used"]) == {"none"} and entry["used"]["none"] == 7  # the 8th never came
        assert "response_format" in entry["refused"]["json_schema"]
        assert row.usage["by_role"]["monitor:crate-s"]["structured"]["none"] == 7
        # a judgement set records what its pass used
        rc, out, err = _run(["judge", str(run), "--judge", "crate-s", "--judge-base-url", s.base_url,
                             "--judge-model", "judge-m", "--judge-set", "probe", "--no-progress", "--no-cache"], capsys)
        assert rc == 0, err
        passes = json.loads((run / "judgements" / "probe" / "manifest.json").read_text())["passes"]
        (used,) = [e for e in passes[-1]["structured_output"] if e["model"] == "judge-m"]
        assert set(used["used"]) == {"none"} and "json_schema" in used["refused"]
        (line,) = [json.loads(x) for x in (run / "judgements" / "probe" / "results.jsonl").read_text().splitlines()]
        assert line["usage"]["structured"] == {"none": line["usage"]["calls"]} and line["usage"]["calls"] > 0, line


def test_a_huge_reply_is_cut_marked_and_stored_once(adb, phone, tmp_path, capsys):
    """Step 1's reply holds a 1 MB thought (under the limit): the thought is stored as its first
    THOUGHT_CHARS characters, the whole once, in raw_output. Step 2's reply is 6 MB: cut at the
    2 MiB limit, the step invalid saying which limit to raise, marked truncated. Step 3 answers with
    a 50 kB text, over what an answer may hold: an invalid step saying so (the episode goes on; it
    was an episode error). Step 4 answers with 9,000 characters: the answer is the action, and the
    raw action (which repeats it three times: the call, its arguments, the package's inputs) keeps
    only the first characters of each string. The trajectory holds each reply once; the viewer's
    pages stay small."""
    from agents.common import RAW_STRING_CHARS
    from harness.core.actions import MAX_TEXT
    from harness.client.config import MAX_REPLY_BYTES
    from harness.report.viewer import write_viewer

    too_long, answer = "b" * 50_000, "a" * 9_000
    replies = [Reply("Thought: " + "t" * 1_000_000 + "\nAction: wait()"), Reply("z" * 6_000_000),
               Reply(f"Thought: done\nAction: finished(content='{too_long}')"),
               Reply(f"Thought: done\nAction: finished(content='{answer}')")]
    suite = write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])
    run = tmp_path / "run"
    with ScriptedModelServer(replies) as s:
        rc, out, err = _run(["run", "--suite", str(suite), "--device", phone.serial, "--agent", "uitars",
                             "--model-base-url", s.base_url, "--model", "m", "--max-steps", "4", "--judge", "oracle",
                             "--adb-port", str(adb.port), "--out", str(run), "--quiet"], capsys)
    assert rc == 0, err
    ep = run / "episodes" / "settings_wifi_off"
    (row,) = read_results(run)
    steps = list(iter_steps(ep))
    assert len(steps) == 4 and row.error is None, (row.status, row.error)
    first, second, third, fourth = steps
    assert first.action["type"] == "wait"
    assert len(first.raw_output) > 1_000_000 and len(first.thought) == THOUGHT_CHARS
    assert first.extras["thought_cut"] == {"chars": len(first.raw_output) - len("Thought: \nAction: wait()"),
                                           "kept": THOUGHT_CHARS, "whole_in": "raw_output"}
    assert second.action is None and "--model-max-reply-bytes" in second.invalid, second.invalid
    assert second.extras["truncated"] is True and second.extras["truncated_by"] == "max_reply_bytes"
    assert MAX_REPLY_BYTES - 1000 < len(second.raw_output) <= MAX_REPLY_BYTES and second.thought is None
    assert third.action is None and f"answer: text: String should have at most {MAX_TEXT}" in third.invalid, \
        third.invalid[:300]
    assert fourth.action == {"type": "answer", "text": answer}, str(fourth.action)[:200]
    raw = json.dumps(fourth.extras["raw_action"])
    assert answer not in raw and "a" * RAW_STRING_CHARS in raw and len(raw) < 4 * RAW_STRING_CHARS + 2000, len(raw)
    assert fourth.extras["raw_action_cut"]["whole_in"] == "raw_output" and answer in fourth.raw_output
    size = (ep / "trajectory.jsonl").stat().st_size
    # each reply once (was: twice, and 6 MB whole), the answer once more as the action it is
    assert size < 1_000_000 + MAX_REPLY_BYTES + len(too_long) + 2 * len(answer) + 200_000, size
    index = write_viewer(run)
    pages = sum(p.stat().st_size for p in (run / "report").rglob("*.html")) + index.stat().st_size
    assert pages < 400_000, pages
    page = (run / "report" / "episodes" / "settings_wifi_off.html").read_text(encoding="utf-8")
    assert "more characters not shown here" in page and "reply cut" in page


# --- Ctrl-C while a model thread is stuck ------------------------------------------------------------------
def _interrupt_when(p, ready, what: str) -> float:
    end = time.monotonic() + 120
    while not ready() and time.monotonic() < end and p.poll() is None:
        time.sleep(0.05)
    assert ready(), f"{what} never happened: " + (p.communicate(timeout=30)[1] if p.poll() is not None else "")
    time.sleep(0.5)  # the thread is inside its read now
    p.send_signal(signal.SIGINT)
    return time.monotonic()


@pytest.mark.slow
@pytest.mark.parametrize("stuck", ["monitor", "agent"])
def test_ctrl_c_with_a_stuck_model_thread_ends_the_run_in_seconds(adb, serve_sim, tmp_path, capsys, stuck):
    """The issue's run: a gate check (or the agent's call) reading a reply that trickles in a byte
    a second, with a 60 s timeout. Ctrl-C ends `harness run` in seconds (it hung over ten minutes
    joining the stuck monitor_0 thread): exit 130, the phone put back, nothing recorded for the cut
    episode, the manifest saying what is left; --resume completes it (shown once, for the monitor)."""
    sim = serve_sim(width=540, height=1200)
    suite = write_suite(tmp_path / "suite.yaml", ["settings_wifi_off"])
    run = tmp_path / "run"
    with ScriptedModelServer(lambda req: Reply(WAIT if stuck == "agent" else good_reply(req), trickle_s=1.0)) as s:
        if stuck == "monitor":
            args = ["--agent", "replay", "--monitor", "crate-s", "--monitor-mode", "gate", "--judge-base-url",
                    s.base_url, "--judge-model", "judge-m", "--judge-timeout", str(STUCK_S), "--judge-retries", "0"]
        else:
            args = ["--agent", "uitars", "--model-base-url", s.base_url, "--model", "m", "--model-timeout",
                    str(STUCK_S), "--model-retries", "0"]
        base = ["run", "--suite", str(suite), "--device", sim.serial, "--judge", "oracle", "--max-steps", "3",
                "--adb-port", str(adb.port), "--out", str(run), "--quiet", *args]
        p = harness_popen(base, adb.port)
        t_sig = _interrupt_when(p, lambda: bool(s.trickle_started), "a trickling call")
        out, err = p.communicate(timeout=STUCK_S)
        took = time.monotonic() - t_sig
        assert p.returncode == 130, (p.returncode, out, err)
        assert took < STUCK_S / 3, took
        print(f"Ctrl-C with a stuck {stuck} thread: the run ended {took:.1f}s after SIGINT")
        # the phone put back: its journal is gone (the worker's state folder also holds journals that
        # runs other tests killed on purpose left for their phones, so only this phone's counts)
        assert sim.phone.ime == LATIN_IME and not [j for j in Journal.pending() if j.serial == sim.serial]
        m = read_manifest(run)
        assert m["interrupted"] is True and m["not_run"] == ["settings_wifi_off"] and not read_results(run)
        assert m["device_sessions"][0]["devices"][sim.serial]["restore"]["restored"]
        if stuck == "agent":
            return
        # resumable: the same run, the endpoint answering at once now (in this process: a subprocess
        # costs seconds more to start)
        s.set(lambda req: Reply(good_reply(req)))
        rc, out, err = _run([*base, "--resume"], capsys)
        assert rc == 0, err
    (row,) = read_results(run)
    assert row.status in ("finished", "step_limit") and row.attempt == 1, row
