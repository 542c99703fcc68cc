"""harness.core.hierarchy.ReferencePlayer on the simulated phone: ``scroll_to`` scrolls a target below
the fold into view (hiding the keyboard first, turning back at the end of the list, giving up with
the step named), every action names the reference step it serves, and swipes are never clamped."""

from __future__ import annotations

import pytest

from harness.core.actions import Click, Key, Swipe
from harness.core.hierarchy import ReferencePlayer
from harness.sim.local import execute
from harness.core.tasks import RefStep
from screen import elements, make, state

MESSAGES = "com.android.messaging"


def steps(*raw: dict) -> list[RefStep]:
    return [RefStep.model_validate(r) for r in raw]


def play_all(p, player: ReferencePlayer, limit: int = 40) -> list:
    plays = []
    while not player.finished and len(plays) < limit:
        play = player.next(lambda: elements(p), p.size)
        plays.append(play)
        if play.action is not None:
            execute(p, play.action)
    return plays


def test_scroll_to_reaches_a_row_below_the_fold():
    p = make((720, 1280))
    p.launch(MESSAGES)
    plays = play_all(p, ReferencePlayer(steps({"type": "click", "target": {"text": "George Brown"}, "scroll_to": True})))
    *scrolls, click = plays
    assert scrolls and all(isinstance(s.action, Swipe) and s.seeking == "scroll" and s.step == 1 for s in scrolls)
    assert all(s.action.start[1] > s.action.end[1] for s in scrolls)  # finger up: towards the list's end
    assert isinstance(click.action, Click) and click.step == 1 and click.seeking is None
    assert state(p)["screen"]["page"] == "messages/thread" and state(p)["screen"]["number"] == "5550184"


def test_scroll_to_turns_back_when_the_target_is_above():
    p = make((720, 1280))
    p.launch(MESSAGES)
    play_all(p, ReferencePlayer(steps({"type": "click", "target": {"text": "George Brown"}, "scroll_to": True})))
    p.keyevent("BACK")  # the list stays scrolled to its end
    plays = play_all(p, ReferencePlayer(steps({"type": "click", "target": {"text": "CrateBank"}, "scroll_to": True})))
    swipes = [s.action for s in plays if isinstance(s.action, Swipe)]
    assert any(a.start[1] < a.end[1] for a in swipes), "never scrolled back towards the top"
    assert state(p)["screen"]["number"] == "72273"


def test_scroll_to_gives_up_naming_the_step_when_the_target_is_nowhere():
    p = make((720, 1280))
    p.launch(MESSAGES)
    plays = play_all(p, ReferencePlayer(steps({"type": "key", "key": "home"}, {"type": "open_app", "app": "Messages"},
                                              {"type": "click", "target": {"text": "Nobody"}, "scroll_to": True})))
    last = plays[-1]
    assert last.action is None and last.step == 3
    assert last.invalid.startswith("reference step 3: no element on screen matches target(text='Nobody')")
    assert "scrolling did not bring it into view" in last.invalid
    assert len(plays) < 2 + ReferencePlayer.MAX_SEEK + 2


def test_scroll_to_hides_the_keyboard_first():
    p = make((720, 1280))
    p.launch(MESSAGES)
    p.tap(*next(e for e in elements(p) if e.text == "Lena Fischer").center)
    p.tap(*next(e for e in elements(p) if e.short_rid == "compose").center)
    assert state(p)["screen"]["keyboard"] is True
    first = ReferencePlayer(steps({"type": "click", "target": {"text": "Nobody"}, "scroll_to": True}))
    play = first.next(lambda: elements(p), p.size)
    assert play.action == Key(key="back") and play.seeking == "hide_keyboard"


def test_scroll_to_a_named_list():
    p = make((720, 1280))
    p.launch(MESSAGES)
    plays = play_all(p, ReferencePlayer(steps({"type": "click", "target": {"text": "Tom Becker"},
                                               "scroll_to": {"rid": "thread_list"}})))
    assert state(p)["screen"]["number"] == "5550159" and len(plays) > 1


def test_without_scroll_to_a_target_below_the_fold_says_how_to_reach_it():
    p = make((720, 1280))
    p.launch(MESSAGES)
    (play,) = play_all(p, ReferencePlayer(steps({"type": "click", "target": {"text": "George Brown"}})))
    assert play.action is None and "add scroll_to: true" in play.invalid


def test_answer_waits_for_its_target():
    p = make((720, 1280))
    p.launch("com.crate.wallet")
    plays = play_all(p, ReferencePlayer(steps({"type": "answer", "text": "$16.50", "target": {"text": "Jun 1 · Food & drink"},
                                               "scroll_to": True})))
    assert plays[-1].action.type == "answer" and len(plays) > 1
    assert any(e.text == "Jun 1 · Food & drink" for e in elements(p))


@pytest.mark.parametrize("bad,fragment", [
    ({"type": "key", "key": "back", "scroll_to": True}, "scroll_to needs a target"),
    ({"type": "type", "text": "a", "target": {"text": "A"}}, "target is only for"),
    ({"type": "answer", "text": "a", "target": {"text": "A"}, "direction": "up"}, "direction is for swipes"),
])
def test_bad_steps_are_refused(bad, fragment):
    with pytest.raises(ValueError, match=fragment):
        RefStep.model_validate(bad)
