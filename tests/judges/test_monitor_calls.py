"""How the crate-s monitor makes its calls: in the gate's place in the endpoint's queue, metered to
the episode under its own role, asked again only as often as ``parse_retries`` says; and the exact
words it refuses a calibration file with. Each test here was written for a mutant of
judges/monitor.py that survived ``scripts/mutmut --only monitor`` (issue 40 item 3)."""

from __future__ import annotations

import json

import pytest

from harness.client.slots import Priority
from harness.core.actions import Click
from harness.core.episode import ProposedStep
from harness.core.usage import Meter
from judges.monitor import CrateSMonitor, CrateSMonitorConfig
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.judges.helpers import kind_of, model_cfg, png
from tests.judges.test_calibration import _monitor, write_calibration

SAFE = json.dumps({"risky": False, "category": None, "reason": "opens a settings page", "score": 0.1})


class Ctx:
    screen_size = (120, 240)
    live = True

    def __init__(self) -> None:
        self.meter = Meter()


def step() -> ProposedStep:
    return ProposedStep(1, png(0), Click(x=10, y=20), None, "open the settings", "en")


def spied(m: CrateSMonitor, monkeypatch) -> list[dict]:
    """The priority, role and meter of each call the monitor's client makes (the call still goes out)."""
    asked: list[dict] = []
    chat = m.client.chat

    def spy(messages, **kw):
        asked.append({k: kw.get(k) for k in ("priority", "role", "meter")})
        return chat(messages, **kw)

    monkeypatch.setattr(m.client, "chat", spy)
    return asked


def test_the_monitors_calls_wait_in_the_gates_place_and_are_metered_to_the_episode_as_the_monitor(monkeypatch):
    with ScriptedModelServer(lambda req: Reply(SAFE)) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s)))
        asked = spied(m, monkeypatch)
        ctx = Ctx()
        m.start(ctx)
        v = m.check(step())
    assert v.halt is False and v.risky is False
    assert len(asked) == 1 and asked[0]["meter"] is ctx.meter
    assert asked == [{"priority": Priority.GATE, "role": "monitor:crate-s", "meter": ctx.meter}]
    assert ctx.meter.role("monitor:crate-s")["calls"] == 1


@pytest.mark.parametrize("retries,calls", [(0, 1), (1, 2), (2, 3)])
def test_a_reply_that_is_no_verdict_is_asked_again_parse_retries_times_then_halts(retries, calls):
    with ScriptedModelServer(lambda req: Reply("I think it is fine.")) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s), parse_retries=retries))
        m.start(Ctx())
        v = m.check(step())
        asked = [r for r in s.requests if kind_of(r) == "crate_s_step"]
    assert len(asked) == calls
    assert v.halt is True  # fails closed


def test_a_calibration_for_another_monitor_is_refused_naming_every_difference_then_what_to_do(tmp_path):
    f = write_calibration(tmp_path / "c.json", _monitor())
    with pytest.raises(ValueError) as e:
        _monitor(calibration=str(f), model_kw={"temperature": 0.7}, draw=False)
    text = str(e.value)
    head = f"calibration {f} was made for another monitor: "
    tail = "; calibrate again with this monitor's scores"
    assert text.startswith(head) and text.endswith(tail), text
    problems = text[len(head):-len(tail)].split("; ")
    assert len(problems) == 2, problems
    assert problems[0].startswith("temperature: this run's is 0.7, the calibration's is 0.0"), problems
    assert problems[1].startswith("draw: this run's is False"), problems


def test_a_monitor_asked_before_any_episode_started_still_asks_as_the_gate(monkeypatch):
    """A check with no episode (judge-eval's calibration scores steps this way) waits in the gate's
    place under the monitor's own role; nothing is metered to an episode that does not exist."""
    with ScriptedModelServer(lambda req: Reply(SAFE)) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s)))
        m.screen_size = (120, 240)
        asked = spied(m, monkeypatch)
        assert m.check(step()).halt is False
    assert asked == [{"priority": Priority.GATE, "role": "monitor:crate-s", "meter": None}]


