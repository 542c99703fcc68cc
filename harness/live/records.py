"""Live records: what a running episode writes beside its trajectory, so that a live view and an
operator's decision go through the run folder like everything else (docs/records.md, "Live
records"). The runner writes them; ``harness run --watch`` and ``harness view --live RUN``, in
the runner's process or another one, read them.

    RUN/.live-token                        the run's secret for the decision buttons (0600)
    RUN/episodes/<task>/started.json       the episode began: device, cap, task, pid (atomic)
    RUN/episodes/<task>/pending.json       the step being decided (atomic; gone once recorded)
    RUN/episodes/<task>/evidence.jsonl     judges' step findings, one line each as they land
    RUN/episodes/<task>/decisions/<id>.json  an operator's answer to one question (first wins)

``pending.json`` and ``started.json`` are replaced whole (temporary file and rename), so a reader
sees the old or the new content; they are not fsynced (they describe the moment, the trajectory
holds what happened). A decision is created with ``link()``, which fails when the file exists: of
several answers to one question (the terminal, the page, another ``view --live``, the timeout)
exactly one is written, the first, in this process or another.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

from harness.records import RecordError, atomic_write_json, check_inside, dumps, now_iso, own_file

log = logging.getLogger(__name__)

STARTED_FILE = "started.json"
PENDING_FILE = "pending.json"
EVIDENCE_FILE = "evidence.jsonl"
DECISIONS_DIR = "decisions"
TOKEN_FILE = ".live-token"

DECISIONS = ("allow", "deny", "hand_back", "give_up")  # harness.core.episode.ANSWERS: flagged_action, needs_user
# who answered: the operator's terminal, the live page, the stand-in person of ``harness sim human``
# (a program playing the person, never to be mistaken for a person on the page), the timeout, nobody
ANSWERERS = ("terminal", "page", "stand_in", "timeout", "nobody")
ASK_ID_RE = re.compile(r"[0-9]{1,6}-[0-9a-f]{8}")
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{32,128}")

# claims made in this process wake its waiters at once; other processes' are seen by polling
_DECIDED = threading.Condition()


def new_ask_id(step: int) -> str:
    return f"{step}-{secrets.token_hex(4)}"


class EpisodeLive:
    """The runner's side: the live records of one episode folder. Writing them never stops the
    episode: a failure (a full disk) is logged once and the episode goes on, recorded as before;
    only the live view misses it."""

    def __init__(self, episode_dir: str | os.PathLike[str]):
        self.dir = Path(episode_dir)
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None
        self._warned = False

    def _failed(self, what: str, e: Exception) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s: could not write %s for the live view: %s", self.dir, what, e)

    def _write(self, name: str, data: dict[str, Any]) -> None:
        try:
            atomic_write_json(self.dir / name, data, fsync=False, indent=None)  # type: ignore[arg-type]
        except (OSError, RecordError) as e:
            self._failed(name, e)

    def started(self, **info: Any) -> None:
        self._write(STARTED_FILE, {**info, "started_at": now_iso(), "pid": os.getpid(), "host": socket.gethostname()})

    def step(self, index: int | None, state: str, **fields: Any) -> None:
        """A new step is being decided (``index`` None: the episode is past its steps)."""
        with self._lock:
            self._pending = {"step": index, "state": state, "monitors": [], **fields}
            self._flush()

    def update(self, **fields: Any) -> None:
        with self._lock:
            if self._pending is not None:
                self._pending.update(fields)
                self._flush()

    def verdict(self, verdict: dict[str, Any]) -> None:
        """A monitor's verdict on the pending step, as it arrives."""
        with self._lock:
            if self._pending is not None:
                self._pending["monitors"] = [*self._pending.get("monitors", []), verdict]
                self._flush()

    def _flush(self) -> None:
        assert self._pending is not None
        self._write(PENDING_FILE, {**self._pending, "updated_at": now_iso()})

    def recorded(self, index: int) -> None:
        """Step ``index`` is in the trajectory: the pending record of it (or of an earlier step)
        goes; that of a later step stays."""
        with self._lock:
            p = self._pending
            if p is None or (isinstance(p.get("step"), int) and p["step"] > index):
                return
            self._remove()

    def clear(self) -> None:
        with self._lock:
            self._remove()

    def _remove(self) -> None:
        self._pending = None
        try:
            os.unlink(self.dir / PENDING_FILE)
        except FileNotFoundError:
            pass
        except OSError as e:
            self._failed(PENDING_FILE, e)

    def evidence(self, judge: str, finding: dict[str, Any]) -> None:
        """One judge's finding about one step, appended as it lands (any thread)."""
        try:
            line = (dumps({"judge": judge, **finding, "at": now_iso()}) + "\n").encode("utf-8")
        except RecordError as e:
            self._failed(EVIDENCE_FILE, e)
            return
        try:  # one write of one whole line (O_APPEND): lines from several threads never mix
            fd = os.open(self.dir / EVIDENCE_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except FileNotFoundError:
            pass  # the episode folder is gone (a retry elsewhere, a resume): the finding is stale
        except OSError as e:
            self._failed(EVIDENCE_FILE, e)


# --------------------------------------------------------------------------- reading


def _read_object(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing or not (yet) a whole JSON object."""
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_started(episode_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    return _read_object(Path(episode_dir) / STARTED_FILE)


def read_pending(episode_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    return _read_object(Path(episode_dir) / PENDING_FILE)


def read_evidence(episode_dir: str | os.PathLike[str], warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """Every finding in ``evidence.jsonl``, in order; a line that is not a JSON object (a partial
    last line being written) is left out, with a warning for a complete line."""
    path = Path(episode_dir) / EVIDENCE_FILE
    try:
        raw = path.read_bytes()
    except OSError:
        return []
    out = []
    lines = raw.split(b"\n")
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            out.append(obj)
        elif n < len(lines) and warnings is not None:  # a complete line that is not a finding
            warnings.append(f"{path}:{n}: not a JSON object; left out")
    return out


# --------------------------------------------------------------------------- decisions


def decision_path(episode_dir: str | os.PathLike[str], ask_id: str) -> Path:
    if not ASK_ID_RE.fullmatch(ask_id or ""):
        raise RecordError(f"not a question id: {ask_id!r}")
    return Path(episode_dir) / DECISIONS_DIR / f"{ask_id}.json"


def read_decision(episode_dir: str | os.PathLike[str], ask_id: str) -> dict[str, Any] | None:
    d = _read_object(decision_path(episode_dir, ask_id))
    return d if d is not None and d.get("decision") in DECISIONS else None


def claim_decision(episode_dir: str | os.PathLike[str], ask_id: str, decision: str, by: str) -> tuple[dict[str, Any], bool]:
    """Record ``decision`` by ``by`` as the answer to question ``ask_id`` unless one was recorded
    first: (the answer that stands, whether it is this one). Raises OSError when nothing can be
    written (then no answer of any channel can be, and the runner's own timeout decides)."""
    if decision not in DECISIONS or by not in ANSWERERS:
        raise ValueError(f"decision must be one of {DECISIONS} by one of {ANSWERERS}")
    target = decision_path(episode_dir, ask_id)
    folder = target.parent
    folder.mkdir(exist_ok=True)
    check_inside(episode_dir, folder)
    record = {"ask_id": ask_id, "decision": decision, "by": by, "at": now_iso()}
    tmp = folder / f".{ask_id}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    try:
        os.link(tmp, target)  # fails if an answer exists: the first one stays
        won = True
    except FileExistsError:
        won = False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    with _DECIDED:
        _DECIDED.notify_all()
    if won:
        return record, True
    standing = read_decision(episode_dir, ask_id)
    return (standing if standing is not None else record), False


def wait_decision(episode_dir: str | os.PathLike[str], ask_id: str, timeout: float) -> dict[str, Any] | None:
    """The answer to ``ask_id`` if one is recorded within ``timeout`` seconds (at once when it is
    claimed in this process; within ``timeout`` when another process claims it), else None."""
    found = read_decision(episode_dir, ask_id)
    if found is not None or timeout <= 0:
        return found
    with _DECIDED:
        _DECIDED.wait(timeout)
    return read_decision(episode_dir, ask_id)


# --------------------------------------------------------------------------- the run's secret


def run_token(run_dir: str | os.PathLike[str], create: bool = True) -> str | None:
    """The run's secret for posting decisions (``RUN/.live-token``, readable by its owner only),
    made on first use and kept across ``--resume``, so a page open before a restart still
    answers. None when it does not exist and cannot (or may not) be made: a read-only run, whose
    live page then shows no buttons."""
    path = own_file(run_dir, TOKEN_FILE)
    for _ in range(2):
        try:
            text = path.read_text(encoding="ascii").strip()
            return text if TOKEN_RE.fullmatch(text) else None
        except FileNotFoundError:
            if not create:
                return None
        except (OSError, UnicodeDecodeError):
            return None
        tmp = path.with_name(f"{TOKEN_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            with contextlib.suppress(FileExistsError):  # another process made one first: theirs stands
                os.link(tmp, path)
        except OSError:
            return None
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return None
