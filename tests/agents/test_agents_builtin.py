"""Tests for the built-in agents: replay, script and random, driven with handmade observations."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
import yaml

import agents  # noqa: F401  (registers the built-in agents)
from agents.random_agent import RandomAgent, RandomConfig
from agents.replay import ReplayAgent, ReplayConfig, episode_rng
from agents.script import ScriptAgent, ScriptConfig, load_script
from harness.core.actions import Click, Finish, Key, LongPress, OpenApp, Swipe, TypeText, check_on_screen
from harness.core.episode import Agent, AgentOutput, EpisodeContext, Observation
from harness.core.registry import AGENTS, RegistryError
from harness.core.tasks import RefStep, parse_task

SCREEN = (1080, 2400)

XML = """<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
<hierarchy rotation="0">
  <node text="" class="android.widget.FrameLayout" package="com.android.settings" bounds="[0,0][1080,2400]">
    <node text="Network &amp; internet" resource-id="com.android.settings:id/title" class="android.widget.TextView"
          package="com.android.settings" clickable="true" bounds="[0,200][1080,400]" />
    <node text="Wi-Fi" resource-id="com.android.settings:id/title" class="android.widget.TextView"
          package="com.android.settings" clickable="true" bounds="[0,400][1080,600]" />
    <node text="" resource-id="com.android.settings:id/wifi_switch" class="android.widget.Switch"
          package="com.android.settings" checkable="true" checked="true" bounds="[900,450][1040,550]" />
    <node text="" resource-id="com.android.settings:id/list" class="androidx.recyclerview.widget.RecyclerView"
          package="com.android.settings" scrollable="true" bounds="[0,600][1080,2200]" />
  </node>
