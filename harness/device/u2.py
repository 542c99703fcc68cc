"""The uiautomator2 backend: the adb device, plus uiautomator2 for what it does better — the view
hierarchy without a file round trip, and typing any Unicode through its IME/clipboard.

uiautomator2 starts its own server on the device (it pushes ``u2.jar`` and runs it with
``app_process``) and speaks JSON-RPC on device port 9008 (FIELD_NOTES section 8). Its
``send_keys`` may switch the phone to its own IME (``com.github.uiautomator/.AdbKeyboard``,
installing that helper app first when missing: ``uiautomator2/_input.py``) and never switches
back, so the switch is journaled before every call and the run puts the user's IME back.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.device.adb import AdbDevice
from harness.device.base import InfraError
from harness.device.frame_sources import FrameSource, U2Frames
from harness.device.text_input import TextTyper

U2_IME = "com.github.uiautomator/.AdbKeyboard"


class U2Device(AdbDevice):
    def __init__(self, serial: str, **kwargs: Any):
        super().__init__(serial, **kwargs)
        self._u2: Any = None
        self.typer = TextTyper(self.shell, send_keys=self._send_keys, switch_ime=self.use_input_method,
                               clear_text=self._clear_text)

    def u2(self) -> Any:
        if self._u2 is None:
            import uiautomator2

            try:
                # hand it our adbutils device: adbutils' module-level client reads the server port
                # once at import, so a serial alone could reach the wrong adb server
                self._u2 = uiautomator2.connect(self.dev)
            except Exception as e:  # uiautomator2 raises many kinds; all mean "not reachable"
                raise InfraError(f"{self.serial}: uiautomator2 could not connect: {type(e).__name__}: {e}") from None
        return self._u2

    def frame_sources(self) -> list[FrameSource]:
        """The adb sources plus uiautomator2's own screenshot (a JPEG from its server)."""
        return [*super().frame_sources(), U2Frames(self._take_screenshot, self.serial)]

    def _take_screenshot(self) -> str | None:
        try:  # uiautomator2's screenshot(): jsonrpc takeScreenshot(scale 1, quality 80), base64 JPEG
            return self.u2().jsonrpc.takeScreenshot(1, 80)
        except InfraError:
            raise
        except Exception as e:
            raise InfraError(f"{self.serial}: uiautomator2 takeScreenshot failed: {type(e).__name__}: {e}") from None

    def hierarchy(self) -> str:
        try:
            return self.u2().dump_hierarchy()
        except InfraError:
            raise
        except Exception as e:
            raise InfraError(f"{self.serial}: uiautomator2 dump failed: {type(e).__name__}: {e}") from None

    def double_tap(self, x: int, y: int) -> None:
        """uiautomator2's own double click: touch down and up, 0.1 s, a click (injected through its
        server's JSON-RPC, without the ``input`` tool's start-up time)."""
        try:
            self.u2().double_click(int(x), int(y), duration=0.1)
        except InfraError:
            raise
        except Exception as e:
            raise InfraError(f"{self.serial}: uiautomator2 double_click failed: {type(e).__name__}: {e}") from None

    def _clear_text(self) -> None:
        self._with_u2_ime("clear_text", lambda d: d.clear_text())

    def _send_keys(self, text: str) -> None:
        self._with_u2_ime("send_keys", lambda d: d.send_keys(text))

    def _with_u2_ime(self, what: str, call: Callable[[Any], Any]) -> None:
        """A uiautomator2 text call, which may switch to its own IME: journaled first."""
        if self.journal is not None:
            self.journal.remember_input_method(self, U2_IME)
        try:
            call(self.u2())
        except InfraError:
            raise
        except Exception as e:
            raise InfraError(f"{self.serial}: uiautomator2 {what} failed: {type(e).__name__}: {e}") from None
