"""Preparing a phone for a run, and putting back everything the run changed.

``prepare`` (``harness devices prepare``, and the start of ``harness run`` unless ``--no-prepare``):

1. the screen must be on and unlocked: an asleep screen is woken (``KEYCODE_WAKEUP``); a lock screen
   that needs no secret (swipe, or kept open by Smart Lock) is dismissed (``wm dismiss-keyguard``);
   a PIN, pattern or password lock stops the run with "unlock the phone" — the harness never types
   a lock-screen secret;
2. it stays awake while plugged in: ``global stay_on_while_plugged_in`` = 7 (AC | USB | wireless:
   ``BatteryManager.BATTERY_PLUGGED_*``, what Developer options' "Stay awake" writes);
3. the three animation scales (``global window_animation_scale``, ``transition_animation_scale``,
   ``animator_duration_scale``) go to 0, so screens settle in one frame;
4. the input method becomes ADBKeyboard when it is installed (Unicode typing, FIELD_NOTES section 9);
5. only when asked (``--size WxH``, ``--density D``): the screen's size and density are overridden
   (``wm size WxH``, ``wm density D``; put back with ``wm size reset`` / ``wm density reset``, or
   the override the phone had before).

Android puts none of these back by itself (FIELD_NOTES section 11). Every change, by prepare or
later in the run (a text entry switching the IME), is first written to the device's **journal**:
one JSON file per device in the state folder (``$CRATE_HARNESS_STATE``, else
``$XDG_STATE_HOME/crate-harness``, else ``~/.local/state/crate-harness``; ``devices/<serial>.json``),
written atomically and flushed to disk *before* the change is made. ``restore`` (the end of
``harness run``, also after Ctrl-C or an error, and ``harness devices restore`` after a crash) puts
each original value back, reads it again to check, and drops what it restored; the file goes when
nothing is left. A journal that survives a crash keeps the first original of each value: a later
prepare adds to it and never mistakes the harness's own values for the user's.

Every change to a journal's file is made under an exclusive ``flock(2)`` of ``devices/<serial>.lock``
(waited for up to :data:`JOURNAL_LOCK_S`, then a clear error and no change to the phone), and
starts from what the file holds then: two processes recording changes of one phone add to one
list, neither overwriting the other's entries nor removing the file under the other. (That two
commands never *drive* one phone at once is the phone lock's job, harness/device/phone_lock.py;
it is keyed by adb server and serial, the journal by serial alone, so one phone reached through
two servers' addresses is two phones to the lock and one journal, whose lock keeps both writers'
entries.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from harness.device.base import DeviceError, InfraError
from harness.device.phone_lock import flock_within
from harness.device.text_input import ADB_IME

STAY_ON_ALL_SOURCES = "7"
ANIMATION_SCALES = ("window_animation_scale", "transition_animation_scale", "animator_duration_scale")
JOURNAL_FORMAT = 1
JOURNAL_LOCK_S = 10.0  # longest wait for another process's write of the same journal
DISPLAY = ("size", "density")  # what `wm` overrides, journaled as kind "display"


class PrepareRefused(RuntimeError):
    """The phone cannot be prepared as it is (locked with a secret): the user has to act."""


def state_dir() -> Path:
    """Where journals live (see the module docstring)."""
    env = os.environ.get("CRATE_HARNESS_STATE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "crate-harness"


def _now() -> str:
    from harness.records import now_iso
    return now_iso()


def _file_name(serial: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", serial) + ".json"


@dataclass
class Change:
    """One value the harness changed: a setting (``namespace``/``key``) or the input method."""

    kind: str                                  # "setting" | "input_method" | "display"
    before: str | None                         # the user's value (None: unset)
    after: str | None
    namespace: str = ""
    key: str = ""                              # display: "size" or "density"
    enabled_before: list[str] = field(default_factory=list)  # input_method: the enabled IMEs
    at: str = ""

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.key)

    def describe(self) -> str:
        if self.kind == "setting":
            return f"{self.namespace} {self.key}"
        if self.kind == "display":
            return f"screen {self.key}"
        return "input method"

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "before": self.before, "after": self.after, "at": self.at}
        if self.kind == "setting":
            d.update(namespace=self.namespace, key=self.key)
        elif self.kind == "display":
            d["key"] = self.key
        else:
            d["enabled_before"] = list(self.enabled_before)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Change":
        return cls(kind=d["kind"], before=d.get("before"), after=d.get("after"), namespace=d.get("namespace", ""),
                   key=d.get("key", ""), enabled_before=list(d.get("enabled_before") or []), at=d.get("at", ""))


class Journal:
    """The durable record of one device's original values (see the module docstring)."""

    def __init__(self, path: Path, serial: str, adb: dict[str, Any] | None = None):
        self.path = path
        self.serial = serial
        self.adb = adb or {}
        self.changes: list[Change] = []
        self.owner: dict[str, Any] = {}
        self.lock = threading.RLock()
        self._locked = False  # this process holds the file's lock (nested calls do not take it again)
        self.inherited = 0  # changes left by an earlier run that did not restore them

    # --- files --------------------------------------------------------------------------------
    @classmethod
    def open(cls, serial: str, adb: dict[str, Any] | None = None, folder: Path | None = None,
             owner: dict[str, Any] | None = None) -> "Journal":
        """The journal of ``serial``, with what an earlier run left in it."""
        folder = (folder or state_dir()) / "devices"
        j = cls(folder / _file_name(serial), serial, adb)
        if j.path.exists():
            j._load()
            j.inherited = len(j.changes)
        j.owner = dict(owner or {})
        if adb:
            j.adb = dict(adb)
        return j

    @classmethod
    def pending(cls, folder: Path | None = None) -> list["Journal"]:
        """Every journal with changes still to restore."""
        d = (folder or state_dir()) / "devices"
        out = []
        for f in sorted(d.glob("*.json")) if d.is_dir() else []:
            j = cls(f, "")
            j._load()
            if j.changes:
                out.append(j)
        return out

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.serial = data.get("serial") or self.serial
            self.adb = data.get("adb") or self.adb
            self.owner = data.get("owner") or {}
            self.changes = [Change.from_json(c) for c in data.get("changes", [])]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DeviceError(f"{self.path}: the record of original device settings cannot be read ({e}); "
                              "fix or remove it by hand") from None

    def _reload(self) -> None:
        """The changes the file holds now (another process may have added or restored some)."""
        owner, adb = self.owner, self.adb
        if self.path.exists():
            self._load()
        else:
            self.changes = []
        self.owner, self.adb = owner, adb or self.adb

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        """This journal's file to ourselves (see the module docstring); re-entrant in a process."""
        if self._locked:
            yield
            return
        lock_path = self.path.with_name(self.path.name[:-len(".json")] + ".lock")
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise DeviceError(f"cannot record the device's original settings in {self.path}: its lock {lock_path} "
                              f"cannot be made ({e.strerror or e}); set CRATE_HARNESS_STATE to a writable folder") from None
        try:
            if not flock_within(fd, JOURNAL_LOCK_S, poll_s=0.05):
                raise DeviceError(f"{self.path}: another harness process has been writing this record of "
                                  f"{self.serial}'s original settings for over {JOURNAL_LOCK_S:g} s; nothing "
                                  f"was changed on the device (try again; the lock is {lock_path})")
            self._locked = True
            try:
                yield
            finally:
                self._locked = False
        finally:
            os.close(fd)  # lets go of the flock

    def save(self) -> None:
        """Write the journal (atomically, flushed to disk); remove the file when it is empty."""
        with self.lock, self._file_lock():
            self._write()

    def _write(self) -> None:
        if not self.changes:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            return
        from harness.records import atomic_write_json

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"format": JOURNAL_FORMAT, "serial": self.serial, "adb": self.adb,
                                          "owner": self.owner, "updated_at": _now(),
                                          "changes": [c.to_json() for c in self.changes]}, fsync=True)
        except OSError as e:  # then the change is not made: nothing would remember the original
            raise DeviceError(f"cannot record the device's original settings in {self.path}: {e.strerror or e}; "
                              "set CRATE_HARNESS_STATE to a writable folder") from None

    # --- recording ----------------------------------------------------------------------------
    def remember(self, change: Change) -> None:
        """Record ``change`` before it is made. The first original of a value wins."""
        with self.lock, self._file_lock():
            self._reload()
            change.at = change.at or _now()
            earlier = next((c for c in self.changes if c.ident == change.ident), None)
            if earlier is not None:
                earlier.after = change.after  # its original is already on disk
                self._write()
                return
            self.changes.append(change)
            try:
                self._write()
            except DeviceError:
                self.changes.remove(change)  # not recorded, so the caller must not make it
                raise

    def remember_input_method(self, device: Any, after: str) -> None:
        ims = device.input_methods()
        self.remember(Change("input_method", ims.current, after, enabled_before=list(ims.enabled)))

    def forget(self, change: Change) -> None:
        """Drop ``change`` (put back): from what the file holds now."""
        with self.lock, self._file_lock():
            self._reload()
            self.changes = [c for c in self.changes if c.ident != change.ident]
            self._write()

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.changes]


