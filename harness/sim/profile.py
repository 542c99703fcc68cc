"""A device profile served by the simulated phone (``harness sim serve --profile DIR``): the phone
answers in the formats a real phone's capture holds (``harness.core.profile_folder``; ``harness devices
capture`` writes one), with its own live state filled in.

What is served from the profile, and how:

- ``getprop``: the captured properties in their order and line ends; the phone's own serial number
  where the capture redacted one, and what ``setprop`` set. Its model, SDK and build are the
  phone's identity (the adb banner, ``getprop NAME``).
- ``dumpsys`` (window, displays, windows, activity, input, display, SurfaceFlinger...): the
  captured text, with the app in front put where the captured one was (the manifest's
  ``foreground``: each spelling of its component, ``pkg/.Act`` and ``pkg/pkg.Act``; and on the
  focus lines, ``mCurrentFocus=``/``mFocusedWindow=``, a system window that had the focus when the
  phone was captured, unless the simulated phone's own lock screen is showing). So a profile of
  several displays prints several displays, with its ``mTopFocusedDisplayId``, and the other
  displays keep what they showed.
- ``getevent``: the captured devices (``getevent -lp`` or ``-p``), their axes, keys, switches and
  properties, read into the simulated kernel (``harness.sim.evdev``): a type A touchscreen reports
  type A, two touch devices are two, keys on the touch controller's node act on the phone. The
  listing is printed from that kernel's state, which reproduces the captured listing byte for byte
  while nothing is touched (labels and their padding as captured).
- ``ime list -s``/``-a -s``: the phone's live enabled and installed input methods, which start as
  the profile's (ADBKeyboard is added, installed and not enabled, when the profile lacks it);
  ``ime list -a``: the captured text.
- ``screencap``: what the phone wrote before its image ("[Warning] Multiple displays were found...")
  before the simulated screen's image, unless ``-d`` names one of the profile's displays.
- ``wm size``/``wm density``: the captured text; the phone's screen has that size and density.

Everything else (settings, packages, the UI dump, power and the lock screen, apps) is the simulated
phone's own. A command the profile has no answer for is answered as the simulated phone answers it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import input_codes as C
from harness.core.profile_folder import REDACTED, Manifest, ProfileError, read_answer, read_manifest
from harness.sim.evdev import MORE_NAMES, AbsInfo, InputDevice
from harness.sim.phone_api import DeviceInfo

SHIPPED = Path(__file__).resolve().parent / "profiles"
_PROP_LINE = re.compile(r"^\[([^\]\r\n]+)\]: \[(.*?)\](\r*\n|\r*$)", re.M | re.S)
_SIZE = re.compile(r"^\s*(Physical|Override) size:\s*(\d+)\s*x\s*(\d+)\s*$", re.M)
_DENSITY = re.compile(r"^\s*(Physical|Override) density:\s*(\d+)\s*$", re.M)
_SF_DISPLAY = re.compile(r"^Display (\d+) ", re.M)
_FOCUS_LINE = re.compile(r"^(\s*(?:mCurrentFocus|mFocusedWindow)=Window\{[0-9a-fA-F]+ (?:u\d+ )?)([^\s{}]+)", re.M)
_UNKNOWN_CODES = 0x10000  # a label no table names gets a number no device sends


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _encode(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def find(source: str | Path) -> Path:
    """A profile's folder: a path, or the name of a profile shipped in ``harness/sim/profiles``."""
    path = Path(source)
    if path.is_dir():
        return path
    shipped = SHIPPED / str(source)
    if not path.is_absolute() and "/" not in str(source) and shipped.is_dir():
        return shipped
    names = ", ".join(shipped_names()) or "none"
    raise ProfileError(f"{source}: no such profile folder (a folder `harness devices capture` wrote, or one of the "
                       f"shipped profiles: {names})")


def shipped_names() -> list[str]:
    return sorted(p.name for p in SHIPPED.iterdir() if (p / "manifest.json").is_file()) if SHIPPED.is_dir() else []


def load(source: str | Path) -> "Profile":
    folder = find(source)
    return Profile(folder, read_manifest(folder))


@dataclass
class Prop:
    name: str
    value: str
    end: str  # the line end as captured ("\n", "\r\n", "" at the end of the file)


