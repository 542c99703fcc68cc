"""``scripts/bench --quick``: every row of every benchmark runs once, at its smallest size, and none
fails (issue 40: ``scripts/bench --only memory`` had failed since the suite validator was tightened,
and nothing noticed, since the whole bench takes over 24 minutes and was not run to its end). The
values measure nothing; what is checked is that each row runs and gives a value. The groups run
as separate cases so that test workers share them out (the farm's alone takes about two minutes)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.shared_data import ROOT

_spec = importlib.util.spec_from_file_location("bench_all", ROOT / "scripts" / "bench_all.py")
bench_all = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_all)

OTHERS = bench_all.other_benches()
PREFIX = {"overhead": "step overhead"}  # the rows an item writes start with its name, but for these
NEEDS_CHROMIUM = {"live"}
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def test_every_bench_script_has_a_quick_form():
    """A new scripts/bench_<name> is given its quick arguments (or an empty list: it is quick as it is)."""
    assert set(bench_all.QUICK_ARGS) == set(OTHERS), sorted(set(OTHERS) ^ set(bench_all.QUICK_ARGS))
    assert set(bench_all.ITEMS) >= NEEDS_CHROMIUM | set(PREFIX)


def _quick(tmp_path, only: list[str]) -> list[dict]:
    out = tmp_path / "bench"
    p = subprocess.run(["bash", str(ROOT / "scripts" / "bench"), "--quick", "--out", str(out), "--only", ",".join(only)],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert rows and not [r for r in rows if "FAILED" in r["name"] or r["holds"] is not None], rows
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("items", [[i for i in bench_all.ITEMS if i not in NEEDS_CHROMIUM], sorted(NEEDS_CHROMIUM)],
                         ids=["measured-here", "live-page"])
def test_every_row_of_scripts_bench_runs_once(tmp_path, items):
    if set(items) & NEEDS_CHROMIUM and CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (scripts/test installs it when run as root with apt)")
    rows = _quick(tmp_path, items)
    for item in items:
        mine = [r for r in rows if r["name"].startswith(PREFIX.get(item, item))]
        assert mine and all(r["value"] is not None for r in mine), (item, mine)


@pytest.mark.slow
@pytest.mark.parametrize("name", OTHERS)
def test_every_other_bench_script_runs_once(tmp_path, name):
    if name == "farm":
        from tests.farm.lab import netns_problem

        problem = netns_problem()
        if problem:
            pytest.skip(f"no network namespace of our own for the farm's Ray cluster: {problem}")
    measured = ROOT / "bench" / f"{name}.json"
    before = measured.stat().st_mtime_ns if measured.exists() else None
    rows = _quick(tmp_path, [name])
    assert all(r["name"].startswith(f"{name}:") for r in rows) and any(r["value"] is not None for r in rows), rows
    assert (tmp_path / "bench" / f"{name}.json").exists() or name == "static"  # (static prints its JSON)
    assert (measured.stat().st_mtime_ns if measured.exists() else None) == before  # measured results left alone


def test_the_quick_mode_writes_apart_and_a_row_that_fails_fails_it(tmp_path, monkeypatch):
    """In process: --quick writes into a folder of its own, and a row that raises makes it exit 1."""
    out = tmp_path / "q"
    monkeypatch.setattr(bench_all, "bench_payload", lambda: (_ for _ in ()).throw(RuntimeError("broken row")))
    monkeypatch.setattr(sys, "argv", ["bench_all.py", "--quick", "--out", str(out), "--only", "payload"])
    monkeypatch.setattr(bench_all, "BENCH", bench_all.BENCH)
    assert bench_all.main() == 1
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert rows == [{"name": "payload: FAILED (RuntimeError: broken row)", "value": None, "target": None,
                     "holds": False}]
