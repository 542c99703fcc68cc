"""The one error of the records: a problem with a record, naming ``file:line: field: problem``."""

from __future__ import annotations

import os


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
