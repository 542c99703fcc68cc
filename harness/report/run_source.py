"""One way in for the commands that read runs (``harness report``, ``view``, ``compare``): a run
folder, or a run bundle (:mod:`harness.report.bundle`) read directly.

Every reader of this package reads a run folder. A bundle is given to them as one: its members are
checked against the bundle's index as they are read and written into a private temporary folder
(removed when the command ends), without the screenshots when the command needs none (a report
stops reading before them: the format puts them last). The name a command shows for a bundle is the
path it was given; :func:`shown` puts it back wherever a reader named the temporary folder.
``harness view`` keeps its copy in the user's cache folder, keyed by the index's sha256 and size
(:func:`cached`), so its pages and thumbnails outlive the command and a second view starts at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from harness.report.bundle import BundleError, Verified, is_bundle, temp_folder, unpack


@dataclass
class RunSource:
    name: str                   # as the user gave it
    path: Path                  # a folder holding the run's records
    bundle: Verified | None = None


@contextlib.contextmanager
def open_runs(paths: Iterable[str | os.PathLike[str]], *, screens: bool = True) -> Iterator[list[RunSource]]:
    """Each path as a run folder: a folder as it is, a bundle checked and unpacked into a temporary
    folder (without screenshots unless ``screens``), removed on the way out."""
    temps: list[Path] = []
    out: list[RunSource] = []
    try:
        for p in paths:
            if is_bundle(p):
                tmp = temp_folder()
                temps.append(tmp)
                out.append(RunSource(str(p), tmp / "run", unpack(p, tmp / "run", screens=screens)))
            else:
                out.append(RunSource(str(p), Path(p)))
        yield out
    finally:
        for t in temps:
            shutil.rmtree(t, ignore_errors=True)


def shown(text: str, sources: Iterable[RunSource]) -> str:
    """``text`` with each bundle's temporary folder named by the bundle's own path."""
    for s in sources:
        if s.bundle is not None:
            text = text.replace(str(s.path), s.name)
    return text


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crate-harness" / "bundles"


def index_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a bundle's index (its first member), read without the rest, and the file's
    size: what the cache is keyed by (the index names the records; the size tells apart two
    bundles of one run whose screenshots differ, e.g. downscaled)."""
    import hashlib

    import zstandard

    try:
        with open(path, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, \
                tarfile.open(fileobj=z, mode="r|") as tar:
            first = tar.next()
            if first is None or not first.isfile():
                raise BundleError(f"{path}: not a run bundle (no index)")
            data = tar.extractfile(first).read()  # type: ignore[union-attr]
    except (OSError, tarfile.TarError, zstandard.ZstdError) as e:
        raise BundleError(f"{path}: damaged bundle ({type(e).__name__}: {e})") from None
    json.loads(data)  # a broken index is found by the full read that follows
    return f"{hashlib.sha256(data).hexdigest()[:32]}-{os.path.getsize(path)}"


def cached(path: str | os.PathLike[str]) -> Path:
    """The bundle unpacked whole (checked) into the cache, once per content: the run folder there."""
    root = cache_root() / index_sha256(path)
    run = root / "run"
    if (root / ".complete").is_file() and run.is_dir():
        return run
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    try:
        unpack(path, run)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    (root / ".complete").write_text("")
    return run
