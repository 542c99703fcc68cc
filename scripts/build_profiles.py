"""Build the device profiles shipped in harness/sim/profiles/ (``harness sim serve --profile NAME``).

    .venv/bin/python scripts/build_profiles.py [--reference ../shared/reference/real_device]

``pixel8`` is a capture (``harness devices capture``) of the simulated phone playing its retail
Pixel 8 (``harness sim serve --as-phone``, 1080x2400): the persona as a profile. The others are
built from the real transcripts in ``../shared/reference/real_device`` (INDEX.jsonl names each
one's repository, path and commit): each answer is a transcript as it is (``transcript``), a part of
one or a listing read off another dump (``derived``), or, where the transcripts say nothing, the
Pixel 8's answer (``filled``). Answers that depend on the screen's size are never filled: the
simulated phone answers them itself. Each folder's SOURCES file says which is which.

The answers are small text files: command outputs only, no screenshots (an image answer keeps the
bytes the phone wrote before its image).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import __version__  # noqa: E402
from harness.device.capture import device_of, foreground_of  # noqa: E402
from harness.device.getprop import parse_props  # noqa: E402
from harness.device.read_only_commands import to_capture  # noqa: E402
from harness.core.profile_folder import Answer, Manifest, file_for, read_manifest, write_manifest  # noqa: E402
from harness.records import now_iso  # noqa: E402

OUT = ROOT / "harness" / "sim" / "profiles"
LICENSE = ("license: per source (../shared/reference/README.md: \"per source; device output, kept verbatim (issue "
           "excerpts re-typed from the thread, flagged in notes)\"); the sources below state no other")
# answers whose text depends on the screen's size or the phone's current state: never filled from another phone
SIZED = {"wm size", "wm density", "dumpsys display", "dumpsys SurfaceFlinger --display-id", "dumpsys window",
         "dumpsys window displays", "dumpsys window windows", "dumpsys activity activities", "dumpsys activity top",
         "dumpsys input", "screencap -p", "screencap", "getevent -lp", "dumpsys power", "dumpsys window policy",
         "uiautomator dump " + next(c.argv[2] for c in to_capture() if c.argv[:2] == ("uiautomator", "dump"))}
# what Android's screencap writes to stderr on a device with several displays and no -d (AOSP
# cmds/screencap/screencap.cpp; its three lines as quoted whole in google/mobileharness's fold-device
# comment and LmeSzinc/AzurLaneAutoScript module/device/method/utils.py @ 9d738099; adbutils issue
# 133's excerpt is its first line, cut short by the issue corpus)
MULTI_DISPLAY_WARNING = (
    "[Warning] Multiple displays were found, but no display id was specified! Defaulting to the first display "
    "found, however this default is not guaranteed to be consistent across captures. A display id should be "
    "specified.\nA display ID can be specified with the [-d display-id] option.\n"
    "See \"dumpsys SurfaceFlinger --display-id\" for valid display IDs.\n")


@dataclass
class Built:
    name: str
    title: str
    answers: dict[str, tuple[bytes, str]] = field(default_factory=dict)   # command -> (bytes, origin)
    images: dict[str, dict] = field(default_factory=dict)
    windows: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


class Reference:
    def __init__(self, folder: Path):
        self.folder = folder
        self.index = {json.loads(line)["file"]: json.loads(line) for line in
                      (folder / "INDEX.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()}

    def read(self, file: str) -> bytes:
        return (self.folder / file).read_bytes()

    def cite(self, file: str) -> str:
        return f"{file}: {self.index[file]['source']}"


def section(text: str, header: str) -> str:
    """One section of a full ``dumpsys window`` (its header line to the next separator), as the
    section's own command prints it."""
    start = text.index(header)
    end = text.find("\n---", start)
    return text[start:end + 1 if end >= 0 else len(text)]


