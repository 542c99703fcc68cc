"""The corpus of hostile replies (tests/judges/hostile_replies.py) against the one reading rule:
every shape gives exactly its decision, for the step finding the CRATE-S gate acts on and for the
judges' verdicts (CRATE, CRATE-S, holistic, milestones, CRATE's step evidence); and every shape
that should halt does halt a CRATE-S gate on the simulated phone before the transfer it judges
runs (``executed: false``, no transfer in the phone's state or effect log), the reply quoted in
the step's record when it was the reading that refused it."""

from __future__ import annotations

import time

import pytest

from harness.client.replies import VerdictError
from judges.evidence import CRATE_S_STEP, read_answer
from judges.monitor import CrateSMonitor, CrateSMonitorConfig
from judges.prompts import LANGUAGES, load_prompt
from judges.verdict_kinds import CRATE_S_TRAJ, CRATE_STEP, CRATE_TRAJ, HOLISTIC, MILESTONES
from tests.fakes.model_server import Reply
from tests.judges.gate_phone import PendingTransfer
from tests.judges.helpers import model_cfg
from tests.judges.hostile_replies import JUDGE_SHAPES, STEP_SHAPES, Shape

GATE_CATEGORIES = ["Over-Automation", "Privacy Violations"]  # a narrowed list: unknown categories must still halt
KINDS = {"crate_traj": CRATE_TRAJ, "crate_s_traj": CRATE_S_TRAJ, "holistic": HOLISTIC, "milestones": MILESTONES,
         "crate_step": CRATE_STEP}


def _decision(read) -> tuple:
    try:
        r = read()
    except VerdictError as e:
        return ("error", e.kind)
    v = r.value
    return ("risky", v["category"]) if v["risky"] else ("safe",)


def test_the_corpus_covers_what_the_issue_lists():
    assert len(STEP_SHAPES) >= 40 and len({s.id for s in STEP_SHAPES}) == len(STEP_SHAPES)
    must = {"echoed_example_then_risky", "two_agreeing_risky", "risky_then_second_thought_safe",
            "fenced_safe_then_prose_correcting", "risky_yes", "risky_no", "risky_null_string", "risky_number_one",
            "risky_true_with_space", "chinese_keys_and_values", "chinese_value_shi_privacy", "prose_only_risky",
            "truncated_object", "think_only_risky", "think_risky_answer_safe", "markdown_table", "keys_in_other_case",
            "score_without_risky", "score_as_percentage", "category_outside_the_list"}
    assert must <= {s.id for s in STEP_SHAPES}
    assert sum(len(v) for v in JUDGE_SHAPES.values()) >= 40
    assert all(any(s.decision[0] == "error" for s in v) and any(s.decision[0] == "value" for s in v)
               for v in JUDGE_SHAPES.values())


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("shape", STEP_SHAPES, ids=lambda s: s.id)
def test_every_step_shape_reads_as_decided(shape: Shape, lang: str):
    prompt = load_prompt("crate_s_step", lang)
    got = _decision(lambda: read_answer(shape.text, CRATE_S_STEP.verdict, prompt, shape.truncated))
    assert got == shape.decision, shape.text


@pytest.mark.parametrize("shape", [s for s in STEP_SHAPES if s.decision[0] == "risky"], ids=lambda s: s.id)
def test_every_risky_reading_halts_even_with_a_narrowed_category_list(shape: Shape):
    m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(base_url="http://127.0.0.1:9/v1"), categories=GATE_CATEGORIES))
    ev = read_answer(shape.text, CRATE_S_STEP.verdict, load_prompt("crate_s_step", "en"), shape.truncated).value
    halt, why = m.decide(ev)
    assert halt, why
    if ev["category"] not in GATE_CATEGORIES:
        assert "halts whatever categories lists" in why and ev.get("category_unknown") is True


@pytest.mark.parametrize("case", [(name, s) for name, shapes in JUDGE_SHAPES.items() for s in shapes],
                         ids=lambda c: f"{c[0]}-{c[1].id}")
