"""The device side of uiautomator2 3.7.1: the JSON-RPC server its ``u2.jar`` runs on the phone.

What the host library does (``uiautomator2/core.py``, 3.7.1):

1. ``toybox md5sum /data/local/tmp/u2.jar``; when the hash differs it ``sync.push``es its bundled
   ``assets/u2.jar`` there (``check=True``: a STAT afterwards compares the size).
2. ``GET /ping`` over the device port (``tcp:9008`` through the adb server); ``b"pong"`` means alive.
   A refused ``tcp:9008`` (CLSE to the OPEN) means "not running".
3. Otherwise it opens a *streaming* legacy shell
   ``CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008`` and polls
   ``/ping`` every 0.5 s. The server lives as long as that shell stream; the stream ending means
   "server quit unexpectedly", and output containing ``already registered`` is a launch error.
   ``stop_uiautomator`` closes the stream.
4. RPC: ``POST /jsonrpc/0`` with ``{"jsonrpc": "2.0", "id": 1, "method": M, "params": P}``; P is a
   JSON array (positional args) or object. Errors come back as ``{"error": {"code", "message",
   "data"}}``; a message containing ``uiautomator.UiObjectNotFoundException`` becomes
   ``UiObjectNotFoundError``.

Calls the high-level API makes: ``d.info`` -> deviceInfo; ``d.screenshot()`` -> takeScreenshot(1, 80)
(base64 JPEG); ``d.dump_hierarchy()`` -> dumpWindowHierarchy(compressed, max_depth); ``d.click`` ->
click(x, y); ``d.long_click`` -> click(x, y, ms); ``d.swipe`` -> swipe(fx, fy, tx, ty, steps) with
5 ms per step; ``d.swipe_points`` -> swipePoints([x0, y0, x1, y1, ...], steps); ``d.press("back")``
-> pressKey("back"); ``d.press(4)`` -> pressKeyCode(4[, meta]); ``d.send_keys(text)`` ->
setClipboard(label, text), getClipboard() (must equal text), pasteClipboard() (used when the
``com.github.uiautomator/.AdbKeyboard`` IME is not in ``ime list -s -a``, which on the simulated
phone it is not, so no APK install is ever attempted); ``d.window_size()`` goes through adb
(``wm size`` + ``dumpsys display``), not RPC; ``d.touch.down/move/up`` -> injectInputEvent.
Selectors (``d(text=..)``) use exist/waitForExists/objInfo/count/getText/setText/clearTextField,
evaluated here against ``hierarchy_xml()``.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
import logging
import re
import threading
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI

log = logging.getLogger(__name__)

XML_DECL = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
LONG_PRESS_MS = 400  # ViewConfiguration's default long-press timeout (Android 12+)
STEP_MS = 5  # "Each step execution is throttled to 5ms per step" (UiDevice.swipe docs)

# uiautomator2's press() names (``uiautomator2/__init__.py``: press docstring) -> Android key names
PRESS_KEYS = {
    "home": "HOME", "back": "BACK", "left": "DPAD_LEFT", "right": "DPAD_RIGHT", "up": "DPAD_UP",
    "down": "DPAD_DOWN", "center": "DPAD_CENTER", "menu": "MENU", "search": "SEARCH", "enter": "ENTER",
    "delete": "DEL", "del": "DEL", "recent": "APP_SWITCH", "volume_up": "VOLUME_UP",
    "volume_down": "VOLUME_DOWN", "volume_mute": "VOLUME_MUTE", "camera": "CAMERA", "power": "POWER",
}

MOTION_DOWN, MOTION_UP, MOTION_MOVE, MOTION_CANCEL = 0, 1, 2, 3


class TouchTracker:
    """Turns raw touch streams (``input motionevent``, ``injectInputEvent``) and point lists into
    the phone's tap / long_press / swipe calls, using Android's touch slop (8 dp) and long-press
    timeout to decide which gesture it was."""

    def __init__(self, phone: "PhoneAPI") -> None:
        self.phone = phone
        self._lock = threading.Lock()
        self._down: tuple[float, list[tuple[int, int]]] | None = None

    def slop_px(self) -> int:
        return max(1, round(8 * self.phone.density / 160))

    def gesture(self, points: list[tuple[int, int]], duration_ms: int) -> str:
        """Dispatch a finished gesture; returns which one it was (``tap``/``long_press``/``swipe``)."""
        if not points:
            return "none"
        x0, y0 = points[0]
        x1, y1 = points[-1]
        slop = self.slop_px()
        # ViewConfiguration: a touch is a move once dx² + dy² exceeds the slop squared
        still = all((x - x0) ** 2 + (y - y0) ** 2 <= slop * slop for x, y in points)
        if still:
            if duration_ms >= LONG_PRESS_MS:
                self.phone.long_press(x0, y0, int(duration_ms))
                return "long_press"
            self.phone.tap(x0, y0)
            return "tap"
        multi = getattr(self.phone, "gesture", None)
        if len(points) > 2 and callable(multi):
            multi(points, int(duration_ms))
        else:
            self.phone.swipe(x0, y0, x1, y1, int(duration_ms))
        return "swipe"

    def event(self, action: int, x: int, y: int) -> None:
        with self._lock:
            if action == MOTION_DOWN:
                self._down = (time.monotonic(), [(x, y)])
                return
            if self._down is None:
                return
            if action == MOTION_MOVE:
                self._down[1].append((x, y))
                return
            t0, points = self._down
            self._down = None
        if action == MOTION_UP:
            points.append((x, y))
            self.gesture(points, int((time.monotonic() - t0) * 1000))


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _not_found(selector: Any) -> RpcError:
    return RpcError(-32002, f"androidx.test.uiautomator.UiObjectNotFoundException: UiSelector{_selector_text(selector)}")


def _selector_text(selector: Any) -> str:
    if not isinstance(selector, dict):
        return f"[{selector}]"
    items = [f"{k}={v}" for k, v in selector.items() if k not in ("mask", "childOrSibling", "childOrSiblingSelector")]
    return "[" + ", ".join(items) + "]"


class U2Server:
    """The simulated ``u2.jar`` process: started by ``app_process`` in the shell, reachable through
    ``tcp:PORT`` streams while running."""

    def __init__(self, phone: "PhoneAPI") -> None:
        self.phone = phone
        self.touch = TouchTracker(phone)
        self.clipboard: str | None = None
        self.calls: list[tuple[str, Any]] = []  # every RPC method with its params, for tests
        self._lock = threading.Lock()
        self._servers: dict[int, tuple[int, threading.Event]] = {}
        self._tokens = itertools.count(1)

    # --- lifetime -----------------------------------------------------------------------------
    def start(self, port: int) -> int | None:
        """Mark the server on ``port`` running; None when one already runs there."""
        with self._lock:
            if port in self._servers:
                return None
            token = next(self._tokens)
            self._servers[port] = (token, threading.Event())
            return token

    def stop(self, port: int, token: int | None = None) -> None:
        with self._lock:
            entry = self._servers.get(port)
            if entry is None or (token is not None and entry[0] != token):
                return
            del self._servers[port]
        entry[1].set()

    def wait(self, port: int, token: int, cancel: threading.Event) -> None:
        """Block until the server on ``port`` is stopped or ``cancel`` is set."""
        with self._lock:
            entry = self._servers.get(port)
        if entry is None or entry[0] != token:
            return
        stopped = entry[1]
        while not stopped.is_set():
            if cancel.wait(0.05):
                return

    def is_running(self, port: int) -> bool:
        with self._lock:
            return port in self._servers

    def running_ports(self) -> list[int]:
        with self._lock:
            return sorted(self._servers)

    # --- HTTP ---------------------------------------------------------------------------------
    def handle_http(self, method: str, path: str, body: bytes) -> tuple[int, str, str, bytes]:
        """(status, reason, content type, body) for one request."""
        path = path.split("?", 1)[0]
        if path == "/ping" and method in ("GET", "HEAD"):
            return 200, "OK", "text/plain", b"pong"
        if path == "/jsonrpc/0" and method == "POST":
            try:
                req = json.loads(body.decode("utf-8") or "null")
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                return 200, "OK", "application/json", self._rpc_error(None, -32700, f"Parse error: {e}")
            if not isinstance(req, dict) or "method" not in req:
                return 200, "OK", "application/json", self._rpc_error(None, -32600, "Invalid Request")
            rid = req.get("id")
            try:
                result = self.call(str(req["method"]), req.get("params"))
            except RpcError as e:
                return 200, "OK", "application/json", self._rpc_error(rid, e.code, e.message, e.data)
            except Exception as e:  # a bug in a handler is an RPC error, never a dead server
                log.exception("u2 rpc %s failed", req.get("method"))
                return 200, "OK", "application/json", self._rpc_error(rid, -32001, f"java.lang.RuntimeException: {type(e).__name__}: {e}")
            payload = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, ensure_ascii=False)
            return 200, "OK", "application/json", payload.encode("utf-8")
        return 404, "Not Found", "text/plain", b"Not Found"

    @staticmethod
    def _rpc_error(rid: Any, code: int, message: str, data: str = "") -> bytes:
        err = {"code": code, "message": message, "data": data or message}
        return json.dumps({"jsonrpc": "2.0", "id": rid, "error": err}, ensure_ascii=False).encode("utf-8")

    # --- JSON-RPC -----------------------------------------------------------------------------
    def call(self, method: str, params: Any) -> Any:
        with self._lock:
            self.calls.append((method, params))
            if len(self.calls) > 10000:
                del self.calls[:5000]
        fn = getattr(self, "rpc_" + method, None)
        if fn is None:
            raise RpcError(-32601, f"java.lang.NoSuchMethodException: {method} is not implemented by the simulated uiautomator server")
        if params is None:
            return fn()
        if isinstance(params, dict):
            return fn(**params)
        return fn(*params)

    def rpc_deviceInfo(self) -> dict[str, Any]:
        w, h = self.phone.size
        d = self.phone.density
        pkg, _ = self.phone.current_focus()
        return {
            "currentPackageName": pkg,
            "displayHeight": h,
            "displayRotation": int(getattr(self.phone, "rotation", 0) or 0),
            "displaySizeDpX": round(w * 160 / d),
            "displaySizeDpY": round(h * 160 / d),
            "displayWidth": w,
            "productName": self.phone.info.product,
            "screenOn": True,
            "sdkInt": self.phone.info.sdk,
            "naturalOrientation": True,
        }

    def rpc_windowSize(self) -> list[int]:
        return list(self.phone.size)

    def rpc_takeScreenshot(self, scale: float = 1.0, quality: int = 80) -> str:
        """A JPEG of the frame, encoded on every call as the u2 server does (``UiAutomation
        .takeScreenshot`` then ``Bitmap.compress(JPEG, quality)``), base64 as its JSON-RPC returns it."""
        img = self.phone.screencap_image()
        if img.mode != "RGB":
            img = img.convert("RGB")
        if scale and scale != 1:
            img = img.resize((max(1, int(img.width * scale)), max(1, int(img.height * scale))))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=int(quality))
        return base64.b64encode(buf.getvalue()).decode("ascii")

    def rpc_dumpWindowHierarchy(self, compressed: bool = False, maxDepth: int | None = 50, rootInActive: bool | None = None) -> str:
        xml = self.phone.hierarchy_xml().lstrip()
        if xml.startswith("<?xml"):
            return xml
        return XML_DECL + "\r\n" + xml

    def rpc_click(self, *args: Any) -> bool:
        if args and isinstance(args[0], dict):  # click(selector[, corner])
            node = self._find(args[0])
            x, y = _center(node)
            self.phone.tap(x, y)
            return True
        x, y = int(args[0]), int(args[1])
        if len(args) >= 3 and args[2] is not None:
            ms = int(args[2])
            if ms >= LONG_PRESS_MS:
                self.phone.long_press(x, y, ms)
                return True
        self.phone.tap(x, y)
        return True

    def rpc_longClick(self, *args: Any) -> bool:
        if args and isinstance(args[0], dict):
            x, y = _center(self._find(args[0]))
            self.phone.long_press(x, y, 1000)
        else:
            self.phone.long_press(int(args[0]), int(args[1]), int(args[2]) if len(args) > 2 else 1000)
        return True

    def rpc_swipe(self, fx: int, fy: int, tx: int, ty: int, steps: int = 10) -> bool:
        self.touch.gesture([(int(fx), int(fy)), (int(tx), int(ty))], max(2, int(steps)) * STEP_MS)
        return True

    def rpc_swipePoints(self, points: list[int], steps: int = 10) -> bool:
        pts = [(int(points[i]), int(points[i + 1])) for i in range(0, len(points) - 1, 2)]
        self.touch.gesture(pts, max(1, int(steps)) * STEP_MS * max(1, len(pts) - 1))
        return True

    def rpc_drag(self, sx: int, sy: int, ex: int, ey: int, steps: int = 100) -> bool:
        drag = getattr(self.phone, "drag", None)
        ms = max(2, int(steps)) * STEP_MS
        if callable(drag):
            drag(int(sx), int(sy), int(ex), int(ey), ms)
        else:
            self.phone.swipe(int(sx), int(sy), int(ex), int(ey), ms)
        return True

    def rpc_pressKey(self, key: str) -> bool:
        name = PRESS_KEYS.get(str(key).lower(), str(key).upper())
        return bool(self.phone.keyevent(name))

    def rpc_pressKeyCode(self, keycode: int, meta: int | None = None) -> bool:
        return bool(self.phone.keyevent(int(keycode)))

    def rpc_injectInputEvent(self, action: int, x: float, y: float, metaState: int = 0) -> bool:
        self.touch.event(int(action), int(x), int(y))
        return True

    def rpc_setClipboard(self, label: str | None, text: str) -> None:
        self.clipboard = text
        setter = getattr(self.phone, "set_clipboard", None)
        if callable(setter):
            setter(text)

    def rpc_getClipboard(self) -> str | None:
        getter = getattr(self.phone, "get_clipboard", None)
        if callable(getter):
            return getter()
        return self.clipboard

    def rpc_pasteClipboard(self) -> None:
        text = self.rpc_getClipboard()
        if text:
            self.phone.input_text(text)

    def rpc_clearInputText(self) -> None:
        node = self._find_focused()
        self._clear(node)

    def rpc_waitForIdle(self, timeout: int = 0) -> bool:
        return True

    def rpc_waitForWindowUpdate(self, packageName: str | None = None, timeout: int = 0) -> bool:
        return True

    def rpc_wakeUp(self) -> None:
        self.phone.keyevent("WAKEUP")

    def rpc_sleep(self) -> None:
        self.phone.keyevent("SLEEP")

    def rpc_isScreenOn(self) -> bool:
        return True

    def rpc_setOrientation(self, orientation: str) -> None:
        return None

    def rpc_freezeRotation(self, freeze: bool = True) -> None:
        return None

    def rpc_openNotification(self) -> bool:
        return bool(self.phone.keyevent("NOTIFICATION"))

    def rpc_openQuickSettings(self) -> bool:
        return bool(self.phone.keyevent("NOTIFICATION"))

    def rpc_makeToast(self, text: str, duration: float = 1000) -> bool:
        return True

    def rpc_getLastToast(self) -> str | None:
        return None

    def rpc_clearLastToast(self) -> None:
        return None

    def rpc_getLastTraversedText(self) -> str | None:
        return None

    def rpc_clearLastTraversedText(self) -> None:
        return None

    def rpc_currentPackageName(self) -> str:
        return self.phone.current_focus()[0]

    # --- selectors ------------------------------------------------------------------------------
    def _nodes(self) -> list[tuple[ET.Element, ET.Element | None]]:
        xml = self.phone.hierarchy_xml()
        xml = re.sub(r"^\s*<\?xml[^>]*\?>", "", xml)
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as e:
            raise RpcError(-32001, f"java.lang.IllegalStateException: bad hierarchy: {e}") from None
        out: list[tuple[ET.Element, ET.Element | None]] = []

        def walk(el: ET.Element, parent: ET.Element | None) -> None:
            for child in el:
                if child.tag == "node":
                    out.append((child, parent if parent is not None and parent.tag == "node" else None))
                walk(child, child)

        walk(root, None)
        return out

    def _match_all(self, selector: dict[str, Any]) -> list[ET.Element]:
        nodes = self._nodes()
        base = [n for n, _ in nodes if _matches(n, selector)]
        if "instance" in selector and not selector.get("childOrSibling"):
            i = int(selector["instance"])
            base = base[i : i + 1]
        parent_of = {id(n): p for n, p in nodes}
        for how, sub in zip(selector.get("childOrSibling") or [], selector.get("childOrSiblingSelector") or [], strict=False):
            found: list[ET.Element] = []
            for b in base:
                if how == "child":
                    pool = [n for n in b.iter("node") if n is not b]
                else:
                    p = parent_of.get(id(b))
                    pool = [n for n in p if n is not b and n.tag == "node"] if p is not None else []
                found.extend(n for n in pool if _matches(n, sub) and n not in found)
            if "instance" in sub:
                i = int(sub["instance"])
                found = found[i : i + 1]
            base = found
        return base

    def _find(self, selector: dict[str, Any]) -> ET.Element:
        found = self._match_all(selector)
        if not found:
            raise _not_found(selector)
        return found[0]

    def _find_focused(self) -> ET.Element | None:
        for n, _ in self._nodes():
            if n.get("focused") == "true":
                return n
        return None

    def _clear(self, node: ET.Element | None) -> None:
        clear = getattr(self.phone, "clear_text", None)
        if callable(clear):
            clear()
            return
        text = node.get("text", "") if node is not None else ""
        if text:
            self.phone.keyevent("MOVE_END")
            for _ in range(len(text)):
                self.phone.keyevent("DEL")

    def rpc_exist(self, selector: dict[str, Any]) -> bool:
        return bool(self._match_all(selector))

    def rpc_count(self, selector: dict[str, Any]) -> int:
        return len(self._match_all(selector))

    def rpc_waitForExists(self, selector: dict[str, Any], timeout: int = 0) -> bool:
        deadline = time.monotonic() + max(0, int(timeout)) / 1000
        while True:
            if self._match_all(selector):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def rpc_waitUntilGone(self, selector: dict[str, Any], timeout: int = 0) -> bool:
        deadline = time.monotonic() + max(0, int(timeout)) / 1000
        while True:
            if not self._match_all(selector):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def rpc_objInfo(self, selector: dict[str, Any]) -> dict[str, Any]:
        return _obj_info(self._find(selector))

    def rpc_objInfoOfAllInstances(self, selector: dict[str, Any]) -> list[dict[str, Any]]:
        return [_obj_info(n) for n in self._match_all(selector)]

    def rpc_getText(self, selector: dict[str, Any]) -> str:
        return self._find(selector).get("text", "")

    def rpc_setText(self, selector: dict[str, Any], text: str) -> bool:
        """Approximation: focus the field with a tap, clear it, type ``text``."""
        node = self._find(selector)
        self.phone.tap(*_center(node))
        self._clear(node)
        if text:
            self.phone.input_text(text)
        return True

    def rpc_clearTextField(self, selector: dict[str, Any]) -> None:
        node = self._find(selector)
        self.phone.tap(*_center(node))
        self._clear(node)


_BOUNDS_RE = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")


def _bounds(node: ET.Element) -> tuple[int, int, int, int]:
    m = _BOUNDS_RE.match(node.get("bounds", ""))
    if not m:
        return (0, 0, 0, 0)
    left, top, right, bottom = (int(v) for v in m.groups())
    return left, top, right, bottom


def _center(node: ET.Element) -> tuple[int, int]:
    left, top, right, bottom = _bounds(node)
    return (left + right) // 2, (top + bottom) // 2


def _obj_info(node: ET.Element) -> dict[str, Any]:
    left, top, right, bottom = _bounds(node)
    bounds = {"left": left, "top": top, "right": right, "bottom": bottom}

    def flag(name: str) -> bool:
        return node.get(name) == "true"

    return {
        "bounds": bounds,
        "visibleBounds": dict(bounds),
        "childCount": len([c for c in node if c.tag == "node"]),
        "className": node.get("class"),
        "contentDescription": node.get("content-desc") or None,
        "packageName": node.get("package"),
        "resourceName": node.get("resource-id") or None,
        "text": node.get("text", ""),
        "checkable": flag("checkable"),
        "checked": flag("checked"),
        "clickable": flag("clickable"),
        "enabled": flag("enabled"),
        "focusable": flag("focusable"),
        "focused": flag("focused"),
        "longClickable": flag("long-clickable"),
        "scrollable": flag("scrollable"),
        "selected": flag("selected"),
    }


_ATTR = {
    "text": "text", "className": "class", "description": "content-desc", "packageName": "package",
    "resourceId": "resource-id",
}
_BOOL_ATTR = {
    "checkable": "checkable", "checked": "checked", "clickable": "clickable", "longClickable": "long-clickable",
    "scrollable": "scrollable", "enabled": "enabled", "focusable": "focusable", "focused": "focused",
    "selected": "selected",
}


def _matches(node: ET.Element, sel: dict[str, Any]) -> bool:
    for key, want in sel.items():
        if key in ("mask", "childOrSibling", "childOrSiblingSelector", "instance"):
            continue
        if key in _ATTR:
            if node.get(_ATTR[key], "") != want:
                return False
        elif key in _BOOL_ATTR:
            if (node.get(_BOOL_ATTR[key]) == "true") != bool(want):
                return False
        elif key.endswith("Contains"):
            attr = _ATTR.get(key[: -len("Contains")], "")
            if str(want) not in node.get(attr, ""):
                return False
        elif key.endswith("StartsWith"):
            attr = _ATTR.get(key[: -len("StartsWith")], "")
            if not node.get(attr, "").startswith(str(want)):
                return False
        elif key.endswith("Matches"):
            attr = _ATTR.get(key[: -len("Matches")], "")
            try:
                if not re.fullmatch(str(want), node.get(attr, ""), re.S):
                    return False
            except re.error:
                return False
        elif key == "index":
            if node.get("index") != str(want):
                return False
    return True