# --- the Pixel 8 persona, captured --------------------------------------------------------------------
def capture_pixel8() -> tuple[Manifest, Path]:
    from harness.device.adb import AdbDevice
    from harness.device.adb_server import AdbServer, free_port
    from harness.device.capture import capture
    from harness.sim.phone import SimPhone
    from harness.sim.serve import serve

    folder = Path(tempfile.mkdtemp(prefix="pixel8-")) / "pixel8"
    with AdbServer() as adb:
        phone = SimPhone(1080, 2400, as_phone=True)
        phone.reset()
        handle = serve(phone, free_port())
        try:
            dev = AdbDevice(adb.connect(f"127.0.0.1:{handle.port}"), port=adb.port)
            m = capture(dev, folder, name="pixel8")
        finally:
            handle.stop()
    return m, folder


def pixel8_answers(m: Manifest, folder: Path) -> dict[str, bytes]:
    return {a.command: (folder / a.file).read_bytes() for a in m.answers if not a.error}


def fill(b: Built, pixel8: dict[str, bytes], sources: list[str], notes: list[str]) -> Built:
    """``b`` with its sources and notes, and the Pixel 8's answers for what the transcripts do not
    say (never the sized ones)."""
    b.sources, b.notes = sources, b.notes + notes
    props = parse_props((b.answers.get("getprop") or (pixel8["getprop"], ""))[0].decode("utf-8", "surrogateescape"))
    for command, data in pixel8.items():
        if command in b.answers or command in SIZED:
            continue
        name = command.split()[1] if command.startswith("getprop ") else None
        if name and b.answers.get("getprop"):
            b.answers[command] = ((props.get(name, "") + "\n").encode(), "derived: the value in this profile's getprop")
        else:
            b.answers[command] = (data, "filled: the Pixel 8 profile's answer")
    return b


def _getevent_lp(devices: list[dict]) -> str:
    """A ``getevent -lp`` listing of ``devices`` in getevent.c's layout (for listings read off
    another dump), printed by the simulated kernel from the devices."""
    from harness.core import input_codes as C
    from harness.sim.evdev import AbsInfo, InputDevice, format_capabilities

    lines = []
    for n, d in enumerate(devices, 1):
        dev = InputDevice(d["path"], d["name"], keys=d.get("keys", []),
                          abs={c: AbsInfo(*r) for c, r in d.get("abs", {}).items()},
                          props=[C.INPUT_PROP_DIRECT] if d.get("direct") else [])
        lines += [f"add device {n}: {dev.path}", f'  name:     "{dev.name}"', *format_capabilities(dev, labels=True)]
    return "\n".join(lines) + "\n"


