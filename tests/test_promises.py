"""The promise table (tests/promises.yaml, explained in tests/promises.md) against the code, on every
run: each promise whose code exists has tests and a mutation, each mutation's text is found exactly
once in its file (a table that no longer fits the code fails here, not months later in
scripts/mutants), and each named test exists. scripts/mutants itself, which applies the mutations
and runs the tests (minutes), is exercised once on a small table of its own: a mutant killed, one
that survives, and the exit status that says so."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.shared_data import ROOT

_spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mutants
_spec.loader.exec_module(mutants)

TABLE = mutants.load()


@pytest.mark.parametrize("promise", TABLE, ids=[p.id for p in TABLE])
def test_every_mutation_still_applies_and_every_named_test_exists(promise):
    assert mutants.problems(promise) == []


def test_the_table_covers_the_promises_the_issue_names():
    ids = {p.id for p in TABLE}
    assert {"fail-closed", "executed-flags", "blocked-not-unsafe", "persons-steps-not-capped", "needs-user-never-success",
            "cap", "reflect-count", "calibration-threshold", "redaction-before-cut", "ask-timeout",
            "one-run-per-phone", "guard-blocked-never-reaches-phone"} <= ids
    assert all((p.pending is None) == (p.mutation is not None) for p in TABLE)


def test_a_row_that_no_longer_fits_is_named(tmp_path):
    (tmp_path / "t.yaml").write_text(
        "- id: gone\n  promise: p\n  tests: [tests/judges/test_oracle.py::test_no_such_test]\n"
        "  mutation: {name: n, file: judges/oracle.py, replace: 'text that is not there', with: x}\n", encoding="utf-8")
    (p,) = mutants.load(tmp_path / "t.yaml")
    found = mutants.problems(p)
    assert len(found) == 2 and "found 0 times in judges/oracle.py" in found[0] and "no test test_no_such_test" in found[1]
    (tmp_path / "u.yaml").write_text("- id: x\n  promise: p\n", encoding="utf-8")
    with pytest.raises(mutants.TableError, match="needs tests and a mutation"):
        mutants.load(tmp_path / "u.yaml")


@pytest.mark.slow
def test_scripts_mutants_says_which_mutant_was_killed_and_which_survived(tmp_path):
    table = tmp_path / "promises.yaml"
    table.write_text("""\
- id: needs-user
  promise: needs_user is never a success
  tests: [tests/judges/test_oracle.py::test_needs_user_is_never_a_success_even_when_the_check_holds]
  mutation: {name: needs_user succeeds, file: judges/oracle.py, replace: 'if end.status == "needs_user":', with: 'if False:'}
- id: a-comment
  promise: a change no test can see
  tests: [tests/judges/test_oracle.py::test_needs_user_is_never_a_success_even_when_the_check_holds]
  mutation: {name: a comment changed, file: judges/oracle.py, replace: "# the person's doing, not the agent's", with: "# changed"}
- id: later
  promise: a promise of code to come
  pending: issue 99
""", encoding="utf-8")
    before = (ROOT / "judges" / "oracle.py").read_bytes()
    p = subprocess.run(["bash", str(ROOT / "scripts" / "mutants"), "--table", str(table)], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    out = p.stdout
    assert p.returncode == 1, out + p.stderr
    assert "baseline: the 1 named tests on an unmutated copy: pass" in out
    assert out.count("killed    needs-user") == 1 and "SURVIVED  a-comment" in out and "pending   later" in out
    assert "1 of 2 mutants killed, 1 survived, 0 error(s), 1 pending; run time" in out
    assert (ROOT / "judges" / "oracle.py").read_bytes() == before  # the working tree is never written to


def test_scripts_mutmut_names_modules_and_tests_that_exist():
    """scripts/mutmut's table (the safety modules, and the tests each one's mutants run) fits the
    tree: a module or test file moved or renamed fails here, not an hour into a mutmut run."""
    spec = importlib.util.spec_from_file_location("mutmut_score", ROOT / "scripts" / "mutmut_score.py")
    score = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(score)
    assert set(score.MODULES) == {"replies", "verdict_kinds", "monitor", "gate", "runner", "oracle", "calibration", "redaction"}
    for name, m in score.MODULES.items():
        for f in m["files"] + m["tests"]:
            assert (ROOT / f).is_file(), (name, f)
    for t in score.HEAVY:
        file, _, func = t.partition("::")
        assert f"def {func}(" in (ROOT / file).read_text(encoding="utf-8"), t
    assert score.score({"killed": 3, "timeout": 1, "survived": 4}) == (4, 8, 50.0)
    # every decision about a survivor reads, names a module of the table, and says why
    fates = score.load_fates()
    prefixes = {f.removesuffix(".py").replace("/", ".") for m in score.MODULES.values() for f in m["files"]}
    assert fates and all(any(k.startswith(p + ".") for p in prefixes) for k in fates), sorted(fates)
    assert all(fate in ("equivalent", "accepted") and len(why) > 20 for fate, why in fates.values())
