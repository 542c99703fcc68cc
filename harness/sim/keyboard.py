"""The simulated phone's on-screen keyboard: an input method with letters, two symbol pages and a
pinyin mode, shown while a text field has focus.

It behaves as phone keyboards do (Gboard, LatinIME, the Chinese pinyin keyboards): Shift capitalises
the next letter; ``?123`` and ``=\\<`` switch to the symbol pages and ``ABC`` back; the globe key
switches between English and 中 (pinyin). In pinyin mode letters compose a syllable shown in the
candidate strip with the characters it may stand for (``harness.sim.pinyin``); tapping one commits
it, ``‹``/``›`` page through them, space commits the first, Enter commits the letters as typed and
Delete removes the last letter. The field only ever holds committed text, so what a field shows is
what was typed. Chinese mode has full-width punctuation (，。！？…). Composition, Shift and the
symbol page reset when focus moves to another field; the language stays until the phone resets.

Every key is a node of the accessibility tree (package ``com.android.inputmethod.latin``): a
character key's content-desc is its character, other keys are named (``Shift``, ``Delete``,
``Symbols``, ``Letters``, ``More symbols``, ``Language``, ``Space``, ``Enter``); candidates are
``id/candidate`` nodes whose text is the character.
"""

from __future__ import annotations

from typing import Callable

from harness.sim import pinyin
from harness.sim.app_host import PhoneParts
from harness.sim.ui import Node


PKG = "com.android.inputmethod.latin"
STRIP_DP = 40
PAGE = 5  # candidates shown at once
KEY_COLOR, MOD_COLOR, ENTER_COLOR = (255, 255, 255), (171, 177, 186), (138, 180, 248)

LETTER_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
SYMBOL_ROWS = {
    ("en", "symbols"): ("1234567890", "@#$_&-+()/", "*\"':;!?"),
    ("en", "symbols2"): ("~`|^={}[]\\", "<>%€£¥°•", "…§¶×÷"),
    ("zh", "symbols"): ("1234567890", "@#￥_&-+（）/", "、“”：；！？"),
    ("zh", "symbols2"): ("~`|^={}【】\\", "《》%‘’·—…", "「」『』"),
}
COMMA = {"en": ",", "zh": "，"}
PERIOD = {"en": ".", "zh": "。"}


