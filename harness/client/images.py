"""Screenshots prepared for a model: encoded once per step under an explicit, recorded
:class:`ImagePolicy`, cached by content (bounded by bytes), started early where an agent knows it
will need them (:func:`prefetch`, :func:`prefetch_pixels`), and put into a user message."""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import hashlib
import io
import threading
from dataclasses import asdict, dataclass
from typing import Any, Literal

from PIL import Image

from harness.core import resample
from harness.core.screenshot import encode_png_fast, image_of, png_size


@dataclass(frozen=True)
class ImagePolicy:
    """How a screenshot is prepared for a model. ``max_pixels`` (total) and ``max_long_side`` cap
    the size (aspect kept); ``format`` png or jpeg (with ``jpeg_quality``). A PNG is lossless at any
    ``png_level`` (the zlib level of :func:`harness.core.screenshot.encode_png_fast`): the level changes
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
    PNG (harness.core.screenshot.encode_png_fast at ``png_level``) or JPEG. The pixels a model gets do not
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
    screenshot when it carries them (:class:`harness.core.screenshot.Screenshot`), else it is decoded."""
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
    (harness.core.episode.PixelPreparingAgent): :func:`encode_image` of the Screenshot that carries
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