def change_setting(device: Any, namespace: str, key: str, value: str | None) -> bool:
    """Set a setting, recording its original in the device's journal first; False when it
    already had that value."""
    current = device.get_setting(namespace, key)
    if current == value:
        return False
    if device.journal is not None:
        device.journal.remember(Change("setting", current, value, namespace=namespace, key=key))
    device.put_setting(namespace, key, value)
    return True


def change_display(device: Any, key: str, value: str) -> bool:
    """Override the screen's ``size`` (``WxH``) or ``density`` (dpi) with ``wm``, recording the
    override it had (None: none) in the journal first; False when it already had that value."""
    current = device.display_override(key)
    if current == value:
        return False
    if device.journal is not None:
        device.journal.remember(Change("display", current, value, key=key))
    device.set_display_override(key, value)
    if device.display_override(key) != value:
        raise DeviceError(f"{device.serial}: wm {key} {value} did not take (the phone reports "
                          f"{device.display_override(key) or 'no override'})")
    return True


# --- prepare -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrepareConfig:
    """What ``prepare`` does (by default all but the screen overrides, which are made only when
    asked: ``size`` as ``(width, height)``, ``density`` in dpi)."""

    stay_awake: bool = True
    animations_off: bool = True
    adbkeyboard: bool = True
    size: tuple[int, int] | None = None
    density: int | None = None

    def __post_init__(self) -> None:
        if self.size is not None and not (len(self.size) == 2 and all(isinstance(v, int) and v > 0 for v in self.size)):
            raise ValueError(f"size: expected (width, height) in pixels, got {self.size!r}")
        if self.density is not None and not (isinstance(self.density, int) and 72 <= self.density <= 1000):
            raise ValueError(f"density: expected dpi between 72 and 1000, got {self.density!r}")


