"""What the ADB side of the simulated phone needs from the phone model.

The transport (``harness.sim.adb``) and the shell (``harness.sim.shell``) speak to the phone only
through this protocol, so the protocol layer can be tested against a tiny stand-in and the phone
model never learns about ADB packets.

All methods are synchronous and thread-safe (the phone holds its own lock); they are cheap except
the screen captures: a render when the screen changed, plus a PNG encode for ``screencap_png``
(cached while the screen is unchanged) and ``screencap_encode`` (every call, as a phone's
``screencap -p``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class DeviceInfo:
    """Identity the phone reports in its CNXN banner, ``getprop`` and ``deviceInfo``."""

    serial: str = "crate-sim"
    product: str = "crate_sim"
    model: str = "CrateSim"
    device: str = "cratesim"
    manufacturer: str = "crate"
    sdk: int = 34
    release: str = "14"
    props: dict[str, str] = field(default_factory=dict)
    touchscreen: bool = True  # False: no touchscreen among its input devices (getevent shows none)


class FileSystem(Protocol):
    """A small in-memory file system (``/sdcard``, ``/data/local/tmp``) for sync and shell commands."""

    def stat(self, path: str) -> tuple[int, int, int] | None:
        """(mode, size, mtime) or None when missing. Mode carries S_IFDIR / S_IFREG bits."""

    def listdir(self, path: str) -> list[tuple[str, int, int, int]] | None:
        """[(name, mode, size, mtime)] or None when not a directory."""

    def read(self, path: str) -> bytes | None: ...

    def write(self, path: str, data: bytes, mode: int = 0o644, mtime: int | None = None) -> None: ...

    def remove(self, path: str, recursive: bool = False) -> bool: ...

    def mkdir(self, path: str, parents: bool = False) -> bool: ...


class PhoneAPI(Protocol):
    info: DeviceInfo
    fs: FileSystem

    @property
    def size(self) -> tuple[int, int]:
        """Physical screen size in pixels (width, height)."""

    @property
    def density(self) -> int:
        """Screen density in dpi (``wm density``)."""

    # --- observation -------------------------------------------------------------------------
    def screencap_image(self) -> Any:
        """The screen as a Pillow image (RGB or RGBA; callers do not modify it)."""

    def screencap_png(self) -> bytes:
        """The screen as PNG, for in-process callers (may be cached while the screen is unchanged)."""

    def screencap_encode(self) -> bytes:
        """What ``screencap -p`` returns: the screen encoded to PNG for this call."""

    def screencap_rgba(self) -> bytes:
        """Raw RGBA8888 pixels, width*height*4 bytes (``screencap`` without -p, ``framebuffer:``)."""

    def hierarchy_xml(self) -> str:
        """The uiautomator dump XML of the current screen (``<hierarchy rotation="0">...``)."""

    def current_focus(self) -> tuple[str, str]:
        """(package, activity) of the window in front, for ``dumpsys window``."""

    # --- input -------------------------------------------------------------------------------
    def tap(self, x: int, y: int) -> None: ...

    def long_press(self, x: int, y: int, duration_ms: int = 1000) -> None: ...

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None: ...

    def keyevent(self, key: str | int) -> bool:
        """Android keycode name (``BACK``, ``KEYCODE_HOME``) or number; False if unknown."""

    def input_text(self, text: str) -> None:
        """Text for the focused field (already unescaped by the shell: ``%s`` means space)."""

    # --- packages and activities -------------------------------------------------------------
    def packages(self) -> list[str]: ...

    def launch(self, package: str, activity: str | None = None) -> bool:
        """``am start -n`` / ``monkey -p``: False when the package is not installed."""

    def force_stop(self, package: str) -> None: ...

    def clear_data(self, package: str) -> bool:
        """``pm clear``: reset the app's state; False when not installed."""

    def broadcast(self, action: str, extras: dict[str, str | int | bool]) -> str:
        """``am broadcast``: ADBKeyboard's ``ADB_INPUT_B64``/``ADB_INPUT_TEXT``, the sim's reset.
        Returns the result line (``Broadcast completed: result=0``)."""

    # --- settings, input methods, state ------------------------------------------------------
    def ime_list(self) -> list[str]:
        """Installed input-method ids (``ime list -s``)."""

    def ime_current(self) -> str: ...

    def ime_set(self, ime_id: str) -> bool: ...

    def state_json(self) -> dict:
        """The whole inspectable state (apps, screen, effect log) for ``dumpsys crate_sim``."""
