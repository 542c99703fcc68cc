"""Process faults: the runner SIGKILLed at 20 seeded points (states the phones hold it at) and resumed, Ctrl-C
and SIGTERM (exit 130, resumable), a task file edited before --resume (refused unless
--accept-changed-suite, which records the new hashes), and a full disk while a screenshot is written (a real tmpfs when we are root, else a simulated
ENOSPC). Afterwards: nothing recorded is lost, the run resumes to the results of an uninterrupted
run, the failure is reported with its cause (the file that could not be written), and no episode
is duplicated or miscounted."""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import threading
from pathlib import Path

import pytest

import harness.records as records
import harness.records.files as record_files  # where the low-level write lives (the full-disk tests replace it)
from agents.replay import ReplayAgent, ReplayConfig
from harness.records import RunWriter, read_manifest, read_results
from harness.sim.phone import SimPhone
from harness.run.suite import Plugins, SuiteConfig, run_suite
from harness.core.tasks import load_suite
from judges.oracle import OracleConfig, OracleJudge
from tests.fakes.local_device import LocalSimDevice
from tests.fakes.held_commands import HeldCommands
from tests.faults.helpers import (SHORT, check_run_consistent, harness_popen, harness_run, results_table,
                                  write_suite)

pytestmark = pytest.mark.faults

TRIALS = 20
KILL_SEED = 20260509


def _run_args(suite: Path, serials: list[str], adb_port: int, *extra: str) -> list[str]:
    return ["run", "--suite", str(suite), "--devices", ",".join(serials), "--agent", "replay",
            "--agent-opt", "perturb=0.3", "--seed", "11", "--judge", "oracle", "--adb-port", str(adb_port),
            "--quiet", *extra]


