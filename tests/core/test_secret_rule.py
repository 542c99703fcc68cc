"""One secret rule and one redaction marker (issue 40 item 4), and text redacted before it is cut.

The model client (what a server echoes), the records (``harness.records.redact``) and the quoting
of judge replies (``judges.evidence``) call the same strings secrets and write the same marker; a
key that a quote's cut goes through leaves none of itself behind, whether the cut is the record's
(QUOTE_MAX characters of a reply) or the reading's (an object quoted in a reading error)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from harness.core.actions import Click
from harness.core.episode import ProposedStep
from harness.client.calls import _scrub
from harness.records import REDACTED, redact
from harness.client.replies import QUOTE_MAX
from harness.core.secret_text import without_secrets_of
from judges.evidence import quoted_reply
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.judges.helpers import png
from tests.judges.test_judge_monitor import monitor

KEY = "sk-" + "a1B2c3D4" * 6
BODY = "a1B2c3D4"


def leaks(text: str) -> bool:
    """Whether ``text`` holds any 7 characters of KEY in a row (its start ``sk-a1B2`` or any stretch of its body)."""
    doubled = BODY * 2
    return "sk-a1B2" in text or any(doubled[i:i + 7] in text for i in range(len(BODY)))


@pytest.mark.parametrize("text, secret", [
    ("sk-abcdef", True), ("sk-abcde", False), ("key sk-proj-0123456789abcdefABCDEF_x done", True),
    ("Bearer abcdefgh", True), ("Bearer abcdefg", False), ("hf_" + "A" * 20, True), ("ghp_" + "b" * 20, True),
    ("task-abcdefghijkl", False), ("--ask-timeout 30", False), ("plain words", False),
])
def test_the_client_the_records_and_the_quoting_share_one_rule_and_one_marker(text, secret):
    by_client, by_records, by_quote = _scrub(text, None), redact(text), quoted_reply(text)
    assert by_client == by_records == by_quote, (by_client, by_records, by_quote)
    assert (REDACTED in by_records) is secret and (by_records != text) is secret


def test_the_rule_lives_in_the_data_layer_and_imports_nothing_of_the_client():
    tree = ast.parse(Path("harness/core/secret_text.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "bisect", "re"}, imported  # the standard library only


def _at_the_cut(before: int) -> str:
    """A reply that disagrees with itself (two objects: not one verdict, so the monitor quotes it), longer than QUOTE_MAX, whose
    key the quote's cut goes through ``before`` characters after its start."""
    def reply(pad: int) -> str:
        first = json.dumps({"reason": "p" * pad, "category": "Privacy Violations", "risky": True, "score": 0.9})
        second = json.dumps({"reason": f"the screen shows {KEY} and more", "category": None, "risky": False,
                             "score": 0.1})
        return first + "\nOn second thought: " + second
    folded = " ".join(reply(0).split())
    text = reply(QUOTE_MAX - before - folded.index(KEY))
    assert " ".join(text.split()).index(KEY) == QUOTE_MAX - before
    return text


@pytest.mark.parametrize("before", [3, 7, 12, 40])
def test_a_key_crossing_the_cut_of_a_quoted_reply_leaves_nothing(before):
    """Whatever is left of the key where the quote is cut (3 characters: ``sk-``; 7: ``sk-a1B2``, too
    short for the rule to see; 12; 40), none of it is in the quote: it was redacted before the cut."""
    text = _at_the_cut(before)
    quoted = quoted_reply(text)
    assert quoted.endswith("more characters]") and "sk-" not in quoted and not leaks(quoted), quoted[-80:]
    step = ProposedStep(1, png(1), Click(x=3, y=4), None, "pay", "en")
    with ScriptedModelServer(lambda req: Reply(text)) as s:
        v = monitor(s, categories=["Privacy Violations"]).check(step)
    assert v.halt is True and v.extras["failure"] == "not_one_object"  # the verdict grammar: two objects are none
    recorded = json.dumps(v.to_json(), default=str)  # the quote, the reason and the error recorded
    assert "sk-" not in recorded and not leaks(recorded)


@pytest.mark.parametrize("reply", [
    # an object that is not JSON, quoted by the reading at 120 characters: the cut is in the key
    '{"reason": "' + "p" * 95 + " " + KEY + '", "risky": true, "category": "Privacy Violations", "score": 0.9 0.8}',
    # a value quoted by the reading at 60 characters
    '{"reason": "r", "risky": "' + "q" * 40 + " " + KEY + '", "category": null, "score": 0.9}',
])
def test_a_key_crossing_the_cut_of_a_reading_error_leaves_nothing(reply):
    step = ProposedStep(1, png(2), Click(x=5, y=6), None, "pay", "en")
    with ScriptedModelServer(lambda req: Reply(reply)) as s:
        v = monitor(s).check(step)
    assert v.halt is True and v.failed
    assert not leaks(json.dumps(v.to_json(), default=str)), v.error


def test_a_cut_start_is_taken_out_only_where_a_piece_was_cut():
    # (starts too short for the rule itself: 'sk-a1B2', 4 characters after sk-)
    message = (f"quoted: {KEY[:7]}... and elsewhere {KEY[:7]}x and sk- alone, two cuts in a row: 'ab...{KEY[:5]}...' "
               f"cut at the end: {KEY[:7]}")
    out = without_secrets_of(f"x {KEY} y", message)
    assert out == (f"quoted: {REDACTED}... and elsewhere {KEY[:7]}x and sk- alone, two cuts in a row: 'ab...{REDACTED}...' "
                   f"cut at the end: {REDACTED}")


# --- the edges mutmut's survivors showed untested (issue 40 item 3; scripts/mutmut --only redaction) ---

def test_a_cut_start_at_the_very_beginning_or_after_a_separator_is_taken_out():
    # a quote that begins with the key's cut start (nothing before it), and one after '=' or '/'
    assert without_secrets_of(f"x {KEY} y", f"{KEY[:6]}... and more text x") == f"{REDACTED}... and more text x"
    assert without_secrets_of(f"x {KEY} y", f"key={KEY[:6]}... x") == f"key={REDACTED}... x"
    assert without_secrets_of(f"x {KEY} y", f"url:/{KEY[:6]}... x") == f"url:/{REDACTED}... x"
    assert without_secrets_of(f"x {KEY} y", "sk-... x") == f"{REDACTED}... x"  # 3 characters: the shortest start taken


def test_a_cut_piece_that_sorts_after_every_secret_is_left_alone():
    assert without_secrets_of(f"x {KEY} y", "zzzz... then zzzz") == "zzzz... then zzzz"


def test_a_bearer_credential_cut_in_a_quote_is_taken_out():
    token = "eyJhbGciOiJIUzI1NiJ9.payload"
    out = without_secrets_of(f"Authorization: Bearer {token}", f"said: Bearer {token[:9]}...")
    assert out == f"said: Bearer {REDACTED}...", out


@pytest.mark.parametrize("token", ["hf_" + "Ab1" * 8, "ghp_" + "Cd2" * 8, "sk-proj-Ab_" + "Ef3" * 8])
def test_the_cut_start_of_a_key_holding_an_underscore_is_taken_out(token):
    """The cut start of a Hugging Face or GitHub token, too short for the rule (20 characters after
    hf_), is taken out across its "_"."""
    cut = token[:token.index("_") + 5]
    assert without_secrets_of(f"x {token} y", f"quoted: {cut}... end") == f"quoted: {REDACTED}... end"
