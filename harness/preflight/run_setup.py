"""Checks of a run's own setup, before any device: the run folder (``--resume`` only resumes, a new
run never lands in a folder that holds something else), the live page's port (``--watch-port``)
and unsafe tasks chosen with nothing to stop them (a gate monitor, or ``--allow-unguarded-unsafe``)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from harness.preflight.problems import Problem
from harness.records.writers import holds_a_run

# what a run folder holds (docs/records.md); anything else in a folder means it is not one
RUN_ENTRIES = frozenset({"manifest.json", "results.jsonl", "episodes", "judgements", ".lock", ".live-token",
                         "report.html", "report", "live"})
# monitor modes that judge an action before it runs (async judges beside it: the action has run)
GATE_MODES = ("gate", "ask", "reflect", "reflect,ask")
ALLOW_UNGUARDED = "--allow-unguarded-unsafe"


def _foreign(path: Path) -> list[str]:
    """What a folder holds that no run folder does."""
    return sorted(p.name for p in path.iterdir()
                  if p.name not in RUN_ENTRIES and not (p.name.startswith(".manifest.json.") and p.name.endswith(".tmp")))


def started_before_its_manifest(path: Path) -> bool:
    """A run folder its run made (``results.jsonl`` and nothing foreign) and left before it wrote its
    manifest (killed in that moment): nothing was recorded, ``--resume`` starts it."""
    return path.is_dir() and (path / "results.jsonl").is_file() and not (path / "manifest.json").exists() \
        and not _foreign(path) and (path / "results.jsonl").stat().st_size == 0


def check_run_folder(out: str | Path, resume: bool) -> Problem | None:
    """``--resume`` into a folder with no run (no manifest) is a mistyped path, never a new run (but
    for a run's own folder left before its manifest was written: nothing recorded, it is started);
    a new run goes into a new folder, an empty one, or a run's folder that recorded nothing yet; a
    folder that holds a run asks for --resume."""
    path = Path(out)
    if resume:
        if not path.is_dir():
            return Problem("run folder", f"--resume: {path} does not exist, so there is no run to continue; check the "
                                         "path, or leave out --resume to start a new run there")
        if not (path / "manifest.json").is_file() and not started_before_its_manifest(path):
            return Problem("run folder", f"--resume: {path} holds no run (no manifest.json); check the path, or leave "
                                         "out --resume to start a new run in a new folder")
        return None
    if path.exists() and not path.is_dir():
        return Problem("run folder", f"--out {path} exists and is not a folder; choose a new folder for the run")
    if not path.is_dir():
        return None
    others = _foreign(path)
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        return Problem("run folder", f"--out {path} is not empty and is not a run folder (it holds {shown}); a run "
                                     "needs a new or empty folder of its own")
    if holds_a_run(path):  # what the run's writer would refuse, said before any device (the same rule)
        return Problem("run folder", f"--out {path} already holds a run (results.jsonl or episodes/); pass --resume "
                                     "to continue it, or choose a new --out folder")
    return None


def check_watch_port(host: str, port: int) -> Problem | None:
    """The live page's address can be listened on now (as its server will: SO_REUSEADDR)."""
    if not port:
        return None
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
    except OSError as e:
        return Problem("port", f"--watch-port {port}: cannot listen on {host}:{port} ({e.strerror or e}); another "
                               "program has it: pass another --watch-port, or --watch-port 0 for any free one")
    finally:
        s.close()
    return None


def check_unguarded_unsafe(tasks: list[Any], gates: list[str], descriptions: list[dict[str, Any]],
                           allowed: bool) -> tuple[Problem | None, str | None]:
    """Unsafe tasks (``safety.label: unsafe``: a factory reset, removing the lock...) on a device
    that is not the simulated phone, with no monitor judging each action before it runs: refused
    unless ``--allow-unguarded-unsafe``. On the simulated phone nothing real can be harmed (its
    unsafe tasks are how judges are measured), so they run there as chosen. (problem, note)."""
    unsafe = [t.id for t in tasks if t.safety.label == "unsafe"]
    real = [d["serial"] for d in descriptions if not d.get("simulated")]
    if not unsafe or not real or gates:
        return None, None
    shown = ", ".join(unsafe[:6]) + (f" and {len(unsafe) - 6} more" if len(unsafe) > 6 else "")
    if allowed:
        return None, (f"{len(unsafe)} unsafe task(s) will run on {', '.join(real)} with no gate monitor "
                      f"({ALLOW_UNGUARDED}): {shown}")
    return Problem("unsafe", f"{len(unsafe)} unsafe task(s) chosen ({shown}) for {', '.join(real)}, a real device, with "
                             "no monitor to halt a risky action before it runs: add --monitor crate-s --monitor-mode "
                             f"gate (docs/phones.md), leave them out with --tasks, or pass {ALLOW_UNGUARDED} to run "
                             "them unguarded"), None
