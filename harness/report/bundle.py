"""Run bundles: one portable file of a run (``harness bundle RUN -o FILE``), checked by
``harness bundle verify FILE`` and read directly by ``harness report``, ``view`` and ``compare``
(:mod:`harness.report.run_source`).

A bundle is a tar archive compressed with zstd (the ``zstandard`` package; Python's own zstd module
arrives only with 3.14). Its first member is ``bundle-index.json``: the format, what was redacted,
and the path, size and sha256 of every record that follows it: the run's manifest, results,
labels, the task files the manifest names, offline judgement sets, and each episode's trajectory,
summary and side records. Then come the screenshots, and last ``bundle-seal.json``: each
screenshot's path, size and sha256, and the index's own sha256. The seal's sha256 is the bundle's
signature by hash: printed when the bundle is made and by ``verify``, it names every byte of the
bundle (the seal names the index, which names the records), so a reader who has it from the sender
checks everything against it. A reader that needs no screenshot (a report) checks the records
against the index as it reads them and stops before the screenshots. Each screenshot is read once
when the bundle is made and once when it is verified.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from harness import __version__
from harness.records import (LOCK_FILE, MANIFEST_FILE, RESULTS_FILE, TRAJECTORY_FILE, RecordError, read_manifest,
                             read_results, redact)
from harness.records.redaction import might_hold_secret
from harness.report.viewer_files import SCREEN_SIZE_KEY

INDEX = "bundle-index.json"   # first: the format, what was redacted, the records' sizes and sha256
SEAL = "bundle-seal.json"     # last: the screenshots' sizes and sha256, and the index's sha256
FORMAT = "crate-harness run bundle"
VERSION = 1
LEVEL = 3               # zstd's default level, as `tar --zstd` (zstd -3)
CHUNK = 1 << 20
TAR_BUFFER = 1 << 16    # tarfile's stream buffer: its default (10 KiB) makes a zstd call per 10 KiB; a
                        # buffer much larger than a member is copied again at every member read
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
        return not might_hold_secret(text) and not any(w in text for w in self._subs)

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


def _entries(folder: Path, dirs: bool = False) -> list[os.DirEntry[str]]:
    """A folder's plain files (or folders), by name: no symlink, nothing hidden; none when the folder
    is missing or a symlink."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    with os.scandir(folder) as it:
        out = [e for e in it if not e.name.startswith(".") and not e.is_symlink()
               and (e.is_dir(follow_symlinks=False) if dirs else e.is_file(follow_symlinks=False))]
    return sorted(out, key=lambda e: e.name)


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
    members += [Member(to, data=found.read_bytes()) for _, found, to in tasks]
    judg = run / "judgements"
    if judg.is_dir():
        for f in sorted(judg.rglob("*")):
            if f.is_file() and not f.is_symlink() and not any(x.startswith(".") for x in f.relative_to(run).parts) \
                    and f.suffix in (".json", ".jsonl"):
                members.append(_text_member(f.relative_to(run).as_posix(), f, red))
    trajectories: list[Member] = []  # first of the episodes' files: what a report reads
    others: list[Member] = []
    screens: list[Member] = []
    for ep in _entries(run / "episodes", dirs=True):
        base = f"episodes/{ep.name}"
        for f in _entries(Path(ep.path)):
            if f.name.endswith((".json", ".jsonl")):
                (trajectories if f.name == TRAJECTORY_FILE else others).append(
                    _text_member(f"{base}/{f.name}", Path(f.path), red))
        for f in _entries(Path(ep.path) / "decisions"):
            if f.name.endswith(".json"):
                others.append(_text_member(f"{base}/decisions/{f.name}", Path(f.path), red))
        for f in _entries(Path(ep.path) / "screens"):
            if f.name.endswith(".png"):
                screens.append(_screen_member(f"{base}/screens/{f.name}", Path(f.path), max_side))
    redacted = {"secrets": "harness.records.redact", "devices": len(serials), "paths": sorted(set(red.paths.values())),
                "task_files_renamed": len(renamed)}
    return members + trajectories + others + screens, redacted


# --------------------------------------------------------------------------- writing


