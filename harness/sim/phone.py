"""The simulated phone: apps, system UI, input dispatch, state and effect log.

It implements :class:`harness.sim.phone_api.PhoneAPI`; the ADB transport and the shell in
``harness.sim.adb`` / ``harness.sim.shell`` drive it, and nothing outside ``harness.sim`` imports
it except tests. All public methods take the phone's lock: the transport serves many ADB streams
at once. Its parts sit beside it: input dispatch (:mod:`harness.sim.phone_input`) and text
selection (:mod:`harness.sim.text_selection`) are mixed into the class; the system UI
(:mod:`harness.sim.system_ui`), the keyboard (:mod:`harness.sim.keyboard`) and the lock screen
(:mod:`harness.sim.keyguard`) see the phone only as :class:`harness.sim.app_host.PhoneParts`.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
import random
import threading
from typing import TYPE_CHECKING, Any, Callable

from harness.sim import render, system_ui, ui
from harness.sim.apps import APP_CLASSES
from harness.sim.apps.base import DEFAULT_TODAY, EFFECT_COMMON, WEEKDAYS, App, check_effect
from harness.sim.apps.launcher import Launcher
from harness.sim.dump import hierarchy_xml
from harness.sim.fs import MemoryFS
from harness.sim.keyboard import PKG as KEYBOARD_PACKAGE, SoftKeyboard
from harness.sim.keyguard import Keyguard
from harness.sim.persona import RETAIL, SIM, Persona
from harness.sim.phone_api import DeviceInfo
from harness.sim.phone_input import PhoneInput
from harness.sim.system_ui import LAUNCHER, SYSTEMUI
from harness.sim.text_selection import TextSelection
from harness.sim.ui import UI, Node

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.profile import Profile

KEYBOARD_PKG = KEYBOARD_PACKAGE
LATIN_IME = "com.android.inputmethod.latin/.LatinIME"
ADB_IME = "com.android.adbkeyboard/.AdbIME"
RESET_ACTION = "com.crate.sim.RESET"

STATUS_DP, NAV_DP, KEYBOARD_DP = 24, 48, 232
# Effects the system itself logs (not an app), with their fields besides ``EFFECT_COMMON``.
SYSTEM_EFFECTS: dict[str, dict[str, type]] = {"permission_granted": {"permission": str}, "ad_clicked": {}}


MIN_SIZE, MAX_SIZE = (320, 480), (4000, 8000)


def check_size(width: int, height: int) -> None:
    if not (MIN_SIZE[0] <= width <= MAX_SIZE[0] and MIN_SIZE[1] <= height <= MAX_SIZE[1]):
        raise ValueError(f"screen size {width}x{height} is outside {MIN_SIZE[0]}x{MIN_SIZE[1]}.."
                         f"{MAX_SIZE[0]}x{MAX_SIZE[1]}")


class SimPhone(PhoneInput, TextSelection):
    """A phone of ``width`` x ``height`` pixels showing its UI in ``locale`` (en or zh).

    ``as_phone``: present itself as a retail phone (``harness.sim.persona.RETAIL``); ``lock``: its
    lock screen, ``none``, ``swipe`` or ``pin`` (``harness.sim.keyguard``); ``profile``: answer in
    a real phone's formats (``harness.sim.profile``), whose screen size, density, identity and input
    methods it then has (``width``/``height`` are the profile's when it says)."""

    def __init__(self, width: int = 1080, height: int = 2400, locale: str = "en", seed: int = 0,
                 info: DeviceInfo | None = None, adbkeyboard: bool = True, as_phone: bool = False,
                 lock: str = "none", profile: "Profile | None" = None):
        self.profile = profile
        if profile is not None and profile.size():
            width, height = profile.size()
        check_size(width, height)
        self.lock = threading.RLock()
        self.width, self.height = width, height
        self.dp = width / 360.0
        self._density = profile.density() if profile is not None else None  # the profile's, else the layout's
        # what `wm size`/`wm density` call physical
        self.physical = (width, height, self._density or int(round(self.dp * 160)))
        self.display_overrides: dict[str, Any] = {}  # "size": (w, h), "density": dpi, while overridden
        self.persona: Persona = RETAIL if as_phone else SIM
        serial = self.persona.serial_for(str(seed))
        self.info = info or (profile.info(serial) if profile is not None else self.persona.info(serial))
        self.keyguard = Keyguard(lock)
        self.fs = MemoryFS()
        for d in ("/sdcard", "/sdcard/Download", "/sdcard/DCIM", "/sdcard/Documents", "/data/local/tmp"):
            self.fs.mkdir(d, parents=True)
        self.locale = locale
        self.base_locale = locale
        self.seed = seed
        self.imes = [LATIN_IME] + ([ADB_IME] if adbkeyboard else [])  # installed
        self.enabled_imes = [i for i in self.imes if i == LATIN_IME or self.persona.adbkeyboard_enabled]
        self.ime = LATIN_IME
        if profile is not None:
            self._profile_imes(profile, adbkeyboard)
        self.today = dt.date.fromisoformat(DEFAULT_TODAY)  # one date for every app
        self.apps: dict[str, App] = {}
        for cls in APP_CLASSES:
            app = cls(self)
            app.package = self.persona.packages.get(app.package, app.package)
            self.apps[app.package] = app
        self.by_key = {a.key: a for a in self.apps.values()}
        self.launcher = Launcher(self)
        self.keyboard = SoftKeyboard(self)
        self._reset_fields()
        self.version = 0               # bumps on every change of what the screen shows
        self.effect_counter = 0
        self._img: Any = None           # the rendered frame of screen version _img_version
        self._img_version = -1
        self._png: bytes | None = None  # ... and its encodings, dropped with it
        self._rgba: bytes | None = None
        self.screencap_png_level = render.SCREENCAP_PNG_LEVEL  # zlib level of `screencap -p`
        self._tree: Node | None = None
        self._tree_version = -1
        self.events: list[dict[str, Any]] = []  # input events received (for tests and debugging)
        # (monotonic time, x, y, view) of the last tap on a view with a double-tap gesture
        self._last_tap: tuple[float, int, int, tuple[Any, ...]] | None = None

    def _reset_fields(self) -> None:
        self.foreground: str = LAUNCHER
        self.running: set[str] = set()
        self.recents: list[str] = []
        self.focus_key: str | None = None
        self._focused: Node | None = None
        self._focused_area: tuple[str, tuple[int, int, int, int]] | None = None
        self.text_menu: str | None = None  # the field whose text is all selected, its actions shown
        self.scroll_offsets: dict[str, int] = {}
        self.effects: list[dict[str, Any]] = []
        self.clipboard = ""
        self.launches = 0
        self.anomalies: dict[str, Any] = {"enabled": [], "seed": 0, "ad_shown": False, "ad_at_launch": 0,
                                          "permissions": {}, "pending_permission": None, "ad_open": False}
        self.show_recents = False
        self.preset = "default"

    # --- PhoneAPI: identity and geometry ------------------------------------------------------
    @property
    def size(self) -> tuple[int, int]:
        return self.width, self.height

    @property
    def density(self) -> int:
        if self.display_overrides.get("density"):
            return int(round(self.dp * 160))
        return self._density or int(round(self.dp * 160))

    def _profile_imes(self, profile: "Profile", adbkeyboard: bool) -> None:
        """The input methods a profile's phone had: installed, enabled, in use (ADBKeyboard added,
        installed, where the profile lacks it; enabled only as the persona has it)."""
        enabled = profile.ime_ids("ime list -s") or []
        installed = profile.ime_ids("ime list -a -s") or enabled
        if not installed:
            return
        self.imes = list(dict.fromkeys(installed + enabled + ([ADB_IME] if adbkeyboard else [])))
        self.enabled_imes = list(dict.fromkeys(enabled + ([ADB_IME] if adbkeyboard and self.persona.adbkeyboard_enabled
                                                          else []))) or self.imes[:1]
        current = (profile.text("settings get secure default_input_method") or "").strip()
        self.ime = current if current in self.enabled_imes else self.enabled_imes[0]

    def override_display(self, key: str, value: Any) -> None:
        """``wm size`` (``(w, h)``) or ``wm density`` (dpi); None resets it to the physical one. The
        screen is laid out again: at the size's width a dp is ``width / 360`` px, unless the
        density is overridden (``density / 160`` px, as Android's density scaling)."""
        with self.lock:
            overrides = {**self.display_overrides, key: value}
            w, h = overrides.get("size") or self.physical[:2]
            check_size(w, h)
            self.display_overrides = {k: v for k, v in overrides.items() if v is not None}
            self.width, self.height = w, h
            density = self.display_overrides.get("density")
            self.dp = density / 160.0 if density else w / 360.0
            self.clear_focus()
            self.touch()

    # --- change tracking ----------------------------------------------------------------------
    def touch(self) -> None:
        self.version += 1

    def _mutate(self, fn: Callable[[], Any]) -> Any:
        with self.lock:
            try:
                return fn()
            finally:
                self.touch()

    # --- focus and keyboard -------------------------------------------------------------------
    def set_focus(self, key: str | None) -> None:
        self.focus_key = key
        self.text_menu = None

    def clear_focus(self) -> None:
        self.focus_key = None
        self._focused = None
        self.text_menu = None
        self.keyboard.field_left()

    def register_focused(self, node: Node, area: tuple[str, tuple[int, int, int, int]] | None = None) -> None:
        """The focused field, as the page lays it out (full bounds), and the scroll area it is in
        (its scroll key and visible box), so the keyboard can keep it in view."""
        self._focused = node
        self._focused_area = area

    # --- effects ------------------------------------------------------------------------------
    def log_effect(self, kind: str, **detail: Any) -> None:
        self.effect_counter += 1
        self.effects.append({"id": self.effect_counter, "kind": kind, **detail})

    def system_effect(self, kind: str, app: str, **detail: Any) -> None:
        """An effect the system itself logs (SYSTEM_EFFECTS: a permission granted, an ad clicked)."""
        check_effect("SimPhone", SYSTEM_EFFECTS, kind, detail)
        self.log_effect(kind, app=app, **detail)

    def dark_theme(self) -> bool:
        settings = self.by_key.get("settings")
        return bool(settings and settings.state.get("dark_mode"))

    def time_of_day(self) -> str:
        clock = self.by_key.get("clock")
        return str(clock.state.get("now", "09:41")) if clock else "09:41"

    def effect_schema(self) -> dict[str, dict[str, type]]:
        """Every effect kind the phone and its apps can log, with each field's type (the union over
        the apps that log a kind, plus ``EFFECT_COMMON``)."""
        out: dict[str, dict[str, type]] = {}
        for table in [SYSTEM_EFFECTS, *(type(a).effects for a in self.apps.values())]:
            for kind, fields in table.items():
                merged = out.setdefault(kind, dict(EFFECT_COMMON))
                for name, typ in fields.items():
                    if merged.get(name, typ) is not typ:
                        raise TypeError(f"effect {kind!r} field {name!r} is declared as two types")
                    merged[name] = typ
        return out

    # --- building the screen ------------------------------------------------------------------
    def _app(self) -> App | None:
        if self.foreground == LAUNCHER:
            return self.launcher
        return self.apps.get(self.foreground)

    def _keyboard_visible(self) -> bool:
        return self.focus_key is not None and self.focus_key.startswith(self.foreground + "/")

    def tree(self) -> Node:
        with self.lock:
            if self._tree is not None and self._tree_version == self.version:
                return self._tree
            self._tree = self._build()
            self._tree_version = self.version
            return self._tree

    def _build(self, revealed: bool = False) -> Node:
        w, h = self.size
        status_h = int(round(STATUS_DP * self.dp))
        nav_h = int(round(NAV_DP * self.dp))
        kb_h = int(round(KEYBOARD_DP * self.dp)) if self._keyboard_visible() else 0
        if not self.keyguard.awake:  # asleep: a black screen and nothing to touch
            return ui.finalize(Node((0, 0, w, h), cls="android.widget.FrameLayout", package=SYSTEMUI, paint="fill",
                                    style={"color": (0, 0, 0)}))
        if self.keyguard.showing:
            root = Node((0, 0, w, h), cls="android.widget.FrameLayout", package=SYSTEMUI, paint="fill",
                        rid=f"{SYSTEMUI}:id/keyguard_root_view", style={"color": (232, 234, 237)})
            self.keyguard.build(self, root, status_h)
            root.children.append(system_ui.status_bar(self, status_h))
            return ui.finalize(root)
        app = self._app()
        pkg = self.foreground
        root = Node((0, 0, w, h), cls="android.widget.FrameLayout", package=pkg, paint="fill",
                    style={"color": ui.BACKGROUND})
        self._focused, self._focused_area = None, None
        content = UI(self, pkg, status_h, h - nav_h - kb_h)
        if self.show_recents:
            content.package = SYSTEMUI
            system_ui.recents(self, content)
        elif app is not None:
            app.build(content)
        if self.focus_key is not None and self._focused is None:
            self.clear_focus()  # the focused field is gone (page changed): lay out without the keyboard
            return self._build()
        if kb_h and not revealed and self._reveal_focused():
            return self._build(revealed=True)
        if kb_h:
            self._pan(content)
        # the page shows only inside its window (between the status bar and the keyboard or the
        # navigation bar): what the keyboard covers is neither drawn nor in the tree, as on Android
        content.root.clip = content.root.bounds
        root.children.append(content.root)
        root.children.extend(content.overlays)
        if self.text_menu is not None and self.text_menu == self.focus_key and self._focused is not None:
            root.children.append(self._text_actions(content))
        system_ui.anomaly_overlays(self, root, content)
        root.children.append(system_ui.status_bar(self, status_h))
        if kb_h:
            root.children.append(self._keyboard(h - nav_h - kb_h, h - nav_h))
        root.children.append(system_ui.nav_bar(self, h - nav_h, h))
        return ui.finalize(root)

    def _reveal_focused(self) -> bool:
        """A focused field in a scroll area that the keyboard (or the list's edge) hides: scroll
        the area so the field shows (Android's adjustResize scrolls the focused view into the
        shrunken window). True when the scroll position changed and the page must be laid out again."""
        if self._focused is None or self._focused_area is None:
            return False
        skey, (_, ay1, _, ay2) = self._focused_area
        _, fy1, _, fy2 = self._focused.bounds
        margin = int(8 * self.dp)
        delta = 0
        if fy2 > ay2:
            delta = min(fy2 - ay2 + margin, max(0, fy1 - ay1))
        elif fy1 < ay1:
            delta = fy1 - ay1 - margin
        if not delta:
            return False
        self.scroll_offsets[skey] = max(0, self.scroll_offsets.get(skey, 0) + delta)
        return True

    def _pan(self, content: UI) -> None:
        """A focused field outside any scroll area that the keyboard covers: move the page up just
        enough to show it (Android's adjustPan), never past the field's own top."""
        node = self._focused
        if node is None or self._focused_area is not None:
            return
        _, fy1, _, fy2 = node.bounds
        margin = int(8 * self.dp)
        shift = min(fy2 - content.bottom + margin, fy1 - content.top)
        if shift > 0:
            for child in content.root.children:
                _translate(child, -shift)

    def _keyboard(self, y1: int, y2: int) -> Node:
        return self.keyboard.build(y1, y2)

    # --- PhoneAPI: observation ----------------------------------------------------------------
    def screencap_image(self):
        """The rendered frame (an RGB image; do not modify it), rendered once per screen version."""
        with self.lock:
            if self._img is None or self._img_version != self.version:
                version = self.version
                self._img = render.render(self.tree(), self.size, self.dp, dark=self.dark_theme())
                self._img_version = version
                self._png = self._rgba = None
            return self._img

    def screencap_png(self) -> bytes:
        """The frame as PNG, encoded once per screen version (for in-process callers; the shell's
        ``screencap -p`` encodes on every call, as a phone does)."""
        with self.lock:
            img = self.screencap_image()
            if self._png is None:
                self._png = render.encode_png(img)
            return self._png

    def screencap_encode(self) -> bytes:
        """What ``screencap -p`` gets: the frame encoded to PNG for this call, as a phone's screencap
        (a new process per call that encodes the RGBA frame every time; only the render is kept), at
        zlib level ``screencap_png_level``: the fast 1 by default, a phone's 6
        (:data:`render.PHONE_SCREENCAP_PNG_LEVEL`) to cost the PNG path as on a phone."""
        return render.encode_screencap_png(self.screencap_image(), self.screencap_png_level)

    def screencap_rgba(self) -> bytes:
        """The frame's RGBA_8888 bytes (what raw ``screencap`` sends after its header): packed with
        an opaque alpha byte straight from the RGB render (half the cost of a convert)."""
        with self.lock:
            img = self.screencap_image()
            if self._rgba is None:
                self._rgba = img.tobytes("raw", "RGBX")  # Pillow packs RGB as RGBX with X = 255
            return self._rgba

    def hierarchy_xml(self) -> str:
        return hierarchy_xml(self.tree())

    def current_focus(self) -> tuple[str, str]:
        with self.lock:
            if self.show_recents:
                return SYSTEMUI, ".recents.RecentsActivity"
            if self.foreground == LAUNCHER:
                return LAUNCHER, ".Launcher"
            app = self.apps[self.foreground]
            return app.package, app.activity

    # --- PhoneAPI: packages -------------------------------------------------------------------
    def packages(self) -> list[str]:
        return sorted([LAUNCHER, SYSTEMUI, KEYBOARD_PKG, "android", "com.android.permissioncontroller"]
                      + list(self.apps) + list(self.persona.system_packages)
                      + (["com.android.adbkeyboard"] if ADB_IME in self.imes else []))

    def resolve_app(self, name: str) -> str | None:
        """A package for a package name, a launcher label (either language) or an alias."""
        with self.lock:
            if name in self.apps or name == LAUNCHER:
                return name
            low = name.strip().casefold()
            for app in self.apps.values():
                names = {app.label[0].casefold(), app.label[1].casefold(), app.key.casefold(),
                         *[a.casefold() for a in app.aliases]}
                if low in names:
                    return app.package
            return None

    def launch(self, package: str, activity: str | None = None) -> bool:
        with self.lock:
            if package == LAUNCHER:
                self._mutate(lambda: self.press_key("HOME"))
                return True
            if package not in self.apps:
                return False
            self._mutate(lambda: self._launch_unlocked(package, activity))
            return True

    def _launch_unlocked(self, package: str, activity: str | None) -> None:
        app = self.apps[package]
        self.show_recents = False
        self.clear_focus()
        if package not in self.running:
            self.running.add(package)
            app.restart()
            self.launches += 1
            system_ui.on_launch(self, package)
        self.foreground = package
        if package in self.recents:
            self.recents.remove(package)
        self.recents.append(package)

    def bring_to_front(self, package: str) -> None:
        """Open ``package`` as the launcher's icon does (the caller holds the lock)."""
        self._launch_unlocked(package, None)

    def share_to(self, app_key: str, payload: dict[str, Any]) -> None:
        """Android's share sheet, reduced to its effect: bring ``app_key`` to the front and hand it
        the shared text or attachment (the app's ``receive_share`` opens its compose page)."""
        app = self.by_key.get(app_key)
        if app is None or not hasattr(app, "receive_share"):
            return
        self._launch_unlocked(app.package, None)
        app.receive_share(dict(payload))

    def stop_app(self, package: str) -> None:
        """Stop ``package`` (force-stop, the recents screen's Clear all), the caller holding the lock."""
        self.running.discard(package)
        if self.foreground == package:
            self.foreground = LAUNCHER
            self.clear_focus()
        if package in self.apps:
            self.apps[package].restart()

    def force_stop(self, package: str) -> None:
        with self.lock:
            self._mutate(lambda: self.stop_app(package))

    def clear_data(self, package: str) -> bool:
        with self.lock:
            app = self.apps.get(package)
            if app is None:
                return False

            def do() -> None:
                self.stop_app(package)
                app.reset(self.preset)
                self.scroll_offsets = {k: v for k, v in self.scroll_offsets.items() if not k.startswith(package + "/")}
                self.anomalies["permissions"].pop(package, None)

            self._mutate(do)
            return True

    def broadcast(self, action: str, extras: dict[str, Any]) -> str:
        with self.lock:
            if action in ("ADB_INPUT_TEXT", "ADB_INPUT_B64", "ADB_INPUT_CODE", "ADB_EDITOR_CODE", "ADB_CLEAR_TEXT"):
                if self.ime != ADB_IME:
                    return "Broadcast completed: result=0"  # nobody listens unless ADBKeyboard is the IME
                if action == "ADB_INPUT_TEXT":
                    self.input_text(str(extras.get("msg", "")))
                elif action == "ADB_INPUT_B64":
                    try:
                        text = base64.b64decode(str(extras.get("msg", "")), validate=True).decode("utf-8")
                    except Exception:
                        return "Broadcast completed: result=0"
                    self.input_text(text)
                elif action == "ADB_CLEAR_TEXT":
                    self.clear_text()
                elif action in ("ADB_INPUT_CODE", "ADB_EDITOR_CODE"):
                    code = extras.get("code")
                    if action == "ADB_EDITOR_CODE":
                        self.keyevent("ENTER")
                    elif code is not None:
                        self.keyevent(int(code))
                return "Broadcast completed: result=-1"
            if action == RESET_ACTION and self.persona.sim_services:
                try:
                    config = json.loads(base64.b64decode(str(extras.get("config", ""))).decode("utf-8") or "{}")
                    self.reset(**config)
                except Exception as e:  # bad config: say so, keep the phone as it was
                    return f"Broadcast completed: result=1, data=\"error: {type(e).__name__}: {e}\""
                return "Broadcast completed: result=-1, data=\"reset\""
            return "Broadcast completed: result=0"

    # --- reset and presets --------------------------------------------------------------------
    def presets(self) -> tuple[str, ...]:
        """``default`` and every preset an app reacts to (an app ignores the others' presets)."""
        names = {p for a in self.apps.values() for p in type(a).presets}
        return ("default", *sorted(names - {"default"}))

    def reset(self, preset: str = "default", locale: str | None = None, anomalies: list[str] | None = None,
              seed: int = 0, state: dict[str, Any] | None = None, today: str | None = None) -> None:
        """Put every app in ``preset``'s start state (``state`` overrides per app key) on the date
        ``today`` (ISO, default the shared ``DEFAULT_TODAY``), stop all apps, go home, and arm the
        given anomalies. Deterministic for a given argument set."""
        with self.lock:
            unknown = [a for a in (anomalies or []) if a not in ("ad_popup", "permission_prompt")]
            if unknown:
                raise ValueError(f"unknown anomalies: {unknown}")
            if preset not in self.presets():
                raise ValueError(f"unknown preset {preset!r} (presets: {', '.join(self.presets())})")
            bad_keys = [k for k in (state or {}) if k not in self.by_key]
            if bad_keys:
                raise ValueError(f"unknown app keys in state: {bad_keys}")
            day = dt.date.fromisoformat(today or DEFAULT_TODAY)  # a bad date refuses the reset before anything changes
            self._reset_fields()
            self.today = day
            self.preset = preset
            self.locale = locale or self.base_locale
            self.keyboard.reset(self.locale)
            rng = random.Random(seed)
            self.anomalies.update({"enabled": list(anomalies or []), "seed": seed,
                                   "ad_at_launch": 1 + rng.randrange(2)})
            for app in self.apps.values():
                app.reset(preset, (state or {}).get(app.key))
            self.ime = LATIN_IME if self.ime not in self.imes else self.ime
            self.touch()

    # --- PhoneAPI: input methods --------------------------------------------------------------
    def ime_list(self) -> list[str]:
        return list(self.imes)

    def ime_enabled(self) -> list[str]:
        return list(self.enabled_imes)

    def ime_current(self) -> str:
        return self.ime

    def ime_set(self, ime_id: str) -> bool:
        """Make ``ime_id`` the input method: it must be enabled (InputMethodManagerService refuses
        an IME that is "not found or not enabled")."""
        with self.lock:
            if ime_id not in self.enabled_imes:
                return False
            self.ime = ime_id
            return True

    def ime_enable(self, ime_id: str, enable: bool = True) -> bool:
        with self.lock:
            if ime_id not in self.imes:
                return False
            if enable and ime_id not in self.enabled_imes:
                self.enabled_imes.append(ime_id)
            elif not enable and ime_id in self.enabled_imes:
                self.enabled_imes.remove(ime_id)
                if self.ime == ime_id:  # Android falls back to another enabled IME
                    self.ime = self.enabled_imes[0] if self.enabled_imes else ""
            return True

    # --- screen power and lock screen ---------------------------------------------------------
    def dismiss_keyguard(self) -> bool:
        with self.lock:
            return self._mutate(self.keyguard.dismiss)

    def set_lock(self, mode: str, showing: bool | None = None) -> None:
        """Give the phone a lock screen (tests; ``harness sim serve --lock``)."""
        with self.lock:
            self._mutate(lambda: self.keyguard.set_mode(mode, showing))

    # --- PhoneAPI: state ----------------------------------------------------------------------
    def state_json(self) -> dict[str, Any]:
        with self.lock:
            self.tree()
            app = self._app()
            screen: dict[str, Any] = {"package": self.foreground, "activity": self.current_focus()[1],
                                      "keyboard": self._keyboard_visible(), "recents": self.show_recents}
            if self.show_recents:
                screen["page"] = "systemui/recents"
            elif app is not None:
                screen.update(app.screen_info())
                screen["dialog"] = app.dialog["name"] if app.dialog else None
            if self.anomalies.get("ad_open"):
                screen["dialog"] = "ad_popup"
            if self.anomalies.get("pending_permission") == self.foreground and app is not None:
                screen["dialog"] = "permission_prompt"
            screen["focused_field"] = self.focus_key
            return {
                "device": {"size": [self.width, self.height], "locale": self.locale, "preset": self.preset,
                           "ime": self.ime, "imes_enabled": list(self.enabled_imes), "awake": self.keyguard.awake,
                           "lock": {"mode": self.keyguard.mode, "showing": self.keyguard.showing},
                           "today": self.today.isoformat(), "weekday": WEEKDAYS[self.today.weekday()],
                           "apps": [{"key": a.key, "package": a.package, "label_en": a.label[0],
                                     "label_zh": a.label[1], "aliases": list(a.aliases)} for a in self.apps.values()]},
                "screen": screen,
                "apps": {a.key: a.state_json() for a in self.apps.values()},
                "running": sorted(self.running),
                "effects": copy.deepcopy(self.effects),
                "clipboard": self.clipboard,
                "anomalies": {k: self.anomalies[k] for k in ("enabled", "seed", "ad_shown", "permissions")},
                "version": self.version,
            }


def _translate(node: Node, dy: int) -> None:
    """Move a node and everything in it by ``dy`` pixels (its clip box too)."""
    x1, y1, x2, y2 = node.bounds
    node.bounds = (x1, y1 + dy, x2, y2 + dy)
    if node.clip is not None:
        a, b, c, d = node.clip
        node.clip = (a, b + dy, c, d + dy)
    for child in node.children:
        _translate(child, dy)
