"""Settings and properties: ``settings``, ``getprop``/``setprop``, ``ime``, ``svc``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.sim.shell.context import CommandError, Ctx, ShellState
from harness.sim.shell.table import command

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI


def all_props(shell: ShellState) -> dict[str, str]:
    """What ``getprop`` lists: the build's properties, then the persona's, the phone's own and ``setprop``'s."""
    info = shell.phone.info
    persona = shell.persona
    props = {
        "ro.product.name": info.product,
        "ro.product.model": info.model,
        "ro.product.device": info.device,
        "ro.product.brand": persona.brand if info.manufacturer == persona.manufacturer else info.manufacturer,
        "ro.product.manufacturer": info.manufacturer,
        "ro.product.board": info.device,
        "ro.build.version.sdk": str(info.sdk),
        "ro.build.version.release": info.release,
        "ro.build.version.release_or_codename": info.release,
        "ro.build.type": "user",
        "ro.build.tags": "release-keys",
        "ro.build.characteristics": "default",
        "ro.build.fingerprint": f"{info.manufacturer}/{info.product}/{info.device}:{info.release}/CRATE.SIM/1:user/release-keys",
        "ro.serialno": info.serial,
        "ro.boot.serialno": info.serial,
        "ro.debuggable": "0",
        "ro.secure": "1",
        "ro.sf.lcd_density": str(shell.phone.density),
        "sys.boot_completed": "1",
        "dev.bootcomplete": "1",
        "init.svc.adbd": "running",
        "persist.sys.locale": "en-US",
        "persist.sys.timezone": "UTC",
        "service.adb.root": "0",
    }
    props.update(persona.props)
    if persona.sim_services:
        w, h = shell.phone.size
        props["ro.crate.screen"] = f"{w}x{h}"
    props.update(info.props)
    props.update(shell.props)
    return props


def _enabled_imes(phone: PhoneAPI) -> list[str]:
    enabled = getattr(phone, "ime_enabled", None)
    return enabled() if callable(enabled) else phone.ime_list()


@command("settings")
def settings(c: Ctx) -> int:
    shell = c.shell
    args = [a for a in c.argv[1:]]
    while args and args[0] in ("--user", "--lineage"):
        args = args[2:] if args[0] == "--user" else args[1:]
    if len(args) < 2:
        c.line("Settings provider (settings) commands:\n  get NAMESPACE KEY\n  put NAMESPACE KEY VALUE\n  delete NAMESPACE KEY\n  list NAMESPACE")
        return 0 if not args else 255
    verb, ns = args[0], args[1]
    if ns not in shell.settings:
        raise CommandError(f"Invalid namespace '{ns}'", 255)
    store = shell.settings[ns]
    if verb == "get" and len(args) >= 3:
        key = args[2]
        if ns == "secure" and key == "default_input_method":
            c.line(shell.phone.ime_current() or "null")
        elif ns == "secure" and key == "enabled_input_methods":
            c.line(":".join(_enabled_imes(shell.phone)) or "null")
        else:
            c.line(store.get(key, "null"))
        return 0
    if verb == "put" and len(args) >= 4:
        key, value = args[2], args[3]
        if ns == "secure" and key == "default_input_method":
            shell.phone.ime_set(value)
        else:
            store[key] = value
        return 0
    if verb == "delete" and len(args) >= 3:
        c.line("Deleted 1 rows" if store.pop(args[2], None) is not None else "Deleted 0 rows")
        return 0
    if verb == "list":
        for k in sorted(store):
            c.line(f"{k}={store[k]}")
        if ns == "secure":
            c.line(f"default_input_method={shell.phone.ime_current()}")
        return 0
    raise CommandError(f"Invalid command: {' '.join(args)}", 255)


def _own_props(shell: ShellState) -> dict[str, str]:
    """What a phone with a profile adds to the profile's properties: the simulated phone's marker
    (unless it plays a retail phone) and setprop's."""
    extra = {}
    if shell.persona.sim_services:
        extra.update({k: v for k, v in shell.persona.props.items() if k.startswith("ro.crate.")})
        w, h = shell.phone.size
        extra["ro.crate.screen"] = f"{w}x{h}"
    extra.update(shell.props)
    return extra


