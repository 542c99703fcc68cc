"""``scripts/mutants``: every promise of tests/promises.yaml broken on purpose, to see its tests fail.

For each promise that has code (a row with ``pending`` is listed, not run): copy the working tree
(its tracked and untracked files, .gitignore's excluded) into a scratch folder under /tmp, with
``../shared`` beside it as CI lays it out; replace the mutation's text (found exactly once in its
file) there; run the tests named for the promise on that copy (``pytest -x``, the copy first on
PYTHONPATH, so every process the tests start imports the copy); and say whether the mutant was
killed (a test failed) or survived (every test passed). Before the mutants, the same tests run once
on an unmutated copy (the baseline): a test that fails without any mutation kills nothing.
The working tree is never written to.

    scripts/mutants                      every promise
    scripts/mutants --only cap,ask-timeout
    scripts/mutants --list               the table, nothing run
    scripts/mutants --jobs 2             two mutants at a time

Prints one line per mutant (killed / SURVIVED / error, and seconds), the totals and the run time;
exits 1 when a mutant survived, the baseline failed, or a mutation no longer applies (its text is
not found exactly once: the table has rotted), else 0. It is not part of .ci/run (minutes, not
seconds); tests/test_promises.py checks on every run that each mutation still applies.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "promises.yaml"
TIMEOUT_S = 900.0  # one mutant's tests; a mutation that makes them hang is an error, not a kill


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    replace: str
    with_: str


@dataclass(frozen=True)
class Promise:
    id: str
    promise: str
    source: str = ""
    code: str = ""
    tests: tuple[str, ...] = ()
    mutation: Mutation | None = None
    pending: str | None = None


class TableError(ValueError):
    """tests/promises.yaml cannot be read, or a row of it no longer fits the code."""


def load(path: Path = TABLE) -> list[Promise]:
    """The rows of the promise table, checked for shape (not against the code: :func:`problems`)."""
    import yaml

    try:
        rows = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise TableError(f"{path}: {e}") from None
    if not isinstance(rows, list):
        raise TableError(f"{path}: a list of promises expected")
    out, seen = [], set()
    for n, r in enumerate(rows, 1):
        where = f"{path} row {n}"
        if not isinstance(r, dict) or not isinstance(r.get("id"), str) or not isinstance(r.get("promise"), str):
            raise TableError(f"{where}: needs an id and a promise")
        if r["id"] in seen:
            raise TableError(f"{where}: id {r['id']!r} given twice")
        seen.add(r["id"])
        unknown = set(r) - {"id", "promise", "source", "code", "tests", "mutation", "pending"}
        if unknown:
            raise TableError(f"{where} ({r['id']}): unknown field(s) {', '.join(sorted(unknown))}")
        m = r.get("mutation")
        mutation = None
        if m is not None:
            if not isinstance(m, dict) or not all(isinstance(m.get(k), str) for k in ("name", "file", "replace", "with")):
                raise TableError(f"{where} ({r['id']}): mutation needs name, file, replace and with (text)")
            if m["replace"] == m["with"] or not m["replace"]:
                raise TableError(f"{where} ({r['id']}): the mutation changes nothing")
            mutation = Mutation(m["name"], m["file"], m["replace"], m["with"])
        tests = r.get("tests") or []
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise TableError(f"{where} ({r['id']}): tests must be a list of test ids")
        if r.get("pending") is None and (mutation is None or not tests):
            raise TableError(f"{where} ({r['id']}): a promise whose code exists needs tests and a mutation "
                             "(a promise of code to come says pending: WHY)")
        out.append(Promise(r["id"], r["promise"], str(r.get("source") or ""), str(r.get("code") or ""), tuple(tests),
                           mutation, r.get("pending")))
    return out


def problems(p: Promise, root: Path = ROOT) -> list[str]:
    """Why ``p`` no longer fits the code under ``root`` (its mutation's text not found exactly once,
    a named test file or test function gone); [] when it fits."""
    import ast

    out = []
    if p.mutation is not None:
        target = root / p.mutation.file
        try:
            n = target.read_text(encoding="utf-8").count(p.mutation.replace)
        except OSError as e:
            n, out = 0, out + [f"{p.id}: {p.mutation.file}: {e.strerror}"]
        if n != 1 and target.exists():
            out.append(f"{p.id}: the mutation's text is found {n} times in {p.mutation.file}, not once: "
                       f"{p.mutation.replace[:80]!r}")
    for t in p.tests:
        file, _, name = t.partition("::")
        path = root / file
        if not path.is_file():
            out.append(f"{p.id}: test file {file} is gone")
            continue
        if name:
            func = name.split("[", 1)[0].split("::")[-1]
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if not any(isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == func for d in ast.walk(tree)):
                out.append(f"{p.id}: {file} has no test {func}")
    return out


# --------------------------------------------------------------------------- the scratch copies


def tree_files(root: Path = ROOT) -> list[str]:
    """The working tree's files as git sees them: tracked and untracked, ignored ones left out."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, check=True).stdout
    return [f for f in out.decode("utf-8", "surrogateescape").split("\0") if f and (root / f).is_file()]


