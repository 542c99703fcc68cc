"""Writing a run as it happens: the run folder's lock, manifest, results (the commit point) and
each episode's steps and screens, resumable after a crash."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.records.errors import RecordError
from harness.records.files import (_append_line, _fsync_dir, _fsync_file, _write_new, atomic_write_bytes,
                                   atomic_write_json)
from harness.records.json_text import _encode_line, to_jsonable
from harness.records.layout import (EPISODES_DIR, INCOMING_PREFIX, LOCK_FILE, MANIFEST_FILE, RESULTS_FILE,
                                    SCREENS_DIR, SUMMARY_FILE, TRAJECTORY_FILE, _SCREEN_RE, episode_dir, is_side_file,
                                    screen_name, validate_task_id)
from harness.records.readers import StepStream, _coerce, _tail_record, _warn, read_manifest, read_results
from harness.records.redaction import redact
from harness.records.schema import EpisodeResult, RECORDS_VERSION, StepRecord


try:  # POSIX advisory locking; absent on Windows (then no lock is taken).
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class EpisodeWriter:
    """Writes one episode folder as the episode runs.  Obtain from :meth:`RunWriter.start_episode`.

    Nothing accumulates in memory across steps: each call writes to disk immediately.
    Safe to call from several threads, though an episode normally lives in one thread.

    Step lines and screens are written (whole lines, atomic files) without an fsync, so a step
    never waits on the disk: resume redoes an unfinished episode whole, so they need to be durable
    only once the episode is complete.  :meth:`sync` makes them durable (with ``fsync=True``);
    :meth:`write_summary` and :meth:`RunWriter.append_result` call it before the summary and
    the result line, the episode's commit point.
    """

    def __init__(self, path: Path, task_id: str, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.task_id = task_id
        self.fsync = fsync
        self.trajectory_path = self.path / TRAJECTORY_FILE
        self.screens_dir = self.path / SCREENS_DIR
        self.summary_path = self.path / SUMMARY_FILE
        self._lock = threading.Lock()
        self._last_index = 0
        self._unsynced: list[Path] = []  # files written since the last sync (names only: no data kept)

    @property
    def steps_written(self) -> int:
        return self._last_index

    def write_screen(self, index: int, png: bytes | bytearray | memoryview) -> str:
        """Atomically write ``screens/NNN.png`` (0 = initial screen, N = after step N);
        returns the relative path to store in the step record."""
        rel = screen_name(index)
        data = bytes(png)
        if not data.startswith(_PNG_SIGNATURE):
            raise RecordError("screen bytes are not a PNG image (missing PNG signature)", path=self.path / rel)
        atomic_write_bytes(self.path / rel, data, fsync=False)
        with self._lock:
            self._unsynced.append(self.path / rel)
        return rel

    def append_step(self, step: StepRecord | Mapping[str, Any]) -> StepRecord:
        """Append one step line; indices must be 1, 2, 3, ... in order."""
        record = _coerce(StepRecord, step)
        line = _encode_line(record)
        with self._lock:
            expected = self._last_index + 1
            if record.index != expected:
                raise RecordError(
                    f"expected step index {expected}, got {record.index}", path=self.trajectory_path, field="index"
                )
            _append_line(self.trajectory_path, line, fsync=False)
            if not self._unsynced or self._unsynced[-1] != self.trajectory_path:
                self._unsynced.append(self.trajectory_path)
            self._last_index = record.index
        return record

    def sync(self) -> None:
        """Make everything written so far durable: fsync each file written since the last sync
        (screens, the trajectory), then the screens folder and the episode folder, so that
        the renames are durable too.  A no-op with ``fsync=False``."""
        with self._lock:
            todo, self._unsynced = list(dict.fromkeys(self._unsynced)), []
        if not self.fsync:
            return
        for path in todo:
            _fsync_file(path)
        if todo:
            _fsync_dir(self.screens_dir)
            _fsync_dir(self.path)

    def write_summary(self, summary: EpisodeResult | Mapping[str, Any]) -> Path:
        """Atomically write ``episode.json``: an EpisodeResult plus any extra details.

        Write it before :meth:`RunWriter.append_result`: the results line is what marks
        the episode as complete.  The episode's step lines and screens are made durable
        first (:meth:`sync`)."""
        result = _coerce(EpisodeResult, summary)
        if result.task_id != self.task_id:
            raise RecordError(
                f"summary is for task {result.task_id!r}, not {self.task_id!r}", path=self.summary_path, field="task_id"
            )
        self.sync()
        return atomic_write_json(self.summary_path, result, fsync=self.fsync)

    def __repr__(self) -> str:
        return f"EpisodeWriter({str(self.path)!r})"


def holds_a_run(run_dir: str | Path) -> bool:
    """The folder holds a run's records: a result line, or an episode folder (a new run there would
    mix with them; only ``--resume`` continues it). One rule for the writer and the preflight."""
    run_dir = Path(run_dir)
    with contextlib.suppress(OSError):
        if (run_dir / RESULTS_FILE).stat().st_size > 0:
            return True
    episodes = run_dir / EPISODES_DIR
    if episodes.is_dir():
        return any(not e.name.startswith(".") for e in episodes.iterdir())
    return False


class RunWriter:
    """Owns a run folder while a run is in progress.

    * ``resume=False``: the folder may be new or empty (a lone manifest is fine); if it
      already holds results or episodes, :class:`RecordError` asks for ``--resume`` or
      another ``--out``.
    * ``resume=True``: a partial last line of ``results.jsonl`` is repaired (truncated,
      or completed with its newline if it is a whole valid record); every line is
      validated; completed tasks are known; partial episode folders are replaced when
      their task is started again.  Messages go to ``self.warnings`` and the log.

    Holds an advisory lock (``RUN/.lock``) so that two processes never write one run;
    release it with :meth:`close` or a ``with`` block.  Thread-safe.
    """

    def __init__(self, run_dir: str | os.PathLike[str], *, resume: bool = False, fsync: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.resume = resume
        self.fsync = fsync
        self.warnings: list[str] = []
        self.resumed = False
        self._lock = threading.Lock()
        self._lock_fd: int | None = None
        self._closed = False
        self._manifest: dict[str, Any] | None = None
        self._started: set[str] = set()
        self._completed: set[str] = set()
        self._open: dict[str, EpisodeWriter] = {}  # started, no result line yet: synced before it

        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise RecordError("exists and is not a folder", path=self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            has_run = self._has_run_content()
            if has_run and not resume:
                raise RecordError(
                    "this folder already holds a run (results.jsonl or episodes/); "
                    "pass --resume to continue it, or choose a new --out folder",
                    path=self.run_dir,
                )
            self.resumed = has_run
            self._remove_stale_tmp()
            self.episodes_dir.mkdir(exist_ok=True)
            if not self.results_path.exists():
                os.close(os.open(self.results_path, os.O_WRONLY | os.O_CREAT, 0o666))
            if fsync:
                _fsync_dir(self.run_dir)
            if resume:
                self._repair_results_tail()
                results = read_results(self.run_dir)
                self.warnings.extend(results.warnings)
                self._completed = {r.task_id for r in results}
                if self.manifest_path.exists():
                    self._manifest = read_manifest(self.run_dir)
        except BaseException:
            self.close()
            raise

    # -- paths ---------------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.run_dir / MANIFEST_FILE

    @property
    def results_path(self) -> Path:
        return self.run_dir / RESULTS_FILE

    @property
    def episodes_dir(self) -> Path:
        return self.run_dir / EPISODES_DIR

    def episode_path(self, task_id: str) -> Path:
        return episode_dir(self.run_dir, task_id)

    # -- lifecycle -----------------------------------------------------------------

    def _acquire_lock(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RecordError(
                f"another writer holds the lock {LOCK_FILE} (is a run still in progress in this folder?); "
                "wait for it to finish or choose a new --out folder",
                path=self.run_dir,
            ) from None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def close(self) -> None:
        """Release the folder lock.  Idempotent; further writes raise RecordError."""
        self._closed = True
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor releases the flock

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RecordError("run writer is closed", path=self.run_dir)

    def _has_run_content(self) -> bool:
        return holds_a_run(self.run_dir)

    def _remove_stale_tmp(self) -> None:
        # Leftovers of an atomic manifest write or of an episode install interrupted by a crash;
        # we hold the lock, so no other writer is using them.
        for tmp in self.run_dir.glob(f".{MANIFEST_FILE}.*.tmp"):
            with contextlib.suppress(OSError):
                tmp.unlink()
        if self.episodes_dir.is_dir():
            for tmp in self.episodes_dir.glob(f"{INCOMING_PREFIX}*"):
                shutil.rmtree(tmp, ignore_errors=True)

    def _repair_results_tail(self) -> None:
        path = self.results_path
        with open(path, "r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # find the start of the last line without reading the whole file
            start, pos, chunk = 0, size, 1 << 16
            while pos > 0:
                lo = max(0, pos - chunk)
                f.seek(lo)
                i = f.read(pos - lo).rfind(b"\n")
                if i >= 0:
                    start = lo + i + 1
                    break
                pos = lo
            lineno, pos = 1, 0
            f.seek(0)
            while pos < start:
                buf = f.read(min(chunk, start - pos))
                lineno += buf.count(b"\n")
                pos += len(buf)
            f.seek(start)
            tail = f.read(size - start)
            if _tail_record(tail, EpisodeResult, path, lineno) is not None:
                f.seek(size)
                f.write(b"\n")
                message = f"{path}:{lineno}: last line had no final newline; it is a complete record, newline added"
            else:
                f.truncate(start)
                message = (
                    f"{path}:{lineno}: removed a partial last line ({len(tail)} bytes) "
                    "left by an interrupted write"
                )
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        _warn(self.warnings, message)

    # -- manifest ------------------------------------------------------------------

    @property
    def manifest(self) -> dict[str, Any]:
        """A shallow copy of the manifest as last written (or loaded on resume)."""
        return dict(self._manifest or {})

    def write_manifest(self, data: Mapping[str, Any]) -> Path:
        """Replace ``manifest.json`` (atomically, always redacted).  Adds
        ``records_version`` if absent."""
        if not isinstance(data, Mapping):
            raise RecordError(f"manifest must be a mapping, got {type(data).__name__}", path=self.manifest_path)
        with self._lock:
            self._check_open()
            return self._write_manifest_locked(dict(data))

    def update_manifest(self, fields: Mapping[str, Any] | None = None, /, **more: Any) -> Path:
        """Merge top-level ``fields`` into the manifest (shallow: a given key replaces the
        old value) and rewrite it atomically (redacted)."""
        update = dict(fields or {})
        update.update(more)
        with self._lock:
            self._check_open()
            current = dict(self._manifest or {})
            current.update(update)
            return self._write_manifest_locked(current)

    def _write_manifest_locked(self, data: dict[str, Any]) -> Path:
        clean = redact(to_jsonable(data))
        clean.setdefault("records_version", RECORDS_VERSION)
        path = atomic_write_json(self.manifest_path, clean, fsync=self.fsync)
        self._manifest = clean
        return path

    # -- episodes and results ------------------------------------------------------

    def completed(self) -> dict[str, EpisodeResult]:
        """Task id -> result, read (and validated) from ``results.jsonl``.  Duplicate
        task ids are a defect and raise RecordError with file:line."""
        with self._lock:
            return {r.task_id: r for r in read_results(self.run_dir)}

    def is_completed(self, task_id: str) -> bool:
        """Whether ``task_id`` has a result line (cheap; no file read)."""
        with self._lock:
            return task_id in self._completed

    def start_episode(self, task_id: str, *, retry: bool = False) -> EpisodeWriter:
        """Create ``RUN/episodes/<task_id>/`` (with ``screens/`` and an empty
        ``trajectory.jsonl``) and return its writer.

        Refused if the task already has a result.  A folder left by an interrupted run
        (``resume=True``) is removed first.  Starting the same task twice in one run is
        refused unless ``retry=True``, which discards the previous unfinished attempt.
        """
        with self._lock:
            self._check_open()
            path = self._make_room(task_id, retry)
            path.mkdir()
            (path / SCREENS_DIR).mkdir()
            os.close(os.open(path / TRAJECTORY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            if self.fsync:
                _fsync_dir(path)
                _fsync_dir(self.episodes_dir)
            self._started.add(task_id)
            ep = EpisodeWriter(path, task_id, fsync=self.fsync)
            self._open[task_id] = ep
            return ep

    def _make_room(self, task_id: str, retry: bool) -> Path:
        """``RUN/episodes/<task_id>``, emptied of an earlier attempt's folder where that is allowed:
        refused when the task has a result, or was started in this run and this is no retry; a
        folder left by an interrupted run is removed only when resuming. Call with the lock held."""
        path = episode_dir(self.run_dir, task_id)
        if task_id in self._completed:
            raise RecordError(f"task {task_id!r} already has a result; it is not run again", path=self.results_path)
        if task_id in self._started and not retry:
            raise RecordError(
                f"episode {task_id!r} was already started in this run (pass retry=True to discard that attempt)",
                path=path,
            )
        if path.exists() or path.is_symlink():
            if task_id not in self._started and not self.resume:
                raise RecordError("episode folder already exists", path=path)
            if path.is_symlink() or not path.is_dir():
                path.unlink()
            else:
                shutil.rmtree(path)
            if task_id not in self._started:
                _warn(self.warnings, f"{path}: removed partial episode folder left by an interrupted run")
        return path

    def install_episode(self, summary: EpisodeResult | Mapping[str, Any], files: Mapping[str, bytes], *,
                        retry: bool = False) -> Path:
        """Install an episode recorded elsewhere (on a farm node) as ``RUN/episodes/<task-id>/``,
        atomically: ``files`` (``trajectory.jsonl`` and ``screens/NNN.png``, as an
        :class:`EpisodeWriter` wrote them) and ``episode.json`` (``summary``) are written and
        fsynced into a hidden folder inside ``RUN/episodes`` and checked as a reader checks them,
        then renamed into place: a reader sees the whole episode or none of it. ``retry`` and
        resume replace a folder as :meth:`start_episode` does. Append the result line after this.
        """
        result = _coerce(EpisodeResult, summary)
        task_id = validate_task_id(result.task_id)
        names = {str(name): name for name in files}
        for rel in names:  # an allow-list: no other name, no absolute path, no '..'
            if rel != TRAJECTORY_FILE and not _SCREEN_RE.fullmatch(rel) and not is_side_file(rel):
                raise RecordError(f"an episode holds only {TRAJECTORY_FILE}, {SCREENS_DIR}/NNN.png and side records "
                                  f"(name.json, name.jsonl), not {rel!r}", path=self.episodes_dir / task_id)
        with self._lock:  # fail before writing anything
            self._check_open()
            if task_id in self._completed:
                raise RecordError(f"task {task_id!r} already has a result; it is not run again", path=self.results_path)
        staging = self.episodes_dir / f"{INCOMING_PREFIX}{task_id}.{uuid.uuid4().hex[:8]}"
        try:
            (staging / SCREENS_DIR).mkdir(parents=True)
            for rel, name in names.items():
                data = bytes(files[name])
                if _SCREEN_RE.fullmatch(rel) and not data.startswith(_PNG_SIGNATURE):
                    raise RecordError("screen bytes are not a PNG image (missing PNG signature)", path=staging / rel)
                _write_new(staging / rel, data, fsync=self.fsync)
            if TRAJECTORY_FILE not in names:
                _write_new(staging / TRAJECTORY_FILE, b"", fsync=self.fsync)
            steps = StepStream(staging)
            for step in steps:  # every line valid, indices 1, 2, 3...; each screen it names present
                for rel in (step.screen_before, step.screen_after):
                    if rel is not None and rel not in names:
                        raise RecordError(f"step {step.index} names {rel}, which was not shipped",
                                          path=staging / TRAJECTORY_FILE)
            if steps.warnings:
                raise RecordError("; ".join(steps.warnings), path=staging / TRAJECTORY_FILE)
            atomic_write_json(staging / SUMMARY_FILE, result, fsync=self.fsync)
            if self.fsync:
                _fsync_dir(staging / SCREENS_DIR)
                _fsync_dir(staging)
            with self._lock:
                self._check_open()
                path = self._make_room(task_id, retry)
                os.rename(staging, path)
                self._started.add(task_id)
                if self.fsync:
                    _fsync_dir(self.episodes_dir)
            return path
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)

    def append_result(self, result: EpisodeResult | Mapping[str, Any]) -> EpisodeResult:
        """Append one complete line to ``results.jsonl`` (serialised first, written with one
        ``os.write``, then fsynced).  This line is the commit point of an episode: the
        episode's own files, written without fsync as it ran, are made durable first
        (:meth:`EpisodeWriter.sync`).  A second result for the same task id is refused."""
        record = _coerce(EpisodeResult, result)
        line = _encode_line(record)
        with self._lock:
            self._check_new_result(record.task_id)
            ep = self._open.get(record.task_id)
        if ep is not None:
            ep.sync()  # outside the run's lock: other episodes' results need not wait for this disk
        with self._lock:
            self._check_new_result(record.task_id)
            _append_line(self.results_path, line, fsync=self.fsync)
            self._completed.add(record.task_id)
            self._open.pop(record.task_id, None)
        return record

    def _check_new_result(self, task_id: str) -> None:
        self._check_open()
        if task_id in self._completed:
            raise RecordError(
                f"task {task_id!r} already has a result (duplicates are not allowed)",
                path=self.results_path,
                field="task_id",
            )

    def __repr__(self) -> str:
        return f"RunWriter({str(self.run_dir)!r}, resume={self.resume})"