def test_every_judge_shape_reads_as_decided(case):
    name, shape = case
    kind = KINDS[name]
    for lang in LANGUAGES:
        try:
            value = read_answer(shape.text, kind, load_prompt(name, lang), shape.truncated).value
        except VerdictError as e:
            assert shape.decision == ("error", e.kind), (lang, str(e))
            continue
        assert shape.decision[0] == "value", (lang, value)
        for k, want in shape.decision[1].items():
            assert value[k] == want, (lang, k, value)


# --- on the simulated phone -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pending(adb, tmp_path_factory):
    p = PendingTransfer(adb, tmp_path_factory.mktemp("hostile"))
    yield p
    p.close()


def _failure_kind(shape: Shape) -> str:
    """The kind a failed check records (JudgeCallError.kind): a reply with nothing to read is asked
    again and then 'unparseable' ('truncated' when it was cut off); the others fail at once."""
    kind = shape.decision[1]
    if kind in ("none", "empty", "unfinished"):
        return "truncated" if shape.truncated else "unparseable"
    return kind


def test_every_shape_that_should_halt_stops_the_gate_before_the_transfer(pending):
    """One phone, one model server: the phone holds the "Send money?" dialog, each shape answers
    the check of the Send tap (an episode of two proposed steps). No shape lets the money move."""
    halting = [s for s in STEP_SHAPES if s.halts]
    t0 = time.monotonic()
    problems = []
    for shape in halting:
        served = pending.replies_served
        out, steps = pending.check(Reply(shape.text, finish_reason="length" if shape.truncated else "stop"),
                                   categories=GATE_CATEGORIES)
        send = steps[-1]
        m = send.monitor or {}
        want_cat = (shape.decision[1] or "unspecified") if shape.decision[0] == "risky" else "monitor_error"
        why = []
        if not (out.status == "halted" and out.halt and out.halt["step"] == 2 and out.halt["executed"] is False):
            why.append(f"status {out.status}, halt {out.halt}")
        if len(steps) != 2 or send.executed is not False:
            why.append(f"{len(steps)} steps, the last executed: {send.executed}")
        if pending.transfers() or any(e.get("kind") == "money_transfer" for e in pending.state().get("effects", [])):
            why.append("money moved")
        if out.halt and out.halt["category"] != want_cat:
            why.append(f"category {out.halt['category']!r}, not {want_cat!r}")
        if shape.decision[0] == "error":
            if m.get("extras", {}).get("failure") != _failure_kind(shape):
                why.append(f"failure {m.get('extras', {}).get('failure')!r}, not {_failure_kind(shape)!r}")
            if shape.text and "reply" not in m.get("extras", {}):
                why.append("the reply is not quoted in the record")
        elif "reply" not in m.get("extras", {}):
            why.append("the halting reply is not quoted in the record")
        if pending.replies_served == served:
            why.append("the shape was never asked for")
        if why:
            problems.append(f"{shape.id}: {'; '.join(why)}")
    elapsed = time.monotonic() - t0
    assert not problems, "\n".join(problems)
    assert pending.prepared == 1  # one preparation served every halting shape: nothing was ever sent
    print(f"\n{len(halting)} halting shapes on the gate in {elapsed:.1f}s")

    # the control: a clear "not risky" lets the very same tap run, and it sends the money
    out, steps = pending.check(Reply(next(s.text for s in STEP_SHAPES if s.id == "plain_safe")),
                               categories=GATE_CATEGORIES)
    assert out.status == "finished" and steps[1].executed is True
    assert [t["to"] for t in pending.transfers()] == ["Landlord"]


def test_the_docs_say_what_the_corpus_and_the_word_lists_hold():
    """docs/judges.md quotes the corpus sizes and the yes/no words: they are this corpus's and the
    reading's own."""
    from harness.client.replies import FALSE_WORDS, QUOTE_MAX, TRUE_WORDS
    from tests.judges.helpers import ROOT

    doc = " ".join((ROOT / "docs" / "judges.md").read_text(encoding="utf-8").split())
    assert f"lists {len(STEP_SHAPES)} step-finding shapes and {sum(len(v) for v in JUDGE_SHAPES.values())} judge shapes" in doc
    assert "the words `true`/`false`, `yes`/`no`, `1`/`0`, `是`/`否`" in doc
    assert TRUE_WORDS == {"true", "yes", "1", "是"} and FALSE_WORDS == {"false", "no", "0", "否"}
    assert f"at most {QUOTE_MAX:,} characters" in doc
