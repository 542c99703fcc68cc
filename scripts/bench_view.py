"""Benchmark: ``harness view`` on a big run, the first time and the second.

The run: one episode recorded for real (the replay of tasks/sim's wallet_pay_rent_safe on the
in-process simulated phone at 1080x2400, through the harness's runner and record writer), copied
``--episodes`` times (default 2,000) into one run folder with its own task ids and suite. Every
copy's screenshots are distinct files (a PNG text chunk naming the copy is added after the header:
the pixels are the phone's, so each thumbnail costs what a real one does, and no cache keyed on a
file's bytes or path can serve one copy's thumbnail for another's).

Measured, each through the command a user types:

  first view     ``harness view RUN --port 0`` from its start until the index page, the first
                 episode's page and every thumbnail that page shows are served (they are made on
                 request); target <= 60 s. Before (issue 31): 12 min 50 s, every thumbnail made
                 one after another before the server started.
  background     the same command until it says every thumbnail is made (a thread per core,
                 paused while a request is making one); left out with ``--first-only``.
  second view    ``harness view RUN --no-serve`` once every thumbnail is up to date (left out with
                 ``--first-only``: on a loaded 2-core machine the background takes many minutes).
  threads        thumbnails of a sample of the run's screenshots made one after another, on one
                 thread per core, and on one process per core: thumbnails per second, and the
                 speed-ups (Pillow releases the GIL while it decodes, resizes and encodes; the
                 threads are what the viewer uses). On a quiet 2-core machine the ideal is 2.

``--before-tree DIR`` also times ``harness view RUN --no-serve`` of the source tree in DIR (e.g. a
``git archive`` of an older commit) on a fresh copy of the run: the "before" figure, measured here.

Usage: scripts/bench_view [--episodes 2000] [--sample 120] [--first-only] [--before-tree DIR]. Writes bench/view.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import http.client
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_rows import bench_dir, row, write_rows  # noqa: E402  (scripts/, beside this file)

TASK = "wallet_pay_rent_safe"


def record_one(work: Path) -> tuple[dict[str, Any], Any, dict[str, bytes]]:
    """The task's raw YAML entry, its recorded result, and the recorded episode's files."""
    import yaml

    from agents.replay import ReplayAgent, ReplayConfig
    from harness.farm.actor import episode_files
    from harness.records import RunWriter
    from harness.run.runner import run_episode
    from harness.sim.phone import SimPhone
    from harness.core.tasks import parse_task
    from tests.fakes.local_device import LocalSimDevice

    raw = next(t for t in yaml.safe_load((ROOT / "tasks/sim/wallet.yaml").read_text(encoding="utf-8")) if t["id"] == TASK)
    with RunWriter(work / "one", fsync=False) as w:
        ep = w.start_episode(TASK)
        out = run_episode(parse_task(raw), ReplayAgent(ReplayConfig()), LocalSimDevice(SimPhone(1080, 2400)), ep)
        files = episode_files(ep.path)
    if out.status != "finished":
        raise RuntimeError(f"the recorded episode ended {out.status}: {out.error}")
    return raw, out, files


def build_run(work: Path, n: int) -> tuple[Path, int, str]:
    """A run of ``n`` copies of the recorded episode; (its folder, screenshots, first task id)."""
    import yaml

    from harness.records import EpisodeResult, RunWriter, file_sha256
    from tests.fakes.distinct_png import tagged

    raw, out, files = record_one(work)
    ids = [f"view_{i:04d}" for i in range(n)]
    suite = work / "suite.yaml"
    suite.write_text(yaml.safe_dump([{**raw, "id": tid} for tid in ids], allow_unicode=True, sort_keys=False),
                     encoding="utf-8")
    run = work / "run"
    screens = 0
    with RunWriter(run, fsync=False) as w:
        w.write_manifest({"agent": {"name": "replay", "label": "replay"},
                          "suite": {"path": str(suite), "files": {str(suite): file_sha256(suite)}}})
        for tid in ids:
            mine = {rel: (tagged(data, tid) if rel.endswith(".png") else data) for rel, data in files.items()}
            screens += sum(rel.endswith(".png") for rel in mine)
            res = EpisodeResult(task_id=tid, agent="replay", status=out.status, steps=out.steps, cap=out.cap,
                                proposed_steps=out.proposed_steps, verdicts=out.verdicts, started_at=out.started_at,
                                ended_at=out.ended_at, duration_s=out.duration_s)
            w.install_episode(res, mine)
            w.append_result(res)
    return run, screens, ids[0]


def _get(port: int, path: str) -> bytes:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"GET {path}: {r.status}")
    return body


def first_view(run: Path, first: str, background: bool = True) -> dict[str, Any]:
    """``harness view RUN``: until the index, the first episode and its thumbnails are served;
    then (``background``) until every thumbnail is made in the background."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "harness.cli", "view", str(run), "--port", "0"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        said = []
        while not (m := re.match(r"serving .* at http://127\.0\.0\.1:(\d+)/", said[-1] if said else "")):
            said.append(p.stdout.readline())
            if not said[-1]:
                raise RuntimeError(f"harness view did not start serving: {''.join(said)[-3000:]}")
        port = int(m.group(1))
        serving = time.monotonic() - t0
        cpu = cpu_s(p.pid)
        _get(port, "/")
        page = _get(port, f"/report/episodes/{first}.html").decode("utf-8")
        thumbs = re.findall(r'src="\.\./thumbs/([^"]+\.jpg)"', page)
        if not thumbs:
            raise RuntimeError("the first episode's page shows no thumbnail")
        for rel in thumbs:
            if not _get(port, f"/report/thumbs/{rel}").startswith(b"\xff\xd8\xff"):
                raise RuntimeError(f"thumbs/{rel} is not a JPEG")
        shown = time.monotonic() - t0
        while background:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("harness view ended before it said its thumbnails were made")
            if re.match(r"thumbnails: \d+ made in", line):
                break
        everything = time.monotonic() - t0 if background else None
    finally:
        p.terminate()
        p.wait(timeout=30)
    return {"serving": serving, "cpu": cpu, "first": shown, "all": everything, "first_page_thumbs": len(thumbs)}


