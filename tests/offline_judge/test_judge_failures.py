"""Issue 37, finding 5: ``harness judge`` against a dead endpoint printed "4 episode(s) judged", a
table of judge_error, "cost: 0 model call(s) (18 failed)" and exited 0 with no reason; the same
command once the URL was fixed said "0 judged, 4 already judged (skipped)" with no hint of
--retry-errors; and Ctrl-C counted the calls it cut as failed. Now a dead endpoint is refused before
the pass (one line, its URL), an endpoint that fails every call once the pass has started gets its
reason printed and exit 4, a rerun says how many errors it skipped and how to judge them again, and
a cut call is not a failed one."""

from __future__ import annotations

import threading
import time

from harness.cli.main import main
from harness.client.calls import ModelClient, allow_calls, stop_calls
from harness.client.config import ModelConfig, ModelError
from harness.client.images import user_message
from harness.core.usage import Meter
from tests.fakes.model_server import Reply, ScriptedModelServer, dead_url
from tests.offline_judge import count_judge  # noqa: F401  (registers the count-test judge)
from tests.offline_judge.sample_runs import make_run

EPISODES = [("a", 1, "finished"), ("b", 2, "finished"), ("c", 1, "step_limit"), ("d", 0, "finished")]


def _judge(run, url: str, capsys, *extra: str) -> tuple[int, str, str]:
    rc = main(["judge", str(run), "--judge", "count-test", "--model-base-url", url, "--model", "judge-m",
               "--retries", "0", "--no-progress", *extra])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_dead_endpoint_is_refused_before_the_pass(tmp_path, capsys):
    run = make_run(tmp_path / "run", EPISODES)
    url = dead_url()
    rc, out, err = _judge(run, url, capsys)
    assert rc == 2 and err.count("\n") == 1 and url in err and "does not answer" in err, err
    assert not (run / "judgements").exists() and "judged" not in out


def test_every_call_failing_says_why_exits_4_and_a_rerun_says_how_to_retry(tmp_path, capsys):
    run = make_run(tmp_path / "run", EPISODES)
    with ScriptedModelServer(lambda req: Reply(status=503, error="GPU out of memory")) as s:  # answers the probe only
        rc, out, err = _judge(run, s.base_url, capsys)
    text = " ".join(out.split())
    assert rc == 4, out + err
    assert "judge_error x4:" in text and "HTTP 503" in text and "GPU out of memory" in text, text
    assert "every verdict of this pass is a judge_error" in text and "--retry-errors" in text, text
    with ScriptedModelServer(lambda req: Reply('{"ok": true}' if "FINAL" not in str(req) else '{"success": true}')) as s:
        rc, out, err = _judge(run, s.base_url, capsys)
        text = " ".join(out.split())
        assert rc == 0 and s.requests == [], out + err  # nothing judged again unasked...
        assert "0 judged, 4 already judged (skipped; 4 of them with a judge_error: judge those again with " \
               "--retry-errors)" in text, text  # ...but said, with the way to do it
        rc, out, err = _judge(run, s.base_url, capsys, "--retry-errors")
    assert rc == 0 and "4 judged" in " ".join(out.split()) and "4 with judge_error judged again" in out, out + err


def test_calls_cut_by_ctrl_c_are_not_counted_as_failed():
    """Ctrl-C (or SIGTERM) cuts every call in flight (harness.client.calls.stop_calls, as harness
    judge does on KeyboardInterrupt): such a call raises, and is no failure of the endpoint's."""
    release, errors = threading.Event(), []
    meter = Meter()
    with ScriptedModelServer(lambda req: Reply('{"ok": true}', hold=release, hold_s=30)) as s:
        client = ModelClient(ModelConfig(base_url=s.base_url, model="judge-m", max_retries=0))

        def call():
            try:
                client.chat([user_message("x")], meter=meter, role="count-test")
            except ModelError as e:
                errors.append(e)

        t = threading.Thread(target=call)
        t.start()
        deadline = time.monotonic() + 30
        while not s.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        try:
            stop_calls()
            t.join(10)
        finally:
            allow_calls()
            release.set()
    assert [e.kind for e in errors] == ["interrupted"], errors
    assert meter.to_json()["failed"] == 0, meter.to_json()  # cut, not failed
