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


def encode_png_fast(img: Image.Image, level: int = 1) -> bytes:
    """A lossless PNG of an RGB or RGBA image, several times faster than Pillow's encoder.

    Pillow tries all five PNG row filters on every row (ZipEncode.c, "adaptive filter selection"),
    which costs more than the compression itself for a phone-sized frame; a UI screen (flat areas,
    sharp edges) compresses as well with filter 0 (None) and zlib level 1. The PNG format (W3C PNG
    spec, 2nd ed.): signature, IHDR (8-bit depth, colour type 2 = RGB or 6 = RGBA, no interlace),
    one IDAT holding a zlib stream of rows each prefixed by its filter byte, IEND. The filter bytes
    are put in front of the rows by pasting the pixels, seen as one byte per pixel, one column to
    the right on a zero image (C code in Pillow, no Python loop); zlib releases the GIL while it
    compresses."""
    if img.mode not in ("RGB", "RGBA"):
        img = img.convert("RGB")
    w, h = img.size
    channels = 4 if img.mode == "RGBA" else 3
    stride = w * channels
    rows = Image.new("L", (stride + 1, h), 0)
    rows.paste(Image.frombuffer("L", (stride, h), img.tobytes(), "raw", "L", 0, 1), (1, 0))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 6 if channels == 4 else 2, 0, 0, 0)
    return PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level)) + \
        _chunk(b"IEND", b"")