# --- SIGKILL at seeded points ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(1200)  # 40 short runs: about a minute idle, several on a loaded machine
def test_sigkill_at_random_points_then_resume_equals_uninterrupted(adb, serve_sim, tmp_path):
    """20 trials: start the run, SIGKILL it at a seeded point, `--resume`, and compare with one
    uninterrupted run: the same results by task id (status, steps, verdicts), one line per task,
    and every episode folder consistent with its result.

    The kill points are states, not moments: the phones (served in this process) hold the k-th
    device command of a kind until the test has killed the runner, so the runner is known to be
    waiting on that command when the kill lands, however fast or loaded the machine is. Trial 0 is
    killed at once (before it touches anything), trial 1 while it describes the first phone (no run
    folder yet); the others at a seeded kind and k: a reset, the k-th `input` (a step's action, or
    the home key of a reset), the k-th screenshot of the episodes (a first observation or a settle
    frame) or the k-th read of the phone's state (a reset's check, or the oracle at an episode's
    start or end, when its steps are all recorded but its result is not)."""
    phones = [serve_sim(width=540, height=1200), serve_sim(width=540, height=1200)]
    hold = HeldCommands(phones)
    ids = SHORT[:4]
    suite = write_suite(tmp_path / "suite.yaml", ids)
    base = _run_args(suite, [p.serial for p in phones], adb.port)
    r = harness_run([*base, "--out", str(tmp_path / "full")], adb.port)
    assert r.returncode == 0, r.stderr
    want = results_table(tmp_path / "full")
    assert set(want) == set(ids)
    check_run_consistent(tmp_path / "full")
    seen = dict(hold.counts)  # commands of each kind in one uninterrupted run
    # every step's action is at least one `input` command and the oracle reads the state at least
    # twice per episode; screenshots vary with settling, but each `input` but a reset's home key is
    # followed by at least two settle frames
    assert seen["reset"] == len(ids) and seen["input"] > len(ids) and seen["state"] >= 2 * len(ids), seen
    # kind -> (first, last) k inside the episodes: the first screenshot of each phone is taken
    # while the runner describes it, before the run folder exists
    ks = {"reset": (1, seen["reset"]), "input": (1, seen["input"]), "state": (1, seen["state"]),
          "screenshot": (len(phones) + 1, len(phones) + seen["input"])}

    rng = random.Random(KILL_SEED)
    killed_mid_run = 0
    history = []
    for trial in range(TRIALS):
        out = tmp_path / f"trial{trial:02d}"
        if trial == 0:
            point, kind = "at once", None
        elif trial == 1:
            point, kind, k = "describing the first phone", "any", 1
        else:
            kind = rng.choice(sorted(ks))
            k = rng.randint(*ks[kind])
            point = f"{kind} #{k}"
        if kind is not None:
            hold.arm(kind, k)
        log = tmp_path / f"trial{trial:02d}.log"
        p = harness_popen([*base, "--out", str(out)], adb.port, log=log)
        try:
            if kind is not None:
                assert hold.reached.wait(120), (f"trial {trial}: the run never reached {point} (counts {hold.counts}); "
                                                f"runner {'exited ' + str(p.poll()) if p.poll() is not None else 'running'}: "
                                                f"{log.read_text(errors='replace')[-600:]}")
            assert p.poll() is None, f"trial {trial}: the run ended before {point}"
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        finally:
            hold.release_all()
        results = out / "results.jsonl"
        done = len(read_results(out)) if results.exists() else None
        if kind not in (None, "any"):
            # the run was inside an episode: its folder and manifest exist, that episode's result does not
            assert (out / "manifest.json").is_file() and done is not None and done < len(ids), (trial, point, done)
            killed_mid_run += 1
        else:
            assert not (out / "manifest.json").exists(), (trial, point)
        history.append((point, done))
        again = [*base, "--out", str(out), "--resume"]
        if not out.exists():  # killed before the run made its folder (its preflight): nothing to resume
            r = harness_run(again, adb.port)
            assert r.returncode == 2 and f"--resume: {out} does not exist" in r.stderr, (trial, r.stderr)
            again.remove("--resume")  # --resume only resumes (issue 37): the same run, started again
        r = harness_run(again, adb.port)
        assert r.returncode == 0, f"trial {trial} (killed at {point}, {done} results): {r.stderr}"
        got = results_table(out)
        assert got == want, f"trial {trial}: killed at {point} with {done} results; resumed run differs"
        check_run_consistent(out)
        assert set(read_manifest(out)["tasks"]) == set(ids)
        shutil.rmtree(out)  # keep the temporary folder small
    print(f"kill points (point, results recorded): {history}; killed mid-run: {killed_mid_run}/{TRIALS}")
    assert killed_mid_run == TRIALS - 2, history


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_leaves_a_resumable_run(adb, serve_sim, tmp_path, sig):
    """Ctrl-C, or SIGTERM (what job schedulers send), while the runner waits on a step's action (the
    phone holds the third `input` of the run: at most two are resets' home keys): exit 130,
    "continue with --resume", the manifest says interrupted, and --resume completes to the
    uninterrupted results."""
    phones = [serve_sim(width=540, height=1200), serve_sim(width=540, height=1200)]
    hold = HeldCommands(phones)
    suite = write_suite(tmp_path / "suite.yaml", SHORT[:4])
    base = _run_args(suite, [p.serial for p in phones], adb.port)
    r = harness_run([*base, "--out", str(tmp_path / "full")], adb.port)
    assert r.returncode == 0, r.stderr
    hold.arm("input", 3)
    p = harness_popen([*base, "--out", str(tmp_path / "cut")], adb.port)
    try:
        assert hold.reached.wait(120), f"the run never sent its third input command ({hold.counts})"
        p.send_signal(sig)  # mid-episode: the phone has not answered the action yet
    finally:
        hold.release_all()
    out, err = p.communicate(timeout=60)  # stops at the next step boundary, never hangs
    assert p.returncode == 130, (p.returncode, out, err)
    assert "continue with --resume" in out, out
    m = read_manifest(tmp_path / "cut")
    assert m["interrupted"] is True and m["not_run"], m
    assert len(read_results(tmp_path / "cut")) < 4
    check_run_consistent(tmp_path / "cut")
    r = harness_run([*base, "--out", str(tmp_path / "cut"), "--resume"], adb.port)
    assert r.returncode == 0, r.stderr
    assert results_table(tmp_path / "cut") == results_table(tmp_path / "full")
    check_run_consistent(tmp_path / "cut")