# --- the profiles -----------------------------------------------------------------------------------
def mtk_tablet(ref: Reference, pixel8: dict[str, bytes]) -> Built:
    from harness.core import input_codes as C

    b = Built("mtk-tablet-android13", "MediaTek tablet tb8168p1_64_bsp_k510 (AXXS), Android 13 / SDK 33, 480x800 240dpi")
    full = ref.read("dumpsys/mtk_tb8168_android13_dumpsys_window_full.txt").decode("utf-8")
    b.answers["getprop"] = (ref.read("getprop/mtk_tb8168_android13_getprop_full.txt"), "transcript")
    b.answers["dumpsys window displays"] = (
        section(full, "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)").encode(),
        "derived: the 'dumpsys window displays' section of the full dumpsys window transcript")
    b.answers["dumpsys window windows"] = (
        section(full, "WINDOW MANAGER WINDOWS (dumpsys window windows)").encode(),
        "derived: the 'dumpsys window windows' section of the full dumpsys window transcript")
    b.answers["dumpsys window policy"] = (
        section(full, "WINDOW MANAGER POLICY STATE (dumpsys window policy)").encode(),
        "derived: its section of the full dumpsys window transcript (kept for the record: the simulated "
        "phone answers `dumpsys window policy` from its own lock screen)")
    b.answers["dumpsys activity activities"] = (ref.read("dumpsys/mtk_tb8168_android13_dumpsys_activity_activities.txt"),
                                                "transcript")
    b.answers["dumpsys input"] = (ref.read("dumpsys/mtk_tb8168_android13_dumpsys_input.txt"), "transcript")
    m = re.search(r"init=(\d+)x(\d+) (\d+)dpi", full)
    b.answers["wm size"] = (f"Physical size: {m.group(1)}x{m.group(2)}\n".encode(),
                            "derived: init=480x800 of the displays section")
    b.answers["wm density"] = (f"Physical density: {m.group(3)}\n".encode(), "derived: 240dpi of the displays section")
    # the Event Hub's devices and sil_ts's "Raw Touch Axes" in dumpsys input; the keys of the key
    # nodes are not in it: mtk-pmic-keys' are the vivo tablet's mtk-pmic-keys (also MediaTek)
    b.answers["getevent -lp"] = (_getevent_lp([
        {"path": "/dev/input/event3", "name": "mt-snd-card Headset Jack", "keys": [0x72, 0x73, 0xE2]},
        {"path": "/dev/input/event2", "name": "mtk-pmic-keys", "keys": [C.KEY_VOLUMEDOWN, C.KEY_POWER]},
        {"path": "/dev/input/event1", "name": "mtk-kpd", "keys": [C.KEY_VOLUMEUP]},
        {"path": "/dev/input/event0", "name": "sil_ts", "direct": True,
         "abs": {C.ABS_MT_SLOT: (0, 10), C.ABS_MT_TOUCH_MAJOR: (0, 255), C.ABS_MT_WIDTH_MAJOR: (0, 200),
                 C.ABS_MT_POSITION_X: (0, 480), C.ABS_MT_POSITION_Y: (0, 800), C.ABS_MT_TRACKING_ID: (0, 65535)}},
    ]).encode(), "derived: dumpsys input's Event Hub devices (names, paths) and sil_ts's Raw Touch Axes (slot 0-10, "
                 "tracking id 0-65535, X 0-480, Y 0-800, touch major 0-255, tool major 0-200); the key nodes' keys "
                 "are not in it: the headset jack's are Android's headset keys, mtk-pmic-keys' those of the vivo "
                 "tablet's mtk-pmic-keys, mtk-kpd's volume up (a guess)")
    b.windows = ["NotificationShade"]  # the screen was asleep under the lock screen: its shade had the focus
    return fill(
        b, pixel8,
        sources=[ref.cite(f) for f in ("getprop/mtk_tb8168_android13_getprop_full.txt",
            "dumpsys/mtk_tb8168_android13_dumpsys_window_full.txt",
            "dumpsys/mtk_tb8168_android13_dumpsys_activity_activities.txt",
            "dumpsys/mtk_tb8168_android13_dumpsys_input.txt")],
        notes=["The transcripts were taken asleep under the lock screen (mCurrentFocus NotificationShade): the "
            "simulated phone, awake and unlocked, names its app in front on the focus lines instead.",
            "The full `dumpsys window` (95 KB) is not shipped; its displays, windows and policy sections are."])


def with_props(getprop: bytes, values: dict[str, str]) -> bytes:
    """A getprop listing with ``values`` set (replaced, or added), sorted as getprop prints."""
    props = getprop.decode()
    for k, v in values.items():
        props, n = re.subn(rf"^\[{re.escape(k)}\]: \[.*?\]$", f"[{k}]: [{v}]", props, flags=re.M)
        if not n:
            props += f"[{k}]: [{v}]\n"
    return "".join(sorted(props.splitlines(keepends=True))).encode()


def named_for(pixel8: dict[str, bytes], manufacturer: str, model: str, why: str) -> tuple[bytes, str]:
    """The Pixel 8's properties under the name of the device a profile is built for, so that `harness
    devices` names that device (not a Pixel 8): only ro.product.manufacturer, brand, model and marketname change."""
    values = {"ro.product.manufacturer": manufacturer, "ro.product.brand": manufacturer.lower(),
              "ro.product.model": model, "ro.product.marketname": model}
    return with_props(pixel8["getprop"], values), (
        f"derived: the Pixel 8's properties named for this profile's device: manufacturer {manufacturer}, model "
        f"{model!r} ({why}; no transcript has its getprop, so its model number is unknown); SDK, build and the "
        "rest are the Pixel 8's")


