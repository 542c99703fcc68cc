"""Judgement sets: ``RUN/judgements/<set>/`` (results, manifest, lock), their names and the key of
the judge settings they were made with. The reader of finished sets is :mod:`harness.core.verdicts`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Iterable

from harness.offline_judge.errors import OfflineJudgeError
from harness.records import RecordError, atomic_write_bytes, atomic_write_json, dumps, redact, to_jsonable
from harness.core.verdicts import JUDGEMENTS_DIR


try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


_SET_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+@=-]{0,127}")


# ModelConfig / judge-spec keys that do not change what a judge answers: they may differ between
# the passes of one judgement set (another port, more concurrency, a cache file elsewhere)
_NEUTRAL_KEYS = frozenset({"base_url", "api_key_env", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "max_wait_s",
                           "deadline_s", "max_reply_bytes",
                           "concurrency", "cache", "cache_path", "cache_file", "evidence_cache", "cache_dir"})


def _neutral(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _neutral(v) for k, v in sorted(obj.items()) if k not in _NEUTRAL_KEYS}
    if isinstance(obj, list):
        return [_neutral(v) for v in obj]
    return obj


def spec_key(specs: list[dict[str, Any]]) -> str:
    """A hash of what shapes the judges' answers (endpoint, timeouts, concurrency and cache left out)."""
    text = json.dumps(_neutral(to_jsonable(specs)), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def default_set_id(names: list[str], model_name: str | None, run_dirs: Iterable[Path] = (),
                   key: str | None = None) -> str:
    """The judgement set's name when ``--judge-set`` is not given: the judge model's name (its last
    path component: ``Qwen/Qwen2.5-VL-72B-Instruct`` -> ``Qwen2.5-VL-72B-Instruct``), or the judges'
    names when they use no model. Report and viewer columns read ``crate@<set>``, so the name stays
    short. When a run already has a set of that name made with other judge settings (spec ``key``),
    the next free ``NAME-2``, ``NAME-3``... is taken; one made with the same settings is reused, so
    running the same command again resumes it."""
    base = model_name.rstrip("/").rsplit("/", 1)[-1] if model_name else "+".join(names)
    base = (re.sub(r"[^A-Za-z0-9_.+@=-]+", "_", base).strip("._-+@=") or "judges")[:120]
    for n in range(1, 1000):
        cand = base if n == 1 else f"{base}-{n}"
        if all(_set_key(Path(r), cand) in (None, key) for r in run_dirs):
            return cand
    raise OfflineJudgeError(f"no free judgement set name {base}-N; pass --judge-set NAME")


def _set_key(run_dir: Path, set_id: str) -> str | None:
    """The spec key of ``RUN/judgements/<set_id>`` (None if there is no such set; ``"?"`` if its
    manifest cannot be read, so the name is not taken over)."""
    d = run_dir / JUDGEMENTS_DIR / set_id
    if not d.exists():
        return None
    try:
        data = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "?"
    return data.get("spec_key") if isinstance(data, dict) and isinstance(data.get("spec_key"), str) else "?"


def check_set_id(set_id: str) -> str:
    if not _SET_ID_RE.fullmatch(set_id) or set_id in (".", ".."):
        raise OfflineJudgeError(f"--judge-set {set_id!r}: use 1-128 characters from A-Z a-z 0-9 _ . + @ = -")
    return set_id


class JudgementSet:
    """``RUN/judgements/<id>/``: its results file (appends of whole lines), manifest and lock."""

    def __init__(self, run_dir: Path, set_id: str, key: str, *, retry_errors: bool = False, fsync: bool = True):
        self.run_dir = run_dir
        self.dir = run_dir / JUDGEMENTS_DIR / set_id
        self.results = self.dir / "results.jsonl"
        self.manifest_path = self.dir / "manifest.json"
        self.fsync = fsync
        self.warnings: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        self._lock_fd: int | None = None
        self._pending: dict[str, Any] | None = None  # a manifest to write before this pass's first line
        self.appended = 0  # lines this pass added
        self.dir.mkdir(parents=True, exist_ok=True)
        self._acquire()
        try:
            self.manifest: dict[str, Any] = {}
            self.created = not self.manifest_path.is_file()  # a new set (its first pass writes its manifest)
            if self.manifest_path.is_file():
                try:
                    self.manifest = json.loads(self.manifest_path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as e:
                    raise OfflineJudgeError(f"{self.manifest_path}: unreadable ({e})") from None
                old = self.manifest.get("spec_key")
                if old and old != key:
                    raise OfflineJudgeError(
                        f"{self.dir}: this judgement set was made with other judge settings (spec {old}, now {key}); "
                        "pass --judge-set NEW_NAME to keep both, or remove the folder to start over")
            lines = self._read()
            self.retried = 0
            if retry_errors:
                keep = {k: v for k, v in lines.items()
                        if not any(x == "judge_error" for x in (v.get("verdicts") or {}).values())}
                if len(keep) != len(lines):
                    body = b"".join((dumps(v) + "\n").encode("utf-8") for v in keep.values())
                    atomic_write_bytes(self.results, body, fsync=fsync)
                    self.retried = len(lines) - len(keep)
                    lines = keep
            # the task ids that have a line: a long pass keeps no judged line (details can be large) in memory
            self.done: set[str] = set(lines)
            # of those, the lines holding a judge_error (skipped unless --retry-errors: said so)
            self.errored: set[str] = {k for k, v in lines.items()
                                      if any(x == "judge_error" for x in (v.get("verdicts") or {}).values())}
        except BaseException:
            self.close()
            raise

    def _acquire(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OfflineJudgeError(f"{self.dir}: another `harness judge` is writing this judgement set; "
                                    "wait for it or pass --judge-set NEW_NAME") from None
        self._lock_fd = fd

    def _read(self) -> dict[str, dict[str, Any]]:
        """Lines by task id; a torn last line (interrupted append) is dropped or completed."""
        out: dict[str, dict[str, Any]] = {}
        if not self.results.exists():
            return out
        data = self.results.read_bytes()
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            tail = data[cut:]
            try:
                obj = json.loads(tail.decode("utf-8"))
                ok = isinstance(obj, dict) and isinstance(obj.get("task_id"), str)
            except (UnicodeDecodeError, ValueError):
                ok = False
            with open(self.results, "r+b") as f:
                if ok:
                    f.seek(len(data))
                    f.write(b"\n")
                    data += b"\n"
                    self.warnings.append(f"{self.results}: last line had no newline; it is complete, newline added")
                else:
                    f.truncate(cut)
                    data = data[:cut]
                    self.warnings.append(f"{self.results}: removed a partial last line ({len(tail)} bytes) "
                                         "left by an interrupted pass")
        for lineno, line in enumerate(data.split(b"\n")[:-1], 1):
            try:
                obj = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise OfflineJudgeError(f"{self.results}:{lineno}: not a valid JSON line; fix or remove it") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("task_id"), str) \
                    or not isinstance(obj.get("verdicts"), dict):
                raise OfflineJudgeError(f"{self.results}:{lineno}: expected an object with task_id and verdicts")
            if obj["task_id"] in out:
                raise OfflineJudgeError(f"{self.results}:{lineno}: second line for task {obj['task_id']!r}")
            out[obj["task_id"]] = obj
        return out

    def append(self, line: dict[str, Any]) -> bool:
        """Append one complete line (one write, O_APPEND, fsync); False if the set is closed or the
        task already has a line."""
        try:
            body = (dumps(line) + "\n").encode("utf-8")
        except RecordError:
            body = (json.dumps(json.loads(json.dumps(line, default=str)), ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            if self._closed or line["task_id"] in self.done:
                return False
            if self._pending is not None:  # the set changes now: its manifest names this pass's settings first
                self._write_manifest(self._pending)
                self._pending = None
            fd = os.open(self.results, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view):]
                if self.fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            self.done.add(line["task_id"])
            self.appended += 1
            return True

    def write_manifest(self, data: dict[str, Any]) -> None:
        with self._lock:
            self._pending = None
            self._write_manifest(data)

    def _write_manifest(self, data: dict[str, Any]) -> None:
        self.manifest = redact(to_jsonable(data))
        atomic_write_json(self.manifest_path, self.manifest, fsync=self.fsync)

    def write_manifest_if_judged(self, data: dict[str, Any]) -> None:
        """Write ``data`` as the manifest just before this pass appends its first line, and not at
        all if it appends none: a pass that judged nothing (every episode already judged, say,
        against another endpoint) leaves an existing set's manifest as it was."""
        with self._lock:
            if self.appended:
                self._write_manifest(data)
            else:
                self._pending = dict(data)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