@dataclass
class PrepareReport:
    serial: str
    kind: str = ""
    screen: dict[str, Any] = field(default_factory=dict)   # what was found, what was done
    changed: list[str] = field(default_factory=list)        # settings this prepare changed
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"serial": self.serial, "kind": self.kind, "screen": self.screen, "changed": self.changed,
                "notes": self.notes}


def describe_prepare(report: dict[str, Any]) -> str:
    """What a prepare did, in a few words (from ``PrepareReport.to_json()``)."""
    screen = [what for key, what in (("woken", "woke the screen"), ("dismissed_keyguard", "opened the lock screen"))
              if report.get("screen", {}).get(key)]
    return ", ".join(screen + list(report.get("changed", [])))


def check_screen(device: Any, report: PrepareReport) -> None:
    """Screen on and unlocked, or :class:`PrepareRefused`. Changes no setting."""
    st = device.screen_state()
    report.screen["found"] = st.to_json()
    if st.awake is False:
        device.wake()
        st = device.screen_state()
        report.screen["woken"] = True
        if st.awake is False:
            raise PrepareRefused(f"{device.serial}: the screen stays off after a wake-up key; turn the screen on "
                                 "and unlock the phone")
    if st.keyguard:
        if st.secure and not st.trusted:
            raise PrepareRefused(f"{device.serial}: the phone is locked with a PIN, pattern or password: unlock the "
                                 "phone and start again (the harness never enters a lock-screen secret)")
        device.dismiss_keyguard()
        after = device.screen_state()
        report.screen["dismissed_keyguard"] = True
        if after.keyguard:
            raise PrepareRefused(f"{device.serial}: the lock screen did not open: unlock the phone and start again")
    report.screen["ok"] = True