def emulator_a11(ref: Reference, pixel8: dict[str, bytes]) -> Built:
    b = Built("emulator-android11", "Android Emulator, Android 11 / SDK 30, 1080x1920 420dpi, virtio touchscreens")
    windows = ref.read("dumpsys/appium_A11_dumpsys_window_windows.txt")
    b.answers["dumpsys window windows"] = (windows, "transcript")
    b.answers["getevent -p"] = (ref.read("getevent/emulator_qwerty2_virtio_mt10_getevent_p_fixture.txt"),
                                "transcript (2 of the emulator's 12 input devices, as the fixture's author chose)")
    text = windows.decode()
    m = re.search(r"mBounds=Rect\(0, 0 - (\d+), (\d+)\)", text)
    b.answers["wm size"] = (f"Physical size: {m.group(1)}x{m.group(2)}\n".encode(), "derived: mBounds of the windows")
    dpi = re.search(r" (\d+)dpi ", text).group(1)
    b.answers["wm density"] = (f"Physical density: {dpi}\n".encode(),
                               "derived: the windows' configuration (420dpi)")
    emulator = {"ro.product.model": "sdk_gphone_x86", "ro.product.name": "sdk_gphone_x86",
                "ro.product.device": "generic_x86_arm", "ro.product.manufacturer": "Google",
                "ro.build.version.sdk": "30", "ro.build.version.release": "11", "ro.build.id": "RSR1.201013.001",
                "ro.build.display.id": "RSR1.201013.001",
                "ro.hardware": "ranchu", "ro.boot.hardware": "ranchu", "ro.kernel.qemu": "1",
                "ro.product.cpu.abi": "x86"}
    b.answers["getprop"] = (
        with_props(pixel8["getprop"], emulator),
        "derived: the Pixel 8's properties with the emulator's identity: model sdk_gphone_x86 (korge-next issue "
        "225's `adb devices -l`), SDK 30 and release 11 (the windows transcript is Android 11's), ro.hardware "
        "ranchu and ro.kernel.qemu 1 (the emulator's; the getevent fixture's goldfish/ranchu nodes); the build id "
        "RSR1.201013.001 is an Android 11 emulator image's; the fingerprint and the rest are the Pixel 8's")
    return fill(
        b, pixel8,
        sources=[ref.cite("dumpsys/appium_A11_dumpsys_window_windows.txt"),
            ref.cite("getevent/emulator_qwerty2_virtio_mt10_getevent_p_fixture.txt"),
            ref.cite("issue_excerpts/korge_225_adb_devices_and_devices_l_emulator.txt")],
        notes=["`dumpsys window displays` is the simulated phone's own (no transcript of an Android 11 one): the "
            "foreground app is read from it first, as on an Android 11 phone; the windows transcript serves "
            "the fallback and mTopFocusedDisplayId.",
            "`getevent -lp` is printed by the simulated kernel from the numeric fixture: codes harness.core.input_codes "
            "does not name print as four hex digits where the emulator prints a label."])


