"""The run record: written while a run happens, crash-safe, readable with validation.

Layout of a run folder ``RUN/`` (see ``docs/records.md`` for the full description)::

    RUN/manifest.json                        atomic rewrite, always redacted
    RUN/results.jsonl                        one line per finished episode (the commit point)
    RUN/episodes/<task-id>/trajectory.jsonl  one line per step, appended as it happens
    RUN/episodes/<task-id>/screens/NNN.png   000.png = initial screen, NNN.png = after step NNN
    RUN/episodes/<task-id>/episode.json      optional summary, atomic
    RUN/.lock                                advisory lock held by the writing process

Writers never hold a run in memory: every step, screen and result goes to disk when it
is produced.  Appends are one ``os.write`` of one complete line; whole-file writes go to
a temporary file in the same folder, then are ``os.replace``d over the target.  Durability
(``fsync``) is where resume needs it: the manifest, ``results.jsonl`` (the commit point of
an episode) and, just before that line, the episode's own files.  Step lines and screens
are not fsynced as they are written (an unfinished episode is redone whole on resume), so a
step never waits on the disk.  Readers validate every line and raise :class:`RecordError`
naming ``file:line: field: problem``.

This module depends only on the standard library and pydantic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import decimal
import enum
import hashlib
import importlib.metadata
import json
import logging
import math
import os
import platform
import re
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePath
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
)

try:  # POSIX advisory locking; absent on Windows (then no lock is taken).
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "RECORDS_VERSION",
    "REDACTED",
    "STATUSES",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "EPISODES_DIR",
    "TRAJECTORY_FILE",
    "SCREENS_DIR",
    "SUMMARY_FILE",
    "LOCK_FILE",
    "INCOMING_PREFIX",
    "RecordError",
    "Status",
    "Halt",
    "EpisodeResult",
    "StepRecord",
    "RunWriter",
    "EpisodeWriter",
    "ResultList",
    "StepStream",
    "read_manifest",
    "read_results",
    "read_summary",
    "iter_steps",
    "list_episodes",
    "episode_dir",
    "distinct_runs",
    "check_inside",
    "own_file",
    "resolve_screen",
    "screen_name",
    "validate_task_id",
    "check_relative_path",
    "build_environment_info",
    "git_info",
    "file_sha256",
    "redact",
    "is_secret_key",
    "to_jsonable",
    "dumps",
    "RecordJSONEncoder",
    "atomic_write_bytes",
    "atomic_write_json",
    "now_iso",
]

log = logging.getLogger(__name__)

RECORDS_VERSION = 1
REDACTED = "***redacted***"

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
EPISODES_DIR = "episodes"
TRAJECTORY_FILE = "trajectory.jsonl"
SCREENS_DIR = "screens"
SUMMARY_FILE = "episode.json"
LOCK_FILE = ".lock"
INCOMING_PREFIX = ".incoming-"  # RUN/episodes/.incoming-<task>.<id>: an episode being installed

STATUSES = ("finished", "halted", "step_limit", "agent_error", "infra_error")
Status = Literal["finished", "halted", "step_limit", "agent_error", "infra_error"]

_TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- errors


class RecordError(Exception):
    """A problem with a run record.

    ``str(err)`` reads ``PATH:LINE: FIELD: message`` (parts that are unknown are left out).
    The parts are also available as attributes ``path``, ``line`` (1-based), ``field``
    and ``message``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        prefix = ""
        if self.path is not None:
            prefix = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            prefix = f"line {self.line}: "
        if self.field:
            prefix += f"{self.field}: "
        return prefix + self.message

    def __reduce__(self):  # keep picklable despite keyword-only arguments
        return (_rebuild_record_error, (self.message, self.path, self.line, self.field))


def _rebuild_record_error(message, path, line, field):  # pragma: no cover - pickling helper
    return RecordError(message, path=path, line=line, field=field)


# --------------------------------------------------------------------------- JSON


