"""The step-level judge call, reusable by every judge, the live monitor and the offline
``harness judge`` command: one pre-action screenshot with the action drawn on it, the action as
text, and the instruction, in; a small JSON object out (CRATE's visual clues and inferred effect,
or CRATE-S's risk finding; seed 001 section 3.1.1, FIELD_NOTES section 2).

Also here, because every judge needs them:

- :func:`ask_json`: one model call whose reply must be a JSON object with given keys; an
  unparseable reply is asked again (``parse_retries``), and what still fails after the model
  client's own retries raises :class:`JudgeCallError` with the reason. Judges turn that into the
  verdict ``judge_error``; nothing here ever guesses a verdict.
- :class:`CallLog`: calls, tokens and model latency per kind of call, thread-safe.
- Caches of step evidence. The key is the sha256 of (model, prompt identity, image bytes, action
  text, instruction, drawing version, image policy), so identical steps are judged once:
  :class:`MemoryCache` (process-wide per endpoint, with in-flight de-duplication, so the CRATE-S
  monitor and the CRATE-S judge share one call per step) and :class:`StepEvidenceCache`, a JSONL
  file (one line per entry, appended with one ``write``; torn lines from a crash are skipped)
  that several processes and resumed runs can share.
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

from harness.actions import Action
from harness.model import (ChatResult, EncodedImage, ImagePolicy, ModelClient, ModelError, Priority, ReplyError,
                           encode_pixels, parse_json_reply, user_message)
from harness.usage import Meter
from harness.tasks import RISK_CATEGORIES
from judges.draw import DRAW_VERSION, annotate_pixels, image_size
from judges.prompts import Prompt, load_prompt


class JudgeCallError(RuntimeError):
    """A judge call that failed for good: the model or server failed after retries, timed out, or
    kept replying with something that is not the JSON asked for."""

    def __init__(self, message: str, kind: str = "error"):
        super().__init__(message)
        self.kind = kind


# --- reply normalisation ---------------------------------------------------------------------------
_TRUE = {"true", "yes", "1", "y", "是", "对", "成功", "unsafe", "risky"}
_FALSE = {"false", "no", "0", "n", "否", "不是", "失败", "safe", "none", "null"}


def as_bool(v: Any, field: str) -> bool:
    """A model's yes/no: JSON booleans, 0/1 and the obvious words; anything else is refused."""
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE:
        return True
    if isinstance(v, str) and v.strip().lower() in _FALSE:
        return False
    raise ValueError(f"{field}: expected true or false, got {v!r}")


def as_text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v.strip()
    return json.dumps(v, ensure_ascii=False)


_CATEGORY_KEYS = {"".join(ch for ch in c.lower() if ch.isalnum()): c for c in RISK_CATEGORIES}
_CATEGORY_ZH = {"过度自动化": "Over-Automation", "隐私": "Privacy Violations", "法律": "Legal/Compliance",
                "合规": "Legal/Compliance", "破坏": "Destructive Actions", "恶意": "Malicious Use",
                "有害": "Harmful Content", "注入": "Prompt Injection", "资源": "Resource Abuse",
                "界面干扰": "UI Interference", "安全规避": "Security Evasion", "绕过": "Security Evasion"}


def canonical_category(v: Any) -> str | None:
    """A MobileRisk category name from a model's spelling of it (case, spaces, punctuation and a
    few Chinese names tolerated); an unknown name is kept as given; empty means None."""
    if v is None:
        return None
    s = as_text(v)
    if not s or s.lower() in ("null", "none", "n/a", "无"):
        return None
    key = "".join(ch for ch in s.lower() if ch.isalnum())
    if key in _CATEGORY_KEYS:
        return _CATEGORY_KEYS[key]
    for k, c in _CATEGORY_KEYS.items():
        if k and (k in key or key in k) and len(key) >= 4:
            return c
    for zh, c in _CATEGORY_ZH.items():
        if zh in s:
            return c
    return s


def categories_text() -> str:
    return "\n".join(f"- {c}" for c in RISK_CATEGORIES)


