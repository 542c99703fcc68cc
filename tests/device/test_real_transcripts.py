"""Every transcript of a real phone in ``../shared/reference/real_device/`` read through the functions a
run uses, each with the reading written from the transcript (INDEX.jsonl names each file's device and
source): the foreground app (``AdbDevice.current_app``), the touchscreen and the gestures (the
recorder's ``touchscreen_of`` and ``GeteventStream``), input methods (``AdbDevice.input_methods`` and
``set_input_method``), screenshots (``AdbDevice.screenshot``), properties, screen size and density,
``adb devices -l`` (adbutils' list, which ``describe`` and ``harness devices`` use) and uiautomator
dumps (``harness.core.hierarchy.parse``). The phone is an ``AdbDevice`` whose shell answers a command with
the transcript of that command, and every other command with nothing.

The table of these readings is docs/phones.md's "What the harness reads from real phones";
:func:`test_the_docs_table_is_this_table` keeps the two the same. ``python -m tests.device.test_real_transcripts``
prints the table with what the code in the import path reads, right or wrong (how the table before
these readers was measured: the same file run against main's code).

Where a transcript lacks something a reading needs, the row says what was assumed: a stream without
its device's listing is read on a touchscreen whose axes are the screen's pixels; the emulator's
streams on the emulator fixture's listing (``virtio_input_multi_touch_10``, 0-32767) and a 1080x1920
screen; the MK802's on its own ``getevent -p`` listing and a 1920x1080 screen.
"""

from __future__ import annotations

import json
import queue
import re
import socket
import sys
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.core import hierarchy
from harness.device.adb import AdbDevice, parse_screen_state
from harness.device.base import DeviceError, InfraError
from harness.recorder.evdev import (Axis, EvdevError, InputDeviceInfo, KeyPress, Touch, Touchscreen, classify)
from harness.recorder.session import GeteventStream, RecordError, density_of, touching, touchscreen_of
from harness.core import input_codes as C

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.shared_data import ROOT, missing_reason, reference_path  # noqa: E402

FOLDER = ("real_device",)
DOCS = ROOT / "docs" / "phones.md"
TABLE_START = "<!-- readings table: generated from tests/device/test_real_transcripts.py; keep it so -->"
TABLE_END = "<!-- end of the readings table -->"
LONG_PRESS_MS = 400


def _path(rel: str) -> Path:
    base = reference_path(*FOLDER)
    if base is None:
        pytest.skip(missing_reason(*FOLDER))
    return base / rel


def _text(rel: str) -> str:
    return _path(rel).read_text(encoding="utf-8")


# --- a phone that answers with a transcript --------------------------------------------------------
class _Host:
    """A stand-in adb server on a free local port: answers ``host:devices`` and ``host:devices-l`` with
    the lines it is given (what adb sends before its client prints them), so adbutils' own parser
    reads them. Nothing else is served: a transcript phone's shell never reaches it."""

    def __init__(self) -> None:
        self.lines = ""
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    n = int(conn.recv(4), 16)
                    cmd = conn.recv(n).decode()
                    if cmd in ("host:devices", "host:devices-l"):
                        body = self.lines.encode()
                        conn.sendall(b"OKAY" + f"{len(body):04x}".encode() + body)
                    else:
                        msg = b"unsupported"
                        conn.sendall(b"FAIL" + f"{len(msg):04x}".encode() + msg)
                except (OSError, ValueError):
                    pass


_HOST: _Host | None = None


def _host() -> _Host:
    global _HOST
    if _HOST is None:
        _HOST = _Host()
    return _HOST


def phone(answers: dict[str, str], exec_answers: dict[str, bytes] | None = None, sdk: int | None = None) -> AdbDevice:
    """An AdbDevice whose shell answers ``answers`` (command line -> output) and nothing else."""
    dev = AdbDevice("transcript", host="127.0.0.1", port=_host().port)
    said = dict(answers)
    if sdk is not None:
        said.setdefault("getprop", f"[ro.build.version.sdk]: [{sdk}]\n")
    dev.shell = lambda argv, timeout=None: said.get(" ".join(map(str, argv)), "")  # type: ignore[method-assign]
    dev.exec_out = lambda command, timeout=None: (exec_answers or {}).get(command, b"")  # type: ignore[method-assign]
    return dev


