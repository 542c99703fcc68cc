"""``harness sim serve --command-log FILE``: every shell command line the simulated phone receives,
appended to FILE as one JSON line, so a test (or a curious user) can prove what was and was not
run on the device.

    {"seq": 12, "time": "2026-05-09T07:35:25.123+00:00", "line": "am force-stop com.android.settings",
     "argv": [["am", "force-stop", "com.android.settings"]]}

``line`` is the command line exactly as it arrived (``shell:``, ``shell,v2:``, ``exec:`` or a line
of an interactive shell); ``argv`` splits it into the simple commands it holds, quotes removed and
``$VAR`` / ``$(...)`` left as written (a syntax error gives ``argv: null`` and ``error``). A line
is written, and flushed, before the command runs, so a command that never returns is logged too.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
from pathlib import Path
from typing import Any


class CommandLog:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._seq = 0

    def append(self, line: str, argv: list[list[str]] | None, error: str | None = None) -> None:
        with self._lock:
            self._seq += 1
            rec: dict[str, Any] = {"seq": self._seq,
                                   "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
                                   "line": line, "argv": argv}
            if error:
                rec["error"] = error
            self._file.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_command_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a command log, in order."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def ran(records: list[dict[str, Any]], *prefix: str) -> list[list[str]]:
    """Every simple command in ``records`` whose argv starts with ``prefix`` (e.g. "pm", "clear")."""
    n = len(prefix)
    return [argv for r in records for argv in (r.get("argv") or []) if argv[:n] == list(prefix)]