def cpu_s(pid: int) -> float | None:
    """The CPU time (user + system, s) process ``pid`` has used so far (Linux: /proc/PID/stat,
    fields 14 and 15 in clock ticks, proc(5)); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rpartition(")")[2].split()  # after the command's name, which may hold spaces
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_no_serve(run: Path, cwd: Path, timeout: float = 7200) -> float:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "harness.cli", "view", str(run), "--no-serve"], cwd=cwd,
                       capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(cwd)})
    if p.returncode != 0:
        raise RuntimeError(f"harness view --no-serve (in {cwd}) failed: {p.stdout[-2000:]}{p.stderr[-2000:]}")
    return time.monotonic() - t0


def _thumb_job(job: tuple[Path, Path, Path]) -> bool:
    from harness.report.viewer_files import make_thumb

    return make_thumb(*job) is not None


def thumb_rates(run: Path, sample: int, work: Path) -> dict[str, float]:
    """Thumbnails per second over ``sample`` distinct screenshots: serial, threads, processes."""
    from harness.report.viewer_files import workers

    srcs = sorted(run.glob("episodes/*/screens/*.png"))[:sample]
    k = workers()
    rates = {}
    for way in ("serial", "threads", "processes"):
        out = work / f"thumbs-{way}"
        jobs = [(src, out / f"{i:05d}.jpg", out) for i, src in enumerate(srcs)]
        out.mkdir()
        if way == "processes":
            pool: Any = cf.ProcessPoolExecutor(k)
            list(pool.map(_thumb_job, jobs[:k]))  # workers started and warm before the clock
            jobs = jobs[k:]
        else:
            pool = cf.ThreadPoolExecutor(1 if way == "serial" else k)
        with pool:
            t0 = time.perf_counter()
            ok = list(pool.map(_thumb_job, jobs))
            took = time.perf_counter() - t0
        if not all(ok):
            raise RuntimeError(f"{way}: {ok.count(False)} thumbnails failed")
        rates[way] = len(jobs) / took
    rates["workers"] = k
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--sample", type=int, default=120, help="screenshots in the threads/processes comparison")
    ap.add_argument("--first-only", action="store_true", help="stop once the first view is served: no background, "
                    "no second view")
    ap.add_argument("--before-tree", type=Path, help="a source tree whose `harness view --no-serve` is timed too")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="crate-bench-view-"))
    load = os.getloadavg()[0]
    try:
        t0 = time.monotonic()
        run, screens, first = build_run(work, args.episodes)
        built = time.monotonic() - t0
        before = None
        if args.before_tree is not None:
            old = work / "run-before"
            shutil.copytree(run, old, symlinks=True)
            before = timed_no_serve(old, args.before_tree.resolve())
            shutil.rmtree(old)
        rates = thumb_rates(run, args.sample, work)
        view = first_view(run, first, background=not args.first_only)
        second = None if args.first_only else timed_no_serve(run, ROOT)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n, k = args.episodes, rates["workers"]
    what = f"{n} episodes, {screens} screenshots 1080x2400"
    rows = [
        row(f"synthetic run: {what} (copies of one recorded episode, every file distinct), built in (s)", built),
        row(f"first view: `harness view` until the index, the first episode and its {view['first_page_thumbs']} "
            f"thumbnails are served (s)", view["first"], "<= 60"),
        row("first view: of which writing the pages before serving (s)", view["serving"]),
        row("first view: CPU time of `harness view` until it serves (s; about what the wall above is on a core of its own)",
            view["cpu"]),
        *([] if args.first_only else [
            row(f"every thumbnail made, in the background while serving ({k} threads) (s)", view["all"]),
            row("second view, every thumbnail up to date: `harness view --no-serve` (s)", second)]),
        row("thumbnails per second, one after another", rates["serial"]),
        row(f"thumbnails per second, {k} threads (what the viewer uses)", rates["threads"]),
        row(f"thumbnails per second, {k} processes", rates["processes"]),
        row(f"thumbnails: {k} threads / one after another", rates["threads"] / rates["serial"]),
        row(f"thumbnails: {k} processes / one after another", rates["processes"] / rates["serial"]),
    ]
    rows.append(row(f"machine load (1-minute average) when the bench began, {os.cpu_count()} cores", load))
    if before is not None:
        rows.append(row(f"before: `harness view --no-serve` of {args.before_tree} on the same run (s)", before))
    write_rows(bench_dir() / "view.json", rows, f"viewer benchmark (bench/view.json): {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