class SoftKeyboard:
    def __init__(self, phone: PhoneParts):
        self.phone = phone
        self.lang = "en"
        self.reset(phone.locale)

    def reset(self, locale: str) -> None:
        """The keyboard of a phone set to ``locale``: pinyin for Chinese, English otherwise."""
        self.lang = "zh" if locale == "zh" else "en"
        self._field: str | None = None
        self._clear()

    def _clear(self) -> None:
        self.layout = "letters"
        self.shift = False
        self.composing = ""
        self.page = 0

    def field_left(self) -> None:
        """Focus left the field (the keyboard hid): what was being composed is dropped."""
        self._field = None
        self._clear()

    def state(self) -> dict[str, object]:
        return {"language": self.lang, "layout": self.layout, "shift": self.shift, "composing": self.composing}

    # --- what keys do (called with the phone's lock held) ---------------------------------------
    def _commit(self, text: str) -> None:
        self.phone.type_text(text)

    def _letter(self, ch: str) -> None:
        if self.shift:
            self.shift = False
            self._commit(ch.upper())  # a capital goes in as it is, in pinyin mode too
        elif self.lang == "zh":
            self.composing += ch
            self.page = 0
        else:
            self._commit(ch)

    def _char(self, ch: str) -> None:
        self._flush()
        self._commit(ch)

    def _flush(self) -> None:
        """Commit what is being composed as typed (a symbol or Enter ends the syllable)."""
        if self.composing:
            text, self.composing, self.page = self.composing, "", 0
            self._commit(text)

    def _pick(self, ch: str) -> None:
        self.composing, self.page = "", 0
        self._commit(ch)

    def _space(self) -> None:
        if self.composing:
            found = pinyin.candidates(self.composing)
            self._pick(found[0]) if found else self._flush()
        else:
            self._commit(" ")

    def _delete(self) -> None:
        if self.composing:
            self.composing = self.composing[:-1]
            self.page = 0
        else:
            self.phone.press_key("DEL")

    def _enter(self) -> None:
        if self.composing:
            self._flush()
        else:
            self.phone.press_key("ENTER")

    def _toggle_shift(self) -> None:
        self.shift = not self.shift

    def _switch(self, layout: str) -> None:
        self.layout = layout
        self.shift = False

    def _language(self) -> None:
        self._flush()
        self.lang = "en" if self.lang == "zh" else "zh"
        self.layout = "letters"

    def _turn(self, delta: int) -> None:
        pages = max(1, -(-len(pinyin.candidates(self.composing)) // PAGE))
        self.page = min(max(self.page + delta, 0), pages - 1)

    # --- the view -------------------------------------------------------------------------------
    def build(self, y1: int, y2: int) -> Node:
        ph = self.phone
        if ph.focus_key != self._field:  # another field: start afresh (the language stays)
            self._field = ph.focus_key
            self._clear()
        w, dp = ph.width, ph.dp
        kb = Node((0, y1, w, y2), cls="android.inputmethodservice.KeyboardView", package=PKG,
                  rid=f"{PKG}:id/keyboard_view", paint="fill", style={"color": (210, 213, 219)})
        strip_h = int(STRIP_DP * dp)
        self._strip(kb, y1, y1 + strip_h)
        pad = int(4 * dp)
        top = y1 + strip_h
        row_h = (y2 - top - pad) // 4
        unit = (w - pad) // 10

        def key(x: int, r: int, width: float, desc: str, action: Callable[[], None], label: str | None = None,
                color: tuple[int, int, int] = KEY_COLOR, size: int = 20) -> None:
            yy = top + pad + r * row_h
            x2 = min(int(x + width * unit), w - pad)
            kb.children.append(Node((x + pad, yy, x2, yy + row_h - pad), cls="android.widget.Button", desc=desc,
                                    package=PKG, clickable=True, on_click=action, paint="key",
                                    style={"label": label if label is not None else desc, "color": color, "size": size}))

        def row(r: int, chars: str, start: int, fn: Callable[[str], Callable[[], None]]) -> None:
            for i, ch in enumerate(chars):
                key(start + i * unit, r, 1, ch, fn(ch))

        if self.layout == "letters":
            shown = (lambda c: c.upper()) if self.shift else (lambda c: c)
            for r, letters in enumerate(LETTER_ROWS):
                start = (w - unit * len(letters)) // 2 if r < 2 else unit * 3 // 2
                for i, ch in enumerate(letters):
                    key(start + i * unit, r, 1, shown(ch), lambda c=ch: self._letter(c))
            key(0, 2, 1.5, "Shift", self._toggle_shift, "⇧", ENTER_COLOR if self.shift else MOD_COLOR)
            mode = ("Symbols", "?123", lambda: self._switch("symbols"))
        else:
            rows = SYMBOL_ROWS[(self.lang, self.layout)]
            for r, chars in enumerate(rows):
                start = (w - unit * len(chars)) // 2 if r < 2 else unit * 3 // 2
                row(r, chars, start, lambda c: (lambda: self._char(c)))
            other = "symbols2" if self.layout == "symbols" else "symbols"
            key(0, 2, 1.5, "More symbols" if other == "symbols2" else "Symbols", lambda: self._switch(other),
                "=\\<" if other == "symbols2" else "?123", MOD_COLOR, 16)
            mode = ("Letters", "ABC", lambda: self._switch("letters"))
        key(w - unit * 3 // 2 - pad, 2, 1.5, "Delete", self._delete, "⌫", MOD_COLOR)
        x = 0
        for width, desc, action, label, color, size in (
                (1.5, mode[0], mode[2], mode[1], MOD_COLOR, 16),
                (1, "Language", self._language, "中" if self.lang == "en" else "EN", MOD_COLOR, 16),
                (1, COMMA[self.lang], lambda: self._char(COMMA[self.lang]), None, KEY_COLOR, 20),
                (4, "Space", self._space, "拼音" if self.lang == "zh" else "space", KEY_COLOR, 16),
                (1, PERIOD[self.lang], lambda: self._char(PERIOD[self.lang]), None, KEY_COLOR, 20),
                (1.5, "Enter", self._enter, "⏎", ENTER_COLOR, 20)):
            key(x, 3, width, desc, action, label, color, size)
            x += int(width * unit)
        return kb

    def _strip(self, kb: Node, y1: int, y2: int) -> None:
        """The candidate strip: the syllable being composed, a page of candidates, ‹ and ›."""
        ph = self.phone
        w, dp = ph.width, ph.dp
        strip = Node((0, y1, w, y2), cls="android.widget.LinearLayout", package=PKG, rid=f"{PKG}:id/candidates",
                     paint="fill", style={"color": (232, 234, 237)})
        kb.children.append(strip)
        if not self.composing:
            return
        lead, arrow = int(64 * dp), int(28 * dp)
        strip.children.append(Node((0, y1, lead, y2), cls="android.widget.TextView", text=self.composing,
                                   rid=f"{PKG}:id/composing", package=PKG, paint="label",
                                   style={"size": 15, "color": (60, 64, 67), "align": "center"}))
        found = pinyin.candidates(self.composing)
        shown = found[self.page * PAGE:(self.page + 1) * PAGE]
        cell = (w - lead - 2 * arrow) // PAGE
        for i, ch in enumerate(shown):
            x = lead + i * cell
            strip.children.append(Node((x, y1, x + cell, y2), cls="android.widget.TextView", text=ch,
                                       rid=f"{PKG}:id/candidate", package=PKG, clickable=True,
                                       on_click=lambda c=ch: self._pick(c), paint="key",
                                       style={"label": ch, "color": (232, 234, 237), "size": 20}))
        for k, (desc, glyph, delta) in enumerate((("Previous candidates", "‹", -1), ("More candidates", "›", 1))):
            x = w - (2 - k) * arrow
            strip.children.append(Node((x, y1, x + arrow, y2), cls="android.widget.ImageButton", desc=desc,
                                       rid=f"{PKG}:id/candidates_{'prev' if delta < 0 else 'next'}", package=PKG,
                                       clickable=True, on_click=lambda d=delta: self._turn(d), paint="key",
                                       style={"label": glyph, "color": (232, 234, 237), "size": 20}))
