"""The package manager: ``pm`` (list packages, path, clear, install, uninstall, dump)."""

from __future__ import annotations

from harness.sim.shell.commands.dumpsys import dump_package
from harness.sim.shell.context import CommandError, Ctx, hexid
from harness.sim.shell.table import command


@command("pm")
def pm(c: Ctx) -> int:
    shell = c.shell
    args = c.argv[1:]
    if not args:
        c.line("Package manager (package) commands:\n  list packages [-3] [-s] [-f] [FILTER]\n  path PACKAGE\n  clear PACKAGE")
        return 0
    sub, rest = args[0], args[1:]
    installed = sorted(set(shell.phone.packages()))
    if sub == "list":
        what = rest[0] if rest else ""
        if what not in ("packages", "package"):
            if what in ("features", "permissions", "users", "libraries", "instrumentation", "permission-groups"):
                if what == "users":
                    c.line("Users:\n\tUserInfo{0:Owner:c13} running")
                return 0
            raise CommandError(f"Error: unknown list type '{what}'")
        flags = [a for a in rest[1:] if a.startswith("-")]
        filt = [a for a in rest[1:] if not a.startswith("-")]
        system = {p for p in installed if p.startswith(("android", "com.android.", "com.google.android."))}
        chosen = installed
        if "-3" in flags:
            chosen = [p for p in chosen if p not in system]
        if "-s" in flags:
            chosen = [p for p in chosen if p in system]
        if filt and filt[0] not in ("--user",):
            chosen = [p for p in chosen if filt[-1] in p]
        for p in chosen:
            c.line(f"package:/data/app/{p}-1/base.apk={p}" if "-f" in flags else f"package:{p}")
        return 0
    if sub == "path":
        pkg = next((a for a in rest if not a.startswith("-")), "")
        if pkg not in installed:
            return 1
        c.line(f"package:/data/app/~~{hexid('path', pkg)}==/{pkg}-{hexid('p2', pkg)}==/base.apk")
        return 0
    if sub == "clear":
        pkg = next((a for a in rest if not a.startswith("-") and not a.isdigit()), "")
        ok = bool(pkg) and shell.phone.clear_data(pkg)
        if ok:
            shell.mark_running(pkg, False)
        c.line("Success" if ok else "Failed")
        return 0 if ok else 1
    if sub == "install" or sub == "install-create":
        paths = [a for a in rest if not a.startswith("-")]
        shell.installs.extend(paths)
        install = getattr(shell.phone, "install_apk", None)
        if callable(install) and paths:
            ok = install(c.path(paths[-1]))
            c.line("Success" if ok else "Failure [INSTALL_FAILED_INVALID_APK]")
            return 0 if ok else 1
        c.line("Failure [INSTALL_FAILED_INVALID_APK: " + (shell.sim_note("the simulated phone cannot install APKs")
                                                         or "Failed to parse APK") + "]")
        return 1
    if sub == "uninstall":
        pkg = next((a for a in rest if not a.startswith("-")), "")
        uninstall = getattr(shell.phone, "uninstall", None)
        if callable(uninstall) and uninstall(pkg):
            c.line("Success")
            return 0
        c.line("Failure [DELETE_FAILED_INTERNAL_ERROR]")
        return 1
    if sub in ("grant", "revoke", "disable-user", "enable", "hide", "unhide", "set-home-activity", "trim-caches"):
        return 0
    if sub == "dump":
        dump_package(c, rest)
        return 0
    if sub in ("query-activities", "query-intent-activities"):
        return _query_activities(c, rest)
    c.error(f"Unknown command: {sub}")
    return 1


MAIN, LAUNCHER_CATEGORY, HOME = "android.intent.action.MAIN", "android.intent.category.LAUNCHER", "android.intent.category.HOME"


def _activities(c: Ctx, action: str, categories: list[str]) -> list[tuple[str, str]]:
    """(package, activity class) of the activities an intent of ``action`` and ``categories`` resolves
    to: the apps' own for MAIN + LAUNCHER (what a launcher, and mobile-mcp's app list, ask), the
    launcher's for MAIN + HOME, none for other intents (the phone's apps declare no others)."""
    apps = getattr(c.shell.phone, "apps", None) or {}
    if action == MAIN and categories == [LAUNCHER_CATEGORY]:
        out = []
        for pkg in sorted(apps):
            act = getattr(apps[pkg], "activity", ".MainActivity")
            out.append((pkg, pkg + act if act.startswith(".") else act))
        return out
    if action == MAIN and categories == [HOME]:
        return [("com.android.launcher3", "com.android.launcher3.uioverrides.QuickstepLauncher")]
    return []


def _query_activities(c: Ctx, rest: list[str]) -> int:
    """``cmd package query-activities [--brief] [--components] -a ACTION -c CATEGORY``, printed as
    PackageManagerShellCommand.runQueryIntentActivities prints it: "N activities found:", then per
    activity "  Activity #i:" and ResolveInfo.dump (its match line, then ActivityInfo with the
    activity's name, packageName and flags, and its ApplicationInfo); ``--components`` prints only
    each package/class."""
    action, categories, brief, components = "", [], False, False
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "-a" and i + 1 < len(rest):
            action, i = rest[i + 1], i + 2
            continue
        if a == "-c" and i + 1 < len(rest):
            categories.append(rest[i + 1])
            i += 2
            continue
        brief |= a == "--brief"
        components |= a == "--components"
        i += 2 if a in ("--user", "-d", "-t", "-n", "-p") else 1
    found = _activities(c, action, categories)
    if not found:
        c.line("No activities found")
        return 0
    if components:
        for pkg, act in found:
            c.line(f"{pkg}/{act[len(pkg):] if act.startswith(pkg + '.') else act}")
        return 0
    c.line(f"{len(found)} activities found:")
    for k, (pkg, act) in enumerate(found):
        c.line(f"  Activity #{k}:")
        c.line("    priority=0 preferredOrder=0 match=0x108000 specificIndex=-1 isDefault=false")
        if brief:
            c.line(f"    {pkg}/{act}")
            continue
        c.line("    ActivityInfo:")
        c.line(f"      name={act}")
        c.line(f"      packageName={pkg}")
        c.line("      enabled=true exported=true directBootAware=false")
        c.line(f"      taskAffinity={pkg} targetActivity=null persistableMode=PERSIST_ROOT_ONLY")
        c.line("      launchMode=0 flags=0x3 privateFlags=0x0 theme=0x0")
        c.line("      screenOrientation=-1 configChanges=0x0 softInputMode=0x0")
        c.line("      lockTaskLaunchMode=LOCK_TASK_LAUNCH_MODE_DEFAULT")
        c.line("      resizeMode=RESIZE_MODE_RESIZEABLE")
        c.line("      ApplicationInfo:")
        c.line(f"        packageName={pkg}")
        c.line(f"        processName={pkg}")
        c.line("        enabled=true minSdkVersion=24 targetSdkVersion=34")
    return 0