def type_a(ref: Reference, pixel8: dict[str, bytes]) -> Built:
    from harness.core import input_codes as C

    b = Built("type-a-touchscreen", "A type A touchscreen (SYN_MT_REPORT, BTN_TOUCH), 720x1280; the rest a Pixel 8")
    listing = _getevent_lp([
        {"path": "/dev/input/event0", "name": "gpio-keys", "keys": [C.KEY_VOLUMEDOWN, C.KEY_VOLUMEUP, C.KEY_POWER]},
        {"path": "/dev/input/event7", "name": "touchscreen", "direct": True, "keys": [C.BTN_TOUCH],
         "abs": {C.ABS_MT_TOUCH_MAJOR: (0, 255), C.ABS_MT_WIDTH_MAJOR: (0, 255), C.ABS_MT_POSITION_X: (0, 720),
                 C.ABS_MT_POSITION_Y: (0, 1280), C.ABS_MT_TRACKING_ID: (0, 15)}},
    ])
    b.answers["getevent -lp"] = (listing.encode(), (
        "derived: the codes and protocol of Cartucho's type A recording on /dev/input/event7 (BTN_TOUCH, "
        "TOUCH_MAJOR 0030, WIDTH_MAJOR 0032, POSITION_X/Y 0035/0036, TRACKING_ID 0039, SYN_MT_REPORT after each "
        "contact, no ABS_MT_SLOT) with the Huawei Honor H30-L02's type A touchscreen of minitouch issue 25 "
        "('touchscreen', 720x1280 with 16 contacts: minitouch prints the X/Y maxima and tracking id max + 1); "
        "the major axes' 0-255 and gpio-keys are the Pixel 8's"))
    b.answers["wm size"] = (b"Physical size: 720x1280\n", "derived: the Honor's 720x1280 (minitouch issue 25)")
    ime = ref.read("issue_excerpts/adbkeyboard_66_android14_ime_list_s_and_unknown_ime.txt").decode()
    ids = [line.strip() for line in ime.split("$ adb shell ime list -s", 1)[1].split("$ ")[0].splitlines() if line.strip()]
    b.answers["ime list -s"] = ("".join(i + "\n" for i in ids).encode(),
                                "derived: the lines `ime list -s` printed in ADBKeyboard issue 66 (an Android 14 phone)")
    b.answers["settings get secure enabled_input_methods"] = ((":".join(ids) + "\n").encode(),
                                                              "derived: the same input methods, as the setting holds them")
    b.answers["settings get secure default_input_method"] = ((ids[0] + "\n").encode(),
                                                             "derived: the first of them (the issue does not say which)")
    return fill(
        b, pixel8,
        sources=[ref.cite("getevent/cartucho_recorded_touch_events_typeA.txt"),
            ref.cite("issue_excerpts/minitouch_25_minitouch_logs_htc_honor.txt"),
            ref.cite("issue_excerpts/adbkeyboard_66_android14_ime_list_s_and_unknown_ime.txt")],
        notes=["The input devices are a type A phone's; the enabled input methods (LatinIME and WiFiInputMethod) "
            "another Android 14 phone's; the rest is the Pixel 8's (the transcripts say nothing else), and "
            "`wm density` the simulated phone's own."])


def vivo_pad(ref: Reference, pixel8: dict[str, bytes]) -> Built:
    b = Built("vivo-pad-two-touch", "vivo tablet (MediaTek mt6991): vivo_ts, a pen and a second MT node (vivo_ts_fp)")
    b.answers["getevent -lp"] = (ref.read("getevent/vivo_pad_mt6991_getevent_lp.txt"), "transcript")
    b.answers["wm size"] = (b"Physical size: 2064x3096\n",
                            "derived: the 2064x3096 display INDEX.jsonl notes from dumpsys input in the same commit")
    b.answers["getprop"] = named_for(pixel8, "vivo", "vivo tablet (mt6991)",
                                     "INDEX.jsonl's description of the getevent transcript's tablet")
    return fill(
        b, pixel8,
        sources=[ref.cite("getevent/vivo_pad_mt6991_getevent_lp.txt")],
        notes=["The listing is as the tablet printed it: vivo_ts (type B, ABS_MT_SLOT value 1, BTN_TOUCH* and "
            "BTN_TOOL_FINGER* down, BACK/HOMEPAGE/MENU keys on the touch node), the pen vivo_ts_pen, and "
            "vivo_ts_fp, a multi-touch node without INPUT_PROP_DIRECT (not the screen).",
            "Everything but the input devices, the screen's size and the device's name is the Pixel 8's; `wm "
            "density` is the simulated phone's own (its 360 dp wide layout)."])


