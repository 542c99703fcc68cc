"""One client for every model call, agents' and judges' alike: OpenAI-compatible chat completions
(vLLM, SGLang, OpenAI, DashScope) through the ``openai`` package.

- Keys go only where they belong (:func:`key_for`): the variable named by ``api_key_env`` when
  one is named, else ``OPENAI_API_KEY`` for api.openai.com and ``DASHSCOPE_API_KEY`` for DashScope's
  hosts only (over https); any other endpoint gets no Authorization header at all. A key is never
  stored in a config's spec, a record, a log line or an exception message.
- Screenshots are encoded once per step under an explicit, recorded :class:`ImagePolicy`.
- Calls to one endpoint share a bounded number of slots (the largest ``concurrency`` any client of
  it asks for) across threads, served in priority order: a gate check before an agent call before
  live step evidence before offline judging; the background classes leave a reserve of slots free
  for the first two, so a gate check never queues behind evidence calls (:class:`Priority`).
- Each call reports its usage to the :class:`harness.usage.Meter` its caller passes in.
- Every attempt has a deadline for the whole of it, ``timeout_s``: connecting, waiting for the
  headers and reading the whole body together (not httpx's timer per read, which a server sending
  a byte every few seconds never trips; :mod:`harness.model_transport`). The call, retries and
  their waits included, ends by ``deadline_s`` when one is set (else attempts and waits bound it:
  :attr:`ModelConfig.longest_call_s`) and by any deadline its caller set for the thread (a monitor's ``timeout_s``:
  :func:`harness.model_transport.deadline`). Waiting for an endpoint slot counts too.
- A reply body over ``max_reply_bytes`` is cut there (its connection closed, never read to the
  end) and marked ``truncated`` (``truncated_by: max_reply_bytes``); a cut reply to a call that asked
  for a JSON schema (a verdict) is a :class:`ModelError` (kind ``too_large``), never read.
- 408, 429, 5xx, timeouts and refused connections are retried with exponential backoff, honouring
  ``Retry-After`` (seconds or an HTTP date) up to ``max_wait_s``; a longer wait is a
  :class:`ModelError` that says so. After the last try a :class:`ModelError` says what failed and why.
- :func:`stop_calls` (Ctrl-C) cuts every call in flight at once and fails every later one until
  :func:`allow_calls` (kind ``interrupted``): no thread stays in a model call after the run stops.
- A reply cut off at ``max_tokens`` (``finish_reason: length``) is marked ``truncated``; tool calls
  returned the OpenAI way (``message.tool_calls``) are kept beside the text.
- Servers that refuse a request for too many images or too long a context get an error naming the
  limit to raise (vLLM ``--limit-mm-per-prompt`` / ``--max-model-len``; FIELD_NOTES section 3).
- Structured output (JSON schema, or vLLM's ``guided_json``) where the server supports it: ``auto``
  asks for a JSON schema; a 400 that names response_format is remembered for that endpoint AND
  model, and the request is repeated in plain text. Each result says what was used
  (``ChatResult.structured``), and :func:`structured_report` what each endpoint and model used.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import datetime
import email.utils
import hashlib
import io
import json
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Iterator, Literal

from PIL import Image

from harness import model_transport as transport
from harness import resample
from harness.model_keys import PROVIDER_KEYS, KeyChoice, key_for, key_rule_text, provide_keys  # noqa: F401
from harness.model_slots import (SLOTS_PER_POOL, EndpointSlots, NoSlot, Priority, endpoint_slots,  # noqa: F401
                                 forget_slots, wake_every_waiter)
from harness.screenshot import encode_png_fast, image_of, png_size
from harness.secret_text import REDACTED, redact_text
from harness.usage import Meter

StructuredMode = Literal["auto", "json_schema", "guided", "none"]


class ModelError(RuntimeError):
    """A model call that failed for good (after retries), with the reason."""

    def __init__(self, message: str, *, kind: str = "error", status: int | None = None, attempts: int = 0):
        super().__init__(message)
        self.kind, self.status, self.attempts = kind, status, attempts


class ReplyError(ValueError):
    """A reply that holds no usable JSON object."""


@dataclass(frozen=True)
class ImagePolicy:
    """How a screenshot is prepared for a model. ``max_pixels`` (total) and ``max_long_side`` cap
    the size (aspect kept); ``format`` png or jpeg (with ``jpeg_quality``). A PNG is lossless at any
    ``png_level`` (the zlib level of :func:`harness.screenshot.encode_png_fast`): the level changes
    the bytes and the time, never the pixels; a PNG screenshot sent at its own size is sent as it
    is, not re-encoded."""

    max_pixels: int | None = None
    max_long_side: int | None = 1280
    format: Literal["png", "jpeg"] = "jpeg"
    jpeg_quality: int = 85
    png_level: int = 1
    resample: Literal["bicubic", "lanczos", "bilinear"] = "bicubic"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def target(self, src: tuple[int, int]) -> tuple[int, int]:
        """The size an image of ``src`` is sent at under the caps."""
        w, h = src
        scale = 1.0
        if self.max_long_side and max(w, h) > self.max_long_side:
            scale = min(scale, self.max_long_side / max(w, h))
        if self.max_pixels and w * h * scale * scale > self.max_pixels:
            scale = min(scale, (self.max_pixels / (w * h)) ** 0.5)
        return max(1, int(w * scale)), max(1, int(h * scale))


@dataclass(frozen=True)
class EncodedImage:
    data_url: str
    width: int
    height: int
    bytes: int
    format: str
    source_size: tuple[int, int]
    passthrough: bool = False          # the screenshot's own PNG bytes, not re-encoded

    def part(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.data_url}}


_RESAMPLE = {"bicubic": Image.Resampling.BICUBIC, "lanczos": Image.Resampling.LANCZOS,
             "bilinear": Image.Resampling.BILINEAR}
# encoded images by content, policy and size; least recently used first. Bounded by the bytes of
# the data URLs it holds, not by entries: a 4K PNG is ~50x a small JPEG
ENCODE_CACHE_BYTES = 64 * 1024 * 1024
CacheKey = tuple[str, ImagePolicy, "tuple[int, int] | None"]
_encode_cache: collections.OrderedDict[CacheKey, EncodedImage] = collections.OrderedDict()
_encode_cache_bytes = 0
_encode_lock = threading.Lock()
_encoding: dict[CacheKey, "concurrent.futures.Future[EncodedImage]"] = {}  # being encoded now, by one thread
_prefetch_pool: concurrent.futures.ThreadPoolExecutor | None = None
# encodings started from a frame's pixels before its PNG exists (prefetch_pixels), by the image
# object: the Screenshot made of that frame carries the same object, and encode_image takes the
# result from here. The last few frames only (a candidate that changed is dropped in turn).
PIXEL_FRAMES_KEPT = 8  # several phones' candidates at once; one evicted is encoded again, as without
PixelJobs = dict[tuple[ImagePolicy, "tuple[int, int] | None"], "concurrent.futures.Future[EncodedImage]"]
_pixel_jobs: collections.OrderedDict[int, tuple[Image.Image, PixelJobs]] = collections.OrderedDict()


def _cache_put(key: CacheKey, enc: EncodedImage) -> None:
    """Keep ``enc``, evicting the least recently used until the cache fits ENCODE_CACHE_BYTES (an
    image larger than the whole budget is not kept). Caller holds ``_encode_lock``."""
    global _encode_cache_bytes
    size = len(enc.data_url)
    old = _encode_cache.pop(key, None)
    if old is not None:
        _encode_cache_bytes -= len(old.data_url)
    if size > ENCODE_CACHE_BYTES:
        return
    while _encode_cache and _encode_cache_bytes + size > ENCODE_CACHE_BYTES:
        _, dropped = _encode_cache.popitem(last=False)
        _encode_cache_bytes -= len(dropped.data_url)
    _encode_cache[key] = enc
    _encode_cache_bytes += size


def clear_encode_cache() -> None:
    global _encode_cache_bytes
    with _encode_lock:
        _encode_cache.clear()
        _pixel_jobs.clear()
        _encode_cache_bytes = 0


def encode_cache_bytes() -> int:
    """Bytes of data URLs the encode cache holds now."""
    with _encode_lock:
        return _encode_cache_bytes


def encode_pixels(img: Image.Image, policy: ImagePolicy = ImagePolicy(), size: tuple[int, int] | None = None,
                  source_size: tuple[int, int] | None = None) -> EncodedImage:
    """Encode an image for a request (not cached): resized to ``size`` or the policy's caps, then
    PNG (harness.screenshot.encode_png_fast at ``png_level``) or JPEG. The pixels a model gets do not
    depend on where ``img`` came from (a decoded PNG or a raw frame)."""
    src = img.size
    target = size if size is not None else policy.target(src)
    if target != src:
        img = resample.resize(img, target, _RESAMPLE[policy.resample])  # two threads where exact
    if policy.format == "jpeg":
        buf = io.BytesIO()
        (img if img.mode == "RGB" else img.convert("RGB")).save(buf, format="JPEG", quality=policy.jpeg_quality)
        data, mime = buf.getvalue(), "image/jpeg"
    else:
        data, mime = encode_png_fast(img, policy.png_level), "image/png"
    return EncodedImage(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", target[0], target[1],
                        len(data), policy.format, source_size or src)


def encode_image(png: bytes, policy: ImagePolicy = ImagePolicy(), size: tuple[int, int] | None = None) -> EncodedImage:
    """Encode a screenshot for a request. ``size`` forces an exact size (agents that resize with
    their own rule, e.g. UI-TARS's smart_resize); otherwise the policy's caps apply. A PNG sent as
    PNG at its own size is sent as it is (no decode, no encode). Cached by content, so a
    screenshot sent to an agent and three judges is encoded once; a second caller asking for what
    another thread is encoding (an agent's :func:`prefetch`) waits for it. The pixels come from the
    screenshot when it carries them (:class:`harness.screenshot.Screenshot`), else it is decoded."""
    key = (hashlib.blake2b(png, digest_size=16).hexdigest(), policy, size)
    with _encode_lock:
        hit = _encode_cache.get(key)
        if hit is not None:
            _encode_cache.move_to_end(key)
            return hit
        running = _encoding.get(key)
        if running is None:
            mine: concurrent.futures.Future[EncodedImage] = concurrent.futures.Future()
            _encoding[key] = mine
            from_pixels = _pixel_job(png, policy, size, take=True)
    if running is not None:
        return running.result()
    try:
        enc = None
        if from_pixels is not None:  # started from the frame's pixels (prefetch_pixels); redone here if it failed
            try:
                enc = from_pixels.result()
            except Exception:
                enc = None
        if enc is None:
            enc = _encode(png, policy, size)
    except BaseException as e:
        with _encode_lock:
            _encoding.pop(key, None)
        mine.set_exception(e)
        raise
    with _encode_lock:
        _cache_put(key, enc)
        _encoding.pop(key, None)
    mine.set_result(enc)
    return enc


def _encode(png: bytes, policy: ImagePolicy, size: tuple[int, int] | None) -> EncodedImage:
    src = png_size(png)
    if src is not None and _passthrough(src, policy, size):
        return EncodedImage(f"data:image/png;base64,{base64.b64encode(png).decode('ascii')}", src[0], src[1], len(png),
                            "png", src, passthrough=True)
    return encode_pixels(image_of(png), policy, size)


def run_in_background(fn: Any, /, *args: Any) -> "concurrent.futures.Future[Any]":
    """``fn(*args)`` on the shared image workers (two threads: Pillow and zlib release the GIL while
    they work). For agents' ``prepare``: image work done while the device is still busy."""
    global _prefetch_pool
    with _encode_lock:
        if _prefetch_pool is None:
            _prefetch_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="encode")
        pool = _prefetch_pool
    return pool.submit(fn, *args)


def prefetch(png: bytes, policy: ImagePolicy = ImagePolicy(), size: tuple[int, int] | None = None) -> None:
    """Start :func:`encode_image` of ``png`` in the background, so that the call that needs it later
    finds it in the cache or in progress (a failure surfaces in that call's own encode). Nothing to
    start when :func:`prefetch_pixels` already started it from the frame's pixels."""
    with _encode_lock:
        if _pixel_job(png, policy, size, take=False) is not None:
            return
    run_in_background(encode_image, png, policy, size).add_done_callback(lambda f: f.exception())


def _passthrough(src: tuple[int, int], policy: ImagePolicy, size: tuple[int, int] | None) -> bool:
    """The screenshot's own PNG is sent as it is (no encode)."""
    return policy.format == "png" and (size or policy.target(src)) == tuple(src)


def _pixel_job(png: bytes, policy: ImagePolicy, size: tuple[int, int] | None,
               take: bool) -> "concurrent.futures.Future[EncodedImage] | None":
    """The encoding :func:`prefetch_pixels` started from the pixels ``png`` carries, if any (removed
    when ``take``: the caller keeps its result). Caller holds ``_encode_lock``."""
    img = getattr(png, "_image", None)
    entry = _pixel_jobs.get(id(img)) if img is not None else None
    if entry is None or entry[0] is not img:
        return None
    jobs = entry[1]
    if not take:
        return jobs.get((policy, size))
    job = jobs.pop((policy, size), None)
    if not jobs:  # all taken: the frame's pixels need not be kept here
        del _pixel_jobs[id(img)]
    return job


def prefetch_pixels(img: Image.Image, policy: ImagePolicy = ImagePolicy(), size: tuple[int, int] | None = None) -> None:
    """Start encoding a frame's pixels for ``policy`` and ``size`` before the frame's PNG exists
    (harness.episode.PixelPreparingAgent): :func:`encode_image` of the Screenshot that carries
    ``img`` then takes this result (the same as encoding it then: :func:`encode_pixels` of the same
    pixels). Nothing to start when the PNG would be sent as it is."""
    if _passthrough(img.size, policy, size):
        return
    with _encode_lock:
        entry = _pixel_jobs.get(id(img))
        if entry is not None and entry[0] is img and (policy, size) in entry[1]:
            return
    job = run_in_background(encode_pixels, img, policy, size)
    job.add_done_callback(lambda f: f.exception())
    with _encode_lock:
        entry = _pixel_jobs.get(id(img))
        if entry is None or entry[0] is not img:  # a new frame (an id may be reused once its image is gone)
            entry = (img, {})
            _pixel_jobs[id(img)] = entry
            while len(_pixel_jobs) > PIXEL_FRAMES_KEPT:
                _pixel_jobs.popitem(last=False)
        entry[1].setdefault((policy, size), job)


def user_message(text: str, images: list[EncodedImage] = (), images_first: bool = True) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [i.part() for i in images]
    text_part = {"type": "text", "text": text}
    parts = [*parts, text_part] if images_first else [text_part, *parts]
    return {"role": "user", "content": parts}


# A reply body longer than this is cut (ModelConfig.max_reply_bytes; --model-max-reply-bytes,
# --judge-max-reply-bytes): 2 MiB is ~500k tokens of text, hundreds of times a reply at any
# max_tokens a run uses, yet a 50 MB reply of a model that loops is stopped at 2 MiB
MAX_REPLY_BYTES = 2 * 1024 * 1024
MIN_REPLY_BYTES = 1024  # below this even a short verdict's envelope would not fit
# what a call's attempt may read from the network besides its body: headers, chunk framing (a
# body trickled one byte per chunk carries ~6 bytes of framing a byte), an error reply's body
WIRE_BYTES_PER_BODY_BYTE = 8


@dataclass(frozen=True)
class ModelConfig:
    base_url: str
    model: str
    api_key_env: str | None = None         # None: the provider's own variable for its own hosts only (key_for)
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 1024
    seed: int | None = None
    timeout_s: float = 120.0               # one attempt, whole: connect, headers and body together
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_wait_s: float = 300.0              # longest Retry-After honoured; a longer one is a ModelError
    concurrency: int = 8
    structured: StructuredMode = "auto"
    extra_body: dict[str, Any] = field(default_factory=dict)
    deadline_s: float | None = None        # the whole call, retries and waits included; None: no bound but theirs
    max_reply_bytes: int = MAX_REPLY_BYTES  # a longer reply body is cut there (truncated_by: max_reply_bytes)

    def __post_init__(self) -> None:
        for name in ("timeout_s", "deadline_s"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and 0 < v < float("inf")):
                raise ValueError(f"{self.base_url}: {name} must be a number of seconds > 0, not {v!r}")
        if not (isinstance(self.max_reply_bytes, int) and self.max_reply_bytes >= MIN_REPLY_BYTES):
            raise ValueError(f"{self.base_url}: max_reply_bytes must be at least {MIN_REPLY_BYTES}, "
                             f"not {self.max_reply_bytes!r}")

    @property
    def longest_call_s(self) -> float:
        """The longest one call may take, retries and their waits included: ``deadline_s``, else
        every attempt's ``timeout_s`` plus the longest wait between two (``max_backoff_s``, or a
        Retry-After up to ``max_wait_s``)."""
        if self.deadline_s is not None:
            return self.deadline_s
        return (self.max_retries + 1) * self.timeout_s + self.max_retries * max(self.max_backoff_s, self.max_wait_s)

    def to_json(self) -> dict[str, Any]:
        """Everything that shapes a reply, for the manifest; the key's variable name, never the key."""
        return asdict(self)



@dataclass
class ChatResult:
    text: str
    usage: dict[str, int]
    latency_s: float
    attempts: int
    model: str
    structured: str                    # what the call used: json_schema, guided or none (plain text)
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}] (OpenAI tool_calls)
    cut_at: int | None = None          # the body passed this many bytes (max_reply_bytes) and was cut there

    @property
    def truncated(self) -> bool:
        """The reply was cut off, at max_tokens or at the byte limit: asking again unchanged would
        cut it off again."""
        return self.finish_reason == "length" or self.cut_at is not None

    @property
    def truncated_by(self) -> str | None:
        """What cut the reply: ``max_reply_bytes`` (the client, at its byte limit), ``max_tokens``
        (the server), or None."""
        return "max_reply_bytes" if self.cut_at is not None else "max_tokens" if self.finish_reason == "length" else None

    def to_json(self) -> dict[str, Any]:
        out = {"usage": self.usage, "latency_s": round(self.latency_s, 4), "attempts": self.attempts,
               "model": self.model, "structured": self.structured, "finish_reason": self.finish_reason}
        if self.truncated:
            out["truncated"] = True
            out["truncated_by"] = self.truncated_by
        if self.cut_at is not None:
            out["reply_limit_bytes"] = self.cut_at
        if self.tool_calls:
            out["tool_calls"] = len(self.tool_calls)
        return out


