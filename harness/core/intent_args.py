"""The intent arguments of ``am start``/``am broadcast``/``am startservice``, read as Android's
``Intent.parseCommandArgs`` reads them (``-a ACTION``, ``-d DATA``, ``-t TYPE``, ``-c CATEGORY``,
``-n COMPONENT``, ``-p PACKAGE``, ``-f FLAGS``, ``-e|--es|--ei|--ez|... KEY VALUE``, the
``--activity-*`` and ``--receiver-*`` switches, ``-W``, ``-S``; a bare word is data when it holds a
colon, a component when it holds a slash, else a package). Shared by the simulated phone, which
runs them, and harness guard, which reads what an agent asks the phone to start."""

from __future__ import annotations

from dataclasses import dataclass, field

# the extras' flags: each takes a key and a value
EXTRA_FLAGS = {"-e", "--es", "--ei", "--el", "--ef", "--ed", "--eu", "--ecn", "--ez", "--eia", "--ela", "--efa", "--eda",
               "--eial", "--elal", "--efal", "--esa", "--esal"}
# options that take one value
ONE_VALUE = {"-a", "-d", "-t", "-c", "-n", "-p", "-f", "-i", "--esn", "--user", "-R", "-P", "--start-profiler",
             "--sampling", "--attach-agent", "--display", "--windowingMode", "--activityType", "--task",
             "--receiver-permission", "--selector"}


class IntentArgsError(ValueError):
    """Arguments Android would refuse (a flag without its value, flags that are not a number)."""


@dataclass
class IntentArgs:
    action: str = ""
    data: str = ""
    component: str = ""
    package: str = ""
    categories: list[str] = field(default_factory=list)
    extras: list[tuple[str, str, str]] = field(default_factory=list)  # (flag, key, value) as written
    flags: int = 0
    wait: bool = False        # -W
    stop_first: bool = False  # -S


def parse_intent_args(args: list[str]) -> IntentArgs:
    it = IntentArgs()
    i = 0

    def values(k: int) -> list[str]:
        got = args[i + 1:i + 1 + k]
        if len(got) < k:
            raise IntentArgsError(f"Error: No argument supplied for '{args[i]}'")
        return got

    while i < len(args):
        a = args[i]
        if a in EXTRA_FLAGS:
            k, v = values(2)
            it.extras.append((a, k, v))
            i += 3
            continue
        if a in ONE_VALUE:
            (v,) = values(1)
            if a == "-a":
                it.action = v
            elif a == "-d":
                it.data = v
            elif a == "-c":
                it.categories.append(v)
            elif a == "-n":
                it.component = v
            elif a == "-p":
                it.package = v
            elif a == "-f":
                try:
                    it.flags = int(v, 16) if v.lower().startswith("0x") else int(v)
                except ValueError:
                    raise IntentArgsError(f"Error: invalid flags '{v}'") from None
            elif a == "--esn":
                it.extras.append((a, v, ""))
            i += 2
            continue
        if a == "-W":
            it.wait = True
        elif a == "-S":
            it.stop_first = True
        elif not a.startswith("-"):
            if ":" in a:
                it.data = a
            elif "/" in a:
                it.component = a
            else:
                it.package = a
        i += 1
    return it