def z_flip4(ref: Reference, pixel8: dict[str, bytes]) -> Built:
    b = Built("galaxy-z-flip4-multi-display", "Samsung Galaxy Z Flip4, Android 12: three displays (main, cover, one more)")
    lines = ref.read("issue_excerpts/appium-adb_797_galaxy_zflip4_android12_dumpsys_window_displays_grep.txt").decode()
    apps = [s.strip() for s in lines.splitlines() if s.strip().startswith("mFocusedApp=")]
    focus = [s.strip() for s in lines.splitlines() if s.strip().startswith("mCurrentFocus=")]
    own = pixel8["dumpsys window displays"].decode().splitlines()
    header, geometry = own[0], own[2]
    out = [header]
    for display, app, win in zip((2, 1, 0), apps, focus):
        out += [f"  Display: mDisplayId={display} rootTasks=1", geometry.replace("1080x2400", "1080x2640")
                .replace("1080x1080-2400x2400", "1080x1080-2640x2640"), f"    {win}", f"    {app}"]
    b.answers["dumpsys window displays"] = ("\n".join(out).replace("480dpi", "420dpi").encode() + b"\n", (
        "derived: the three mFocusedApp and mCurrentFocus lines of the issue's grep, in its order, each pair "
        "under a display header of the Pixel 8's layout; the ids (2, 1, 0 in printing order: RootWindowContainer "
        "lists the displays top first... the last pair, the app with the focus, taken for the main display 0) "
        "and the geometry are not in the excerpt"))
    windows = pixel8["dumpsys window windows"].decode().replace("480dpi", "420dpi")
    b.answers["dumpsys window windows"] = (windows.encode(), "filled: the Pixel 8's (its mTopFocusedDisplayId=0)")
    b.answers["wm size"] = (b"Physical size: 1080x2640\n", "derived: the Z Flip4's main screen (Samsung's 1080x2640)")
    b.answers["wm density"] = (b"Physical density: 420\n", "derived: the Z Flip4's default density")
    b.answers["getprop"] = named_for(pixel8, "samsung", "Galaxy Z Flip4", "the appium-adb issue's title")
    main, cover = "4630947232038877057", "4630947232038877058"
    b.answers["dumpsys SurfaceFlinger --display-id"] = (
        f'Display {main} (HWC display 0): port=129 pnpId=SEC displayName="Built-in Screen"\n'
        f'Display {cover} (HWC display 1): port=130 pnpId=SEC displayName="Built-in Screen"\n'.encode(),
        "derived: two physical displays in SurfaceFlinger's format (the ids are made up: the excerpt has none)")
    # Android 12's DisplayInfo.toString prints a stray quote after the id (`displayId 0", displayGroupId`:
    # AOSP core/java/android/view/DisplayInfo.java appends "\", displayGroupId "), as 12 and 13 phones show
    b.answers["dumpsys display"] = ("".join(
        f'  Display {n}:\n    mDisplayId={n}\n    mBaseDisplayInfo=DisplayInfo{{"Built-in Screen", displayId {n}", '
        f'displayGroupId {n}, FLAG_SECURE, real {w}, rotation 0, state ON, type INTERNAL, '
        f'uniqueId "local:{sf}", density {d}}}\n' for n, sf, w, d in ((0, main, "1080 x 2640", 420),
                                                                     (1, cover, "260 x 512", 240)))
        .join(["DISPLAY MANAGER (dumpsys display)\n\nLogical Displays: size=2\n", ""]).encode(),
        "derived: the logical displays 0 (main) and 1 (cover) tied to the SurfaceFlinger ids, in Android 12's layout "
        "(DisplayInfo.toString's stray quote after the id; only the lines the harness reads)")
    head = MULTI_DISPLAY_WARNING.encode()
    b.answers["screencap -p"] = (head, "derived: adbutils issue 133's warning, whole as AOSP screencap.cpp writes it")
    b.answers["screencap"] = (head, "derived: the same warning (screencap writes it for raw frames too)")
    b.images = {"screencap -p": {"format": "png", "width": 1080, "height": 2640},
                "screencap": {"format": "raw", "width": 1080, "height": 2640, "header_bytes": 16}}
    return fill(
        b, pixel8,
        sources=[ref.cite("issue_excerpts/appium-adb_797_galaxy_zflip4_android12_dumpsys_window_displays_grep.txt"),
            ref.cite("issue_excerpts/adbutils_133_screencap_multiple_displays_warning_truncated.txt"),
            "AOSP frameworks/base cmds/screencap/screencap.cpp (read at bluestacks/frameworks-base-a16 "
            "2b447fb9): the warning's three lines"],
        notes=["Only the focus lines are the Z Flip4's: the layout around them, the display ids and sizes and the "
            "device's name are derived as each answer's origin says; the other answers are the Pixel 8's."])