def prepare(device: Any, cfg: PrepareConfig | None = None) -> PrepareReport:
    """Prepare one device (the module docstring says what); every change goes through its journal."""
    cfg = cfg or PrepareConfig()
    report = PrepareReport(device.serial, kind=device.kind())
    check_screen(device, report)
    if cfg.stay_awake and change_setting(device, "global", "stay_on_while_plugged_in", STAY_ON_ALL_SOURCES):
        report.changed.append("global stay_on_while_plugged_in")
    if cfg.animations_off:
        for key in ANIMATION_SCALES:
            if change_setting(device, "global", key, "0"):
                report.changed.append(f"global {key}")
    asked = (("size", "x".join(map(str, cfg.size)) if cfg.size else None),
             ("density", str(cfg.density) if cfg.density else None))
    for key, value in asked:
        if value is not None and change_display(device, key, value):
            report.changed.append(f"screen {key} {value}")
    if cfg.adbkeyboard:
        ims = device.input_methods()
        if ADB_IME not in ims.installed:
            report.notes.append("ADBKeyboard is not installed: text that is not plain ASCII cannot be typed "
                                "(see docs/phones.md)")
        elif ims.current != ADB_IME:
            device.use_input_method(ADB_IME)
            report.changed.append("input method")
    return report


# --- restore -----------------------------------------------------------------------------------
def current_value(device: Any, c: Change) -> str | None:
    """What the device holds now for the value ``c`` changed (the input method: the selected one)."""
    if c.kind == "setting":
        return device.get_setting(c.namespace, c.key)
    if c.kind == "display":
        return device.display_override(c.key)
    return device.input_methods().current


def waiting_values(journal: Journal, device: Any = None) -> list[dict[str, Any]]:
    """Each value ``journal`` holds to put back: what it is (``namespace``/``key`` of a setting, the
    screen's ``size``/``density``, the input method), the ``value`` to restore and, with a reachable
    ``device``, the value it holds ``now`` (``now_error`` when it cannot be read)."""
    out = []
    for c in journal.changes:
        row: dict[str, Any] = {"what": c.describe(), "kind": c.kind, "namespace": c.namespace, "key": c.key,
                               "value": c.before}
        if device is not None:
            try:
                row["now"] = current_value(device, c)
            except (InfraError, DeviceError) as e:
                row["now_error"] = str(e)
        out.append(row)
    return out


def shown_value(what: str, value: Any) -> str:
    """A journaled value as a person reads it: None is an unset setting, or a screen with no override."""
    if value is None:
        return "the phone's own (no override)" if what.startswith("screen ") else "(unset)"
    return str(value)


def describe_waiting(row: dict[str, Any]) -> str:
    """``global window_animation_scale: 1.0 (now 0)``, from a :func:`waiting_values` row."""
    def shown(v: Any) -> str:
        return shown_value(row["what"], v)
    now = f" (now {shown(row['now'])})" if "now" in row else \
        f" (now unknown: {row['now_error']})" if "now_error" in row else ""
    return f"{row['what']}: {shown(row['value'])}{now}"


