"""The simulated shell's command table: command name (and alias) -> the function that runs it.

A command is a module-level function of ``harness.sim.shell.commands.*`` taking a Ctx and
returning its exit status; ``@command("md5sum", "sha256sum", ...)`` registers it under its name
and aliases. The runtime imports the command modules (which fills COMMANDS) and gives every Shell
its own copy of the table.
"""

from __future__ import annotations

from typing import Callable

from harness.sim.shell.context import Ctx

Command = Callable[[Ctx], int]

COMMANDS: dict[str, Command] = {}


def command(name: str, *aliases: str) -> Callable[[Command], Command]:
    """Register the decorated function as the command ``name`` (and ``aliases``)."""

    def register(fn: Command) -> Command:
        for n in (name, *aliases):
            if n in COMMANDS:
                raise ValueError(f"shell command {n!r} is registered twice ({COMMANDS[n].__module__}, {fn.__module__})")
            COMMANDS[n] = fn
        return fn

    return register