@command("getprop")
def getprop(c: Ctx) -> int:
    profile = c.shell.profile
    names = [a for a in c.argv[1:] if not a.startswith("-")]
    if profile is not None:
        serial, extra = c.shell.phone.info.serial, _own_props(c.shell)
        if not names:
            c.write(profile.getprop(serial, extra))
            return 0
        value = profile.getprop_value(names[0], serial, extra)
        c.line(value if value is not None else (names[1] if len(names) > 1 else ""))
        return 0
    props = all_props(c.shell)
    if not names:
        for k in sorted(props):
            c.line(f"[{k}]: [{props[k]}]")
        return 0
    value = props.get(names[0], names[1] if len(names) > 1 else "")
    c.line(value)
    return 0


@command("setprop")
def setprop(c: Ctx) -> int:
    shell = c.shell
    if len(c.argv) != 3:
        raise CommandError("setprop: need 2 arguments")
    name = c.argv[1]
    if name.startswith("ro.") and name in all_props(shell):
        raise CommandError(f"Failed to set property '{name}' to '{c.argv[2]}'.")
    shell.props[name] = c.argv[2]
    return 0


@command("ime")
def ime(c: Ctx) -> int:
    """``ime list [-a] [-s]``: the enabled input methods (``-a``: every installed one);
    ``enable``/``disable``/``set ID`` (set needs an enabled IME, as InputMethodManagerService)."""
    phone = c.shell.phone
    args = c.argv[1:]
    sub, rest = (args[0], args[1:]) if args else ("", [])
    imes = phone.ime_list()
    profile = c.shell.profile
    if sub == "list" and "-s" not in rest and profile is not None and profile.answer(" ".join(c.argv)) is not None:
        c.write(profile.answer(" ".join(c.argv)))  # the long form, as the profile's phone printed it
        return 0
    if sub == "list":
        shown = imes if "-a" in rest else [i for i in imes if i in _enabled_imes(phone)]
        if "-s" in rest:
            for ime in shown:
                c.line(ime)
        else:
            for ime in shown:
                pkg, _, svc = ime.partition("/")
                c.line(f"{ime}:")
                c.line(f"  mId={ime} mSettingsActivityName=null")
                c.line(f"  Service:\n    ServiceInfo:\n      name={svc} packageName={pkg}")
        return 0
    toggle = getattr(phone, "ime_enable", None)
    if sub in ("set", "enable", "disable"):
        ime = rest[-1] if rest else ""
        if ime not in imes:
            verb = {"set": "selected", "enable": "enabled", "disable": "disabled"}[sub]
            c.error(f"Unknown input method {ime} cannot be {verb} for user #0")
            return 255
        was = ime in _enabled_imes(phone)
        if sub == "set":
            if not phone.ime_set(ime):
                c.error(f"Unknown input method {ime} cannot be selected for user #0")
                return 255
            c.line(f"Input method {ime} selected for user #0")
        elif sub == "enable":
            if callable(toggle):
                toggle(ime, True)
            c.line(f"Input method {ime}: {'already enabled' if was else 'now enabled'} for user #0")
        else:
            if callable(toggle):
                toggle(ime, False)
            c.line(f"Input method {ime}: {'now disabled' if was else 'already disabled'} for user #0")
        return 0
    if sub == "reset":
        return 0
    c.line("ime <command>:\n  list [-a] [-s]\n  enable ID\n  disable ID\n  set ID\n  reset")
    return 0 if not sub else 255


@command("svc")
def svc(c: Ctx) -> int:
    args = c.argv[1:]
    if args[:2] == ["power", "stayon"] and len(args) > 2:
        # PowerCommand: true = AC|USB|wireless, false = 0, or one source (BatteryManager.BATTERY_PLUGGED_*)
        value = {"true": "7", "false": "0", "ac": "1", "usb": "2", "wireless": "4"}.get(args[2])
        if value is None:
            c.error("Usage: svc power stayon [true|false|usb|ac|wireless]")
            return 1
        c.shell.settings["global"]["stay_on_while_plugged_in"] = value
    return 0