@dataclass
class RestoreReport:
    serial: str
    restored: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_json(self) -> dict[str, Any]:
        return {"serial": self.serial, "restored": self.restored, "failed": self.failed}


def _put_back(device: Any, c: Change) -> bool:
    """Apply ``c.before`` and read it back; True when the device now holds it."""
    if c.kind == "setting":
        device.put_setting(c.namespace, c.key, c.before)
        return device.get_setting(c.namespace, c.key) == c.before
    if c.kind == "display":
        device.set_display_override(c.key, c.before)
        return device.display_override(c.key) == c.before
    if c.before:
        device.set_input_method(c.before)
    if c.after and c.after not in c.enabled_before:
        device.disable_input_method(c.after)
    ims = device.input_methods()
    return ims.current == c.before and not (c.after and c.after not in c.enabled_before and c.after in ims.enabled)


def restore(device: Any, journal: Journal) -> RestoreReport:
    """Put back every value in ``journal`` (newest change first), verify each, and keep in the
    journal only what could not be restored."""
    report = RestoreReport(journal.serial)
    for c in reversed(list(journal.changes)):
        entry = {"what": c.describe(), "value": c.before, "was": c.after}
        try:
            ok = _put_back(device, c)
        except (InfraError, DeviceError) as e:
            report.failed.append({**entry, "error": str(e)})
            continue
        if ok:
            journal.forget(c)
            report.restored.append(entry)
        else:
            report.failed.append({**entry, "error": "the device does not hold the original value after restoring it"})
    return report


# --- a run's devices ---------------------------------------------------------------------------
class DeviceSession:
    """Journals attached to a run's devices; ``prepare`` at the start, ``restore`` at the end.

    ``with DeviceSession(devices, prepare_cfg) as s: ...`` restores whatever happens inside (a
    normal end, Ctrl-C, an error); ``s.entry()`` is what the manifest records."""

    def __init__(self, devices: Iterable[Any], cfg: PrepareConfig | None, folder: Path | None = None,
                 owner: dict[str, Any] | None = None, on_prepared: Callable[["DeviceSession"], None] | None = None):
        self.devices = list(devices)
        self.cfg = cfg  # None: --no-prepare (changes made later in the run are still journaled)
        self.folder = folder
        self.owner = owner or {}
        self.on_prepared = on_prepared
        self.started_at = ""
        self.prepared: dict[str, dict[str, Any]] = {}
        self.restored: dict[str, dict[str, Any]] = {}

    def __enter__(self) -> "DeviceSession":
        self.started_at = _now()
        try:
            for d in self.devices:
                d.journal = Journal.open(d.serial, {"host": d.host, "port": d.port}, self.folder, self.owner)
                entry: dict[str, Any] = {"kind": d.kind(), "inherited": d.journal.to_json() if d.journal.inherited else []}
                if self.cfg is not None:
                    entry["prepare"] = prepare(d, self.cfg).to_json()
                entry["changes"] = d.journal.to_json()
                self.prepared[d.serial] = entry
        except BaseException:
            self.restore_all()
            raise
        if self.on_prepared is not None:
            self.on_prepared(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.restore_all()

    def restore_all(self) -> None:
        for d in self.devices:
            journal = getattr(d, "journal", None)
            if journal is None or d.serial in self.restored:
                continue
            entry = self.prepared.setdefault(d.serial, {})
            entry["changes"] = journal.to_json()  # everything the run changed, prepare or later
            if not journal.changes:
                self.restored[d.serial] = RestoreReport(d.serial).to_json()
            else:
                self.restored[d.serial] = restore(d, journal).to_json()
            d.journal = None

    def failures(self) -> dict[str, list[dict[str, Any]]]:
        return {s: r["failed"] for s, r in self.restored.items() if r.get("failed")}

    def entry(self) -> dict[str, Any]:
        return {"started_at": self.started_at, "prepare": self.cfg is not None,
                "devices": {s: {**e, "restore": self.restored.get(s)} for s, e in self.prepared.items()}}