def write(b: Built, out: Path, pixel8_manifest: Manifest) -> None:
    folder = out / b.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    answers = []
    order = {c.line: i for i, c in enumerate(to_capture())}
    for command in sorted(b.answers, key=lambda c: (order.get(c, len(order)), c)):
        data, origin = b.answers[command]
        image = b.images.get(command) or next((dict(a.image) for a in pixel8_manifest.answers
                                               if a.command == command and a.image and "filled" in origin), None)
        answer = Answer(command, "exec" if command.startswith("screencap") else "shell",
                        file_for(command, ".head" if command.startswith("screencap") else ".txt"), len(data),
                        origin=origin, image=image)
        (folder / answer.file).write_bytes(data)
        answers.append(answer)
    texts = {c: d for c, (d, _) in b.answers.items()}
    props = parse_props(texts.get("getprop", b"").decode("utf-8", "surrogateescape"))
    device = device_of(props, texts)
    fg = foreground_of(texts, device.get("sdk"))
    if fg:
        fg["windows"] = b.windows
    fg_components = set(fg.get("components", []))
    for command, (data, origin) in b.answers.items():  # filled answers name the Pixel 8's app in front
        if "filled" in origin:
            fg_components |= {c for c in pixel8_manifest.foreground.get("components", []) if c.encode() in data}
    if fg:
        fg["components"] = sorted(fg_components)
    not_asked = [{"command": c.line, "why": "no transcript says it: the simulated phone answers it itself"}
                 for c in to_capture() if c.line not in b.answers]
    m = Manifest(name=b.name, captured_at=now_iso(), harness_version=__version__, device=device, answers=answers,
                 not_captured=not_asked, redactions=[], foreground=fg,
                 notes=[b.title, "built by scripts/build_profiles.py from the transcripts SOURCES names", *b.notes])
    write_manifest(folder, m)
    lines = [f"{b.name}: {b.title}", "", "Built by scripts/build_profiles.py. Each answer's origin (manifest.json):"]
    lines += [f"- {a.command} -> {a.file}: {a.origin}" for a in answers]
    lines += ["", "Transcripts (../shared/reference/real_device, INDEX.jsonl):"] + [f"- {s}" for s in b.sources]
    lines += ["", LICENSE, "", "Notes:"] + [f"- {n}" for n in b.notes]
    (folder / "SOURCES").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, default=ROOT.parent / "shared" / "reference" / "real_device")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    ref = Reference(args.reference)
    m, captured = capture_pixel8()
    target = args.out / "pixel8"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(captured, target)
    pm = read_manifest(target)
    for a in pm.answers:
        a.origin = "captured: `harness devices capture` of `harness sim serve --as-phone` (the Pixel 8 persona)"
    pm.notes.append("the simulated phone's retail Pixel 8 (harness/sim/persona.py: its sources) at 1080x2400")
    write_manifest(target, pm)
    (target / "uiautomator-dump.xml").unlink(missing_ok=True)  # the screen's tree: not a format the profile serves
    pm.answers = [a for a in pm.answers if not a.command.startswith("uiautomator")]
    (target / file_for("uiautomator dump")).unlink(missing_ok=True)
    write_manifest(target, pm)
    lines = ["pixel8: the simulated phone's retail Pixel 8 (`harness sim serve --as-phone`, 1080x2400), captured by "
             "`harness devices capture`", "", "Its properties' sources are in harness/sim/persona.py (RETAIL); the "
             "formats are the simulated phone's (Android 14). Built by scripts/build_profiles.py.", "",
             "Each answer's origin (manifest.json):"] + [f"- {a.command} -> {a.file}: {a.origin}" for a in pm.answers]
    (target / "SOURCES").write_text("\n".join(lines) + "\n", encoding="utf-8")
    pixel8 = pixel8_answers(pm, target)
    for build in (mtk_tablet, emulator_a11, type_a, vivo_pad, z_flip4):
        b = build(ref, pixel8)
        write(b, args.out, pm)
        print(f"{b.name}: {len(b.answers)} answers -> {args.out / b.name}")
    print(f"pixel8: {len(pm.answers)} answers -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
