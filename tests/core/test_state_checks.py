"""Tests for harness.core.state_checks: declarative checks over the phone's state JSON."""

from __future__ import annotations

import json

import pytest
import yaml
from pydantic import ValidationError

from harness.core.state_checks import OPERATORS, Check, CheckError, as_check, resolve

STATE = {
    "screen": {"page": "settings/network", "package": "com.android.settings"},
    "apps": {
        "settings": {"wifi": False, "brightness": 0.4, "volume": 7, "name": "Pixel"},
        "contacts": {
            "contacts": [
                {"name": "Bob", "phone": "5550100", "id": 1},
                {"name": "Ana Lima", "phone": "5550101", "id": 2, "tags": ["work", "family"]},
                {"name": "Bob", "phone": "5550199", "id": 3},
            ]
        },
        "messages": {
            "threads": [
                {"contact": "Bob", "messages": [{"text": "Running late"}, {"text": "ok"}]},
                {"contact": "Ana Lima", "messages": []},
            ]
        },
        "notes": {"notes": [], "title": None, "meta": {"count": 0}},
    },
    "effects": [{"id": 1, "kind": "sms_sent"}],
}

MISSING = resolve({}, "nope")  # the module's "no value" marker


def check(d) -> Check:
    return Check.model_validate(d)


def ev(d, state=STATE) -> bool:
    return check(d).evaluate(state)


# --- paths ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path,value",
    [
        ("apps.settings.wifi", False),
        ("screen.page", "settings/network"),
        ("apps.contacts.contacts[name=Ana Lima].phone", "5550101"),
        ("apps.contacts.contacts[name=Bob].phone", "5550100"),  # the first match
        ("apps.contacts.contacts[id=3].phone", "5550199"),  # string comparison of a number
        ("apps.contacts.contacts[ name = Ana Lima ].id", 2),  # key and value are stripped
        ("apps.contacts.contacts[0].name", "Bob"),
        ("apps.contacts.contacts[-1].id", 3),
        ("apps.contacts.contacts[1].tags[1]", "family"),
        ("apps.messages.threads[contact=Bob].messages[0].text", "Running late"),
        ("apps.notes.title", None),
        ("apps.notes.notes", []),
    ],
)
def test_resolve(path, value):
    assert resolve(STATE, path) == value


@pytest.mark.parametrize(
    "path",
    [
        "apps.nope",
        "apps.settings.wifi.deeper",
        "apps.contacts.contacts[name=Zed].phone",
        "apps.contacts.contacts[9].name",
        "apps.contacts.contacts[-9].name",
        "apps.contacts.contacts[x].name",
        "apps.settings[0]",  # index on a dict
        "apps.settings[name=Pixel]",  # filter on a dict
        "screen.page[0]",  # index on a string
    ],
)
def test_unresolved_paths_have_no_value(path):
    assert resolve(STATE, path) is MISSING


@pytest.mark.parametrize("path", ["", "...", "a.b[x", "a[0", "a.[b"])
def test_bad_paths_are_refused(path):
    with pytest.raises((CheckError, ValidationError)):
        check({"path": path, "eq": 1})


@pytest.mark.parametrize("path", ["apps.settings.wifi[", "apps.settings.wifi]"])
def test_trailing_garbage_in_path_is_refused(path):
    with pytest.raises((CheckError, ValidationError)):
        check({"path": path, "eq": False})


def test_filter_on_json_boolean_field():
    state = {"alarms": [{"time": "06:00", "enabled": False}, {"time": "07:00", "enabled": True}]}
    assert resolve(state, "alarms[enabled=true].time") == "07:00"