def test_sigterm_then_an_edited_suite_is_refused_on_resume_unless_accepted(adb, serve_sim, tmp_path):
    """SIGTERM while the second episode starts: exit 130, the manifest says interrupted. A task file
    edited before --resume (a cap that changes) is refused with the file named, exit 2, nothing run;
    --resume --accept-changed-suite continues with the new file and records its hash and the change."""
    import yaml

    phone = serve_sim(width=540, height=1200)
    hold = HeldCommands([phone])
    suite = write_suite(tmp_path / "suite.yaml", SHORT[:2])
    run = tmp_path / "run"
    base = [*_run_args(suite, [phone.serial], adb.port), "--out", str(run)]
    hold.arm("reset", 2)  # the second episode's reset: the first one's result is written
    p = harness_popen(base, adb.port)
    try:
        assert hold.reached.wait(120), f"the second episode never started ({hold.counts})"
        p.send_signal(signal.SIGTERM)
    finally:
        hold.release_all()
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, out, err)
    assert "continue with --resume" in out, out
    m = read_manifest(run)
    assert m["interrupted"] is True and m["not_run"] == [SHORT[1]], m
    assert [r.task_id for r in read_results(run)] == [SHORT[0]]
    old_hash = m["suite"]["files"][str(suite)]
    tasks = yaml.safe_load(suite.read_text(encoding="utf-8"))
    tasks[1]["reference_steps"] += 3  # its cap 2c+1 grows by 6
    suite.write_text(yaml.safe_dump(tasks, allow_unicode=True, sort_keys=False), encoding="utf-8")
    r = harness_run([*base, "--resume"], adb.port)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert f"changed: {suite}" in r.stderr and "--accept-changed-suite" in r.stderr and r.stderr.count("\n") == 1
    assert [x.task_id for x in read_results(run)] == [SHORT[0]]  # nothing ran
    assert read_manifest(run)["suite"]["files"][str(suite)] == old_hash
    r = harness_run([*base, "--resume", "--accept-changed-suite"], adb.port)
    assert r.returncode == 0, r.stderr
    rows = {x.task_id: x for x in read_results(run)}
    assert rows[SHORT[1]].cap == 2 * tasks[1]["reference_steps"] + 1
    m = read_manifest(run)
    assert m["suite"]["files"][str(suite)] == records.file_sha256(suite) != old_hash
    (change,) = m["suite_changes"]
    assert change["changed"] == [str(suite)] and change["completed_before"] == 1
    check_run_consistent(run)


