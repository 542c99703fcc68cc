"""The one error of ``harness judge``'s inputs."""

from __future__ import annotations


class OfflineJudgeError(Exception):
    """A problem with the command's inputs, as one line (printed without a traceback)."""
