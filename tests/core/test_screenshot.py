"""harness.core.screenshot: raw screencap frames as Android writes them, the fast PNG encoder, and
screenshots that carry their pixels."""

from __future__ import annotations

import io
import pickle
import struct

import pytest
from PIL import Image, ImageDraw

from harness.core.screenshot import (PARALLEL_DEFLATE_BYTES, RawFrameError, Screenshot, _adler_join, encode_png_fast,
                                     image_of, parse_raw_screencap, png_size, zlib_stream)
from harness.sim.phone import SimPhone


def screen(size=(360, 800)) -> Image.Image:
    img = Image.new("RGB", size, (245, 245, 245))
    d = ImageDraw.Draw(img)
    d.rectangle([20, 40, 340, 120], fill=(30, 90, 200))
    d.text((30, 60), "Wi-Fi  Bluetooth  ÄÖ", fill=(255, 255, 255))
    d.ellipse([100, 300, 260, 460], outline=(200, 30, 30), width=5)
    return img


def raw_bytes(img: Image.Image, fmt: int = 1, colorspace: int | None = 1) -> bytes:
    """What screencap.cpp writes without -p: w, h, f (+ the colour space from Android 8), rows."""
    w, h = img.size
    head = struct.pack("<III", w, h, fmt) + (struct.pack("<I", colorspace) if colorspace is not None else b"")
    body = {1: lambda: img.convert("RGBA").tobytes(), 2: lambda: img.convert("RGBX").tobytes(),
            3: img.tobytes, 5: lambda: img.convert("RGBA").tobytes("raw", "BGRA")}[fmt]
    return head + body()


@pytest.mark.parametrize("fmt", [1, 2, 3, 5])
@pytest.mark.parametrize("colorspace", [1, None])  # Android 8+ (16-byte header) and before (12 bytes)
def test_raw_frames_of_every_format_and_header_read_back_to_the_same_pixels(fmt, colorspace):
    img = screen()
    fr = parse_raw_screencap(raw_bytes(img, fmt, colorspace), expected=img.size)
    assert (fr.width, fr.height, fr.format, fr.colorspace) == (360, 800, fmt, colorspace)
    assert fr.image().convert("RGB").tobytes() == img.tobytes()


def test_the_simulated_phone_serves_raw_frames_as_screencap_writes_them():
    phone = SimPhone(540, 1200)
    phone.reset()
    from harness.sim.shell import Shell

    data = Shell(phone).execute("screencap").stdout
    fr = parse_raw_screencap(data, expected=(540, 1200))
    assert fr.colorspace == 1 and fr.format == 1  # sRGB, RGBA_8888, 16-byte header (sdk 34)
    assert fr.image().tobytes() == phone.screencap_image().tobytes()


@pytest.mark.parametrize("data,why", [
    (b"", "too short"),
    (b"Error: failed to take screenshot\n", "pixel format"),
    (bytes(48), "pixel format 0"),
    (b"\x89PNG\r\n\x1a\n" + bytes(64), "pixel format"),
])
def test_what_is_not_a_raw_frame_is_refused_with_the_reason(data, why):
    with pytest.raises(RawFrameError, match=why):
        parse_raw_screencap(data)


def test_a_raw_frame_cut_short_or_of_another_size_is_refused():
    data = raw_bytes(screen())
    with pytest.raises(RawFrameError, match="cut short"):
        parse_raw_screencap(data[:-100])
    with pytest.raises(RawFrameError, match="not the screen's 1080x2400"):
        parse_raw_screencap(data, expected=(1080, 2400))


@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_fast_png_is_lossless_and_a_valid_png(mode):
    img = screen((1080, 2400)).convert(mode)
    png = encode_png_fast(img)
    back = Image.open(io.BytesIO(png))
    back.load()  # Pillow checks every chunk's CRC and the zlib stream
    assert back.mode == mode and back.size == (1080, 2400) and back.tobytes() == img.tobytes()
    assert png_size(png) == (1080, 2400)
    assert len(png) < len(img.tobytes()) / 20  # a UI screen compresses well without row filters


@pytest.mark.parametrize("level", [0, 1, 6, 9])
@pytest.mark.parametrize("n", [0, 1, PARALLEL_DEFLATE_BYTES - 1, PARALLEL_DEFLATE_BYTES, 3 * PARALLEL_DEFLATE_BYTES + 7])
def test_the_two_halves_zlib_stream_decompresses_to_its_input(n, level):
    """Below the threshold it is zlib.compress; above it two raw deflate halves in one stream, with
    a valid header and the joined Adler-32 (zlib.decompress checks both)."""
    import random
    import zlib

    rnd = random.Random(n + level)
    data = bytes(rnd.getrandbits(8) for _ in range(min(n, 4096))) * (n // 4096 + 1)
    data = data[:n // 2] + bytes(n - n // 2)  # noisy, then flat, as a screen is
    out = zlib_stream(data, level)
    assert zlib.decompress(out) == data
    assert out == zlib_stream(data, level)  # the same bytes every time (the split does not depend on the machine)
    if n < PARALLEL_DEFLATE_BYTES:
        assert out == zlib.compress(data, level)


def test_adler_join_is_the_checksum_of_the_concatenation():
    import random
    import zlib

    rnd = random.Random(7)
    for _ in range(300):
        x = rnd.randbytes(rnd.choice([0, 1, 100, 5552, 70_000]))
        y = rnd.randbytes(rnd.choice([0, 1, 3, 5553, 140_000]))
        assert _adler_join(zlib.adler32(x), zlib.adler32(y), len(y)) == zlib.adler32(x + y)
    assert _adler_join(zlib.adler32(b"\xff" * 10**6), zlib.adler32(b"\xff" * 10**6), 10**6) == zlib.adler32(b"\xff" * 2 * 10**6)


def test_a_screenshot_is_its_png_and_carries_its_pixels_decoded_once():
    img = screen()
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    plain = buf.getvalue()
    shot = Screenshot(plain)
    assert shot == plain and isinstance(shot, bytes) and shot.startswith(b"\x89PNG")
    first = shot.image()
    assert first is shot.image() and first.tobytes() == img.tobytes()  # decoded once, then kept
    given = Screenshot(plain, image=img)
    assert image_of(given) is img  # pixels handed on as they are: nothing decoded
    assert image_of(plain).tobytes() == img.tobytes()  # plain bytes are decoded
    back = pickle.loads(pickle.dumps(given))  # another process gets the PNG, not the pixels
    assert type(back) is bytes and back == plain
    assert png_size(b"not a png") is None
