"""Input methods: which are installed and enabled, and switching to one, verified by reading the
phone's settings back.

``ime list -s`` prints the enabled IMEs' ids one a line, ``ime list -a -s`` every installed one
(short component form, ``com.android.inputmethod.latin/.LatinIME``: ADBKeyboard issue 66's Android 14
transcript). What ``ime enable`` and ``ime set`` print is not a verdict: on an IME that is not
enabled Android 14 answers ``Unknown input method com.android.adbkeyboard/.AdbIME cannot be selected
for user #0`` (the same transcript), which contains the word "selected". So a switch is checked by
reading the settings the input method manager keeps (``Settings.Secure``):
``enabled_input_methods``, the enabled ids joined by ``:`` each with optional ``;subtype`` ids
(InputMethodUtils' INPUT_METHOD_SEPARATOR and INPUT_METHOD_SUBTYPE_SEPARATOR, AOSP frameworks/base
``services/core/java/com/android/server/inputmethod/InputMethodUtils.java``), and
``default_input_method``, the one in use. Ids are compared as components (``.AdbIME`` of
``com.android.adbkeyboard`` is ``com.android.adbkeyboard.AdbIME``), as the settings may hold either form.
"""

from __future__ import annotations

import re
from typing import Callable

from harness.device.base import DeviceError, InputMethods

IME_LIST_ENABLED = ("ime", "list", "-s")
IME_LIST_INSTALLED = ("ime", "list", "-a", "-s")
SETTING_DEFAULT = ("settings", "get", "secure", "default_input_method")
SETTING_ENABLED = ("settings", "get", "secure", "enabled_input_methods")
COMMANDS = (IME_LIST_ENABLED, IME_LIST_INSTALLED, SETTING_DEFAULT, SETTING_ENABLED)

Shell = Callable[[list[str]], str]

_IME_ID = re.compile(r"^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*/[A-Za-z0-9_.$]+$")


def parse_ime_ids(text: str) -> list[str]:
    """The IME ids of an ``ime list -s`` answer, one a line; any other line (a warning, an error)
    is not an id."""
    return [s for s in (line.strip() for line in text.splitlines()) if _IME_ID.match(s)]


def parse_enabled_setting(value: str | None) -> list[str]:
    """The ids of ``enabled_input_methods`` (``id[;subtype...]:id...``); empty for null."""
    if not value or value.strip() == "null":
        return []
    return [part.split(";", 1)[0].strip() for part in value.strip().split(":") if part.split(";", 1)[0].strip()]


def same_ime(a: str | None, b: str | None) -> bool:
    """Whether two IME ids name one component (short and full forms alike)."""
    if not a or not b:
        return False
    return _full(a) == _full(b)


def _full(ime: str) -> str:
    pkg, _, cls = ime.strip().partition("/")
    return f"{pkg}/{pkg + cls if cls.startswith('.') else cls}"


def _setting(shell: Shell, argv: tuple[str, ...]) -> str | None:
    out = shell(list(argv)).strip()
    return None if out in ("", "null") else out


def read_input_methods(shell: Shell) -> InputMethods:
    enabled = parse_ime_ids(shell(list(IME_LIST_ENABLED)))
    installed = parse_ime_ids(shell(list(IME_LIST_INSTALLED)))
    return InputMethods(current=_setting(shell, SETTING_DEFAULT), enabled=enabled,
                        installed=sorted(set(installed) | set(enabled)))


def switch_to(shell: Shell, ime_id: str, serial: str) -> None:
    """Enable ``ime_id`` and make it the phone's input method; DeviceError naming the IME, with
    what the phone said, unless the settings read back show it enabled and in use."""
    said_enable = shell(["ime", "enable", ime_id]).strip()
    enabled = parse_enabled_setting(_setting(shell, SETTING_ENABLED))
    if not any(same_ime(ime_id, e) for e in enabled):
        raise DeviceError(f"{serial}: could not enable the input method {ime_id}: the phone said "
                          f"{said_enable[:160] or 'nothing'!r} and its enabled input methods are "
                          f"{', '.join(enabled) or 'none'} (is it installed?)")
    said_set = shell(["ime", "set", ime_id]).strip()
    current = _setting(shell, SETTING_DEFAULT)
    if not same_ime(ime_id, current):
        raise DeviceError(f"{serial}: could not switch the keyboard to {ime_id}: the phone said "
                          f"{said_set[:160] or 'nothing'!r} and its input method is still {current or 'unset'}")