def _escape_surrogate(m: re.Match[str]) -> str:
    return "\\u%04x" % ord(m.group())


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# Characters that str.splitlines() (and some editors) treat as line breaks; escaping
# them keeps one record per physical line for every tool, not only for our reader.
_LINEBREAK_ESCAPES = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def to_jsonable(obj: Any) -> Any:
    """Convert ``obj`` into plain JSON data (dict/list/str/int/float/bool/None).

    Handles pydantic models, dataclasses, ``Path`` (as POSIX string), enums, datetimes
    (ISO 8601), timedeltas (seconds), sets/tuples (lists), ``Decimal``/``UUID`` and
    numpy-like scalars/arrays (``.item()`` / ``.tolist()``).  Non-finite floats (NaN,
    +/-Infinity) become ``None``.  Anything else, ``bytes`` and circular references
    raise :class:`RecordError` naming where in the object the problem is.
    """
    return _jsonable(obj, "", set())


def _join(where: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else str(key)


def _json_key(key: Any, where: str) -> str:
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float) and math.isfinite(key):
        return repr(key)
    if isinstance(key, PurePath):
        return key.as_posix()
    raise RecordError(f"cannot use {type(key).__name__} {key!r} as a JSON object key", field=where or None)


def _jsonable(obj: Any, where: str, active: set[int]) -> Any:
    if isinstance(obj, enum.Enum):
        obj = obj.value
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, PurePath):
        return obj.as_posix()
    if isinstance(obj, (_dt.datetime, _dt.date, _dt.time)):
        return obj.isoformat()
    if isinstance(obj, _dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, decimal.Decimal):
        return _jsonable(float(obj), where, active)
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        raise RecordError("cannot encode bytes as JSON (store binary data as a file)", field=where or None)

    if isinstance(obj, BaseModel):
        return _jsonable(obj.model_dump(mode="python"), where, active)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}

    if isinstance(obj, Mapping):
        if id(obj) in active:
            raise RecordError("circular reference", field=where or None)
        active.add(id(obj))
        try:
            out: dict[str, Any] = {}
            for k, v in obj.items():
                key = _json_key(k, where)
                out[key] = _jsonable(v, _join(where, key), active)
            return out
        finally:
            active.discard(id(obj))
    if isinstance(obj, (list, tuple, set, frozenset)):
        if id(obj) in active:
            raise RecordError("circular reference", field=where or None)
        active.add(id(obj))
        try:
            items = list(obj)
            if isinstance(obj, (set, frozenset)):
                with contextlib.suppress(TypeError):
                    items = sorted(items)
            return [_jsonable(v, _join(where, i), active) for i, v in enumerate(items)]
        finally:
            active.discard(id(obj))
    # numpy & friends, without importing them
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return _jsonable(obj.tolist(), where, active)
    if hasattr(obj, "item") and callable(obj.item):
        return _jsonable(obj.item(), where, active)
    raise RecordError(f"cannot encode object of type {type(obj).__name__} as JSON", field=where or None)


def _finish_json_text(text: str) -> str:
    for ch, esc in _LINEBREAK_ESCAPES.items():
        if ch in text:
            text = text.replace(ch, esc)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (e.g. from surrogateescape-decoded output) cannot be UTF-8
        # encoded; a JSON \\uXXXX escape keeps them and keeps the file valid UTF-8.
        text = _SURROGATE_RE.sub(_escape_surrogate, text)
    return text


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Serialise ``obj`` the way records are written.

    Uses :func:`to_jsonable`, ``ensure_ascii=False``, ``allow_nan=False``; compact
    separators when ``indent`` is None (JSONL), pretty-printed otherwise.  The result
    never contains a raw line break outside of ``indent`` formatting and is always
    encodable as UTF-8.
    """
    data = to_jsonable(obj)
    if indent is None:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    else:
        text = json.dumps(data, ensure_ascii=False, allow_nan=False, indent=indent)
    return _finish_json_text(text)


class RecordJSONEncoder(json.JSONEncoder):
    """``json.dumps(obj, cls=RecordJSONEncoder)`` with the same conversions as :func:`dumps`.

    ``ensure_ascii`` is always False and ``allow_nan`` always False (NaN/Infinity are
    converted to null before encoding, so they never reach the output).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs["ensure_ascii"] = False
        kwargs["allow_nan"] = False
        super().__init__(**kwargs)

    def iterencode(self, o: Any, _one_shot: bool = False) -> Iterator[str]:
        return super().iterencode(to_jsonable(o), _one_shot)


