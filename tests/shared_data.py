"""The shared reference data: ``../shared/reference/`` beside the repository, as CI lays it out
(``/work/shared/reference/README.md`` there names each file's source and license; the data is never
copied into the repository).

One rule for every test that reads it: where a file or folder is absent, the test is skipped with a
reason that starts with :data:`SKIP_REASON`, and ``scripts/test`` prints how many tests were skipped
for it (``tests/conftest.py``'s terminal summary). Never fail, never pass silently, for missing data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
REFERENCE = SHARED / "reference"
SKIP_REASON = "shared reference data missing"


def reference_path(*parts: str) -> Path | None:
    """``../shared/reference/<parts>``, or None where it is absent (for collection-time use:
    parametrize over what is there, and skip with :func:`skip_missing` where nothing is)."""
    p = REFERENCE.joinpath(*parts)
    return p if p.exists() else None


def missing_reason(*parts: str) -> str:
    rel = "/".join(("../shared/reference",) + parts)
    return f"{SKIP_REASON}: {rel} is not beside the repository (CI lays ../shared out there)"


def reference(*parts: str) -> Path:
    """``../shared/reference/<parts>``; skips the calling test, saying which file, where it is absent."""
    p = reference_path(*parts)
    if p is None:
        pytest.skip(missing_reason(*parts))
    return p


def skip_missing(*parts: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark for a test (or module: ``pytestmark = skip_missing(...)``) that needs the file."""
    return pytest.mark.skipif(reference_path(*parts) is None, reason=missing_reason(*parts))
