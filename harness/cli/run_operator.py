"""Who a ``harness run`` can ask: the operator of ``--monitor-mode ask`` (refused when nobody can be
asked) and the person an agent's ``needs_user`` hands the phone to (none when nobody can take it:
the episode then ends ``needs_user``), and the options that set them."""

from __future__ import annotations

import argparse
from typing import Any

from harness.live.operator import ASK_TIMEOUT_S, HANDOVER_TIMEOUT_S, Operator, Terminal


class OperatorSetupError(ValueError):
    """The run's options ask for an operator that cannot be had (harness run says it as a RunError)."""


def operator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ask-timeout", type=float, default=ASK_TIMEOUT_S, metavar="S",
                   help="with --monitor-mode ask: no answer within S seconds denies the action (default %(default)s)")
    p.add_argument("--handover-timeout", type=float, default=HANDOVER_TIMEOUT_S, metavar="S",
                   help="an agent that asks for a person (UI-TARS call_user(): needs_user) hands the phone to you "
                        "(terminal, or the --watch page): no hand-back within S seconds ends the episode needs_user "
                        "(default %(default)s)")
    p.add_argument("--no-handover", action="store_true",
                   help="never hand the phone to a person: an agent's needs_user ends its episode needs_user, as on "
                        "a run nobody watches (no terminal, no --watch, --cluster)")


def asks_operator(specs: dict[str, Any]) -> bool:
    """Whether a monitor of the run asks an operator (``mode: ask`` or ``reflect,ask``)."""
    return any(m.get("mode") in ("ask", "reflect,ask") for m in specs["monitors"])


def handover_operator(args: argparse.Namespace) -> Operator | None:
    """The operator an agent's ``needs_user`` hands the phone to when no monitor asks: the terminal
    when there is one, the live page with ``--watch``; None (the episode then ends ``needs_user``)
    with neither, with ``--no-handover`` and on a farm run (its nodes cannot reach this terminal)."""
    if not getattr(args, "handover_timeout", HANDOVER_TIMEOUT_S) > 0:
        raise OperatorSetupError("--handover-timeout must be > 0 seconds")
    if getattr(args, "cluster", None) or getattr(args, "no_handover", False):
        return None
    terminal = Terminal.open()
    if terminal is None and not args.watch:
        return None
    return Operator(args.ask_timeout, terminal=terminal, page=bool(args.watch), handover_timeout_s=args.handover_timeout)


def ask_operator(args: argparse.Namespace) -> Operator:
    """The operator of a ``--monitor-mode ask`` run: the terminal when there is one, the live page
    with ``--watch``; neither is refused before any device is touched. It takes hand-overs too."""
    if not args.ask_timeout > 0:
        raise OperatorSetupError("--ask-timeout must be > 0 seconds")
    if getattr(args, "cluster", None):  # a farm node's episode has no way to this terminal or page
        raise OperatorSetupError("--monitor-mode ask cannot be used with --cluster: the farm's nodes cannot reach an "
                                 "operator here; use --monitor-mode gate")
    terminal = Terminal.open()
    if terminal is None and not args.watch:
        raise OperatorSetupError("--monitor-mode ask needs someone to ask: this run has no terminal (stdin and /dev/tty "
                                 "are not terminals); pass --watch to answer on the live page, or use --monitor-mode gate")
    timeout = getattr(args, "handover_timeout", None) or HANDOVER_TIMEOUT_S
    if not timeout > 0:
        raise OperatorSetupError("--handover-timeout must be > 0 seconds")
    return Operator(args.ask_timeout, terminal=terminal, page=bool(args.watch), handover_timeout_s=timeout,
                    hand_over_ok=not getattr(args, "no_handover", False))
