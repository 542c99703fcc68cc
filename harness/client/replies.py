"""Reading a model's verdict: the reply -> candidate objects -> one decision, or an error saying why.

This is the one reading rule for every verdict a run acts on: the CRATE-S gate (gate, async and
ask modes), the CRATE, CRATE-S, holistic and milestone judges, and a cached step verdict read back
from disk. It lives beside the model client, not in ``judges/``, because the client's
compatibility name :func:`harness.client.json_reply.parse_json_reply` reads through it too (a lower layer
cannot import the judges); what a verdict holds (its keys, words and schema) is the judges' own
:class:`VerdictKind`, defined in ``judges/verdict_kinds.py``.

The rule, in order (docs/judges.md, "Reading a verdict", says the same for users):

1. **Every JSON object in the reply is a candidate**: plain, in a ``` fence, glued to prose, inside
   a ``<think>`` block, anywhere; only top-level objects (an object inside another is part of it).
   An object is decoded as JSON; failing that (objects under 100 kB only) with trailing commas
   dropped, then with full-width punctuation (“”：，｛｝) made ASCII, then as a Python literal
   (single quotes, True/False/None). An object left open at the end of the reply is *unfinished*.
2. **Keys** are matched ignoring case and surrounding spaces, and the kind's Chinese key names are
   read as the key they name; one object giving a key twice with different values (a JSON
   duplicate, or ``"risky"`` and ``"Risky"``) cannot be read.
3. **The prompt's own example is never a verdict**: an object equal to an example object of the
   prompt, or holding a placeholder value anywhere (``"..."``, ``"…"``, ``"<reason>"``).
4. An object without the kind's verdict key (``risky``, ``unsafe``, ``success``, ``result``,
   ``milestones``; ``clues`` and ``effect``) is not a verdict (``{"score": 0.9}`` alone is none).
5. Every remaining candidate is read by the kind's reader, which refuses what it cannot read (a
   boolean that is not one of the words in :data:`TRUE_WORDS` / :data:`FALSE_WORDS`, a score
   outside 0..1, ...); one refused candidate makes the reply unreadable. So does an object that
   names the verdict key but is not valid JSON, or is unfinished, beside other candidates.
6. All candidates must **agree** on the kind's decisive fields; if they do not, the reply is an
   error, never the first or the last of them.
7. The kind may refuse a verdict that is not clear (the CRATE-S step finding: a "not risky"
   followed by more text, or in a reply cut off at max_tokens).
8. No candidate at all (prose only, a markdown table, an unfinished object, only the prompt's
   example, an empty reply) is *no verdict*: the only outcome the caller may ask again about.

Every error is a :class:`VerdictError` whose ``kind`` says which of these it was.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

# The words a yes/no field may hold besides JSON true/false and the numbers 0/1 (case and
# surrounding spaces ignored). Deliberately short: "null", "none", "", "n", "safe", "unsafe",
# "risky", "成功", "失败", "对", "不是" and the like are refused (an error), never read as false.
TRUE_WORDS = frozenset({"true", "yes", "1", "是"})
FALSE_WORDS = frozenset({"false", "no", "0", "否"})

LENIENT_MAX = 100_000  # objects larger than this are read as strict JSON only (a verdict is small)
QUOTE_MAX = 2000       # characters of a reply quoted in an error or a record


class VerdictError(ValueError):
    """A reply that gives no usable verdict. ``kind``: ``empty``, ``none`` (no verdict object),
    ``unfinished``, ``unreadable`` (a candidate refused), ``disagree``, ``unclear``. ``retry``:
    whether asking again is allowed (only when the reply held nothing to read: a model that did
    answer is not asked until an answer reads well)."""

    def __init__(self, message: str, kind: str, retry: bool = False):
        super().__init__(message)
        self.kind = kind
        self.retry = retry


@dataclass(frozen=True)
class VerdictKind:
    """What one kind of verdict holds and how it is read (defined by the judges).

    ``keys``: every key the prompt asks for (also what a candidate's keys are matched against);
    ``verdict_keys``: an object without all of them is not a verdict; ``read``: the tidy verdict
    from an object whose keys are already matched (raises ValueError/TypeError naming the field);
    ``decisive``: what candidates must agree on; ``clear``: a reason the read verdict is not clear,
    given the text after the reply's last object and whether the reply was cut off, or None;
    ``aliases``: other names of keys (Chinese), lower-cased; ``schema``: the strict JSON schema
    asked of servers that can do structured output."""

    name: str
    keys: tuple[str, ...]
    verdict_keys: tuple[str, ...]
    read: Callable[[dict[str, Any]], dict[str, Any]]
    decisive: Callable[[dict[str, Any]], Any]
    schema: dict[str, Any]
    aliases: dict[str, str] = field(default_factory=dict)
    clear: Callable[[dict[str, Any], str, bool], str | None] | None = None

    def names_verdict(self, text: str) -> bool:
        """Whether raw text mentions one of the verdict keys (or a name of one) as a key would."""
        low = text.casefold()
        names = set(self.verdict_keys) | {a for a, k in self.aliases.items() if k in self.verdict_keys}
        return any(f'"{n}' in low or f"'{n}" in low or f"“{n}" in low for n in names)


@dataclass(frozen=True)
class Reading:
    """One verdict read from a reply: the tidy value, how many candidates gave it, and what was
    left out and why (for the record)."""

    value: dict[str, Any]
    candidates: int
    dropped: tuple[str, ...] = ()


# --- field readers (shared by every kind) ------------------------------------------------------
def as_bool(v: Any, name: str) -> bool:
    """A yes/no field: JSON true/false, the numbers 0 and 1, or a word of TRUE_WORDS/FALSE_WORDS."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        w = v.strip().casefold()
        if w in TRUE_WORDS:
            return True
        if w in FALSE_WORDS:
            return False
    raise ValueError(f"{name}: expected true or false, got {_short(v)}")


def as_score(v: Any, name: str = "score") -> float | None:
    """A confidence from 0 to 1 (a JSON number, or a string holding one); missing or null is None.
    A number outside 0..1 (a percentage such as 85 included), a boolean or a word is refused."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{name}: expected a number from 0 to 1, got {_short(v)}")
    try:
        f = float(v.strip() if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a number from 0 to 1, got {_short(v)}") from None
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise ValueError(f"{name}: expected a number from 0 to 1, got {_short(v)}")
    return f


def as_step(v: Any, name: str) -> int | None:
    """A step number (an integer, or a string holding one); null is None; anything else refused."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{name}: expected a step number or null, got {_short(v)}")
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*", v):
        return int(v)
    raise ValueError(f"{name}: expected a step number or null, got {_short(v)}")