def copy_tree(dest: Path, files: list[str], root: Path = ROOT) -> Path:
    """``files`` of ``root`` copied into ``dest/repo``, with ``dest/shared`` pointing at root's ../shared."""
    repo = dest / "repo"
    for f in files:
        target = repo / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / f, target)
    shared = (root.parent / "shared").resolve()
    if shared.exists():
        (dest / "shared").symlink_to(shared, target_is_directory=True)
    return repo


def apply(repo: Path, m: Mutation) -> None:
    path = repo / m.file
    text = path.read_text(encoding="utf-8")
    if text.count(m.replace) != 1:
        raise TableError(f"{m.file}: the mutation's text is found {text.count(m.replace)} times, not once")
    path.write_text(text.replace(m.replace, m.with_), encoding="utf-8")


@dataclass
class Outcome:
    promise: Promise
    verdict: str          # killed, SURVIVED, error (the tests could not say), baseline-failed
    seconds: float
    detail: str = ""
    tail: list[str] = field(default_factory=list)


def run_tests(repo: Path, tests: tuple[str, ...], timeout: float = TIMEOUT_S) -> tuple[int | None, str]:
    """pytest on ``tests`` in the copy ``repo``: (exit status, or None on timeout; its output's end)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-o", "addopts=",
           *tests]
    try:
        p = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no result within {timeout:g} s"
    return p.returncode, (p.stdout + p.stderr)[-3000:]


def mutant(p: Promise, files: list[str], work: Path) -> Outcome:
    t0 = time.monotonic()
    dest = Path(tempfile.mkdtemp(prefix=f"{p.id}-", dir=work))
    try:
        repo = copy_tree(dest, files)
        assert p.mutation is not None
        apply(repo, p.mutation)
        rc, out = run_tests(repo, p.tests)
    except TableError as e:
        return Outcome(p, "error", time.monotonic() - t0, str(e))
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    took = time.monotonic() - t0
    if rc == 1:
        failed = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        return Outcome(p, "killed", took, failed[0] if failed else "a test failed")
    if rc == 0:
        return Outcome(p, "SURVIVED", took, "every test named for it passed", out.splitlines()[-5:])
    return Outcome(p, "error", took, f"pytest exit {rc}" if rc is not None else out, out.splitlines()[-8:])


def baseline(promises: list[Promise], files: list[str], work: Path) -> tuple[int | None, str, float]:
    """Every named test once on an unmutated copy."""
    t0 = time.monotonic()
    dest = Path(tempfile.mkdtemp(prefix="baseline-", dir=work))
    try:
        repo = copy_tree(dest, files)
        tests = tuple(dict.fromkeys(t for p in promises for t in p.tests))
        rc, out = run_tests(repo, tests, TIMEOUT_S * 2)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    return rc, out, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/mutants", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated promise ids")
    ap.add_argument("--list", action="store_true", help="print the table and exit")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at a time (default 1)")
    ap.add_argument("--table", type=Path, default=TABLE, help=argparse.SUPPRESS)
    ap.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of the tests")
    args = ap.parse_args(argv)
    t_all = time.monotonic()
    try:
        table = load(args.table)
    except TableError as e:
        print(f"mutants: {e}", file=sys.stderr)
        return 2
    if args.only:
        wanted = [x.strip() for x in args.only.split(",") if x.strip()]
        unknown = sorted(set(wanted) - {p.id for p in table})
        if unknown:
            print(f"mutants: --only: no promise {', '.join(unknown)} in {args.table}", file=sys.stderr)
            return 2
        table = [p for p in table if p.id in wanted]
    pending = [p for p in table if p.pending is not None]
    live = [p for p in table if p.pending is None]
    if args.list:
        for p in table:
            what = f"pending ({p.pending})" if p.pending else f"{p.mutation.file}: {p.mutation.name}"
            print(f"{p.id:<34} {what}\n{'':<34} {p.promise}")
        return 0
    rotten = [msg for p in live for msg in problems(p)]
    if rotten:
        print("mutants: the table no longer fits the code:\n  " + "\n  ".join(rotten), file=sys.stderr)
        return 1
    files = tree_files()
    work = Path(tempfile.mkdtemp(prefix="crate-mutants-"))
    try:
        if not args.no_baseline:
            rc, out, took = baseline(live, files, work)
            print(f"baseline: the {len({t for p in live for t in p.tests})} named tests on an unmutated copy: "
                  f"{'pass' if rc == 0 else 'FAIL'} ({took:.0f} s)", flush=True)
            if rc != 0:
                print(out, file=sys.stderr)
                return 1
        outcomes: list[Outcome] = []
        with cf.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for o in pool.map(lambda p: mutant(p, files, work), live):
                outcomes.append(o)
                print(f"{o.verdict:<9} {o.promise.id:<34} {o.seconds:6.1f} s  {o.promise.mutation.name}: {o.detail}",
                      flush=True)
                for line in o.tail if o.verdict != "killed" else []:
                    print(f"          {line}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in pending:
        print(f"{'pending':<9} {p.id:<34} {'':>8}  {p.pending}")
    killed = sum(o.verdict == "killed" for o in outcomes)
    bad = [o for o in outcomes if o.verdict != "killed"]
    print(f"{killed} of {len(outcomes)} mutants killed, {sum(o.verdict == 'SURVIVED' for o in outcomes)} survived, "
          f"{sum(o.verdict == 'error' for o in outcomes)} error(s), {len(pending)} pending; "
          f"run time {time.monotonic() - t_all:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
