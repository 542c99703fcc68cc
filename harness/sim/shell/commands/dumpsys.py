"""``dumpsys`` and its services (window, activity, display, SurfaceFlinger, input_method, battery,
power, package, crate_sim), in Android 14's formats, or in a profile's (``harness.sim.profile``:
what the profile's phone answered, with the app in front filled in). What changes while the phone
is used (the screen's power and lock state, the battery, packages, input methods) is always the
phone's own."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

from harness.sim.shell.context import Ctx, hexid, pid_for
from harness.sim.shell.table import command

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI


DUMPSYS_SERVICES = [
    "activity", "battery", "clipboard", "crate_sim", "display", "input", "input_method", "package",
    "power", "settings", "SurfaceFlinger", "statusbar", "window",
]


def _window(c: Ctx, rest: list[str]) -> None:
    shell = c.shell
    pkg, act = shell.focus()
    w, h = shell.phone.size
    win = f"Window{{{hexid('w', pkg, act)} u0 {pkg}/{act}}}" if pkg else "null"
    rec = f"ActivityRecord{{{hexid('a', pkg, act)} u0 {pkg}/{act} t{pid_for(pkg) % 100 + 10}}}" if pkg else "null"
    if not rest or rest[0] in ("windows", "w", "all", "-a"):
        c.line("WINDOW MANAGER WINDOWS (dumpsys window windows)")
        if pkg:
            c.line(f"  Window #0 {win}:")
            c.line(f"    mDisplayId=0 rootTaskId=1 mSession=Session{{{hexid('s', pkg)} {pid_for(pkg)}:u0a10123}} mClient=android.os.BinderProxy@{hexid('b', pkg)}")
            c.line(f"    mOwnerUid=10123 showForAllUsers=false package={pkg} appop=NONE")
            c.line("    mAttrs={(0,0)(fillxfill) sim={adjust=pan} ty=BASE_APPLICATION fmt=TRANSLUCENT}")
            c.line("    mHasSurface=true isReadyForDisplay()=true mWindowRemovalAllowed=false")
            c.line(f"    Frames: parent=[0,0][{w},{h}] display=[0,0][{w},{h}] frame=[0,0][{w},{h}]")
            c.line("    isOnScreen=true")
            c.line("    isVisible=true")
        c.line("")
        c.line(f"  mGlobalConfiguration={{1.0 ?mcc?mnc [en_US] ldltr sw{w * 160 // shell.phone.density}dp {shell.phone.density}dpi nrml long port finger -keyb/v/h -nav/h}}")
        c.line("  mHasPermanentDpad=false")
        c.line("  mTopFocusedDisplayId=0")
        c.line(f"  mCurrentFocus={win}")
        c.line(f"  mFocusedApp={rec}")
        return
    if rest[0] in ("displays", "d"):
        c.line("WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)")
        c.line("  Display: mDisplayId=0 rootTasks=1")
        c.line(f"    init={w}x{h} {shell.phone.density}dpi cur={w}x{h} app={w}x{h} rng={w}x{w}-{h}x{h}")
        c.line(f"    mCurrentFocus={win}")
        c.line(f"    mFocusedApp={rec}")
        return
    if rest[0] == "policy":
        _window_policy(c)
        return
    c.line(f"  mCurrentFocus={win}")
    c.line(f"  mFocusedApp={rec}")


def _keyguard(phone: PhoneAPI) -> tuple[bool, bool, bool, str]:
    """(awake, lock screen showing, secure, lock mode) of the phone (a phone without a
    keyguard model is awake and unlocked)."""
    kg = getattr(phone, "keyguard", None)
    if kg is None:
        return True, False, False, "none"
    return kg.awake, kg.showing, kg.secure, kg.mode


def _window_policy(c: Ctx) -> None:
    """PhoneWindowManager's dump with its KeyguardServiceDelegate and KeyguardStateMonitor
    blocks (field names as KeyguardServiceDelegate.dump and KeyguardStateMonitor.dump print them)."""
    awake, showing, secure, mode = _keyguard(c.shell.phone)
    on = "true" if awake else "false"
    c.line("WINDOW MANAGER POLICY STATE (dumpsys window policy)")
    c.line("    mSafeMode=false mSystemReady=true mSystemBooted=true")
    c.line(f"    mKeyguardDrawComplete=true mWindowManagerDrawComplete={on}")
    c.line(f"    mScreenOnEarly={on} mScreenOnFully={on}")
    c.line("    KeyguardServiceDelegate")
    c.line(f"      showing={str(showing).lower()}")
    c.line(f"      inputRestricted={str(showing).lower()}")
    c.line("      occluded=false")
    c.line(f"      secure={str(secure).lower()}")
    c.line("      dreaming=false")
    c.line("      systemIsReady=true")
    c.line(f"      deviceHasKeyguard={str(mode != 'none').lower()}")
    c.line("      enabled=true")
    c.line("      offReason=OFF_BECAUSE_OF_USER")
    c.line("      currentUser=0")
    c.line("      bootCompleted=true")
    c.line(f"      screenState={'SCREEN_STATE_ON' if awake else 'SCREEN_STATE_OFF'}")
    c.line(f"      interactiveState={'INTERACTIVE_STATE_AWAKE' if awake else 'INTERACTIVE_STATE_SLEEP'}")
    c.line("      KeyguardStateMonitor")
    c.line(f"        mIsShowing={str(showing).lower()}")
    c.line("        mSimSecure=false")
    c.line(f"        mInputRestricted={str(showing).lower()}")
    c.line("        mTrusted=false")
    c.line("        mCurrentUserId=0")


def _activity(c: Ctx, rest: list[str]) -> None:
    shell = c.shell
    pkg, act = shell.focus()
    rec = f"ActivityRecord{{{hexid('a', pkg, act)} u0 {pkg}/{act} t{pid_for(pkg) % 100 + 10}}}"
    sub = rest[0] if rest else ""
    if sub in ("top",):
        c.line("TASK 10123:" + pkg + f" id={pid_for(pkg) % 100 + 10} userId=0")
        c.line(f"  ACTIVITY {pkg}/{act} {hexid('a', pkg, act)} pid={pid_for(pkg)}")
        return
    if sub in ("", "activities", "a", "recents", "r"):
        c.line("ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)")
        c.line("Display #0 (activities from top to bottom):")
        if pkg:
            c.line(f"  * Task{{{hexid('t', pkg)} #{pid_for(pkg) % 100 + 10} type=standard A=10123:{pkg}}}")
            c.line(f"    * Hist  #0: {rec}")
            c.line(f"  mResumedActivity: {rec}")
            c.line(f"  ResumedActivity: {rec}")
            c.line(f"  mFocusedApp={rec}")
        return
    if sub in ("processes", "p"):
        for p, pid in sorted(shell.running_packages().items()):
            c.line(f"  *APP* UID 10123 ProcessRecord{{{hexid('p', p)} {pid}:{p}/u0a123}}")
        return
    if sub == "broadcasts":
        c.line("ACTIVITY MANAGER BROADCAST STATE (dumpsys activity broadcasts)")
        return


def _display(c: Ctx, rest: list[str]) -> None:
    shell = c.shell
    w, h = shell.phone.size
    d = shell.phone.density
    rot = int(getattr(shell.phone, "rotation", 0) or 0)
    uid = f"local:{shell.persona.display_id}"
    c.line("DISPLAY MANAGER (dumpsys display)")
    c.line("  mOnlyCore=false")
    c.line("  mSafeMode=false")
    c.line("  mPendingTraversal=false")
    c.line(
        f"  mViewports=[DisplayViewport{{type=INTERNAL, valid=true, isActive=true, displayId=0, uniqueId='{uid}', "
        f"physicalPort=0, orientation={rot}, logicalFrame=Rect(0, 0 - {w}, {h}), physicalFrame=Rect(0, 0 - {w}, {h}), "
        f"deviceWidth={w}, deviceHeight={h}}}]"
    )
    c.line("  mDefaultDisplayDefaultColorMode=0")
    c.line("")
    c.line("Display Devices: size=1")
    c.line(
        f'  DisplayDeviceInfo{{"Built-in Screen": uniqueId="{uid}", {w} x {h}, modeId 1, renderFrameRate 60.0, '
        f"defaultModeId 1, supportedModes [{{id=1, width={w}, height={h}, fps=60.0}}], density {d}, {float(d)} x {float(d)} dpi, "
        f"appVsyncOff 1000000, presDeadline 16666666, touch INTERNAL, rotation {rot}, type INTERNAL, address {{port=0}}, "
        f"state ON, committedState ON, FLAG_ALLOWED_TO_BE_DEFAULT_DISPLAY, FLAG_ROTATES_WITH_CONTENT, FLAG_SECURE}}"
    )
    c.line("")
    c.line("Logical Displays: size=1")
    c.line("  Display 0:")
    c.line("    mDisplayId=0")
    c.line(
        f'    mBaseDisplayInfo=DisplayInfo{{"Built-in Screen", displayId 0, displayGroupId 0, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS, '
        f"real {w} x {h}, largest app {w} x {h}, smallest app {w} x {h}, appVsyncOff 1000000, rotation {rot}, "
        f"density {d} ({float(d)} x {float(d)}) dpi, state ON, type INTERNAL, uniqueId \"{uid}\"}}"
    )


def _surface_flinger(c: Ctx, rest: list[str]) -> None:
    c.line(f'Display {c.shell.persona.display_id} (HWC display 0): port=0 pnpId=GGL displayName="Built-in Screen"')


def _input_method(c: Ctx, rest: list[str]) -> None:
    phone = c.shell.phone
    c.line("Current Input Method Manager state:")
    for ime in phone.ime_list():
        c.line(f"  InputMethod #{ime}")
    c.line(f"  mCurMethodId={phone.ime_current()}")
    c.line("  mInputShown=false")


def _battery(c: Ctx, rest: list[str]) -> None:
    c.write(
        "Current Battery Service state:\n  AC powered: false\n  USB powered: true\n  Wireless powered: false\n"
        "  Dock powered: false\n  Max charging current: 500000\n  Max charging voltage: 5000000\n"
        "  Charge counter: 4000000\n  status: 2\n  health: 2\n  present: true\n  level: 100\n  scale: 100\n"
        "  voltage: 4200\n  temperature: 250\n  technology: Li-ion\n"
    )


def _power(c: Ctx, rest: list[str]) -> None:
    shell = c.shell
    awake = _keyguard(shell.phone)[0]
    stay_on = shell.settings["global"].get("stay_on_while_plugged_in", "0")
    c.write("POWER MANAGER (dumpsys power)\n\nPower Manager State:\n"
            f"  mWakefulness={'Awake' if awake else 'Asleep'}\n"
            f"  mWakefulnessChanging=false\n  mIsPowered=true\n  mPlugType=2\n"
            f"  mStayOn={'true' if stay_on not in ('0', '') else 'false'}\n"
            f"  mHoldingWakeLockSuspendBlocker=false\n  mHoldingDisplaySuspendBlocker={str(awake).lower()}\n"
            f"Settings and Configuration:\n  mStayOnWhilePluggedInSetting={stay_on}\n"
            f"Display Power: state={'ON' if awake else 'OFF'}\n")


def dump_package(c: Ctx, rest: list[str]) -> None:
    names = [a for a in rest if not a.startswith("-")]
    installed = set(c.shell.phone.packages())
    for pkg in names:
        if pkg not in installed:
            c.line(f"Unable to find package: {pkg}")
            continue
        h = hexid("pkg", pkg)
        c.line("Packages:")
        c.line(f"  Package [{pkg}] ({h}):")
        c.line("    userId=10123")
        c.line(f"    pkg=Package{{{h} {pkg}}}")
        c.line(f"    codePath=/data/app/{pkg}-1")
        c.line("    versionCode=1 minSdk=24 targetSdk=34")
        c.line("    versionName=1.0")
        c.line("    signatures=PackageSignatures{" + hexid("sig", pkg) + " version:3, signatures:[" + hexid("cert", pkg) + "], past signatures:[]}")
        c.line("    pkgFlags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ALLOW_BACKUP ]")
        c.line("    firstInstallTime=2024-01-01 00:00:00")
        c.line("    lastUpdateTime=2024-01-01 00:00:00")


# answered by the phone's own state even when it has a profile: they say what the phone is doing now
LIVE = ("power", "battery", "package", "input_method", "crate_sim", "window policy")

_DUMPERS: dict[str, Callable[[Ctx, list[str]], None]] = {
    "window": _window, "activity": _activity, "display": _display, "SurfaceFlinger": _surface_flinger,
    "input_method": _input_method, "battery": _battery, "power": _power, "package": dump_package,
}


@command("dumpsys")
def dumpsys(c: Ctx) -> int:
    shell = c.shell
    args = c.argv[1:]
    services = [x for x in DUMPSYS_SERVICES if x != "crate_sim" or shell.persona.sim_services]
    if not args or args[0] == "-l":
        c.line("Currently running services:")
        for s in services:
            c.line(f"  {s}")
        return 0
    service, rest = args[0], args[1:]
    profile = shell.profile
    if profile is not None and service not in LIVE and " ".join(args[:2]) not in LIVE:
        kg = getattr(shell.phone, "keyguard", None)
        data = profile.dumpsys(" ".join(["dumpsys", *args]), shell.focus(), bool(kg and kg.showing))
        if data is not None:
            c.write(data)
            return 0
    fn = _DUMPERS.get(service.replace(".", "_"))
    if service == "crate_sim" and shell.persona.sim_services:
        c.line(json.dumps(shell.phone.state_json(), ensure_ascii=False))
        return 0
    if fn is None:
        if service in services:
            return 0
        c.error(f"Can't find service: {service}")
        return 0
    fn(c, rest)
    return 0
