"""JSON as the records write it: any value made JSON-safe (dataclasses, enums, paths, bytes,
non-finite floats refused), one line per record, surrogates and line breaks escaped."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import decimal
import enum
import json
import math
import re
import uuid
from collections.abc import Iterator, Mapping
from pathlib import PurePath
from typing import Any
from pydantic import BaseModel

from harness.records.errors import RecordError


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
