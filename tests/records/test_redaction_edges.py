"""What the records' redaction keeps and hides at its edges, as mutmut's survivors on
harness/records/redaction.py showed no test read them (issue 40 item 3; scripts/mutmut --only
redaction): secret names in camelCase, keys that are not strings, argv after a secret flag, and
the quick test a bundle uses to skip records that hold nothing to redact."""

from __future__ import annotations

import json

import pytest

from harness.records import REDACTED, redact
from harness.records.redaction import is_secret_key, might_hold_secret

KEY = "sk-a1B2c3D4e5F6g7H8i9J0"


@pytest.mark.parametrize("name", ["accessKey", "privateKey", "secretKey", "apiKey", "clientSecret", "authToken"])
def test_secret_names_in_camel_case_are_secret(name):
    assert is_secret_key(name) and redact({name: "v"}) == {name: REDACTED}


@pytest.mark.parametrize("name", ["maxTokens", "apiKeyEnv", "tokenLimit", "keyboard"])
def test_names_that_only_look_secret_in_camel_case_are_kept(name):
    assert not is_secret_key(name) and redact({name: "v"}) == {name: "v"}


def test_keys_that_are_not_strings_keep_their_values():
    assert redact({1: "one", (2, 3): "pair", None: "none"}) == {1: "one", (2, 3): "pair", None: "none"}


def test_argv_hides_only_the_value_after_a_secret_flag():
    assert redact(["--token", "abc", "def"]) == ["--token", REDACTED, "def"]
    assert redact(["--token", "--verbose", "x"]) == ["--token", "--verbose", "x"]  # a flag is no value
    assert redact(["--token=abc", "run"]) == [f"--token={REDACTED}", "run"]  # its value is in the item itself
    assert redact(("--api-key", "v", "--model", "m")) == ["--api-key", REDACTED, "--model", "m"]


@pytest.mark.parametrize("text", [
    json.dumps({"api_key": "v"}), json.dumps({"AccessKey": "v"}), "Authorization: Bearer abcdefghij",
    f"the key {KEY} leaked", "hf_" + "a" * 24, "ghp_" + "b" * 24, "PASSWORD=x", "--credential v",
    f"every prefix at once: sk- hf_ ghp_ gho_ ghu_ ghs_ ghr_ and {KEY}"])
def test_might_hold_secret_is_true_wherever_redact_changes_something(text):
    assert might_hold_secret(text)
    assert redact(text) != text or redact(json.loads(text)) != json.loads(text)


@pytest.mark.parametrize("text", [
    json.dumps({"task_id": "clock_alarm", "steps": 3, "thought": "open the clock"}), "a task-sk thing",
    "sk-ab is too short", "plain text with hf_ short", ""])
def test_might_hold_secret_is_false_only_where_redact_changes_nothing(text):
    assert not might_hold_secret(text)
    assert redact(text) == text