# --- operators -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "d,expected",
    [
        ({"path": "apps.settings.wifi", "eq": False}, True),
        ({"path": "apps.settings.wifi", "eq": True}, False),
        ({"path": "apps.notes.title", "eq": None}, True),
        ({"path": "apps.settings.volume", "ne": 3}, True),
        ({"path": "apps.settings.volume", "ne": 7}, False),
        ({"path": "apps.messages.threads[contact=Bob].messages[0].text", "contains": "late"}, True),
        ({"path": "apps.messages.threads[contact=Bob].messages[0].text", "contains": "Late"}, False),
        ({"path": "apps.contacts.contacts[1].tags", "contains": "work"}, True),
        ({"path": "apps.settings", "contains": "wifi"}, True),  # a dict contains its keys
        ({"path": "apps.settings.volume", "contains": 7}, False),  # numbers contain nothing
        ({"path": "screen.page", "not_contains": "wallet"}, True),
        ({"path": "screen.page", "not_contains": "network"}, False),
        ({"path": "apps.messages.threads[contact=Bob].messages[0].text", "icontains": "RUNNING"}, True),
        ({"path": "apps.settings.volume", "icontains": "7"}, False),
        ({"path": "apps.settings.volume", "gt": 6}, True),
        ({"path": "apps.settings.volume", "gt": 7}, False),
        ({"path": "apps.settings.volume", "gte": 7}, True),
        ({"path": "apps.settings.brightness", "lt": 0.5}, True),
        ({"path": "apps.settings.brightness", "lte": 0.39}, False),
        ({"path": "apps.settings.wifi", "lt": 1}, False),  # booleans are not numbers here
        ({"path": "apps.settings.name", "gt": 0}, False),
        ({"path": "apps.contacts.contacts", "len": 3}, True),
        ({"path": "apps.contacts.contacts", "len": 2}, False),
        ({"path": "apps.notes.notes", "len": 0}, True),
        ({"path": "apps.contacts.contacts", "len_gte": 3}, True),
        ({"path": "apps.contacts.contacts", "len_gte": 4}, False),
        ({"path": "apps.settings.volume", "len": 1}, False),  # no length
        ({"path": "apps.settings.name", "in": ["Pixel", "Galaxy"]}, True),
        ({"path": "apps.settings.name", "in": ["Galaxy"]}, False),
        ({"path": "apps.settings.name", "matches": "^Pix"}, True),
        ({"path": "apps.settings.name", "matches": "^ix"}, False),
        ({"path": "apps.settings.volume", "matches": "7"}, False),
        ({"path": "apps.messages.threads[contact=Bob].messages", "any": {"path": "text", "contains": "late"}}, True),
        ({"path": "apps.messages.threads[contact=Bob].messages", "any": {"path": "text", "eq": "nope"}}, False),
        ({"path": "apps.messages.threads[contact=Bob].messages", "every": {"path": "text", "exists": True}}, True),
        ({"path": "apps.messages.threads[contact=Bob].messages", "every": {"path": "text", "eq": "ok"}}, False),
        ({"path": "apps.messages.threads[contact=Ana Lima].messages", "any": {"path": "text", "exists": True}}, False),
        ({"path": "apps.messages.threads[contact=Ana Lima].messages", "every": {"path": "text", "eq": "x"}}, True),
        ({"path": "apps.settings", "any": {"path": "wifi", "exists": True}}, False),  # not a list
        ({"path": "apps.settings.wifi", "exists": True}, True),
        ({"path": "apps.nope", "exists": False}, True),
        ({"path": "apps.nope", "exists": True}, False),
        ({"path": "apps.notes.title", "exists": False}, True),  # null counts as absent
        ({"path": "apps.notes.title", "exists": True}, False),
    ],
)
def test_operators(d, expected):
    assert ev(d) is expected


@pytest.mark.parametrize("op,arg", [("eq", None), ("ne", 1), ("not_contains", "x"), ("len", 0), ("in", [None]),
                                    ("lt", 100), ("any", {"path": "a", "exists": False})])
def test_only_exists_false_holds_for_a_missing_path(op, arg):
    assert ev({"path": "apps.nowhere", op: arg}) is False


def test_operator_list_matches_the_model():
    for op in OPERATORS:
        field = {"in": "in", "any": "any", "every": "every"}.get(op, op)
        arg = {"exists": True, "any": {"path": "a", "exists": True}, "every": {"path": "a", "exists": True},
               "in": [1], "len": 1, "len_gte": 1, "gt": 1, "gte": 1, "lt": 1, "lte": 1,
               "matches": "a", "icontains": "a"}.get(op, "a")
        c = check({"path": "a", field: arg})
        assert c._ops() == [op]


# --- combinators ---------------------------------------------------------------------------------
def test_all_any_of_not():
    t = {"path": "apps.settings.wifi", "eq": False}
    f = {"path": "apps.settings.wifi", "eq": True}
    assert ev({"all": [t, t]}) is True
    assert ev({"all": [t, f]}) is False
    assert ev({"all": []}) is True
    assert ev({"any_of": [f, t]}) is True
    assert ev({"any_of": [f, f]}) is False
    assert ev({"any_of": []}) is False
    assert ev({"not": f}) is True
    assert ev({"not": t}) is False
    assert ev({"not": {"path": "apps.nope", "exists": True}}) is True
    assert ev({"all": [t, {"not": {"any_of": [f, {"path": "apps.nope", "eq": 1}]}}]}) is True