# what each endpoint AND model did with structured output: (base_url, model) -> the mode refused
# and why (a 400 naming response_format), and the modes its calls used, counted
_refused: dict[tuple[str, str], dict[str, str]] = {}
_modes_used: dict[tuple[str, str], dict[str, int]] = {}
_structured_lock = threading.Lock()
_stopped: list[str | None] = [None]  # why every call fails now (stop_calls), or None


def forget_endpoint(base_url: str) -> None:
    """Forget what this process learned about ``base_url``: its slots (the largest ``concurrency``
    asked for so far) and which of its models refused structured output (and the modes they used).
    For a server replaced at the same address: a local port is given out again soon after it is
    closed (137 of 2,000 successive binds to port 0 here reused one), and a later server there is
    not the earlier one. Calls in flight keep the slots they hold; later calls get fresh ones."""
    forget_slots(base_url)
    with _structured_lock:
        for table in (_refused, _modes_used):
            for key in [k for k in table if k[0] == base_url]:
                del table[key]


def structured_report(since: dict[tuple[str, str], dict[str, int]] | None = None) -> list[dict[str, Any]]:
    """What structured output each endpoint and model used in the calls that asked for a schema
    (``[{"base_url", "model", "used": {mode: calls}, "refused": {mode: why}}]``), for manifests;
    with ``since`` (a :func:`structured_counts` taken earlier), only the calls made after it."""
    with _structured_lock:
        keys = sorted(set(_modes_used) | set(_refused))
        out = []
        for key in keys:
            used = dict(_modes_used.get(key, {}))
            if since is not None:
                used = {m: n - since.get(key, {}).get(m, 0) for m, n in used.items()}
                used = {m: n for m, n in used.items() if n > 0}
                if not used:
                    continue
            out.append({"base_url": key[0], "model": key[1], "used": used, "refused": dict(_refused.get(key, {}))})
        return out


