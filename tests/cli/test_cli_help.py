"""Every command's --help prints (argparse %-formats help strings, so a stray "%" breaks it)."""

from __future__ import annotations

import argparse

import pytest

from harness.cli.main import build_parser, main


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, prefix + (name,))
    return found


COMMANDS = _commands(build_parser())


def test_the_command_tree_is_found():
    assert ("run",) in COMMANDS and ("static", "score") in COMMANDS and len(COMMANDS) > 15


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "harness")
def test_help_prints(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([*cmd, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: harness") and " ".join(("harness", *cmd)) in out


# --- what the help says about API keys is what the code does ----------------------------------------
def _key_flags() -> list[tuple[tuple[str, ...], argparse.Action]]:
    """Every ``*-api-key-env`` flag of every command, with the command."""
    out = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, prefix + (name,))
            elif any(o.endswith("api-key-env") for o in action.option_strings):
                out.append((prefix, action))

    walk(build_parser(), ())
    return out


def test_every_key_flag_says_where_its_key_goes_and_the_default_rule_of_key_for():
    from harness.client.keys import PROVIDER_KEYS, key_rule_text

    flags = _key_flags()
    assert {(c, a.dest) for c, a in flags} >= {(("run",), "model_api_key_env"), (("run",), "judge_api_key_env"),
                                               (("judge",), "judge_api_key_env"),
                                               (("static", "run"), "judge_api_key_env")}
    for cmd, action in flags:
        text = action.help
        assert "default as" not in text, (cmd, text)  # a judge's key is never the agent's (see the next test)
        assert key_rule_text() in text and all(var in text for var, _, _ in PROVIDER_KEYS), (cmd, text)
        assert "to no other endpoint" in text and "an error" in text, (cmd, text)
        if action.dest == "judge_api_key_env" and cmd != ("judge",):
            assert "never taken from --model-api-key-env" in text, (cmd, text)


def test_the_judge_endpoint_does_not_inherit_the_agents_key_variable(monkeypatch):
    """What the help says: --model-api-key-env names the agent endpoint's key only; the judge
    endpoint gets the provider rule (here: no key, a local server), and a named judge variable that
    is unset is an error before anything runs."""
    from harness.client.keys import key_for
    from harness.cli.run_parts import model_configs

    monkeypatch.setenv("AGENT_ONLY_KEY", "token-abc123")
    monkeypatch.delenv("UNSET_JUDGE_KEY", raising=False)
    base = ["run", "--suite", "s", "--agent", "uitars", "--out", "o", "--model-base-url", "http://127.0.0.1:9/v1", "--model", "m",
            "--model-api-key-env", "AGENT_ONLY_KEY", "--judge-base-url", "http://127.0.0.1:8/v1", "--judge-model", "j"]
    cfg = model_configs(build_parser().parse_args(base))
    assert cfg["agent"].api_key_env == "AGENT_ONLY_KEY" and key_for(cfg["agent"]).key == "token-abc123"
    assert cfg["judge"].api_key_env is None and key_for(cfg["judge"]).key is None
    cfg = model_configs(build_parser().parse_args([*base, "--judge-api-key-env", "UNSET_JUDGE_KEY"]))
    with pytest.raises(ValueError, match="UNSET_JUDGE_KEY"):
        key_for(cfg["judge"])
