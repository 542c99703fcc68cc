"""What the harness will not do to a person's phone unasked, and how it tells a phone from a test
device.

A device is ``simulated`` (the harness's own simulated phone, which answers ``dumpsys crate_sim``),
an ``emulator`` or a ``phone``. Emulators are recognised as adb and the emulator images announce
themselves: the ``emulator-NNNN`` serial of a locally started emulator, ``ro.kernel.qemu=1`` /
``ro.boot.qemu=1`` (set by the Android emulator's kernel command line), or a virtual board in
``ro.hardware``: ``goldfish`` / ``ranchu`` (the Android emulator's boards), ``cutf_cvm`` (Cuttlefish),
``vbox86`` (Genymotion). Anything else, however it is connected, is treated as somebody's phone.

On a phone, ``setup.clear`` (``pm clear``) erases the app's data and logs its owner out (SPA-Bench's
tasks assume apps installed and logged in, FIELD_NOTES section 11), so a run with such a task is
refused before anything runs unless ``harness run --allow-clear`` says otherwise.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from harness.device.base import DeviceKind

EMULATOR_BOARDS = frozenset({"goldfish", "ranchu", "cutf_cvm", "vbox86"})
EMULATOR_PROPS = ("ro.kernel.qemu", "ro.boot.qemu")
KIND_PROPS = (*EMULATOR_PROPS, "ro.hardware", "ro.boot.hardware")


def kind_of(serial: str, props: Mapping[str, str], simulated: bool) -> DeviceKind:
    """``simulated``, ``emulator`` or ``phone`` from what the device reports."""
    if simulated:
        return "simulated"
    if serial.startswith("emulator-"):
        return "emulator"
    if any(props.get(p, "").strip() == "1" for p in EMULATOR_PROPS):
        return "emulator"
    if any(props.get(p, "").strip() in EMULATOR_BOARDS for p in ("ro.hardware", "ro.boot.hardware")):
        return "emulator"
    return "phone"


def clears_data_on(kind: str) -> bool:
    """Whether ``pm clear`` on this kind of device needs the user's ``--allow-clear``."""
    return kind not in ("simulated", "emulator")


class ClearRefused(ValueError):
    """A task would clear app data on a phone and the user did not allow it."""


def refuse_clear(tasks: Iterable, kinds: Mapping[str, str], allow: bool) -> None:
    """Raise :class:`ClearRefused` naming every task, its packages and the phones when a task with
    ``setup.clear`` could run on a phone (any task may land on any device of the run)."""
    if allow:
        return
    phones = sorted(s for s, k in kinds.items() if clears_data_on(k))
    clearing = [(t.id, list(t.setup.clear)) for t in tasks if t.setup.clear]
    if not phones or not clearing:
        return
    shown = "; ".join(f"task {tid!r}: {', '.join(pkgs)}" for tid, pkgs in clearing[:8])
    more = f" (and {len(clearing) - 8} more task(s))" if len(clearing) > 8 else ""
    where = ", ".join(phones)
    raise ClearRefused(
        f"setup.clear would run `pm clear` on {where} (a phone, not an emulator or the simulated phone), "
        f"erasing the app data and logging the owner out of: {shown}{more}. Nothing was run. Use setup.stop "
        f"to only force-stop the apps, or pass --allow-clear if erasing their data is what you want")