def test_docstring_style_example_quoted():
    # the module docstring's example, with the paths that hold [...] quoted (plain YAML needs that)
    doc = yaml.safe_load(
        """
success:
  all:
    - {path: apps.settings.wifi, eq: false}
    - {path: "apps.contacts.contacts[name=Ana Lima].phone", eq: "5550101"}
    - {path: "apps.messages.threads[contact=Bob].messages", any: {path: text, contains: "late"}}
    - not: {path: "apps.files.files[name=report.pdf]", exists: true}
"""
    )
    c = check(doc["success"])
    assert c.evaluate(STATE) is True
    changed = json.loads(json.dumps(STATE))
    changed["apps"]["settings"]["wifi"] = True
    assert c.evaluate(changed) is False
    changed = json.loads(json.dumps(STATE))
    changed["apps"]["files"] = {"files": [{"name": "report.pdf"}]}
    assert c.evaluate(changed) is False


def test_module_docstring_example_is_valid_yaml():
    import harness.core.state_checks as sc

    block = sc.__doc__.split("::", 1)[1].split("\n\n")[1]
    doc = yaml.safe_load(block)
    assert check(doc["success"]).evaluate(STATE) is True


# --- shape validation ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "d,fragment",
    [
        ({"path": "a"}, "exactly one operator"),
        ({"path": "a", "eq": 1, "ne": 2}, "exactly one operator"),
        ({"eq": 1}, "needs 'path'"),
        ({}, "needs 'path'"),
        ({"all": [], "path": "a"}, "either a combinator"),
        ({"not": {"path": "a", "eq": 1}, "eq": 1}, "either a combinator"),
        ({"all": [], "any_of": []}, "one of all/any_of/not"),
        ({"path": "a", "equals": 1}, "equals"),
        ({"path": "a", "gt": "big"}, "gt"),
        ({"all": [{"path": "a"}]}, "exactly one operator"),  # nested nodes are validated too
    ],
)
def test_bad_shapes_are_refused(d, fragment):
    with pytest.raises(ValidationError) as ei:
        check(d)
    assert fragment in str(ei.value)


def test_invalid_regex_is_a_validation_error():
    with pytest.raises(ValidationError):
        check({"path": "a", "matches": "("})


def test_description_is_allowed_on_any_node():
    c = check({"description": "Wi-Fi is off", "all": [{"path": "a", "eq": 1, "description": "leaf"}]})
    assert c.description == "Wi-Fi is off"
    assert c.all[0].description == "leaf"


def test_as_check():
    c = check({"path": "a", "eq": 1})
    assert as_check(c) is c
    assert as_check({"path": "a", "eq": 1}).evaluate({"a": 1}) is True


# --- to_json round trip --------------------------------------------------------------------------
ROUND_TRIP = [
    {"path": "apps.settings.wifi", "eq": False},
    {"path": "apps.notes.title", "eq": None},
    {"path": "a", "ne": [1, 2]},
    {"path": "a", "in": ["x", "y"]},
    {"path": "a", "exists": False},
    {"path": "a", "matches": "^x+$", "description": "regex"},
    {"path": "a.b[k=v][0]", "any": {"path": "text", "icontains": "hi"}},
    {"path": "a", "every": {"not": {"path": "t", "eq": 0}}},
    {"not": {"path": "a", "len": 0}},
    {"all": [{"path": "a", "gt": 1.5}, {"any_of": [{"path": "b", "lte": 2}, {"path": "c", "len_gte": 1}]}],
     "description": "tree"},
]


@pytest.mark.parametrize("d", ROUND_TRIP)
def test_to_json_round_trip(d):
    c = check(d)
    j = c.to_json()
    assert j == d
    assert check(json.loads(json.dumps(j))) == c
    # and through YAML, the way task files carry checks
    assert check(yaml.safe_load(yaml.safe_dump(j))).to_json() == d


def test_contains_with_unhashable_needle_on_a_dict_is_false():
    assert ev({"path": "apps.settings", "contains": ["wifi"]}) is False