def structured_counts() -> dict[tuple[str, str], dict[str, int]]:
    """The modes used so far, per endpoint and model (a mark for :func:`structured_report`)."""
    with _structured_lock:
        return {k: dict(v) for k, v in _modes_used.items()}


def _used(key: tuple[str, str], mode: str) -> None:
    with _structured_lock:
        row = _modes_used.setdefault(key, {})
        row[mode] = row.get(mode, 0) + 1


def stop_calls(reason: str = "the run is stopping (Ctrl-C or SIGTERM)") -> None:
    """Cut every model call in flight (its socket shut: a thread blocked reading wakes at once),
    wake every call waiting for a slot, and fail every later call, each with a :class:`ModelError`
    of kind ``interrupted``, until :func:`allow_calls`. For Ctrl-C: no thread stays in a model call."""
    _stopped[0] = reason
    wake_every_waiter()
    transport.cut_all(reason)


PAUSE_STEP_S = 0.5  # a wait between two attempts notices a stop (stop_calls) within this long


def _pause(seconds: float) -> None:
    """Wait ``seconds`` between two attempts of a call, in steps of at most PAUSE_STEP_S, ending
    early when the calls are stopped (a Retry-After of minutes must not outlast Ctrl-C)."""
    left = seconds
    while left > 0 and not _stopped[0]:
        step = min(left, PAUSE_STEP_S)
        time.sleep(step)
        left -= step