_PROMPT = re.compile(r"^(?:\$ |> |[A-Z]:\\[^>]*>)?adb (?:-s \S+ )?(?:shell )?(.*?)\s*$")


def commands_in(text: str) -> dict[str, str]:
    """A pasted session (``$ adb shell CMD`` / ``> adb shell CMD | grep X`` / ``C:\\...>adb ...`` lines
    followed by their output) as command -> output; a command's outputs are joined (two greps of one
    dump are one dump's lines)."""
    out: dict[str, str] = {}
    cmd: str | None = None
    for line in text.splitlines():
        m = _PROMPT.match(line) if re.match(r"^(?:\$ |> |[A-Z]:\\|adb )", line) else None
        if m:
            cmd = m.group(1).split(" | ")[0].strip()
            out.setdefault(cmd, "")
            continue
        if cmd is not None:
            out[cmd] += line + "\n"
    return out


def window_sections(text: str) -> dict[str, str]:
    """A full ``dumpsys window`` cut into what ``dumpsys window SECTION`` prints."""
    parts = re.split(r"^(?=WINDOW MANAGER .*\(dumpsys window (\w+)\)\s*$)", text, flags=re.M)
    out: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        out[parts[i]] = parts[i + 1]
    return out


# --- readings --------------------------------------------------------------------------------------
def _full(pkg: str, act: str) -> str:
    return f"{pkg}/{pkg + act if act.startswith('.') else act}" if pkg else "nothing"


def foreground(answers: Callable[[str], dict[str, str]], sdk: int | None) -> Callable[[str], str]:
    def read(rel: str) -> str:
        return _full(*phone(answers(_text(rel)), sdk=sdk).current_app())
    return read


def _pixels_screen(path: str, size: tuple[int, int], slotted: bool = True) -> Touchscreen:
    """A touchscreen at ``path`` whose axes are the screen's pixels (a stream without its listing);
    its tracking id lists value 0, as kernels list it."""
    w, h = size
    axes = {C.ABS_MT_POSITION_X: Axis(0, w - 1), C.ABS_MT_POSITION_Y: Axis(0, h - 1), C.ABS_MT_TRACKING_ID: Axis(0, 65535)}
    if slotted:
        axes[C.ABS_MT_SLOT] = Axis(0, 9)
    dev = InputDeviceInfo(path, "(no listing)", {C.EV_ABS: set(axes), C.EV_KEY: {C.BTN_TOUCH}}, axes, {C.INPUT_PROP_DIRECT})
    return Touchscreen.of(dev, size)


def _listed_screen(listing: str, size: tuple[int, int]) -> tuple[Touchscreen, int]:
    return touchscreen_of(phone({"getevent -lp": listing, "wm size": f"Physical size: {size[0]}x{size[1]}"}))


def _describe(ts: Touchscreen) -> str:
    return f"{ts.device.path} {ts.device.name!r}, x {ts.x.minimum}-{ts.x.maximum}, y {ts.y.minimum}-{ts.y.maximum}"


def _stream(ts: Touchscreen, n_devices: int, data: bytes) -> GeteventStream:
    """``data`` fed to a recorder's getevent stream as its reader thread feeds it: split at newlines
    (a last line without one is still being written)."""
    stream = GeteventStream(phone({}), ts, n_devices, lambda m: None)
    *lines, _rest = data.split(b"\n")
    for line in lines:
        stream._line(line.decode("utf-8", "replace"))
    return stream


def _summary(stream: GeteventStream, density: int) -> str:
    found: list[Any] = []
    while True:
        try:
            found.append(stream.gestures.get_nowait())
        except queue.Empty:
            break
    slop = max(1, round(8 * density / 160))
    touches = [g for g in found if isinstance(g, Touch)]
    kinds = Counter(classify(t, slop, LONG_PRESS_MS) for t in touches)
    parts = [f"{len(touches)} touches" + (f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if touches else "")]
    keys = [g.name for g in found if isinstance(g, KeyPress)]
    parts.append("keys " + " ".join(keys) if keys else "no key")
    if touches:
        t = touches[0]
        parts.append(f"first: {classify(t, slop, LONG_PRESS_MS)} at {t.points[0]} {t.duration_ms} ms"
                     + (f", {t.contacts} fingers" if t.contacts > 1 else ""))
    held = stream.reader.touch
    parts.append(f"still down: {held.contacts} finger(s) at {held.points[0]}" if touching(stream) and held
                 else "nothing left down")
    return "; ".join(parts)


