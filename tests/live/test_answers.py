"""Which answer lets what through (issue 40): a question is let through only by its own kind's
yes (allow to a flagged action, hand_back to a hand-over); an answer of the other kind, written
into a question's decision record by any channel, refuses; the stand-in person of ``harness sim
human`` answers as itself, never as the page."""

from __future__ import annotations

import pytest

from harness.core.episode import Decision
from harness.live.handover import answer_handover
from harness.live.records import new_ask_id, read_decision
from tests.live.test_ask_runner import answered_on_page
from tests.run.test_runner import task  # noqa: F401  (fixture)


@pytest.mark.parametrize("kind, decision, allowed", [
    ("flagged_action", "allow", True), ("flagged_action", "deny", False), ("flagged_action", "hand_back", False),
    ("needs_user", "hand_back", True), ("needs_user", "give_up", False), ("needs_user", "allow", False),
])
def test_only_the_question_kinds_own_yes_is_allowed(kind, decision, allowed):
    assert Decision(decision, "page", 0.0, kind=kind).allowed is allowed


def test_a_hand_back_written_for_a_flagged_action_halts_it(tmp_path, task):
    out, steps, dev, _ = answered_on_page(tmp_path, task, "hand_back")
    (step,) = steps
    assert out.status == "halted" and step.executed is False
    assert not [e for e in dev.phone.events if e["type"] == "tap"]
    op = step.monitor["operator"]
    assert op["decision"] == "deny" and "'hand_back' by page is not an answer to a flagged_action question" in op["note"]
    assert out.operator["denied"] == 1 and out.operator["allowed"] == 0


def test_the_stand_in_person_answers_as_itself(tmp_path):
    ask_id = new_ask_id(3)
    record = answer_handover(tmp_path, ask_id, "hand_back")
    assert record["by"] == "stand_in" and read_decision(tmp_path, ask_id)["by"] == "stand_in"
