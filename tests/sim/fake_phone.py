"""A tiny stand-in for the simulated phone (implements ``harness.sim.phone_api.PhoneAPI``).

A fixed Pillow image, counters and an event log for every input, an in-memory FS, a few packages.
The ADB layer is tested against this; ``harness.sim.phone.SimPhone`` implements the same protocol.
"""

from __future__ import annotations

import io
import threading
from collections import Counter
from typing import Any

from PIL import Image, ImageDraw

from harness.sim.fs import MemoryFS
from harness.sim.phone_api import DeviceInfo

HIERARCHY = (
    '<hierarchy rotation="0">'
    '<node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.example.notes" '
    'content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="false" '
    'focused="false" scrollable="false" long-clickable="false" password="false" selected="false" '
    'bounds="[0,0][1080,2400]">'
    '<node index="0" text="Title" resource-id="com.example.notes:id/title" class="android.widget.EditText" '
    'package="com.example.notes" content-desc="" checkable="false" checked="false" clickable="true" '
    'enabled="true" focusable="true" focused="true" scrollable="false" long-clickable="true" '
    'password="false" selected="false" bounds="[40,200][1040,320]" />'
    '<node index="1" text="Save" resource-id="com.example.notes:id/save" class="android.widget.Button" '
    'package="com.example.notes" content-desc="save note" checkable="false" checked="false" clickable="true" '
    'enabled="true" focusable="true" focused="false" scrollable="false" long-clickable="false" '
    'password="false" selected="false" bounds="[700,2100][1040,2240]" />'
    "</node></hierarchy>"
)


class FakePhone:
    """Records what the ADB layer asks of it."""

    def __init__(self, width: int = 1080, height: int = 2400, serial: str = "fake-sim") -> None:
        self.info = DeviceInfo(serial=serial, product="crate_fake", model="CrateFake", device="cratefake")
        self.fs = MemoryFS()
        self._size = (width, height)
        self.counters: Counter[str] = Counter()
        self.events: list[tuple[Any, ...]] = []
        self.text = ""
        self.installed = ["com.android.settings", "com.example.notes", "com.example.shop"]
        self.focus = ("com.android.launcher3", "com.android.launcher3.Launcher")
        self.imes = ["com.android.inputmethod.latin/.LatinIME", "com.android.adbkeyboard/.AdbIME"]
        self.ime = self.imes[0]
        self.broadcasts: list[tuple[str, dict]] = []
        self._lock = threading.Lock()
        img = Image.new("RGBA", self._size, (30, 60, 90, 255))
        draw = ImageDraw.Draw(img)
        draw.rectangle([40, 200, 1040, 320], fill=(250, 250, 250, 255))
        draw.rectangle([700, 2100, 1040, 2240], fill=(0, 120, 215, 255))
        draw.text((60, 240), "Title", fill=(0, 0, 0, 255))
        self._img = img
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        self._png = buf.getvalue()
        self._rgba = img.tobytes()

    def _record(self, *event: Any) -> None:
        with self._lock:
            self.counters[event[0]] += 1
            self.events.append(event)

    @property
    def size(self) -> tuple[int, int]:
        return self._size

    @property
    def density(self) -> int:
        return 420

    def screencap_png(self) -> bytes:
        self._record("screencap_png")
        return self._png

    def screencap_image(self) -> Image.Image:
        return self._img

    def screencap_encode(self) -> bytes:
        self._record("screencap_encode")
        return self._png

    def screencap_rgba(self) -> bytes:
        self._record("screencap_rgba")
        return self._rgba

    def hierarchy_xml(self) -> str:
        self._record("hierarchy_xml")
        return HIERARCHY

    def current_focus(self) -> tuple[str, str]:
        return self.focus

    def tap(self, x: int, y: int) -> None:
        self._record("tap", x, y)

    def long_press(self, x: int, y: int, duration_ms: int = 1000) -> None:
        self._record("long_press", x, y, duration_ms)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None:
        self._record("swipe", x1, y1, x2, y2, duration_ms)

    def keyevent(self, key: str | int) -> bool:
        if isinstance(key, str) and key.upper().removeprefix("KEYCODE_") == "BOGUS":
            return False
        self._record("keyevent", key)
        return True

    def input_text(self, text: str) -> None:
        self._record("input_text", text)
        self.text += text

    def packages(self) -> list[str]:
        return list(self.installed)

    def launch(self, package: str, activity: str | None = None) -> bool:
        if package not in self.installed:
            return False
        self._record("launch", package, activity)
        self.focus = (package, activity or f"{package}.MainActivity")
        return True

    def force_stop(self, package: str) -> None:
        self._record("force_stop", package)
        if self.focus[0] == package:
            self.focus = ("com.android.launcher3", "com.android.launcher3.Launcher")

    def clear_data(self, package: str) -> bool:
        if package not in self.installed:
            return False
        self._record("clear_data", package)
        return True

    def broadcast(self, action: str, extras: dict[str, str | int | bool]) -> str:
        self._record("broadcast", action, dict(extras))
        self.broadcasts.append((action, dict(extras)))
        return "Broadcast completed: result=0"

    def ime_list(self) -> list[str]:
        return list(self.imes)

    def ime_current(self) -> str:
        return self.ime

    def ime_set(self, ime_id: str) -> bool:
        if ime_id not in self.imes:
            return False
        self.ime = ime_id
        return True

    def state_json(self) -> dict:
        return {"focus": list(self.focus), "text": self.text, "counters": dict(self.counters), "名前": "模拟"}