def as_score(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if f != f:  # NaN
        return None
    if f > 1.0 and f <= 100.0:  # a percentage
        f /= 100.0
    return min(1.0, max(0.0, f))


# --- accounting ------------------------------------------------------------------------------------
class CallLog:
    """Calls, cache hits, failures, tokens and model seconds per kind of call (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.cached: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self.reasked = 0
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

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"calls": dict(self.calls), "total_calls": sum(self.calls.values()), "cached": dict(self.cached),
                    "failed": dict(self.failed), "reasked_unparseable": self.reasked, "tokens": dict(self.tokens),
                    "model_s": {k: round(v, 4) for k, v in self.model_s.items()}}


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


def ask_json(client: ModelClient, prompt: Prompt, values: dict[str, Any], images: list[EncodedImage] = (), *,
             required: tuple[str, ...], schema: dict[str, Any] | None = None,
             validate: Callable[[dict[str, Any]], dict[str, Any]] | None = None, parse_retries: int = 1,
             log: CallLog | None = None, kind: str = "call", asker: Asker = Asker()) -> dict[str, Any]:
    """One judge call: render the prompt, send it with the images, return the validated JSON object.

    A reply that holds no object with the ``required`` keys, or that ``validate`` refuses, is asked
    again up to ``parse_retries`` times; then :class:`JudgeCallError`. A reply cut off at
    ``max_tokens`` is not asked again unchanged: it is a :class:`JudgeCallError` (kind ``truncated``). Transport failures are
    retried by the client itself; its final :class:`ModelError` becomes a :class:`JudgeCallError`.
    """
    system, user = prompt.render(**values)
    messages = [{"role": "system", "content": system}, user_message(user, list(images))]
    last_problem = ""
    for attempt in range(parse_retries + 1):
        if attempt:
            if log:
                log.reask()
        try:
            res = client.chat(messages, json_schema=schema, priority=asker.priority, meter=asker.meter,
                              role=asker.role)
        except ModelError as e:
            if log:
                log.count("failed", kind)
            raise JudgeCallError(f"{kind} call failed: {e}", kind=e.kind) from None
        if log:
            log.record(kind, res)
        try:
            obj = parse_json_reply(res.text, required=required)
            return validate(obj) if validate else obj
        except (ReplyError, ValueError, TypeError) as e:
            snippet = " ".join((res.text or "").split())[:160]
            last_problem = f"{e} (reply began: {snippet!r})"
            if res.truncated:  # the same request would be cut off at the same place again
                if log:
                    log.count("failed", kind)
                raise JudgeCallError(f"{kind} call: the reply was cut off at max_tokens={client.config.max_tokens} "
                                     f"(finish_reason length) before it held a usable answer; raise --judge-max-tokens: "
                                     f"{last_problem}", kind="truncated") from None
    if log:
        log.count("failed", kind)
    raise JudgeCallError(f"{kind} call: unusable reply after {parse_retries + 1} tries: {last_problem}",
                         kind="unparseable")


# --- what a step call asks ---------------------------------------------------------------------------
def _schema(title: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"title": title, "type": "object", "properties": props, "required": required}


def _crate_norm(obj: dict[str, Any]) -> dict[str, Any]:
    return {"clues": as_text(obj["clues"]), "effect": as_text(obj["effect"])}


def _risk_norm(obj: dict[str, Any]) -> dict[str, Any]:
    risky = as_bool(obj["risky"], "risky")
    cat = canonical_category(obj.get("category"))
    out = {"risky": risky, "category": cat if risky else None, "reason": as_text(obj.get("reason")),
           "score": as_score(obj.get("score"))}
    if risky and cat is not None and cat not in RISK_CATEGORIES:
        out["category_unknown"] = True
    return out


@dataclass(frozen=True)
class StepKind:
    """One kind of step-level question: its prompt, the keys its reply needs, how to tidy the reply."""

    prompt_name: str
    required: tuple[str, ...]
    schema: dict[str, Any]
    normalise: Callable[[dict[str, Any]], dict[str, Any]]
    extra_values: Callable[[], dict[str, str]] = dict


CRATE_STEP = StepKind("crate_step", ("clues", "effect"),
                      _schema("crate_step", {"clues": {"type": "string"}, "effect": {"type": "string"}},
                              ["clues", "effect"]), _crate_norm)
CRATE_S_STEP = StepKind("crate_s_step", ("risky", "reason"),
                        _schema("crate_s_step", {"reason": {"type": "string"},  # reasoning before the verdict
                                                 "category": {"type": ["string", "null"]},
                                                 "risky": {"type": "boolean"},
                                                 "score": {"type": "number"}}, ["reason", "category", "risky"]),
                        _risk_norm, lambda: {"categories": categories_text()})


def action_text(action: Action) -> str:
    """The action as the step prompt shows it, e.g. ``click(x=841, y=1410)``."""
    return action.describe()


def evidence_key(model: str, prompt: Prompt, image: bytes, action: str, instruction: str,
                 extra: dict[str, Any] | None = None) -> str:
    head = json.dumps({"model": model, "prompt": prompt.id, "action": action, "instruction": instruction,
                       "extra": extra or {}}, sort_keys=True, ensure_ascii=False).encode("utf-8")
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
    processes (or this one) appended since. The first entry for a key wins.

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
                    self._where.setdefault(key, (self._offset + pos, nl - pos))
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

    def put(self, key: str, value: dict[str, Any]) -> None:
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        with self._lock:
            if key in self._where:
                return
            fd = self._file()
            size = os.fstat(fd).st_size
            # a crash may have left a torn last line: never glue onto it
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
            # indexed by the next refresh (which finds where the line landed among other writers')

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
    """Memory first, then disk, then the model; concurrent requests for one key make one call."""

    def __init__(self, memory: MemoryCache | None = None, disk: StepEvidenceCache | None = None):
        self.memory = memory if memory is not None else MemoryCache()
        self.disk = disk

    def fetch(self, key: str, compute: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
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
            hit = v is not None
            if v is None:
                v = compute()
                if self.disk is not None:
                    self.disk.put(key, v)
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


def step_evidence(call: StepCall, screenshot: bytes, action: Action, instruction: str,
                  screen_size: tuple[int, int] | None = None) -> dict[str, Any]:
    """Judge one step. Returns ``{"evidence": {...}, "cached": bool, "latency_s": ..., "usage":
    {...}, "prompt": id}``; raises :class:`JudgeCallError` when the model cannot give an answer."""
    prompt = call.prompt
    atext = action_text(action)
    key = evidence_key(call.client.config.model, prompt, screenshot, atext, instruction,
                       {"draw": DRAW_VERSION if call.draw else None, "image": call.image_policy.to_json()})
    t0 = time.monotonic()

    def compute() -> dict[str, Any]:
        size = screen_size if screen_size and all(screen_size) else image_size(screenshot)
        enc = encode_screen(screenshot, call.image_policy, action, size, call.draw)
        local = CallLog()
        try:
            obj = ask_json(call.client, prompt, {"instruction": instruction, "action": atext,
                                                 "screen": f"{size[0]}x{size[1]}", **call.kind.extra_values()},
                           [enc], required=call.kind.required, schema=call.kind.schema,
                           validate=call.kind.normalise, parse_retries=call.parse_retries, log=local, kind="step",
                           asker=call.asker)
        finally:
            if call.log is not None:
                call.log.merge(local)
        info = local.to_json()
        return {"evidence": obj, "model": call.client.config.model, "prompt": prompt.id,
                "usage": info["tokens"], "calls": info["total_calls"], "model_s": info["model_s"].get("step", 0.0)}

    if call.store is not None:
        value, cached = call.store.fetch(key, compute)
    else:
        value, cached = compute(), False
    if cached and call.log is not None:
        call.log.count("cached", "step")
    return {"evidence": dict(value["evidence"]), "cached": cached, "latency_s": round(time.monotonic() - t0, 4),
            "usage": {} if cached else value.get("usage", {}), "prompt": value.get("prompt", prompt.id), "key": key}
