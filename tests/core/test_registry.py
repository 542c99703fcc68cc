"""Tests for harness.core.registry: typed plugin options, conversion and errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

import pytest

from harness.core.registry import AGENTS, JUDGES, Registry, RegistryError, _convert, parse_options


@dataclass
class DemoConfig:
    flag: bool = False
    count: int = 3
    ratio: float = 0.5
    name: str = "x"
    mode: Literal["fast", "slow"] = "fast"
    tags: list[str] = field(default_factory=lambda: ["a"], metadata={"help": "comma separated"})
    sizes: list[int] = field(default_factory=list)
    limit: Optional[int] = None
    label: str | None = None
    threshold: float | None = 1.0

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError("count must be >= 0")


@dataclass
class EmptyConfig:
    pass


class Plugin:
    def __init__(self, config):
        self.config = config


@pytest.fixture
def reg() -> Registry:
    r: Registry = Registry("widget")

    @r.register("demo", DemoConfig, help="a demo widget")
    def _demo(config):
        return Plugin(config)

    @r.register("bare", EmptyConfig)
    def _bare(config):
        return Plugin(config)

    return r


def test_names_and_build_with_defaults(reg):
    assert reg.names() == ["bare", "demo"]
    p = reg.build("demo")
    assert isinstance(p, Plugin) and p.config == DemoConfig()
    assert reg.build("demo", {}).config.tags == ["a"]


def test_register_twice_is_refused(reg):
    with pytest.raises(RegistryError, match="'demo' registered twice"):
        reg.register("demo", DemoConfig)(lambda c: c)


def test_unknown_plugin_lists_known_ones(reg):
    with pytest.raises(RegistryError) as ei:
        reg.build("nope")
    assert "unknown widget 'nope'" in str(ei.value)
    assert "bare" in str(ei.value) and "demo" in str(ei.value)
    with pytest.raises(RegistryError, match="known: none"):
        Registry("thing").config("x")


def test_unknown_option_is_named_with_the_options(reg):
    with pytest.raises(RegistryError) as ei:
        reg.config("demo", {"colour": "red"})
    msg = str(ei.value)
    assert "'colour'" in msg and "widget 'demo'" in msg
    assert "flag" in msg and "ratio" in msg
    with pytest.raises(RegistryError, match="options: none"):
        reg.config("bare", {"x": "1"})


@pytest.mark.parametrize(
    "options,attr,value",
    [
        ({"flag": "true"}, "flag", True),
        ({"flag": "YES"}, "flag", True),
        ({"flag": "1"}, "flag", True),
        ({"flag": "on"}, "flag", True),
        ({"flag": "false"}, "flag", False),
        ({"flag": " No "}, "flag", False),
        ({"flag": "0"}, "flag", False),
        ({"flag": "off"}, "flag", False),
        ({"count": "12"}, "count", 12),
        ({"count": "-0"}, "count", 0),
        ({"ratio": "0.25"}, "ratio", 0.25),
        ({"ratio": "1e-3"}, "ratio", 0.001),
        ({"ratio": "2"}, "ratio", 2.0),
        ({"name": "hello=world"}, "name", "hello=world"),
        ({"mode": "slow"}, "mode", "slow"),
        ({"tags": "a, b,,c "}, "tags", ["a", "b", "c"]),
        ({"tags": ""}, "tags", []),
        ({"sizes": "1,2, 3"}, "sizes", [1, 2, 3]),
        ({"limit": "7"}, "limit", 7),
        ({"limit": "none"}, "limit", None),
        ({"limit": ""}, "limit", None),
        ({"label": "null"}, "label", None),
        ({"label": "abc"}, "label", "abc"),
        ({"threshold": "0.75"}, "threshold", 0.75),  # PEP 604 optional
        ({"threshold": "none"}, "threshold", None),
        ({"count": 5}, "count", 5),  # non-strings (e.g. from a config file) pass through
        ({"flag": True}, "flag", True),
    ],
)
def test_conversions(reg, options, attr, value):
    cfg = reg.config("demo", options)
    got = getattr(cfg, attr)
    assert got == value and type(got) is type(value)


def test_dashes_in_option_names(reg):
    @dataclass
    class C:
        max_steps: int = 1

    reg.register("dash", C)(lambda c: c)
    assert reg.config("dash", {"max-steps": "9"}).max_steps == 9


@pytest.mark.parametrize(
    "options,option,fragment",
    [
        ({"flag": "maybe"}, "flag", "'maybe' is not a valid bool"),
        ({"count": "1.5"}, "count", "is not a valid int"),
        ({"count": "three"}, "count", "is not a valid int"),
        ({"ratio": "half"}, "ratio", "is not a valid float"),
        ({"mode": "medium"}, "mode", "must be one of fast, slow"),
        ({"mode": "FAST"}, "mode", "must be one of"),
        ({"sizes": "1,x"}, "sizes", "not a valid"),
        ({"limit": "lots"}, "limit", "is not a valid int"),
    ],
)
def test_bad_values_name_the_option(reg, options, option, fragment):
    with pytest.raises(RegistryError) as ei:
        reg.config("demo", options)
    msg = str(ei.value)
    assert f"widget demo option {option}" in msg
    assert fragment in msg


def test_config_validation_errors_become_registry_errors(reg):
    with pytest.raises(RegistryError, match="widget 'demo': count must be >= 0"):
        reg.config("demo", {"count": "-1"})


def test_convert_literal_of_strings():
    assert _convert("b", Literal["a", "b"], "w") == "b"
    with pytest.raises(RegistryError, match="^w: must be one of a, b, got 'c'$"):
        _convert("c", Literal["a", "b"], "w")


def test_convert_literal_of_ints():
    assert _convert("2", Literal[1, 2], "w") == 2


def test_describe(reg):
    info = {d["name"]: d for d in reg.describe()}
    assert list(info) == ["bare", "demo"]
    assert info["demo"]["help"] == "a demo widget"
    opts = {o["name"]: o for o in info["demo"]["options"]}
    assert list(opts)[:3] == ["flag", "count", "ratio"]
    assert opts["count"]["default"] == 3
    assert opts["tags"]["default"] == ["a"]  # default_factory is called
    assert opts["tags"]["help"] == "comma separated"
    assert opts["limit"]["default"] is None
    assert "int" in opts["count"]["type"]
    assert info["bare"]["options"] == []


def test_parse_options():
    assert parse_options(None, "--agent-opt") == {}
    assert parse_options([], "--agent-opt") == {}
    assert parse_options(["a=1", " b =x=y", "c="], "--agent-opt") == {"a": "1", "b": "x=y", "c": ""}
    assert parse_options(["a=1", "a=2"], "--agent-opt") == {"a": "2"}
    with pytest.raises(RegistryError) as ei:
        parse_options(["ok=1", "broken"], "--judge-opt")
    assert "--judge-opt" in str(ei.value) and "'broken'" in str(ei.value) and "KEY=VALUE" in str(ei.value)


def test_parse_options_feeds_config(reg):
    cfg = reg.config("demo", parse_options(["flag=yes", "sizes=4,5", "mode=slow"], "--opt"))
    assert (cfg.flag, cfg.sizes, cfg.mode) == (True, [4, 5], "slow")


def test_builtin_registries():
    import agents  # noqa: F401
    import judges  # noqa: F401

    assert {"replay", "script", "random"} <= set(AGENTS.names())
    assert "oracle" in JUDGES.names()
    assert AGENTS.kind == "agent" and JUDGES.kind == "judge"
    with pytest.raises(RegistryError, match="unknown agent 'gpt-9'"):
        AGENTS.build("gpt-9")
    with pytest.raises(RegistryError, match="agent 'replay' has no option 'speed'"):
        AGENTS.config("replay", {"speed": "2"})
    with pytest.raises(RegistryError, match="judge oracle option require-finish: .perhaps. is not a valid bool"):
        JUDGES.config("oracle", {"require-finish": "perhaps"})
    assert JUDGES.config("oracle", {"require-finish": "yes"}).require_finish is True
