"""Processes and the system: ps, pidof, pgrep, pkill, killall, kill, app_process (the
uiautomator2 server), cmd, reboot, su, id, whoami, uname, date, log, logcat."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import datetime

from harness.sim.fs import normpath
from harness.sim.shell.commands.dumpsys import DUMPSYS_SERVICES
from harness.sim.shell.context import SH, Ctx, ShellState, to_int
from harness.sim.shell.table import command


_U2_CLASSES = {"com.wetest.uia2.Main", "com.github.uiautomator.stub.Main"}


def _processes(shell: ShellState) -> list[tuple[str, int, str]]:
    procs = [
        ("root", 1, "init"),
        ("root", 345, "zygote64"),
        ("system", 612, "system_server"),
        ("u0_a55", 933, "com.android.systemui"),
        ("shell", 4242, "sh"),
    ]
    if shell.u2 is not None and shell.u2.running_ports():
        procs.append(("shell", 4300, "app_process"))
    for pkg, pid in sorted(shell.running_packages().items()):
        procs.append(("u0_a123", pid, pkg))
    return procs


def _kill(shell: ShellState, names: list[str]) -> int:
    hit = False
    for name in names:
        if name == "app_process" and shell.u2 is not None:
            for port in shell.u2.running_ports():
                shell.u2.stop(port)
            hit = True
        elif name in shell.running_packages():
            shell.phone.force_stop(name)
            shell.mark_running(name, False)
            hit = True
    return 0 if hit else 1


@command("ps")
def ps(c: Ctx) -> int:
    c.line("USER            PID   PPID     VSZ    RSS WCHAN            ADDR S NAME                       ")
    for user, pid, name in _processes(c.shell):
        c.line(f"{user:<12}{pid:>7}{1 if pid > 1 else 0:>7} {12345678:>10} {123456:>6} 0                   0 S {name}")
    return 0


@command("pidof")
def pidof(c: Ctx) -> int:
    names = set(c.argv[1:])
    pids = [str(pid) for _, pid, name in _processes(c.shell) if name in names]
    if pids:
        c.line(" ".join(pids))
        return 0
    return 1


@command("pgrep")
def pgrep(c: Ctx) -> int:
    pats = [a for a in c.argv[1:] if not a.startswith("-")]
    pids = [str(pid) for _, pid, name in _processes(c.shell) if any(re.search(p, name) for p in pats)]
    for p in pids:
        c.line(p)
    return 0 if pids else 1


@command("pkill")
def pkill(c: Ctx) -> int:
    shell = c.shell
    pats = [a for a in c.argv[1:] if not a.startswith("-")]
    return _kill(shell, [name for _, _, name in _processes(shell) if any(re.search(p, name) for p in pats)])


@command("killall")
def killall(c: Ctx) -> int:
    return _kill(c.shell, [a for a in c.argv[1:] if not a.startswith("-")])


@command("kill")
def kill(c: Ctx) -> int:
    shell = c.shell
    pids = {a for a in c.argv[1:] if a.isdigit()}
    return _kill(shell, [name for _, pid, name in _processes(shell) if str(pid) in pids])


@command("app_process", "app_process64", "app_process32")
def app_process(c: Ctx) -> int:
    """``CLASSPATH=... app_process [-D...] DIR CLASS [ARGS]``. Only the uiautomator2 server
    class runs: it marks the device-side HTTP server (``tcp:PORT``) alive until the stream
    that started it closes, exactly like the real jar whose lifetime is its adb shell."""
    shell = c.shell
    args = c.argv[1:]
    while args and args[0].startswith("-"):
        args = args[1:]
    if len(args) < 2:
        c.error("Usage: app_process [java-options] cmd-dir start-class-name [options]")
        return 1
    cls, cargs = args[1], args[2:]
    classpath = [p for p in c.env.get("CLASSPATH", "").split(":") if p]
    if not any(shell.phone.fs.read(normpath(p)) is not None for p in classpath) or shell.u2 is None or cls not in _U2_CLASSES:
        c.write(f'Exception in thread "main" java.lang.ClassNotFoundException: {cls}\n')
        return 1
    port = 9008
    for i, a in enumerate(cargs[:-1]):
        if a in ("-p", "--port"):
            port = to_int(cargs[i + 1], "port")
    token = shell.u2.start(port)
    if token is None:
        c.write(
            "[server] INFO: [UiAutomator2Server] Starting Server\n"
            "java.lang.IllegalStateException: UiAutomationService android.accessibilityservice."
            "IAccessibilityServiceClient$Stub$Proxy@5deffd5already registered!\n"
        )
        return 1
    c.write(f"[server] INFO: [UiAutomator2Server] Starting Server\n[server] INFO: server listening on port {port}\n")
    try:
        shell.u2.wait(port, token, c.cancel)
    finally:
        shell.u2.stop(port, token)
    return 0 if not c.cancel.is_set() else 137


@command("cmd")
def cmd(c: Ctx) -> int:
    """``cmd SERVICE ARGS``: the services that have a shell command here run it (``cmd package`` is ``pm``)."""
    if len(c.argv) < 2 or c.argv[1] == "-l":
        for s in DUMPSYS_SERVICES:
            c.line(s)
        return 0
    service, rest = c.argv[1], c.argv[2:]
    mapped = {"package": "pm", "activity": "am", "input_method": "ime", "settings": "settings", "window": "wm", "input": "input"}.get(service, "")
    fn = c.shell.handler(mapped) if mapped else None
    if fn is not None:
        return fn(replace(c, argv=[mapped] + rest))
    if service in ("statusbar", "notification", "uimode", "power", "wifi", "connectivity", "clipboard", "overlay", "role"):
        return 0
    c.error(f"Can't find service: {service}")
    return 20


@command("reboot")
def reboot(c: Ctx) -> int:
    c.error("reboot: Operation not permitted" + c.shell.sim_note(" (the simulated phone cannot reboot)"))
    return 1


@command("su")
def su(c: Ctx) -> int:
    c.error(f"{SH}: su: not found")
    return 127


@command("id")
def id_(c: Ctx) -> int:
    c.line(
        "uid=2000(shell) gid=2000(shell) groups=2000(shell),1004(input),1007(log),1011(adb),"
        "1015(sdcard_rw),1028(sdcard_r),1078(ext_data_rw),1079(ext_obb_rw),3001(net_bt_admin),"
        "3002(net_bt),3003(inet),3006(net_bw_stats),3009(readproc),3011(uhid),3012(readtracefs) "
        "context=u:r:shell:s0"
    )
    return 0


@command("whoami")
def whoami(c: Ctx) -> int:
    c.line("shell")
    return 0


@command("uname")
def uname(c: Ctx) -> int:
    persona = c.shell.persona
    if "-a" in c.argv:
        c.line(f"Linux localhost {persona.kernel} #1 SMP PREEMPT {time.strftime('%a %b %d %H:%M:%S UTC %Y')} "
               f"{persona.machine} Toybox")
    elif "-m" in c.argv:
        c.line(persona.machine)
    elif "-r" in c.argv:
        c.line(persona.kernel)
    else:
        c.line("Linux")
    return 0


@command("date")
def date(c: Ctx) -> int:
    fmt = next((a[1:] for a in c.argv[1:] if a.startswith("+")), None)
    now = datetime.now()
    c.line(now.strftime(fmt) if fmt else now.strftime("%a %b %d %H:%M:%S %Z %Y").replace("  ", " "))
    return 0


@command("log")
def log(c: Ctx) -> int:
    return 0


@command("logcat")
def logcat(c: Ctx) -> int:
    if any(a in ("-d", "-c", "--clear", "-g", "-t") or a.startswith("-t") for a in c.argv[1:]):
        if "-g" in c.argv:
            c.line("main: ring buffer is 256 KiB (0 B consumed), max entry is 5120 B, max payload is 4068 B")
        return 0
    c.cancel.wait()  # a streaming logcat runs until the host closes the stream
    return 130
