"""Screenshots as the harness passes them around: PNG bytes that may carry their decoded pixels.

A :class:`Screenshot` *is* the PNG (a ``bytes`` subclass: records, judges, hashing and the model
client take it as they take any PNG) and also holds, or decodes once on first use, its pixels as a
Pillow image. A frame that arrived as raw pixels (``screencap`` without ``-p``) is encoded to PNG
once, for the record, and its pixels are handed on as they are: an agent or judge that resizes or
re-encodes the screen never decodes the PNG again.

Also here: reading Android's raw ``screencap`` output, and a fast lossless PNG encoder for such
frames.
"""

from __future__ import annotations

import concurrent.futures as cf
import io
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Any

from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Screenshot(bytes):
    """PNG bytes, with their pixels attached (given, or decoded once when first asked for).

    Pickled (a worker in another process) it is plain PNG bytes again: the pixels stay here."""

    _lock = threading.Lock()

    def __new__(cls, png: bytes, image: Image.Image | None = None) -> "Screenshot":
        self = super().__new__(cls, png)
        self._image = image
        return self

    def image(self) -> Image.Image:
        """The pixels (RGB or RGBA, as the PNG holds them). Do not modify the returned image."""
        img = self._image
        if img is None:
            with self._lock:
                if self._image is None:
                    decoded = Image.open(io.BytesIO(self))
                    decoded.load()
                    self._image = decoded
                img = self._image
        return img

    def __reduce__(self) -> tuple[Any, ...]:
        return (bytes, (bytes(self),))


def image_of(png: bytes) -> Image.Image:
    """The pixels of a PNG: a :class:`Screenshot`'s own (decoded at most once), else decoded now."""
    if isinstance(png, Screenshot):
        return png.image()
    img = Image.open(io.BytesIO(png))
    img.load()
    return img


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk without decoding it; None when it is not a PNG."""
    if len(data) >= 24 and data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    return None


# --- Android's raw screencap ------------------------------------------------------------------------
# frameworks/base/cmds/screencap/screencap.cpp: without -p it writes width, height and the pixel
# format as little-endian u32, then (Android 8 / API 26 on) a 4th u32 with the colour space
# (dataSpaceToInt: 0 unknown, 1 sRGB, 2 Display P3), then h rows of w * bytesPerPixel(f) bytes (the
# stride is dropped row by row). Formats (system/graphics.h, ui/PixelFormat.h): 1 RGBA_8888,
# 2 RGBX_8888, 3 RGB_888, 4 RGB_565, 5 BGRA_8888.
_RAW_MODES = {1: (4, "RGBA"), 2: (4, "RGBX"), 3: (3, "RGB"), 4: (2, "BGR;16"), 5: (4, "BGRA")}


class RawFrameError(ValueError):
    """Bytes that are not a raw screencap frame (of the expected size)."""


@dataclass(frozen=True)
class RawFrame:
    width: int
    height: int
    format: int
    colorspace: int | None       # None: the 12-byte header of Android before 8
    pixels: memoryview           # height rows of width * bpp bytes

    def image(self) -> Image.Image:
        """The frame as an RGB image (alpha dropped: a screen is opaque; ``screencap -p`` of an
        RGBA_8888 frame keeps an all-255 alpha channel, which changes no pixel a model sees)."""
        bpp, raw_mode = _RAW_MODES[self.format]
        mode = "RGBA" if bpp == 4 else "RGB"
        img = Image.frombuffer(mode, (self.width, self.height), self.pixels, "raw", raw_mode, 0, 1)
        return img.convert("RGB") if mode == "RGBA" else img


def parse_raw_screencap(data: bytes, expected: tuple[int, int] | None = None) -> RawFrame:
    """Read ``screencap`` (no ``-p``) output: the 16-byte header of Android 8 on or the 12-byte one
    before it, told apart by the length of what follows. RawFrameError when it is neither (an
    error message, a PNG, a frame cut short) or not of the ``expected`` (width, height)."""
    if len(data) < 12:
        raise RawFrameError(f"{len(data)} bytes: too short for a raw screencap header")
    w, h, f = struct.unpack_from("<III", data, 0)
    if f not in _RAW_MODES:
        raise RawFrameError(f"not a raw screencap frame (pixel format {f} is none of {sorted(_RAW_MODES)})")
    if expected is not None and (w, h) != tuple(expected):
        raise RawFrameError(f"a raw frame of {w}x{h}, not the screen's {expected[0]}x{expected[1]}")
    body = w * h * _RAW_MODES[f][0]
    view = memoryview(data)
    if len(data) == 16 + body:
        return RawFrame(w, h, f, struct.unpack_from("<I", data, 12)[0], view[16:])
    if len(data) == 12 + body:
        return RawFrame(w, h, f, None, view[12:])
    raise RawFrameError(f"a raw frame of {w}x{h} format {f} needs {body} bytes of pixels after its header; "
                        f"got {len(data)} bytes in all (cut short?)")


# --- fast lossless PNG --------------------------------------------------------------------------------
def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


# a zlib stream of this many bytes or more is deflated in two halves at once (below it the threads cost more than
# they save); the split is fixed, not the machine's core count, so a frame's PNG bytes are the same everywhere
PARALLEL_DEFLATE_BYTES = 1 << 20
_ADLER_MOD = 65521
_deflate_pool: "cf.ThreadPoolExecutor | None" = None
_deflate_pool_lock = threading.Lock()


def _adler_join(a: int, b: int, b_len: int) -> int:
    """The Adler-32 of ``x + y`` from ``a`` = adler32(x) and ``b`` = adler32(y), ``b_len`` = len(y).

    Adler-32 (RFC 1950 section 8.2) is two sums mod 65521: s1 = 1 + the bytes, s2 = the sum of s1 after
    each byte. Behind ``x``, every byte of ``y`` adds s1(x) - 1 to its running s1, hence s2 grows by
    b_len * (s1(x) - 1) beyond s2(y); s1 joins as s1(x) + s1(y) - 1."""
    a1, a2 = a & 0xFFFF, a >> 16
    b1, b2 = b & 0xFFFF, b >> 16
    s1 = (a1 + b1 - 1) % _ADLER_MOD
    s2 = (a2 + b2 + b_len * (a1 - 1)) % _ADLER_MOD
    return (s2 << 16) | s1


def _deflate_part(data: memoryview, level: int, last: bool) -> tuple[bytes, int]:
    """Raw deflate of one part (no zlib header), ended so that the next part's blocks can follow
    (a sync flush ends on a byte boundary), and the part's Adler-32."""
    co = zlib.compressobj(level, zlib.DEFLATED, -15)
    body = co.compress(data) + co.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
    return body, zlib.adler32(data)


