"""What ``harness devices capture`` removes from a phone's answers before they are written: the
values that identify the phone or its owner, each replaced by ``REDACTED`` and listed in the
profile's manifest by file, property or rule, and count, never by value.

- **Properties** (``getprop``'s ``[name]: [value]`` lines) whose name says they hold an identifier:
  a serial number (``ro.serialno``, ``ro.boot.serialno``, ``ro.vendor.boot.serialno``,
  ``ril.serialnumber``, Samsung's ``ro.boot.ap_serial``: any name with ``serial``), an IMEI or MEID
  (``persist.radio.imei``, ``ro.ril.oem.imei``...: ``imei``, ``meid``, ``esn``), a SIM or line
  (``iccid``, ``imsi``, ``msisdn``), a Wi-Fi or Bluetooth address (``ro.boot.wifimacaddr``,
  ``ro.boot.btmacaddr``, ``persist.vendor.service.bdroid.bdaddr``: ``mac``, ``bdaddr``), a chip or
  board id (``ro.boot.cpuid``, ``ro.boot.uid``, ``ro.boot.em.did``) and ``net.hostname``, which
  Android makes from the Android ID (``android_d59a0df61c4c15d`` on the MediaTek tablet). Only values
  that look like an identifier (six letters or digits or more, a digit among them, not a path):
  ``ro.vendor.radio.imei.sv`` is the IMEI's two-digit software version,
  ``ro.starmini_serial_debug.enable`` a switch, ``ro.bt.bdaddr_path`` a file, and services'
  states (``init.svc.*``) are never identifiers.
- **Those values anywhere else**: a serial number the phone prints in another answer (and the adb
  serial, when it is the phone's own rather than ``HOST:PORT`` or ``emulator-N``).
- **Patterns in every text answer**: MAC addresses (six colon-separated hex pairs, except Android's
  all-zero and ``02:00:00:00:00:00`` placeholders), IMEI/MEID/ESN fields (``imei=...``,
  ``Device ID: ...``), e-mail addresses (accounts), and an intent's data URI (``dat=...`` in
  ``dumpsys activity``: a page, a contact, a phone number).
- **What the screen shows** in the UI dump: the ``text``, ``content-desc`` and ``hint`` values of
  its nodes (the dump's format is kept: its declaration, attributes and layout).

Bytes that are not UTF-8 are kept as they came (``surrogateescape``), and line ends are never
touched, so what is not removed is byte for byte the phone's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# what an identifying value of a capture reads as: the profile format's word (harness.core.profile_folder),
# kept a word so a redacted getprop value stays a valid `[name]: [value]` line and the captures
# already made read back; an identity removed, not a secret (secrets: harness.core.secret_text)
from harness.core.profile_folder import REDACTED


# name pattern -> kind, in order (the first that matches names the kind)
IDENTIFYING_PROPS: tuple[tuple[str, str], ...] = (
    (r"serial", "serial number"),
    (r"imei|meid|(^|\.)esn($|\.)", "IMEI/MEID"),
    (r"iccid|imsi|msisdn", "SIM identity"),
    (r"mac(addr|address)?($|\.)|macaddr|bdaddr|wifimac|btmac", "MAC address"),
    (r"(^|\.)(cpuid|uid|em\.did|did)$", "chip identity"),
    (r"^net\.hostname$", "host name (from the Android ID)"),
)
_MIN_SECRET = 6  # letters or digits a value needs before it is taken for an identifier

_PROP_LINE = re.compile(r"^\[([^\]\r\n]+)\]: \[(.*?)\](?=\r*$)", re.M | re.S)  # harness.device.getprop's rule
_MAC = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}(?![0-9A-Fa-f:])")
_MAC_PLACEHOLDERS = {"00:00:00:00:00:00", "02:00:00:00:00:00"}
_IMEI_FIELD = re.compile(r"(?i)\b(imei\w*|meid\w*|esn|device id)(\s*[:=]\s*\[?)([0-9A-Fa-f]{8,})")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
_INTENT_DATA = re.compile(r"\bdat=([^\s}]+)")
_UI_TEXT = re.compile(r'\b(text|content-desc|hint)="([^"]+)"')


def _alnum(value: str) -> int:
    return sum(ch.isalnum() for ch in value)


def _looks_like_an_id(value: str) -> bool:
    """Six letters or digits or more, a digit among them, and not a path: ``0074732151``,
    ``C1OKAS051559``, ``android_d59a0df61c4c15d``; not ``running``, ``1`` or ``/system/etc/...``."""
    value = value.strip()
    return (_alnum(value) >= _MIN_SECRET and any(ch.isdigit() for ch in value) and "/" not in value
            and value != REDACTED)


def identifying(name: str) -> str | None:
    """The kind of identifier a property of this name holds, or None."""
    low = name.lower()
    if low.startswith(("init.svc.", "ro.boottime.", "init.svc_debug_pid.")):  # services' states and times
        return None
    return next((kind for pattern, kind in IDENTIFYING_PROPS if re.search(pattern, low)), None)


@dataclass
class Redactor:
    """Redacts one capture's answers; ``secrets`` grows as getprop is read, and ``records`` is
    what the manifest lists."""

    secrets: set[str] = field(default_factory=set)
    records: list[dict[str, Any]] = field(default_factory=list)

    def add_secret(self, value: str) -> None:
        if _looks_like_an_id(value):
            self.secrets.add(value.strip())

    def getprop(self, text: str, file: str) -> str:
        """``text`` (a getprop listing) without identifying values; they become secrets too."""
        def one(m: re.Match[str]) -> str:
            name, value = m.group(1), m.group(2)
            kind = identifying(name)
            if kind is None or not _looks_like_an_id(value):
                return m.group(0)
            self.add_secret(value)
            self.records.append({"file": file, "prop": name, "kind": kind})
            return f"[{name}]: [{REDACTED}]"

        return _PROP_LINE.sub(one, text)

    def text(self, text: str, file: str) -> str:
        """Any text answer without the secrets found so far and the patterns (module docstring)."""
        counts: dict[str, int] = {}

        def count(what: str, n: int = 1) -> None:
            counts[what] = counts.get(what, 0) + n

        for secret in sorted(self.secrets, key=len, reverse=True):
            n = text.count(secret)
            if n:
                text = text.replace(secret, REDACTED)
                count("a value redacted from getprop (serial number, identifiers)", n)

        def mac(m: re.Match[str]) -> str:
            if m.group(0).lower() in _MAC_PLACEHOLDERS:
                return m.group(0)
            count("MAC address")
            return REDACTED

        def imei(m: re.Match[str]) -> str:
            count("IMEI/MEID field")
            return m.group(1) + m.group(2) + REDACTED

        def email(m: re.Match[str]) -> str:
            count("e-mail address (account)")
            return REDACTED

        def data(m: re.Match[str]) -> str:
            count("intent data URI")
            return "dat=" + REDACTED

        text = _MAC.sub(mac, text)
        text = _IMEI_FIELD.sub(imei, text)
        text = _EMAIL.sub(email, text)
        text = _INTENT_DATA.sub(data, text)
        self._note(file, counts)
        return text

    def ui_dump(self, xml: str, file: str) -> str:
        """A UI dump without what the screen shows (then as :meth:`text`)."""
        n = 0

        def blank(m: re.Match[str]) -> str:
            nonlocal n
            n += 1
            return f'{m.group(1)}="{REDACTED}"'

        xml = _UI_TEXT.sub(blank, xml)
        self._note(file, {"text, content-desc and hint of the screen's nodes": n} if n else {})
        return self.text(xml, file)

    def _note(self, file: str, counts: dict[str, int]) -> None:
        for what, n in counts.items():
            self.records.append({"file": file, "what": what, "count": n})


def decode(data: bytes) -> str:
    """Bytes as text that encodes back to the same bytes (:func:`encode`)."""
    return data.decode("utf-8", errors="surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")
