"""The activity manager: ``am`` (start, force-stop, broadcast, stack...), ``monkey``, and intent
arguments as Intent.parseCommandArgs reads them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from harness.core.intent_args import IntentArgsError, parse_intent_args
from harness.sim.shell.context import CommandError, Ctx, pid_for
from harness.sim.shell.table import command


@dataclass
class Intent:
    action: str = ""
    data: str = ""
    component: str = ""
    package: str = ""
    activity: str = ""
    categories: list[str] = field(default_factory=list)
    extras: dict[str, str | int | bool] = field(default_factory=dict)
    flags: int = 0
    wait: bool = False
    stop_first: bool = False

    def describe(self) -> str:
        parts = []
        if self.action:
            parts.append(f"act={self.action}")
        if self.categories:
            parts.append("cat=[" + ",".join(self.categories) + "]")
        if self.data:
            parts.append(f"dat={self.data}")
        if self.flags:
            parts.append(f"flg=0x{self.flags:x}")
        if self.package and not self.component:
            parts.append(f"pkg={self.package}")
        if self.component:
            parts.append(f"cmp={self.component}")
        if self.extras:
            parts.append("(has extras)")
        return "Intent { " + " ".join(parts) + " }"


def _parse_intent(args: list[str]) -> Intent:
    """``am start``/``am broadcast`` intent arguments (Intent.parseCommandArgs, harness.core.intent_args),
    the extras typed as their flags say."""
    try:
        parsed = parse_intent_args(args)
    except IntentArgsError as e:
        raise CommandError(str(e), 255) from None
    it = Intent(action=parsed.action, data=parsed.data, component=parsed.component, package=parsed.package,
                categories=list(parsed.categories), flags=parsed.flags, wait=parsed.wait, stop_first=parsed.stop_first)
    for flag, k, v in parsed.extras:
        if flag in ("--ei", "--el"):
            try:
                it.extras[k] = int(v)
            except ValueError:
                raise CommandError(f"Error: invalid integer for '{k}': {v}", 255) from None
        elif flag == "--ez":
            it.extras[k] = v.lower() in ("true", "t", "1", "yes")
        else:
            it.extras[k] = v
    if it.component:
        it.activity = it.component.partition("/")[2]
    return it


def _am_start(c: Ctx, rest: list[str]) -> int:
    shell = c.shell
    intent = _parse_intent(rest)
    c.line(f"Starting: {intent.describe()}")
    pkg, act = intent.package, intent.activity
    if intent.component:
        pkg, _, act = intent.component.partition("/")
        if act.startswith("."):
            act = pkg + act  # ComponentName.unflattenFromString expands ".Act"
    if not pkg:
        start_intent = getattr(shell.phone, "start_intent", None)
        if callable(start_intent) and start_intent(intent.action, intent.data, intent.extras):
            return 0
        c.error(f"Error: Activity not started, unable to resolve {intent.describe()}")
        return 1
    if intent.stop_first:
        shell.phone.force_stop(pkg)
    t0 = time.monotonic()
    if not shell.phone.launch(pkg, act or None):
        if pkg in set(shell.phone.packages()):
            c.error(f"Error type 3\nError: Activity class {{{pkg}/{act}}} does not exist.")
        else:
            c.error(f"Error: Activity not started, unable to resolve {intent.describe()}")
        return 1
    shell.mark_running(pkg, True)
    if intent.wait:
        ms = max(1, int((time.monotonic() - t0) * 1000))
        fpkg, fact = shell.focus()
        c.line("Status: ok")
        c.line("LaunchState: COLD")
        c.line(f"Activity: {fpkg}/{fact}")
        c.line(f"TotalTime: {ms}")
        c.line(f"WaitTime: {ms + 2}")
        c.line("Complete")
    return 0


@command("am")
def am(c: Ctx) -> int:
    shell = c.shell
    args = c.argv[1:]
    if not args:
        c.line("Activity manager (activity) commands:\n  start [-W] [-S] <INTENT>\n  force-stop <PACKAGE>\n  broadcast <INTENT>")
        return 0
    sub, rest = args[0], args[1:]
    if sub in ("start", "start-activity"):
        return _am_start(c, rest)
    if sub in ("force-stop", "kill", "stop-app"):
        pkgs = [a for a in rest if not a.startswith("-") and not a.isdigit()]
        if not pkgs:
            raise CommandError(f"Error: no package specified for {sub}", 255)
        for pkg in pkgs:
            if sub == "force-stop" or sub == "stop-app":
                shell.phone.force_stop(pkg)
            shell.mark_running(pkg, False)
        return 0
    if sub == "broadcast":
        intent = _parse_intent(rest)
        intent.flags |= 0x400000  # what `am broadcast` prints for every broadcast on Android 14
        if not intent.action:
            raise CommandError("Error: broadcast needs an action (-a)", 255)
        c.line(f"Broadcasting: {intent.describe()}")
        result = shell.phone.broadcast(intent.action, intent.extras)
        c.line(result or "Broadcast completed: result=0")
        return 0
    if sub == "get-current-user":
        c.line("0")
        return 0
    if sub == "stack" or sub == "task":
        pkg, act = shell.focus()
        c.line(f"RootTask id={pid_for(pkg) % 100 + 10} bounds=[0,0][{shell.phone.size[0]},{shell.phone.size[1]}] displayId=0 userId=0")
        c.line(f"  taskId={pid_for(pkg) % 100 + 10}: {pkg}/{act} visible=true topActivity=ComponentInfo{{{pkg}/{act}}}")
        return 0
    if sub in ("instrument", "startservice", "start-service", "start-foreground-service", "stopservice"):
        c.error(f"Error: '{sub}' is not supported" + shell.sim_note(" by the simulated phone"))
        return 1
    c.error(f"Error: Unknown command: {sub}")
    return 255


@command("monkey")
def monkey(c: Ctx) -> int:
    shell = c.shell
    args = c.argv[1:]
    pkgs = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-p"]
    if not pkgs:
        c.error("** Error: no packages specified" + shell.sim_note(" (monkey needs -p PKG on the simulated phone)"))
        return 1
    t0 = time.monotonic()
    c.line(f"  bash arg: {' '.join(args)}")
    if not shell.phone.launch(pkgs[0], None):
        c.line("** No activities found to run, monkey aborted.")
        return 252
    shell.mark_running(pkgs[0], True)
    ms = int((time.monotonic() - t0) * 1000)
    c.line("Events injected: 1")
    c.line(f"## Network stats: elapsed time={ms}ms (0ms mobile, 0ms wifi, {ms}ms not connected)")
    return 0
