"""A device profile's folder: what a phone answered to the harness's read-only commands, one file
per command, kept byte for byte, and ``manifest.json`` saying what each file is.

``harness devices capture SERIAL --out DIR`` writes one (``harness.device.capture``);
``harness sim serve --profile DIR`` serves one (``harness.sim.profile``): a profile folder is a
capture folder. The two sides never import each other (the host's device code and the simulated
phone meet only over ADB); this module is the format they share::

    DIR/manifest.json        this file's format (below)
    DIR/getprop.txt          the answer to `getprop`, as the phone sent it (CRLF, warnings kept)
    DIR/dumpsys-window-displays.txt
    DIR/screencap-p.head     an image's answer: only the bytes before the image (a warning, if any)
    ...

``manifest.json``::

    {"format": 1, "kind": "crate-harness device profile", "name": "...",
     "captured_at": "2026-05-09T07:35:25+00:00", "harness_version": "0.1.0",
     "device": {"model": "Pixel 8", "manufacturer": "Google", "brand": "google", "product": "shiba",
                "device": "shiba", "sdk": 34, "release": "14", "build": "AP2A.240805.005",
                "fingerprint": "google/shiba/shiba:14/..."},
     "answers": [{"command": "getprop", "service": "shell", "file": "getprop.txt", "bytes": 31234,
                  "origin": "captured"},
                 {"command": "screencap -p", "service": "exec", "file": "screencap-p.head", "bytes": 0,
                  "origin": "captured", "image": {"format": "png", "width": 1080, "height": 2400,
                                                   "bytes": 2345678}}, ...],
     "not_captured": [{"command": "getevent -lt", "why": "..."}],
     "redactions": [{"file": "getprop.txt", "prop": "ro.serialno", "kind": "serial number"},
                    {"file": "dumpsys-input.txt", "what": "MAC address", "count": 2}],
     "foreground": {"package": "com.android.settings", "activity": "com.android.settings.Settings",
                    "components": ["com.android.settings/.Settings", "com.android.settings/com.android.settings.Settings"],
                    "windows": []},
     "notes": ["..."]}

``command`` is the command line as the harness sends it (``shell:`` + the words joined with
shell quoting); ``service`` is ``shell`` or ``exec`` (``adb exec-out``: binary clean, stderr mixed
in); ``origin`` is ``captured`` for a capture, or where a shipped profile's file came from
(``transcript ...``, ``derived ...``, ``filled ...``: see its SOURCES file). Values removed by the
capture are listed in ``redactions`` by name and rule, never by value.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
FORMAT = 1
KIND = "crate-harness device profile"
REDACTED = "REDACTED"  # what a removed value reads as (a word: bracketed getprop values stay parseable)
SERVICES = ("shell", "exec")


class ProfileError(ValueError):
    """A profile folder that cannot be read: the message names the file and the field."""


@dataclass
class Answer:
    command: str
    service: str
    file: str
    bytes: int
    origin: str = "captured"
    image: dict[str, Any] | None = None     # an image's format, width, height and size (its head is the file)
    error: str | None = None                # the command could not be asked (the connection failed)
    pulled: str | None = None               # the file holding what the command wrote on the phone (UI dump)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class Manifest:
    name: str
    captured_at: str
    harness_version: str
    device: dict[str, Any]
    answers: list[Answer]
    not_captured: list[dict[str, str]] = field(default_factory=list)
    redactions: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # the app in front when the phone was asked: its package, activity and the ways the answers
    # spell it (``pkg/.Act``, ``pkg/pkg.Act``); the simulated phone puts its own app there
    foreground: dict[str, Any] = field(default_factory=dict)

    def answer(self, command: str) -> Answer | None:
        return next((a for a in self.answers if a.command == command), None)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "kind": KIND, "name": self.name, "captured_at": self.captured_at,
                "harness_version": self.harness_version, "device": self.device,
                "answers": [a.to_json() for a in self.answers], "not_captured": self.not_captured,
                "redactions": self.redactions, "notes": self.notes, "foreground": self.foreground}


def file_for(command: str, suffix: str = ".txt") -> str:
    """The file a command's answer is kept in: its words joined by '-', other characters dropped
    (``dumpsys SurfaceFlinger --display-id`` -> ``dumpsys-SurfaceFlinger-display-id.txt``)."""
    slug = re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9._]+", "-", command)).strip("-")
    return (slug or "answer") + suffix


def write_manifest(folder: Path, manifest: Manifest) -> Path:
    path = folder / MANIFEST
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _need(d: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in d:
        raise ProfileError(f"{where}: '{key}' is missing")
    if not isinstance(d[key], kind):
        raise ProfileError(f"{where}: '{key}' must be {getattr(kind, '__name__', kind)}, not {type(d[key]).__name__}")
    return d[key]


def read_manifest(folder: Path) -> Manifest:
    """The manifest of a profile folder, checked; ProfileError naming the file and field."""
    path = Path(folder) / MANIFEST
    if not Path(folder).is_dir():
        raise ProfileError(f"{folder}: not a folder (a profile is the folder `harness devices capture --out` wrote)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"{path}: missing (a profile folder holds the manifest.json its capture wrote)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProfileError(f"{path}: cannot be read: {e}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: not a JSON object")
    if data.get("kind") != KIND:
        raise ProfileError(f"{path}: 'kind' is {data.get('kind')!r}, not {KIND!r}")
    if data.get("format") != FORMAT:
        raise ProfileError(f"{path}: 'format' {data.get('format')!r} is not one this harness reads ({FORMAT})")
    answers = []
    for i, a in enumerate(_need(data, "answers", list, str(path))):
        where = f"{path}: answers[{i}]"
        if not isinstance(a, dict):
            raise ProfileError(f"{where}: not an object")
        service = _need(a, "service", str, where)
        if service not in SERVICES:
            raise ProfileError(f"{where}: 'service' is {service!r}, not one of {', '.join(SERVICES)}")
        file = _need(a, "file", str, where)
        if "/" in file or "\\" in file or file.startswith(".") or file == MANIFEST:
            raise ProfileError(f"{where}: 'file' {file!r} is not a plain file name in the folder")
        image = a.get("image")
        if image is not None and not isinstance(image, dict):
            raise ProfileError(f"{where}: 'image' must be an object")
        pulled = a.get("pulled")
        if pulled is not None and (not isinstance(pulled, str) or "/" in pulled or pulled.startswith(".")):
            raise ProfileError(f"{where}: 'pulled' {pulled!r} is not a plain file name in the folder")
        answers.append(Answer(command=_need(a, "command", str, where), service=service, file=file,
                              bytes=int(a.get("bytes") or 0), origin=str(a.get("origin") or "captured"),
                              image=image, error=a.get("error"), pulled=pulled))
    return Manifest(name=str(data.get("name") or Path(folder).name), captured_at=str(data.get("captured_at") or ""),
                    harness_version=str(data.get("harness_version") or ""),
                    device=dict(_need(data, "device", dict, str(path))), answers=answers,
                    not_captured=list(data.get("not_captured") or []), redactions=list(data.get("redactions") or []),
                    notes=[str(n) for n in data.get("notes") or []], foreground=_foreground(data, path))


def _foreground(data: dict[str, Any], path: Path) -> dict[str, Any]:
    fg = data.get("foreground") or {}
    if not isinstance(fg, dict):
        raise ProfileError(f"{path}: 'foreground' must be an object")
    for key in ("components", "windows"):
        if not isinstance(fg.get(key, []), list) or not all(isinstance(x, str) and x for x in fg.get(key, [])):
            raise ProfileError(f"{path}: 'foreground.{key}' must be a list of non-empty strings")
    return fg


def read_answer(folder: Path, answer: Answer) -> bytes:
    """The bytes of one answer; ProfileError naming the file when it is missing."""
    path = Path(folder) / answer.file
    try:
        return path.read_bytes()
    except OSError as e:
        raise ProfileError(f"{path}: cannot be read ({e.strerror}); the manifest lists it for "
                           f"`{answer.command}`") from None