def _encode_line(obj: Any) -> bytes:
    return (dumps(obj) + "\n").encode("utf-8")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed in records (use null)")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


# --------------------------------------------------------------------------- low-level file writing


def _fsync_dir(path: str | os.PathLike[str]) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _naming(e: OSError, path: str | os.PathLike[str]) -> OSError:
    """``e`` naming ``path`` when it names no file (``os.write`` and ``fsync`` errors such as
    ENOSPC or EIO do not), so that the message says which record could not be written."""
    if e.filename is None and e.errno is not None:
        return OSError(e.errno, e.strerror, str(path))
    return e


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:  # a regular-file write is normally complete; loop only on short writes
        n = os.write(fd, view)
        view = view[n:]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically: temporary file in the same folder, fsync,
    ``os.replace``, fsync of the folder.  Readers see the old or the new content, never a
    mix; on any error the temporary file is removed."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        try:
            _write_all(fd, bytes(data))
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _naming(e, path) from None
        raise
    if fsync:
        _fsync_dir(path.parent)
    return path


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, fsync: bool = True, indent: int = 2) -> Path:
    """:func:`atomic_write_bytes` of ``dumps(obj, indent=indent)`` plus a final newline."""
    return atomic_write_bytes(path, (dumps(obj, indent=indent) + "\n").encode("utf-8"), fsync=fsync)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        raise _naming(e, path) from None
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes, flags: int, *, fsync: bool) -> None:
    fd = os.open(path, os.O_WRONLY | flags | getattr(os, "O_BINARY", 0), 0o666)
    try:
        _write_all(fd, data)
        if fsync:
            os.fsync(fd)
    except OSError as e:
        raise _naming(e, path) from None
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, *, fsync: bool) -> None:
    """Write a file that must not exist yet (inside a private folder), then fsync it."""
    _write_file(path, data, os.O_CREAT | os.O_EXCL, fsync=fsync)


def _append_line(path: Path, line: bytes, *, fsync: bool) -> None:
    """Append one complete line with a single write (O_APPEND), then fsync when asked."""
    _write_file(path, line, os.O_APPEND | os.O_CREAT, fsync=fsync)


def now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds, e.g. ``2026-05-09T07:35:25.123+00:00``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- path safety


def validate_task_id(task_id: str) -> str:
    """Return ``task_id`` if it is safe as a folder name, else raise :class:`RecordError`.

    Allowed: ``^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`` (so no ``/``, ``\\``, leading dot,
    ``.``/``..``, spaces or newlines).
    """
    if not isinstance(task_id, str):
        raise RecordError(f"must be a string, got {type(task_id).__name__}", field="task_id")
    if task_id in (".", "..") or not _TASK_ID_RE.fullmatch(task_id):
        raise RecordError(
            f"{task_id!r} is not a valid task id (1-128 characters from A-Z a-z 0-9 _ . -, "
            "starting with a letter or digit)",
            field="task_id",
        )
    return task_id


def check_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """``path`` if it resolves (symlinks followed) to ``root`` or below it, else RecordError: what a
    command reads from a run folder, it reads from inside that folder only."""
    p = Path(path)
    if not p.resolve().is_relative_to(Path(root).resolve()):
        raise RecordError(f"resolves outside {root} (a symlink leading out of the folder); refused", path=p)
    return p


