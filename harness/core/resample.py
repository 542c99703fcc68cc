"""Resizing a screenshot on two threads, with exactly the pixels of one Pillow ``resize``.

Pillow resamples in two separable passes (src/libImaging/Resample.c), each rounding to 8 bits: a
horizontal pass (every output pixel from one source row) and a vertical one (from one column).
Pillow 13 does the vertical pass first when it removes more than twice as many rows as the
horizontal removes columns (PR #9549); earlier versions always go horizontal first. Which order the
installed Pillow takes for a pair of sizes is read once, by resizing a noise image of that size both
ways (:func:`pass_order`), not assumed from its version.

Here each pass is made in two halves at once, each half a resize along one axis only:

- along rows (horizontal): every output row comes from the same source row, so the top and the
  bottom rows are resized apart and give the same pixels;
- along columns (vertical): output row ``y``'s taps are centred on source row ``in0 + (y + 0.5) *
  scale``, ``scale = (in1 - in0) / out`` for the box ``[in0, in1)``, and clipped to the whole
  image, not to the box (``precompute_coeffs``). The boxes above and below source row ``y0`` into
  the top ``k`` and the bottom ``out - k`` rows give the whole pass's rows when both have its scale
  and every bottom centre ``y0 + (y + 0.5) * scale`` equals ``(y + k + 0.5) * scale`` bit for bit.
  That holds when the ratio of the heights is a dyadic fraction (a power of two below the line, e.g.
  2400 / 1280 = 15/8) and ``y0`` is a whole row: every value is then exact in floating point
  (Pillow's box is single precision), with or without fused multiply-add, so no rounding can
  differ. Phones' heights against a long side of 1280 mostly are (2400, 2340, 3200, 3120, 1600,
  1920); any other ratio, or a small image, is resized in one call.

Pillow's resampling releases the GIL while it works (ImagingSectionEnter), so the halves run at once.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
from fractions import Fraction
from typing import Literal

from PIL import Image

# below this many source pixels one call is cheaper than two threads
PARALLEL_RESIZE_PIXELS = 1_000_000
# the modes resampled directly, 8 bits per band (RGBA goes through premultiplied RGBa, per pixel)
_MODES = {"RGB", "RGBA", "RGBa", "RGBX", "L"}
_FILTERS = {Image.Resampling.BICUBIC, Image.Resampling.BILINEAR, Image.Resampling.LANCZOS,
            Image.Resampling.BOX, Image.Resampling.HAMMING}
Order = Literal["rows first", "columns first"]
_orders: dict[tuple[tuple[int, int], tuple[int, int], int], "Order | None"] = {}
_lock = threading.Lock()
_pool: cf.ThreadPoolExecutor | None = None


def split_row(src_height: int, out_height: int) -> tuple[int, int] | None:
    """``(k, y0)``: a vertical pass's output rows ``[0, k)`` come from the source rows above ``y0``
    and the rest from below it, with the pixels of the whole pass; None when no such split is exact
    (see the module's text)."""
    if out_height < 2 or out_height >= src_height:
        return None
    scale = Fraction(src_height, out_height)
    if scale.denominator & (scale.denominator - 1):  # not a power of two
        return None
    k = out_height // 2
    y0 = k * scale
    if y0.denominator != 1 or src_height >= 1 << 24:  # a whole row, exact in a float32 box
        return None
    return k, int(y0)


def pass_order(src: tuple[int, int], size: tuple[int, int], resample: int) -> Order | None:
    """The order the installed Pillow resizes ``src`` to ``size`` in, read once per sizes from a noise
    image; None when neither order of two one-axis resizes gives its pixels."""
    key = (tuple(src), tuple(size), int(resample))
    with _lock:
        if key in _orders:
            return _orders[key]
    (sw, sh), (w, h) = src, size
    noise = Image.frombytes("L", src, os.urandom(sw * sh))
    whole = noise.resize(size, resample).tobytes()
    order: Order | None = None
    if noise.resize((w, sh), resample).resize(size, resample).tobytes() == whole:
        order = "rows first"
    elif noise.resize((sw, h), resample).resize(size, resample).tobytes() == whole:
        order = "columns first"
    with _lock:
        _orders[key] = order
    return order


def _workers() -> cf.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:  # threads of its own: callers may be on harness.client.images's image workers
            _pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="resize")
        return _pool


def _rows(img: Image.Image, width: int, resample: int, top: int, bottom: int) -> Image.Image:
    """The horizontal pass over source rows ``[top, bottom)``."""
    part = img if (top, bottom) == (0, img.height) else img.crop((0, top, img.width, bottom))
    return part.resize((width, bottom - top), resample)


def _columns(img: Image.Image, height: int, resample: int, k: int, y0: int, upper: bool) -> Image.Image:
    """One half of the vertical pass to ``height`` rows: the top ``k`` rows or the rest."""
    if upper:
        return img.resize((img.width, k), resample, (0.0, 0.0, float(img.width), float(y0)))
    return img.resize((img.width, height - k), resample, (0.0, float(y0), float(img.width), float(img.height)))


def _stack(top: Image.Image, bottom: Image.Image) -> Image.Image:
    out = Image.new(top.mode, (top.width, top.height + bottom.height))
    out.paste(top, (0, 0))
    out.paste(bottom, (0, top.height))
    return out


def resize(img: Image.Image, size: tuple[int, int], resample: Image.Resampling) -> Image.Image:
    """``img.resize(size, resample)``: the same pixels, made in halves on two threads when that is
    exact (see the module's text)."""
    w, h = size
    split = None
    if (img.mode in _MODES and resample in _FILTERS and img.width * img.height >= PARALLEL_RESIZE_PIXELS
            and w < img.width):
        split = split_row(img.height, h)
    order = pass_order(img.size, size, resample) if split is not None else None
    if order is None:
        return img.resize(size, resample)
    if img.mode == "RGBA":  # as Pillow does it: resampled premultiplied
        return resize(img.convert("RGBa"), size, resample).convert("RGBA")
    k, y0 = split
    pool = _workers()
    if order == "columns first":  # each half: its rows of the vertical pass, then those rows' horizontal pass
        lower = pool.submit(lambda: _rows(_columns(img, h, resample, k, y0, False), w, resample, 0, h - k))
        upper = _rows(_columns(img, h, resample, k, y0, True), w, resample, 0, k)
        return _stack(upper, lower.result())
    mid = img.height // 2  # horizontal pass in two halves of rows, then the vertical pass in two
    second = pool.submit(_rows, img, w, resample, mid, img.height)
    across = _stack(_rows(img, w, resample, 0, mid), second.result())
    lower = pool.submit(_columns, across, h, resample, k, y0, False)
    return _stack(_columns(across, h, resample, k, y0, True), lower.result())
