"""Secrets never land in records: keys that name a secret, and values that look like one (API
keys, bearer tokens, ``--api-key X``), are replaced before anything is written. What a secret value
looks like, and the marker that replaces it, are the one rule of :mod:`harness.core.secret_text` (the
model client and the quoting of replies use it too); this module adds the secret *names*."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from harness.core.secret_text import REDACTED, VALUE_PATTERNS, redact_text

__all__ = ["REDACTED", "is_secret_key", "redact"]


_SECRET_WORDS = frozenset(
    {"token", "secret", "secrets", "password", "passwd", "passphrase", "authorization", "apikey", "credential", "credentials"}
)


_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey")


_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")})


# Keys naming *where* a secret lives or *how big* something is are not secrets themselves:
# api_key_env, token_limit, max_tokens (plural never matches), password_file ...
_NOT_SECRET_LAST = frozenset(
    {"env", "var", "envvar", "variable", "name", "file", "path", "count", "limit", "len", "length",
     "type", "kind", "header", "url", "ttl", "expiry", "expires", "set", "present", "required"}
)


_ASSIGN_RE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sep>=|:\s*)(?P<val>[^\s,;&\"']+)")


_FLAG_RE = re.compile(r"(?<!\S)(?P<flag>--?(?P<name>[A-Za-z][A-Za-z0-9_\-]*))(?P<sep>\s+)(?P<val>[^\s\-][^\s]*)")


# already redacted, or an auth scheme whose credential the Bearer rule handles
_KEEP_VALUES = frozenset({REDACTED, "Bearer", "bearer", "Basic", "basic", "Token", "token"})


def _key_words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_key(key: Any) -> bool:
    """Whether a mapping key (or command-line flag name) names a secret.

    Matches, case-insensitively and in snake/kebab/camel case: ``api_key``, ``apikey``,
    ``x-api-key``, ``token``, ``access_token``, ``secret``, ``client_secret``, ``password``,
    ``authorization``, ``credentials``, ``private_key`` ...  Not: ``max_tokens``,
    ``prompt_tokens``, ``api_key_env``, ``token_limit``, ``key``.
    """
    if not isinstance(key, str):
        return False
    return _secret_name(key)


@functools.lru_cache(maxsize=16384)
def _secret_name(key: str) -> bool:
    """:func:`is_secret_key` of a string, remembered: a bundle of a big run asks it of the same
    few hundred keys millions of times."""
    words = _key_words(key.lstrip("-"))
    if not words or words[-1] in _NOT_SECRET_LAST:
        return False
    for i, w in enumerate(words):
        if w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES):
            return True
        if i + 1 < len(words) and (w, words[i + 1]) in _SECRET_PAIRS:
            return True
    return False


def _redact_string(text: str) -> str:
    text = redact_text(text)
    text = _ASSIGN_RE.sub(
        lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}"
        if is_secret_key(m.group("name")) and m.group("val") not in _KEEP_VALUES
        else m.group(0),
        text,
    )
    text = _FLAG_RE.sub(
        lambda m: f"{m.group('flag')}{m.group('sep')}{REDACTED}"
        if is_secret_key(m.group("name")) and m.group("val") not in _KEEP_VALUES
        else m.group(0),
        text,
    )
    return text


_VALUE_PREFIXES = ("sk-", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_")  # what the rule's VALUE_PATTERNS start with


# every word a secret's name must hold, lower-cased (the words, suffixes and pairs above)
_SECRET_PARTS = ("token", "secret", "passw", "passphrase", "authorization", "apikey", "credential", "api", "access",
                 "private", "bearer")


def might_hold_secret(text: str) -> bool:
    """False only when :func:`redact` would change nothing in ``text`` or in any JSON it holds: no
    secret's name (every one holds one of ``_SECRET_PARTS``), no key pattern, no bearer token. A
    quick test for the many records that need no redaction (a bundle of a big run)."""
    lowered = text.lower()
    if any(w in lowered for w in _SECRET_PARTS):
        return True
    # the key patterns' prefixes, found by plain search before any pattern runs
    return any(w in text for w in _VALUE_PREFIXES) and any(p.search(text) for p in VALUE_PATTERNS)


def redact(obj: Any) -> Any:
    """Return a copy of ``obj`` with secrets replaced by ``"***redacted***"``.

    * values of secret-looking keys (see :func:`is_secret_key`), at any depth, unless the
      value is None (kept so "no key configured" stays visible);
    * inside any string: ``sk-...``/``hf_...``/``ghp_...`` keys, ``Bearer <token>``,
      ``NAME=value`` / ``name: value`` where NAME looks secret, and ``--api-key value``;
    * in lists of strings (argv): the element following a secret flag such as
      ``--api-key`` or ``--token``.

    Dicts, lists and tuples are copied (tuples become lists); other values are returned
    unchanged.
    """
    if isinstance(obj, str):
        return _redact_string(obj)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if v is not None and is_secret_key(k):
                out[k] = REDACTED
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, (list, tuple)):
        items: list[Any] = []
        hide_next = False
        for item in obj:
            if hide_next and isinstance(item, str) and not item.startswith("-"):
                items.append(REDACTED)
                hide_next = False
                continue
            hide_next = False
            if isinstance(item, str) and item.startswith("-") and "=" not in item and is_secret_key(item):
                hide_next = True
            items.append(redact(item))
        return items
    return obj