def own_file(folder: str | os.PathLike[str], name: str) -> Path:
    """``folder/name``, refused (RecordError) if it is a symlink leading out of ``folder``."""
    return check_inside(folder, Path(folder) / name)


def distinct_runs(paths: Any, warnings: list[str]) -> list[Path]:
    """The run folders ``paths`` names, each once: a folder given again (the same path, another
    spelling of it, or a symlink to it) is left out with a warning, so no episode counts twice."""
    seen: dict[Path, Path] = {}
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        real = p.resolve()
        if real in seen:
            warnings.append(f"{p}: the same run folder as {seen[real]} (given twice); it is used once")
            continue
        seen[real] = p
        out.append(p)
    return out


def episode_dir(run_dir: str | os.PathLike[str], task_id: str) -> Path:
    """``RUN/episodes/<task_id>``, after checking the id and that the resolved path is a
    direct child of ``RUN/episodes`` inside ``RUN`` (so neither ``../``, nor a symlinked episode
    folder, nor a symlinked ``episodes`` folder can lead out of the run)."""
    validate_task_id(task_id)
    base = Path(run_dir) / EPISODES_DIR
    path = base / task_id
    if path.resolve().parent != Path(run_dir).resolve() / EPISODES_DIR:
        raise RecordError(f"episode folder for {task_id!r} resolves outside {base}", path=path)
    return path


_DRIVE_RE = re.compile(r"[A-Za-z]:")


def check_relative_path(rel: str) -> str:
    """Return ``rel`` if it is a relative path without ``..`` components, else raise ValueError."""
    if not isinstance(rel, str) or not rel:
        raise ValueError("must be a non-empty relative path")
    if "\x00" in rel:
        raise ValueError("must not contain NUL characters")
    # plain string checks (pathlib would intern every component of every path it parses)
    if rel.startswith(("/", "\\")) or _DRIVE_RE.match(rel):
        raise ValueError(f"must be a relative path inside the episode folder, got absolute path {rel!r}")
    if ".." in re.split(r"[\\/]", rel):
        raise ValueError(f"must not contain '..' components, got {rel!r}")
    return rel


def resolve_screen(episode_path: str | os.PathLike[str], rel: str) -> Path:
    """Turn a screen path read from a record (e.g. ``screens/003.png``) into a path under
    ``episode_path``; refuses absolute paths, ``..`` and symlink escapes."""
    try:
        check_relative_path(rel)
    except ValueError as e:
        raise RecordError(str(e), path=episode_path) from None
    base = Path(episode_path)
    path = base / rel
    if not path.resolve().is_relative_to(base.resolve()):
        raise RecordError(f"screen path {rel!r} resolves outside the episode folder", path=base)
    return path


_SCREEN_RE = re.compile(rf"{SCREENS_DIR}/\d{{3,}}\.png")


def screen_name(index: int) -> str:
    """Relative path of screen ``index``: ``screens/000.png`` (initial), ``screens/012.png``…"""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise RecordError(f"screen index must be an int >= 0, got {index!r}")
    return f"{SCREENS_DIR}/{index:03d}.png"


# --------------------------------------------------------------------------- models


def _check_iso(value: str) -> str:
    try:
        _dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"must be an ISO 8601 timestamp such as 2026-05-09T07:35:25+00:00, got {value!r}") from None
    return value


def _check_task_id_value(value: str) -> str:
    try:
        return validate_task_id(value)
    except RecordError as e:
        raise ValueError(e.message) from None


def _check_verdict(value: Any) -> bool | str:
    if value is True or value is False or (isinstance(value, str) and value == "judge_error"):
        return value
    raise ValueError(f'must be true, false or "judge_error", got {value!r}')


def _check_rel(value: str) -> str:
    return check_relative_path(value)


TaskId = Annotated[StrictStr, AfterValidator(_check_task_id_value)]
IsoTime = Annotated[StrictStr, AfterValidator(_check_iso)]
Verdict = Annotated[Union[bool, str], PlainValidator(_check_verdict)]
RelPath = Annotated[StrictStr, AfterValidator(_check_rel)]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False, strict=True)]


