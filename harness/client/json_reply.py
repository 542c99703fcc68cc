"""A plain JSON object from a model's reply, for callers without a verdict kind of their own. The
reading itself is :mod:`harness.client.replies` (one rule for every verdict)."""

from __future__ import annotations

from typing import Any

from harness.client import replies as _replies


class ReplyError(ValueError):
    """A reply that holds no usable JSON object."""


def parse_json_reply(text: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in a model's reply, read by :func:`harness.client.replies.read_verdict`: every
    object is considered (fenced, glued to prose, inside ``<think>``); the prompt's example
    (placeholder values such as ``"..."``) is skipped; with ``required``, objects without those
    keys are skipped (a decoy dict in the prose), and the objects left must be equal, else a
    :class:`ReplyError` says they disagree. Tolerates trailing commas, Python literals and
    Chinese punctuation."""
    try:
        return _replies.read_verdict(text, _replies.any_object(tuple(required))).value
    except _replies.VerdictError as e:
        raise ReplyError(str(e)) from None
