"""What a manifest says about the machine: versions of Python and the packages, the platform, the
git commit of the checkout."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any


_PACKAGES = ("adbutils", "uiautomator2", "pillow", "openai", "pyyaml", "rich", "pydantic", "ui-tars")


def _git(cwd: Path, *args: str) -> str | None:
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    try:
        proc = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            timeout=10,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_info(path: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """``{"revision": sha or None (no commit yet), "dirty": bool}`` of the git working tree
    containing ``path``, or None if there is none (or git is not installed).

    Default ``path``: the source checkout this module was imported from, if it is the top
    of a git working tree (an editable install); otherwise the current directory.
    ``dirty`` counts modified, staged and untracked (not ignored) files.
    """
    if path is None:
        source_root = Path(__file__).resolve().parent.parent
        top = _git(source_root, "rev-parse", "--show-toplevel")
        path = source_root if top and Path(top).resolve() == source_root else Path.cwd()
    cwd = Path(path)
    if _git(cwd, "rev-parse", "--show-toplevel") is None:
        return None
    revision = _git(cwd, "rev-parse", "--verify", "-q", "HEAD")
    status = _git(cwd, "status", "--porcelain")
    return {"revision": revision or None, "dirty": bool(status) if status is not None else None}


def build_environment_info(repo_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Versions and revision for the manifest::

        {"python": "3.11.7", "python_implementation": "CPython",
         "platform": "Linux-6.1...-x86_64-with-glibc2.36", "harness_version": "0.1.0",
         "packages": {"adbutils": "2.12.0", ..., "ui-tars": "0.5.1"},   # None if absent
         "git": {"revision": "ab12...", "dirty": false} or None}
    """
    try:
        from harness import __version__ as harness_version
    except Exception:  # pragma: no cover - partial installs
        harness_version = None
    packages: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            packages[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "harness_version": harness_version,
        "packages": packages,
        "git": git_info(repo_dir),
    }