def gestures(size: tuple[int, int], density: int, listing: str | None = None, path: str = "/dev/input/event0") -> Callable[[str], str]:
    def read(rel: str) -> str:
        if listing is not None:
            ts, n = _listed_screen(_text(listing), size)
        else:
            ts, n = _pixels_screen(path, size), 0
        return _summary(_stream(ts, n, _path(rel).read_bytes()), density)
    return read


def touchscreen(size: tuple[int, int], frame: str | None = None) -> Callable[[str], str]:
    """The touchscreen the recorder picks from a listing (and, given ``frame``, how many touches a
    frame without touch data begins: a finger the listing does not hold is not there)."""
    def read(rel: str) -> str:
        try:
            ts, n = _listed_screen(_text(rel), size)
        except RecordError as e:
            return "no touchscreen (" + str(e).split("input devices: ", 1)[-1] + ")"
        out = _describe(ts)
        if frame is not None:
            stream = _stream(ts, n, frame.replace("DEV", ts.device.path).encode() + b"\n")
            out += f"; a frame of {frame.split('EV_KEY', 1)[-1].split()[0]} alone begins {stream.counts()[0]} touches"
        return out
    return read


def props(rel: str) -> str:
    dev = phone({"getprop": _text(rel)})
    p = dev.props()
    sdk = p.get("ro.build.version.sdk", "").strip() or "not listed"
    return f"model {p.get('ro.product.model', 'not listed')!r}, SDK {sdk}, a {dev.kind()}, {len(p)} properties"


def wm(command: str, pick: Callable[[str], str]) -> Callable[[str], str]:
    def read(rel: str) -> str:
        dev = phone({command: pick(_text(rel))})
        if command == "wm size":
            w, h = dev.screen_size()
            return f"{w}x{h}"
        return str(density_of(dev))
    return read


def _block_with(word: str) -> Callable[[str], str]:
    """The fenced block of a markdown page that holds ``word``."""
    def pick(text: str) -> str:
        blocks = re.findall(r"```sh\n(.*?)\n\s*```", text, flags=re.S)
        return next(b for b in blocks if word in b)
    return pick


def imes_enabled(rel: str) -> str:
    said = commands_in(_text(rel))
    ims = phone({"ime list -s": said["ime list -s"]}).input_methods()
    return "enabled: " + ", ".join(ims.enabled)


def ime_switch(rel: str) -> str:
    """``ime set`` answered with the transcript's words, on a phone where the IME was enabled and the
    keyboard in use stayed the first one listed."""
    said = commands_in(_text(rel))
    ime = "com.android.adbkeyboard/.AdbIME"
    enabled = [x for x in said["ime list -s"].split() if "/" in x]
    dev = phone({f"ime set {ime}": said[f"ime set {ime}"],
                 "settings get secure enabled_input_methods": ":".join(enabled + [ime]),
                 "settings get secure default_input_method": enabled[0]})
    try:
        dev.set_input_method(ime)
    except (DeviceError, InfraError) as e:
        return "refused: " + str(e).split(": ", 1)[-1].split(": the phone said")[0]
    return "switched"


def _tiny_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 3), (10, 20, 30)).save(buf, "PNG")
    return buf.getvalue()


def screenshot(with_png: bool) -> Callable[[str], str]:
    """``screencap -p`` answered with the phone's words (the lines it wrote, as they came) and, with
    ``with_png``, an image after them."""
    def read(rel: str) -> str:
        lines = [x for x in _text(rel).splitlines() if x.startswith(("[Warning]", "Error opening"))]
        words = "\n".join(lines).encode() + b"\n"
        dev = phone({}, {"screencap -p": words + (_tiny_png() if with_png else b"")})
        try:
            shot = dev.screenshot()
        except (InfraError, DeviceError) as e:
            quoted = lines[0][:40]
            return f"refused, quoting {quoted!r}" if quoted in str(e) else f"refused: {e}"
        from PIL import Image
        import io

        img = Image.open(io.BytesIO(shot))
        return f"a {img.width}x{img.height} PNG" + (" (the one sent)" if shot == _tiny_png() else " (not the one sent)")
    return read


def screen_state(section: str | None) -> Callable[[str], str]:
    def read(rel: str) -> str:
        text = _text(rel)
        policy = window_sections(text).get("policy", "") if section else text
        st = parse_screen_state("", policy)
        return f"lock screen showing {st.keyguard}, secure {st.secure}, trusted {st.trusted}"
    return read


