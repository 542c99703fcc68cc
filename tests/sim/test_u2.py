"""uiautomator2 3.7.1 driving the simulated phone: ``u2.connect(serial)`` pushes and starts its
server (app_process) and then speaks JSON-RPC over ``tcp:9008`` through the private adb server."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from pathlib import Path

import adbutils
import pytest
import uiautomator2 as u2  # a dependency of ours: missing, the tests fail (never skip)
from PIL import Image

from fake_phone import FakePhone
from harness.sim.u2 import TouchTracker, U2Server


@pytest.fixture
def u2_sim(connect_phone, adb_server, monkeypatch: pytest.MonkeyPatch):
    # u2.connect(serial) looks the serial up through adbutils.adb, the module-level client
    monkeypatch.setattr(adbutils, "adb", adbutils.AdbClient(host="127.0.0.1", port=adb_server.port))
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(adb_server.port))
    sim = connect_phone(FakePhone())
    d = u2.connect(sim.serial)
    yield sim, d
    d.stop_uiautomator(wait=False)


def test_connect_pushes_jar_and_starts_server(u2_sim) -> None:
    sim, d = u2_sim
    jar = (Path(u2.__file__).parent / "assets" / "u2.jar").read_bytes()
    assert sim.phone.fs.read("/data/local/tmp/u2.jar") == jar
    log = sim.server.shell.log
    assert ["toybox", "md5sum", "/data/local/tmp/u2.jar"] in log
    assert ["app_process", "/", "com.wetest.uia2.Main", "-p", "9008"] in log
    assert sim.server.u2.is_running(9008)
    # the md5 check now matches, so a second connect does not push again
    assert hashlib.md5(jar).hexdigest() in d.shell(["toybox", "md5sum", "/data/local/tmp/u2.jar"]).output


def test_u2_api_reaches_phone(u2_sim) -> None:
    sim, d = u2_sim
    phone = sim.phone
    info = d.info
    assert info["displayWidth"] == 1080 and info["displayHeight"] == 2400 and info["sdkInt"] == 34
    assert info["productName"] == "crate_fake"
    assert d.window_size() == (1080, 2400)
    img = d.screenshot()
    assert isinstance(img, Image.Image) and img.size == (1080, 2400)
    r, g, b = img.getpixel((870, 2170))
    assert abs(r - 0) < 20 and abs(g - 120) < 20 and abs(b - 215) < 20
    xml = d.dump_hierarchy()
    assert xml.startswith("<?xml") and 'resource-id="com.example.notes:id/save"' in xml
    phone.events.clear()
    d.click(100, 200)
    d.swipe(100, 1500, 100, 500, 0.2)
    d.press("back")
    d.press("home")
    d.press(66)
    d.long_click(300, 400, 0.8)
    d.send_keys("中文")
    assert phone.events == [
        ("tap", 100, 200),
        ("swipe", 100, 1500, 100, 500, 200),
        ("keyevent", "BACK"),
        ("keyevent", "HOME"),
        ("keyevent", 66),
        ("long_press", 300, 400, 800),
        ("input_text", "中文"),
    ]
    calls = [m for m, _ in sim.server.u2.calls]
    assert {"deviceInfo", "takeScreenshot", "dumpWindowHierarchy", "click", "swipe", "pressKey", "setClipboard", "getClipboard", "pasteClipboard"} <= set(calls)
    assert sim.server.shell.installs == []  # send_keys never needed an APK
    d.app_start("com.example.shop")
    assert d.app_current()["package"] == "com.example.shop"
    assert d.app_wait("com.example.shop", timeout=3) > 0  # found through `pm list packages` + `ps -A`
    d.app_stop("com.example.shop")
    assert phone.events[-1] == ("force_stop", "com.example.shop")


def test_u2_selectors_and_touch(u2_sim) -> None:
    sim, d = u2_sim
    phone = sim.phone
    phone.events.clear()
    assert d(text="Save").exists
    assert not d(text="Nope").exists
    assert d(resourceId="com.example.notes:id/title").get_text() == "Title"
    d(text="Save").click()
    assert phone.events[-1] == ("tap", 870, 2170)
    assert d(description="save note").info["bounds"] == {"left": 700, "top": 2100, "right": 1040, "bottom": 2240}
    with pytest.raises(u2.UiObjectNotFoundError):
        d(text="Nope").click(timeout=0.2)
    d.touch.down(10, 10).move(200, 300).up(200, 300)
    assert phone.events[-1][0] == "swipe" and phone.events[-1][1:5] == (10, 10, 200, 300)
    d(text="Title").set_text("new")
    assert phone.events[-1] == ("input_text", "new")
    assert d.xpath('//*[@text="Save"]').exists


def test_stop_makes_tcp_9008_refused_and_restart_works(u2_sim) -> None:
    sim, d = u2_sim
    d.stop_uiautomator()
    assert not sim.server.u2.is_running(9008)
    dev = sim.device()
    c = dev.open_transport()
    c.send_command("tcp:9008")
    with pytest.raises(adbutils.AdbError):
        c.check_okay()
    c.close()
    assert d.info["displayWidth"] == 1080  # jsonrpc_call restarts the server on demand
    assert sim.server.u2.is_running(9008)


def test_rpc_errors_and_http_paths() -> None:
    phone = FakePhone()
    server = U2Server(phone)
    assert server.handle_http("GET", "/ping", b"") == (200, "OK", "text/plain", b"pong")
    assert server.handle_http("GET", "/nothing", b"")[0] == 404
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "noSuchMethod", "params": []}).encode()
    reply = json.loads(server.handle_http("POST", "/jsonrpc/0", body)[3])
    assert reply["error"]["code"] == -32601
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "objInfo", "params": [{"text": "none", "mask": 1}]}).encode()
    reply = json.loads(server.handle_http("POST", "/jsonrpc/0", body)[3])
    assert "uiautomator.UiObjectNotFoundException" in reply["error"]["message"]
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "takeScreenshot", "params": [0.5, 50]}).encode()
    b64 = json.loads(server.handle_http("POST", "/jsonrpc/0", body)[3])["result"]
    img = Image.open(io.BytesIO(base64.b64decode(b64)))
    assert img.format == "JPEG" and img.size == (540, 1200)
    assert server.handle_http("POST", "/jsonrpc/0", b"{not json")[0] == 200


def test_touch_tracker_classification() -> None:
    phone = FakePhone()
    t = TouchTracker(phone)
    assert t.gesture([(100, 100), (110, 105)], 100) == "tap"  # within 8 dp at 420 dpi
    assert t.gesture([(100, 100), (100, 100)], 600) == "long_press"
    assert t.gesture([(100, 100), (130, 100)], 100) == "swipe"
    assert phone.events == [("tap", 100, 100), ("long_press", 100, 100, 600), ("swipe", 100, 100, 130, 100, 100)]
