"""Versioned prompt files for the model-based judges, one file per judge stage and language.

A prompt file is Markdown with a small header and two sections, and a third for verdict prompts::

    ---
    name: crate_step
    language: en
    version: 1
    ---
    === system ===
    ...instructions...
    === user ===
    ...template with {{placeholders}}...
    === reask ===
    ...the line added when a reply was not the verdict and the question is asked again...

``load_prompt("crate_step", "en")`` reads ``crate_step_en.md``. Its identity (name, language,
version, sha256 of the file) goes into every judge's ``spec()`` and details, so a record says
exactly which wording produced a verdict; editing a prompt means bumping its ``version``
(tests check that every file declares one) and keeping the superseded file in ``archive/``. Placeholders are ``{{name}}``; rendering refuses a
missing or an unexpected value, and values are inserted once (never re-scanned), so text from the
phone or the agent cannot smuggle a placeholder in.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PROMPT_DIR = Path(__file__).resolve().parent
LANGUAGES = ("en", "zh")
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")
_HEADER = re.compile(r"\A---\n(.*?)\n---\n", re.S)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    language: str
    version: int
    sha256: str
    system: str
    user: str
    reask: str = ""

    @property
    def id(self) -> str:
        """``crate_step_en@v1#0123456789ab``: short, unique, changes with any edit of the file."""
        return f"{self.name}_{self.language}@v{self.version}#{self.sha256[:12]}"

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "language": self.language, "version": self.version, "sha256": self.sha256,
                "id": self.id}

    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.system)) | set(_PLACEHOLDER.findall(self.user))

    def render(self, **values: Any) -> tuple[str, str]:
        """(system text, user text) with every placeholder filled."""
        want = self.placeholders()
        missing, extra = want - set(values), set(values) - want
        if missing or extra:
            raise PromptError(f"prompt {self.id}: missing {sorted(missing)}, unexpected {sorted(extra)}")

        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)

        return fill(self.system).strip(), fill(self.user).strip()

    def render_reask(self, **values: Any) -> tuple[str, str]:
        """(system text, user text) for asking again after a reply that was not the verdict: the
        same question, the system text ending with the file's ``reask`` line (the user text, which
        carries the step's own lines, is left as it is)."""
        system, user = self.render(**values)
        if not self.reask.strip():
            raise PromptError(f"prompt {self.id} has no '=== reask ===' section")
        return f"{system}\n\n{self.reask.strip()}", user


def _parse(path: Path, as_name: str | None = None) -> Prompt:
    raw = path.read_bytes()
    text = raw.decode("utf-8").replace("\r\n", "\n")
    m = _HEADER.match(text)
    if not m:
        raise PromptError(f"{path.name}: missing the --- header ---")
    meta: dict[str, str] = {}
    for line in m.group(1).splitlines():
        if line.strip():
            k, _, v = line.partition(":")
            meta[k.strip()] = v.strip()
    body = text[m.end():]
    parts = re.split(r"^=== (system|user|reask) ===\s*$", body, flags=re.M)
    names = [parts[i] for i in range(1, len(parts) - 1, 2)]
    sections = {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    if len(names) != len(set(names)) or not {"system", "user"} <= set(names):
        raise PromptError(f"{path.name}: needs exactly one '=== system ===' and one '=== user ===' section "
                          "(and at most one '=== reask ===')")
    try:
        version = int(meta["version"])
    except (KeyError, ValueError):
        raise PromptError(f"{path.name}: the header needs an integer version") from None
    name, language = meta.get("name", ""), meta.get("language", "")
    if f"{name}_{language}.md" != (as_name or path.name):
        raise PromptError(f"{path.name}: header says name={name!r} language={language!r}")
    return Prompt(name, language, version, hashlib.sha256(raw).hexdigest(), sections["system"], sections["user"],
                  sections.get("reask", ""))


ARCHIVE_DIR = PROMPT_DIR / "archive"


@lru_cache(maxsize=None)
def load_prompt(name: str, language: str, version: int | None = None) -> Prompt:
    """The current prompt, or an earlier ``version`` of it: superseded versions stay readable in
    ``archive/NAME_LANG.vN.md`` (byte for byte, so their sha256 still matches older records)."""
    if language not in LANGUAGES:
        raise PromptError(f"no prompts in language {language!r} (have {', '.join(LANGUAGES)})")
    path = PROMPT_DIR / f"{name}_{language}.md"
    if not path.is_file():
        raise PromptError(f"no prompt file {path.name} in {PROMPT_DIR}")
    current = _parse(path)
    if version is None or version == current.version:
        return current
    old = ARCHIVE_DIR / f"{name}_{language}.v{version}.md"
    if not old.is_file():
        kept = sorted(p.name for p in ARCHIVE_DIR.glob(f"{name}_{language}.v*.md")) if ARCHIVE_DIR.is_dir() else []
        raise PromptError(f"no version {version} of {name}_{language} (current: {current.version}; archived: "
                          f"{', '.join(kept) or 'none'})")
    return _parse(old, f"{name}_{language}.md")


def available() -> list[tuple[str, str]]:
    """(name, language) of every prompt file shipped."""
    out = []
    for p in sorted(PROMPT_DIR.glob("*.md")):
        stem = p.stem
        for lang in LANGUAGES:
            if stem.endswith("_" + lang):
                out.append((stem[: -len(lang) - 1], lang))
    return out