def test_a_check_whose_reply_never_came_says_why_in_the_calls_own_words():
    """The halt's reason quotes the call's failure as it was said; only an unexpected error (an
    undecodable screenshot) is named by its type."""
    with ScriptedModelServer(lambda req: Reply("no verdict here")) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s), parse_retries=0))
        m.start(Ctx())
        v = m.check(step())
    assert v.halt is True and v.category == "monitor_error"
    assert v.reason.startswith("the check failed (") and not v.reason.startswith("the check failed (JudgeCallError")
    assert v.error == v.reason[len("the check failed ("):v.reason.index("); halted before the action")]
    bad = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(base_url="http://127.0.0.1:9/v1")))
    bad.start(Ctx())
    w = bad.check(ProposedStep(1, b"not a png", Click(x=10, y=20), None, "open the settings", "en"))
    assert w.halt is True and w.error.startswith("UnidentifiedImageError: "), w.error


RISKY = json.dumps({"risky": True, "category": "Over-Automation", "reason": "sends the whole balance", "score": 0.9})


def test_a_verdict_records_its_decision_cache_prompt_and_time_and_quotes_the_reply_only_when_it_halts():
    replies = iter([SAFE, RISKY])
    with ScriptedModelServer(lambda req: Reply(next(replies))) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s)))
        m.start(Ctx())
        allowed = m.check(step())
        again = m.check(step())  # the same screen and action: the finding is reused, not asked again
        halted = m.check(ProposedStep(2, png(1), Click(x=30, y=40), None, "open the settings", "en"))
    assert allowed.halt is False and set(allowed.extras) == {"decision", "cached", "prompt", "check_s"}
    assert allowed.extras["cached"] is False and again.extras["cached"] is True and "reply" not in again.extras
    assert allowed.extras["prompt"].startswith("crate_s_step_en@v3#") and allowed.extras["check_s"] >= 0
    assert halted.halt is True and halted.extras["reply"] == RISKY and halted.extras["cached"] is False
    assert set(halted.extras) == {"decision", "cached", "prompt", "check_s", "reply"}


@pytest.mark.parametrize("retries", [0, 1])
def test_a_failed_check_quotes_the_refused_reply_and_every_reply_only_when_it_was_asked_again(retries):
    with ScriptedModelServer(lambda req: Reply("no verdict here")) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s), parse_retries=retries))
        m.start(Ctx())
        v = m.check(step())
    assert v.halt is True and v.extras["reply"] == "no verdict here"
    if retries:
        assert v.extras["replies"] == ["no verdict here", "no verdict here"]
    else:
        assert "replies" not in v.extras


def test_a_verdict_carries_the_models_score_the_monitors_name_and_the_calls_usage(tmp_path):
    cache = tmp_path / "findings.jsonl"
    with ScriptedModelServer(lambda req: Reply(RISKY)) as s:
        m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(s), cache=str(cache)))
        m.start(Ctx())
        v = m.check(step())
        cached = m.check(step())
    assert (v.score, v.monitor, v.category) == (0.9, "crate-s", "Over-Automation")
    assert v.usage == {"prompt": 100, "completion": len(RISKY) // 4 + 1, "total": 100 + len(RISKY) // 4 + 1}  # as served
    assert cached.usage is None and cached.extras["cached"] is True  # nothing was asked, nothing spent
    lines = cache.read_text(encoding="utf-8").splitlines()  # the finding is kept on disk for the next run
    assert len(lines) == 1 and json.loads(lines[0])["value"]["evidence"]["risky"] is True


def test_a_monitor_without_a_model_is_refused_saying_which_and_what_to_pass():
    from harness.core.registry import RegistryError

    with pytest.raises(RegistryError) as e:
        CrateSMonitor(CrateSMonitorConfig(model=None))
    assert str(e.value) == "monitor 'crate-s' needs a model endpoint: pass --judge-base-url URL --judge-model NAME"


@pytest.mark.parametrize("option,message", [
    ({"timeout_s": 0}, "timeout_s must be > 0"),
    ({"reflect_max": 0, "mode": "reflect"}, "reflect_max must be >= 1 (1: the first flagged proposal halts, as gate)"),
    ({"threshold": 1.5}, "threshold must be between 0 and 1"),
])
def test_a_setting_out_of_range_is_refused_in_words_that_say_the_range(option, message):
    with pytest.raises(ValueError) as e:
        CrateSMonitorConfig(model=model_cfg(base_url="http://127.0.0.1:9/v1"), **option)
    assert str(e.value) == message
