"""Third-party clients installed from their registries for the guard's tests, as their users install
them: an npm package with ``npm install``, a PyPI package with ``pip install`` into a venv of its own.
Each install is made once per version in a cache folder (``$CRATE_CLIENTS_CACHE``, default
``~/.cache/crate-harness/clients``), under a lock, and reused by later tests and test sessions; a
broken or half-made install is made again. A test is skipped, saying why, only when the registry
cannot be reached; any other failure of the install is the test's failure."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

DONE = ".installed"


def cache_root() -> Path:
    root = Path(os.environ.get("CRATE_CLIENTS_CACHE") or Path.home() / ".cache" / "crate-harness" / "clients")
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _unreachable(output: str) -> bool:
    words = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "network", "Network is unreachable",
             "Temporary failure in name resolution", "Could not find a version", "No matching distribution",
             "Max retries exceeded", "NewConnectionError", "getaddrinfo")
    return any(w in output for w in words)


def _run(argv: list[str], what: str, cwd: Path | None = None, timeout: float = 900) -> None:
    try:
        r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        pytest.skip(f"{what}: {argv[0]} is not installed on this machine")
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what}: the registry did not answer within {timeout:g} s")
    if r.returncode != 0:
        out = (r.stdout + r.stderr)[-3000:]
        if _unreachable(out):
            pytest.skip(f"{what}: the registry cannot be reached ({out.strip().splitlines()[-1][:200]})")
        raise AssertionError(f"{what} failed:\n{out}")


def npm_package(name: str, version: str) -> Path:
    """``node_modules/<name>`` of ``npm install name@version`` (its dependencies and binaries too)."""
    folder = cache_root() / f"npm-{name.replace('/', '+')}-{version}"
    with _locked(folder):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            (folder / "package.json").write_text('{"name": "crate-guard-clients", "private": true}\n')
            _run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", f"{name}@{version}"],
                 f"npm install {name}@{version}", cwd=folder)
            (folder / DONE).write_text(version)
    return folder / "node_modules" / name


def pypi_venv(spec: str, check_import: str) -> Path:
    """The python of a venv holding ``pip install spec`` (``check_import`` must import in it)."""
    folder = cache_root() / f"pypi-{spec.replace('==', '-').replace('/', '+')}"
    python = folder / "bin" / "python"
    with _locked(folder):
        if not (folder / DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)
            _run([sys.executable, "-m", "venv", str(folder)], f"python -m venv for {spec}")
            _run([str(python), "-m", "pip", "install", "-q", spec], f"pip install {spec}")
            _run([str(python), "-c", f"import {check_import}"], f"import {check_import} after pip install {spec}")
            (folder / DONE).write_text(spec)
    return python
