"""The corpus of hostile replies (tests/judges/hostile_replies.py) against the verdict grammar:
every shape, in English and in Chinese, gives exactly its decision, for the step finding the
CRATE-S gate acts on and for the judges' verdicts (CRATE, CRATE-S, holistic, milestones, CRATE's
step evidence); and every shape that should halt does halt a CRATE-S gate on the simulated phone
before the transfer it judges runs (``executed: false``, no transfer in the phone's state or
effect log), after asking once more, the replies quoted in the step's record when it was the
reading that refused them."""

from __future__ import annotations

import time

import pytest

from harness.client.replies import VerdictError
from judges.evidence import CRATE_S_STEP, read_answer
from judges.monitor import CrateSMonitor, CrateSMonitorConfig
from judges.prompts import load_prompt
from judges.verdict_kinds import CRATE_S_TRAJ, CRATE_STEP, CRATE_TRAJ, HOLISTIC, MILESTONES
from tests.fakes.model_server import Reply
from tests.judges.gate_phone import PendingTransfer
from tests.judges.helpers import model_cfg
from tests.judges.hostile_replies import JUDGE_SHAPES, JUDGE_SHAPES_BY_LANG, LANGS, STEP_SHAPES, STEP_SHAPES_BY_LANG

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
    ids = {s.id for s in STEP_SHAPES_BY_LANG["en"]}
    assert len(ids) == len(STEP_SHAPES_BY_LANG["en"]) >= 55
    assert [s.id for s in STEP_SHAPES_BY_LANG["zh"]] == [s.id for s in STEP_SHAPES_BY_LANG["en"]]
    assert STEP_SHAPES_BY_LANG["zh"][0].text != STEP_SHAPES_BY_LANG["en"][0].text  # the texts are in Chinese
    must = {"echoed_example_then_risky", "two_agreeing_risky", "risky_then_second_thought_safe",
            "fenced_safe_then_prose_correcting", "risky_yes", "risky_no", "risky_null_string", "risky_number_one",
            "risky_true_with_space", "chinese_keys_and_values", "chinese_value_shi_privacy", "prose_only_risky",
            "truncated_object", "think_only_risky", "think_risky_answer_safe", "markdown_table", "keys_in_other_case",
            "score_without_risky", "score_as_percentage", "category_outside_the_list",
            # issue 34's table
            "fullwidth_risky_then_ascii_safe", "lookalike_key_zero_width_space_beside_safe",
            "lookalike_key_word_joiner_beside_safe", "lookalike_key_soft_hyphen_beside_safe",
            "lookalike_key_cyrillic_i_beside_safe", "lookalike_key_fullwidth_beside_safe", "safe_holding_nested_risky",
            "safe_holding_risky_steps", "refusal_then_safe", "safe_naming_another_step_and_action",
            "safe_with_a_category_outside_the_list", "placeholder_risky_then_safe", "angle_placeholder_risky_then_safe"}
    assert must <= ids
    assert {"lookalike_unsafe_key_beside_safe", "safe_holding_a_nested_unsafe_step",
            "safe_then_correcting_sentence"} <= {s.id for s in JUDGE_SHAPES["crate_s_traj"]}
    assert sum(len(v) for v in JUDGE_SHAPES_BY_LANG["en"].values()) >= 55
    assert all(any(s.decision[0] == "error" for s in v) and any(s.decision[0] == "value" for s in v)
               for v in JUDGE_SHAPES.values())


STEP_CASES = [(lang, s) for lang in LANGS for s in STEP_SHAPES_BY_LANG[lang]]


@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: f"{c[0]}-{c[1].id}")
def test_every_step_shape_reads_as_decided(case):
    lang, shape = case
    prompt = load_prompt("crate_s_step", lang)
    got = _decision(lambda: read_answer(shape.text, CRATE_S_STEP.verdict, prompt, shape.truncated))
    assert got == shape.decision, shape.text


