"""The step-level judge call, reusable by every judge, the live monitor and the offline
``harness judge`` command: one pre-action screenshot with the action drawn on it, the action as
text, and the instruction, in; a small JSON object out (CRATE's visual clues and inferred effect,
or CRATE-S's risk finding; seed 001 section 3.1.1, FIELD_NOTES section 2).

Also here, because every judge needs them:

- :func:`ask_json`: one model call whose reply is read by the one reading rule, the verdict
  grammar (:func:`harness.client.replies.read_verdict`, with the verdict kinds of
  ``judges/verdict_kinds.py``): a reply that is not exactly a verdict is asked again
  (``parse_retries`` times, default once), with the prompt's ``reask`` line added; what still is
  not one, or fails in the model client after its own retries, raises :class:`JudgeCallError`
  with the reason and the replies quoted. Judges turn that into the verdict ``judge_error``, the
  monitor into a failed check (it halts); nothing here guesses.
- :class:`CallLog`: calls, tokens and model latency per kind of call, thread-safe.
- Caches of step evidence. The key is the sha256 of everything that shapes the answer: the
  endpoint (base URL) and model, the sampling settings (temperature, top_p, seed, max_tokens,
  structured mode, extra body), the prompt's identity, the image policy, the drawing version and
  the step's inputs (screenshot bytes, screen size, action text, instruction), so identical steps
  are judged once: :class:`MemoryCache` (process-wide per endpoint, with in-flight
  de-duplication, so the CRATE-S monitor and the CRATE-S judge share one call per step) and
  :class:`StepEvidenceCache`, a JSONL file (one line per entry, appended with one ``write``; torn
  lines from a crash are skipped) that several processes and resumed runs can share. An entry
  keeps the reply it was read from; one read back from disk is read again through the same rule
  and must give the same evidence, else it is asked again (and the new entry replaces it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.actions import Action
from harness.client.calls import ModelClient
from harness.client.config import ChatResult, ModelConfig, ModelError
from harness.client.images import EncodedImage, ImagePolicy, encode_pixels, user_message
from harness.client.slots import Priority
from harness.records import redact
from harness.client.replies import QUOTE_MAX, Reading, VerdictError, VerdictKind, quote, read_verdict
from harness.core.secret_text import without_secrets_of
from harness.core.usage import Meter
from judges.draw import DRAW_VERSION, annotate_pixels, image_size
from judges.prompts import Prompt, load_prompt
from judges.verdict_kinds import CRATE_S_STEP as CRATE_S_STEP_REPLY
from judges.verdict_kinds import CRATE_STEP as CRATE_STEP_REPLY
from judges.verdict_kinds import categories_text


class JudgeCallError(RuntimeError):
    """A judge call that failed for good: the model or server failed after retries, timed out, or
    replied with no verdict. ``reply`` quotes the last reply (capped, secrets redacted) when the
    reading refused it, ``replies`` every reply of the call so quoted (the first ask's and the
    re-ask's)."""

    def __init__(self, message: str, kind: str = "error", reply: str | None = None,
                 replies: tuple[str, ...] = ()):
        super().__init__(message)
        self.kind = kind
        self.reply = reply
        self.replies = replies


# --- accounting ------------------------------------------------------------------------------------
class CallLog:
    """Calls, cache hits, failures, tokens and model seconds per kind of call (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.cached: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.reasked = 0
        self.rejected_cached = 0  # cache entries that failed validation and were asked again
        self.tokens = {"prompt": 0, "completion": 0, "total": 0}
        self.model_s: dict[str, float] = {}

    def record(self, kind: str, res: ChatResult) -> None:
        with self._lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1
            self.tokens["prompt"] += res.usage.get("prompt_tokens", 0)
            self.tokens["completion"] += res.usage.get("completion_tokens", 0)
            self.tokens["total"] += res.usage.get("total_tokens", 0)
            self.model_s[kind] = self.model_s.get(kind, 0.0) + res.latency_s

    def count(self, table: str, kind: str) -> None:
        with self._lock:
            d = getattr(self, table)
            d[kind] = d.get(kind, 0) + 1

    def reask(self) -> None:
        with self._lock:
            self.reasked += 1

    def reject_cached(self) -> None:
        with self._lock:
            self.rejected_cached += 1

    def merge(self, other: "CallLog") -> None:
        with self._lock:
            for table in ("calls", "cached", "failed"):
                mine = getattr(self, table)
                for k, v in getattr(other, table).items():
                    mine[k] = mine.get(k, 0) + v
            for k, v in other.tokens.items():
                self.tokens[k] += v
            for k, v in other.model_s.items():
                self.model_s[k] = self.model_s.get(k, 0.0) + v
            self.reasked += other.reasked
            self.rejected_cached += other.rejected_cached

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            out = {"calls": dict(self.calls), "total_calls": sum(self.calls.values()), "cached": dict(self.cached),
                   "failed": dict(self.failed), "reasked_unparseable": self.reasked, "tokens": dict(self.tokens),
                   "model_s": {k: round(v, 4) for k, v in self.model_s.items()}}
            if self.rejected_cached:
                out["rejected_cache_entries"] = self.rejected_cached
            return out


@dataclass(frozen=True)
class Asker:
    """Who a judge call is for: its place in the endpoint's queue and the meter its usage goes to
    (as ``role``). Judges take it from the episode: live evidence, or offline judging."""

    priority: int = Priority.LIVE
    meter: Meter | None = None
    role: str = "judge"

    @staticmethod
    def for_episode(ctx: Any, role: str, priority: int | None = None) -> "Asker":
        live = getattr(ctx, "live", True)
        return Asker(priority if priority is not None else (Priority.LIVE if live else Priority.OFFLINE),
                     getattr(ctx, "meter", None), role)


@dataclass(frozen=True)
class Answer:
    """A judge call's verdict: the tidy value, the reply it was read from, and the reading;
    ``refused``: the replies asked about before it that were no verdict (quoted, redacted)."""

    value: dict[str, Any]
    reply: str
    reading: Reading
    truncated: bool = False
    refused: tuple[str, ...] = ()


def read_answer(text: str, verdict: VerdictKind, prompt: Prompt, truncated: bool = False,
                asked: dict[str, Any] | None = None) -> Reading:
    """A reply to ``prompt`` read by the one rule (the verdict grammar); ``asked``: what the
    question was about, for the kind's check (the run's steps, a segment). The prompts show no
    example object (tests/judges holds them to it), so none is left out: an echo is read as
    strictly as any reply."""
    return read_verdict(text, verdict, truncated, asked)


def quoted_reply(text: str | None, limit: int = QUOTE_MAX) -> str:
    """A reply as records quote it: anything that looks like a secret redacted, then capped (in
    that order: a cut through a key would leave its start, too short for the rule to see)."""
    return quote(redact(text or ""), limit)


def reading_problem(e: Exception, text: str) -> str:
    """Why a reply could not be read, with its beginning: the reading's message quotes pieces of
    the reply cut where the reader cut them, so every secret of the whole reply is taken out of
    it, whole or cut (harness.core.secret_text.without_secrets_of)."""
    return redact(without_secrets_of(text, f"{e} (reply began: {quoted_reply(text, 160)!r})"))


def ask_json(client: ModelClient, prompt: Prompt, values: dict[str, Any], images: list[EncodedImage] = (), *,
             verdict: VerdictKind, parse_retries: int = 1, log: CallLog | None = None, kind: str = "call",
             asker: Asker = Asker(), asked: dict[str, Any] | None = None) -> Answer:
    """One judge call: render the prompt, send it with the images and the verdict's strict schema
    (the client uses structured output where the endpoint can do it), and read the reply by the
    one rule (:func:`harness.client.replies.read_verdict`; ``asked`` is what the question was about).

    A reply that is not exactly a verdict is asked again up to ``parse_retries`` times, the
    system text ending with the prompt's ``reask`` line (the same question otherwise, so a step's
    "Proposed action:" line is unchanged); a reply that still is not one is a
    :class:`JudgeCallError` whose kind is the grammar's (``not_one_object``, ``keys``, ``types``,
    ``disagree``, ``truncated``, ``empty``), quoting every reply. Never a guess: an answer asked
    again is read as strictly as the first. Transport failures are retried by the client itself;
    its final :class:`ModelError` becomes a :class:`JudgeCallError`."""
    system, user = prompt.render(**values)
    messages = [{"role": "system", "content": system}, user_message(user, list(images))]
    last_problem, last_text, last_kind, truncated = "", "", "", False
    replies: list[str] = []
    for attempt in range(parse_retries + 1):
        if attempt:
            if log:
                log.reask()
            system, user = prompt.render_reask(**values)
            messages = [{"role": "system", "content": system}, user_message(user, list(images))]
        try:
            res = client.chat(messages, json_schema=verdict.schema, priority=asker.priority, meter=asker.meter,
                              role=asker.role)
        except ModelError as e:
            if log:
                log.count("failed", kind)
            raise JudgeCallError(f"{kind} call failed: {e}", kind=e.kind) from None
        if log:
            log.record(kind, res)
        try:
            reading = read_answer(res.text, verdict, prompt, res.truncated, asked)
            return Answer(reading.value, res.text, reading, res.truncated, tuple(replies))
        except VerdictError as e:
            last_text, last_kind, truncated = res.text, e.kind, res.truncated
            replies.append(quoted_reply(res.text))
            last_problem = reading_problem(e, res.text)
    if log:
        log.count("failed", kind)
    hint = (f"; the reply was cut off at max_tokens={client.config.max_tokens} (finish_reason length): raise "
            "--judge-max-tokens" if truncated else "")
    raise JudgeCallError(f"{kind} call: no verdict after {parse_retries + 1} "
                         f"{'try' if parse_retries == 0 else 'tries'}: {last_problem}{hint}",
                         kind=last_kind, reply=quoted_reply(last_text), replies=tuple(replies))


# --- what a step call asks ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StepKind:
    """One kind of step-level question: its prompt, the verdict it asks for, the prompt's values."""

    prompt_name: str
    verdict: VerdictKind
    extra_values: Callable[[], dict[str, str]] = dict


