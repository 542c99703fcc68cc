"""`cmd package query-activities`, as a launcher (and mobile-mcp's app list) asks the phone which apps
it can start: each app with a launcher activity once, in PackageManagerShellCommand's format."""

from __future__ import annotations

import re

from harness.sim.phone import SimPhone
from harness.sim.shell import Shell
from harness.sim.u2 import U2Server


def _out(cmd: str) -> str:
    phone = SimPhone()
    return Shell(phone, u2=U2Server(phone)).execute(cmd, merge=True).stdout.decode()


def test_launcher_activities_are_the_apps_each_once():
    phone = SimPhone()
    text = Shell(phone, u2=U2Server(phone)).execute(
        "cmd package query-activities -a android.intent.action.MAIN -c android.intent.category.LAUNCHER",
        merge=True).stdout.decode()
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == f"{len(phone.apps)} activities found:"
    # mobile-mcp's reading (lib/android.js listApps): trimmed lines starting packageName=, deduplicated
    listed = list(dict.fromkeys(line[len("packageName="):] for line in lines if line.startswith("packageName=")))
    assert listed == sorted(phone.apps)
    assert "com.android.settings" in listed and "com.crate.wallet" in listed
    assert re.search(r"name=com\.crate\.wallet\.ui\.MainActivity", text)


def test_other_intents_and_forms():
    assert _out("cmd package query-activities -a android.intent.action.VIEW -c android.intent.category.BROWSABLE"
                ).strip() == "No activities found"
    comps = _out("pm query-activities --components -a android.intent.action.MAIN -c android.intent.category.LAUNCHER")
    assert "com.crate.notes/.NotesActivity" in comps.splitlines() and "com.android.settings/.Settings" in comps.splitlines()
    home = _out("cmd package query-activities -a android.intent.action.MAIN -c android.intent.category.HOME")
    assert "packageName=com.android.launcher3" in home
