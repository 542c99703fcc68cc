"""A pytest plugin (``-p tests.shared_reads``) that records which tests read the shared reference
data (through tests/shared_data.py) and how every test ended, into the JSON file named by
``CRATE_SHARED_READS``; with ``CRATE_NO_SHARED=1`` it hides the data, as on a checkout without
``../shared``. tests/test_shared_data_rule.py runs a test module twice with it: every test that read
the data when it was there must be skipped, saying so, when it is not."""

from __future__ import annotations

import json
import os
from pathlib import Path

import tests.shared_data as shared

if os.environ.get("CRATE_NO_SHARED"):
    shared.REFERENCE = Path("/nonexistent/shared/reference")

_current: list[str | None] = [None]
_reads: set[str] = set()
_outcomes: dict[str, list[str]] = {}
_lookup = shared.reference_path


def _reference_path(*parts: str):
    found = _lookup(*parts)
    if _current[0] is not None and found is not None:
        _reads.add(_current[0])
    return found


shared.reference_path = _reference_path


def pytest_runtest_setup(item):
    _current[0] = item.nodeid


def pytest_runtest_teardown(item):
    _current[0] = None


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
        _outcomes[report.nodeid] = [report.outcome, str(reason)]


def pytest_sessionfinish(session):
    out = os.environ.get("CRATE_SHARED_READS")
    if out:
        Path(out).write_text(json.dumps({"reads": sorted(_reads), "outcomes": _outcomes}), encoding="utf-8")