# --- full disk ----------------------------------------------------------------------------------
class _DiskFull:
    """Makes screenshot writes fail with ENOSPC (raised by the low-level write, so it names no file,
    exactly as os.write does) from the ``after``-th one on; ``once`` fails a single write."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: int, once: bool = False):
        self.after, self.once, self.count, self.failed = after, once, 0, 0
        self.lock = threading.Lock()
        self.real = record_files._write_all
        monkeypatch.setattr(record_files, "_write_all", self)

    def __call__(self, fd: int, data: bytes) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if "/screens/" in target:
            with self.lock:
                self.count += 1
                fail = self.count >= self.after and not (self.once and self.failed)
                if fail:
                    self.failed += 1
            if fail:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.real(fd, data)


def _local_suite(tmp_path: Path):
    return load_suite(write_suite(tmp_path / "suite.yaml", SHORT)).tasks


def _local_run(run: Path, tasks, resume: bool = False):
    plugins = Plugins(agent=lambda: ReplayAgent(ReplayConfig(perturb=0.3)),
                      observers=lambda: [OracleJudge(OracleConfig())])
    with RunWriter(run, resume=resume, fsync=False) as w:
        phones = [LocalSimDevice(SimPhone(540, 1200), serial=s) for s in ("p1", "p2")]
        return run_suite(tasks, phones, plugins, w,
                         SuiteConfig(agent_name="replay", seed=11))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to tell screenshot writes apart")
@pytest.mark.parametrize("once", [False, True], ids=["disk-stays-full", "one-failed-write"])
def test_failed_screenshot_write_stops_the_run_resumably(tmp_path, monkeypatch, once):
    """A screenshot that cannot be written stops the whole run (the other phone's worker too: it
    used to wait forever for the dead worker's episode) with an error naming the file; the partial
    episodes are redone on --resume and the results equal an uninterrupted run."""
    tasks = _local_suite(tmp_path)
    want_rep = _local_run(tmp_path / "full", tasks)
    want = results_table(tmp_path / "full")
    assert not want_rep.error and len(want) == len(SHORT)

    disk = _DiskFull(monkeypatch, after=6, once=once)
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("rep", _local_run(tmp_path / "cut", tasks)), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the run hung after a worker's write failed"
    rep = box["rep"]
    assert disk.failed >= 1
    assert rep.error and "No space left on device" in rep.error, rep.error
    assert "/screens/" in rep.error and rep.error.rstrip("'").endswith(".png"), rep.error  # names the file
    assert rep.interrupted and rep.not_run
    cut = tmp_path / "cut"
    done = {r.task_id for r in read_results(cut)}
    assert done == {r.task_id for r in rep.results} and len(done) < len(SHORT)
    check_run_consistent(cut)
    assert not [p for p in cut.rglob("*.tmp")], "temporary files left after the failed write"

    monkeypatch.setattr(record_files, "_write_all", disk.real)  # space is back
    rep2 = _local_run(cut, tasks, resume=True)
    assert not rep2.error and set(rep2.skipped) == done
    assert results_table(cut) == want
    check_run_consistent(cut)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to tell screenshot writes apart")
def test_full_disk_cli_reports_the_file_and_resumes(adb, serve_sim, tmp_path, monkeypatch, capsys):
    """`harness run` over real adb (phones served in this process) when screenshot writes fail:
    exit 2 with one line naming the file and how to continue; no traceback; --resume completes."""
    from harness.cli.main import main

    phones = [serve_sim(width=540, height=1200) for _ in range(2)]
    suite = write_suite(tmp_path / "suite.yaml", SHORT[:4])
    args = ["run", "--suite", str(suite), "--devices", ",".join(p.serial for p in phones), "--agent", "replay",
            "--judge", "oracle", "--adb-port", str(adb.port), "--quiet"]
    disk = _DiskFull(monkeypatch, after=5)
    assert main([*args, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert disk.failed >= 1
    assert "No space left on device" in err and str(tmp_path / "run" / "episodes") in err and ".png" in err, err
    assert "--resume" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    check_run_consistent(tmp_path / "run")
    assert read_manifest(tmp_path / "run").get("interrupted") is True
    monkeypatch.setattr(record_files, "_write_all", disk.real)
    assert main([*args, "--out", str(tmp_path / "run"), "--resume"]) == 0
    rows = read_results(tmp_path / "run")
    assert sorted(r.task_id for r in rows) == sorted(SHORT[:4])
    assert all(r.status == "finished" and r.verdicts["oracle"] is True for r in rows), rows
    check_run_consistent(tmp_path / "run")


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """Mount a tmpfs; None on success, else why not."""
    if os.geteuid() != 0:
        return "not root: cannot mount a tmpfs"
    if shutil.which("mount") is None:
        return "no mount command"
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else f"mount -t tmpfs failed: {r.stderr.strip()}"


@pytest.mark.slow
def test_full_disk_on_a_real_tmpfs(adb, sims, tmp_path):
    """A real full file system (a 3 MB tmpfs, mostly taken by a ballast file) under `harness run` in
    its own process: it stops with one clear line naming the file that could not be written and no
    traceback, leaves what it recorded readable, and `--resume` with space back completes the run
    to the same results as a run on a roomy disk."""
    disk = tmp_path / "disk"
    why = _mount_tmpfs(disk, "3m")
    if why:
        pytest.skip(why)
    try:
        a, b = sims(adb), sims(adb)
        suite = write_suite(tmp_path / "suite.yaml", SHORT)
        base = _run_args(suite, [a.serial, b.serial], adb.port)
        r = harness_run([*base, "--out", str(tmp_path / "full")], adb.port)
        assert r.returncode == 0, r.stderr
        want = results_table(tmp_path / "full")
        run_bytes = sum(p.stat().st_size for p in (tmp_path / "full").rglob("*") if p.is_file())
        # leave room for about a third of the run's records
        st = os.statvfs(disk)
        free = st.f_bavail * st.f_frsize
        room = max(64 * 1024, run_bytes // 3)
        assert free > room, (free, room)
        with open(disk / "ballast", "wb") as f:
            f.write(b"\0" * (free - room))
        run = disk / "run"
        r = harness_run([*base, "--out", str(run)], adb.port, timeout=120)
        assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
        assert "No space left on device" in r.stderr and str(run) in r.stderr, r.stderr
        assert "--resume" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(read_results(run)) < len(SHORT)
        check_run_consistent(run)
        (disk / "ballast").unlink()
        r = harness_run([*base, "--out", str(run), "--resume"], adb.port)
        assert r.returncode == 0, r.stderr
        assert results_table(run) == want
        check_run_consistent(run)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