def allow_calls() -> None:
    """Let calls go out again after :func:`stop_calls`."""
    _stopped[0] = None
    transport.allow()


@contextmanager
def calls_stopped(reason: str = "the run is stopping (Ctrl-C or SIGTERM)") -> Iterator[None]:
    """:func:`stop_calls` for the block, :func:`allow_calls` after it."""
    stop_calls(reason)
    try:
        yield
    finally:
        allow_calls()


_LIMIT_HINTS = (
    (re.compile(r"limit_mm_per_prompt|at most \d+ image|too many images|image.*limit", re.I),
     "the server refused the number of images in one request: raise vLLM's --limit-mm-per-prompt "
     "(e.g. --limit-mm-per-prompt image=16) or the provider's image limit, or send fewer images"),
    (re.compile(r"maximum context length|context length|max_model_len|too long|token limit", re.I),
     "the request is longer than the model's context: raise vLLM's --max-model-len, lower the image "
     "size (--image-max-side), or shorten the history"),
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _key_forms(key: str | None) -> tuple[str, ...]:
    """The key as text may hold it: as it is, and with ``/`` escaped the way JSON may write it."""
    if not key or len(key) < 4:  # a key this short would blank ordinary text; none is that short
        return ()
    return (key, key.replace("/", "\\/")) if "/" in key else (key,)


def _without_key(value: Any, key: str | None) -> Any:
    """``value`` with the client's own key replaced in every string in it (a server that echoes the
    caller's credential in a reply or an error). It relies on knowing the key, whatever its shape."""
    if isinstance(value, str):
        for form in _key_forms(key):
            value = value.replace(form, REDACTED)
        return value
    if isinstance(value, list):
        return [_without_key(v, key) for v in value]
    if isinstance(value, dict):
        return {k: _without_key(v, key) for k, v in value.items()}
    return value


def _scrub(text: str, key: str | None) -> str:  # the own key, then the one rule (harness.secret_text)
    return redact_text(_without_key(text, key))


def _reply_without_key(res: "ChatResult", key: str | None) -> "ChatResult":
    """``res`` with ``key`` taken out of every text it holds (all its fields, whatever they are)."""
    if not _key_forms(key):
        return res
    return replace(res, **{f.name: _without_key(getattr(res, f.name), key) for f in fields(res)})


class ModelClient:
    """Thread-safe, synchronous chat completions against one endpoint and model."""

    def __init__(self, config: ModelConfig):
        import httpx2
        import openai

        self.config = config
        self._auth = key_for(config)
        self._key = self._auth.key
        self._openai = openai
        self._httpx = httpx2
        self._pools: list[Any] = [self._new_pool()]
        self._pools_lock = threading.Lock()
        self._rng = random.Random(0)

    def _new_pool(self) -> Any:
        # the SDK needs some api_key even when none is sent: without a key every request omits the
        # Authorization header (_request), so the placeholder never leaves this process. Its HTTP
        # client connects through harness.model_transport, which keeps each attempt's deadline.
        return self._openai.OpenAI(base_url=self.config.base_url, api_key=self._key or "no-key-sent",
                                   timeout=self.config.timeout_s, max_retries=0, http_client=transport.http_client())

    def _pool(self, slot: int) -> Any:
        """The SDK client (and so the connection pool) of endpoint slot ``slot``: one per
        ``SLOTS_PER_POOL`` slots, made when first needed. The HTTP library looks through every
        connection of its pool on each request and each response (which are idle, which expired),
        under the pool's lock, so one pool for 64 calls in flight spent ~2 x 80 connection checks per
        call; pools of 8 keep that small whatever the concurrency."""
        i = slot // SLOTS_PER_POOL
        pools = self._pools
        if i < len(pools):
            return pools[i]
        with self._pools_lock:
            while len(self._pools) <= i:
                self._pools.append(self._new_pool())
            return self._pools[i]

    def spec(self) -> dict[str, Any]:
        return self.config.to_json()

    def _request(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, mode: str,
                 slot: int = 0) -> Any:
        """POST /chat/completions through the SDK's client (its auth, retries off, timeouts and
        errors) with the body as we build it; returns the response with its headers read and its
        body not (``stream=True``, ``cast_to=httpx2.Response``), for :meth:`_chat` to read under
        its byte limit. ``chat.completions.create`` would first walk every message part against
        the SDK's parameter types (``maybe_transform``): ~40 % of a judging pass's CPU per call,
        for a body it leaves as it is (chat messages have no aliased or specially formatted
        fields); and it reads the whole body, however long. ``client.post`` is the SDK's
        documented way to send a body of one's own (openai README, "Undocumented endpoints");
        ``create`` sends the same JSON."""
        c = self.config
        body: dict[str, Any] = {"model": c.model, "messages": messages, "temperature": c.temperature,
                                "max_tokens": c.max_tokens}
        if c.top_p is not None:
            body["top_p"] = c.top_p
        if c.seed is not None:
            body["seed"] = c.seed
        if schema is not None and mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema.get("title", "reply"), "schema": schema}}
        extra = dict(c.extra_body)
        if schema is not None and mode == "guided":
            extra["guided_json"] = schema
        options: dict[str, Any] = {"security": {"bearer_auth": True}}
        if extra:
            options["extra_json"] = extra
        if self._key is None:
            options["headers"] = {"Authorization": self._openai.Omit()}
        return self._pool(slot).post("/chat/completions", body=body, options=options, cast_to=self._httpx.Response,
                                     stream=True)

    def chat(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None,
             priority: int = Priority.LIVE, meter: Meter | None = None, role: str = "model") -> ChatResult:
        """One chat completion, retried as the config says. ``priority`` orders it among the calls
        waiting for this endpoint; its usage (also a failed call's) goes to ``meter`` as ``role``."""
        if meter is not None:
            meter.enter()
        try:
            # what leaves the client never holds its own key: a server may echo the caller's
            # credential in a reply, a model name, an error body or a header quoted in an error
            res = _reply_without_key(self._chat(messages, json_schema, priority), self._key)
        except ModelError as e:
            if meter is not None:
                meter.record(role, None, failed=True)
            e.args = tuple(_scrub(a, self._key) if isinstance(a, str) else a for a in e.args)
            raise
        finally:
            if meter is not None:
                meter.leave()
        if meter is not None:
            meter.record(role, res.usage, res.latency_s, structured=res.structured if json_schema is not None else None)
        return res

    def _fail(self, what: str, kind: str, attempts: int, status: int | None = None) -> ModelError:
        c = self.config
        return ModelError(f"{c.model} at {c.base_url}: {what}", kind=kind, status=status, attempts=attempts)

    def _chat(self, messages: list[dict[str, Any]], json_schema: dict[str, Any] | None, priority: int) -> ChatResult:
        c = self.config
        key = (c.base_url, c.model)
        mode = c.structured if json_schema is not None else "none"
        if mode == "auto":
            mode = "none" if "json_schema" in _refused.get(key, {}) else "json_schema"
        attempts = 0
        last: str = ""
        status: int | None = None
        start = time.monotonic()
        end = start + c.deadline_s if c.deadline_s is not None else float("inf")
        outer = transport.outer_deadline()
        caller_deadline = outer is not None and outer < end
        if caller_deadline:
            end = outer
        budget = f"{end - start:.3g}s " + ("(the caller's deadline for this call)" if caller_deadline else
                                           "(deadline_s; --model-deadline / --judge-deadline)")
        wire_bytes = c.max_reply_bytes * WIRE_BYTES_PER_BODY_BYTE + 64 * 1024
        while True:
            if _stopped[0]:
                raise self._fail(f"not sent: {_stopped[0]}", "interrupted", attempts)
            if time.monotonic() >= end:
                raise self._fail(f"no reply within the call's deadline of {budget} after {attempts} attempt(s); "
                                 f"last error: {last or 'none'}", "timeout", attempts, status)
            attempts += 1
            retry_after: float | None = None
            att: transport.Attempt | None = None
            shortened = False  # this attempt ends at the call's deadline, before its own timeout_s
            try:
                with endpoint_slots(c.base_url, c.concurrency).slot(priority, end if end < float("inf") else None) as slot:
                    until = time.monotonic() + c.timeout_s
                    shortened = until > end
                    with transport.attempt(min(until, end), wire_bytes) as att:
                        t0 = time.monotonic()
                        resp = self._request(messages, json_schema, mode, slot)
                        body, cut = transport.read_body(resp, c.max_reply_bytes)
                        latency = time.monotonic() - t0
                return self._result(body, cut, latency, attempts, mode, json_schema is not None)
            except NoSlot as e:
                if _stopped[0]:
                    raise self._fail(f"not sent: {_stopped[0]}", "interrupted", attempts) from None
                last = str(e)
                continue  # the deadline check above says so
            except self._openai.APIStatusError as e:
                status = e.status_code
                body_text = _scrub(str(getattr(e, "message", e)), self._key)
                last = f"HTTP {status}: {body_text[:300]}"
                if status == 400 and mode in ("json_schema", "guided") and c.structured == "auto" and \
                        re.search(r"response_format|json_schema|guided", body_text, re.I):
                    with _structured_lock:  # this server cannot do it for this model: ask in plain text
                        _refused.setdefault(key, {})[mode] = last
                    mode = "none"
                    attempts -= 1
                    continue
                for pattern, hint in _LIMIT_HINTS:
                    if status in (400, 413, 422) and pattern.search(body_text):
                        raise self._fail(f"{hint} ({last})", "limit", attempts, status) from None
                if status == 401 and self._key is None:
                    raise self._fail(f"the endpoint wants an API key and none was sent ({self._auth.reason}); name the "
                                     f"variable that holds this endpoint's key with --model-api-key-env VAR (judges: "
                                     f"--judge-api-key-env VAR) ({last})", "refused", attempts, status) from None
                if status not in RETRIED_STATUS and status < 500:
                    raise self._fail(f"request refused, {last}", "refused", attempts, status) from None
                ra = e.response.headers.get("retry-after") if getattr(e, "response", None) is not None else None
                retry_after = retry_after_s(ra)
                if retry_after is not None and retry_after > c.max_wait_s:
                    raise self._fail(f"the server asks to wait {retry_after:.0f}s before retrying (Retry-After: {ra}), "
                                     f"longer than the {c.max_wait_s:g}s this client waits (max_wait_s; --model-max-wait "
                                     f"/ --judge-max-wait) ({last})", "rate_limited", attempts, status) from None
            except (self._openai.APITimeoutError, self._httpx.TimeoutException):
                last = (f"timed out: no whole reply before the call's deadline of {budget}" if shortened else
                        f"timed out after {c.timeout_s:g}s: no whole reply (connect, headers and body together) in time")
            except (self._openai.APIConnectionError, self._httpx.RequestError) as e:
                if (att is not None and att.cut is not None) or _stopped[0]:
                    raise self._fail(f"stopped mid-call: {_stopped[0] or att.cut}", "interrupted", attempts) from None
                if att is not None and att.over:
                    raise self._fail(f"the reply passed {wire_bytes} bytes on the wire (max_reply_bytes "
                                     f"{c.max_reply_bytes} with its framing): not read further", "too_large",
                                     attempts, status) from None
                last = f"connection failed: {_scrub(str(e), self._key)[:200]}"
            if _stopped[0]:
                raise self._fail(f"stopped mid-call: {_stopped[0]}", "interrupted", attempts)
            if attempts > c.max_retries:
                raise self._fail(f"failed after {attempts} attempt(s) in {time.monotonic() - start:.1f}s; last error: "
                                 f"{last}", "exhausted", attempts, status)
            # the server's Retry-After as asked (already bounded by max_wait_s), else jittered backoff;
            # a wait that would end past the call's deadline is not waited
            delay = retry_after if retry_after is not None else min(
                c.max_backoff_s, c.backoff_s * (2 ** (attempts - 1)) * (0.5 + self._rng.random()))
            if time.monotonic() + delay >= end:
                raise self._fail(f"no time left to retry within the call's deadline of {budget} after {attempts} "
                                 f"attempt(s) (the next try was due in {delay:.2g}s); last error: {last}", "timeout",
                                 attempts, status)
            _pause(delay)

    def _result(self, body: bytes, cut: bool, latency: float, attempts: int, mode: str, verdict: bool) -> ChatResult:
        """The :class:`ChatResult` of a reply body (``cut``: the first ``max_reply_bytes`` of a
        longer one)."""
        c = self.config
        if verdict:
            _used((c.base_url, c.model), mode)
        if cut:
            if verdict:  # a cut verdict may have lost what it said last: it is never read
                raise self._fail(f"the reply passed the {c.max_reply_bytes}-byte limit (max_reply_bytes; "
                                 "--model-max-reply-bytes / --judge-max-reply-bytes) and was cut there; a verdict is "
                                 "never read from a cut reply", "too_large", attempts)
            text = _LONE_SURROGATE.sub("\ufffd", transport.partial_content(body))
            return ChatResult(text, {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, latency, attempts,
                              c.model, mode, finish_reason=None, cut_at=c.max_reply_bytes)
        try:
            data = json.loads(body)
            choices = data.get("choices") or []
            choice = choices[0] if choices else {}
            message = choice.get("message") or {}
            text = _message_text(message.get("content"))
            # a JSON "\ud83d" escape (half an emoji cut by max_tokens) decodes to a lone surrogate,
            # which no str-typed action or record accepts: keep it as U+FFFD
            text = _LONE_SURROGATE.sub("\ufffd", text)
            u = data.get("usage") or {}
            usage = {k: u.get(k) if isinstance(u.get(k), int) else 0
                     for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            finish = choice.get("finish_reason")
            model = data.get("model") if isinstance(data.get("model"), str) and data.get("model") else c.model
            tool_calls = _tool_calls(message.get("tool_calls"))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError, RecursionError) as e:
            raise self._fail(f"malformed response: {type(e).__name__}: {_scrub(str(e), self._key)[:200]}",
                             "malformed", attempts) from None
        return ChatResult(text, usage, latency, attempts, model, mode,
                          finish_reason=finish if isinstance(finish, str) else None, tool_calls=tool_calls)


def _message_text(content: Any) -> str:
    """A message's text: a string, nothing, or a list of parts (``{"type": "text", "text": ...}``)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    raise TypeError(f"message content is a {type(content).__name__}")


# 408 Request Timeout and 429 Too Many Requests are worth another try, as is every 5xx (RFC 9110
# section 15.5.9: a 408 means the server closed an idle connection; the client may repeat it)
RETRIED_STATUS = frozenset({408, 429})


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks for: delay-seconds or an HTTP date (RFC 9110 section
    10.2.3); None when absent or unreadable. A date in the past is 0."""
    if value is None:
        return None
    v = value.strip()
    try:
        secs = float(v)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(v)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            when = when.replace(tzinfo=datetime.timezone.utc)
        secs = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, secs)
    if not 0 <= secs < float("inf"):
        return None  # "-5" or "nan" would make time.sleep raise ValueError
    return secs


