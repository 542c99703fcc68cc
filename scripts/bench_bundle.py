"""Benchmark: run bundles (``harness bundle``) and reading them, on a big run.

The run is scripts/bench_view's: one episode recorded for real on the simulated phone at 1080x2400,
copied ``--episodes`` times (default 2,000; every copy's screenshots distinct files), with its suite.
Each figure is the command a user types, timed from its start to its end (the best of ``--runs``;
the machine is shared), so Python's start is in ours and none is in tar's:

  make + verify   ``harness bundle RUN -o B`` then ``harness bundle verify B``, against
                  ``tar -I 'zstd -3 -T1' -cf T -C RUN .`` then ``tar -I 'zstd -d' -tf T`` (the same
                  files, the same compression: zstd level 3 on one thread, which the bundle uses;
                  tar's listing decompresses every byte, as verify does). Target: at most 1.5x.
  report          ``harness report B --format json`` against ``harness report RUN --format json``
                  (the bundle's records checked and unpacked, its screenshots never read). Target:
                  at most 1.2x.
  compare         ``harness compare RUN B --out DIR`` (the bundle unpacked into the cache the first
                  time; its page: 2,000 task pages side by side), then again (the cache reused).

Usage: scripts/bench_bundle [--episodes 2000] [--runs 3] [--keep DIR]. Writes bench/bundle.json (or bundle.json in $CRATE_BENCH_DIR, as every bench).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_rows import bench_dir, row, write_rows  # noqa: E402
from bench_view import build_run  # noqa: E402  (the same big run)


def judged(run: Path) -> None:
    """Give every episode an oracle verdict (two in three succeed), for compare to have outcomes."""
    import json

    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        r = json.loads(line)
        r["verdicts"] = {"oracle": i % 3 != 0}
        out.append(json.dumps(r, ensure_ascii=False))
    (run / "results.jsonl").write_text("\n".join(out) + "\n", encoding="utf-8")


def timed(cmd: list[str], env: dict[str, str], runs: int, before=None) -> tuple[float, float]:
    """The best wall time and the best CPU time (user + system, the command and its children) of
    ``runs`` runs: on a shared machine the wall time carries the other users' load, the CPU time
    is what the command itself costs."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(runs):
        if before is not None:
            before()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dt = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr[-2000:]}")
        best = min(best, dt)
        best_cpu = min(best_cpu, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return best, best_cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", metavar="DIR", help="build the run in DIR, or use the one built there before")
    args = ap.parse_args()
    if shutil.which("zstd") is None:
        print("bench_bundle: the zstd program is needed for tar's side (apt-get install zstd)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="bench-bundle-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(work / "cache"))
    py = [sys.executable, "-m", "harness.cli"]
    try:
        t0 = time.monotonic()
        kept = Path(args.keep) if args.keep else None
        if kept is not None and (kept / "run" / "results.jsonl").is_file():
            run = kept / "run"
            screens = sum(1 for _ in run.glob("episodes/*/screens/*.png"))
        else:
            run, screens, _ = build_run(kept or work, args.episodes)
            judged(run)
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        print(f"run: {args.episodes} episodes, {screens} screenshots, {size / 1e6:.0f} MB (built in "
              f"{time.monotonic() - t0:.0f} s)", file=sys.stderr)
        bundle, tar = work / "run.tar.zst", work / "tar.tar.zst"
        make = timed([*py, "bundle", str(run), "-o", str(bundle)], env, args.runs)
        verify = timed([*py, "bundle", "verify", str(bundle)], env, args.runs)
        tar_c = timed(["tar", "-I", "zstd -3 -T1", "-cf", str(tar), "-C", str(run), "."], env, args.runs)
        tar_t = timed(["tar", "-I", "zstd -d", "-tf", str(tar)], env, args.runs)
        rep_run = timed([*py, "report", str(run), "--format", "json"], env, args.runs)
        rep_bundle = timed([*py, "report", str(bundle), "--format", "json"], env, args.runs)
        clear = lambda: shutil.rmtree(work / "cache", ignore_errors=True)  # noqa: E731
        cmp_first = timed([*py, "compare", str(run), str(bundle), "--out", str(work / "cmp")], env, 1, before=clear)
        cmp_again = timed([*py, "compare", str(run), str(bundle), "--out", str(work / "cmp")], env, 1)
        w, c = 0, 1  # wall, CPU
        rows = [
            row("bundle: episodes", args.episodes), row("bundle: screenshots", screens),
            row("bundle: run MB", round(size / 1e6, 1)),
            row("bundle: bundle MB", round(bundle.stat().st_size / 1e6, 1)),
            row("bundle: tar zstd MB", round(tar.stat().st_size / 1e6, 1)),
            row("bundle: make s (cpu s)", f"{make[w]:.1f} ({make[c]:.1f})"),
            row("bundle: verify s (cpu s)", f"{verify[w]:.1f} ({verify[c]:.1f})"),
            row("bundle: tar -c zstd s (cpu s)", f"{tar_c[w]:.1f} ({tar_c[c]:.1f})"),
            row("bundle: tar -t zstd s (cpu s)", f"{tar_t[w]:.1f} ({tar_t[c]:.1f})"),
            row("bundle: make+verify / tar c+t, wall", (make[w] + verify[w]) / (tar_c[w] + tar_t[w]), "<= 1.5"),
            row("bundle: make+verify / tar c+t, cpu", (make[c] + verify[c]) / (tar_c[c] + tar_t[c]), "<= 1.5"),
            row("bundle: report of the run s (cpu s)", f"{rep_run[w]:.1f} ({rep_run[c]:.1f})"),
            row("bundle: report of the bundle s (cpu s)", f"{rep_bundle[w]:.1f} ({rep_bundle[c]:.1f})"),
            row("bundle: report bundle / run, wall", rep_bundle[w] / rep_run[w], "<= 1.2"),
            row("bundle: report bundle / run, cpu", rep_bundle[c] / rep_run[c], "<= 1.2"),
            row("compare: run vs bundle, first (unpack + page) s", round(cmp_first[w], 1)),
            row("compare: run vs bundle, again (cached) s", round(cmp_again[w], 1)),
        ]
        write_rows(bench_dir() / "bundle.json", rows, "run bundles")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