@dataclass
class Profile:
    folder: Path
    manifest: Manifest
    _cache: dict[str, bytes | None] = field(default_factory=dict)
    _props: list[Prop] | None = None

    @property
    def name(self) -> str:
        return self.manifest.name

    def answer(self, command: str) -> bytes | None:
        """The captured answer to ``command`` (as the harness sends it), or None."""
        if command not in self._cache:
            a = self.manifest.answer(command)
            self._cache[command] = None if a is None or a.error else read_answer(self.folder, a)
        return self._cache[command]

    def text(self, command: str) -> str | None:
        data = self.answer(command)
        return None if data is None else _decode(data)

    # --- identity ---------------------------------------------------------------------------------
    def props(self) -> list[Prop]:
        """The captured properties in their order (read once)."""
        if self._props is None:
            text = self.text("getprop") or ""
            self._props = [Prop(m.group(1), m.group(2), m.group(3) if m.group(3).endswith("\n") else "")
                           for m in _PROP_LINE.finditer(text)]
        return self._props

    def prop(self, name: str, default: str = "") -> str:
        return next((p.value for p in self.props() if p.name == name), default)

    def info(self, serial: str) -> DeviceInfo:
        """The phone's identity as the profile's getprop gives it (the adb banner's too)."""
        d = DeviceInfo(serial=serial)
        for key, prop in (("product", "ro.product.name"), ("model", "ro.product.model"),
                          ("device", "ro.product.device"), ("manufacturer", "ro.product.manufacturer"),
                          ("release", "ro.build.version.release")):
            value = self.prop(prop) or str(self.manifest.device.get(key) or "")
            if value and value != REDACTED:
                setattr(d, key, value)
        d.sdk = self.sdk() or d.sdk
        return d

    def sdk(self) -> int | None:
        try:
            return int(self.prop("ro.build.version.sdk") or self.manifest.device.get("sdk") or "")
        except ValueError:
            return None

    def size(self) -> tuple[int, int] | None:
        found = {m.group(1): (int(m.group(2)), int(m.group(3)))
                 for m in _SIZE.finditer((self.text("wm size") or "").replace("\r", ""))}
        return found.get("Override") or found.get("Physical")

    def density(self) -> int | None:
        found = {m.group(1): int(m.group(2)) for m in _DENSITY.finditer((self.text("wm density") or "").replace("\r", ""))}
        return found.get("Override") or found.get("Physical")

    def display_ids(self) -> list[str]:
        return _SF_DISPLAY.findall(self.text("dumpsys SurfaceFlinger --display-id") or "")

    def ime_ids(self, command: str) -> list[str] | None:
        text = self.text(command)
        if text is None:
            return None
        return [s for s in (line.strip() for line in text.splitlines()) if re.fullmatch(r"[\w.]+/[\w.$]+", s)]

    def image_head(self, command: str) -> bytes:
        """What the phone wrote before its image when ``command`` (``screencap -p``, ``screencap``)
        was given no display; nothing where the capture found no image after it."""
        a = self.manifest.answer(command)
        if a is None or not a.image or a.image.get("format") not in ("png", "raw"):
            return b""
        return self.answer(command) or b""

    # --- answers with the phone's state -----------------------------------------------------------
    def getprop(self, serial: str, extra: dict[str, str]) -> bytes:
        """``getprop``'s listing: the captured properties with the phone's serial number where one
        was redacted and ``extra`` (setprop's) in name order."""
        props = {p.name: p for p in self.props()}
        ends = [p.end for p in props.values() if p.end]
        end = ends[0] if ends else "\n"
        order = list(props)  # as captured (getprop sorts by name; an old phone's may not)
        for name, value in sorted(extra.items()):
            if name not in props:
                at = next((i for i, n in enumerate(order) if n > name), len(order))
                order.insert(at, name)
            props[name] = Prop(name, value, props[name].end if name in props else end)
        out = []
        for name in order:
            p = props[name]
            value = serial if p.value == REDACTED and "serial" in name.lower() else p.value
            out.append(f"[{name}]: [{value}]{p.end or end if name != order[-1] else p.end}")
        return _encode("".join(out))

    def getprop_value(self, name: str, serial: str, extra: dict[str, str]) -> str | None:
        if name in extra:
            return extra[name]
        p = next((p for p in self.props() if p.name == name), None)
        if p is None:
            return None
        return serial if p.value == REDACTED and "serial" in name.lower() else p.value

    def dumpsys(self, command: str, front: tuple[str, str], locked: bool) -> bytes | None:
        """A captured ``dumpsys`` answer with the app in front where the captured one was."""
        text = self.text(command)
        if text is None:
            return None
        fg = self.manifest.foreground
        pkg, act = front
        if not pkg or not fg.get("components"):
            return _encode(text)
        full = pkg + act if act.startswith(".") else act
        short = full[len(pkg):] if full.startswith(pkg + ".") else full
        now = {c: f"{pkg}/{short if c.split('/', 1)[1].startswith('.') else full}" for c in fg["components"]}
        pattern = "|".join(re.escape(c) for c in sorted(now, key=len, reverse=True))
        text = re.sub(rf"(?<![\w.]){pattern}(?![\w$])", lambda m: now[m.group(0)], text)
        windows = set(fg.get("windows", []))
        if windows and not locked:
            text = _FOCUS_LINE.sub(lambda m: m.group(1) + (f"{pkg}/{full}" if m.group(2) in windows else m.group(2)),
                                   text)
        return _encode(text)

    # --- input devices ----------------------------------------------------------------------------
    def input_devices(self) -> list[InputDevice] | None:
        """The captured devices (``getevent -lp``, else ``getevent -p``), or None."""
        for command in ("getevent -lp", "getevent -p"):
            text = self.text(command)
            if text is not None:
                return parse_listing(text, f"{self.folder / self.manifest.answer(command).file}")
        return None


