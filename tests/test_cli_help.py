"""Every command's --help prints (argparse %-formats help strings, so a stray "%" breaks it)."""

from __future__ import annotations

import argparse

import pytest

from harness.cli import build_parser, main


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
