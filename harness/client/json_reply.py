"""A plain JSON object from a model's reply, for callers without a verdict kind of their own. The
reading itself is :mod:`harness.client.replies` (one rule for every verdict)."""

from __future__ import annotations

from typing import Any

from harness.client import replies as _replies


class ReplyError(ValueError):
    """A reply that holds no usable JSON object."""


def parse_json_reply(text: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object a model's reply is, read by :func:`harness.client.replies.read_verdict`'s
    grammar: after the whitespace around it, one leading ``<think>`` block and one code fence,
    exactly one strict JSON object holding the ``required`` keys (nothing before or after it, no
    key twice); anything else is a :class:`ReplyError` saying what was wrong."""
    try:
        return _replies.read_verdict(text, _replies.any_object(tuple(required))).value
    except _replies.VerdictError as e:
        raise ReplyError(str(e)) from None
