"""Argument types and output helpers the command modules share."""

from __future__ import annotations

import argparse
import sys

from harness.core.user_error import UserError


def size_arg(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1080x2400, got {text!r}") from None
    return w, h


def busy_port(host: str, port: int, e: OSError, flag: str = "--port") -> UserError:
    """One line for a port that cannot be listened on, with what to do about it."""
    return UserError(f"cannot listen on {host}:{port} ({e.strerror or e}); another program has it: pass another "
                     f"{flag}, or {flag} 0 for any free one")


def write_or_print(text: str, out: str | None, what: str) -> None:
    if not out:
        sys.stdout.write(text)
        return
    from pathlib import Path

    try:
        Path(out).write_text(text, encoding="utf-8")
    except OSError as e:
        raise UserError(f"{out}: {e.strerror}") from None
    print(f"{what} -> {out}")