class Halt(BaseModel):
    """Why a monitor stopped the episode.  Extra keys are allowed and kept."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    step: Annotated[int, Field(ge=0, strict=True)]
    category: StrictStr
    reason: StrictStr
    monitor: StrictStr | None = None


class EpisodeResult(BaseModel):
    """One line of ``results.jsonl`` (and the body of ``episode.json``).

    ``steps`` counts the steps whose action ran; ``proposed_steps`` (when given) every step
    recorded, a halted or refused proposal included. Extra fields are allowed and preserved on
    write and read.
    """

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    task_id: TaskId
    agent: Annotated[StrictStr, Field(min_length=1)]
    status: Status
    steps: Annotated[int, Field(ge=0, strict=True)]
    cap: Annotated[int, Field(ge=1, strict=True)]
    proposed_steps: Annotated[int, Field(ge=0, strict=True)] | None = None
    verdicts: dict[str, Verdict]
    device: StrictStr | None = None
    attempt: Annotated[int, Field(ge=1, strict=True)] = 1
    started_at: IsoTime | None = None
    ended_at: IsoTime | None = None
    duration_s: Annotated[FiniteFloat, Field(ge=0)] | None = None
    error: StrictStr | None = None
    halt: Halt | None = None
    judge_details: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    seed: StrictInt | StrictStr | None = None


class StepRecord(BaseModel):
    """One line of ``trajectory.jsonl``.  Unknown fields are refused: put them in ``extras``.

    ``executed`` says whether the proposed action reached the phone; records written before the
    field existed leave it out, and :attr:`ran` then tells it from the rest of the line."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    index: Annotated[int, Field(ge=1, strict=True)]
    action: dict[str, Any] | None = None
    executed: StrictBool | None = None
    invalid: StrictStr | None = None
    raw_output: StrictStr | None = None
    thought: StrictStr | None = None
    screen_before: RelPath
    screen_after: RelPath | None = None
    timings: dict[str, FiniteFloat] = Field(default_factory=dict)
    monitor: dict[str, Any] | None = None
    extras: dict[str, Any] | None = None

    @property
    def ran(self) -> bool:
        """Whether the action ran: the recorded ``executed``, else (older records) an action that
        was valid, not refused by the device and not stopped by a monitor's halt."""
        if self.executed is not None:
            return self.executed
        return self.action is not None and self.invalid is None and not (self.monitor or {}).get("halt")


M = TypeVar("M", bound=BaseModel)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out = _join(out, part)
    return out


def _error_message(err: Mapping[str, Any]) -> str:
    kind = err.get("type")
    msg = str(err.get("msg", "invalid"))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (put additional data under 'extras')"
    if kind == "literal_error":
        expected = (err.get("ctx") or {}).get("expected", "")
        return f"must be one of {expected}, got {_short(err.get('input'))}"
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix):]
    return f"{msg}, got {_short(err.get('input'))}"


def _from_validation_error(
    exc: ValidationError, *, path: str | os.PathLike[str] | None = None, line: int | None = None
) -> RecordError:
    errors = exc.errors(include_url=False)
    parts = [(_loc(tuple(e.get("loc", ()))), _error_message(e)) for e in errors]
    field, message = parts[0]
    if len(parts) > 1:
        extra = "; ".join(f"{f or '(record)'}: {m}" for f, m in parts[1:4])
        more = f" (+{len(parts) - 4} more)" if len(parts) > 4 else ""
        message = f"{message}; also {extra}{more}"
    return RecordError(message, path=path, line=line, field=field or None)


def _coerce(model: type[M], value: M | Mapping[str, Any]) -> M:
    if isinstance(value, model):
        return value
    if not isinstance(value, Mapping):
        raise RecordError(f"expected {model.__name__} or a mapping, got {type(value).__name__}")
    try:
        return model.model_validate(dict(value))
    except ValidationError as e:
        raise _from_validation_error(e) from None


