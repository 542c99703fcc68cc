"""Pinyin -> characters for the simulated keyboard's Chinese mode.

The readings come from pypinyin's character dictionary (``pypinyin.pinyin_dict``, built from the
Unicode Han database and other public sources; MIT). A syllable is typed without tones, ``v``
standing for ``ü`` (``nv`` for 女), as pinyin keyboards expect. Candidates are ordered as a
keyboard orders them, most likely first: a character's main reading before its other readings,
GB 2312's level-1 characters (the 3,755 in common use) before the rest, then by how many of
pypinyin's phrases use the character (a stand-in for frequency: the data has none).
"""

from __future__ import annotations

import functools
import unicodedata


def toneless(syllable: str) -> str:
    """``lǜ`` -> ``lv``, ``wáng`` -> ``wang``."""
    s = unicodedata.normalize("NFD", syllable.lower()).replace("u\u0308", "v")
    return "".join(ch for ch in s if not unicodedata.combining(ch))


def _level1(ch: str) -> bool:
    try:
        return ch.encode("gb2312")[0] < 0xD8  # level-1 rows are 16-55 (first byte 0xB0-0xD7)
    except UnicodeEncodeError:
        return False


@functools.lru_cache(maxsize=1)
def index() -> dict[str, list[str]]:
    """Toneless syllable -> its characters, best candidate first (built once, ~1 s)."""
    from collections import Counter

    from pypinyin.phrases_dict import phrases_dict
    from pypinyin.pinyin_dict import pinyin_dict

    uses: Counter[str] = Counter()
    for phrase in phrases_dict:
        uses.update(set(phrase))
    ranked: dict[str, list[tuple[tuple, str]]] = {}
    for cp, readings in pinyin_dict.items():
        ch = chr(cp)
        seen: set[str] = set()
        for i, reading in enumerate(readings.split(",")):
            syl = toneless(reading)
            if syl in seen:
                continue
            seen.add(syl)
            ranked.setdefault(syl, []).append(((i > 0, not _level1(ch), -uses[ch], cp), ch))
    return {syl: [ch for _, ch in sorted(items)] for syl, items in ranked.items()}


def readings(ch: str) -> list[str]:
    """The toneless readings of one character, main reading first (empty for a non-Han one)."""
    from pypinyin.pinyin_dict import pinyin_dict

    out: list[str] = []
    for reading in pinyin_dict.get(ord(ch), "").split(","):
        syl = toneless(reading)
        if syl and syl not in out:
            out.append(syl)
    return out


def candidates(composing: str) -> list[str]:
    """Characters for the letters typed so far: the syllable's own characters, then (for an
    unfinished syllable such as ``zh``) those of every syllable it begins."""
    idx = index()
    exact = idx.get(composing, [])
    if exact:
        return list(exact)
    longer = sorted((s for s in idx if s.startswith(composing)), key=len)
    out: list[str] = []
    for syl in longer:
        out.extend(ch for ch in idx[syl][:8] if ch not in out)
    return out