def hierarchy_of(rel: str) -> str:
    els = hierarchy.parse(_text(rel))
    pkgs: list[str] = []
    for e in els:
        if e.package not in pkgs:
            pkgs.append(e.package)
    first = next((e.text for e in els if e.text), None) or next((e.desc for e in els if e.desc), "")
    return f"{len(els)} elements of {', '.join(pkgs)}; first text {first!r}"


def devices(pick: Callable[[str], str]) -> Callable[[str], str]:
    """adbutils' ``list(extended=True)`` of the lines adb sent (``describe`` and ``harness devices``)."""
    def read(rel: str) -> str:
        host = _host()
        host.lines = pick(_text(rel))
        infos = phone({}).client.list(extended=True)
        return "; ".join(f"{i.serial} {i.state}" + (f" model {i.tags['model']}" if "model" in i.tags else "") for i in infos)
    return read


def described(pick: Callable[[str], str], serial: str) -> Callable[[str], str]:
    def read(rel: str) -> str:
        _host().lines = pick(_text(rel))
        dev = phone({})
        dev.serial = serial
        d = dev.describe()
        return f"{d.serial} {d.state}: {d.problem}"
    return read


def packages(pick: Callable[[str], str]) -> Callable[[str], str]:
    def read(rel: str) -> str:
        pkgs = phone({"pm list packages": pick(_text(rel))}).installed_packages()
        return f"{len(pkgs)} packages, e.g. {sorted(pkgs)[0]}"
    return read


def not_read(reason: str) -> Callable[[str], str]:
    """A transcript of nothing the harness asks a phone: it says so, and no reader takes anything
    from it (no focus line, no input device, no event, no property)."""
    def read(rel: str) -> str:
        text = _text(rel)
        found = []
        if phone({"dumpsys window displays": text, "dumpsys activity activities": text,
                  "dumpsys activity top": text}, sdk=33).current_app() != ("", ""):
            found.append("a foreground app")
        try:
            _listed_screen(text, (1080, 1920))
            found.append("a touchscreen")
        except (RecordError, EvdevError):
            pass
        if _summary(_stream(_pixels_screen("/dev/input/event0", (1080, 1920)), 0, text.encode() + b"\n"), 420) \
                != "0 touches; no key; nothing left down":
            found.append("gestures")
        if phone({"getprop": text}).props():
            found.append("properties")
        return f"not read: {reason}" + (f" (yet read as {', '.join(found)})" if found else "")
    return read


def _only(command: str) -> Callable[[str], dict[str, str]]:
    return lambda text: {command: text}


def _grep_session(text: str) -> dict[str, str]:
    return commands_in(text)


def _full_window(text: str) -> dict[str, str]:
    s = window_sections(text)
    return {"dumpsys window displays": s.get("displays", ""), "dumpsys window windows": s.get("windows", ""),
            "dumpsys window": text}


@dataclass(frozen=True)
class Reading:
    file: str
    device: str
    command: str
    read: Callable[[str], str]
    want: str


_EMULATOR_P = "getevent/emulator_qwerty2_virtio_mt10_getevent_p_fixture.txt"
_MK802_P = "getevent/mk802iv_rk3188_3m_usb_getevent_p.txt"
_KEY_FRAME = ("[  100.000000] DEV: EV_KEY       KEY_WAKEUP           DOWN                \n"
              "[  100.000000] DEV: EV_SYN       SYN_REPORT           00000000            ")
_DOC = "doc_examples/awesome-adb_README_wm_size_density_devices_pm_list_resumed.md"

