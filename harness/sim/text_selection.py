"""Selecting a field's text on the simulated phone: a long press selects all of it and shows the
floating toolbar (Cut, Copy, Paste), as Android's selection toolbar does; ``clear_text`` empties
the focused field.

:class:`TextSelection` is a part of :class:`harness.sim.phone.SimPhone` (its methods run on the
phone, which holds the focus, the clipboard and the lock).
"""

from __future__ import annotations

from harness.sim import ui
from harness.sim.ui import UI, Node


class TextSelection:
    """Text selection, mixed into :class:`harness.sim.phone.SimPhone`."""

    def select_all(self, key: str) -> None:
        """A long press on a field: focus it, select all its text and show the text actions
        (Cut, Copy, Paste), as Android's selection toolbar does."""
        self.focus_key = key
        self.text_menu = key

    def _text_actions(self, content: UI) -> Node:
        """The floating toolbar over a field whose text is selected: Cut, Copy, Paste."""
        node = self._focused
        assert node is not None
        zh = self.locale == "zh"
        has_text = bool(node.value)
        items = ([("剪切" if zh else "Cut", self._cut, "cut"), ("复制" if zh else "Copy", self._copy, "copy")] if has_text else [])
        if self.clipboard:
            items.append(("粘贴" if zh else "Paste", self._paste, "paste"))
        if not items:
            items = [("全选" if zh else "Select all", lambda: None, "select_all")]
        x1, y1, x2, _ = node.visible_bounds()
        bar_h = int(44 * self.dp)
        top = y1 - bar_h - int(4 * self.dp)
        if top < content.top:
            top = node.visible_bounds()[3] + int(4 * self.dp)
        each = int(84 * self.dp)
        bar = Node((x1, top, min(self.width, x1 + each * len(items)), top + bar_h), cls="android.widget.LinearLayout",
                   package=self.foreground, rid="android:id/floating_toolbar_menu_item_container", paint="card")
        for i, (label, cb, rid) in enumerate(items):
            bx = x1 + i * each
            bar.children.append(Node((bx, top, bx + each, top + bar_h), cls="android.widget.Button", text=label,
                                     rid=f"android:id/{rid}", package=self.foreground, clickable=True, focusable=True,
                                     on_click=cb, paint="label",
                                     style={"size": 15, "color": ui.TEXT, "align": "center"}))
        return bar

    def _selected_field(self) -> Node | None:
        node = self._focused_field()
        return node if node is not None and self.text_menu == self.focus_key else None

    def _cut(self) -> None:
        node = self._selected_field()
        if node is not None:
            self.clipboard = node.value
            node.on_text("")
        self.text_menu = None

    def _copy(self) -> None:
        node = self._selected_field()
        if node is not None:
            self.clipboard = node.value
        self.text_menu = None

    def _paste(self) -> None:
        node = self._selected_field()
        if node is not None and node.on_text is not None:
            node.on_text(self.clipboard)  # replaces the selection (all of the text)
        self.text_menu = None

    def clear_text(self) -> None:
        """Empty the focused field (uiautomator2's ``clear_text``, ADBKeyboard's ADB_CLEAR_TEXT)."""
        with self.lock:
            def clear() -> None:
                node = self._focused_field()
                if node is not None and node.on_text is not None:
                    node.on_text("")
                self.text_menu = None
            self._mutate(clear)