# --------------------------------------------------------------------------- reading


def _parse_record(
    raw: bytes, model: type[M], path: str | os.PathLike[str], lineno: int
) -> M:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(
            f"not valid UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})", path=path, line=lineno
        ) from None
    if not text.strip():
        raise RecordError("empty line (each line must hold one JSON object)", path=path, line=lineno)
    try:
        data = _loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"invalid JSON: {e.msg} (column {e.colno})", path=path, line=lineno) from None
    except ValueError as e:
        raise RecordError(f"invalid JSON: {e}", path=path, line=lineno) from None
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}", path=path, line=lineno)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise _from_validation_error(e, path=path, line=lineno) from None


def _tail_record(raw: bytes, model: type[M], path: Path, lineno: int) -> M | None:
    """A last line without newline: the record if it is complete and valid, else None."""
    try:
        return _parse_record(raw, model, path, lineno)
    except RecordError:
        return None


def _iter_jsonl(path: Path, model: type[M], warnings: list[str]) -> Iterator[tuple[int, M]]:
    """Stream ``(line_number, record)`` from a JSONL file, one line in memory at a time.

    A complete line (ending in ``\\n``) must be valid or :class:`RecordError` is raised.
    A last line without ``\\n`` is what an interrupted append leaves: it is yielded if it
    happens to be a complete valid record, otherwise skipped; either way a warning is added.
    """
    with open(path, "rb") as f:
        lineno = 0
        for raw in f:
            lineno += 1
            if raw.endswith(b"\n"):
                yield lineno, _parse_record(raw, model, path, lineno)
                continue
            record = _tail_record(raw, model, path, lineno)
            if record is not None:
                _warn(warnings, f"{path}:{lineno}: last line has no final newline (accepted: it is a complete record)")
                yield lineno, record
            else:
                _warn(
                    warnings,
                    f"{path}:{lineno}: ignored a partial last line ({len(raw)} bytes, no newline) "
                    "left by an interrupted write",
                )
            return


def _warn(warnings: list[str], message: str) -> None:
    warnings.append(message)
    log.warning("%s", message)


class ResultList(list[EpisodeResult]):
    """``list[EpisodeResult]`` with a ``warnings`` attribute (tolerated problems)."""

    def __init__(self, items: Any = (), warnings: list[str] | None = None) -> None:
        super().__init__(items)
        self.warnings: list[str] = list(warnings or [])


class StepStream(Iterator[StepRecord]):
    """Streaming iterator over an episode's steps (one line in memory at a time).

    ``warnings`` collects tolerated problems (a partial last line); it is complete once
    the iterator is exhausted.  Also checks that indices run 1, 2, 3, ...
    """

    def __init__(self, episode_path: str | os.PathLike[str]) -> None:
        self.path = own_file(episode_path, TRAJECTORY_FILE)
        if not self.path.is_file():
            raise RecordError("missing trajectory file", path=self.path)
        self.warnings: list[str] = []
        self._gen = self._steps()

    def _steps(self) -> Iterator[StepRecord]:
        expected = 1
        for lineno, step in _iter_jsonl(self.path, StepRecord, self.warnings):
            if step.index != expected:
                raise RecordError(
                    f"expected step index {expected}, got {step.index}", path=self.path, line=lineno, field="index"
                )
            expected += 1
            yield step

    def __iter__(self) -> StepStream:
        return self

    def __next__(self) -> StepRecord:
        return next(self._gen)

    def close(self) -> None:
        """Stop early and close the file."""
        self._gen.close()