READINGS: list[Reading] = [
    # --- foreground app --------------------------------------------------------------------------
    Reading("dumpsys/appium_A11_dumpsys_window_windows.txt", "Android 11 emulator (Appium fixture)",
            "dumpsys window windows", foreground(_only("dumpsys window windows"), 30),
            "com.google.android.apps.nexuslauncher/com.google.android.apps.nexuslauncher.NexusLauncherActivity"),
    Reading("dumpsys/appium_A13_dumpsys_window_windows_indented.txt", "Android 13 Pixel/emulator (Appium fixture)",
            "dumpsys window windows", foreground(_only("dumpsys window windows"), 33),
            "com.google.android.apps.nexuslauncher/com.google.android.apps.nexuslauncher.NexusLauncherActivity"),
    Reading("dumpsys/avc_mock_dumpsys_window_windows_api16ish.txt", "Android 4.1 emulator (AndroidViewClient)",
            "dumpsys window windows", foreground(_only("dumpsys window windows"), 16),
            "com.dtmilano.android.sampleui/com.dtmilano.android.sampleui.MainActivity"),
    Reading("dumpsys/mtk_tb8168_android13_dumpsys_window_full.txt", "MediaTek tb8168 tablet, Android 13",
            "dumpsys window (displays, windows)", foreground(_full_window, 33),
            "com.mediatek.camera/com.mediatek.camera.CameraLauncher"),
    Reading("dumpsys/mtk_tb8168_android13_dumpsys_window_full.txt", "MediaTek tb8168 tablet, Android 13",
            "dumpsys window policy", screen_state("policy"),
            "lock screen showing True, secure False, trusted False"),
    Reading("dumpsys/mtk_tb8168_android13_dumpsys_activity_activities.txt", "MediaTek tb8168 tablet, Android 13",
            "dumpsys activity activities", foreground(_only("dumpsys activity activities"), 33),
            "com.mediatek.camera/com.mediatek.camera.CameraLauncher"),
    Reading("dumpsys/vivo_mt6835_dumpsys_activity_top_utf8.txt", "vivo phone (MediaTek mt6835)",
            "dumpsys activity top", foreground(_only("dumpsys activity top"), None),
            "com.kryptoloot.app/com.example.MainActivity"),
    Reading("dumpsys/avc_mock_dumpsys_window_policy_partial.txt", "Android 4 phone, 768x1280 (AndroidViewClient)",
            "dumpsys window policy", screen_state(None),
            "lock screen showing None, secure None, trusted None"),
    Reading("dumpsys/mtk_tb8168_android13_dumpsys_input.txt", "MediaTek tb8168 tablet, Android 13",
            "dumpsys input", not_read("the harness finds touchscreens with getevent"),
            "not read: the harness finds touchscreens with getevent"),
    Reading("issue_excerpts/appium-adb_797_galaxy_zflip4_android12_dumpsys_window_displays_grep.txt",
            "Samsung Galaxy Z Flip4, Android 12 (three displays)", "dumpsys window displays",
            foreground(_grep_session, 31), "jp.naver.line.android/jp.naver.line.android.activity.main.MainActivity"),
    Reading("issue_excerpts/adb-enhanced_4_photos_dumpsys_window_windows_grep.txt", "a 2018 phone (before Android 10)",
            "dumpsys window windows", foreground(_only("dumpsys window windows"), None),
            "com.google.android.apps.photos/com.google.android.apps.photos.home.HomeActivity"),
    Reading(_DOC, "awesome-adb's examples (Nexus 5, CyanogenMod)", "dumpsys activity activities",
            foreground(lambda t: {"dumpsys activity activities": _block_with("mResumedActivity:")(t)}, None),
            "com.cyanogenmod.trebuchet/com.android.launcher3.Launcher"),
    # --- getevent --------------------------------------------------------------------------------
    Reading("getevent/cartucho_recorded_touch_events_typeA.txt", "a type A touchscreen, CRLF (Cartucho)",
            "getevent -t /dev/input/event7", gestures((1080, 1920), 420, path="/dev/input/event7"),
            "1 touches (1 tap); no key; first: tap at (446, 600) 113 ms; nothing left down"),
    Reading("getevent/contentsquare_emulator_recorded_touch_events.txt", "Android emulator (0-32767 axes)",
            "getevent -t DEVICE", gestures((1080, 1920), 420, listing=_EMULATOR_P),
            "76 touches (46 swipe, 30 tap); keys KEY_BACKSPACE; first: tap at (176, 1491) 64 ms; nothing left down"),
    Reading("getevent/contentsquare_emulator_wikipedia_keys_and_touch.txt", "Android emulator, keys on the touch node",
            "getevent -t DEVICE", gestures((1080, 1920), 420, listing=_EMULATOR_P),
            "17 touches (4 swipe, 13 tap); keys KEY_O KEY_C KEY_E KEY_A KEY_N; first: tap at (116, 1749) 110 ms; "
            "nothing left down"),
    Reading(_EMULATOR_P, "Android emulator (qwerty2 + virtio_input_multi_touch_10)", "getevent -p",
            touchscreen((1080, 1920)), "/dev/input/event9 'virtio_input_multi_touch_10', x 0-32767, y 0-32767"),
    Reading("getevent/mk802iv_rk3188_3m_usb_getevent_3finger.txt", "MK802 IV mini-PC + 3M USB touchscreen",
            "getevent", gestures((1920, 1080), 160, listing=_MK802_P),
            "1 touches (1 multi); no key; first: multi at (1650, 867) 0 ms, 3 fingers; nothing left down"),
    Reading(_MK802_P, "MK802 IV mini-PC + 3M USB touchscreen", "getevent -p", touchscreen((1920, 1080)),
            "/dev/input/event2 '3M 3M MicroTouch USB controller', x 0-32767, y 0-32767"),
    Reading("getevent/nsgamescriptor_getevent_pinch.txt", "a two-finger capture, cut short (NSGameScriptor)",
            "getevent", gestures((1920, 1920), 420, path="/dev/input/event2"),
            "0 touches; no key; still down: 2 finger(s) at (616, 32)"),
    Reading("getevent/pixel_xl_marlin_getevent_t.txt", "Google Pixel XL (synaptics_dsxv26)", "getevent -t",
            gestures((1440, 2560), 560, path="/dev/input/event2"),
            "1 touches (1 tap); no key; first: tap at (620, 700) 49 ms; nothing left down"),
    Reading("getevent/vivo_pad_mt6991_getevent_lp.txt", "vivo tablet (vivo_ts, a pen, a fingerprint sensor)",
            "getevent -lp", touchscreen((2064, 3096), _KEY_FRAME),
            "/dev/input/event6 'vivo_ts', x 0-20639, y 0-30959; a frame of KEY_WAKEUP alone begins 0 touches"),
    Reading("getevent/vivo_pad_uhid_event9_getevent_lt.txt", "vivo tablet, a virtual HID touchscreen",
            "getevent -lt /dev/input/event9", gestures((2064, 3096), 320, path="/dev/input/event9"),
            "3 touches (3 multi); no key; first: multi at (320, 920) 15307 ms, 4 fingers; nothing left down"),
    Reading("issue_excerpts/minitouch_25_htc_m8x_getevent_lp_wrapper_partial.txt", "HTC M8x, a sensor wrapper (cut)",
            "getevent -lp", touchscreen((1080, 1920)), "no touchscreen (none)"),
    Reading("issue_excerpts/minitouch_30_lg_lmv350_getevent_ilp_partial.txt", "LG LM-V350, Android 8 (cut)",
            "getevent -ilp", touchscreen((1440, 3120)),
            "no touchscreen (/dev/input/event7 ('uinput-fpc'), /dev/input/event6)"),
    # --- properties, screen ----------------------------------------------------------------------
    Reading("getprop/asus_tf201_android3.2.1_getprop_crlf.txt", "Asus Transformer Prime TF201, Android 3.2 (CRLF)",
            "getprop", props, "model 'TF201', SDK 13, a phone, 170 properties"),
    Reading("getprop/motorola_edge20_android13_getprop.txt", "motorola edge 20, Android 13", "getprop", props,
            "model 'motorola edge 20', SDK 33, a phone, 863 properties"),
    Reading("getprop/mtk_tb8168_android13_getprop_full.txt", "MediaTek tb8168 tablet, Android 13", "getprop", props,
            "model 'tb8168p1_64_bsp_k510', SDK 33, a phone, 1186 properties"),
    Reading("issue_excerpts/redroid-modules_5_redroid12_getprop_excerpt.txt", "redroid (Android 12 in a container; cut)",
            "getprop", props, "model 'not listed', SDK not listed, a phone, 31 properties"),
    Reading("issue_excerpts/minicap_java_6_redmi_note1_wm_size_permission_denied.txt", "Xiaomi Redmi Note 1",
            "wm size", wm("wm size", lambda t: commands_in(t)["wm size"]), "720x1280"),
    Reading(_DOC, "awesome-adb's examples", "wm size", wm("wm size", _block_with("Override size")), "480x1024"),
    Reading(_DOC, "awesome-adb's examples", "wm density", wm("wm density", _block_with("Override density")), "160"),
    Reading(_DOC, "awesome-adb's examples", "pm list packages", packages(_block_with("package:")),
            "10 packages, e.g. com.android.documentsui"),
    # --- adb's device list -----------------------------------------------------------------------
    Reading("issue_excerpts/korge_225_adb_devices_and_devices_l_emulator.txt", "Android emulator sdk_gphone_x86",
            "adb devices -l", devices(lambda t: commands_in(t)["devices -l"].split("attached\n", 1)[1]),
            "emulator-5554 device model sdk_gphone_x86"),
    Reading("issue_excerpts/minitouch_25_adb_devices_l_htc_honor.txt", "HTC M8x and Huawei Honor H30-L02",
            "adb devices -l", devices(lambda t: t),
            "HT442WM01077 device model HTC_M8x; BY2QLS149C054578 device model HONOR_H30_L02"),
    Reading(_DOC, "awesome-adb's examples", "adb devices",
            devices(lambda t: _block_with("10.129")(t).split("attached\n", 1)[1]),
            "cf264b8f device; emulator-5554 device; 10.129.164.6:5555 device"),
    Reading(_DOC, "awesome-adb's examples", "adb devices (offline)",
            described(lambda t: _block_with("offline")(t).split("attached\n", 1)[1], "cf264b8f"),
            "cf264b8f offline: offline: reconnect the device"),
    # --- input methods ---------------------------------------------------------------------------
    Reading("issue_excerpts/adbkeyboard_66_android14_ime_list_s_and_unknown_ime.txt", "an Android 14 phone",
            "ime list -s", imes_enabled, "enabled: com.android.inputmethod.latin/.LatinIME, com.volosyukivan/.WiFiInputMethod"),
    Reading("issue_excerpts/adbkeyboard_66_android14_ime_list_s_and_unknown_ime.txt", "an Android 14 phone",
            "ime set com.android.adbkeyboard/.AdbIME", ime_switch,
            "refused: could not switch the keyboard to com.android.adbkeyboard/.AdbIME"),
    # --- screenshots -----------------------------------------------------------------------------
    Reading("issue_excerpts/adbutils_133_screencap_multiple_displays_warning_truncated.txt",
            "Android emulator with two displays", "screencap -p (the warning, then the image)", screenshot(True),
            "a 2x3 PNG (the one sent)"),
    Reading("issue_excerpts/adbutils_133_screencap_multiple_displays_warning_truncated.txt",
            "Android emulator with two displays", "screencap -p (the warning alone)", screenshot(False),
            "refused, quoting '[Warning] Multiple displays were found, '"),
    Reading("issue_excerpts/unity_logcat_14_lg_g4_screencap_permission_denied.txt", "LG G4", "screencap (an error)",
            screenshot(False), "refused, quoting 'Error opening file: /sdcard/test.png (Pe'"),
    # --- not what the harness asks ---------------------------------------------------------------
    Reading("adb_host/adb_bugreport_host_output.txt", "MediaTek tb8168 tablet", "adb bugreport (host side)",
            not_read("the harness does not take bug reports"), "not read: the harness does not take bug reports"),
    Reading("issue_excerpts/minitouch_22_nvidia_androidtv_no_touch_device.txt", "Nvidia Android TV", "minitouch",
            not_read("minitouch's own log"), "not read: minitouch's own log"),
    Reading("issue_excerpts/minitouch_25_minitouch_logs_htc_honor.txt", "HTC M8x and Huawei Honor H30-L02", "minitouch",
            not_read("minitouch's own log"), "not read: minitouch's own log"),
    Reading("issue_excerpts/minitouch_30_lg_lmv350_android8_minitouch_log.txt", "LG LM-V350, Android 8", "minitouch",
            not_read("minitouch's own log"), "not read: minitouch's own log"),
]

