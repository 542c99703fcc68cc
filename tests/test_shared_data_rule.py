"""tests/shared_data.py's rule, checked by running tests both ways: a test that reads the shared
reference data (``../shared/reference``) when it is there is skipped, with the rule's reason, when it
is not; it never passes silently without it (issue 40: tests/sim/test_profiles.py did, comparing the
profiles with the transcripts only ``if real is not None``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.shared_data import ROOT, SKIP_REASON, reference

MODULES = ["tests/sim/test_profiles.py"]


def _run(tmp_path, name: str, hide: bool) -> dict:
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "CRATE_SHARED_READS": str(out), **({"CRATE_NO_SHARED": "1"} if hide else {})}
    env.pop("PYTEST_XDIST_WORKER", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "tests.shared_reads", "-p",
                        "no:cacheprovider", *MODULES], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_a_test_that_reads_the_shared_data_is_skipped_without_it(tmp_path):
    reference()  # the first run needs the data, to see who reads it
    there = _run(tmp_path, "there", hide=False)
    assert there["reads"], "no test read the shared data: the check checks nothing"
    assert all(there["outcomes"][t][0] == "passed" for t in there["reads"]), there["outcomes"]
    gone = _run(tmp_path, "gone", hide=True)
    wrong = {t: gone["outcomes"].get(t) for t in there["reads"]
             if gone["outcomes"].get(t, [""])[0] != "skipped" or SKIP_REASON not in gone["outcomes"][t][1]}
    assert not wrong, f"without ../shared these tests did not skip with {SKIP_REASON!r}: {wrong}"
    failed = {t: o for t, o in gone["outcomes"].items() if o[0] == "failed"}
    assert not failed, failed