def _tool_calls(calls: Any) -> list[dict[str, Any]]:
    """A reply's ``message.tool_calls`` (servers that parse tool calls out of the text: vLLM with a
    ``--tool-call-parser``, DashScope) as ``[{"name", "arguments"}]``, ``arguments`` as sent (a JSON
    string, sometimes an object)."""
    out = []
    for tc in calls if isinstance(calls, list) else []:
        fn = tc.get("function") if isinstance(tc, dict) else None
        if not isinstance(fn, dict):
            continue
        out.append({"name": fn.get("name"), "arguments": fn.get("arguments")})
    return out


# --- tolerant JSON replies ------------------------------------------------------------------------
# The reading itself is harness.replies (one rule for every verdict); this name stays for callers
# that read a plain JSON object from a reply without a verdict kind of their own.
from harness import replies as _replies  # noqa: E402  (kept in this section: the reading moved out)


def parse_json_reply(text: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in a model's reply, read by :func:`harness.replies.read_verdict`: every
    object is considered (fenced, glued to prose, inside ``<think>``); the prompt's example
    (placeholder values such as ``"..."``) is skipped; with ``required``, objects without those
    keys are skipped (a decoy dict in the prose), and the objects left must be equal, else a
    :class:`ReplyError` says they disagree. Tolerates trailing commas, Python literals and
    Chinese punctuation."""
    try:
        return _replies.read_verdict(text, _replies.any_object(tuple(required))).value
    except _replies.VerdictError as e:
        raise ReplyError(str(e)) from None