_DUMPS = {
    "androidtv_philo_1920x1080.xml": ("Android TV box, 1920x1080", "45 elements of com.philo.philo; first text 'Start channel playback from…'"),
    "avc_mock_api17_chinese.xml": ("Android 4.2 phone, Chinese (AndroidViewClient)", "21 elements of android; first text '6:40'"),
    "avc_mock_api27_nexuslauncher.xml": ("Android 8.1 Pixel launcher (AndroidViewClient)",
                                         "29 elements of com.google.android.apps.nexuslauncher; first text 'Sunday, May 19'"),
    "bluestacks_spotlight_rotation1.xml": ("BlueStacks, rotation 1", "126 elements of net.spotlightlabs.spotlight; first text 'The Daily Collegian'"),
    "futu_trader_chinese_1080x1920.xml": ("a phone, Chinese app", "72 elements of cn.futu.trader; first text '调仓历史'"),
    "google_messages_720x1536.xml": ("a phone, Google Messages", "110 elements of com.google.android.apps.messaging; first text 'test'"),
    "transsion_xos_launcher_1080x2156.xml": ("Transsion XOS phone", "45 elements of com.transsion.XOSLauncher; first text 'Search Apps'"),
    "u2_2018_herald_chinese_800x1216.xml": ("a 2018 uiautomator2 dump, Chinese", "25 elements of cn.seu.herald_android; first text '一卡通'"),
    "u2_facebook_drawing_order_hint.xml": ("uiautomator2 dump: drawing-order, hint, visible-to-user",
                                           "104 elements of com.facebook.katana, com.android.systemui; first text '2:06'"),
    "u2_homee_display_id.xml": ("uiautomator2 dump with display-id", "50 elements of com.android.systemui, de.vorwerk.homee.homee; first text '6:44'"),
    "vivo_launcher_bbk_chinese.xml": ("vivo phone, launcher, Chinese", "98 elements of com.bbk.launcher2, com.vivo.appsuggestion; first text '应用建议'"),
    "vivo_mt6835_systemui_shell_dump_drawing_order.xml": ("vivo phone, shell dump with drawing-order",
                                                          "234 elements of com.android.systemui; first text 'System UI'"),
    "vivo_wework_chat_chinese.xml": ("vivo phone, WeCom chat, Chinese", "116 elements of com.tencent.wework; first text '远方好物浦江活力群1(166)'"),
    "xiaomi_miui_instagram_u2_visible_to_user.xml": ("Xiaomi MIUI phone, visible-to-user",
                                                     "26 elements of com.instagram.android, com.android.systemui, com.miui.home; first text 'Contact'"),
}
READINGS += [Reading(f"uiautomator/{name}", device, "uiautomator dump", hierarchy_of, want)
             for name, (device, want) in _DUMPS.items()]