def _read_json_object(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise RecordError("file is missing", path=path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise RecordError(f"not valid UTF-8 (byte 0x{raw[e.start]:02x})", path=path, line=line) from None
    try:
        data = _loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"invalid JSON: {e.msg} (column {e.colno})", path=path, line=e.lineno) from None
    except ValueError as e:
        raise RecordError(f"invalid JSON: {e}", path=path) from None
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}", path=path)
    return data


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest as a dict (already redacted on disk)."""
    return _read_json_object(own_file(run_dir, MANIFEST_FILE))


def read_results(run_dir: str | os.PathLike[str]) -> ResultList:
    """All results of a run, validated, in file order.

    A missing ``results.jsonl`` gives an empty list.  Raises :class:`RecordError`
    (``RUN/results.jsonl:LINE: field: problem``) on a malformed line or a second result
    for the same task id.  A partial last line is tolerated (see ``.warnings``).
    """
    path = own_file(run_dir, RESULTS_FILE)
    out = ResultList()
    if not path.exists():
        if not Path(run_dir).is_dir():
            raise RecordError("run folder does not exist", path=run_dir)
        return out
    first_line: dict[str, int] = {}
    for lineno, result in _iter_jsonl(path, EpisodeResult, out.warnings):
        if result.task_id in first_line:
            raise RecordError(
                f"duplicate result for task {result.task_id!r} (first at line {first_line[result.task_id]})",
                path=path,
                line=lineno,
                field="task_id",
            )
        first_line[result.task_id] = lineno
        out.append(result)
    return out


def iter_steps(episode_path: str | os.PathLike[str]) -> StepStream:
    """Stream the validated steps of ``RUN/episodes/<task-id>`` (see :class:`StepStream`)."""
    return StepStream(episode_path)


def read_summary(episode_path: str | os.PathLike[str]) -> EpisodeResult | None:
    """The episode's ``episode.json`` as an :class:`EpisodeResult` (extras kept), or None if absent."""
    path = own_file(episode_path, SUMMARY_FILE)
    if not path.exists():
        return None
    data = _read_json_object(path)
    try:
        return EpisodeResult.model_validate(data)
    except ValidationError as e:
        raise _from_validation_error(e, path=path) from None


def list_episodes(run_dir: str | os.PathLike[str]) -> list[str]:
    """Sorted task ids that have a folder under ``RUN/episodes`` (complete or partial —
    compare with :func:`read_results`).  Hidden entries and names that are not valid task
    ids are skipped."""
    base = Path(run_dir) / EPISODES_DIR
    if not base.is_dir():
        return []
    out = []
    for entry in base.iterdir():
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        if _TASK_ID_RE.fullmatch(entry.name):
            out.append(entry.name)
    return sorted(out)


# --------------------------------------------------------------------------- writing


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
        with contextlib.suppress(OSError):
            if self.results_path.stat().st_size > 0:
                return True
        if self.episodes_dir.is_dir():
            return any(not e.name.startswith(".") for e in self.episodes_dir.iterdir())
        return False

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
            if rel != TRAJECTORY_FILE and not _SCREEN_RE.fullmatch(rel):
                raise RecordError(f"an episode holds only {TRAJECTORY_FILE} and {SCREENS_DIR}/NNN.png, not {rel!r}",
                                  path=self.episodes_dir / task_id)
        with self._lock:  # fail before writing anything
            self._check_open()
            if task_id in self._completed:
                raise RecordError(f"task {task_id!r} already has a result; it is not run again", path=self.results_path)
        staging = self.episodes_dir / f"{INCOMING_PREFIX}{task_id}.{uuid.uuid4().hex[:8]}"
        try:
            (staging / SCREENS_DIR).mkdir(parents=True)
            for rel, name in names.items():
                data = bytes(files[name])
                if rel != TRAJECTORY_FILE and not data.startswith(_PNG_SIGNATURE):
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


# --------------------------------------------------------------------------- redaction