</hierarchy>
"""

REFERENCE = [
    {"type": "open_app", "app": "Settings"},
    {"type": "click", "target": {"text": "Network & internet"}},
    {"type": "click", "target": {"rid": "wifi_switch"}},
    {"type": "swipe", "target": {"rid": "list"}, "direction": "up", "distance": 0.5},
    {"type": "long_press", "target": {"text": "Wi-Fi"}, "duration_ms": 1500},
    {"type": "key", "key": "back"},
]
EXPECTED = [
    OpenApp(app="Settings"),
    Click(x=540, y=300),
    Click(x=970, y=500),
    Swipe(start=(540, 1400), end=(540, 600), duration_ms=400),
    LongPress(x=540, y=500, duration_ms=1500),
    Key(key="back"),
]


class FakeHierarchy:
    """A hierarchy callable that counts how often the agent asked for the dump."""

    def __init__(self, xml: str = XML):
        self.xml = xml
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return self.xml


def make_task(task_id="wifi_off", reference=REFERENCE, **kw):
    data = {"id": task_id, "instruction": "Turn off Wi-Fi.", "reference_steps": max(1, len(reference or [1]))}
    if reference is not None:
        data["reference"] = reference
    data.update(kw)
    return parse_task(data)


def ctx(task=None, seed=0, screen=SCREEN) -> EpisodeContext:
    task = task or make_task()
    return EpisodeContext(task=task, screen_size=screen, seed=seed, device_serial="fake-1", cap=task.cap)


def obs(step=1, hierarchy=None, screen=SCREEN) -> Observation:
    return Observation(step=step, screenshot=b"\x89PNG fake", screen_size=screen,
                       hierarchy=hierarchy or FakeHierarchy(), instruction="Turn off Wi-Fi.", language="en")


def run(agent, n, hierarchy=None, screen=SCREEN) -> list[AgentOutput]:
    h = hierarchy or FakeHierarchy()
    return [agent.step(obs(i + 1, h, screen)) for i in range(n)]


def summary(outs: list[AgentOutput]) -> list:
    return [(o.action.to_json() if o.action else None, o.invalid, o.extras.get("perturbation")) for o in outs]


# --- replay --------------------------------------------------------------------------------------
def replay(perturb=0.0, kinds=None, task=None, seed=0) -> ReplayAgent:
    cfg = ReplayConfig(perturb=perturb) if kinds is None else ReplayConfig(perturb=perturb, kinds=kinds)
    a = ReplayAgent(cfg)
    a.reset(ctx(task, seed))
    return a


def test_replay_plays_the_reference_then_finishes():
    a = replay()
    outs = run(a, len(REFERENCE) + 2)
    assert [o.action for o in outs[: len(REFERENCE)]] == EXPECTED
    assert all(o.invalid is None for o in outs)
    assert isinstance(outs[-2].action, Finish) and outs[-2].action.status == "complete"
    assert isinstance(outs[-1].action, Finish)  # and keeps finishing
    assert outs[-2].raw_output == "reference exhausted"


def test_replay_outputs_raw_step_and_resolved_action():
    a = replay()
    first, second = run(a, 2)
    assert "open_app" in first.raw_output and "Settings" in first.raw_output
    assert first.extras == {"reference_step": 1}
    assert '"target"' in second.raw_output and "Network & internet" in second.raw_output
    assert second.extras["resolved"] == {"type": "click", "x": 540, "y": 300}


def test_replay_fetches_the_hierarchy_only_for_targeted_steps():
    a = replay(task=make_task(reference=[{"type": "open_app", "app": "Clock"}, {"type": "key", "key": "home"},
                                         {"type": "click", "target": {"text": "Wi-Fi"}}]))
    h = FakeHierarchy()
    run(a, 2, h)
    assert h.calls == 0
    run(a, 1, h)
    assert h.calls == 1


def test_replay_adapts_to_the_screen_in_the_dump():
    small = XML.replace("[0,200][1080,400]", "[0,100][720,300]")
    a = replay()
    outs = run(a, 2, FakeHierarchy(small), screen=(720, 1600))
    assert outs[1].action == Click(x=360, y=200)


def test_replay_target_not_found_is_invalid_not_an_exception():
    a = replay()
    h = FakeHierarchy("<hierarchy><node text='Other' bounds='[0,0][10,10]'/></hierarchy>")
    outs = run(a, 3, h)
    assert outs[0].action == OpenApp(app="Settings")
    for o in outs[1:]:
        assert o.action is None
        assert o.invalid and "no element on screen matches" in o.invalid
        assert o.raw_output  # the step that could not be aimed is recorded
    # a step that could not be aimed is consumed: the replay moves on
    assert run(a, 1)[0].action == EXPECTED[3]


def test_replay_bad_xml_is_invalid_not_an_exception():
    a = replay()
    run(a, 1)
    out = a.step(obs(2, FakeHierarchy("<not xml")))
    assert out.action is None and "not valid XML" in out.invalid


def test_replay_needs_a_reference():
    a = ReplayAgent(ReplayConfig())
    with pytest.raises(ValueError, match="no_ref"):
        a.reset(ctx(make_task(task_id="no_ref", reference=None)))


def test_replay_reset_restarts():
    a = replay()
    run(a, 3)
    a.reset(ctx())
    assert run(a, 1)[0].action == EXPECTED[0]


LONG_REF = [{"type": "click", "x": i, "y": 100 + i} for i in range(60)]


def long_task(task_id="long"):
    return make_task(task_id=task_id, reference=LONG_REF)


def test_replay_perturbations_are_deterministic_by_seed_and_task():
    def trace(seed, task_id):
        return summary(run(replay(0.3, task=long_task(task_id), seed=seed), 80))

    t = trace(1, "long")
    assert t == trace(1, "long")
    assert any(p is not None for _, _, p in t)
    assert t != trace(2, "long")
    assert t != trace(1, "long_b")


def test_replay_perturbations_do_not_depend_on_episode_order():
    alone_a = summary(run(replay(0.4, task=long_task("a"), seed=5), 40))
    alone_b = summary(run(replay(0.4, task=long_task("b"), seed=5), 40))
    a, b = replay(0.4, task=long_task("a"), seed=5), replay(0.4, task=long_task("b"), seed=5)
    mixed_a, mixed_b = [], []
    for i in range(40):  # interleaved, as parallel phones would run them
        mixed_b.append(b.step(obs(i + 1)))
        mixed_a.append(a.step(obs(i + 1)))
    assert summary(mixed_a) == alone_a and summary(mixed_b) == alone_b


def test_episode_rng_is_stable():
    assert episode_rng(3, "t", "replay").random() == episode_rng(3, "t", "replay").random()
    assert episode_rng(3, "t", "replay").random() != episode_rng(3, "t", "random").random()


def test_replay_without_perturbation_draws_nothing():
    a = replay(0.0)
    state = a.rng.getstate()
    run(a, 3)
    assert a.rng.getstate() == state


def test_replay_perturb_rate_is_roughly_p():
    outs = run(replay(0.25, kinds=["back"], task=long_task()), 60)
    n = sum(1 for o in outs if o.extras.get("perturbation"))
    assert 5 <= n <= 30


def test_replay_kind_back_inserts_a_back_press():
    outs = run(replay(0.5, kinds=["back"], task=long_task()), 90)
    played = [o.action for o in outs if not o.extras.get("perturbation")]
    bad = [o for o in outs if o.extras.get("perturbation")]
    assert bad and all(o.action == Key(key="back") and o.raw_output == "perturbation: back" for o in bad)
    # no reference step is lost: the played steps are the reference, in order
    refs = [a for a in played if isinstance(a, Click)]
    assert refs == [Click(x=s["x"], y=s["y"]) for s in LONG_REF][: len(refs)]


def test_replay_kind_wrong_tap_stays_in_the_content_area():
    outs = run(replay(1.0, kinds=["wrong_tap"], task=long_task()), 50)
    for o in outs:
        assert o.extras == {"perturbation": "wrong_tap"}
        assert isinstance(o.action, Click)
        check_on_screen(o.action, *SCREEN)
        assert int(SCREEN[1] * 0.05) <= o.action.y < int(SCREEN[1] * 0.9)
    assert len({(o.action.x, o.action.y) for o in outs}) > 40


def test_replay_kind_skip_drops_reference_steps():
    outs = run(replay(1.0, kinds=["skip"]), len(REFERENCE) + 1)
    for o in outs[: len(REFERENCE)]:
        assert o.action is None and o.invalid and "skip" in o.invalid
        assert o.extras == {"perturbation": "skip"}
    assert isinstance(outs[-1].action, Finish)  # every step was skipped: the reference is exhausted
    played = [o.action for o in run(replay(0.5, kinds=["skip"], task=long_task()), 60) if o.action]
    assert all(isinstance(a, (Click, Finish)) for a in played)
    clicks = [a for a in played if isinstance(a, Click)]
    assert 0 < len(clicks) < len(LONG_REF)
    xs = [c.x for c in clicks]
    assert xs == sorted(xs)  # order kept, some dropped


def test_replay_config_validation():
    with pytest.raises(ValueError, match="between 0 and 1"):
        ReplayConfig(perturb=1.5)
    with pytest.raises(ValueError, match="unknown perturbation kinds"):
        ReplayConfig(kinds=["wrong_tap", "teleport"])
    with pytest.raises(RegistryError, match="perturb"):
        AGENTS.build("replay", {"perturb": "-0.1"})
    a = AGENTS.build("replay", {"perturb": "0.2", "kinds": "skip,back"})
    assert isinstance(a, ReplayAgent)
    assert a.spec() == {"name": "replay", "perturb": 0.2, "kinds": ["skip", "back"]}
    assert isinstance(a, Agent)


def test_replay_empty_kinds_is_refused_when_it_would_perturb():
    """Perturbing with no kind to choose from is refused when the options are read (it would fail
    at the first perturbed step); with perturb=0 an empty list is harmless and the reference plays."""
    with pytest.raises(ValueError, match="needs at least one perturbation kind"):
        ReplayConfig(perturb=1.0, kinds=[])
    with pytest.raises(RegistryError, match="perturbation kind"):
        AGENTS.build("replay", {"perturb": "0.5", "kinds": ""})
    a = ReplayAgent(ReplayConfig(perturb=0.0, kinds=[]))
    a.reset(ctx())
    assert summary(run(a, len(REFERENCE))) == summary(run(replay(), len(REFERENCE)))


def test_replay_bad_targeted_extra_is_refused_when_the_task_loads():
    """A targeted step's extra field is checked against the action it becomes when the task is
    loaded, naming the field, so a replay never meets it mid-episode."""
    with pytest.raises(ValueError, match="duration_ms"):
        make_task(reference=[{"type": "long_press", "target": {"text": "Wi-Fi"}, "duration_ms": 0}])
    task = make_task(reference=[{"type": "long_press", "target": {"text": "Wi-Fi"}, "duration_ms": 800}])
    assert task.reference[0].model_extra == {"duration_ms": 800}


# --- script --------------------------------------------------------------------------------------
def write_script(tmp_path: Path, data, name="script.yaml") -> str:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return str(p)


def script(path: str, task=None) -> ScriptAgent:
    a = ScriptAgent(ScriptConfig(file=path))
    a.reset(ctx(task))
    return a


def test_script_list_plays_then_finishes(tmp_path):
    path = write_script(tmp_path, REFERENCE)
    a = script(path)
    outs = run(a, len(REFERENCE) + 1)
    assert [o.action for o in outs[:-1]] == EXPECTED
    assert isinstance(outs[-1].action, Finish) and outs[-1].raw_output == "script exhausted"


def test_script_per_task(tmp_path):
    path = write_script(tmp_path, {"wifi_off": [{"type": "key", "key": "home"}],
                                   "other": [{"type": "type", "text": "hi", "submit": True}]})
    assert run(script(path), 1)[0].action == Key(key="home")
    other = script(path, make_task(task_id="other"))
    assert run(other, 1)[0].action == TypeText(text="hi", submit=True)
    with pytest.raises(ValueError) as ei:
        script(path, make_task(task_id="missing_one"))
    assert "missing_one" in str(ei.value) and path in str(ei.value)


def test_script_concrete_steps_do_not_fetch_the_hierarchy(tmp_path):
    a = script(write_script(tmp_path, [{"type": "click", "x": 1, "y": 2}, {"type": "wait", "seconds": 1}]))
    h = FakeHierarchy()
    outs = run(a, 3, h)
    assert h.calls == 0
    assert outs[0].action == Click(x=1, y=2)


def test_script_target_not_found_is_invalid(tmp_path):
    a = script(write_script(tmp_path, [{"type": "click", "target": {"text": "Nowhere"}}, {"type": "key", "key": "back"}]))
    first, second = run(a, 2)
    assert first.action is None and "Nowhere" in first.invalid
    assert second.action == Key(key="back")


@pytest.mark.parametrize(
    "content,fragments",
    [
        ("- {type: click, x: 1}\n", ["script step 1", "y"]),
        ("- {type: key, key: back}\n- {type: tap, x: 1, y: 2}\n", ["script step 2", "tap"]),
        ("t1:\n  - {type: swipe, target: {text: A}}\n", ["task t1 step 1", "direction"]),
        ("t1: {type: click}\n", ["task t1", "expected a list"]),
        ("just text\n", ["expected a list"]),
        ("", ["expected a list"]),
        ("- [unclosed\n", ["not valid YAML"]),
    ],
)
def test_script_load_errors_name_file_and_step(tmp_path, content, fragments):
    p = tmp_path / "s.yaml"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as ei:
        load_script(str(p))
    msg = str(ei.value)
    assert msg.startswith(str(p))
    for f in fragments:
        assert f in msg


def test_script_missing_file_and_config(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        load_script(str(tmp_path / "absent.yaml"))
    with pytest.raises(RegistryError, match="file=PATH"):
        AGENTS.build("script", {})
    path = write_script(tmp_path, [{"type": "key", "key": "back"}])
    a = AGENTS.build("script", {"file": path})
    assert a.spec() == {"name": "script", "file": path}
    assert isinstance(a, Agent)


def test_script_steps_are_refsteps(tmp_path):
    steps = load_script(write_script(tmp_path, [{"type": "click", "target": {"class": "Switch"}}]))
    assert isinstance(steps[0], RefStep) and steps[0].target.cls == "Switch"


# --- random --------------------------------------------------------------------------------------
def rand(seed=0, task_id="wifi_off", **weights) -> RandomAgent:
    a = RandomAgent(RandomConfig(**weights))
    a.reset(ctx(make_task(task_id=task_id), seed))
    return a


def test_random_is_deterministic_by_seed_and_task():
    t = summary(run(rand(7), 50))
    assert t == summary(run(rand(7), 50))
    assert t != summary(run(rand(8), 50))
    assert t != summary(run(rand(7, "another_task"), 50))


def test_random_reset_replays_the_same_episode():
    a = rand(3)
    first = summary(run(a, 20))
    a.reset(ctx(make_task(), 3))
    assert summary(run(a, 20)) == first


@pytest.mark.parametrize("screen", [SCREEN, (720, 1280), (1440, 3200)])
def test_random_stays_on_screen_and_never_finishes(screen):
    outs = run(rand(11), 400, screen=screen)
    kinds = set()
    w, h = screen
    for o in outs:
        a = o.action
        assert a is not None and o.invalid is None
        assert not isinstance(a, Finish)
        kinds.add(a.type)
        check_on_screen(a, w, h)
        pts = [(a.x, a.y)] if isinstance(a, Click) else [a.start, a.end] if isinstance(a, Swipe) else []
        for _, y in pts:
            assert int(h * 0.04) <= y < int(h * 0.93)  # clear of the status and navigation bars
        if isinstance(a, TypeText):
            assert 1 <= len(a.text) <= 8 and set(a.text) <= set(string.ascii_lowercase)
        if isinstance(a, Key):
            assert a.key == "back"
        assert o.raw_output == f"random {dict(click='tap', swipe='swipe', key='back', type='text')[a.type]}"
    assert kinds == {"click", "swipe", "key", "type"}


def test_random_weights():
    assert {o.action.type for o in run(rand(tap=0, swipe=0, back=1, text=0), 30)} == {"key"}
    assert {o.action.type for o in run(rand(tap=1, swipe=0, back=0, text=0), 30)} == {"click"}
    assert {o.action.type for o in run(rand(tap=0, swipe=0, back=0, text=2), 30)} == {"type"}
    taps = sum(o.action.type == "click" for o in run(rand(tap=0.9, swipe=0.1, back=0, text=0), 200))
    assert taps > 150


def test_random_config_validation():
    with pytest.raises(ValueError):
        RandomConfig(tap=-1)
    with pytest.raises(ValueError):
        RandomConfig(tap=0, swipe=0, back=0, text=0)
    with pytest.raises(RegistryError, match="tap"):
        AGENTS.build("random", {"tap": "lots"})
    a = AGENTS.build("random", {"text": "0"})
    assert a.spec() == {"name": "random", "tap": 0.6, "swipe": 0.2, "back": 0.1, "text": 0.0}
    assert isinstance(a, Agent)