def as_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v.strip()
    return json.dumps(v, ensure_ascii=False)


def match_keys(obj: dict[str, Any], keys: Iterable[str], aliases: dict[str, str] | None = None) -> dict[str, Any]:
    """``obj`` with its keys matched to ``keys`` (case and spaces ignored, ``aliases`` applied);
    other keys are kept as they are. A key given twice with different values is refused."""
    want = {k.casefold(): k for k in keys}
    out: dict[str, Any] = {}
    came: dict[str, str] = {}
    for k, v in obj.items():
        name = k.strip().casefold() if isinstance(k, str) else k
        if isinstance(name, str):
            name = (aliases or {}).get(name, name)
            name = want.get(name, k)
        if name in out and out[name] != v:
            raise ValueError(f"{name}: given twice with different values ({came[name]!r}: {_short(out[name])}, "
                             f"{k!r}: {_short(v)})")
        out[name] = v
        came[name] = k
    return out


def _short(v: Any, n: int = 60) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[:n] + "..."


def quote(text: str | None, limit: int = QUOTE_MAX) -> str:
    """A reply as quoted in errors and records: whitespace runs folded, cut to ``limit`` characters."""
    s = " ".join((text or "").split())
    return s if len(s) <= limit else s[:limit] + f"... [{len(s) - limit} more characters]"


