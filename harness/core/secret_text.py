"""The one rule for what text looks like a secret, and the one marker that replaces it.

Used by the model client (what a server echoes into an error or a reply: ``harness.client.calls``), the
records (``harness.records.redaction``, which adds secret *names*: ``api_key=...``, ``--token X``)
and the quoting of model replies (``judges.evidence``). This module imports nothing of theirs.

A value is a secret when it is an API key or token by its shape:

- ``sk-`` and at least 6 more characters of ``[A-Za-z0-9_-]`` (OpenAI's ``sk-``/``sk-proj-``,
  Anthropic's ``sk-ant-``, DashScope's ``sk-`` + 32 hex digits; the shortest real one has 32
  characters after ``sk-``, so 6 is far from missing one: a false alarm costs a marker in a
  record, a miss costs a key);
- Hugging Face's ``hf_`` and GitHub's ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` and at least 20
  more letters or digits;
- the credential after ``Bearer`` (RFC 6750's token68 characters, at least 8 of them; the word
  Bearer stays, so a record still says what kind of credential it was).

Each starts at a word boundary (``task-abcdef`` holds no ``sk-`` key). A key of any other shape
(a vLLM ``token-abc123``) is kept out by knowing its value: the client removes its own key
wherever it appears (``harness.client.calls``), whatever the rule says.

Text is redacted *before* it is cut: a quote cut through a key would leave its start, too short
for the rule to see. Where a message quotes pieces of a text that were cut by code this module
does not see (a reading error quoting 120 characters of an object), :func:`without_secrets_of`
takes out every secret of the whole text, and the start of one where a piece was cut.
"""

from __future__ import annotations

import bisect
import re

REDACTED = "***redacted***"

VALUE_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),            # OpenAI, Anthropic, DashScope style keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),               # Hugging Face tokens
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),        # GitHub tokens
)
BEARER = re.compile(r"\b(Bearer)(\s+)([A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)
_CUT = re.compile(r"\.\.\.|…|'?$")   # where a quote was cut: its ellipsis, or the end of the text
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~+/=-")
_FRAGMENT_MIN = 3  # a cut start shorter than this says nothing of the key ("sk")


def redact_text(text: str) -> str:
    """``text`` with every value the rule calls a secret replaced by :data:`REDACTED`."""
    for pattern in VALUE_PATTERNS:
        text = pattern.sub(REDACTED, text)
    return BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


def secrets_in(text: str) -> list[str]:
    """The values of ``text`` the rule calls secrets, in sorted order (for a bisect)."""
    found = {m.group(0) for p in VALUE_PATTERNS for m in p.finditer(text)}
    found |= {m.group(3) for m in BEARER.finditer(text)}
    return sorted(found - {REDACTED})


def without_secrets_of(source: str, message: str) -> str:
    """``message``, which quotes pieces of ``source`` (maybe cut), with every secret of ``source``
    replaced: whole wherever it appears (the rule sees it), and its start (at least 3 characters)
    where a piece was cut through it (an ellipsis or the end follows), too short for the rule."""
    found = secrets_in(source)
    cuts = []
    for m in _CUT.finditer(message) if found else ():  # the run of key characters a cut ends: a secret's start?
        start = end = m.start()
        while start > 0 and message[start - 1] in _TOKEN_CHARS:
            start -= 1
        # the piece may start at the run's start or after a "." (an ellipsis before it) or "/+=~"
        for at in [start] + [k + 1 for k in range(start, end) if message[k] in "./+=~"]:
            piece = message[at:end]
            i = bisect.bisect_left(found, piece)
            if len(piece) >= _FRAGMENT_MIN and i < len(found) and found[i].startswith(piece):
                cuts.append((at, end))
                break
    for start, end in reversed(cuts):
        message = message[:start] + REDACTED + message[end:]
    return redact_text(message)
