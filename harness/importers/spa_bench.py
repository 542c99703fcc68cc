"""Convert SPA-Bench task lists (``data/*.csv`` of ai-agents-2030/SPA-Bench) into our YAML suites.

Columns, as the CSVs have them: single-app files ``task_identifier, task_app, task_language,
task_description, task_difficulty, golden_steps, key_component_final, adb_app, adb_home_page,
is_cross_app``; cross-app files ``task_identifier, category, task_language, task_app (a list
literal of app names), task_description, task_difficulty, golden_steps, is_cross_app``.
``golden_steps`` is the human reference step count, our ``reference_steps`` (the c of the 2c+1 cap,
SPA-Bench ``framework/agents.py``). Real-phone tasks have no success check here: they are judged by
the model-based judges (CRATE, holistic with the key components as SPA-Bench's text pre-check).
"""

from __future__ import annotations

import ast
import csv
import io
import re
from pathlib import Path
from typing import Any

import yaml

from harness.core.tasks import TaskError, parse_task

_LANG = {"ENG": "en", "EN": "en", "CHN": "zh", "ZH": "zh"}
# our task fields -> the CSV columns they come from, so errors name what the user can fix
_COLUMN_OF = {"id": "task_identifier", "instruction": "task_description", "language": "task_language",
              "reference_steps": "golden_steps", "difficulty": "task_difficulty", "apps": "task_app",
              "key_components": "key_component_final", "setup": "adb_app"}


class ImportError_(ValueError):
    pass


def _fail(path: Path, row: int, column: str, msg: str) -> ImportError_:
    return ImportError_(f"{path}:{row}: {column}: {msg}")


def _literal_list(text: str, path: Path, row: int, column: str) -> list[str]:
    """SPA-Bench stores lists as Python literals ("['1','guest']"); read them without eval."""
    text = (text or "").strip()
    if not text:
        return []
    try:
        value = ast.literal_eval(text)  # literals only: no names, calls or attributes are evaluated
    except (ValueError, SyntaxError):
        raise _fail(path, row, column, f"not a list literal: {text[:60]!r}") from None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int, float)) for v in value):
        raise _fail(path, row, column, "expected a list of strings")
    return [str(v) for v in value]


def _safe_id(raw: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", raw.strip()).strip("._-")
    return s[:128] or "task"


def convert_row(rec: dict[str, str], path: Path, row: int) -> dict[str, Any]:
    def need(col: str) -> str:
        v = rec.get(col)
        if v is None or not str(v).strip():
            raise _fail(path, row, col, "missing value")
        return str(v).strip()

    ident = need("task_identifier")
    lang = _LANG.get(need("task_language").upper())
    if lang is None:
        raise _fail(path, row, "task_language", f"unknown language {rec.get('task_language')!r} (ENG or CHN)")
    raw_steps = need("golden_steps")
    try:
        steps = int(raw_steps)
    except ValueError:
        raise _fail(path, row, "golden_steps", f"not an integer: {rec.get('golden_steps')!r}") from None
    if steps < 1:
        raise _fail(path, row, "golden_steps", "must be >= 1")
    cross = str(rec.get("is_cross_app", "N")).strip().upper() == "Y"
    # single-app files reuse identifiers across languages (calendar_0 is in ENG and CHN):
    # suffix the language the way the cross-app files already do, so one suite can hold both
    tag = need("task_language").upper()
    uid = ident if ident.upper().endswith("_" + tag) else f"{ident}_{tag}"
    task: dict[str, Any] = {
        "id": _safe_id(uid),
        "instruction": need("task_description"),
        "language": lang,
        "categories": ["cross-app" if cross else "single-app"],
        "reference_steps": steps,
        "source": f"SPA-Bench {path.name} row {row} ({ident})",
    }
    diff = (rec.get("task_difficulty") or "").strip()
    if diff:
        try:
            task["difficulty"] = int(diff)
        except ValueError:
            raise _fail(path, row, "task_difficulty", f"not an integer: {diff!r}") from None
    if rec.get("category"):
        task["categories"].append(str(rec["category"]).strip())
    package = (rec.get("adb_app") or "").strip()
    if package:
        task["apps"] = [package]
        # force-stop, never clear: SPA-Bench's apps are installed and logged in on the user's phone,
        # and `pm clear` would log its owner out and erase the app's data
        setup: dict[str, Any] = {"stop": [package]}
        home = (rec.get("adb_home_page") or "").strip()
        if home:
            setup["start"] = f"{package}/{home}"
        task["setup"] = setup
    else:
        task["apps"] = _literal_list(rec.get("task_app", ""), path, row, "task_app")
    if rec.get("key_component_final"):
        task["key_components"] = _literal_list(rec["key_component_final"], path, row, "key_component_final")
    return task


def convert_file(csv_path: str | Path) -> list[dict[str, Any]]:
    path = Path(csv_path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # the cross-app files start with a BOM
    except OSError as e:
        raise ImportError_(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ImportError_(f"{path}: not UTF-8 (byte {e.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))  # keeps line breaks inside quoted fields
    required = {"task_identifier", "task_language", "task_description", "golden_steps"}
    missing = required - set(reader.fieldnames or [])
    if missing:
        raise ImportError_(f"{path}: not a SPA-Bench task list: missing column(s) {', '.join(sorted(missing))}")
    tasks = []
    seen: dict[str, int] = {}
    for rec in reader:
        row = reader.line_num  # the file line where this record ends (1 = the header)
        t = convert_row(rec, path, row)
        if t["id"] in seen:
            raise _fail(path, row, "task_identifier", f"duplicate id {t['id']!r} (also row {seen[t['id']]})")
        seen[t["id"]] = row
        try:
            parse_task(t, path, row)  # everything we write must load back
        except TaskError as e:
            field = (e.field or "task").split(".")[0]
            raise _fail(path, row, _COLUMN_OF.get(field, field), e.message) from None
        tasks.append(t)
    return tasks


def import_files(csv_paths: list[str | Path], out_dir: str | Path) -> list[tuple[Path, int]]:
    """Write one YAML suite per CSV into ``out_dir``; returns (file, task count) pairs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for p in csv_paths:
        tasks = convert_file(p)
        dest = out / (Path(p).stem + ".yaml")
        header = (f"# Imported from SPA-Bench {Path(p).name} by `harness tasks import spa-bench`.\n"
                  "# Real-phone tasks: the app must be installed and logged in; no success check is defined.\n"
                  "# Each reset force-stops the app and starts it (setup.stop, setup.start); it never clears its data.\n")
        tmp = dest.with_suffix(".yaml.tmp")
        tmp.write_text(header + yaml.safe_dump(tasks, allow_unicode=True, sort_keys=False, width=120), encoding="utf-8")
        tmp.replace(dest)
        written.append((dest, len(tasks)))
    return written
