"""Draws the simulated phone's view tree with Pillow.

Text uses Noto Sans CJK (from the ``cvttf-notosanscjk-regular`` wheel), which covers Latin and
Chinese, so Chinese screens show real glyphs (FIELD_NOTES section 9: Pillow's default font has no
CJK). Every paint kind is drawn by one small function keyed by the node's ``paint`` field.
"""

from __future__ import annotations

import colorsys
import io
from functools import lru_cache
from typing import Any, Callable

from PIL import Image, ImageDraw, ImageFont

from harness.sim import ui
from harness.sim.ui import Node


@lru_cache(maxsize=1)
def font_path() -> str:
    try:
        import cvttf_NotoSansCJK_Regular as pkg  # the wheel ships the .otf beside its __init__
        return pkg.get_TTF_path()
    except Exception as e:  # pragma: no cover - install problem
        raise RuntimeError("the CJK font package cvttf-notosanscjk-regular is not installed; "
                           "reinstall crate-harness (pip install -e .)") from e


@lru_cache(maxsize=64)
def font(px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(font_path(), max(6, px))


def _text_width(f: ImageFont.FreeTypeFont, s: str) -> float:
    # raqm cannot lay out a newline: measure the widest line instead
    return max(f.getlength(line) for line in s.split("\n"))


# Fitting text into a box measures as little as it can: laying out a string with raqm costs time
# that grows faster than its length (a few thousand characters mixing scripts take ~0.1 s each), so
# re-measuring the whole string once per character dropped made a 4,000-character type step take
# minutes. Each character's advance is measured once per font (cached) and summed to find where a
# line ends; the shaped width of that one candidate line is then checked (kerning, ligatures and
# combining marks make it differ a little), so a line costs one layout of at most a line's length.
_ADVANCES: dict[tuple[int, str], float] = {}


def _advance(f: ImageFont.FreeTypeFont, ch: str) -> float:
    key = (id(f), ch)
    a = _ADVANCES.get(key)
    if a is None:
        a = _ADVANCES[key] = f.getlength(ch)
    return a


def _fit_count(f: ImageFont.FreeTypeFont, s: str, width: float) -> int:
    """How many leading characters of the one-line ``s`` fit in ``width`` pixels."""
    total, n = 0.0, 0
    for ch in s:
        total += _advance(f, ch)
        if total > width:
            break
        n += 1
    if n == 0 or f.getlength(s[:n]) <= width:
        return n
    lo, hi = 0, n - 1  # the shaped line is wider than the sum of its characters: search below
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if f.getlength(s[:mid]) <= width:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fits(f: ImageFont.FreeTypeFont, s: str, width: float) -> bool:
    return all(_fit_count(f, line, width) == len(line) for line in s.split("\n"))


def _wrap(f: ImageFont.FreeTypeFont, text: str, width: int, max_lines: int | None = None) -> list[str]:
    """Greedy wrap that also breaks CJK runs (which have no spaces); Latin text breaks at the last
    space of a line when there is one. ``max_lines``: stop after that many (what the box shows).
    Cached: a screen is rebuilt for every screenshot, and a message bubble is wrapped for its layout
    and again for its paint."""
    return list(_wrap_cached(f, text, width, max_lines))


@lru_cache(maxsize=512)
def _wrap_cached(f: ImageFont.FreeTypeFont, text: str, width: int, max_lines: int | None) -> tuple[str, ...]:
    lines: list[str] = []
    for para in text.split("\n"):
        rest = para
        while True:
            if max_lines is not None and len(lines) >= max_lines:
                return tuple(lines)
            n = max(1, _fit_count(f, rest, width))  # a line holds at least one character
            if n >= len(rest):
                lines.append(rest)
                break
            cut = rest.rfind(" ", 0, n)
            if cut > 0 and ord(rest[n]) < 0x2E80:
                lines.append(rest[:cut])
                rest = rest[cut + 1:]
            else:
                lines.append(rest[:n])
                rest = rest[n:]
    return tuple(lines)


def _ellipsize(f: ImageFont.FreeTypeFont, text: str, width: float) -> str:
    """``text`` cut to fit ``width`` with a trailing ellipsis (one line)."""
    line = text.split("\n", 1)[0]
    n = _fit_count(f, line, width - f.getlength("…"))
    return line[:n] + "…"


Color = tuple[int, int, int]
# Material dark surfaces for the palette's light ones (Material Design's dark theme: #121212
# background, lighter surfaces for raised elements, text at high-emphasis white)
_DARK_FILL = {ui.BACKGROUND: (18, 18, 18), ui.SURFACE: (32, 33, 36), (232, 234, 237): (41, 42, 45),
              (241, 243, 244): (28, 28, 30), ui.DIVIDER: (60, 64, 67)}
_DARK_INK = {ui.TEXT: (232, 234, 237), ui.TEXT_2: (189, 193, 198), ui.HINT: (128, 134, 139),
             ui.DIVIDER: (60, 64, 67), ui.PRIMARY: (138, 180, 248), ui.PRIMARY_DARK: (174, 203, 250)}


@lru_cache(maxsize=512)
def dark_fill(c: Color) -> Color:
    """A background in the dark theme: light greys and pale tints turn dark (same hue), strong
    colours (app bars, buttons, icons) stay."""
    if c in _DARK_FILL:
        return _DARK_FILL[c]
    h, lum, s = colorsys.rgb_to_hls(*(v / 255 for v in c))
    if lum < 0.6 and s > 0.3:
        return c
    return tuple(int(round(v * 255)) for v in colorsys.hls_to_rgb(h, 0.07 + (1 - lum) * 0.3, s * 0.6))  # type: ignore[return-value]


@lru_cache(maxsize=512)
def dark_ink(c: Color) -> Color:
    """Text and lines in the dark theme: dark ink turns light, colours brighten to stay readable."""
    if c in _DARK_INK:
        return _DARK_INK[c]
    h, lum, s = colorsys.rgb_to_hls(*(v / 255 for v in c))
    lum = 1 - lum if s < 0.3 and lum < 0.5 else max(lum, 0.65)
    return tuple(int(round(v * 255)) for v in colorsys.hls_to_rgb(h, lum, s))  # type: ignore[return-value]


class _DarkDraw:
    """ImageDraw with every colour passed through the dark theme: ``fill`` of shapes as a
    background, ``fill`` of text and lines and every ``outline`` as ink."""

    def __init__(self, draw: ImageDraw.ImageDraw):
        self.draw = draw

    @staticmethod
    def _map(kw: dict[str, Any], fill: Callable[[Color], Color]) -> dict[str, Any]:
        if isinstance(kw.get("fill"), tuple):
            kw["fill"] = fill(kw["fill"][:3])
        if isinstance(kw.get("outline"), tuple):
            kw["outline"] = dark_ink(kw["outline"][:3])
        return kw

    def rectangle(self, xy: Any, **kw: Any) -> None:
        self.draw.rectangle(xy, **self._map(kw, dark_fill))

    def rounded_rectangle(self, xy: Any, radius: int = 0, **kw: Any) -> None:
        self.draw.rounded_rectangle(xy, radius=radius, **self._map(kw, dark_fill))

    def ellipse(self, xy: Any, **kw: Any) -> None:
        self.draw.ellipse(xy, **self._map(kw, dark_fill))

    def line(self, xy: Any, **kw: Any) -> None:
        self.draw.line(xy, **self._map(kw, dark_ink))

    def text(self, xy: Any, text: str, **kw: Any) -> None:
        self.draw.text(xy, text, **self._map(kw, dark_ink))


class Painter:
    def __init__(self, img: Image.Image, dp: float, dark: bool = False):
        self.img = img
        self.dark = dark
        self.d: Any = _DarkDraw(ImageDraw.Draw(img)) if dark else ImageDraw.Draw(img)
        self.dp = dp
        self.kinds: dict[str, Callable[[Node], None]] = {
            "fill": self.fill, "label": self.label, "row": self.row, "switch": self.switch,
            "checkbox": self.checkbox, "field": self.field, "button": self.button, "glyph": self.glyph,
            "avatar": self.avatar, "chip": self.chip, "wheel": self.wheel, "scrim": self.scrim,
            "dialog": self.dialog, "fab": self.fab, "key": self.key, "icon": self.icon, "card": self.card,
            "bubble": self.bubble, "image": self.image_block, "slider": self.slider,
        }

    def px(self, dp: float) -> int:
        return int(round(dp * self.dp))

    def draw(self, node: Node) -> None:
        fn = self.kinds.get(node.paint)
        clip = node.clip
        if fn is not None:
            vis = node.visible_bounds() if clip is not None else node.bounds
            if vis[2] <= vis[0] or vis[3] <= vis[1]:
                return
            if vis == node.bounds:
                fn(node)
            else:
                # partly scrolled out of view: draw into a crop of the visible part only
                layer = self.img.crop(vis)
                sub = Painter(layer, self.dp, self.dark)
                sub.kinds[node.paint](_shift(node, -vis[0], -vis[1]))
                self.img.paste(layer, vis[:2])
        for c in node.children:
            self.draw(c)

    # --- primitives ---------------------------------------------------------------------------
    def _text(self, box, text: str, size: float, color, bold=False, align="left", valign="center", wrap=False):
        x1, y1, x2, y2 = box
        f = font(self.px(size))
        lh = int(self.px(size) * 1.35)
        if wrap:
            lines = _wrap(f, text, max(10, x2 - x1), max_lines=max(1, (y2 - y1) // max(1, lh) + 1))
        else:
            lines = [text]
            # ellipsize a single line that does not fit
            if len(text) > 1 and not _fits(f, text, x2 - x1):
                lines = [_ellipsize(f, text, x2 - x1)]
        total = lh * len(lines)
        if valign == "top" or wrap:
            y = y1 + self.px(2)
        elif valign == "bottom":
            y = y2 - total - self.px(4)
        else:
            y = y1 + (y2 - y1 - total) // 2
        bottom = min(y2, self.img.height)
        for line in lines:
            if y > bottom:
                break
            if y + lh < 0:  # above the visible part of a node scrolled partly out of view
                y += lh
                continue
            w = _text_width(f, line)
            x = x1 if align == "left" else (x2 - w if align == "right" else x1 + (x2 - x1 - w) / 2)
            self.d.text((x, y), line, font=f, fill=color)
            if bold:  # a fake bold that stays legible: draw again one pixel to the right
                self.d.text((x + max(1, self.px(0.4)), y), line, font=f, fill=color)
            y += lh

    # --- paint kinds --------------------------------------------------------------------------
    def fill(self, n: Node) -> None:
        self.d.rectangle(n.bounds, fill=n.style.get("color", ui.BACKGROUND))

    def card(self, n: Node) -> None:
        self.d.rounded_rectangle(n.bounds, radius=self.px(12), fill=n.style.get("color", ui.SURFACE),
                                 outline=ui.DIVIDER)

    def label(self, n: Node) -> None:
        s = n.style
        if s.get("background"):
            self.d.rounded_rectangle(n.bounds, radius=self.px(8), fill=s["background"])
        pad = self.px(4) if s.get("background") else 0
        x1, y1, x2, y2 = n.bounds
        self._text((x1 + pad, y1, x2 - pad, y2), n.text, s.get("size", 16), s.get("color", ui.TEXT),
                   bold=s.get("bold", False), align=s.get("align", "left"), valign=s.get("valign", "center"),
                   wrap=s.get("wrap", False))

    def row(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        self.d.rectangle(n.bounds, fill=(232, 240, 254) if n.style.get("selected") else ui.SURFACE)
        if n.style.get("divider", True):
            self.d.line((x1 + self.px(16), y2 - 1, x2, y2 - 1), fill=ui.DIVIDER, width=1)

    def switch(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        on = n.style.get("on")
        track = (x1, y1 + self.px(6), x2, y2 - self.px(6))
        self.d.rounded_rectangle(track, radius=(track[3] - track[1]) // 2,
                                 fill=(138, 180, 248) if on else (189, 193, 198))
        r = (y2 - y1) // 2
        cx = x2 - r if on else x1 + r
        cy = (y1 + y2) // 2
        self.d.ellipse((cx - r + 2, cy - r + 2, cx + r - 2, cy + r - 2),
                       fill=ui.PRIMARY if on else (241, 243, 244), outline=(128, 134, 139))

    def checkbox(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        if n.style.get("on"):
            self.d.rounded_rectangle(n.bounds, radius=self.px(3), fill=ui.PRIMARY)
            self.d.line((x1 + (x2 - x1) * 0.2, y1 + (y2 - y1) * 0.5, x1 + (x2 - x1) * 0.42, y1 + (y2 - y1) * 0.72,
                         x1 + (x2 - x1) * 0.8, y1 + (y2 - y1) * 0.28), fill=ui.ON_PRIMARY, width=self.px(2.5))
        else:
            self.d.rounded_rectangle(n.bounds, radius=self.px(3), outline=ui.TEXT_2, width=self.px(2))

    def field(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        focused = n.style.get("focused")
        self.d.rounded_rectangle(n.bounds, radius=self.px(6), fill=ui.SURFACE,
                                 outline=ui.PRIMARY if focused else (128, 134, 139), width=self.px(2 if focused else 1))
        color = ui.HINT if n.style.get("empty") else ui.TEXT
        inner = (x1 + self.px(12), y1 + (self.px(8) if n.style.get("wrap") else 0), x2 - self.px(12), y2)
        if n.style.get("selected"):  # all of the text is selected: highlight it as Android does
            f = font(self.px(17))
            tw = min(_text_width(f, n.text), inner[2] - inner[0])
            cy = (y1 + y2) // 2
            self.d.rectangle((inner[0], cy - self.px(12), inner[0] + tw, cy + self.px(12)), fill=(187, 214, 251))
        self._text(inner, n.text, 17, color, wrap=n.style.get("wrap", False),
                   valign="top" if n.style.get("wrap") else "center")
        if focused:  # a caret after the text
            f = font(self.px(17))
            room = x2 - x1 - self.px(30)
            tw = 0 if n.style.get("empty") else (_text_width(f, n.text) if _fits(f, n.text, room) else room)
            cx = inner[0] + tw + self.px(2)
            cy = (y1 + y2) // 2
            self.d.line((cx, cy - self.px(11), cx, cy + self.px(11)), fill=ui.PRIMARY, width=self.px(1.5))

    def button(self, n: Node) -> None:
        kind = n.style.get("kind", "filled")
        enabled = n.style.get("enabled", True)
        r = self.px(20)
        if kind == "filled":
            fill, fg, outline = (ui.PRIMARY if enabled else (218, 220, 224)), (ui.ON_PRIMARY if enabled else ui.HINT), None
        elif kind == "danger":
            fill, fg, outline = ui.DANGER, ui.ON_PRIMARY, None
        elif kind == "outlined":
            fill, fg, outline = ui.SURFACE, ui.PRIMARY, (128, 134, 139)
        else:  # text button
            fill, fg, outline = None, ui.PRIMARY, None
        if fill is not None or outline is not None:
            self.d.rounded_rectangle(n.bounds, radius=r, fill=fill, outline=outline)
        self._text(n.bounds, n.text, 16, fg, bold=True, align="center")

    def glyph(self, n: Node) -> None:
        s = n.style
        self._text(n.bounds, s.get("glyph", "?"), s.get("size", 22), s.get("color", ui.TEXT), align="center")

    def avatar(self, n: Node) -> None:
        s = n.style
        self.d.ellipse(n.bounds, fill=s.get("color", ui.PRIMARY))
        self._text(n.bounds, s.get("glyph", "?")[:2], 18, ui.ON_PRIMARY, bold=True, align="center")

    def icon(self, n: Node) -> None:
        """A launcher icon: rounded square with a glyph, the label below it."""
        x1, y1, x2, y2 = n.bounds
        s = n.style
        size = min(x2 - x1, self.px(56))
        ix1 = x1 + (x2 - x1 - size) // 2
        iy1 = y1 + self.px(6)
        self.d.rounded_rectangle((ix1, iy1, ix1 + size, iy1 + size), radius=self.px(14), fill=s.get("color", ui.PRIMARY))
        self._text((ix1, iy1, ix1 + size, iy1 + size), s.get("glyph", "?"), 24, ui.ON_PRIMARY, bold=True, align="center")
        self._text((x1, iy1 + size + self.px(4), x2, y2), n.text, 13, s.get("label_color", ui.TEXT), align="center")

    def chip(self, n: Node) -> None:
        on = n.style.get("on")
        self.d.rounded_rectangle(n.bounds, radius=self.px(16), fill=(210, 227, 252) if on else ui.SURFACE,
                                 outline=ui.PRIMARY if on else ui.DIVIDER)
        self._text(n.bounds, n.text, 15, ui.PRIMARY_DARK if on else ui.TEXT_2, bold=on, align="center")

    def wheel(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        h3 = (y2 - y1) / 3
        self.d.rounded_rectangle(n.bounds, radius=self.px(8), fill=ui.SURFACE, outline=ui.DIVIDER)
        self.d.rectangle((x1, y1 + h3, x2, y1 + 2 * h3), fill=(232, 240, 254))

    def scrim(self, n: Node) -> None:
        overlay = Image.new("RGBA", self.img.size, (0, 0, 0, 110))
        base = self.img.convert("RGBA")
        base.alpha_composite(overlay)
        self.img.paste(base.convert(self.img.mode))

    def dialog(self, n: Node) -> None:
        self.d.rounded_rectangle(n.bounds, radius=self.px(24), fill=ui.SURFACE)

    def fab(self, n: Node) -> None:
        self.d.rounded_rectangle(n.bounds, radius=self.px(16), fill=(194, 231, 255))
        self._text(n.bounds, n.style.get("glyph", "+"), 28, ui.PRIMARY_DARK, bold=True, align="center")

    def key(self, n: Node) -> None:
        s = n.style
        self.d.rounded_rectangle(n.bounds, radius=self.px(6), fill=s.get("color", (255, 255, 255)))
        self._text(n.bounds, s.get("label", n.text or n.desc), s.get("size", 20), ui.TEXT, align="center")

    def slider(self, n: Node) -> None:
        x1, y1, x2, y2 = n.bounds
        cy = (y1 + y2) // 2
        frac = float(n.style.get("frac", 0))
        kx = int(x1 + frac * (x2 - x1))
        self.d.rounded_rectangle((x1, cy - self.px(3), x2, cy + self.px(3)), radius=self.px(3), fill=(189, 193, 198))
        self.d.rounded_rectangle((x1, cy - self.px(3), kx, cy + self.px(3)), radius=self.px(3), fill=ui.PRIMARY)
        r = self.px(10)
        self.d.ellipse((kx - r, cy - r, kx + r, cy + r), fill=ui.PRIMARY)

    def bubble(self, n: Node) -> None:
        mine = n.style.get("mine")
        self.d.rounded_rectangle(n.bounds, radius=self.px(16), fill=(210, 227, 252) if mine else (232, 234, 237))
        x1, y1, x2, y2 = n.bounds
        self._text((x1 + self.px(12), y1 + self.px(6), x2 - self.px(12), y2 - self.px(6)), n.text, 16, ui.TEXT,
                   wrap=True)

    def image_block(self, n: Node) -> None:
        """A product or file thumbnail: a tinted block with a big glyph."""
        s = n.style
        self.d.rounded_rectangle(n.bounds, radius=self.px(8), fill=s.get("color", (232, 234, 237)))
        self._text(n.bounds, s.get("glyph", ""), 22 * s.get("zoom", 1), ui.TEXT_2, align="center")


def _shift(n: Node, dx: int, dy: int) -> Node:
    """A shallow copy of a node moved by (dx, dy), children excluded (they draw themselves)."""
    x1, y1, x2, y2 = n.bounds
    copy = Node((x1 + dx, y1 + dy, x2 + dx, y2 + dy), paint=n.paint, style=n.style, text=n.text, desc=n.desc)
    return copy


def render(root: Node, size: tuple[int, int], dp: float, dark: bool = False) -> Image.Image:
    """The screen as an image; ``dark`` draws it in the dark theme (Settings > Display > Dark theme)."""
    img = Image.new("RGB", size, dark_fill(ui.BACKGROUND) if dark else ui.BACKGROUND)
    Painter(img, dp, dark).draw(root)
    return img


def encode_png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    # compress_level 1: a screenshot is encoded on every step; speed matters more than a few KB
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


# What a phone's `screencap -p` does (frameworks/base/cmds/screencap/screencap.cpp): the RGBA_8888
# frame through AndroidBitmap_compress(PNG, quality 100, which a PNG ignores), i.e. Skia's PNG
# encoder with its default options (SkPngEncoder.h: fZLibLevel = 6 and all five row filters,
# "matches libpng's default"). Pillow's PNG writer at level 6 filters adaptively as libpng does.
# The sim encodes at the fast level 1 unless told (`sim serve --screencap-png-level 6`, as the
# settle bench does to cost the PNG path as a phone would): its tests and demo grab PNGs often.
PHONE_SCREENCAP_PNG_LEVEL = 6
SCREENCAP_PNG_LEVEL = 1


def encode_screencap_png(img: Image.Image, level: int = SCREENCAP_PNG_LEVEL) -> bytes:
    """The frame as a phone's ``screencap -p`` writes it: RGBA (alpha 255), zlib ``level``."""
    buf = io.BytesIO()
    img.convert("RGBA").save(buf, format="PNG", compress_level=level)
    return buf.getvalue()
