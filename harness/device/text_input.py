"""Typing text on a device without ever letting the text run as a shell command.

Strategies, best first (FIELD_NOTES section 9):
1. ADBKeyboard's broadcast ``am broadcast -a ADB_INPUT_B64 --es msg <base64>`` when that IME is
   installed (``ime list -a -s`` lists installed IMEs, enabled or not; ``ime list -s`` only the
   enabled ones): any Unicode, and base64 carries nothing a shell could read as syntax. Switching
   to it goes through ``switch_ime``, which the device journals so the run can switch back.
2. uiautomator2's ``send_keys`` (clipboard/IME) when the uiautomator2 backend is in use.
3. ``input text`` only for plain printable ASCII without ``%`` (Android's ``input text`` turns
   ``%s`` into a space and cannot type anything else).

``TypeText.clear`` empties the field first: ADBKeyboard's ``ADB_CLEAR_TEXT`` (when it is the
current IME), uiautomator2's ``clear_text`` (its ``clearInputText`` JSON-RPC), or end + delete key
events.

Every argument goes to the device as a separate argv element that the caller shell-quotes
(adbutils joins lists with ``shlex.quote``), so ``'; rm -rf /sdcard; echo '`` is typed, not run.
"""

from __future__ import annotations

import base64
import string
from typing import Callable, Protocol

from harness.core.actions import ActionError

ADB_IME = "com.android.adbkeyboard/.AdbIME"
_SAFE_ASCII = set(string.ascii_letters + string.digits + string.punctuation + " ") - {"%"}


def is_plain_ascii(text: str) -> bool:
    return all(ch in _SAFE_ASCII for ch in text)


def input_text_argv(text: str) -> list[str]:
    """argv for Android's ``input text``: spaces become ``%s`` (input's own escape)."""
    if not is_plain_ascii(text):
        raise ActionError("input text can only type printable ASCII without '%'")
    return ["input", "text", text.replace(" ", "%s")]


def adbkeyboard_argv(text: str) -> list[str]:
    return ["am", "broadcast", "-a", "ADB_INPUT_B64", "--es", "msg",
            base64.b64encode(text.encode("utf-8")).decode("ascii")]


class Shell(Protocol):
    def __call__(self, argv: list[str]) -> str: ...


class TextTyper:
    """Types with the best strategy the device offers; decides once per device."""

    def __init__(self, shell: Shell, send_keys: Callable[[str], None] | None = None,
                 switch_ime: Callable[[str], None] | None = None, clear_text: Callable[[], None] | None = None):
        self.shell = shell
        self.send_keys = send_keys
        self.switch_ime = switch_ime or self._switch
        self.clear_text = clear_text
        self._adbkeyboard: bool | None = None

    def has_adbkeyboard(self) -> bool:
        if self._adbkeyboard is None:
            try:
                listed = self.shell(["ime", "list", "-a", "-s"])
            except Exception:
                listed = ""
            self._adbkeyboard = ADB_IME in listed.split()
        return self._adbkeyboard

    def _switch(self, ime: str) -> None:
        self.shell(["ime", "enable", ime])
        self.shell(["ime", "set", ime])

    def _current_ime(self) -> str:
        return self.shell(["settings", "get", "secure", "default_input_method"]).strip()

    def _ensure_adbkeyboard(self) -> None:
        if self._current_ime() != ADB_IME:
            self.switch_ime(ADB_IME)

    def strategy(self, text: str) -> str:
        if is_plain_ascii(text):
            return "input_text"
        if self.has_adbkeyboard():
            return "adbkeyboard"
        if self.send_keys is not None:
            return "uiautomator2"
        return "none"

    def clear(self, focused_length: Callable[[], int]) -> str:
        """Empty the focused field; returns the strategy used. ADBKeyboard's ``ADB_CLEAR_TEXT``
        broadcast when that IME is the current one, uiautomator2's ``clear_text`` on that backend,
        else move to the end and press delete as often as the field has characters
        (``focused_length``, read from the accessibility tree; ``input keyevent`` takes several
        keycodes at once). Clearing never switches the input method by itself."""
        if self.has_adbkeyboard() and self._current_ime() == ADB_IME:
            self.shell(["am", "broadcast", "-a", "ADB_CLEAR_TEXT"])
            return "adbkeyboard"
        if self.clear_text is not None:
            self.clear_text()
            return "uiautomator2"
        n = focused_length()
        if n:
            self.shell(["input", "keyevent", "KEYCODE_MOVE_END"])
            self.shell(["input", "keyevent", *(["KEYCODE_DEL"] * n)])
        return "keyevents"

    def type(self, text: str) -> str:
        """Type ``text`` into the focused field; returns the strategy used."""
        if text == "":
            return "noop"
        how = self.strategy(text)
        if how == "input_text":
            self.shell(input_text_argv(text))
        elif how == "adbkeyboard":
            self._ensure_adbkeyboard()
            self.shell(adbkeyboard_argv(text))
        elif how == "uiautomator2":
            assert self.send_keys is not None
            self.send_keys(text)
        else:
            raise ActionError("this device cannot type non-ASCII text: install the ADBKeyboard IME "
                              "(com.android.adbkeyboard) or use --device-backend uiautomator2")
        return how
