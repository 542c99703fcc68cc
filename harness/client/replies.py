"""Reading a model's verdict: a reply is a verdict only when it *is* one (an allowlist grammar).

This is the one reading rule for every verdict a run acts on: the CRATE-S gate (gate, async and
ask modes), the CRATE, CRATE-S, holistic and milestone judges, and a cached step verdict read back
from disk, live and offline alike. It lives beside the model client, not in ``judges/``, because
the client's compatibility name :func:`harness.client.json_reply.parse_json_reply` reads through it too (a
lower layer cannot import the judges); what a verdict holds (its schema, and how its fields must
agree) is the judges' own :class:`VerdictKind`, defined in ``judges/verdict_kinds.py``.

The grammar (docs/judges.md, "Reading a verdict", says the same for users). After removing the
whitespace around the reply (JSON's own: space, tab, CR, LF), then one leading
``<think>...</think>`` block (a thinking model's reasoning; what it holds is not read), then at
most one code fence around what is left (```` ``` ```` with or without an ASCII language tag),
what remains must be:

1. **exactly one JSON object**, read by a strict JSON parser: nothing before or after it, no second
   object, no ``NaN``/``Infinity``, no number too large to be finite, no lone surrogate in a string;
2. whose **keys are exactly the schema's**: every required key present, no other key, no key twice
   (even with the same value). Keys are compared as they are: ``"Risky"``, ``"risky\\u200b"``,
   full-width ``"ｒｉｓｋｙ"`` or a Cyrillic ``"rіsky"`` are not ``"risky"`` (nothing is folded,
   normalised or translated), and the error names the characters that made a key foreign;
3. whose **values have the schema's types**: booleans are JSON ``true``/``false`` (not ``"yes"``,
   ``1`` or ``"true"``), integers are JSON integers, numbers are JSON numbers (not strings), a
   category is exactly one of the schema's names or ``null``; nested objects follow the same
   rules (their keys exactly theirs);
4. whose **fields agree**, by the kind's own check (a step finding "not risky" naming a category,
   or scoring over 0.5; a run "not unsafe" naming a step; a step outside the run; ...).

Anything else is not a verdict, and :func:`read_verdict` raises a :class:`VerdictError` saying
what was wrong (``kind``: ``empty``, ``truncated``, ``not_one_object``, ``keys``, ``types``,
``disagree``). Nothing is searched for, repaired or guessed: the caller asks again once, then
fails closed (the gate halts with ``monitor_error``; a judge records ``judge_error``).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable

QUOTE_MAX = 2000  # characters of a reply quoted in an error or a record

# the kinds of VerdictError (what was wrong), in the order the grammar checks them
KINDS = ("empty", "truncated", "not_one_object", "keys", "types", "disagree")


class VerdictError(ValueError):
    """A reply that is not a verdict. ``kind`` says which rule it broke (see :data:`KINDS`).
    ``retry`` is always true: any reply that is not a verdict may be asked again, once."""

    def __init__(self, message: str, kind: str, retry: bool = True):
        super().__init__(message)
        self.kind = kind
        self.retry = retry


class Refused(ValueError):
    """Raised by a kind's ``check``: the object is well formed but not a verdict (``kind``
    ``types`` for a value out of its range, ``disagree`` for fields that contradict each other)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def disagree(message: str) -> Refused:
    return Refused("disagree", message)


def out_of_range(message: str) -> Refused:
    return Refused("types", message)


@dataclass(frozen=True)
class VerdictKind:
    """What one kind of verdict is (defined by the judges).

    ``schema``: the strict JSON schema asked of servers that can do structured output, and the
    grammar's keys and types (``None``: any one object holding ``required``, for callers with no
    schema of their own); ``check(obj, asked)``: raises :class:`Refused` when the fields do not
    agree, ``asked`` being what the question was about (the run's steps, a segment, ...; ``{}``
    when the caller gives nothing); ``tidy``: the verdict as callers use it."""

    name: str
    schema: dict[str, Any] | None
    check: Callable[[dict[str, Any], dict[str, Any]], None] = lambda obj, asked: None
    tidy: Callable[[dict[str, Any]], dict[str, Any]] = lambda obj: obj
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reading:
    """One verdict read from a reply: the tidy value, and the JSON text it was read from."""

    value: dict[str, Any]
    body: str = ""