CRATE_STEP = StepKind("crate_step", CRATE_STEP_REPLY)
CRATE_S_STEP = StepKind("crate_s_step", CRATE_S_STEP_REPLY, lambda: {"categories": categories_text()})


def action_text(action: Action) -> str:
    """The action as the step prompt shows it, e.g. ``click(x=841, y=1410)``."""
    return action.describe()


# the parts of a model config that shape its answer (timeouts, retries, concurrency and the key's
# variable do not)
_ANSWER_FIELDS = ("base_url", "model", "temperature", "top_p", "seed", "max_tokens", "structured", "extra_body")


def answer_settings(config: ModelConfig) -> dict[str, Any]:
    """Endpoint, model and sampling settings of a config: what a cached answer must have been asked with."""
    return {k: getattr(config, k, None) for k in _ANSWER_FIELDS}


def evidence_key(model: ModelConfig | dict[str, Any], prompt: Prompt, image: bytes, action: str, instruction: str,
                 extra: dict[str, Any] | None = None) -> str:
    """The cache key of one step question: the endpoint, model and sampling settings (a config, or
    its :func:`answer_settings`), the prompt's identity, the step's inputs and ``extra`` (drawing
    version, image policy, screen size)."""
    settings = answer_settings(model) if isinstance(model, ModelConfig) else dict(model)
    head = json.dumps({"endpoint": settings, "prompt": prompt.id, "action": action, "instruction": instruction,
                       "extra": extra or {}}, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")
    h = hashlib.sha256(head)
    h.update(b"\0")
    h.update(image)
    return h.hexdigest()


# --- caches ----------------------------------------------------------------------------------------
class MemoryCache:
    """A bounded in-memory cache with in-flight de-duplication: a second request for a key that is
    being computed waits for the first instead of calling the model again."""

    def __init__(self, max_entries: int = 4096):
        self.max_entries = max_entries
        self._data: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._inflight: dict[str, Future] = {}
        self.lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self.lock:
            v = self._data.get(key)
            if v is not None:
                self._data.move_to_end(key)
            return v

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self.lock:
            self._put(key, value)

    def _put(self, key: str, value: dict[str, Any]) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


class StepEvidenceCache:
    """Step evidence on disk: a JSONL file of ``{"key": ..., "value": {...}}`` lines.

    Safe across processes and resumes: each entry is appended with a single ``write`` on an
    ``O_APPEND`` descriptor, readers keep only complete, parseable lines (a line torn by a crash is
    skipped, and the next append starts on a fresh line), and a miss re-reads whatever other
    processes (or this one) appended since. The newest entry for a key wins: an entry that failed
    validation (:meth:`EvidenceStore.fetch`) is replaced by appending the one asked again.

    In memory it keeps where each key's line is (offset and length), not the values: a judging pass
    over thousands of episodes reads each entry back from the file when asked for it, so its memory
    does not grow with the cache. Entries are not fsynced unless asked (``fsync``): it is a cache,
    and an entry a power cut loses is asked of the model again."""

    def __init__(self, path: str | os.PathLike[str], fsync: bool = False):
        self.path = Path(path)
        self.fsync = fsync
        self._where: dict[str, tuple[int, int]] = {}
        self._offset = 0
        self._lock = threading.Lock()
        self._fd: int | None = None  # read and append, kept open
        self.skipped_lines = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._refresh()

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def _refresh(self) -> None:
        """Index the complete lines appended since the last look."""
        fd = self._file()
        size = os.fstat(fd).st_size
        if size <= self._offset:
            return
        chunk = os.pread(fd, size - self._offset, self._offset)
        end = chunk.rfind(b"\n")
        if end < 0:
            return
        pos = 0
        while pos <= end:
            nl = chunk.index(b"\n", pos)
            line = chunk[pos:nl]
            if line.strip():
                try:
                    entry = json.loads(line)
                    key, value = entry["key"], entry["value"]
                    if not isinstance(key, str) or not isinstance(value, dict):
                        raise ValueError
                except (ValueError, KeyError, TypeError):
                    self.skipped_lines += 1
                else:
                    self._where[key] = (self._offset + pos, nl - pos)
            pos = nl + 1
        self._offset += end + 1

    def _read(self, where: tuple[int, int]) -> dict[str, Any] | None:
        offset, length = where
        try:
            return json.loads(os.pread(self._file(), length, offset))["value"]
        except (OSError, ValueError, KeyError, TypeError):  # the file was replaced or cut under us
            return None

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            where = self._where.get(key)
            if where is None:
                self._refresh()
                where = self._where.get(key)
            return self._read(where) if where is not None else None

    def put(self, key: str, value: dict[str, Any], replace: bool = False) -> None:
        """Append an entry; one for a key already there is appended only with ``replace`` (it then
        wins over the old one)."""
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        with self._lock:
            if key in self._where and not replace:
                return
            fd = self._file()
            size = os.fstat(fd).st_size
            # a crash may have left a torn last line: never glue onto it
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
            if replace:  # index it now (where it landed among other writers' lines), so it wins at once
                self._refresh()

    def __len__(self) -> int:
        with self._lock:
            self._refresh()
            return len(self._where)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:
        fd, self._fd = getattr(self, "_fd", None), None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class EvidenceStore:
    """Memory first, then disk, then the model; concurrent requests for one key make one call.

    A disk entry is used only if ``validate`` (given to :meth:`fetch`) accepts it: it is read again
    exactly as a fresh reply is. One it refuses is counted in ``rejected`` and asked again, and the
    new entry replaces it on disk."""

    def __init__(self, memory: MemoryCache | None = None, disk: StepEvidenceCache | None = None):
        self.memory = memory if memory is not None else MemoryCache()
        self.disk = disk
        self.rejected = 0

    def fetch(self, key: str, compute: Callable[[], dict[str, Any]],
              validate: Callable[[dict[str, Any]], bool] | None = None) -> tuple[dict[str, Any], bool]:
        """(value, came from a cache)."""
        mem = self.memory
        with mem.lock:
            v = mem._data.get(key)
            if v is not None:
                return v, True
            fut = mem._inflight.get(key)
            owner = fut is None
            if owner:
                fut = mem._inflight[key] = Future()
        if not owner:
            return fut.result(), True  # re-raises the first caller's failure
        try:
            v = self.disk.get(key) if self.disk is not None else None
            stale = False
            if v is not None and validate is not None and not validate(v):
                v, stale = None, True
                with mem.lock:
                    self.rejected += 1
            hit = v is not None
            if v is None:
                v = compute()
                if self.disk is not None:
                    self.disk.put(key, v, replace=stale)
            mem.put(key, v)
            fut.set_result(v)
            return v, hit
        except BaseException as e:
            fut.set_exception(e)
            raise
        finally:
            with mem.lock:
                mem._inflight.pop(key, None)


_shared: dict[str, MemoryCache] = {}
_shared_lock = threading.Lock()


def shared_memory(client: ModelClient) -> MemoryCache:
    """The process-wide memory cache of one endpoint and model (monitors and judges share it)."""
    ns = f"{client.config.base_url}|{client.config.model}"
    with _shared_lock:
        m = _shared.get(ns)
        if m is None:
            m = _shared[ns] = MemoryCache()
        return m


_disk: dict[str, StepEvidenceCache] = {}


def disk_cache(path: str | None) -> StepEvidenceCache | None:
    """One :class:`StepEvidenceCache` object per file in this process (None for no path)."""
    if not path:
        return None
    real = str(Path(path).resolve())
    with _shared_lock:
        c = _disk.get(real)
        if c is None:
            c = _disk[real] = StepEvidenceCache(real)
        return c


_encoded: OrderedDict[tuple[Any, ...], EncodedImage] = OrderedDict()
_encoded_lock = threading.Lock()


def encode_screen(png: bytes, policy: ImagePolicy, action: Action | None = None,
                  screen_size: tuple[int, int] | None = None, draw: bool = True) -> EncodedImage:
    """A screenshot ready for a judge request: scaled down to the policy's caps (fast: drawn on
    after shrinking, see :func:`judges.draw.annotate_pixels`), with ``action`` drawn if given. The last
    few are kept: a monitor, CRATE and CRATE-S send the same drawn step image."""
    if action is not None and not draw:
        action = None
    key = (hashlib.blake2b(png, digest_size=16).hexdigest(), action.describe() if action is not None else None,
           screen_size, policy)
    with _encoded_lock:
        hit = _encoded.get(key)
        if hit is not None:
            _encoded.move_to_end(key)
            return hit
    # encoded from the drawn pixels and kept only here: a drawn step image is no other caller's, so
    # it does not go into the process-wide encode cache (offline it would fill it with every step
    # of the pass, and the pass's memory would grow with the number of episodes)
    drawn = annotate_pixels(png, action, screen_size, policy.max_long_side, policy.max_pixels,
                            getattr(policy, "resample", "bilinear"))
    enc = encode_pixels(drawn, policy)
    with _encoded_lock:
        _encoded[key] = enc
        while len(_encoded) > 64:
            _encoded.popitem(last=False)
    return enc


# --- the step call ---------------------------------------------------------------------------------
@dataclass
class StepCall:
    """How to make step calls: the client, the question, language, image handling, cache."""

    client: ModelClient
    kind: StepKind
    language: str
    store: EvidenceStore | None = None
    image_policy: ImagePolicy = ImagePolicy()
    draw: bool = True
    parse_retries: int = 1
    log: CallLog | None = None
    asker: Asker = Asker()

    @property
    def prompt(self) -> Prompt:
        return load_prompt(self.kind.prompt_name, self.language)


def step_key(call: StepCall, screenshot: bytes, atext: str, instruction: str,
             screen_size: tuple[int, int] | None) -> str:
    """The cache key of one step question asked through ``call`` (see :func:`evidence_key`)."""
    return evidence_key(call.client.config, call.prompt, screenshot, atext, instruction,
                        {"draw": DRAW_VERSION if call.draw else None, "image": call.image_policy.to_json(),
                         "screen": list(screen_size) if screen_size else None})


def entry_is_valid(call: StepCall, value: Any) -> bool:
    """Whether a cached step entry holds what a fresh reply would give: it must keep the reply it
    was read from, for the current prompt, and that reply, read again by the one rule, must give
    exactly the evidence stored beside it (a hand-edited or older entry is asked again)."""
    prompt = call.prompt
    try:
        if value.get("prompt") != prompt.id or not isinstance(value.get("reply"), str):
            return False
        reading = read_answer(value["reply"], call.kind.verdict, prompt, bool(value.get("truncated")))
        return reading.value == value.get("evidence")
    except (VerdictError, AttributeError, TypeError, ValueError):
        return False


def step_evidence(call: StepCall, screenshot: bytes, action: Action, instruction: str,
                  screen_size: tuple[int, int] | None = None) -> dict[str, Any]:
    """Judge one step. Returns ``{"evidence": {...}, "cached": bool, "latency_s": ..., "usage":
    {...}, "prompt": id, "key": ..., "reply": text}``; raises :class:`JudgeCallError` when the
    model cannot give an answer."""
    prompt = call.prompt
    atext = action_text(action)
    key = step_key(call, screenshot, atext, instruction, screen_size)
    t0 = time.monotonic()

    def compute() -> dict[str, Any]:
        size = screen_size if screen_size and all(screen_size) else image_size(screenshot)
        enc = encode_screen(screenshot, call.image_policy, action, size, call.draw)
        local = CallLog()
        try:
            ans = ask_json(call.client, prompt, {"instruction": instruction, "action": atext,
                                                 "screen": f"{size[0]}x{size[1]}", **call.kind.extra_values()},
                           [enc], verdict=call.kind.verdict, parse_retries=call.parse_retries, log=local, kind="step",
                           asker=call.asker)
        finally:
            if call.log is not None:
                call.log.merge(local)
        info = local.to_json()
        out = {"evidence": ans.value, "reply": ans.reply, "model": call.client.config.model, "prompt": prompt.id,
               "usage": info["tokens"], "calls": info["total_calls"], "model_s": info["model_s"].get("step", 0.0)}
        if ans.truncated:
            out["truncated"] = True
        if ans.refused:  # asked again: the replies before the verdict were none (kept for the record)
            out["refused_replies"] = list(ans.refused)
        return out

    if call.store is not None:
        before = call.store.rejected
        value, cached = call.store.fetch(key, compute, lambda v: entry_is_valid(call, v))
        if call.log is not None and call.store.rejected != before:
            call.log.reject_cached()
    else:
        value, cached = compute(), False
    if cached and call.log is not None:
        call.log.count("cached", "step")
    return {"evidence": dict(value["evidence"]), "cached": cached, "latency_s": round(time.monotonic() - t0, 4),
            "usage": {} if cached else value.get("usage", {}), "prompt": value.get("prompt", prompt.id), "key": key,
            "reply": value.get("reply"), "refused_replies": value.get("refused_replies")}
