"""Reading another benchmark's files safely, for the importers (:mod:`.trajectories`,
:mod:`.mobilerisk`): Python pickles are never opened (unpickling runs code chosen by whoever wrote
the file), a path given in a file must be relative and stay inside the source folder (no absolute
paths, no ``..``, no symlink escapes), and JSON, JSONL, screenshots, task ids, languages and flags
are read with an error that names the file at fault (:class:`TrajectoryImportError`)."""


from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from harness.records import check_relative_path

PICKLE_SUFFIXES = (".pkl", ".pickle", ".pkl.gz", ".pickle.gz", ".pkl.bz2", ".pkl.xz", ".pkl.zst", ".pickle.bz2",
                   ".pickle.xz")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LANGS = {"en": "en", "eng": "en", "english": "en", "zh": "zh", "chn": "zh", "cn": "zh", "zh-cn": "zh", "chinese": "zh"}


class TrajectoryImportError(ValueError):
    """A problem with the data being imported, as one line naming the file at fault."""


# --------------------------------------------------------------------------- safety helpers


def is_pickle(path: str | Path) -> bool:
    name = Path(path).name.lower()
    return name.endswith(PICKLE_SUFFIXES)


def pickle_refusal(path: str | Path) -> TrajectoryImportError:
    return TrajectoryImportError(
        f"{path}: refusing to read a Python pickle. Unpickling runs code chosen by whoever wrote the "
        "file, so a downloaded trajectory could take over this machine. Convert it where you trust it "
        "(e.g. in AndroidWorld's own environment): save each screenshot as 0.png, 1.png, ... and the "
        "actions as actions.json (AndroidWorld JSONAction dicts) with the goal and label in episode.json, "
        "then import that folder (layout in docs/judges.md, 'Offline judging, importers and agreement')")


def safe_child(base: Path, rel: Any, what: str) -> Path:
    """``base/rel`` for a path read from a data file: relative, no ``..``, inside ``base``."""
    if not isinstance(rel, str):
        raise TrajectoryImportError(f"{base}: {what}: expected a relative path string, got {type(rel).__name__}")
    try:
        check_relative_path(rel)
    except ValueError as e:
        raise TrajectoryImportError(f"{base}: {what}: {e}") from None
    path = base / rel
    if not path.resolve().is_relative_to(base.resolve()):
        raise TrajectoryImportError(f"{base}: {what}: {rel!r} resolves outside the episode folder")
    if is_pickle(path):
        raise pickle_refusal(path)
    return path


def read_text(path: Path) -> str:
    """A file's UTF-8 text (a BOM is dropped); TrajectoryImportError naming the file otherwise."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise TrajectoryImportError(f"{path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise TrajectoryImportError(f"{path}: not UTF-8 text (byte {e.start})") from None


def source_folder(src: str | Path) -> Path:
    """The folder an importer reads: a pickle is refused unread, a missing folder named."""
    root = Path(src)
    if is_pickle(root):
        raise pickle_refusal(root)
    if not root.is_dir():
        raise TrajectoryImportError(f"{root}: no such folder")
    return root


def read_json(path: Path) -> Any:
    if is_pickle(path):
        raise pickle_refusal(path)
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TrajectoryImportError(f"{path}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None


def read_jsonl(path: Path) -> list[Any]:
    text = read_text(path)
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise TrajectoryImportError(f"{path}:{i}: invalid JSON: {e.msg} (column {e.colno})") from None
    return out


def png_bytes(path: Path) -> tuple[bytes, tuple[int, int]]:
    """The screenshot as PNG bytes (other image formats are converted) and its size."""
    from PIL import Image, UnidentifiedImageError

    try:
        data = path.read_bytes()
    except OSError as e:
        raise TrajectoryImportError(f"{path}: cannot read the screenshot: {e.strerror}") from None
    try:
        img = Image.open(io.BytesIO(data))
        size = img.size
        if data.startswith(_PNG_SIGNATURE):
            return data, size
        img.load()
        buf = io.BytesIO()
        img.convert("RGB" if img.mode not in ("RGB", "RGBA", "L") else img.mode).save(buf, format="PNG")
        return buf.getvalue(), size
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        raise TrajectoryImportError(f"{path}: not a readable image ({e})") from None


def safe_task_id(raw: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", raw.strip()).strip("._-")
    return s[:128] or "episode"


def guess_language(text: str) -> str:
    return "zh" if _CJK.search(text or "") else "en"


def norm_language(value: Any, text: str, where: str) -> str:
    if value is None or value == "":
        return guess_language(text)
    lang = _LANGS.get(str(value).strip().lower())
    if lang is None:
        raise TrajectoryImportError(f"{where}: language: {value!r} is not en or zh (ENG/CHN accepted)")
    return lang


def as_bool(value: Any, key: str, where: str) -> bool | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise TrajectoryImportError(f"{where}: {key}: expected true/false or 0/1, got {value!r}")
