"""Reading runs back: every line validated (errors name ``file:line: field: problem``), a torn last
line tolerated with a warning, steps streamed one at a time."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from pydantic import ValidationError

from harness.records.errors import RecordError
from harness.records.json_text import _join, _loads
from harness.records.layout import (EPISODES_DIR, MANIFEST_FILE, RESULTS_FILE, SUMMARY_FILE, TRAJECTORY_FILE,
                                    _TASK_ID_RE, own_file)
from harness.records.schema import EpisodeResult, M, StepRecord


log = logging.getLogger("harness.records")  # the name it had as one module


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
