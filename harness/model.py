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
- 408, 429, 5xx, timeouts and refused connections are retried with exponential backoff, honouring
  ``Retry-After`` (seconds or an HTTP date) up to ``max_wait_s``; a longer wait is a
  :class:`ModelError` that says so. After the last try a :class:`ModelError` says what failed and why.
- A reply cut off at ``max_tokens`` (``finish_reason: length``) is marked ``truncated``; tool calls
  returned the OpenAI way (``message.tool_calls``) are kept beside the text.
- Servers that refuse a request for too many images or too long a context get an error naming the
  limit to raise (vLLM ``--limit-mm-per-prompt`` / ``--max-model-len``; FIELD_NOTES section 3).
- Structured output (JSON schema, or vLLM's ``guided_json``) where the server supports it; replies
  are parsed tolerantly (:func:`parse_json_reply`) where it does not.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import datetime
import email.utils
import hashlib
import heapq
import io
import json
import os
import random
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from enum import IntEnum
from typing import Any, Iterator, Literal
from urllib.parse import urlsplit

from PIL import Image

from harness import resample
from harness.screenshot import encode_png_fast, image_of, png_size
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


@dataclass(frozen=True)
class ModelConfig:
    base_url: str
    model: str
    api_key_env: str | None = None         # None: the provider's own variable for its own hosts only (key_for)
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 1024
    seed: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_wait_s: float = 300.0              # longest Retry-After honoured; a longer one is a ModelError
    concurrency: int = 8
    structured: StructuredMode = "auto"
    extra_body: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Everything that shapes a reply, for the manifest; the key's variable name, never the key."""
        return asdict(self)


# Which key goes where when no variable is named: each provider's variable only to its own hosts,
# and only over https. Hosts: OpenAI's API (platform.openai.com docs: https://api.openai.com/v1);
# DashScope's OpenAI-compatible mode (https://dashscope.aliyuncs.com/compatible-mode/v1 and the
# regional dashscope-intl / dashscope-us hosts, Alibaba Cloud Model Studio docs).
PROVIDER_KEYS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("OPENAI_API_KEY", re.compile(r"api\.openai\.com"), "api.openai.com"),
    ("DASHSCOPE_API_KEY", re.compile(r"dashscope(-[a-z0-9]+)?\.aliyuncs\.com"), "DashScope (dashscope*.aliyuncs.com)"),
)


def key_rule_text() -> str:
    """What :func:`key_for` does with no variable named, in words (the CLI's help texts use it)."""
    return " and ".join(f"{var} only to {where}" for var, _, where in PROVIDER_KEYS) + \
        ", over https only; no key to any other endpoint"


@dataclass(frozen=True)
class KeyChoice:
    """The key a client sends (None: no Authorization header) and why, for messages (never the key)."""

    key: str | None = field(repr=False)  # never in a repr, a log line or a traceback's locals dump
    variable: str | None = None
    reason: str = ""


# keys handed to this process by another (a farm actor gets the driver's), by variable name: read by
# key_for before the environment, and never put into os.environ (a subprocess would inherit them)
_PROVIDED_KEYS: dict[str, str] = {}


def provide_keys(values: dict[str, str]) -> None:
    """Make ``values`` (variable name -> key) what :func:`key_for` reads for those variables, ahead
    of this process's environment, without putting them in it."""
    _PROVIDED_KEYS.update(values)


def _key_variable(name: str) -> str | None:
    return _PROVIDED_KEYS.get(name) or os.environ.get(name)


def key_for(config: ModelConfig) -> KeyChoice:
    """The API key for ``config``'s endpoint.

    A variable named by ``api_key_env`` is sent to that endpoint, whatever it is (an unset one is
    a ValueError: a named key that is missing is a mistake, not an anonymous call). With none
    named, ``OPENAI_API_KEY`` goes only to https://api.openai.com and ``DASHSCOPE_API_KEY`` only to
    DashScope's https hosts; every other endpoint (a local vLLM, a third-party judge) gets no key."""
    if config.api_key_env:
        value = _key_variable(config.api_key_env)
        if not value:
            raise ValueError(f"{config.base_url}: the API key variable {config.api_key_env} (--model-api-key-env / "
                             "--judge-api-key-env) is not set")
        return KeyChoice(value, config.api_key_env, f"{config.api_key_env} (named for this endpoint)")
    parts = urlsplit(config.base_url)
    host = (parts.hostname or "").lower()
    for var, pattern, where in PROVIDER_KEYS:
        if pattern.fullmatch(host):
            if parts.scheme != "https":
                return KeyChoice(None, None, f"no key: {var} goes to {where} over https only, not {parts.scheme}://")
            value = _key_variable(var)
            if value:
                return KeyChoice(value, var, f"{var} (the default for {where})")
            return KeyChoice(None, None, f"no key: {var} is not set")
    defaults = ", ".join(f"{var} only to {where}" for var, _, where in PROVIDER_KEYS)
    return KeyChoice(None, None, f"no key: {host or config.base_url} is not a provider with a default key ({defaults})")


