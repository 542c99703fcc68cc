"""A device driven over adb with adbutils: USB phones, emulators, ``host:port`` devices and the
simulated phone alike.

Screenshots use ``exec:screencap -p`` (``adb exec-out``): raw bytes, no file on the device and no
pty newline mangling; peers pull a file from the device instead, which costs two more round trips
(FIELD_NOTES section 8). Actions map onto ``input`` commands; every argument is passed as its own
argv element and quoted by adbutils (``shlex.quote``), so agent text never reaches the device
shell as syntax.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import shlex
import socket
import threading
import time
from typing import Any, Callable

import adbutils

from harness.core.actions import (NO_DEVICE_EFFECT, Action, ActionError, Click, DoubleTap, Key, LongPress, OpenApp,
                                  Swipe, TypeText, Wait)
from harness.device.adb_server import adb_client, adb_endpoint, ensure_server, run_adb
from harness.device.base import (ActionTiming, DeviceDescription, DeviceError, DeviceKind, InfraError, InputMethods,
                                 ScreenState, TaskUnavailable)
from harness.device import focus, frame_sources, input_methods, screencap, wm
from harness.device.config import SettleConfig
from harness.device.getprop import GETPROP, parse_props, sdk_of
from harness.device.frame_sources import FrameSource, PngFrames, RawFrames
from harness.device.safeguards import clears_data_on, kind_of
from harness.device.text_input import TextTyper
from harness.core.hierarchy import parse as parse_hierarchy

# Android KeyEvent codes (android.view.KeyEvent).
KEYCODES = {"back": 4, "home": 3, "enter": 66, "delete": 67, "app_switch": 187}
SIM_RESET_ACTION = "com.crate.sim.RESET"
LAUNCHERS = ("com.android.launcher3", "com.google.android.apps.nexuslauncher", "com.miui.home",
             "com.huawei.android.launcher", "com.sec.android.app.launcher", "com.oppo.launcher",
             "com.bbk.launcher2", "com.android.launcher")
# Labels users and models give common apps, for open_app on real phones (the sim reports its own).
# Stock apps' packages differ between Google's builds and AOSP's (docs/phones.md): the first one
# installed wins.
_CLOCK = ("com.google.android.deskclock", "com.android.deskclock")
_CONTACTS = ("com.google.android.contacts", "com.android.contacts")
_MESSAGES = ("com.google.android.apps.messaging", "com.android.messaging")
_FILES = ("com.google.android.apps.nbu.files", "com.google.android.documentsui", "com.android.documentsui")
_CAMERA = ("com.google.android.GoogleCamera", "com.android.camera2", "com.android.camera")
_CALENDAR = ("com.google.android.calendar", "com.android.calendar")
COMMON_APPS: dict[str, tuple[str, ...]] = {
    "settings": ("com.android.settings",), "设置": ("com.android.settings",),
    "chrome": ("com.android.chrome",), "contacts": _CONTACTS, "联系人": _CONTACTS, "通讯录": _CONTACTS,
    "phone": ("com.google.android.dialer", "com.android.dialer"), "camera": _CAMERA, "相机": _CAMERA,
    "clock": _CLOCK, "时钟": _CLOCK, "messages": _MESSAGES, "信息": _MESSAGES, "短信": _MESSAGES,
    "files": _FILES, "文件": _FILES, "calendar": _CALENDAR, "日历": _CALENDAR,
    "gmail": ("com.google.android.gm",), "maps": ("com.google.android.apps.maps",),
    "youtube": ("com.google.android.youtube",), "play store": ("com.android.vending",),
}
DUMP_PREFIX = "/data/local/tmp/crate_uidump-"  # + this process's token and the call's number
_DUMP_TOKEN = secrets.token_hex(4)
_dump_numbers = itertools.count()
_NET_ERRORS = (adbutils.AdbError, adbutils.AdbTimeout, ConnectionError, socket.timeout, OSError, EOFError)


class AdbDevice:
    """One device reached through an adb server (``host``/``port`` of the server)."""

    def __init__(self, serial: str, *, host: str | None = None, port: int | None = None,
                 settle: SettleConfig | None = None, command_timeout: float = 30.0,
                 app_labels: dict[str, str] | None = None, allow_clear: bool = False):
        self.serial = serial
        endpoint = adb_endpoint(host, port)  # --adb-host/--adb-port, else as adb picks its server
        self.host, self.port = endpoint.host, endpoint.port
        self.settle_cfg = settle or SettleConfig()
        self.command_timeout = command_timeout
        self.allow_clear = allow_clear
        self.client = adb_client(host=self.host, port=self.port, socket_timeout=command_timeout)
        self.dev = self.client.device(serial)
        self._size: tuple[int, int] | None = None
        self._labels = {k.casefold(): v for k, v in COMMON_APPS.items()}
        self._user_labels = {k.casefold(): (v,) for k, v in (app_labels or {}).items()}
        self._packages: set[str] | None = None
        self._sim: bool | None = None
        self._props: dict[str, str] | None = None
        self.typer = TextTyper(self.shell, switch_ime=self.use_input_method)
        self.last_text_strategy: str | None = None
        self.last_clear_strategy: str | None = None
        self.last_reset: dict[str, Any] | None = None
        # harness.device.prepare.Journal: every setting or input method the run changes is
        # recorded there before it changes, so it can be put back (also after a crash)
        self.journal: Any = None
        self._frames_lock = threading.Lock()
        self._settler: frame_sources.Settler | None = None
        # the SurfaceFlinger display screencap is given (-d) once the phone said it has several
        self._display_id: str | None = None
        self._display_looked_up = False
        self.screencap_noise: str = ""  # the text screencap last wrote before its image

    # --- low level ----------------------------------------------------------------------------
    def _guard(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except _NET_ERRORS as e:
            raise InfraError(f"{self.serial}: {what} failed: {type(e).__name__}: {e}") from None

    def _service(self, service: str, timeout: float) -> bytes:
        """Open ``service`` (``shell:...``, ``exec:...``) on the device and read it to the end.

        One connection to the adb server, ``host:transport:SERIAL`` and the service, read in large
        chunks. adbutils' own path costs ~20 ms more per call on every command: its
        ``open_transport`` asks the server's version over a second connection, and each
        ``AdbConnection.close()`` sleeps 10 ms; it also reads in 4 KB chunks joined with ``+=``
        (quadratic on a phone's multi-megabyte PNG). The device has closed the stream when we
        close ours, so there is nothing left to wait for."""
        c = self.client.make_connection(timeout=timeout)
        sock = c.conn
        try:
            sock.settimeout(timeout)
            c.send_command(f"host:transport:{self.serial}")
            c.check_okay()
            c.send_command(service)
            c.check_okay()
            chunks = []
            while True:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        finally:
            sock.close()

    def shell(self, argv: list[str], timeout: float | None = None) -> str:
        """Run argv on the device; each element is quoted, so nothing in it is shell syntax."""
        if not isinstance(argv, (list, tuple)):
            raise TypeError("shell takes an argv list, never a command string")
        cmd = " ".join(shlex.quote(str(a)) for a in argv)  # as adbutils' list2cmdline quotes
        out = self._guard(f"shell {argv[0]}", self._service, "shell:" + cmd, timeout or self.command_timeout)
        return out.decode("utf-8", errors="replace").rstrip()

    def exec_out(self, command: str, timeout: float | None = None) -> bytes:
        """``adb exec-out COMMAND``: raw stdout bytes. Only for fixed commands we write ourselves."""
        return self._guard(f"exec-out {command}", self._service, "exec:" + command, timeout or self.command_timeout)

    # --- description --------------------------------------------------------------------------
    def describe(self) -> DeviceDescription:
        d = DeviceDescription(serial=self.serial)
        try:
            for info in self.client.list(extended=True):
                if info.serial == self.serial:
                    d.state = info.state
                    break
            else:
                d.state = "absent"
        except _NET_ERRORS as e:
            d.state, d.problem = "unknown", f"adb server unreachable: {e}"
            return d
        if d.state != "device":
            d.problem = {"unauthorized": "unauthorized: accept the USB debugging prompt on the phone",
                         "offline": "offline: reconnect the device", "absent": "not attached"}.get(d.state, d.state)
            return d
        try:
            d.model = self.shell(["getprop", "ro.product.model"]).strip()
            d.sdk = self.shell(["getprop", "ro.build.version.sdk"]).strip()
            d.size = self.screen_size()
            d.density = wm.parse_density(self.shell(list(wm.WM_DENSITY)))
            d.simulated = self.is_simulated()
            d.kind = self.kind()
            shot = self.screenshot()
            d.healthy = shot[:8] == screencap.PNG_SIGNATURE
            if not d.healthy:
                d.problem = "screencap did not return a PNG"
        except (InfraError, DeviceError, ValueError) as e:
            d.problem = str(e)
        return d

    def screen_size(self) -> tuple[int, int]:
        if self._size is None:
            out = self.shell(list(wm.WM_SIZE))
            size = wm.parse_size(out)
            if size is None:
                raise DeviceError(f"{self.serial}: cannot read the screen size from 'wm size': {out[:80]!r}")
            self._size = size
        return self._size

    def physical_size(self) -> tuple[int, int] | None:
        """The display's own size (``wm size``'s ``Physical size``), whatever override is set."""
        return wm.parse_physical_size(self.shell(list(wm.WM_SIZE)))

    # --- observation --------------------------------------------------------------------------
    def screenshot(self) -> bytes:
        """``screencap -p`` (``-d`` the focused display's id once the phone said it has several):
        the PNG found after any text the phone wrote before it (harness.device.screencap)."""
        png, noise = self._png()
        if noise and screencap.MULTIPLE_DISPLAYS in noise and self._display_id is None and not self._display_looked_up:
            # the phone picked a display of its own (perhaps a cover screen): take the focused one
            self._display_looked_up = True
            self._display_id = self.screencap_display()
            if self._display_id is not None:
                png, noise = self._png()
        self.screencap_noise = noise
        return png

    def _png(self) -> tuple[bytes, str]:
        data = self.exec_out(screencap.png_command(self._display_id))
        try:
            return screencap.find_png(data)
        except screencap.ScreencapError as e:  # agents and judges could not decode it
            raise InfraError(f"{self.serial}: screencap returned {e}") from None

    def screencap_display(self) -> str | None:
        """The SurfaceFlinger id of the display in front (the window manager's focused display,
        ``mTopFocusedDisplayId``, tied to its id by ``dumpsys display``), else the first listed;
        None on a phone that lists one display or none."""
        ids = screencap.parse_display_ids(self.shell(list(screencap.SURFACEFLINGER_DISPLAY_IDS)))
        if len(ids) < 2:
            return None
        top = focus.top_focused_display(self.shell(list(focus.DUMPSYS_WINDOW_WINDOWS)))
        chosen = screencap.physical_display(self.shell(list(screencap.DUMPSYS_DISPLAY)), top or 0)
        return chosen if chosen in ids else ids[0]

    def hierarchy(self) -> str:
        # a file of this call's own, removed after it is read: callers sharing one path (a recorder
        # and the person's stand-in, a run and a live view, two threads) read each other's dumps,
        # an older tree among them when one dump is written after another that began later
        path = f"{DUMP_PREFIX}{_DUMP_TOKEN}-{next(_dump_numbers)}.xml"
        out = self.shell(["uiautomator", "dump", path])
        if not out.strip():  # uiautomator always says something: a stream cut short (a dropped connection)
            raise InfraError(f"{self.serial}: uiautomator dump returned nothing (the connection to the device dropped)")
        if "dumped" not in out.lower():
            raise DeviceError(f"{self.serial}: uiautomator dump failed: {out.strip()[:120]}")
        try:
            data = self._guard("pull hierarchy", self.dev.sync.read_bytes, path)
        except adbutils.AdbError as e:  # pragma: no cover - guarded above
            raise DeviceError(str(e)) from None
        finally:
            try:
                self.shell(["rm", "-f", path], timeout=5)
            except (InfraError, DeviceError):
                pass  # the phone went away: the pull's error (or the next call's) says so
        return data.decode("utf-8", errors="replace")

    def current_app(self) -> tuple[str, str]:
        """(package, activity) in front, ``("", "")`` when the phone does not say
        (harness.device.focus: the command by Android version, the focused display first)."""
        found = focus.foreground(self.shell, self.sdk())
        return (found.package, found.activity) if found else ("", "")

    def sdk(self) -> int | None:
        return sdk_of(self.props())

    def is_simulated(self) -> bool:
        if self._sim is None:
            out = self.shell(["dumpsys", "crate_sim", "ping"])
            self._sim = out.strip().startswith("{") or out.strip() == "ok"
        return self._sim

    def props(self) -> dict[str, str]:
        """Every system property (``getprop``: ``[name]: [value]`` lines), read once."""
        if self._props is None:
            self._props = parse_props(self.shell(list(GETPROP)))
        return self._props

    def kind(self) -> DeviceKind:
        return kind_of(self.serial, self.props(), self.is_simulated())

    def state(self) -> dict[str, Any] | None:
        """The sim's state JSON (``dumpsys crate_sim``); None on a real phone."""
        if not self.is_simulated():
            return None
        out = self.shell(["dumpsys", "crate_sim"])
        try:
            return json.loads(out)
        except json.JSONDecodeError:
            raise InfraError(f"{self.serial}: the simulated phone's state is not JSON: {out[:80]!r}") from None

    # --- actions ------------------------------------------------------------------------------
    def installed_packages(self, refresh: bool = False) -> set[str]:
        if self._packages is None or refresh:
            out = self.shell(["pm", "list", "packages"])
            self._packages = {line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("package:")}
        return self._packages

    def missing_packages(self, packages: list[str], reread: bool = True) -> list[str]:
        """Those of ``packages`` the device does not have (``reread``: the list is read again
        before an app is called missing, as it may have been installed since it was first read)."""
        missing = [p for p in packages if p not in self.installed_packages()]
        if missing and reread:
            self._packages = None
            missing = [p for p in missing if p not in self.installed_packages()]
        return missing

    def cannot_run(self, setup: Any, packages: bool = True, reread: bool = True) -> str | None:
        """Why a task with this ``setup`` cannot start on this device (None: it can): an emulator
        snapshot on a device that is not an emulator, a simulated-phone preset on a real device, or
        (``packages``) an app the setup names that is not installed."""
        if setup.snapshot and not self.serial.startswith("emulator-"):
            return f"setup.snapshot needs an emulator (serial emulator-NNNN), not {self.serial}"
        if setup.sim is not None and not self.is_simulated():
            return f"needs the simulated phone (setup.sim), not {self.serial}, a real device"
        missing = self.missing_packages(setup.packages(), reread) if packages else []
        if missing:
            return f"needs {', '.join(missing)}, not installed on {self.serial}"
        return None

    def resolve_app(self, name: str) -> str:
        """A package for an app name: the sim's own labels first (it reports them), then the
        labels the user configured, then common apps' labels — each only if installed."""
        name = name.strip()
        key = name.casefold()
        if self.is_simulated():
            st = self.state() or {}
            for app in st.get("device", {}).get("apps", []):
                names = [app.get("package", ""), app.get("key", ""), app.get("label_en", ""), app.get("label_zh", ""),
                         *app.get("aliases", [])]
                if key in (n.casefold() for n in names if n):
                    return app["package"]
        installed = self.installed_packages()
        for table in (self._user_labels, self._labels):
            for pkg in table.get(key, ()):
                if pkg in installed:
                    return pkg
        if name in installed:
            return name
        raise ActionError(f"open_app: no installed app is called {name!r}")

    def double_tap(self, x: int, y: int) -> None:
        """Two taps that Android's GestureDetector pairs (the second 40-300 ms after the first). Each
        ``input tap`` pays the ``input`` tool's start-up time (tens to hundreds of ms, by Android
        version), so two taps in a row can miss the window; started 100 ms apart, in the background,
        both pay it alike and land about 100 ms apart. ``x`` and ``y`` are validated integers (the
        script is ours, nothing in it comes from a model)."""
        x, y = int(x), int(y)
        self.exec_out(f"input tap {x} {y} & sleep 0.1; input tap {x} {y}; wait")

    def execute(self, action: Action) -> None:
        if isinstance(action, Click):
            self.shell(["input", "tap", str(action.x), str(action.y)])
        elif isinstance(action, LongPress):
            # a swipe that does not move, held for the duration, is Android's long press
            self.shell(["input", "swipe", str(action.x), str(action.y), str(action.x), str(action.y),
                        str(action.duration_ms)])
        elif isinstance(action, DoubleTap):
            self.double_tap(action.x, action.y)
        elif isinstance(action, Swipe):
            self.shell(["input", "swipe", *map(str, action.start), *map(str, action.end), str(action.duration_ms)])
        elif isinstance(action, TypeText):
            if action.clear:
                self.last_clear_strategy = self.typer.clear(self._focused_length)
            self.last_text_strategy = self.typer.type(action.text)
            if action.submit:
                self.shell(["input", "keyevent", str(KEYCODES["enter"])])
        elif isinstance(action, Key):
            code = KEYCODES[action.key] if isinstance(action.key, str) else action.key
            self.shell(["input", "keyevent", str(code)])
        elif isinstance(action, OpenApp):
            pkg = self.resolve_app(action.app)
            out = self.shell(["monkey", "-p", pkg, "-c", "android.intent.category.LAUNCHER", "1"])
            if "No activities found" in out or "not found" in out.lower() and "monkey" not in out.lower():
                raise ActionError(f"open_app: {action.app!r} ({pkg}) is not installed")
        elif isinstance(action, Wait):
            time.sleep(action.seconds)
        elif isinstance(action, NO_DEVICE_EFFECT):
            return
        else:  # pragma: no cover - the union is closed
            raise ActionError(f"unsupported action {action!r}")

    def _focused_length(self) -> int:
        """How many characters the focused field shows (its hint when it is empty)."""
        focused = [e for e in parse_hierarchy(self.hierarchy()) if e.focused]
        return len(focused[-1].text) if focused else 0

    # --- settling ------------------------------------------------------------------------------
    def frame_sources(self) -> list[FrameSource]:
        """What this device can settle on (harness.device.frame_sources)."""
        return [PngFrames(self.screenshot),
                RawFrames(self.exec_out, self.screen_size, self.serial, lambda: screencap.raw_command(self._display_id))]

    def frame_choice(self) -> dict[str, Any]:
        """Measure the frame sources once (the first call) and keep the cheapest; returns the
        report (choice, estimated cost per step, every source's timings) for the manifest."""
        with self._frames_lock:
            if self._settler is None:
                choice = frame_sources.choose(self.frame_sources(), self.settle_cfg.stable_frames,
                                              self.settle_cfg.frames)
                self._settler = frame_sources.Settler(choice, self.serial)
            return self._settler.choice.report

    def settle(self, previous: bytes | None = None, on_frame: Callable[[bytes], None] | None = None,
               on_pixels: Callable[[Any], None] | None = None) -> tuple[bytes, ActionTiming]:
        """Grab frames from the chosen source until ``stable_frames`` in a row are identical
        (bounded by max_s); the settled frame, as PNG with its pixels, is the observation.
        ``on_frame`` gets each candidate observation as soon as it is ready, ``on_pixels`` a raw
        candidate's pixels before its PNG is encoded."""
        self.frame_choice()
        t0 = time.monotonic()
        shot, extra = self._settler.settle(self.settle_cfg, on_frame, on_pixels)
        return shot, ActionTiming(settle=time.monotonic() - t0, settled=extra.pop("settled"), extra=extra)

    # --- reset --------------------------------------------------------------------------------
    def reset(self, setup: Any, language: str) -> None:
        """Load the emulator snapshot; force-stop ``setup.stop``; force-stop and clear
        ``setup.clear`` (refused on a phone unless allowed); go home; then apply the sim preset or
        start ``setup.start``, and verify the result. ``last_reset`` says what was done."""
        did: dict[str, Any] = {"snapshot": None, "stopped": [], "cleared": [], "home": False, "sim_preset": None,
                               "started": None, "complete": False}
        self.last_reset = did
        if setup.clear and not self.allow_clear and clears_data_on(self.kind()):
            raise DeviceError(f"{self.serial} is a phone: refusing setup.clear ({', '.join(setup.clear)}), which would "
                              "erase the apps' data (pass --allow-clear to allow it)")
        why = self.cannot_run(setup, packages=not setup.snapshot)  # one line, before anything is stopped or started
        if why:
            raise TaskUnavailable(why)
        if setup.snapshot:
            r = run_adb(["-s", self.serial, "emu", "avd", "snapshot", "load", setup.snapshot], self.port, timeout=120,
                        host=self.host)
            if r.returncode != 0 or "KO" in r.stdout:
                raise InfraError(f"{self.serial}: snapshot {setup.snapshot!r} did not load: {(r.stdout + r.stderr).strip()}")
            did["snapshot"] = setup.snapshot
            self.wait_ready(60)
        if setup.snapshot and (why := self.cannot_run(setup)):  # the snapshot's own apps
            raise TaskUnavailable(why)
        for pkg in setup.stop:
            self.shell(["am", "force-stop", pkg])
            did["stopped"].append(pkg)
        for pkg in setup.clear:
            self.shell(["am", "force-stop", pkg])
            out = self.shell(["pm", "clear", pkg])
            if "Success" not in out:
                raise DeviceError(f"{self.serial}: pm clear {pkg} failed: {out.strip()[:120]}")
            did["cleared"].append(pkg)
        self.shell(["input", "keyevent", str(KEYCODES["home"])])
        did["home"] = True
        if setup.sim is not None:
            import base64

            sim = setup.sim
            config = sim.reset_config(language)
            payload = base64.b64encode(json.dumps(config, ensure_ascii=False).encode("utf-8")).decode("ascii")
            out = self.shell(["am", "broadcast", "-a", SIM_RESET_ACTION, "--es", "config", payload])
            if "result=-1" not in out:
                raise DeviceError(f"{self.serial}: the simulated phone refused the reset: {out.strip()[:200]}")
            st = self.state() or {}
            if st.get("device", {}).get("preset") != sim.preset or st.get("screen", {}).get("page") != "launcher/home":
                raise DeviceError(f"{self.serial}: reset verification failed: preset={st.get('device', {}).get('preset')!r} "
                                  f"screen={st.get('screen', {}).get('page')!r}")
            did["sim_preset"] = sim.preset
        if setup.start:
            pkg, _, act = setup.start.partition("/")
            if act:
                out = self.shell(["am", "start", "-W", "-n", f"{pkg}/{act}"])
            else:
                out = self.shell(["monkey", "-p", pkg, "-c", "android.intent.category.LAUNCHER", "1"])
            if "Error" in out or "No activities found" in out:
                raise DeviceError(f"{self.serial}: could not start {setup.start}: {out.strip()[:200]}")
            front, _ = self.current_app()
            if front != pkg:
                raise DeviceError(f"{self.serial}: reset verification failed: {front or 'nothing'} is in front, not {pkg}")
            did["started"] = setup.start
        did["complete"] = True

    # --- settings, input methods, screen (harness.device.prepare) ------------------------------
    def get_setting(self, namespace: str, key: str) -> str | None:
        out = self.shell(["settings", "get", namespace, key]).strip()
        return None if out == "null" else out

    def put_setting(self, namespace: str, key: str, value: str | None) -> None:
        argv = ["settings", "delete", namespace, key] if value is None else ["settings", "put", namespace, key, value]
        out = self.shell(argv)
        if "Exception" in out or "Invalid" in out or "Permission" in out:
            raise DeviceError(f"{self.serial}: {' '.join(argv[:4])} failed: {out.strip()[:160]}")

    def input_methods(self) -> InputMethods:
        return input_methods.read_input_methods(self.shell)

    def set_input_method(self, ime_id: str) -> None:
        """Enable ``ime_id`` and make it the input method, verified by reading the settings back
        (DeviceError naming it otherwise: harness.device.input_methods)."""
        input_methods.switch_to(self.shell, ime_id, self.serial)

    def disable_input_method(self, ime_id: str) -> None:
        self.shell(["ime", "disable", ime_id])

    def use_input_method(self, ime_id: str) -> None:
        if self.journal is not None:
            self.journal.remember_input_method(self, ime_id)
        self.set_input_method(ime_id)

    def screen_state(self) -> ScreenState:
        power = self.shell(["dumpsys", "power"])
        policy = self.shell(["dumpsys", "window", "policy"])
        return parse_screen_state(power, policy)

    def wake(self) -> None:
        self.shell(["input", "keyevent", "KEYCODE_WAKEUP"])

    def dismiss_keyguard(self) -> None:
        self.shell(["wm", "dismiss-keyguard"])

    def display_override(self, key: str) -> str | None:
        """The screen's ``size`` (``WxH``) or ``density`` override, None when it has none
        (harness.device.wm.parse_override)."""
        if key not in wm.OVERRIDES:
            raise ValueError(f"display_override: {key!r} is not one of {', '.join(wm.OVERRIDES)}")
        return wm.parse_override(self.shell(["wm", key]), key)

    def set_display_override(self, key: str, value: str | None) -> None:
        """``wm size WxH`` / ``wm density D``, or ``reset`` for None; the screen size is read again."""
        if key not in wm.OVERRIDES or not (value is None or re.fullmatch(wm.OVERRIDES[key], value)):
            raise ValueError(f"set_display_override: {key} {value!r} is not a screen {key}")
        out = self.shell(["wm", key, "reset" if value is None else value])
        self._size = None
        if re.search(r"(?i)error|exception|usage|not supported", out):
            raise DeviceError(f"{self.serial}: wm {key} {value or 'reset'} failed: {out.strip()[:160]}")

    # --- connection ---------------------------------------------------------------------------
    def wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.dev.get_state() == "device":
                    return True
            except _NET_ERRORS:
                pass
            time.sleep(0.3)
        return False

    def reconnect(self, timeout: float = 10.0) -> bool:
        """Bring the device back within ``timeout``: for ``host:port`` serials ``adb connect``;
        restart the server if it is gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ensure_server(self.port, self.host)  # restarted once, quietly, however many devices find it gone
            if ":" in self.serial:
                try:
                    self.client.connect(self.serial, timeout=3)
                except _NET_ERRORS:
                    pass
            try:
                if self.dev.get_state() == "device":
                    self._size = None
                    return True
            except _NET_ERRORS:
                pass
            time.sleep(0.5)
        return False

    def close(self) -> None:
        if self._settler is not None:
            self._settler.close()


# --- parsing what Android prints ---------------------------------------------------------------
def _flag(text: str, *names: str) -> bool | None:
    """The first ``name=true|false`` of ``names`` in ``text`` (a dumpsys), or None."""
    for name in names:
        m = re.search(rf"(?m)^\s*{re.escape(name)}=(true|false)\b", text)
        if m:
            return m.group(1) == "true"
    return None


def parse_screen_state(power: str, policy: str) -> ScreenState:
    """``dumpsys power`` (``mWakefulness=Awake|Asleep|Dozing|Dreaming``, PowerManagerService) and
    ``dumpsys window policy`` (the KeyguardServiceDelegate block of PhoneWindowManager's dump:
    ``showing=``, ``secure=``; its KeyguardStateMonitor: ``mIsShowing=``, ``mTrusted=``; Android
    before 8 printed ``mShowingLockscreen=``)."""
    m = re.search(r"mWakefulness=(\w+)", power)
    awake = None if m is None else m.group(1) == "Awake"
    keyguard = _flag(policy, "showing", "mIsShowing", "mShowingLockscreen")
    secure = _flag(policy, "secure", "mSecure")
    trusted = _flag(policy, "mTrusted", "trusted")
    return ScreenState(awake=awake, keyguard=keyguard, secure=secure, trusted=trusted)