def _hash(m: Member) -> None:
    """A text member's size and sha256 (its bytes are in memory already)."""
    m.size, m.sha256 = len(m.data or b""), hashlib.sha256(m.data or b"").hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _info(path: str, size: int) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(path)
    ti.size, ti.mode, ti.mtime = size, 0o644, 0
    ti.uname = ti.gname = ""
    return ti


PENDING = 16  # screenshots read ahead of their hashes (each a few hundred KiB)


def make_bundle(run: str | Path, out: str | Path, *, max_side: int | None = None,
                level: int = LEVEL) -> tuple[str, dict[str, Any], int]:
    """Write ``run``'s bundle to ``out`` (atomically); returns its signature (the seal's sha256),
    the index and how many files it holds (the index and the seal not counted)."""
    import zstandard

    members, redacted = plan(run, max_side=max_side)
    text = [m for m in members if "/screens/" not in m.path]
    shots = [m for m in members if "/screens/" in m.path]
    for m in text:
        _hash(m)
    index = {"format": FORMAT, "version": VERSION, "harness_version": __version__, "run": Path(run).resolve().name,
             "compression": "zstd", "screens": {"max_side": max_side}, "redacted": redacted, "seal": SEAL,
             "files": [{"path": m.path, "size": m.size, "sha256": m.sha256} for m in text]}
    index_bytes = json.dumps(index, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw, zstandard.ZstdCompressor(level=level).stream_writer(raw) as z, \
                tarfile.open(fileobj=z, mode="w|", format=tarfile.PAX_FORMAT, bufsize=TAR_BUFFER) as tar:
            tar.copybufsize = CHUNK
            tar.addfile(_info(INDEX, len(index_bytes)), io.BytesIO(index_bytes))
            for m in text:
                tar.addfile(_info(m.path, m.size), io.BytesIO(m.data))  # type: ignore[arg-type]
            for m in shots:  # each screenshot read once: hashed, then compressed
                data = m.data if m.data is not None else m.source.read_bytes()  # type: ignore[union-attr]
                m.size, m.sha256 = len(data), _digest(data)
                tar.addfile(_info(m.path, m.size), io.BytesIO(data))
            seal = {"index_sha256": _digest(index_bytes),
                    "files": [{"path": m.path, "size": m.size, "sha256": m.sha256} for m in shots]}
            seal_bytes = json.dumps(seal, ensure_ascii=False, indent=1).encode("utf-8") + b"\n"
            tar.addfile(_info(SEAL, len(seal_bytes)), io.BytesIO(seal_bytes))
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return _digest(seal_bytes), index, len(members)


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
    signature: str | None        # the seal's sha256 (None: the reading stopped before the seal)
    index: dict[str, Any]
    files: int
    bytes: int


def _listed(where: str, doc: Any, what: str) -> dict[str, dict[str, Any]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), list):
        raise BundleError(f"{where}: {what} is not a run bundle's")
    return {f["path"]: f for f in doc["files"] if isinstance(f, dict) and isinstance(f.get("path"), str)}