# --- getevent -p / -lp listings (AOSP toolbox getevent.c, print_possible_events) -------------------
_DEVICE = re.compile(r"^add device \d+: (\S+)\s*$")
_NAME = re.compile(r'^\s+name:\s+"(.*)"\s*$')
_TYPE = re.compile(r"^    ([A-Z]{2,3}) *\(([0-9a-f]{4})\):(.*)$")
_ABS = re.compile(r"^ ([A-Z0-9_]{1,20}|[0-9a-f]{4})(\*| ) *: value (-?\d+), min (-?\d+), max (-?\d+), fuzz (-?\d+), "
                  r"flat (-?\d+), resolution (-?\d+)\s*$")
_TOKEN = re.compile(r" ([A-Za-z0-9_]{1,20})(\*| )( *)(?= \S|$)")  # the pad leaves the next one's space


def _code(ev_type: int, token: str, unknown: dict[str, int]) -> tuple[int, str | None]:
    """(code, label) of one listing token: four hex digits print a code without a label."""
    if re.fullmatch(r"[0-9a-f]{4}", token):
        return int(token, 16), ""
    code = C.CODE_BY_NAME.get(ev_type, {}).get(token)
    if code is None:
        code = next((c for name, c in MORE_NAMES.get(ev_type, {}).items() if name[:C.LABEL_WIDTH] == token), None)
    if code is None:
        code = unknown.setdefault(token, _UNKNOWN_CODES + len(unknown))
    return code, token


def parse_listing(text: str, where: str) -> list[InputDevice]:
    """The devices of a ``getevent -p``/``-lp`` listing, in its order, with each code's label and
    the padding printed after it (so the listing prints again as it was)."""
    devices: list[InputDevice] = []
    unknown: dict[str, int] = {}
    dev: InputDevice | None = None
    ev_type: int | None = None
    in_props = False
    for n, raw in enumerate(text.replace("\r", "").split("\n"), 1):
        m = _DEVICE.match(raw)
        if m:
            dev = InputDevice(m.group(1), "", vendor=0, product=0, version=0)
            devices.append(dev)
            ev_type, in_props = None, False
            continue
        if dev is None:
            continue
        if (m := _NAME.match(raw)):
            dev.name = m.group(1)
            continue
        if raw.strip() == "events:":
            continue
        if raw.strip() == "input props:":
            ev_type, in_props = None, True
            continue
        if in_props:
            name = raw.strip()
            if name and name != "<none>":
                prop = C.PROP_BY_NAME.get(name, int(name, 16) if re.fullmatch(r"[0-9a-f]{4}", name) else None)
                if prop is None:
                    raise ProfileError(f"{where}: line {n}: unknown input property {name!r}")
                dev.props.append(prop)
            continue
        rest = raw
        if (m := _TYPE.match(raw)):
            ev_type = int(m.group(2), 16)
            rest = m.group(3)
        elif ev_type is None or not raw.startswith("               "):
            continue
        else:
            rest = raw[15:]
        if ev_type == C.EV_ABS:
            a = _ABS.match(rest)
            if a is None:
                raise ProfileError(f"{where}: line {n}: an ABS axis that does not read as "
                                   f"'CODE : value V, min A, max B, fuzz F, flat L, resolution R': {raw.strip()!r}")
            code, label = _code(ev_type, a.group(1), unknown)
            dev.abs[code] = AbsInfo(int(a.group(4)), int(a.group(5)), int(a.group(3)), int(a.group(6)),
                                    int(a.group(7)), int(a.group(8)))
            dev.labels[(ev_type, code)] = label or ""
            dev.pads[(ev_type, code)] = len(re.match(r" \S+[* ]( *) :", rest).group(1))
            continue
        for t in _TOKEN.finditer(rest):
            code, label = _code(ev_type, t.group(1), unknown)
            dev.labels[(ev_type, code)] = label or ""
            dev.pads[(ev_type, code)] = len(t.group(3))
            if ev_type == C.EV_KEY:
                dev.keys.append(code)
                if t.group(2) == "*":
                    dev.keys_down.add(code)
            elif ev_type == C.EV_MSC:
                dev.msc.append(code)
            else:
                dev.other.setdefault(ev_type, []).append(code)
    if not any(label for d in devices for label in d.labels.values()):
        for d in devices:  # a numeric listing (-p) says nothing of labels: getevent -lp uses the tables'
            d.labels.clear()
            d.pads.clear()
    for d in devices:
        d.__post_init__()  # slots, as the kernel has them
    if not devices:
        raise ProfileError(f"{where}: lists no input device ('add device N: /dev/input/eventN' lines)")
    return devices