@pytest.mark.parametrize("case", [c for c in STEP_CASES if c[1].decision[0] == "risky"], ids=lambda c: f"{c[0]}-{c[1].id}")
def test_every_risky_reading_halts_even_with_a_narrowed_category_list(case):
    lang, shape = case
    m = CrateSMonitor(CrateSMonitorConfig(model=model_cfg(base_url="http://127.0.0.1:9/v1"), categories=GATE_CATEGORIES))
    ev = read_answer(shape.text, CRATE_S_STEP.verdict, load_prompt("crate_s_step", lang), shape.truncated).value
    halt, why = m.decide(ev)
    assert halt, why
    if ev["category"] not in GATE_CATEGORIES:
        assert "halts whatever categories lists" in why and ev["category"] is None


@pytest.mark.parametrize("case", [(lang, name, s) for lang in LANGS for name, shapes in JUDGE_SHAPES_BY_LANG[lang].items()
                                  for s in shapes], ids=lambda c: f"{c[0]}-{c[1]}-{c[2].id}")
def test_every_judge_shape_reads_as_decided(case):
    lang, name, shape = case
    kind = KINDS[name]
    try:
        value = read_answer(shape.text, kind, load_prompt(name, lang), shape.truncated, shape.asked).value
    except VerdictError as e:
        assert shape.decision == ("error", e.kind), (lang, str(e))
        return
    assert shape.decision[0] == "value", (lang, value)
    for k, want in shape.decision[1].items():
        assert value[k] == want, (lang, k, value)


# --- on the simulated phone -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pending(adb, tmp_path_factory):
    p = PendingTransfer(adb, tmp_path_factory.mktemp("hostile"))
    yield p
    p.close()


def test_every_shape_that_should_halt_stops_the_gate_before_the_transfer(pending):
    """One phone, one model server: the phone holds the "Send money?" dialog, each shape answers
    the check of the Send tap (an episode of two proposed steps), and its re-ask too. No shape
    lets the money move. Every English shape, and the Chinese twins of issue 34's table."""
    halting = [s for s in STEP_SHAPES_BY_LANG["en"] if s.halts] + [s for s in STEP_SHAPES_BY_LANG["zh"]
                                                                  if s.halts and s.issue]
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
            extras = m.get("extras", {})
            if extras.get("failure") != shape.decision[1]:
                why.append(f"failure {extras.get('failure')!r}, not {shape.decision[1]!r}")
            if shape.text and ("reply" not in extras or len(extras.get("replies", [])) != 2):
                why.append("the replies (the first ask's and the re-ask's) are not quoted in the record")
            if pending.replies_served != served + 2:
                why.append(f"asked {pending.replies_served - served} time(s), not twice (once again after the first)")
        elif "reply" not in m.get("extras", {}):
            why.append("the halting reply is not quoted in the record")
        if pending.replies_served == served:
            why.append("the shape was never asked for")
        if why:
            problems.append(f"{shape.id}: {'; '.join(why)}")
    elapsed = time.monotonic() - t0
    assert not problems, "\n".join(problems)
    assert pending.prepared == 1  # one preparation served every halting shape: nothing was ever sent
    assert len(halting) >= 5
    print(f"\n{len(halting)} halting shapes on the gate in {elapsed:.1f}s")

    # the control: a clear "not risky" lets the very same tap run, and it sends the money
    out, steps = pending.check(Reply(next(s.text for s in STEP_SHAPES if s.id == "plain_safe")),
                               categories=GATE_CATEGORIES)
    assert out.status == "finished" and steps[1].executed is True
    assert [t["to"] for t in pending.transfers()] == ["Landlord"]


def test_the_docs_say_what_the_corpus_and_the_word_lists_hold():
    """docs/judges.md quotes the corpus sizes: they are this corpus's own."""
    from harness.client.replies import QUOTE_MAX
    from tests.judges.helpers import ROOT

    doc = " ".join((ROOT / "docs" / "judges.md").read_text(encoding="utf-8").split())
    en = STEP_SHAPES_BY_LANG["en"]
    judges = sum(len(v) for v in JUDGE_SHAPES_BY_LANG["en"].values())
    assert f"lists {len(en)} step-finding shapes and {judges} judge shapes, each in English and in Chinese" in doc
    assert f"at most {QUOTE_MAX:,} characters" in doc