def read_bundle(path: str | Path, *, dest: Path | None = None,
                stop: Callable[[str], bool] = lambda name: False) -> Verified:
    """Read the bundle at ``path`` member by member, each checked against its index (its path
    listed, its size and sha256 equal): the records against the first member's index, the
    screenshots against the seal, the last member, which also holds the index's own sha256. With
    ``dest``, write each into that folder. ``stop(name)`` true ends the
    reading before that member (the rest, the seal included, is not checked). Anything out of
    place is a :class:`BundleError` naming the member."""
    import zstandard

    where = str(path)
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise BundleError(f"{where}: cannot read: {e.strerror}") from None
    n = total = 0
    pending: list[tuple[str, int, str]] = []  # screenshots read: (member, size, sha256), for the seal
    with fh, zstandard.ZstdDecompressor().stream_reader(fh) as z:
        try:
            tar = tarfile.open(fileobj=z, mode="r|", bufsize=TAR_BUFFER)
            first = tar.next()
            if first is None or first.name != INDEX or not first.isfile():
                raise BundleError(f"{where}: not a run bundle (its first member is not {INDEX})")
            index_bytes = tar.extractfile(first).read()  # type: ignore[union-attr]
            try:
                index = json.loads(index_bytes)
            except json.JSONDecodeError:
                raise BundleError(f"{where}: {INDEX} is not JSON") from None
            if not isinstance(index, dict) or index.get("format") != FORMAT:
                raise BundleError(f"{where}: {INDEX} is not a run bundle's index")
            if index.get("version") != VERSION:
                raise BundleError(f"{where}: bundle format version {index.get('version')!r}; this harness reads {VERSION}")
            listed = _listed(where, index, INDEX)
            seen: set[str] = set()
            seal: Any = None
            for ti in _members(tar):
                if stop(ti.name):
                    break
                if seal is not None:
                    raise BundleError(f"{where}: {ti.name}: after the seal ({SEAL}), where nothing may be")
                if ti.name == SEAL and ti.isfile():
                    seal_bytes = tar.extractfile(ti).read()  # type: ignore[union-attr]
                    try:
                        seal = json.loads(seal_bytes)
                    except json.JSONDecodeError:
                        raise BundleError(f"{where}: {SEAL} is not JSON") from None
                    sealed = _listed(where, seal, SEAL)
                    if seal.get("index_sha256") != _digest(index_bytes):
                        raise BundleError(f"{where}: {INDEX} differs from the one its seal names (altered)")
                    for name, entry in sealed.items():
                        if name in listed:
                            raise BundleError(f"{where}: {name}: listed twice")
                    _check_pending(where, pending, sealed)
                    continue
                if not ti.isfile() or not _safe(ti.name) or ti.name in seen or ti.name in (INDEX, SEAL):
                    raise BundleError(f"{where}: {ti.name}: not a plain file of the bundle (or twice)")
                seen.add(ti.name)
                data = tar.extractfile(ti).read()  # type: ignore[union-attr]
                if dest is not None:
                    target = dest / ti.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                entry = listed.get(ti.name)
                if entry is not None:  # a record: checked now, before anything reads it
                    if len(data) != entry.get("size") or _digest(data) != entry.get("sha256"):
                        raise BundleError(f"{where}: {ti.name}: its content differs from the index (altered)")
                else:  # a screenshot: checked against the seal, at the end
                    pending.append((ti.name, len(data), _digest(data)))
                n += 1
                total += len(data)
            else:
                if seal is None:
                    raise BundleError(f"{where}: no seal ({SEAL}): the bundle is cut short")
                missing = sorted((set(listed) | set(_listed(where, seal, SEAL))) - seen)
                if missing:
                    raise BundleError(f"{where}: {len(missing)} file(s) of the index are not in the bundle "
                                      f"(first: {missing[0]}); it is cut short or was altered")
                return Verified(_digest(seal_bytes), index, n, total)
        except (tarfile.TarError, zstandard.ZstdError, EOFError) as e:
            raise BundleError(f"{where}: damaged bundle ({type(e).__name__}: {e})") from None
    return Verified(None, index, n, total)  # stopped early: the seal and what comes after are unchecked


def _check_pending(where: str, pending: list[tuple[str, int, str]], sealed: dict[str, dict[str, Any]]) -> None:
    for name, size, digest in pending:
        entry = sealed.get(name)
        if entry is None:
            raise BundleError(f"{where}: {name}: not in the bundle's index (planted)")
        if size != entry.get("size") or digest != entry.get("sha256"):
            raise BundleError(f"{where}: {name}: its content differs from the index (altered)")


def _members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    while (ti := tar.next()) is not None:
        yield ti


def unpack(path: str | Path, dest: Path, *, screens: bool = True) -> Verified:
    """Verify and write the bundle's files into the empty folder ``dest``. Without ``screens``
    (what a report reads): the records and the trajectories (the report's tokens, when a result has
    none), which the format puts first; reading stops at the first other file of an episode."""
    if screens:
        return read_bundle(path, dest=dest)
    return read_bundle(path, dest=dest, stop=lambda name: name.startswith("episodes/")
                       and not name.endswith("/" + TRAJECTORY_FILE))


def temp_folder() -> Path:
    """A private temporary folder, in memory (/dev/shm) where the system has one: a report of a big
    bundle writes thousands of small files there, which a disk's metadata makes slow."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None
    return Path(tempfile.mkdtemp(prefix="crate-bundle-", dir=where))