def quote(text: str | None, limit: int = QUOTE_MAX) -> str:
    """A reply as quoted in errors and records: whitespace runs folded, cut to ``limit`` characters."""
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[:limit] + f"... [{len(s) - limit} more characters]"


def _short(v: Any, n: int = 60) -> str:
    s = json.dumps(v, ensure_ascii=True) if not isinstance(v, str) else ascii(v)
    return s if len(s) <= n else s[:n] + "..."


# --- 0. what is around the object --------------------------------------------------------------------
_FENCE_TAG = re.compile(r"[ \t]*(?:[A-Za-z][\w+.-]*)?[ \t]*\n?", re.ASCII)  # after the opening ```: an ASCII tag
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPACE = " \t\r\n"  # the whitespace removed around the reply: JSON's own (an ideographic or no-break space is not)


def unwrap(text: str) -> str:
    """The reply without the whitespace around it, one leading ``<think>`` block and one code
    fence: the text that must be one JSON object. Raises VerdictError (``empty``,
    ``not_one_object``)."""
    t = text.strip(SPACE)
    if not t:
        raise VerdictError("the reply is empty", "empty")
    if t.startswith(THINK_OPEN):
        end = t.find(THINK_CLOSE)
        if end < 0:
            raise VerdictError("the reply's <think> block is never closed: no verdict after it", "not_one_object")
        t = t[end + len(THINK_CLOSE):].strip(SPACE)
        if not t:
            raise VerdictError("nothing after the reply's <think> block", "not_one_object")
    if t.startswith("```"):
        if len(t) < 6 or not t.endswith("```"):
            raise VerdictError(f"the reply is not one code fence holding the object: {quote(t, 120)!r}",
                               "not_one_object")
        inner = t[3:-3]
        t = inner[_FENCE_TAG.match(inner).end():].strip(SPACE)  # a second fence inside is not JSON: refused below
    return t