@dataclass
class ChatResult:
    text: str
    usage: dict[str, int]
    latency_s: float
    attempts: int
    model: str
    structured: str
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}] (OpenAI tool_calls)

    @property
    def truncated(self) -> bool:
        """The reply was cut off at max_tokens: asking again unchanged would cut it off again."""
        return self.finish_reason == "length"

    def to_json(self) -> dict[str, Any]:
        out = {"usage": self.usage, "latency_s": round(self.latency_s, 4), "attempts": self.attempts,
               "model": self.model, "structured": self.structured, "finish_reason": self.finish_reason}
        if self.truncated:
            out["truncated"] = True
        if self.tool_calls:
            out["tool_calls"] = len(self.tool_calls)
        return out


class Priority(IntEnum):
    """Who waits on a call, most urgent first. A gate check holds the action it judges; an agent
    call holds the episode; live step evidence only needs to be in before the episode ends; offline
    judging waits on nobody."""

    GATE = 0
    AGENT = 1
    LIVE = 2
    OFFLINE = 3


class EndpointSlots:
    """The slots of one endpoint: at most ``capacity`` calls in flight, waiting calls served by
    priority (then in arrival order). Once gate checks or agent calls use the endpoint, the
    background classes (live evidence, offline judging) may fill only ``capacity - reserve`` slots,
    so those find a free slot at once while evidence calls are in flight; an endpoint that only
    judges use keeps all its slots for them (with one slot there is no reserve).

    Each waiter sleeps on its own event and a freed slot is handed to the head of the queue alone:
    waking every waiter on every release (one condition for all) cost each call ~2 x K wake-ups at
    K calls in flight, a large part of an offline pass's CPU at K = 64. A slot has a number, the
    lowest free one is given out, so a client can keep its connections in groups by slot
    (:class:`ModelClient`): at most ``SLOTS_PER_POOL`` calls share a connection pool."""

    def __init__(self, capacity: int) -> None:
        self._lock = threading.Lock()
        self.capacity = max(1, capacity)
        self.in_flight = 0
        self.foreground = False  # a gate check or an agent call has used this endpoint
        self._waiting: list[tuple[int, int, list[Any]]] = []  # heap of (priority, ticket, [event, slot])
        self._ticket = 0
        self._free = list(range(self.capacity))  # heap of free slot numbers

    @property
    def reserve(self) -> int:
        if not self.foreground or self.capacity < 2:
            return 0
        return max(1, self.capacity // 4)

    def grow(self, capacity: int) -> None:
        with self._lock:
            if capacity > self.capacity:
                for n in range(self.capacity, capacity):
                    heapq.heappush(self._free, n)
                self.capacity = capacity
                self._hand_out()

    def _limit(self, priority: int) -> int:
        return self.capacity if priority <= Priority.AGENT else self.capacity - self.reserve

    def _hand_out(self) -> None:
        """Give free slots to the head of the queue while it may have one (lock held). The head has
        the best priority, and a worse one has no higher limit: when the head cannot go, nobody
        behind it can."""
        while self._waiting and self.in_flight < self._limit(self._waiting[0][0]):
            _, _, waiter = heapq.heappop(self._waiting)
            self.in_flight += 1
            waiter[1] = heapq.heappop(self._free)
            waiter[0].set()

    def _give_back(self, number: int) -> None:
        with self._lock:
            self.in_flight -= 1
            heapq.heappush(self._free, number)
            self._hand_out()

    @contextmanager
    def slot(self, priority: int) -> Iterator[int]:
        """Hold one slot while the block runs; yields the slot's number (0 .. capacity - 1)."""
        waiter: list[Any] = [threading.Event(), None]
        with self._lock:
            self._ticket += 1
            if int(priority) <= Priority.AGENT:
                self.foreground = True
            heapq.heappush(self._waiting, (int(priority), self._ticket, waiter))
            self._hand_out()
        try:
            waiter[0].wait()
        except BaseException:  # interrupted while waiting: leave the queue, or give back what came
            with self._lock:
                if waiter[1] is None:
                    self._waiting = [w for w in self._waiting if w[2] is not waiter]
                    heapq.heapify(self._waiting)
            if waiter[1] is not None:
                self._give_back(waiter[1])
            raise
        try:
            yield waiter[1]
        finally:
            self._give_back(waiter[1])


SLOTS_PER_POOL = 8  # calls in flight that share one connection pool (ModelClient._pool)
_slots: dict[str, EndpointSlots] = {}
_slots_lock = threading.Lock()
_no_structured: set[str] = set()  # endpoints that refused response_format once


def endpoint_slots(base_url: str, n: int) -> EndpointSlots:
    """The slots of ``base_url``, shared by every client of it (agents', judges' and monitors'
    alike, so that priorities hold across them); the largest limit asked for applies."""
    with _slots_lock:
        slots = _slots.get(base_url)
        if slots is None:
            slots = _slots[base_url] = EndpointSlots(n)
        else:
            slots.grow(n)
        return slots


def forget_endpoint(base_url: str) -> None:
    """Forget what this process learned about ``base_url``: its slots (the largest ``concurrency``
    asked for so far) and whether it refused structured output. For a server replaced at the same
    address: a local port is given out again soon after it is closed (137 of 2,000 successive
    binds to port 0 here reused one), and a later server there is not the earlier one. Calls in
    flight keep the slots they hold; later calls get fresh ones."""
    with _slots_lock:
        _slots.pop(base_url, None)
        _no_structured.discard(base_url)


_LIMIT_HINTS = (
    (re.compile(r"limit_mm_per_prompt|at most \d+ image|too many images|image.*limit", re.I),
     "the server refused the number of images in one request: raise vLLM's --limit-mm-per-prompt "
     "(e.g. --limit-mm-per-prompt image=16) or the provider's image limit, or send fewer images"),
    (re.compile(r"maximum context length|context length|max_model_len|too long|token limit", re.I),
     "the request is longer than the model's context: raise vLLM's --max-model-len, lower the image "
     "size (--image-max-side), or shorten the history"),
)
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SECRETISH = re.compile(r"(sk-[A-Za-z0-9_-]{6,}|Bearer\s+\S+)")


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
            value = value.replace(form, "***")
        return value
    if isinstance(value, list):
        return [_without_key(v, key) for v in value]
    if isinstance(value, dict):
        return {k: _without_key(v, key) for k, v in value.items()}
    return value


def _scrub(text: str, key: str | None) -> str:
    return _SECRETISH.sub("***", _without_key(text, key))


def _reply_without_key(res: "ChatResult", key: str | None) -> "ChatResult":
    """``res`` with ``key`` taken out of every text it holds (all its fields, whatever they are)."""
    if not _key_forms(key):
        return res
    return replace(res, **{f.name: _without_key(getattr(res, f.name), key) for f in fields(res)})


class ModelClient:
    """Thread-safe, synchronous chat completions against one endpoint and model."""

    def __init__(self, config: ModelConfig):
        import openai

        self.config = config
        self._auth = key_for(config)
        self._key = self._auth.key
        self._openai = openai
        self._pools: list[Any] = [self._new_pool()]
        self._pools_lock = threading.Lock()
        from openai.types.chat import ChatCompletion

        self._completion = ChatCompletion
        self._rng = random.Random(0)

    def _new_pool(self) -> Any:
        # the SDK needs some api_key even when none is sent: without a key every request omits the
        # Authorization header (_request), so the placeholder never leaves this process
        return self._openai.OpenAI(base_url=self.config.base_url, api_key=self._key or "no-key-sent",
                                   timeout=self.config.timeout_s, max_retries=0)

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
        """POST /chat/completions through the SDK's client (its auth, retries off, timeouts, errors
        and response model) with the body as we build it. ``chat.completions.create`` would first
        walk every message part against the SDK's parameter types (``maybe_transform``): ~40 % of a
        judging pass's CPU per call, for a body it leaves as it is (chat messages have no aliased or
        specially formatted fields). ``client.post`` is the SDK's documented way to send a body of
        one's own (openai README, "Undocumented endpoints"); ``create`` sends the same JSON."""
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
        return self._pool(slot).post("/chat/completions", body=body, options=options, cast_to=self._completion)

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
            meter.record(role, res.usage, res.latency_s)
        return res

    def _chat(self, messages: list[dict[str, Any]], json_schema: dict[str, Any] | None, priority: int) -> ChatResult:
        c = self.config
        mode = c.structured if json_schema is not None else "none"
        if mode == "auto":
            mode = "none" if c.base_url in _no_structured else "json_schema"
        attempts = 0
        last: str = ""
        status: int | None = None
        start = time.monotonic()
        while True:
            attempts += 1
            retry_after: float | None = None
            try:
                with endpoint_slots(c.base_url, c.concurrency).slot(priority) as slot:
                    t0 = time.monotonic()
                    resp = self._request(messages, json_schema, mode, slot)
                    latency = time.monotonic() - t0
                choice = resp.choices[0] if getattr(resp, "choices", None) else None
                message = choice.message if choice is not None else None
                text = (message.content if message is not None else None) or ""
                # a JSON "\ud83d" escape (half an emoji cut by max_tokens) decodes to a lone surrogate,
                # which no str-typed action or record accepts: keep it as U+FFFD
                text = _LONE_SURROGATE.sub("\ufffd", text)
                u = getattr(resp, "usage", None)
                usage = {"prompt_tokens": getattr(u, "prompt_tokens", 0) or 0,
                         "completion_tokens": getattr(u, "completion_tokens", 0) or 0,
                         "total_tokens": getattr(u, "total_tokens", 0) or 0}
                return ChatResult(text, usage, latency, attempts, getattr(resp, "model", c.model) or c.model, mode,
                                  finish_reason=getattr(choice, "finish_reason", None),
                                  tool_calls=_tool_calls(message))
            except self._openai.APIStatusError as e:
                status = e.status_code
                body = _scrub(str(getattr(e, "message", e)), self._key)
                last = f"HTTP {status}: {body[:300]}"
                if status == 400 and mode in ("json_schema", "guided") and c.structured == "auto" and \
                        re.search(r"response_format|json_schema|guided", body, re.I):
                    _no_structured.add(c.base_url)  # this server cannot do it: ask in plain text
                    mode = "none"
                    attempts -= 1
                    continue
                for pattern, hint in _LIMIT_HINTS:
                    if status in (400, 413, 422) and pattern.search(body):
                        raise ModelError(f"{c.model} at {c.base_url}: {hint} ({last})", kind="limit",
                                         status=status, attempts=attempts) from None
                if status == 401 and self._key is None:
                    raise ModelError(f"{c.model} at {c.base_url}: the endpoint wants an API key and none was sent "
                                     f"({self._auth.reason}); name the variable that holds this endpoint's key with "
                                     f"--model-api-key-env VAR (judges: --judge-api-key-env VAR) ({last})",
                                     kind="refused", status=status, attempts=attempts) from None
                if status not in RETRIED_STATUS and status < 500:
                    raise ModelError(f"{c.model} at {c.base_url}: request refused, {last}", kind="refused",
                                     status=status, attempts=attempts) from None
                ra = e.response.headers.get("retry-after") if getattr(e, "response", None) is not None else None
                retry_after = retry_after_s(ra)
                if retry_after is not None and retry_after > c.max_wait_s:
                    raise ModelError(f"{c.model} at {c.base_url}: the server asks to wait {retry_after:.0f}s before "
                                     f"retrying (Retry-After: {ra}), longer than the {c.max_wait_s:g}s this client waits "
                                     f"(max_wait_s; --model-max-wait / --judge-max-wait) ({last})", kind="rate_limited",
                                     status=status, attempts=attempts) from None
            except self._openai.APITimeoutError:
                last = f"timed out after {c.timeout_s:g}s"
            except self._openai.APIConnectionError as e:
                last = f"connection failed: {_scrub(str(e), self._key)[:200]}"
            except (AttributeError, IndexError, TypeError, ValueError) as e:
                raise ModelError(f"{c.model} at {c.base_url}: malformed response: {type(e).__name__}: {e}",
                                 kind="malformed", attempts=attempts) from None
            if attempts > c.max_retries:
                raise ModelError(f"{c.model} at {c.base_url}: failed after {attempts} attempt(s) in "
                                 f"{time.monotonic() - start:.1f}s; last error: {last}", kind="exhausted",
                                 status=status, attempts=attempts)
            # the server's Retry-After as asked (already bounded by max_wait_s), else jittered backoff
            delay = retry_after if retry_after is not None else min(
                c.max_backoff_s, c.backoff_s * (2 ** (attempts - 1)) * (0.5 + self._rng.random()))
            time.sleep(delay)


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


def _tool_calls(message: Any) -> list[dict[str, Any]]:
    """``message.tool_calls`` (servers that parse tool calls out of the text: vLLM with a
    ``--tool-call-parser``, DashScope) as ``[{"name", "arguments"}]``, ``arguments`` as sent (a JSON
    string, sometimes an object)."""
    out = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        out.append({"name": getattr(fn, "name", None), "arguments": getattr(fn, "arguments", None)})
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
