"""Run bundles: one portable file of a run (``harness bundle RUN -o FILE``), checked by
``harness bundle verify FILE`` and read directly by ``harness report``, ``view`` and ``compare``
(:mod:`harness.report.run_source`).

A bundle is a tar archive compressed with zstd (the ``zstandard`` package; Python's own zstd module
arrives only with 3.14). Its first member is ``bundle-index.json``: the format, what was redacted,
and every other member's path, size and sha256. The index is the bundle's signature by hash: its
own sha256, printed when the bundle is made and by ``verify``, names the bundle's whole content,
so a reader who has that hash from the sender checks everything against it. Then come the run's
records (manifest, results, labels, the task files the manifest names, offline judgement sets),
each episode's trajectory, summary and side records, and last the screenshots, so a reader that
needs no screenshot (a report) stops before them.

Redacted on the way in (text records only; screenshots are copied, or downscaled):

* secrets, by the records' own rule (:func:`harness.records.redact`: keys named like secrets, and
  ``sk-``/``hf_``/``ghp_`` keys, bearer tokens, ``NAME=value`` and ``--api-key value`` in text);
* device serial numbers, each replaced by ``device-N`` in the order the run lists them (the same
  serial is the same pseudonym everywhere, so "ran on two phones" survives);
* host paths: the run folder's, the current folder's and the home folder's absolute paths become
  ``<run>``, ``<cwd>`` and ``<home>``.

Task files are copied as they are (their sha256 is in the manifest; a task file holds no secret),
at the relative path the manifest names them by, or under ``suite-files/`` with the manifest's name
rewritten when it was absolute. The run's live token, lock, hidden files and the viewer's pages are
left out.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from harness import __version__
from harness.records import LOCK_FILE, MANIFEST_FILE, RESULTS_FILE, RecordError, read_manifest, read_results, redact
from harness.records.redaction import might_hold_secret
from harness.report.viewer_files import SCREEN_SIZE_KEY

INDEX = "bundle-index.json"
FORMAT = "crate-harness run bundle"
VERSION = 1
LEVEL = 3               # zstd's default level, as `tar --zstd` (zstd -3)
CHUNK = 1 << 20
RESERVED = ("episodes", "judgements", "report", INDEX, MANIFEST_FILE, RESULTS_FILE, "labels.jsonl")


class BundleError(ValueError):
    pass


# --------------------------------------------------------------------------- what goes in


@dataclass
class Member:
    path: str                       # inside the bundle
    source: Path | None = None      # copied from this file ...
    data: bytes | None = None       # ... or these bytes (redacted text, a downscaled screen)
    size: int = 0
    sha256: str = ""


@dataclass
class Redactor:
    """Serial numbers and host paths to replace, applied to every string (and key) of a record."""

    serials: dict[str, str] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)
    _re: re.Pattern[str] | None = None

    def compile(self) -> "Redactor":
        subs = {**self.paths, **self.serials}
        words = sorted((w for w in subs if len(w) >= 4), key=len, reverse=True)
        self._subs = subs
        self._re = re.compile("|".join(re.escape(w) for w in words)) if words else None
        return self

    def untouched(self, line: bytes) -> bool:
        """Whether redaction would leave this record's text as it is (no secret by the records'
        rule, no serial, no host path): then it is copied, not parsed and written again."""
        if b"\\u" in line:  # an escaped character could spell a key the text test cannot see
            return False
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return not might_hold_secret(text) and (self._re is None or self._re.search(text) is None)

    def text(self, s: str) -> str:
        return self._re.sub(lambda m: self._subs[m.group(0)], s) if self._re is not None else s

    def value(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.value(v) for v in obj]
        return obj

    def record(self, obj: Any) -> Any:
        return self.value(redact(obj))


_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


def json_dumps(obj: Any) -> str:
    """One JSON text on one line, non-ASCII as is, but for the characters some tools split lines at
    (the records' own rule, docs/records.md)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).translate(_LINE_BREAKS)


def _json_lines(raw: bytes, red: Redactor, where: str) -> bytes:
    """A JSON Lines file redacted line by line; a torn last line (a crashed writer's) is kept out."""
    out = []
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if i < len(lines) - 1 and red.untouched(line):
            out.append(line + b"\n")  # nothing to redact: the line as it was written
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                continue  # no newline after it: the torn last line readers skip
            raise BundleError(f"{where}:{i + 1}: not JSON; the run's records are damaged (bundle refused)") from None
        out.append(json_dumps(red.record(obj)).encode("utf-8") + b"\n")
    return b"".join(out)


def _text_member(path: str, source: Path, red: Redactor) -> Member:
    raw = source.read_bytes()
    if source.suffix == ".jsonl":
        data = _json_lines(raw, red, str(source))
    else:
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            raise BundleError(f"{source}: not JSON; the run's records are damaged (bundle refused)") from None
        data = json_dumps(red.record(obj)).encode("utf-8") + b"\n"
    return Member(path, data=data)


def _screen_member(path: str, source: Path, max_side: int | None) -> Member:
    if not max_side:
        return Member(path, source=source)
    from PIL import Image, PngImagePlugin

    with Image.open(source) as im:
        if max(im.size) <= max_side:
            return Member(path, source=source)
        size = im.size
        scale = max_side / max(size)
        small = im.resize((max(1, round(size[0] * scale)), max(1, round(size[1] * scale))), Image.Resampling.LANCZOS)
    info = PngImagePlugin.PngInfo()
    info.add_text(SCREEN_SIZE_KEY, f"{size[0]}x{size[1]}")  # the viewer draws actions in the phone's pixels
    buf = io.BytesIO()
    small.save(buf, "PNG", pnginfo=info, optimize=False)
    return Member(path, data=buf.getvalue())


def _serials(manifest: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for d in manifest.get("devices") or []:
        if isinstance(d, dict) and isinstance(d.get("serial"), str):
            seen[d["serial"]] = None
    for r in results:
        for key in ("device",):
            if isinstance(r.get(key), str):
                seen[r[key]] = None
    return [s for s in seen if s]


def _task_files(run: Path, manifest: dict[str, Any]) -> list[tuple[str, Path, str | None]]:
    """(the manifest's name, the file found as the readers find it, the name it is bundled under)."""
    files = (manifest.get("suite") or {}).get("files") or {}
    if isinstance(files, list):
        files = {f: None for f in files if isinstance(f, str)}
    out = []
    for i, name in enumerate(files):
        p = Path(name)
        found = next((c for c in ([p] if p.is_absolute() else [run / p, Path.cwd() / p, run.parent / p])
                      if c.is_file()), None)
        if found is None:
            continue  # the report warns of it, from the bundle as from the run
        plain = not p.is_absolute() and ".." not in p.parts and p.parts[0] not in RESERVED
        out.append((name, found, name if plain else f"suite-files/{i}-{p.name}"))
    return out


def _not_being_written(run: Path) -> None:
    """Refuse a run whose writer still holds its lock (a run in progress: its records are moving)."""
    import fcntl

    try:
        fd = os.open(run / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return  # no lock file: nobody has it open for writing
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        raise BundleError(f"{run}: a run is still being written there (its {LOCK_FILE} is held); bundle it once "
                          "it has ended") from None
    finally:
        os.close(fd)


def plan(run: str | Path, *, max_side: int | None = None) -> tuple[list[Member], dict[str, Any]]:
    """The members of ``run``'s bundle in their order (index not included), and what was redacted."""
    run = Path(run)
    if not (run / MANIFEST_FILE).is_file() or not (run / RESULTS_FILE).is_file():
        raise BundleError(f"{run}: not a run folder (no manifest.json and results.jsonl)")
    _not_being_written(run)
    try:
        manifest = read_manifest(run)
        results = [r.model_dump() for r in read_results(run)]
    except RecordError as e:
        raise BundleError(f"{e}; the run's records are damaged (bundle refused)") from None
    serials = _serials(manifest, results)
    red = Redactor({s: f"device-{i}" for i, s in enumerate(serials, start=1)},
                   {str(run.resolve()): "<run>", str(Path.cwd().resolve()): "<cwd>", str(Path.home()): "<home>"})
    red.compile()
    tasks = _task_files(run, manifest)
    renamed = {name: to for name, _, to in tasks if to != name}
    man = dict(manifest)
    if renamed:  # absolute task file names: bundled under suite-files/, named so in the manifest
        suite = dict(man.get("suite") or {})
        suite["files"] = {renamed.get(k, k): v for k, v in (suite.get("files") or {}).items()}
        man["suite"] = suite
    members = [Member(MANIFEST_FILE, data=json_dumps(red.record(man)).encode("utf-8") + b"\n"),
               _text_member(RESULTS_FILE, run / RESULTS_FILE, red)]
    if (run / "labels.jsonl").is_file():
        members.append(_text_member("labels.jsonl", run / "labels.jsonl", red))
    members += [Member(to, source=found) for _, found, to in tasks]
    judg = run / "judgements"
    if judg.is_dir():
        for f in sorted(judg.rglob("*")):
            if f.is_file() and not f.is_symlink() and not any(x.startswith(".") for x in f.relative_to(run).parts) \
                    and f.suffix in (".json", ".jsonl"):
                members.append(_text_member(f.relative_to(run).as_posix(), f, red))
    screens: list[Member] = []
    eps = run / "episodes"
    for ep in sorted(eps.iterdir()) if eps.is_dir() else []:
        if ep.name.startswith(".") or ep.is_symlink() or not ep.is_dir():
            continue
        base = f"episodes/{ep.name}"
        for f in sorted(ep.iterdir()):
            if f.is_file() and not f.is_symlink() and not f.name.startswith(".") and f.suffix in (".json", ".jsonl"):
                members.append(_text_member(f"{base}/{f.name}", f, red))
        dec = ep / "decisions"
        for f in sorted(dec.glob("*.json")) if dec.is_dir() and not dec.is_symlink() else []:
            if f.is_file() and not f.is_symlink():
                members.append(_text_member(f"{base}/decisions/{f.name}", f, red))
        shots = ep / "screens"
        for f in sorted(shots.glob("*.png")) if shots.is_dir() and not shots.is_symlink() else []:
            if f.is_file() and not f.is_symlink():
                screens.append(_screen_member(f"{base}/screens/{f.name}", f, max_side))
    redacted = {"secrets": "harness.records.redact", "devices": len(serials), "paths": sorted(set(red.paths.values())),
                "task_files_renamed": len(renamed)}
    return members + screens, redacted


# --------------------------------------------------------------------------- writing


def _hash(m: Member) -> None:
    h = hashlib.sha256()
    if m.data is not None:
        h.update(m.data)
        m.size = len(m.data)
    else:
        size = 0
        with open(m.source, "rb") as f:  # type: ignore[arg-type]
            while chunk := f.read(CHUNK):
                h.update(chunk)
                size += len(chunk)
        m.size = size
    m.sha256 = h.hexdigest()


def _info(path: str, size: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(path)
    ti.size, ti.mode, ti.mtime = size, 0o644, 0
    ti.uname = ti.gname = ""
    return ti


def make_bundle(run: str | Path, out: str | Path, *, max_side: int | None = None,
                level: int = LEVEL) -> tuple[str, dict[str, Any]]:
    """Write ``run``'s bundle to ``out`` (atomically); returns the index's sha256 and the index."""
    import zstandard

    members, redacted = plan(run, max_side=max_side)
    # the files are hashed before the index that lists them is written, on a thread per core
    # (hashlib and file reads release the GIL), then read again from the page cache to be written
    with ThreadPoolExecutor(max(1, min(4, os.cpu_count() or 1))) as pool:
        list(pool.map(_hash, members))
    index = {"format": FORMAT, "version": VERSION, "harness_version": __version__, "run": Path(run).resolve().name,
             "compression": "zstd", "screens": {"max_side": max_side}, "redacted": redacted,
             "files": [{"path": m.path, "size": m.size, "sha256": m.sha256} for m in members]}
    index_bytes = json.dumps(index, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw, zstandard.ZstdCompressor(level=level).stream_writer(raw) as z, \
                tarfile.open(fileobj=z, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            tar.copybufsize = CHUNK  # (16 KiB by default: a zstd write call per 16 KiB)
            tar.addfile(_info(INDEX, len(index_bytes)), io.BytesIO(index_bytes))
            for m in members:
                if m.data is not None:
                    tar.addfile(_info(m.path, m.size), io.BytesIO(m.data))
                else:
                    with open(m.source, "rb") as f:  # type: ignore[arg-type]
                        tar.addfile(_info(m.path, m.size), f)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return hashlib.sha256(index_bytes).hexdigest(), index


# --------------------------------------------------------------------------- reading


def is_bundle(path: str | Path) -> bool:
    """A file starting with zstd's magic number (a run folder is a directory)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return p.is_file() and f.read(4) == b"\x28\xb5\x2f\xfd"
    except OSError:
        return False


def _safe(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts and "\\" not in path


@dataclass
class Verified:
    index_sha256: str
    index: dict[str, Any]
    files: int
    bytes: int


def read_bundle(path: str | Path, *, dest: Path | None = None,
                stop: Callable[[str], bool] = lambda name: False,
                keep: Callable[[str], bool] = lambda name: True) -> Verified:
    """Read the bundle at ``path`` member by member, each checked against the index (its path
    listed, its size and sha256 equal); with ``dest``, write into that folder each member ``keep``
    accepts. ``stop(name)`` true ends the reading before that member (the rest is not checked).
    Anything out of place is a :class:`BundleError` naming the member."""
    import zstandard

    path = Path(path)
    where = str(path)
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise BundleError(f"{where}: cannot read: {e.strerror}") from None
    n = total = 0
    with fh, zstandard.ZstdDecompressor().stream_reader(fh) as z:
        try:
            tar = tarfile.open(fileobj=z, mode="r|")
            first = tar.next()
            if first is None or first.name != INDEX or not first.isfile():
                raise BundleError(f"{where}: not a run bundle (its first member is not {INDEX})")
            index_bytes = tar.extractfile(first).read()  # type: ignore[union-attr]
            try:
                index = json.loads(index_bytes)
            except json.JSONDecodeError:
                raise BundleError(f"{where}: {INDEX} is not JSON") from None
            if not isinstance(index, dict) or index.get("format") != FORMAT or not isinstance(index.get("files"), list):
                raise BundleError(f"{where}: {INDEX} is not a run bundle's index")
            if index.get("version") != VERSION:
                raise BundleError(f"{where}: bundle format version {index.get('version')!r}; this harness reads {VERSION}")
            listed = {f["path"]: f for f in index["files"] if isinstance(f, dict) and isinstance(f.get("path"), str)}
            seen: set[str] = set()
            for ti in _members(tar):
                if stop(ti.name):
                    break
                entry = listed.get(ti.name)
                if entry is None or not ti.isfile() or not _safe(ti.name) or ti.name in seen:
                    raise BundleError(f"{where}: {ti.name}: not in the bundle's index (or not a plain file, or twice)")
                seen.add(ti.name)
                h, size = hashlib.sha256(), 0
                src = tar.extractfile(ti)
                out = None
                if dest is not None and keep(ti.name):
                    target = dest / ti.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    out = open(target, "wb")
                try:
                    while chunk := src.read(CHUNK):  # type: ignore[union-attr]
                        h.update(chunk)
                        size += len(chunk)
                        if out is not None:
                            out.write(chunk)
                finally:
                    if out is not None:
                        out.close()
                if size != entry.get("size") or h.hexdigest() != entry.get("sha256"):
                    raise BundleError(f"{where}: {ti.name}: its content differs from the index (sha256 "
                                      f"{h.hexdigest()[:16]}..., the index says {str(entry.get('sha256'))[:16]}...)")
                n += 1
                total += size
            else:
                missing = sorted(set(listed) - seen)
                if missing:
                    raise BundleError(f"{where}: {len(missing)} file(s) of the index are not in the bundle "
                                      f"(first: {missing[0]}); it is cut short or was altered")
        except (tarfile.TarError, zstandard.ZstdError, EOFError) as e:
            raise BundleError(f"{where}: damaged bundle ({type(e).__name__}: {e})") from None
    return Verified(hashlib.sha256(index_bytes).hexdigest(), index, n, total)


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (ti := tar.next()) is not None:
        yield ti


def unpack(path: str | Path, dest: Path, *, screens: bool = True) -> Verified:
    """Verify and write the bundle's files into the empty folder ``dest``. Without ``screens``
    (what a report reads): reading stops at the first screenshot (the format puts them last), and
    of each episode only its trajectory is written (the report's tokens, when a result has none)."""
    if screens:
        return read_bundle(path, dest=dest)
    return read_bundle(path, dest=dest, stop=lambda name: "/screens/" in name,
                       keep=lambda name: not name.startswith("episodes/") or name.endswith("/trajectory.jsonl"))


def temp_folder() -> Path:
    """A private temporary folder, in memory (/dev/shm) where the system has one: a report of a big
    bundle writes thousands of small files there, which a disk's metadata makes slow."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None
    return Path(tempfile.mkdtemp(prefix="crate-bundle-", dir=where))