def _id(r: Reading) -> str:
    return f"{r.file.rsplit('/', 1)[-1]}:{r.command}"


def _index() -> list[dict[str, Any]]:
    return [json.loads(line) for line in _text("INDEX.jsonl").splitlines() if line.strip()]


def test_every_transcript_has_a_reading():
    indexed = {e["file"] for e in _index()}
    on_disk = {str(p.relative_to(_path(""))) for p in _path("").rglob("*") if p.is_file()} - {"INDEX.jsonl", "PARSING_NOTES.md"}
    assert indexed == on_disk, "INDEX.jsonl and the folder differ"
    assert {r.file for r in READINGS} == indexed, ("transcripts without a reading: "
                                                    f"{sorted(indexed - {r.file for r in READINGS})}")


@pytest.mark.parametrize("reading", READINGS, ids=_id)
def test_the_phone_is_read_as_it_meant(reading: Reading):
    assert reading.read(reading.file) == reading.want


def table() -> str:
    """The readings as docs/phones.md shows them."""
    rows = ["| Device | Command | What was read |", "|---|---|---|"]
    for r in READINGS:
        want = r.want.replace("|", "\\|")
        rows.append(f"| {r.device} | `{r.command}` | {want} |")
    return "\n".join(rows)


def test_the_docs_table_is_this_table():
    text = DOCS.read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text, f"{DOCS}: the readings table's markers are missing"
    shown = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    assert shown == table(), f"docs/phones.md's readings table differs from the tests; it should read:\n{table()}"


def main() -> None:
    """Print every reading: what the code in the import path reads, and whether it is right."""
    right = 0
    counted = [r for r in READINGS if not r.want.startswith("not read")]
    print("| Device | Command | Expected | Read | |")
    print("|---|---|---|---|---|")
    for r in READINGS:
        try:
            got = r.read(r.file)
        except Exception as e:  # a reader that fails is a wrong reading
            got = f"{type(e).__name__}: {e}"[:160]
        ok = got == r.want
        right += ok and r in counted
        print(f"| {r.device} | `{r.command}` | {r.want} | {'' if ok else got} | {'right' if ok else 'WRONG'} |")
    print(f"\n{right} of {len(counted)} readings right ({len(READINGS) - len(counted)} transcripts hold nothing the harness asks)")


if __name__ == "__main__":
    main()