# --- finding the objects -----------------------------------------------------------------------
_CN_PUNCT = str.maketrans({"“": '"', "”": '"', "：": ":", "，": ",", "｛": "{", "｝": "}", "［": "[", "］": "]"})
_PLACEHOLDER = re.compile(r"\s*(?:\.{2,}|…+|。{2,}|<[^<>]{0,40}>)\s*")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_NOT_PROSE = re.compile(r"```|</?[A-Za-z_][\w-]*>|<\|[^|<>]{0,40}\|>|[\s\W_]+")


class _Duplicate(ValueError):
    pass


def _pairs(pairs: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in pairs:
        if k in out and out[k] != v:
            raise _Duplicate(f"{k}: given twice with different values ({_short(out[k])}, {_short(v)})")
        out[k] = v
    return out


@dataclass
class Found:
    """One top-level ``{...}`` span of the reply: its text, where it ends, and what it decoded to
    (``obj``) or why it did not (``problem``)."""

    text: str
    end: int
    obj: Any = None
    problem: str | None = None
    duplicate: bool = False


def _spans(text: str) -> tuple[list[tuple[int, int]], int]:
    """Top-level ``{...}`` spans (start, end), strings inside objects respected; and where an
    object left open at the end starts (-1 if none). Linear in the text."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while True:
        start = text.find("{", i)
        if start < 0:
            return out, -1
        depth, in_str, esc, j = 0, False, False, start
        while j < n:
            ch = text[j]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if j >= n:
            return out, start
        out.append((start, j + 1))
        i = j + 1


def _python_literal(s: str) -> Any:
    tree = ast.parse(s, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            seen: dict[Any, Any] = {}
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant):
                    val = ast.literal_eval(v)
                    if k.value in seen and seen[k.value] != val:
                        raise _Duplicate(f"{k.value}: given twice with different values")
                    seen[k.value] = val
    return ast.literal_eval(tree)


def decode(s: str) -> Any:
    """One object's text as JSON, or leniently (see the module's rule 1). Raises ValueError
    (``_Duplicate`` for a key given twice with different values)."""
    try:
        return json.loads(s, object_pairs_hook=_pairs)
    except _Duplicate:
        raise
    except (ValueError, RecursionError) as e:
        # the message only: the exception itself holds this frame through its traceback, a cycle that
        # kept each reply's call stack (and the judge's step futures) alive until a garbage collection
        first = str(e)
    if len(s) > LENIENT_MAX:
        raise ValueError(f"not valid JSON ({first})")
    t = _TRAILING_COMMA.sub(r"\1", s)
    for cand in (t, t.translate(_CN_PUNCT)):
        try:
            return json.loads(cand, object_pairs_hook=_pairs)
        except _Duplicate:
            raise
        except (ValueError, RecursionError):
            pass
    try:
        return _python_literal(t)
    except _Duplicate:
        raise
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        raise ValueError(f"not valid JSON ({first})") from None


@dataclass
class Scan:
    found: list[Found]
    unfinished: str | None  # the text of an object left open at the end
    last_end: int           # where the last complete object ends (0: none)


def scan(text: str) -> Scan:
    """Every top-level object of ``text``, decoded where possible."""
    if "{" not in text and "｛" in text:
        text = text.translate(_CN_PUNCT)
    spans, open_at = _spans(text)
    found = []
    for a, b in spans:
        s = text[a:b]
        f = Found(s, b)
        try:
            f.obj = decode(s)
        except _Duplicate as e:
            f.problem, f.duplicate = str(e), True
        except ValueError as e:
            f.problem = str(e)
        found.append(f)
    return Scan(found, text[open_at:] if open_at >= 0 else None, spans[-1][1] if spans else 0)


def _has_placeholder(v: Any) -> bool:
    if isinstance(v, str):
        return bool(_PLACEHOLDER.fullmatch(v))
    if isinstance(v, dict):
        return any(_has_placeholder(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_placeholder(x) for x in v)
    return False


def examples_in(*texts: str) -> list[dict[str, Any]]:
    """The JSON objects a prompt shows as examples of its reply (its templates' objects)."""
    out = []
    for t in texts:
        for f in scan(t).found:
            if isinstance(f.obj, dict):
                out.append(f.obj)
    return out


def trailing_text(text: str, last_end: int) -> str:
    """What follows the reply's last complete object, if it holds any words (fences, tags,
    punctuation and spaces do not count); else ''."""
    tail = text[last_end:] if last_end else ""
    return "" if not _NOT_PROSE.sub("", tail) else " ".join(tail.split())


# --- the rule --------------------------------------------------------------------------------------
def read_verdict(text: str | None, kind: VerdictKind, examples: Sequence[dict[str, Any]] = (),
                 truncated: bool = False) -> Reading:
    """The one verdict of ``kind`` in a model's reply (the module's rule), or a VerdictError."""
    if not isinstance(text, str) or not text.strip():
        raise VerdictError("the reply is empty", "empty", retry=True)
    s = scan(text)
    verdicts: list[dict[str, Any]] = []
    dropped: list[str] = []
    refused: list[str] = []      # candidates that were verdicts but could not be read
    undecodable: list[str] = []  # objects naming the verdict key that are not JSON
    for f in s.found:
        if f.duplicate:
            refused.append(f"{f.problem} in {quote(f.text, 120)}")
            continue
        if f.problem is not None:
            (undecodable if kind.names_verdict(f.text) else dropped).append(
                f"an object that is not valid JSON: {quote(f.text, 120)}")
            continue
        if not isinstance(f.obj, dict):
            continue
        if f.obj in examples or _has_placeholder(f.obj):
            dropped.append(f"the prompt's example: {quote(f.text, 120)}")
            continue
        try:
            obj = match_keys(f.obj, kind.keys, kind.aliases)
        except ValueError as e:
            refused.append(f"{e} in {quote(f.text, 120)}")
            continue
        if not all(k in obj for k in kind.verdict_keys):
            if any(k in obj for k in kind.keys):
                missing = ", ".join(k for k in kind.verdict_keys if k not in obj)
                dropped.append(f"an object without {missing}: {quote(f.text, 120)}")
            continue
        try:
            verdicts.append(kind.read(obj))
        except (ValueError, TypeError, KeyError) as e:
            refused.append(f"{e} in {quote(f.text, 120)}")
    if s.unfinished is not None and kind.names_verdict(s.unfinished):
        undecodable.append(f"an unfinished object at the end: {quote(s.unfinished, 120)}")
    if refused or (undecodable and verdicts):
        problems = refused + undecodable
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise VerdictError(f"unreadable {kind.name} verdict: {problems[0]}{more}", "unreadable")
    if not verdicts:
        if undecodable:
            raise VerdictError(f"no readable {kind.name} verdict: {undecodable[0]}",
                               "unfinished" if s.unfinished is not None else "none", retry=True)
        why = f" ({'; '.join(dropped[:3])})" if dropped else ""
        with_keys = f" with {', '.join(kind.verdict_keys)}" if kind.verdict_keys else ""
        raise VerdictError(f"no JSON object{with_keys} in the reply{why}", "none", retry=True)
    first = kind.decisive(verdicts[0])
    if any(kind.decisive(v) != first for v in verdicts[1:]):
        shown = " / ".join(json.dumps(kind.decisive(v), ensure_ascii=False, default=str) for v in verdicts[:4])
        raise VerdictError(f"{len(verdicts)} {kind.name} verdicts in one reply that disagree: {shown}", "disagree")
    value = verdicts[-1]
    if kind.clear is not None:
        why = kind.clear(value, trailing_text(text, s.last_end), truncated)
        if why:
            raise VerdictError(why, "unclear")
    return Reading(value, len(verdicts), tuple(dropped))


def any_object(required: tuple[str, ...] = ()) -> VerdictKind:
    """A kind for callers that read no particular verdict: any object holding ``required``, read
    as it is; candidates must be equal objects."""
    return VerdictKind("JSON", tuple(required), tuple(required), lambda o: o, lambda o: o, {})
