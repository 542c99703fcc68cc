"""``scripts/mutmut``: a mutation score of the safety modules from mutmut 3 (issue 40, item 3).

mutmut (https://github.com/boxed/mutmut, 3.8) rewrites every function of a module into its mutants
(an operator turned, a constant changed, a call's argument dropped, a string changed, ...) and runs
the tests that call the function against each one: a mutant is killed when a test fails. Run here
module by module, each in a scratch copy of the working tree under /tmp (mutmut writes its
``mutants/`` folder there, never in the tree), with that module's own tests only:

- ``only_mutate`` names the one module, ``source_paths`` the three packages (copied whole into
  ``mutants/`` so that the module's callers import the mutated copy);
- ``pytest_add_cli_args_test_selection`` names the tests that matter for the module (:data:`MODULES`);
  mutmut runs them once to learn which test calls which function (its "stats"), then runs for each
  mutant only the tests that called its function, stopping at the first failure;
- ``pytest_add_cli_args`` leaves out tests marked slow and the end-to-end ones of :data:`HEAVY`
  (they repeat, on a phone and over minutes, what the faster tests named check directly).

    scripts/mutmut                               every module, one after the other
    scripts/mutmut --only replies,verdict_kinds  some of them
    scripts/mutmut --only replies --mutants harness.client.replies.x_quote__mutmut_3
    scripts/mutmut --only replies --again        the last run's survivors again (after a test was added)
    scripts/mutmut --list                        the modules and their tests, nothing run

Prints, per module, the mutants killed, survived, with no test, timed out, the score (killed and
timed out over every mutant) and the run's wall time, then every survivor with its diff
(``mutmut show``) and its fate from tests/mutmut_fates.yaml (equivalent or accepted, and why), and
the overall score. ``--out DIR`` (default bench/mutmut/, ignored by git) keeps each module's result
as JSON; ``--report`` prints them again. Exits 1 when a survivor has no fate (a promise no test
holds until one does, or a decision to write down), 0 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = "mutmut>=3.8,<4"  # install with: .venv/bin/python -m pip install 'mutmut>=3.8,<4'
MAX_CHILDREN = 2

# the safety modules (issue 40, item 3) and the tests that matter for each
MODULES: dict[str, dict[str, list[str]]] = {
    "replies": {"files": ["harness/client/replies.py"], "tests": [
        "tests/judges/test_verdict_grammar.py", "tests/judges/test_verdict_errors.py", "tests/judges/test_hostile_replies.py",
        "tests/judges/test_judge_evidence.py", "tests/core/test_secret_rule.py", "tests/client/test_model_client.py"]},
    "verdict_kinds": {"files": ["judges/verdict_kinds.py"], "tests": [
        "tests/judges/test_verdict_grammar.py", "tests/judges/test_verdict_errors.py", "tests/judges/test_hostile_replies.py",
        "tests/judges/test_judge_evidence.py", "tests/judges/test_judge_milestones.py",
        "tests/judges/test_judge_crate.py", "tests/judges/test_judge_holistic.py"]},
    "monitor": {"files": ["judges/monitor.py"], "tests": [
        "tests/judges/test_monitor_decisions.py", "tests/judges/test_judge_monitor.py", "tests/judges/test_verdict_grammar.py",
        "tests/judges/test_hostile_replies.py", "tests/judges/test_calibration.py", "tests/judges/test_monitor_calls.py"]},
    # the runner's step loop: the monitors' decision it shares with the guard, and the loop itself
    "gate": {"files": ["harness/run/gate.py"], "tests": [
        "tests/run/test_gate.py", "tests/run/test_runner.py", "tests/run/test_reflect.py",
        "tests/live/test_ask_runner.py"]},
    # (the hand-over end to end over adb, tests/live/test_handover.py, and the CLI's blocked episode,
    # tests/judges/test_blocked_actions.py, start a simulated phone for every mutant; what they hold of
    # the runner, test_handover_runner and test_runner hold in process)
    "runner": {"files": ["harness/run/runner.py"], "tests": [
        "tests/run/test_runner.py", "tests/run/test_reflect.py", "tests/live/test_ask_runner.py",
        "tests/live/test_handover_runner.py", "tests/live/test_handover_unread.py"]},
    "oracle": {"files": ["judges/oracle.py"], "tests": [
        "tests/judges/test_oracle.py", "tests/judges/test_oracle_evidence.py", "tests/live/test_handover.py",
        "tests/live/test_handover_runner.py", "tests/live/test_handover_unread.py", "tests/run/test_runner.py"]},
    "calibration": {"files": ["judges/calibration.py"], "tests": [
        "tests/judges/test_calibration.py", "tests/judges/test_calibration_records.py",
        "tests/offline_judge/test_calibrate.py"]},
    "redaction": {"files": ["harness/core/secret_text.py", "harness/records/redaction.py"], "tests": [
        "tests/core/test_secret_rule.py", "tests/records/test_records.py", "tests/records/test_redaction_edges.py",
        "tests/client/test_key_leaks.py"]},
}

# end-to-end tests left out of every selection: minutes each per mutant, and what they check of
# these modules the named unit tests check directly (the test's own words say which)
HEAVY = [
    # 90 hostile shapes through a gate on the simulated phone (about a minute); the reading of each
    # shape is test_every_step_shape_reads_as_decided and test_every_judge_shape_reads_as_decided
    "tests/judges/test_hostile_replies.py::test_every_shape_that_should_halt_stops_the_gate_before_the_transfer",
    # reads the module's source for its imports: every mutated copy imports mutmut's trampoline, so it
    # fails for all of them alike, and mutmut's first run of the tests (its "stats") fails with it
    "tests/core/test_secret_rule.py::test_the_rule_lives_in_the_data_layer_and_imports_nothing_of_the_client",
]

FATES = ROOT / "tests" / "mutmut_fates.yaml"  # what was decided about each survivor, and why

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 35: "suspicious",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", 37: "caught by type check",
          -11: "segfault", -9: "segfault", 2: "interrupted", None: "not checked"}


def _mutants_module():
    """scripts/mutants.py (the promise table's runner), for its copy of the working tree."""
    if "crate_mutants" not in sys.modules:
        spec = importlib.util.spec_from_file_location("crate_mutants", ROOT / "scripts" / "mutants.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["crate_mutants"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return sys.modules["crate_mutants"]


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def configure(repo: Path, name: str) -> None:
    """The copy's pyproject.toml gets mutmut's section for module ``name``."""
    m = MODULES[name]
    top = sorted({p.parts[0] for p in (Path(f) for f in _tree) if p.parts[0] not in ("harness", "agents", "judges")})
    args = ["-p", "no:cacheprovider", "-o", "addopts=", "-n", "0", "-m", "not slow"]
    for t in HEAVY:
        args += ["--deselect", t]
    section = f"""

[tool.mutmut]
source_paths = ["harness", "agents", "judges"]
only_mutate = {toml_list(m["files"])}
also_copy = {toml_list(top)}
pytest_add_cli_args = {toml_list(args)}
pytest_add_cli_args_test_selection = {toml_list(m["tests"])}
process_isolation = "forkserver"
use_git_change_detection = false
"""
    with open(repo / "pyproject.toml", "a", encoding="utf-8") as f:
        f.write(section)


_tree: list[str] = []


def results(repo: Path, name: str) -> dict[str, str]:
    """Mutant name -> status, from the .meta files mutmut wrote in the copy."""
    out = {}
    for f in MODULES[name]["files"]:
        meta = repo / "mutants" / (f + ".meta")
        if not meta.exists():
            continue
        for key, code in json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"].items():
            out[key] = STATUS.get(code, f"exit {code}")
    return out


_DIFFS = """
import json, sys
from pathlib import Path
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for name, path in json.loads(sys.stdin.read()):
    try:
        out[name] = get_diff_for_mutant(name, path=Path(path))
    except Exception as e:
        out[name] = f"(no diff: {type(e).__name__}: {e})"
print(json.dumps(out))
"""


def diffs(repo: Path, name: str, mutants: list[str], env: dict[str, str]) -> dict[str, str]:
    """Each mutant's diff (what ``mutmut show`` prints), read in one process in the copy."""
    if not mutants:
        return {}
    files = MODULES[name]["files"]
    pairs = [(m, next((f for f in files if m.startswith(f[:-3].replace("/", ".") + ".")), files[0])) for m in mutants]
    p = subprocess.run([sys.executable, "-c", _DIFFS], cwd=repo, env=env, input=json.dumps(pairs), capture_output=True,
                       text=True, timeout=600)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {m: f"(no diff: {p.stderr.strip()[-300:]})" for m in mutants}


def run_module(name: str, work: Path, children: int, mutant_names: list[str], out: Path | None) -> dict:
    t0 = time.monotonic()
    dest = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    mutants = _mutants_module()
    repo = mutants.copy_tree(dest, _tree, ROOT)
    shared = (ROOT.parent / "shared").resolve()
    if shared.exists():  # the tests run in repo/mutants: their ../shared is repo/shared
        (repo / "shared").symlink_to(shared, target_is_directory=True)
    configure(repo, name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MUTANT_UNDER_TEST", "PYTEST_ADDOPTS")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(children), *mutant_names]
    log = dest / "mutmut.log"
    with open(log, "w", encoding="utf-8") as f:
        p = subprocess.run(cmd, cwd=repo, env=env, stdout=f, stderr=subprocess.STDOUT)
    wall = time.monotonic() - t0
    status = results(repo, name)
    before: dict = {}
    if mutant_names:  # a run of some mutants again: their new results over the module's last ones
        status = {k: v for k, v in status.items() if k in mutant_names}
        last = out / f"{name}.json" if out is not None else None
        before = json.loads(last.read_text(encoding="utf-8")) if last is not None and last.exists() else {}
        status = {**before.get("status", {}), **status}
    counts: dict[str, int] = {}
    for v in status.values():
        counts[v] = counts.get(v, 0) + 1
    left = sorted(k for k, v in status.items() if v not in ("killed", "timeout"))
    known = {k: d for k, d in before.get("survivors", {}).items() if k in left and k not in mutant_names}
    survivors = {**known, **diffs(repo, name, [k for k in left if k not in known], env)}
    survivors = {k: survivors[k] for k in left}
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
    first = [{"mutants": len(before.get("status", {})), "wall_s": before.get("wall_s", 0)}] if before else []
    runs = before.get("runs", first) + [{"mutants": len(mutant_names) or len(status), "wall_s": round(wall)}]
    outcome = {"module": name, "files": MODULES[name]["files"], "tests": MODULES[name]["tests"], "wall_s": round(wall),
               "runs": runs, "exit": p.returncode, "counts": counts, "status": status, "survivors": survivors,
               "log_tail": tail if p.returncode else []}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(outcome, indent=1, ensure_ascii=False), encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    return outcome


def load_fates(path: Path = FATES) -> dict[str, tuple[str, str]]:
    """Mutant name -> (fate, why) from tests/mutmut_fates.yaml: a list of entries, each with
    ``fate`` (equivalent: no input can tell the mutant from the code; accepted: it can, and no
    promise is broken), ``why`` and the ``mutants`` it decides."""
    import yaml

    if not path.exists():
        return {}
    out = {}
    for n, e in enumerate(yaml.safe_load(path.read_text(encoding="utf-8")) or [], 1):
        if e.get("fate") not in ("equivalent", "accepted") or not e.get("why") or not e.get("mutants"):
            raise ValueError(f"{path} entry {n}: needs fate (equivalent or accepted), why and mutants")
        for m in e["mutants"]:
            out[m] = (e["fate"], e["why"].strip())
    return out


def score(counts: dict[str, int]) -> tuple[int, int, float]:
    caught = counts.get("killed", 0) + counts.get("timeout", 0)
    total = sum(counts.values())
    return caught, total, (100.0 * caught / total if total else 0.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/mutmut", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help=f"comma-separated modules ({', '.join(MODULES)})")
    ap.add_argument("--mutants", help="comma-separated mutant names to run again (with --only naming their module)")
    ap.add_argument("--again", action="store_true",
                    help="run again the mutants that survived the module's last run (its --out JSON), as after a test "
                         "was added; the results replace theirs")
    ap.add_argument("--max-children", type=int, default=MAX_CHILDREN, help="mutants run at a time (default 2)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "mutmut", help="where each module's JSON goes")
    ap.add_argument("--list", action="store_true", help="print the modules and their tests and exit")
    ap.add_argument("--report", action="store_true", help="print the last results (--out) again, nothing run")
    args = ap.parse_args(argv)
    names = [x.strip() for x in (args.only or ",".join(MODULES)).split(",") if x.strip()]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        print(f"mutmut: --only: no module {', '.join(unknown)} (modules: {', '.join(MODULES)})", file=sys.stderr)
        return 2
    if args.list:
        for n in names:
            print(f"{n:<14} {' '.join(MODULES[n]['files'])}\n{'':<14} tests: {' '.join(MODULES[n]['tests'])}")
        return 0
    chosen = [x.strip() for x in (args.mutants or "").split(",") if x.strip()]
    if chosen and len(names) != 1:
        print("mutmut: --mutants needs --only naming the one module they belong to", file=sys.stderr)
        return 2
    again: dict[str, list[str]] = {}
    for n in names if args.again else ():
        last = args.out / f"{n}.json"
        if not last.exists():
            print(f"mutmut: --again: no earlier run of {n} ({last})", file=sys.stderr)
            return 2
        again[n] = list(json.loads(last.read_text(encoding="utf-8"))["survivors"])
    try:
        if not args.report:
            import mutmut  # noqa: F401
    except ImportError:
        print(f"mutmut: mutmut 3 is not installed: {sys.executable} -m pip install '{MUTMUT}'", file=sys.stderr)
        return 2
    fates = load_fates()
    _tree[:] = _mutants_module().tree_files(ROOT)
    work = Path(tempfile.mkdtemp(prefix="crate-mutmut-"))
    t_all = time.monotonic()
    total: dict[str, int] = {}
    rows = []
    try:
        for n in names:
            last = args.out / f"{n}.json"
            if args.report or (args.again and not again[n]):
                if not last.exists():
                    print(f"{n:<14} not run (no {last})")
                    continue
                o = json.loads(last.read_text(encoding="utf-8")) | {"exit": 0, "log_tail": []}
            else:
                o = run_module(n, work, args.max_children, again.get(n) or chosen, args.out)
            rows.append(o)
            caught, count, pct = score(o["counts"])
            for k, v in o["counts"].items():
                total[k] = total.get(k, 0) + v
            what = ", ".join(f"{v} {k}" for k, v in sorted(o["counts"].items()))
            runs = " + ".join(f"{r['wall_s']} s" for r in o.get("runs", [])) or f"{o['wall_s']} s"
            decided = [fates[k][0] for k in o["survivors"] if k in fates]
            print(f"{n:<14} {pct:5.1f} %  {caught} of {count} killed ({what}; of the survivors "
                  f"{decided.count('equivalent')} equivalent, {decided.count('accepted')} accepted, "
                  f"{len(o['survivors']) - len(decided)} undecided); wall time {runs}"
                  + (f"; mutmut exit {o['exit']}" if o["exit"] else ""), flush=True)
            for line in o["log_tail"]:
                print(f"               {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    undecided = 0
    for o in rows:
        for k, diff in o["survivors"].items():
            fate, why = fates.get(k, ("UNDECIDED", "no entry in tests/mutmut_fates.yaml"))
            undecided += fate == "UNDECIDED"
            print(f"\n--- {o['status'][k]}, {fate}: {k}\n    {why}\n{diff}")
    caught, count, pct = score(total)
    print(f"\noverall {pct:.1f} %: {caught} of {count} mutants killed over {len(rows)} module(s), "
          f"{total.get('survived', 0)} survived ({undecided} undecided), {total.get('no tests', 0)} with no test; "
          f"run time {time.monotonic() - t_all:.0f} s")
    return 1 if undecided or any(o["exit"] for o in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