def zlib_stream(data: bytes, level: int = 1) -> bytes:
    """What ``zlib.compress(data, level)`` is for (a zlib stream, RFC 1950), large inputs made in
    two halves on two threads: each half is raw deflate (RFC 1951), the first ended with a sync
    flush, so their blocks follow one another in one stream; the checksum is joined from the halves'
    (zlib releases the GIL while it compresses and sums). Decompresses to ``data`` exactly."""
    global _deflate_pool
    if len(data) < PARALLEL_DEFLATE_BYTES:
        return zlib.compress(data, level)
    with _deflate_pool_lock:
        if _deflate_pool is None:
            _deflate_pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="deflate")
        pool = _deflate_pool
    view = memoryview(data)
    cut = len(view) // 2
    second = pool.submit(_deflate_part, view[cut:], level, True)
    head, a = _deflate_part(view[:cut], level, False)
    tail, b = second.result()
    # the zlib header: deflate with a 32 KB window (0x78), then the level's hint and a check making
    # the pair a multiple of 31 (RFC 1950 section 2.2)
    flg = (0 if level < 2 else 1 if level < 6 else 2 if level == 6 else 3) << 6
    flg += 31 - ((0x78 << 8 | flg) % 31)
    return bytes((0x78, flg)) + head + tail + struct.pack(">I", _adler_join(a, b, len(view) - cut))


def encode_png_fast(img: Image.Image, level: int = 1) -> bytes:
    """A lossless PNG of an RGB or RGBA image, several times faster than Pillow's encoder.

    Pillow tries all five PNG row filters on every row (ZipEncode.c, "adaptive filter selection"),
    which costs more than the compression itself for a phone-sized frame; a UI screen (flat areas,
    sharp edges) compresses as well with filter 0 (None) and zlib level 1. The PNG format (W3C PNG
    spec, 2nd ed.): signature, IHDR (8-bit depth, colour type 2 = RGB or 6 = RGBA, no interlace),
    one IDAT holding a zlib stream of rows each prefixed by its filter byte, IEND. The filter bytes
    go in front of the rows in one join of the rows' views (no copy per row in Python); the stream
    is deflated in two halves at once (:func:`zlib_stream`)."""
    if img.mode not in ("RGB", "RGBA"):
        img = img.convert("RGB")
    w, h = img.size
    channels = 4 if img.mode == "RGBA" else 3
    stride = w * channels
    pixels = memoryview(img.tobytes())
    rows = b"\0" + b"\0".join(pixels[i:i + stride] for i in range(0, len(pixels), stride))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6 if channels == 4 else 2, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib_stream(rows, level)) + _chunk(b"IEND", b"")
