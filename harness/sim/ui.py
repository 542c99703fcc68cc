"""The simulated phone's view tree and the builder apps use to lay out their screens.

One tree serves three purposes: it is drawn (``render.py``), dumped as uiautomator XML
(``dump.py``), and hit-tested for input (``phone.py``), so what a model sees, what the
accessibility tree says and what a tap does can never disagree.

Sizes are in dp; one dp is ``width / 360`` pixels, so a 1080-wide screen has 3 px per dp and a
1440-wide one 4 (the layout scales with the screen, as Android's does with density).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

Callback = Callable[[], None]

# Palette (Material-like; picked for contrast so a vision model can read every label).
PRIMARY = (26, 115, 232)
PRIMARY_DARK = (21, 87, 176)
ON_PRIMARY = (255, 255, 255)
SURFACE = (255, 255, 255)
BACKGROUND = (245, 246, 248)
TEXT = (32, 33, 36)
TEXT_2 = (95, 99, 104)
HINT = (154, 160, 166)
DIVIDER = (218, 220, 224)
DANGER = (197, 34, 31)
SUCCESS = (24, 128, 56)


@dataclass
class Node:
    """A view: what uiautomator reports about it, how it is painted, and what input does to it."""

    bounds: tuple[int, int, int, int]
    cls: str = "android.view.View"
    text: str = ""
    desc: str = ""
    rid: str = ""
    package: str = ""
    clickable: bool = False
    long_clickable: bool = False
    checkable: bool = False
    checked: bool = False
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    enabled: bool = True
    selected: bool = False
    password: bool = False
    children: list["Node"] = field(default_factory=list)
    # input
    on_click: Callback | None = None
    on_long_click: Callback | None = None
    on_double_click: Callback | None = None                # a view with a double-tap gesture (zoom, like)
    on_scroll: Callable[[int, int], None] | None = None  # (dx, dy) finger travel, + = towards left/up
    on_text: Callable[[str], None] | None = None          # a text field: the new full value
    on_submit: Callback | None = None                      # a text field: IME action / enter
    on_click_at: Callable[[int, int], None] | None = None  # a slider: where the tap landed
    value: str = ""                                        # a text field's current value
    # paint
    paint: str = "none"
    style: dict[str, Any] = field(default_factory=dict)
    clip: tuple[int, int, int, int] | None = None

    def contains(self, x: int, y: int) -> bool:
        x1, y1, x2, y2 = self.visible_bounds()
        return x1 <= x < x2 and y1 <= y < y2

    def visible_bounds(self) -> tuple[int, int, int, int]:
        if self.clip is None:
            return self.bounds
        x1, y1, x2, y2 = self.bounds
        cx1, cy1, cx2, cy2 = self.clip
        return max(x1, cx1), max(y1, cy1), min(x2, cx2), min(y2, cy2)

    def walk(self) -> Iterator["Node"]:
        yield self
        for c in self.children:
            yield from c.walk()


def label_dp(text: str, size_dp: float = 16) -> float:
    """Rough width of a one-line label in dp at ``size_dp``: CJK characters are about a full em
    wide, Latin ones a little over half (Noto Sans CJK's metrics), plus a margin for bold."""
    em = sum(1.0 if ord(ch) >= 0x2E80 else 0.58 for ch in text)
    return em * size_dp * 1.05


def _nonempty(b: tuple[int, int, int, int]) -> bool:
    return b[2] > b[0] and b[3] > b[1]


class UI:
    """Builds one screen of an app top to bottom.

    Widgets are placed in a column from ``top``; inside ``scroll_area`` they are offset by the
    area's scroll position and clipped to it (rows scrolled out of view disappear from the
    accessibility tree, as RecyclerView rows do)."""

    def __init__(self, phone: Any, package: str, top: int, bottom: int):
        self.phone = phone
        self.package = package
        self.w, self.h = phone.size
        self.dp = phone.dp  # width / 360, unless `wm density` overrides it
        self.top, self.bottom = top, bottom
        self.y = top
        self.root = Node((0, top, self.w, bottom), cls="android.widget.FrameLayout", package=package,
                         paint="fill", style={"color": BACKGROUND})
        self._parents: list[Node] = [self.root]
        self._scroll: dict[str, Any] | None = None
        self.overlays: list[Node] = []
        self.lang: str = phone.locale

    # --- helpers ------------------------------------------------------------------------------
    def px(self, dp: float) -> int:
        return int(round(dp * self.dp))

    def rid(self, name: str | None) -> str:
        return f"{self.package}:id/{name}" if name else ""

    def tr(self, en: str, zh: str) -> str:
        """Pick the string for the phone's language."""
        return zh if self.lang == "zh" else en

    def _add(self, node: Node) -> Node:
        node.package = node.package or self.package
        if self._scroll is not None:
            area = self._scroll
            node.clip = area["clip"]
            if not _nonempty(node.visible_bounds()):
                return node  # scrolled out of view: not drawn, not in the tree
        self._parents[-1].children.append(node)
        return node

    def _alloc(self, height_dp: float) -> tuple[int, int]:
        """Reserve a band of the column; returns (y1, y2) in screen pixels."""
        h = self.px(height_dp)
        if self._scroll is not None:
            area = self._scroll
            y1 = area["top"] + area["content"] - area["offset"]
            area["content"] += h
            return y1, y1 + h
        y1 = self.y
        self.y += h
        return y1, y1 + h

    @property
    def remaining(self) -> int:
        return max(0, self.bottom - self.y)

    # --- widgets ------------------------------------------------------------------------------
    def app_bar(self, title: str, back: Callback | None = None,
                actions: Sequence[tuple[str, str, Callback]] = ()) -> None:
        y1, y2 = self._alloc(56)
        bar = self._add(Node((0, y1, self.w, y2), cls="android.view.ViewGroup", rid=self.rid("toolbar"),
                             paint="fill", style={"color": PRIMARY}))
        x = self.px(16)
        if back is not None:
            bar.children.append(Node((0, y1, self.px(56), y2), cls="android.widget.ImageButton",
                                     desc=self.tr("Navigate up", "向上导航"), rid=self.rid("up"),
                                     package=self.package, clickable=True, focusable=True, on_click=back,
                                     paint="glyph", style={"glyph": "←", "color": ON_PRIMARY, "size": 24}))
            x = self.px(64)
        right = self.w - self.px(8)
        for label, name, cb in reversed(list(actions)):
            tw = self.px(12 + max(18, label_dp(label)))
            bar.children.append(Node((right - tw, y1, right, y2), cls="android.widget.Button", text=label,
                                     rid=self.rid(name), package=self.package, clickable=True, focusable=True,
                                     on_click=cb, paint="label",
                                     style={"color": ON_PRIMARY, "size": 15, "bold": True, "align": "center"}))
            right -= tw
        bar.children.append(Node((x, y1, right, y2), cls="android.widget.TextView", text=title,
                                 rid=self.rid("title"), package=self.package, paint="label",
                                 style={"color": ON_PRIMARY, "size": 20, "bold": True}))

    def selection_bar(self, count: int, on_exit: Callback,
                      actions: Sequence[tuple[str, str, Callback]] = ()) -> None:
        """The app bar of a list's selection mode: "N selected", back leaves the mode (``on_exit``),
        ``actions`` act on the selection."""
        self.app_bar(self.tr(f"{count} selected", f"已选择 {count} 项"), back=on_exit, actions=actions)

    def section(self, title: str) -> None:
        y1, y2 = self._alloc(40)
        self._add(Node((self.px(16), y1, self.w - self.px(16), y2), cls="android.widget.TextView", text=title,
                       paint="label", style={"color": PRIMARY, "size": 14, "bold": True, "valign": "bottom"}))

    def text(self, text: str, size: float = 16, bold: bool = False, color: tuple = TEXT,
             rid: str | None = None, align: str = "left", lines: int = 1, on_click: Callback | None = None,
             background: tuple | None = None) -> Node:
        height = size * 1.5 * lines + 12
        y1, y2 = self._alloc(height)
        node = Node((self.px(16), y1, self.w - self.px(16), y2), cls="android.widget.TextView", text=text,
                    rid=self.rid(rid), clickable=on_click is not None, on_click=on_click, paint="label",
                    style={"color": color, "size": size, "bold": bold, "align": align, "wrap": lines > 1,
                           "background": background})
        return self._add(node)

    def row(self, title: str, subtitle: str | None = None, *, on_click: Callback | None = None,
            rid: str | None = None, switch: bool | None = None, on_toggle: Callback | None = None,
            checkbox: bool | None = None, icon: str | None = None, icon_color: tuple | None = None,
            trailing: str | None = None, chevron: bool = False, on_long_click: Callback | None = None,
            title_color: tuple = TEXT, desc: str = "", selected: bool = False) -> Node:
        """A list row: optional icon, title, subtitle, and a switch, checkbox, trailing text or
        chevron on the right. The row is one clickable node (as Settings rows are); the switch is a
        separate checkable child that toggles on its own tap."""
        y1, y2 = self._alloc(72 if subtitle else 56)
        row = self._add(Node((0, y1, self.w, y2), cls="android.widget.LinearLayout", rid=self.rid(rid),
                             clickable=on_click is not None or on_toggle is not None and switch is None,
                             long_clickable=on_long_click is not None, focusable=on_click is not None,
                             on_click=on_click, on_long_click=on_long_click, desc=desc, selected=selected,
                             paint="row", style={"divider": True, "selected": selected}))
        x = self.px(16)
        if icon is not None:
            s = self.px(40)
            cy = (y1 + y2) // 2
            row.children.append(Node((x, cy - s // 2, x + s, cy + s // 2), cls="android.widget.ImageView",
                                     package=self.package, paint="avatar",
                                     style={"glyph": icon, "color": icon_color or PRIMARY}))
            x += s + self.px(16)
        right = self.w - self.px(16)
        if switch is not None:
            sw, sh = self.px(52), self.px(32)
            cy = (y1 + y2) // 2
            row.children.append(Node((right - sw, cy - sh // 2, right, cy + sh // 2), cls="android.widget.Switch",
                                     text=self.tr("ON", "开启") if switch else self.tr("OFF", "关闭"),
                                     rid=self.rid(f"{rid}_switch" if rid else "switch_widget"),
                                     package=self.package, checkable=True, checked=switch, clickable=True,
                                     focusable=True, on_click=on_toggle, paint="switch", style={"on": switch}))
            right -= sw + self.px(16)
            if on_click is None and on_toggle is not None:
                row.on_click = on_toggle
                row.clickable = True
        if checkbox is not None:
            s = self.px(24)
            cy = (y1 + y2) // 2
            row.children.append(Node((right - s, cy - s // 2, right, cy + s // 2), cls="android.widget.CheckBox",
                                     rid=self.rid(f"{rid}_check" if rid else "checkbox"), package=self.package,
                                     checkable=True, checked=checkbox, clickable=True, focusable=True,
                                     on_click=on_toggle or on_click, paint="checkbox", style={"on": checkbox}))
            right -= s + self.px(16)
        if trailing is not None:
            tw = self.px(8 + label_dp(trailing, 15))
            row.children.append(Node((right - tw, y1, right, y2), cls="android.widget.TextView", text=trailing,
                                     package=self.package, paint="label",
                                     style={"color": TEXT_2, "size": 15, "align": "right"}))
            right -= tw + self.px(8)
        if chevron:
            row.children.append(Node((right - self.px(16), y1, right, y2), cls="android.widget.ImageView",
                                     package=self.package, paint="glyph",
                                     style={"glyph": "›", "color": TEXT_2, "size": 24}))
            right -= self.px(24)
        if subtitle:
            mid = (y1 + y2) // 2
            row.children.append(Node((x, y1 + self.px(10), right, mid + self.px(2)), cls="android.widget.TextView",
                                     text=title, rid=self.rid("title"), package=self.package, paint="label",
                                     style={"color": title_color, "size": 17}))
            row.children.append(Node((x, mid + self.px(2), right, y2 - self.px(8)), cls="android.widget.TextView",
                                     text=subtitle, rid=self.rid("summary"), package=self.package, paint="label",
                                     style={"color": TEXT_2, "size": 14}))
        else:
            row.children.append(Node((x, y1, right, y2), cls="android.widget.TextView", text=title,
                                     rid=self.rid("title"), package=self.package, paint="label",
                                     style={"color": title_color, "size": 17}))
        return row

    def field(self, key: str, value: str, hint: str, on_change: Callable[[str], None], *,
              on_submit: Callback | None = None, rid: str | None = None, password: bool = False,
              label: str | None = None, lines: int = 1, clear: bool = False) -> Node:
        """A text field. Tapping it focuses it (the keyboard appears); typed text goes to
        ``on_change`` with the full new value; enter calls ``on_submit``. A long press selects all
        its text (typing then replaces it, delete removes it; Cut/Copy/Paste show above it). With
        ``clear``, a clear (x) button sits at its right end while it holds text, as Material text
        fields with a clear-text end icon and search boxes have; it empties and focuses the field."""
        if label:
            y1, y2 = self._alloc(22)
            self._add(Node((self.px(16), y1, self.w - self.px(16), y2), cls="android.widget.TextView", text=label,
                           paint="label", style={"color": TEXT_2, "size": 13}))
        focus_key = f"{self.package}/{key}"
        focused = self.phone.focus_key == focus_key
        selected = focused and self.phone.text_menu == focus_key and bool(value)
        y1, y2 = self._alloc(16 + 28 * lines)
        shown = "•" * len(value) if password and value else value

        def focus() -> None:
            self.phone.set_focus(focus_key)

        x2 = self.w - self.px(16)
        clear_box = None
        if clear and value:
            size = self.px(40)
            clear_box = (x2 - size, y1 + self.px(4), x2, y2 - self.px(4))
            x2 -= size + self.px(4)
        node = Node((self.px(16), y1 + self.px(4), x2, y2 - self.px(4)), cls="android.widget.EditText",
                    text=shown if value else hint, rid=self.rid(rid or key), clickable=True, focusable=True,
                    long_clickable=True, focused=focused, password=password, on_click=focus,
                    on_long_click=lambda: self.phone.select_all(focus_key), on_text=on_change, on_submit=on_submit,
                    value=value, paint="field",
                    style={"focused": focused, "empty": not value, "wrap": lines > 1, "selected": selected})
        if focused:
            area = (self._scroll["key"], self._scroll["clip"]) if self._scroll is not None else None
            self.phone.register_focused(node, area)
        self._add(node)
        if clear_box is not None:
            def wipe() -> None:
                on_change("")
                self.phone.set_focus(focus_key)

            self._add(Node(clear_box, cls="android.widget.ImageButton", desc=self.tr("Clear text", "清除文字"),
                           rid=self.rid(f"{rid or key}_clear"), clickable=True, focusable=True, on_click=wipe,
                           paint="glyph", style={"glyph": "×", "color": TEXT_2, "size": 24}))
        return node

    def button(self, label: str, on_click: Callback | None, *, rid: str | None = None, style: str = "filled",
               enabled: bool = True) -> Node:
        y1, y2 = self._alloc(64)
        return self._add(Node((self.px(16), y1 + self.px(8), self.w - self.px(16), y2 - self.px(8)),
                              cls="android.widget.Button", text=label, rid=self.rid(rid), clickable=enabled,
                              focusable=True, enabled=enabled, on_click=on_click if enabled else None,
                              paint="button", style={"kind": style, "enabled": enabled}))

    def buttons(self, items: Sequence[tuple[str, Callback | None, str | None, str]]) -> list[Node]:
        """Buttons side by side: (label, callback, rid, style) each."""
        y1, y2 = self._alloc(64)
        n = max(1, len(items))
        gap = self.px(12)
        avail = self.w - self.px(32) - gap * (n - 1)
        each = avail // n
        out = []
        x = self.px(16)
        for label, cb, rid, style in items:
            out.append(self._add(Node((x, y1 + self.px(8), x + each, y2 - self.px(8)), cls="android.widget.Button",
                                      text=label, rid=self.rid(rid), clickable=cb is not None, focusable=True,
                                      on_click=cb, paint="button", style={"kind": style, "enabled": cb is not None})))
            x += each + gap
        return out

    def chips(self, items: Sequence[tuple[str, bool, Callback, str | None]]) -> list[Node]:
        """A row of selectable chips or tabs: (label, selected, callback, rid)."""
        y1, y2 = self._alloc(48)
        n = max(1, len(items))
        each = (self.w - self.px(16)) // n
        out = []
        for i, (label, sel, cb, rid) in enumerate(items):
            x = self.px(8) + i * each
            out.append(self._add(Node((x, y1 + self.px(6), x + each - self.px(6), y2 - self.px(6)),
                                      cls="android.widget.TextView", text=label, rid=self.rid(rid), clickable=True,
                                      focusable=True, selected=sel, on_click=cb, paint="chip", style={"on": sel})))
        return out

    def tiles(self, items: Sequence[tuple[str, str, tuple, str | None, Callback]], *, cols: int | None = None,
              height_dp: float = 88, icon_dp: float = 44, label_top_dp: float = 56, label_size: float = 13) -> list[Node]:
        """Shortcut tiles, a round icon over a label, ``cols`` to a band (default: all in one):
        (label, glyph, icon colour, rid, callback) each."""
        cols = cols or max(1, len(items))
        out = []
        for start in range(0, len(items), cols):
            y1, y2 = self._alloc(height_dp)
            each = (self.w - self.px(16)) // cols
            for i, (label, glyph, color, rid, cb) in enumerate(items[start:start + cols]):
                x1 = self.px(8) + i * each
                tile = self._add(Node((x1, y1, x1 + each, y2), cls="android.widget.LinearLayout", rid=self.rid(rid),
                                      desc=label, clickable=True, focusable=True, on_click=cb))
                s = self.px(icon_dp)
                cx = x1 + each // 2
                tile.children.append(Node((cx - s // 2, y1 + self.px(8), cx + s // 2, y1 + self.px(8) + s),
                                          cls="android.widget.ImageView", package=self.package, paint="avatar",
                                          style={"glyph": glyph, "color": color}))
                tile.children.append(Node((x1, y1 + self.px(label_top_dp), x1 + each, y2 - self.px(4)),
                                          cls="android.widget.TextView", text=label, package=self.package,
                                          paint="label", style={"color": TEXT, "size": label_size, "align": "center"}))
                out.append(tile)
        return out

    def slider(self, value: int, on_change: Callable[[int], None], *, rid: str | None = None,
               desc: str = "", lo: int = 0, hi: int = 100) -> Node:
        """A horizontal slider: a tap sets the value in proportion to where it lands."""
        y1, y2 = self._alloc(56)
        x1, x2 = self.px(24), self.w - self.px(24)

        def at(x: int, y: int) -> None:
            frac = min(max((x - x1) / max(1, x2 - x1), 0.0), 1.0)
            on_change(int(round(lo + frac * (hi - lo))))

        return self._add(Node((x1, y1, x2, y2), cls="android.widget.SeekBar", text=str(value), desc=desc,
                              rid=self.rid(rid), clickable=True, focusable=True, on_click=lambda: None,
                              on_click_at=at, paint="slider",
                              style={"frac": (value - lo) / max(1, hi - lo)}))

    def spacer(self, dp: float) -> None:
        self._alloc(dp)

    def divider(self) -> None:
        y1, y2 = self._alloc(1)
        self._add(Node((0, y1, self.w, y2), paint="fill", style={"color": DIVIDER}))

    def custom(self, height_dp: float, make: Callable[[int, int], Node]) -> Node:
        """A widget the app draws itself: reserves ``height_dp`` of the column and adds the node
        ``make(y1, y2)`` builds for that band (screen pixels), children and all. In a scroll area
        it is clipped, and left out when scrolled out of view, like every other widget."""
        y1, y2 = self._alloc(height_dp)
        return self._add(make(y1, y2))

    def block(self, height_dp: float, *, left: float = 0, top: float = 0, right: float = 0, bottom: float = 0,
              cls: str = "android.widget.LinearLayout", rid: str | None = None, **attrs: Any) -> Node:
        """A row (or card) with children of the app's own: one node filling a band of ``height_dp``
        less the margins ``left``, ``top``, ``right`` and ``bottom`` (dp); ``attrs`` are the node's
        other fields. The app appends its children inside ``node.bounds``."""
        return self.custom(height_dp, lambda y1, y2: Node(
            (self.px(left), y1 + self.px(top), self.w - self.px(right), y2 - self.px(bottom)),
            cls=cls, rid=self.rid(rid), **attrs))

    def key_value(self, key: str, value: str, *, rid: str | None = None, height_dp: float = 48,
                  split_pct: int = 30, divider: bool = True, key_style: dict[str, Any] | None = None,
                  value_style: dict[str, Any] | None = None) -> Node:
        """A label on the left and its value right-aligned after ``split_pct`` percent of the width
        (a receipt or summary line); ``rid`` names the value."""
        row = self.block(height_dp, **({"paint": "row", "style": {"divider": True}} if divider else {"paint": "none"}))
        _, y1, _, y2 = row.bounds
        mid = self.w * split_pct // 100
        row.children.append(Node((self.px(16), y1, mid, y2), cls="android.widget.TextView", text=key,
                                 package=self.package, paint="label", style=key_style or {"color": TEXT_2, "size": 15}))
        row.children.append(Node((mid, y1, self.w - self.px(16), y2), cls="android.widget.TextView", text=value,
                                 rid=self.rid(rid), package=self.package, paint="label",
                                 style={"color": TEXT, "size": 16, **(value_style or {}), "align": "right"}))
        return row

    def big_icon(self, glyph: str, color: tuple, *, height_dp: float = 104, size_dp: float = 72,
                 top_dp: float = 24) -> Node:
        """A large round icon centred in its band (a done or success mark)."""
        s = self.px(size_dp)
        cx = self.w // 2
        return self.custom(height_dp, lambda y1, y2: Node(
            (cx - s // 2, y1 + self.px(top_dp), cx + s // 2, y1 + self.px(top_dp) + s),
            cls="android.widget.ImageView", paint="avatar", style={"glyph": glyph, "color": color}))

    def wheels(self, wheels: Sequence[tuple[str, Sequence[str], int, Callable[[int], None]]],
               height_dp: float = 168) -> list[Node]:
        """Number wheels side by side (a time picker): (rid, values, index, on_change(new_index)).

        Three values are visible, the middle one selected. A finger moving up by one item height
        advances one value (wrapping); moving down goes back."""
        y1, y2 = self._alloc(height_dp)
        n = len(wheels)
        each = (self.w - self.px(64)) // max(1, n)
        out = []
        item_h = (y2 - y1) / 3.0
        for i, (rid, values, index, change) in enumerate(wheels):
            x = self.px(32) + i * each
            vals = list(values)

            def scroll(dx: int, dy: int, vals=vals, index=index, change=change) -> None:
                steps = int(round(dy / item_h))
                if steps:
                    change((index + steps) % len(vals))

            wheel = Node((x + self.px(8), y1, x + each - self.px(8), y2), cls="android.widget.NumberPicker",
                         rid=self.rid(rid), scrollable=True, focusable=True, on_scroll=scroll, paint="wheel",
                         package=self.package)
            for k in (-1, 0, 1):
                v = vals[(index + k) % len(vals)]
                top = int(y1 + (k + 1) * item_h)
                wheel.children.append(Node((wheel.bounds[0], top, wheel.bounds[2], int(top + item_h)),
                                           cls="android.widget.EditText" if k == 0 else "android.widget.Button",
                                           text=v, package=self.package, selected=k == 0, paint="label",
                                           style={"align": "center", "size": 30 if k == 0 else 22, "bold": k == 0,
                                                  "color": TEXT if k == 0 else HINT}))
            out.append(self._add(wheel))
        return out

    @contextmanager
    def scroll_area(self, key: str, height_dp: float | None = None, rid: str | None = None) -> Iterator[Node]:
        """A vertically scrolling list filling the rest of the screen (or ``height_dp``)."""
        top = self.y
        bottom = self.bottom if height_dp is None else min(self.bottom, top + self.px(height_dp))
        skey = f"{self.package}/{key}"
        offset = self.phone.scroll_offsets.get(skey, 0)
        area = Node((0, top, self.w, bottom), cls="androidx.recyclerview.widget.RecyclerView", rid=self.rid(rid or key),
                    scrollable=True, focusable=True, paint="none")
        self._parents[-1].children.append(area)
        self._parents.append(area)
        self._scroll = {"top": top, "content": 0, "offset": offset, "clip": (0, top, self.w, bottom), "key": skey}
        try:
            yield area
        finally:
            content = self._scroll["content"]
            self._scroll = None
            self._parents.pop()
            self.y = bottom
            max_off = max(0, content - (bottom - top))
            area.scrollable = max_off > 0

            def scroll(dx: int, dy: int, skey=skey, max_off=max_off) -> None:
                cur = self.phone.scroll_offsets.get(skey, 0)
                self.phone.scroll_offsets[skey] = int(min(max(cur + dy, 0), max_off))

            area.on_scroll = scroll
            if offset > max_off:
                self.phone.scroll_offsets[skey] = max_off

    def fab(self, label: str, on_click: Callback, rid: str = "fab", glyph: str = "+") -> Node:
        s = self.px(56)
        x2, y2 = self.w - self.px(16), self.bottom - self.px(16)
        node = Node((x2 - s, y2 - s, x2, y2), cls="android.widget.ImageButton", desc=label, rid=self.rid(rid),
                    package=self.package, clickable=True, focusable=True, on_click=on_click, paint="fab",
                    style={"glyph": glyph})
        self.overlays.append(node)
        return node

    def popup_menu(self, items: Sequence[tuple[str, Callback, str]], on_dismiss: Callback, rid: str = "menu") -> Node:
        """An overflow menu in the top right corner: one row per (label, callback, rid). A tap
        anywhere outside it closes it (``on_dismiss``), as a PopupWindow does."""
        catcher = Node((0, 0, self.w, self.h), cls="android.widget.FrameLayout", package=self.package,
                       on_click=on_dismiss, paint="none")
        item_h = self.px(52)
        x2 = self.w - self.px(8)
        x1 = x2 - self.px(196)
        y1 = self.top + self.px(8)
        card = Node((x1, y1, x2, y1 + item_h * len(items) + self.px(16)), cls="android.widget.ListView",
                    rid=self.rid(rid), package=self.package, paint="card")
        for i, (label, cb, item_rid) in enumerate(items):
            yy = y1 + self.px(8) + i * item_h
            card.children.append(Node((x1 + self.px(16), yy, x2 - self.px(8), yy + item_h),
                                      cls="android.widget.TextView", text=label, rid=self.rid(item_rid),
                                      package=self.package, clickable=True, focusable=True, on_click=cb,
                                      paint="label", style={"size": 17, "color": TEXT}))
        catcher.children.append(card)
        self.overlays.append(catcher)
        return card

    def dialog(self, title: str, message: str, buttons: Sequence[tuple[str, Callback, str | None]],
               rid: str = "dialog", danger: bool = False) -> Node:
        """A modal dialog over the screen; taps outside it do nothing."""
        w = self.w - self.px(64)
        lines = max(1, min(6, len(message) // 28 + 1 + message.count("\n")))
        h = self.px(72 + 24 * lines + 64)
        x1 = (self.w - w) // 2
        y1 = (self.top + self.bottom) // 2 - h // 2
        scrim = Node((0, 0, self.w, self.h), cls="android.widget.FrameLayout", package=self.package,
                     paint="scrim", clickable=False)
        box = Node((x1, y1, x1 + w, y1 + h), cls="android.widget.FrameLayout", rid=self.rid(rid),
                   package=self.package, paint="dialog")
        box.children.append(Node((x1 + self.px(24), y1 + self.px(20), x1 + w - self.px(24), y1 + self.px(52)),
                                 cls="android.widget.TextView", text=title, rid="android:id/alertTitle",
                                 package=self.package, paint="label", style={"size": 20, "bold": True, "color": TEXT}))
        box.children.append(Node((x1 + self.px(24), y1 + self.px(60), x1 + w - self.px(24), y1 + h - self.px(64)),
                                 cls="android.widget.TextView", text=message, rid="android:id/message",
                                 package=self.package, paint="label", style={"size": 16, "color": TEXT_2, "wrap": True}))
        bx2 = x1 + w - self.px(16)
        for i, (label, cb, brid) in enumerate(reversed(list(buttons))):
            bw = self.px(24 + max(27, label_dp(label)))
            is_main = i == 0
            box.children.append(Node((bx2 - bw, y1 + h - self.px(56), bx2, y1 + h - self.px(12)),
                                     cls="android.widget.Button", text=label,
                                     rid=brid if brid and ":" in brid else (f"android:id/button{i + 1}" if not brid else self.rid(brid)),
                                     package=self.package, clickable=True, focusable=True, on_click=cb,
                                     paint="button", style={"kind": ("danger" if danger else "text") if is_main else "text"}))
            bx2 -= bw + self.px(8)
        scrim.children.append(box)
        scrim.style["modal"] = True
        self.overlays.append(scrim)
        return box


def finalize(root: Node) -> Node:
    """Give every descendant of a clipped node the same clip, and drop nodes scrolled fully out of
    view, so drawing, the dump and hit-testing all agree on what is visible."""

    def visit(n: Node, clip: tuple[int, int, int, int] | None) -> None:
        if clip is not None:
            if n.clip is None:
                n.clip = clip
            else:
                a, b = n.clip, clip
                n.clip = (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))
        kept = []
        for c in n.children:
            visit(c, n.clip)
            if _nonempty(c.visible_bounds()):
                kept.append(c)
        n.children = kept

    visit(root, None)
    return root