# --- 1. exactly one object, strict JSON --------------------------------------------------------------
class _KeyTwice(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _KeyTwice(f"key {_short(k)} given twice ({_short(out[k])}, {_short(v)})")
        out[k] = v
    return out


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(s: str) -> float:
    f = float(s)
    if not math.isfinite(f):
        raise ValueError(f"{s[:40]} is too large to be a number")
    return f


def strict_json(body: str) -> dict[str, Any]:
    """``body`` as exactly one JSON object (see the module's rule 1), else VerdictError."""
    if not body.startswith("{"):
        where = "the reply does not start with the JSON object" if body else "no JSON object"
        raise VerdictError(f"{where} (it starts {quote(body, 60)!r})", "not_one_object")
    try:
        obj = json.loads(body, object_pairs_hook=_pairs, parse_constant=_constant, parse_float=_finite)
    except _KeyTwice as e:
        raise VerdictError(str(e), "keys") from None
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise VerdictError(f"more after the JSON object ({quote(body[e.pos:], 60)!r})", "not_one_object") from None
        raise VerdictError(f"not strict JSON ({e.msg} at character {e.pos}): {quote(body, 120)!r}",
                           "not_one_object") from None
    except (ValueError, RecursionError) as e:  # a constant, an infinite number, too deep, too many digits
        raise VerdictError(f"not strict JSON: {str(e)[:120]}", "not_one_object") from None
    if not isinstance(obj, dict):
        raise VerdictError("the JSON is not one object", "not_one_object")
    return obj


# --- 2 and 3. the schema's keys and types ------------------------------------------------------------
_FOREIGN = frozenset({"Cf", "Co", "Cs"})


def foreign_key(key: str) -> str:
    """Why a key that is not the schema's looks like one (for the error), or ''."""
    why = []
    for ch in key:
        cat = unicodedata.category(ch)
        if (cat in _FOREIGN or not ch.isascii()) and len(why) < 3:
            why.append(f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')} ({cat})")
    folded = unicodedata.normalize("NFKC", key)
    if folded != key and folded.isascii():
        why.append(f"a compatibility form of {folded!r}")
    return "; ".join(dict.fromkeys(why))


def _type_ok(v: Any, t: str) -> bool:
    if t == "null":
        return v is None
    if t == "boolean":
        return v is True or v is False
    if t == "integer":
        return type(v) is int
    if t == "number":
        return type(v) in (int, float)
    if t == "string":
        return type(v) is str
    if t == "array":
        return type(v) is list
    if t == "object":
        return type(v) is dict
    raise ValueError(f"schema type {t!r} is not one the reading knows")


def conform(v: Any, schema: dict[str, Any], where: str) -> None:
    """``v`` has ``schema``'s type (the strict subset the kinds use: type, enum, properties with
    every key required and no other, items). Raises VerdictError (``keys`` or ``types``)."""
    label = where or "the reply"
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    if types and not any(_type_ok(v, t) for t in types):
        raise VerdictError(f"{label}: expected {' or '.join(types)}, got {_short(v)}", "types")
    if "enum" in schema and not any(v == e and type(v) is type(e) for e in schema["enum"]):
        names = ", ".join(_short(e, 30) for e in schema["enum"])
        raise VerdictError(f"{label}: {_short(v)} is not one of {names}", "types")
    if isinstance(v, str) and any(0xD800 <= ord(ch) <= 0xDFFF for ch in v):
        raise VerdictError(f"{label}: a lone surrogate in the text", "types")
    if isinstance(v, dict) and "properties" in schema:
        props = schema["properties"]
        extra = [k for k in v if k not in props]
        if extra:
            k = extra[0]
            looks = foreign_key(k)
            raise VerdictError(f"{label}: {_short(k)} is not a key of the schema"
                               f"{f' ({looks})' if looks else ''}; the keys are {', '.join(props)}", "keys")
        missing = [k for k in schema.get("required", props) if k not in v]
        if missing:
            raise VerdictError(f"{label}: missing {', '.join(missing)}", "keys")
        for k, sub in props.items():
            if k in v:
                conform(v[k], sub, f"{where}.{k}" if where else k)
    if isinstance(v, list) and "items" in schema:
        for i, x in enumerate(v):
            conform(x, schema["items"], f"{where}[{i}]")


# --- the rule ----------------------------------------------------------------------------------------
def read_verdict(text: str | None, kind: VerdictKind, truncated: bool = False,
                 asked: dict[str, Any] | None = None) -> Reading:
    """The verdict of ``kind`` that the reply is (the module's grammar), or a VerdictError.
    ``truncated``: the reply was cut off at max_tokens (never a verdict: what followed is
    unknown); ``asked``: what the question was about, for the kind's check."""
    if not isinstance(text, str) or not text.strip(SPACE):
        raise VerdictError("the reply is empty", "empty")
    if truncated:
        raise VerdictError("the reply was cut off at max_tokens: what followed it is unknown", "truncated")
    try:
        body = unwrap(text)
        obj = strict_json(body)
        if kind.schema is not None:
            conform(obj, kind.schema, "")
        missing = [k for k in kind.required if k not in obj]
        if missing:
            raise VerdictError(f"the reply: missing {', '.join(missing)}", "keys")
        kind.check(obj, asked or {})
    except Refused as e:
        raise VerdictError(f"not a {kind.name} verdict: {e}", e.kind) from None
    except VerdictError as e:
        raise VerdictError(f"not a {kind.name} verdict: {e}", e.kind) from None
    return Reading(kind.tidy(obj), body)


def any_object(required: tuple[str, ...] = ()) -> VerdictKind:
    """A kind for callers that read no particular verdict: one JSON object holding ``required``
    (other keys allowed: there is no schema to allow them against), read as it is."""
    return VerdictKind("JSON", None, required=tuple(required))
