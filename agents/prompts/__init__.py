"""Agent prompts as versioned text files, and their identity.

Each ``*.md`` file here starts with one header line ``<!-- prompt: NAME | version: N -->`` (not sent
to the model) followed by the template. Placeholders are written ``{{name}}`` so that JSON braces in
a prompt need no escaping. A prompt's identity is ``NAME@vN:SHA12``: the sha256 prefix of the
template text, so two runs used the same prompt exactly when their ids are equal (FIELD_NOTES
section 7: reproductions fail when the prompt was not recorded).

Prompts that come from a package (the UI-TARS prompt constants of ``ui-tars``) get an identity
through :func:`identity` the same way.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# the header line and its own line break only: blank lines after it belong to the template (Qwen3-VL's
# system prompt starts with two line breaks, as its cookbook's does)
_HEADER = re.compile(r"\A<!--\s*prompt:\s*(?P<name>[\w.-]+)\s*\|\s*version:\s*(?P<version>[\w.-]+)\s*-->[ \t]*\r?\n")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptError(ValueError):
    pass


def sha12(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    text: str            # the template, header removed
    source: str          # file path or package constant

    @property
    def sha(self) -> str:
        return sha12(self.text)

    @property
    def id(self) -> str:
        return f"{self.name}@v{self.version}:{self.sha}"

    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER.findall(self.text))

    def render(self, **values: Any) -> str:
        missing = self.placeholders() - set(values)
        if missing:
            raise PromptError(f"prompt {self.name}: no value for {', '.join(sorted(missing))}")
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "version": self.version, "sha256_12": self.sha,
                "source": self.source}


@functools.lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    """``load_prompt("m3a_en")`` reads ``agents/prompts/m3a_en.md``."""
    path = HERE / f"{name}.md"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in HERE.glob("*.md")))
        raise PromptError(f"no prompt {name!r} (known: {known})")
    raw = path.read_text(encoding="utf-8")
    m = _HEADER.match(raw)
    if not m:
        raise PromptError(f"{path}: the first line must be <!-- prompt: NAME | version: N -->")
    if m.group("name") != name:
        raise PromptError(f"{path}: header names {m.group('name')!r}, file is {name!r}")
    return Prompt(name=name, version=m.group("version"), text=raw[m.end():], source=f"agents/prompts/{path.name}")


def identity(name: str, version: str, text: str, source: str) -> Prompt:
    """A prompt that lives elsewhere (a package constant), with the same kind of identity."""
    return Prompt(name=name, version=version, text=text, source=source)
