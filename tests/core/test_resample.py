"""harness.core.resample: a screenshot resized in halves on two threads has exactly the pixels of one
Pillow resize (the installed Pillow's, whichever order of passes it takes), and sizes where halves
would not be exact are resized in one call."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from harness.core import resample
from harness.client.images import ImagePolicy


def _screen(w: int, h: int, mode: str) -> Image.Image:
    """Flat blocks with sharp edges (a UI) plus noise (every pixel a different value)."""
    blocks = Image.frombytes("RGB", (w // 9 + 1, h // 9 + 1), os.urandom((w // 9 + 1) * (h // 9 + 1) * 3))
    img = Image.blend(blocks.resize((w, h), Image.Resampling.NEAREST),
                      Image.frombytes("RGB", (w, h), os.urandom(w * h * 3)), 0.25)
    return img.convert(mode)


@pytest.mark.parametrize("w,h", [(1080, 2400), (1080, 1920), (1440, 3200), (2400, 1080)])
@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
def test_halves_give_the_pixels_of_one_resize(w, h, mode, monkeypatch):
    calls = []
    real = resample._columns
    monkeypatch.setattr(resample, "_columns", lambda *a: calls.append(1) or real(*a))
    img = _screen(w, h, mode)
    size = ImagePolicy(max_long_side=1280).target((w, h))
    for f in (Image.Resampling.BICUBIC, Image.Resampling.BILINEAR, Image.Resampling.LANCZOS):
        ours = resample.resize(img, size, f)
        assert ours.mode == mode and ours.size == size
        assert ours.tobytes() == img.resize(size, f).tobytes(), (w, h, mode, f)
    assert len(calls) == 6  # made in halves every time (two vertical halves per resize), not in one call


def test_the_order_of_passes_is_read_from_the_installed_pillow():
    # 1080x2400 -> 576x1280 and 1080x1920 -> 720x1280 go different ways in Pillow 13 (PR #9549), one
    # way in older versions: either way the order read is one that reproduces the whole resize
    for src, size in (((1080, 2400), (576, 1280)), ((1080, 1920), (720, 1280))):
        assert resample.pass_order(src, size, Image.Resampling.BICUBIC) in ("rows first", "columns first")


def test_sizes_whose_halves_would_not_be_exact_take_one_call(monkeypatch):
    assert resample.split_row(2400, 1280) == (640, 1200)        # 15/8
    assert resample.split_row(2340, 1280) == (640, 1170)        # 117/64
    assert resample.split_row(2412, 1280) is None                # 603/320: not a power of two below
    assert resample.split_row(1280, 1280) is None and resample.split_row(1000, 2000) is None
    monkeypatch.setattr(resample, "_columns", lambda *a: pytest.fail("split a size that is not exact"))
    img = _screen(1080, 2412, "RGB")
    size = ImagePolicy(max_long_side=1280).target(img.size)
    assert resample.resize(img, size, Image.Resampling.BICUBIC).tobytes() == \
        img.resize(size, Image.Resampling.BICUBIC).tobytes()
    small = _screen(360, 800, "RGB")  # under PARALLEL_RESIZE_PIXELS
    assert resample.resize(small, (180, 400), Image.Resampling.BICUBIC).tobytes() == \
        small.resize((180, 400), Image.Resampling.BICUBIC).tobytes()