_SECRET_WORDS = frozenset(
    {"token", "secret", "secrets", "password", "passwd", "passphrase", "authorization", "apikey", "credential", "credentials"}
)
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey")
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")})
# Keys naming *where* a secret lives or *how big* something is are not secrets themselves:
# api_key_env, token_limit, max_tokens (plural never matches), password_file ...
_NOT_SECRET_LAST = frozenset(
    {"env", "var", "envvar", "variable", "name", "file", "path", "count", "limit", "len", "length",
     "type", "kind", "header", "url", "ttl", "expiry", "expires", "set", "present", "required"}
)

_VALUE_PATTERNS = [
    re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{15,}"),  # OpenAI / Anthropic style keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face tokens
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
]
_BEARER_RE = re.compile(r"\b(Bearer)(\s+)[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
_ASSIGN_RE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sep>=|:\s*)(?P<val>[^\s,;&\"']+)")
_FLAG_RE = re.compile(r"(?<!\S)(?P<flag>--?(?P<name>[A-Za-z][A-Za-z0-9_\-]*))(?P<sep>\s+)(?P<val>[^\s\-][^\s]*)")


# already redacted, or an auth scheme whose credential the Bearer rule handles
_KEEP_VALUES = frozenset({REDACTED, "Bearer", "bearer", "Basic", "basic", "Token", "token"})


def _key_words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def is_secret_key(key: Any) -> bool:
    """Whether a mapping key (or command-line flag name) names a secret.

    Matches, case-insensitively and in snake/kebab/camel case: ``api_key``, ``apikey``,
    ``x-api-key``, ``token``, ``access_token``, ``secret``, ``client_secret``, ``password``,
    ``authorization``, ``credentials``, ``private_key`` ...  Not: ``max_tokens``,
    ``prompt_tokens``, ``api_key_env``, ``token_limit``, ``key``.
    """
    if not isinstance(key, str):
        return False
    words = _key_words(key.lstrip("-"))
    if not words or words[-1] in _NOT_SECRET_LAST:
        return False
    for i, w in enumerate(words):
        if w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES):
            return True
        if i + 1 < len(words) and (w, words[i + 1]) in _SECRET_PAIRS:
            return True
    return False


def _redact_string(text: str) -> str:
    for pattern in _VALUE_PATTERNS:
        text = pattern.sub(REDACTED, text)
    text = _BEARER_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _ASSIGN_RE.sub(
        lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}"
        if is_secret_key(m.group("name")) and m.group("val") not in _KEEP_VALUES
        else m.group(0),
        text,
    )
    text = _FLAG_RE.sub(
        lambda m: f"{m.group('flag')}{m.group('sep')}{REDACTED}"
        if is_secret_key(m.group("name")) and m.group("val") not in _KEEP_VALUES
        else m.group(0),
        text,
    )
    return text


def redact(obj: Any) -> Any:
    """Return a copy of ``obj`` with secrets replaced by ``"***redacted***"``.

    * values of secret-looking keys (see :func:`is_secret_key`), at any depth, unless the
      value is None (kept so "no key configured" stays visible);
    * inside any string: ``sk-...``/``hf_...``/``ghp_...`` keys, ``Bearer <token>``,
      ``NAME=value`` / ``name: value`` where NAME looks secret, and ``--api-key value``;
    * in lists of strings (argv): the element following a secret flag such as
      ``--api-key`` or ``--token``.

    Dicts, lists and tuples are copied (tuples become lists); other values are returned
    unchanged.
    """
    if isinstance(obj, str):
        return _redact_string(obj)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if v is not None and is_secret_key(k):
                out[k] = REDACTED
            else:
                out[k] = redact(v)
        return out
    if isinstance(obj, (list, tuple)):
        items: list[Any] = []
        hide_next = False
        for item in obj:
            if hide_next and isinstance(item, str) and not item.startswith("-"):
                items.append(REDACTED)
                hide_next = False
                continue
            hide_next = False
            if isinstance(item, str) and item.startswith("-") and "=" not in item and is_secret_key(item):
                hide_next = True
            items.append(redact(item))
        return items
    return obj


# --------------------------------------------------------------------------- environment


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


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
