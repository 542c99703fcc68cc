"""``scripts/bench``: every benchmark in one command, one table of ratios measured in one run.

Measured here, against simulated phones in their own processes on a private adb server and the
tests' scripted OpenAI-compatible server (a test double answering after a fixed latency L):

1. observation   the harness screenshot (``AdbDevice.screenshot()``: adbutils ``exec:screencap -p``
                 plus the PNG checks) against the same bytes fetched raw on the same device, two
                 ways: the ``adb exec-out screencap -p`` command (a process per call) and adbutils'
                 exec path with no harness code. Medians of interleaved calls; target <= 1.2 each.
   settle        settle + observation per step after a screen change on one phone at 1080x2400: the
                 frames chosen at connect time (harness.device.frame_sources) against screencap -p
                 only, interleaved; target <= 0.6 of the PNG-only path.
   step overhead one episode of taps on a dead spot with the oracle judge: per-step wall time over
                 agent + judge + device (action, settle) time; target <= 1.05. The remainder is the
                 harness's own work (records, screenshots written, hashing, plumbing).
4. scale         the same 8 equal episodes (one short task, replayed) on 1 phone and on 4 phones in
                 parallel, by an agent that waits on the model: each step first makes one call to
                 the scripted server, which answers after L (default 0.5 s). Throughput ratio 4:1,
                 target >= 3.2.
   memory        peak RSS (``wait4``) of ``harness run`` running one 50-step and one 500-step
                 episode of the random agent (--max-steps): records are streamed, so it should be
                 flat; target 500/50 <= 1.10.
5. payload       image bytes per step sent to a model at the default ``ImagePolicy`` (long side
                 1280, JPEG 85, as a base64 data URL) against the raw PNG, over the simulated
                 phone's screens at 1080x2400; target <= 1 (smaller than sending the PNG).
   text          the simulated phone's screenshot (1080x2400) with 5,000 characters of Chinese,
                 emoji, mixed scripts and Latin typed into a message, then sent as a bubble, against
                 the same screen with 50 characters: the sim fits text with per-character advances
                 and one layout per line, never one per character dropped. Target: a field's
                 screenshot <= 2x the 50-character one (it shows one line), and every 5,000-character
                 screenshot (the first of its text, nothing cached) well under a second (<= 1 s;
                 0.1-0.35 s on a quiet 2-core machine, up to 0.6 s with the machine loaded 4x).
   viewer        200 clients asking ``harness view``'s server for a thumbnail at the same moment
                 (a page of thumbnails, a script): all answered, and the slowest answer against
                 the median one; target <= 10 (a listen backlog of 5 made the slowest wait for SYN
                 retransmits: 30-60 s against a median of 2 s).

Then every other ``scripts/bench_*`` wrapper present (bench_runner, bench_judges,
bench_judges_offline, bench_agents, bench_static, ...) runs one after the other, and its
``bench/<name>.json`` is folded into the table. A bench JSON that is a list of
``{"name", "value", "target"?, "holds"?}`` rows (or holds such a list under ``"rows"`` or
``"results"``) is taken as it is; the current shapes of the others are read by small adapters below.

Output: the table, and ``bench/results.json``, a list of ``{"name", "value", "target", "holds"}``
(``target`` like ``"<= 1.2"`` or null; ``holds`` true/false, or null without a target), stable
names, so runs can be compared across commits.

    scripts/bench                       everything
    scripts/bench --only observation,payload
    scripts/bench --only farm,judges    only those other scripts (any scripts/bench_<name>)
    scripts/bench --skip-others         only the measurements above
    scripts/bench --latency 1.0         L for the scale benchmark
    scripts/bench --quick               every row once, at its smallest size (a few minutes)

``--quick`` runs every row of every benchmark once with the least work that exercises it (3
screenshots, 3 steps, 4 episodes, a 5- and a 10-step episode, each other script with its
QUICK_ARGS) and writes everything to a folder of its own (``bench/quick/``, or ``--out``), never
over measured results. Its values measure nothing (targets are not judged: ``holds`` is null);
what it shows is that every row still runs: a row that fails, or a script that writes no results,
makes it exit 1. tests/test_bench_quick.py runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH = ROOT / "bench"
ITEMS = ("observation", "settle", "overhead", "payload", "text", "viewer", "live", "scale", "memory")


# --- rows -------------------------------------------------------------------------------------------
def row(name: str, value: Any, target: str | None = None) -> dict[str, Any]:
    """One result; ``target`` is ``"<= X"`` or ``">= X"``; ``holds`` is computed from it."""
    holds = None
    if target is not None and isinstance(value, (int, float)):
        op, x = target.split()
        holds = value <= float(x) if op == "<=" else value >= float(x)
    elif target is not None:
        holds = False  # no value: the target is not met
    if isinstance(value, float):
        value = round(value, 4)
    return {"name": name, "value": value, "target": target, "holds": holds}


# --- simulated phones and a private adb server --------------------------------------------------------
class Lab:
    """A private adb server and simulated phones in their own processes."""

    def __init__(self) -> None:
        from harness.device.adb_server import AdbServer

        self.adb = AdbServer().start()
        self.procs: list[Any] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="crate-bench-"))

    def phone(self, size: str = "1080x2400", *extra: str) -> str:
        from harness.sim.process import start_sim_process

        phone = start_sim_process(["--size", size, *extra], self.tmp / f"sim-{len(self.procs)}.log", cwd=ROOT)
        self.procs.append(phone)
        return self.adb.connect(phone.address)

    def device(self, serial: str, **kw: Any):
        from harness.device.adb import AdbDevice

        return AdbDevice(serial, port=self.adb.port, **kw)

    def close(self) -> None:
        for p in self.procs:
            p.stop()
        self.adb.stop()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


# --- 1. observation path ---------------------------------------------------------------------------
def bench_observation(lab: Lab, n: int) -> list[dict[str, Any]]:
    import adbutils

    from harness.device.adb_server import adb_path

    serial = lab.phone()
    dev = lab.device(serial)
    raw_client = adbutils.AdbClient(host="127.0.0.1", port=lab.adb.port)
    raw_dev = raw_client.device(serial)
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(lab.adb.port))
    adb = adb_path()

    def harness() -> bytes:
        return dev.screenshot()

    def adb_cli() -> bytes:
        return subprocess.run([adb, "-s", serial, "exec-out", "screencap", "-p"], env=env, capture_output=True,
                              check=True).stdout

    def adbutils_exec() -> bytes:
        c = raw_dev.open_transport()
        try:
            c.send_command("exec:screencap -p")
            c.check_okay()
            return c.read_until_close(encoding=None)
        finally:
            c.close()

    ways: dict[str, Callable[[], bytes]] = {"harness": harness, "adb_cli": adb_cli, "adbutils": adbutils_exec}
    first = {k: f() for k, f in ways.items()}  # warm up; the phone caches an unchanged frame
    sizes = {k: len(v) for k, v in first.items()}
    if len(set(sizes.values())) != 1:
        raise RuntimeError(f"the three paths returned different screenshots: {sizes}")
    times: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(n):  # interleaved, so that all three see the same conditions
        for k, f in ways.items():
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    med = {k: _median_ms(v) for k, v in times.items()}
    return [
        row("observation: screenshot PNG size, simulated phone 1080x2400 (KB)", sizes["harness"] / 1024),
        row("observation: raw `adb exec-out screencap -p` (ms)", med["adb_cli"]),
        row("observation: raw adbutils exec:screencap -p (ms)", med["adbutils"]),
        row("observation: harness AdbDevice.screenshot() (ms)", med["harness"]),
        row("observation: harness / adb exec-out", med["harness"] / med["adb_cli"], "<= 1.2"),
        row("observation: harness / adbutils exec", med["harness"] / med["adbutils"], "<= 1.2"),
    ]


# --- 1b. per-step overhead outside agent, judge and device ---------------------------------------------
class _DeadSpotTapper:
    name = "bench-tapper"

    def spec(self) -> dict[str, Any]:
        return {"name": self.name}

    def reset(self, ctx: Any) -> None:
        pass

    def step(self, obs: Any) -> Any:
        from harness.core.actions import Click
        from harness.core.episode import AgentOutput

        # the launcher's empty lower half: nothing changes, as in scripts/bench_runner.py
        return AgentOutput(Click(x=obs.screen_size[0] // 2, y=obs.screen_size[1] // 2))


class _TimedJudge:
    """Wraps a judge and adds up the time spent in it."""

    def __init__(self, judge: Any) -> None:
        self.judge, self.name, self.spent = judge, judge.name, 0.0

    def spec(self) -> dict[str, Any]:
        return self.judge.spec()

    def _timed(self, fn: Callable[..., Any], *a: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*a)
        finally:
            self.spent += time.perf_counter() - t0

    def start(self, ctx: Any) -> None:
        self._timed(self.judge.start, ctx)

    def on_step(self, event: Any) -> None:
        self._timed(self.judge.on_step, event)

    def finish(self, end: Any) -> Any:
        return self._timed(self.judge.finish, end)


def bench_overhead(lab: Lab, steps: int) -> list[dict[str, Any]]:
    from harness.live.records import EpisodeLive
    from harness.records import RunWriter, iter_steps
    from harness.run.runner import run_episode
    from harness.core.tasks import parse_task
    from judges.oracle import OracleConfig, OracleJudge

    dev = lab.device(lab.phone())
    task = parse_task({"id": "bench", "instruction": "bench", "reference_steps": steps,
                       "setup": {"sim": {"preset": "default"}}, "success": {"path": "apps.settings.wifi", "eq": False}})
    judge = _TimedJudge(OracleJudge(OracleConfig()))
    dev.frame_choice()  # frame sources are measured at connect time (harness run does it before any episode)
    # the episode's start (reset, first screenshot, screen size) is device time outside any step:
    # measured on its own, as the runner does it, and taken out of the episode's wall time
    starts = []
    for _ in range(3):
        t0 = time.perf_counter()
        dev.reset(task.setup, task.language)
        dev.screenshot()
        dev.screen_size()
        starts.append(time.perf_counter() - t0)
    start_s = statistics.median(starts)
    with tempfile.TemporaryDirectory() as tmp:
        w = RunWriter(Path(tmp) / "run")  # fsync on, as in a real run
        ep = w.start_episode("bench")
        t0 = time.perf_counter()
        run_episode(task, _DeadSpotTapper(), dev, ep, cap=steps, observers=[judge], live=EpisodeLive(ep.path))
        wall = time.perf_counter() - t0
        recs = list(iter_steps(ep.path))
        w.close()
    n = len(recs)
    agent = sum(r.timings.get("agent", 0.0) for r in recs)
    device = sum(r.timings.get("action", 0.0) + r.timings.get("settle", 0.0) for r in recs)
    steps_wall = wall - start_s
    accounted = agent + judge.spent + device
    return [
        row(f"step overhead: harness work outside agent, judge, device (ms/step, {n} steps)",
            (steps_wall - accounted) / n * 1000),
        row("step overhead: of which record writes (ms/step)",
            sum(r.timings.get("write", 0.0) for r in recs) / n * 1000),
        row("step overhead: step wall / (agent + judge + device)", steps_wall / accounted, "<= 1.05"),
    ]


# --- 1c. settling on the cheapest frames against the PNG-only path ----------------------------------------
def bench_settle(lab: Lab, steps: int) -> list[dict[str, Any]]:
    """Settle + observation per step (``AdbDevice.settle``: frames until two in a row are equal, the
    settled one as the PNG observation) after an action that changes the screen, on one simulated
    phone at 1080x2400: the source chosen at connect time (auto) against ``screencap -p`` only,
    interleaved step by step so both see the same screens and the same load. The phone's
    ``screencap -p`` encodes as a phone does (RGBA, Skia's zlib level 6: harness.sim.render); a
    second phone with the sim's default, the fast zlib level 1, is measured beside it, so the gain
    over a cheaper PNG path is shown too."""
    from harness.core.actions import Key, OpenApp
    from harness.device.config import SettleConfig
    from harness.sim.render import PHONE_SCREENCAP_PNG_LEVEL

    # the first phone's screencap -p costs what a phone's does (Skia's zlib level 6); the second is the
    # sim's default, the fast level 1
    phones = {"": lab.phone("1080x2400", "--screencap-png-level", str(PHONE_SCREENCAP_PNG_LEVEL)),
              " (sim PNG at zlib level 1)": lab.phone()}
    ways = {}
    for label, serial in phones.items():
        ways["auto" + label] = lab.device(serial)
        ways["png" + label] = lab.device(serial, settle=SettleConfig(frames="png"))
    choice = ways["auto"].frame_choice()
    for dev in ways.values():
        dev.frame_choice()
    apps = ["Settings", "Contacts", "Messages", "Clock", "Notes", "Files"]
    times: dict[str, list[float]] = {k: [] for k in ways}
    shown: dict[str, int] = {}  # per phone, how many screens it has been moved to: an app's page, then home
    for i in range(steps):
        for k, dev in ways.items():
            n = shown[dev.serial] = shown.get(dev.serial, -1) + 1  # every settle follows a change of screen
            dev.execute(OpenApp(app=apps[(n // 2) % len(apps)]) if n % 2 == 0 else Key(key="home"))
            t0 = time.perf_counter()
            dev.settle()
            times[k].append(time.perf_counter() - t0)
    med = {k: _median_ms(v) for k, v in times.items()}
    low = " (sim PNG at zlib level 1)"
    return [
        row(f"settle: settle + observation per step, {choice['chosen']} frames (auto) (ms)", med["auto"]),
        row("settle: settle + observation per step, screencap -p only (ms)", med["png"]),
        row("settle: chosen frames / PNG-only path", med["auto"] / med["png"], "<= 0.6"),
        row(f"settle{low}: chosen frames (ms)", med["auto" + low]),
        row(f"settle{low}: screencap -p only (ms)", med["png" + low]),
        row(f"settle{low}: chosen frames / PNG-only path", med["auto" + low] / med["png" + low]),
    ]


# --- 5. payload -------------------------------------------------------------------------------------
def bench_payload() -> list[dict[str, Any]]:
    from harness.client.images import ImagePolicy, encode_image
    from harness.sim.phone import SimPhone

    phone = SimPhone(1080, 2400)
    phone.reset()
    shots = [phone.screencap_png()]
    for pkg in phone.packages():
        if phone.launch(pkg):
            shots.append(phone.screencap_png())
    policy = ImagePolicy()
    raw = [len(s) for s in shots]
    enc = [encode_image(s, policy) for s in shots]
    sent = [len(e.data_url) for e in enc]
    image = [e.bytes for e in enc]
    w, h = enc[0].width, enc[0].height
    return [
        row("payload: raw PNG per step (KB, the simulated phone's app screens at 1080x2400)", statistics.mean(raw) / 1024),
        row(f"payload: default policy image per step (KB, {policy.format} {w}x{h})", statistics.mean(image) / 1024),
        row("payload: bytes sent per step (base64 data URL) / raw PNG", statistics.mean(sent) / statistics.mean(raw),
            "<= 1"),
    ]


# --- text: long text in the simulated phone's fields and bubbles ----------------------------------------
LONG_UNITS = {"chinese": "明天的会议改到下午三点，请准时参加。", "emoji": "😀🎉👍🏽❤️‍🔥🇨🇳",
              "mixed": "Saturday 周六 😀 at 10, «see» you — مرحبا ", "latin": "see you there on saturday at ten "}


def _screens_with_text(text: str) -> tuple[float, float]:
    """(seconds of the screenshot with ``text`` in Lena's compose field, seconds with it sent)."""
    from harness.core.hierarchy import find, parse
    from harness.sim import render
    from harness.sim.phone import SimPhone
    from harness.core.tasks import Selector

    render._wrap_cached.cache_clear()  # measure the first screenshot of a text, as a run meets it
    phone = SimPhone(1080, 2400)
    phone.reset()
    phone.launch("com.android.messaging")

    def tap(**sel: str) -> None:
        el = find(parse(phone.hierarchy_xml()), Selector(**sel))
        assert el is not None, sel
        phone.tap(*el.center)

    tap(text="Lena Fischer")
    tap(rid="compose")
    phone.input_text(text)
    t0 = time.perf_counter()
    phone.screencap_png()
    typed = time.perf_counter() - t0
    tap(rid="send")
    t0 = time.perf_counter()
    phone.screencap_png()
    return typed, time.perf_counter() - t0


def bench_text() -> list[dict[str, Any]]:
    rows = []
    for name, unit in LONG_UNITS.items():
        long_text = (unit * (5000 // len(unit) + 1))[:5000]
        short = [_screens_with_text(long_text[:50]) for _ in range(5)]
        long = [_screens_with_text(long_text) for _ in range(5)]
        for i, what in enumerate(("typed in the field", "sent as a bubble")):
            s = statistics.median(x[i] for x in short)
            t = statistics.median(x[i] for x in long)
            # a field shows one line of it: as fast as a short text; a bubble is a screen full of text
            rows.append(row(f"text: {name}, 5,000 chars {what}: screenshot s / with 50 chars", t / s,
                            "<= 2" if i == 0 else None))
            rows.append(row(f"text: {name}, 5,000 chars {what}: screenshot (s)", t, "<= 1"))
    return rows


# --- viewer: many requests at once ----------------------------------------------------------------------
def bench_viewer(clients: int = 200) -> list[dict[str, Any]]:
    import http.client
    import threading

    from harness.report.serve import ViewServer
    from harness.report.viewer import write_viewer
    from tests.offline_judge.sample_runs import make_run

    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "run", [(f"t{i}", 10, "finished") for i in range(10)], size=(540, 1200))
        write_viewer(run)
        with ViewServer(run) as v:
            go = threading.Barrier(clients)
            out: list[tuple[Any, float]] = [(None, 0.0)] * clients

            def get(i: int) -> None:
                go.wait()
                t0 = time.perf_counter()
                try:
                    c = http.client.HTTPConnection("127.0.0.1", v.port, timeout=120)
                    c.request("GET", f"/report/thumbs/t{i % 10}/{i % 10 + 1:03d}.jpg")
                    r = c.getresponse()
                    r.read()
                    c.close()
                    out[i] = (r.status, time.perf_counter() - t0)
                except OSError as e:
                    out[i] = (type(e).__name__, time.perf_counter() - t0)

            threads = [threading.Thread(target=get, args=(i,)) for i in range(clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    times = [d for _, d in out]
    ok = sum(1 for st, _ in out if st == 200)
    return [row(f"viewer: {clients} simultaneous requests answered", ok, f">= {clients}"),
            row(f"viewer: slowest answer (s) of {clients} simultaneous requests", max(times)),
            row("viewer: slowest / median answer", max(times) / statistics.median(times), "<= 10")]


# --- live view: from a recorded step to the page --------------------------------------------------------
def bench_live(steps: int = 30) -> list[dict[str, Any]]:
    """A step line lands in trajectory.jsonl; how long until an open live page (headless Chromium,
    server-sent events) shows it. Each step is written once the page showed the one before."""
    import io
    import shutil

    from PIL import Image
    from playwright.sync_api import sync_playwright

    from harness.live.records import EpisodeLive
    from harness.live.server import LiveServer
    from harness.records import RunWriter, StepRecord

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    buf = io.BytesIO()
    Image.new("RGB", (540, 1200), "white").save(buf, "PNG")
    shot = buf.getvalue()
    lat: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as pw:
        run = RunWriter(Path(tmp) / "run", fsync=False)
        run.write_manifest({"agent": {"name": "bench", "label": "bench"}})
        ep = run.start_episode("t")
        live = EpisodeLive(ep.path)
        live.started(task_id="t", device="bench-1", cap=steps + 1, instruction="bench")
        before = ep.write_screen(0, shot)
        browser = pw.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        with LiveServer(run.run_dir) as server:
            page = browser.new_page()
            page.goto(server.url)
            page.locator('section.device[data-device="bench-1"]').wait_for()
            for k in range(1, steps + 1):
                after = ep.write_screen(k, shot)
                ep.append_step(StepRecord(index=k, action={"type": "click", "x": 10, "y": 10}, executed=True,
                                          screen_before=before, screen_after=after, thought=f"step {k}"))
                t0 = time.perf_counter()
                page.locator(f'section.device[data-recorded="{k}"]').wait_for(timeout=30_000)
                lat.append(time.perf_counter() - t0)
                before = after
            page.close()
        browser.close()
        run.close()
    return [row(f"live: recorded step -> page, median (s) of {steps}", statistics.median(lat), "<= 0.5"),
            row(f"live: recorded step -> page, slowest (s) of {steps}", max(lat), "<= 2")]


# --- 4. scale: 4 phones vs 1, with agents that wait on a model ----------------------------------------
def _model_waiting_replay(base_url: str) -> Any:
    """The replay agent, but each step first makes one call to the (scripted) model server."""
    from agents.replay import ReplayAgent, ReplayConfig
    from harness.client.calls import ModelClient
    from harness.client.config import ModelConfig
    from harness.client.images import user_message

    class ModelWaitingReplay(ReplayAgent):
        name = "replay-waiting-on-model"

        def __init__(self) -> None:
            super().__init__(ReplayConfig())
            self.client = ModelClient(ModelConfig(base_url=base_url, model="bench", max_retries=0, concurrency=16))

        def step(self, obs: Any) -> Any:
            self.client.chat([user_message(f"step {obs.step}")])
            return super().step(obs)

    return ModelWaitingReplay()


def bench_scale(lab: Lab, latency: float, episodes: int, serials: list[str]) -> list[dict[str, Any]]:
    from harness.records import RunWriter, read_results
    from harness.run.suite import Plugins, SuiteConfig, run_suite
    from harness.core.tasks import parse_task
    from tests.fakes.model_server import Reply, ScriptedModelServer

    import yaml

    data = yaml.safe_load((ROOT / "tasks" / "sim" / "settings.yaml").read_text(encoding="utf-8"))
    raw = next(t for t in (data["tasks"] if isinstance(data, dict) else data) if t["id"] == "settings_wifi_off")
    tasks = [parse_task({**raw, "id": f"wifi_off_{i:02d}", "safety": {"label": "safe"}}) for i in range(episodes)]
    out: dict[int, tuple[float, int]] = {}
    with ScriptedModelServer(lambda req: Reply("ok", delay_s=latency)) as server:
        for n in (1, 4):
            devices = [lab.device(s) for s in serials[:n]]
            plugins = Plugins(agent=lambda: _model_waiting_replay(server.base_url))
            with tempfile.TemporaryDirectory() as tmp:
                with RunWriter(Path(tmp) / "run") as w:
                    t0 = time.perf_counter()
                    rep = run_suite(tasks, devices, plugins, w, SuiteConfig(agent_name="bench"))
                    wall = time.perf_counter() - t0
                rows = read_results(Path(tmp) / "run")
            bad = [r for r in rows if r.status != "finished"]
            if rep.error or bad or len(rows) != episodes:
                raise RuntimeError(f"scale run on {n} phone(s) did not finish cleanly: {rep.error or bad}")
            out[n] = (wall, sum(r.steps for r in rows))
    (w1, s1), (w4, s4) = out[1], out[4]
    return [
        row(f"scale: 1 phone, {episodes} episodes, L={latency:g}s per step (episodes/min)", episodes / w1 * 60),
        row(f"scale: 4 phones, same episodes (episodes/min)", episodes / w4 * 60),
        row("scale: throughput 4 phones / 1 phone", w1 / w4, ">= 3.2"),
    ]


# --- 4b. peak memory of a 50-step and a 500-step episode -----------------------------------------------
_PEAK_CODE = """
import atexit, os, sys
def _peak():
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    with open(os.environ['CRATE_BENCH_PEAK'], 'w') as out:
                        out.write(line.split()[1])
    except OSError:
        pass
atexit.register(_peak)
from harness.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _peak_rss_kb(args: list[str], env: dict[str, str], peak_file: Path) -> tuple[int, int, str]:
    """Peak RSS of ``harness ARGS`` in its own process: VmHWM read as it exits (the peak of that
    process image alone; ``ru_maxrss`` would also count the parent's pages shared at fork)."""
    p = subprocess.run([sys.executable, "-c", _PEAK_CODE, *args], cwd=ROOT, capture_output=True, text=True,
                       env={**env, "CRATE_BENCH_PEAK": str(peak_file)})
    if peak_file.exists():
        kb = int(peak_file.read_text())
    else:  # no /proc: fall back to the rusage of the children (may include the fork's shared pages)
        import resource

        kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return kb, p.returncode, p.stdout + p.stderr


def bench_memory(lab: Lab, serial: str, lengths: tuple[int, int]) -> list[dict[str, Any]]:
    from harness.records import read_results

    suite = lab.tmp / "memory.yaml"
    # a task the suite validator takes (a simulated task needs a success check: without one the
    # row failed before it measured anything); whether it succeeds does not matter here
    suite.write_text("- id: wander\n  instruction: Wander around.\n  reference_steps: 1\n"
                     "  setup: {sim: {preset: default}}\n  success: {path: apps.settings.wifi, eq: false}\n",
                     encoding="utf-8")
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(lab.adb.port))
    peaks = {}
    for n in lengths:
        out = lab.tmp / f"mem-{n}"
        rss, rc, text = _peak_rss_kb(["run", "--suite", str(suite), "--device", serial, "--agent", "random",
                                      "--seed", "5", "--max-steps", str(n), "--out", str(out), "--quiet"], env,
                                     lab.tmp / f"peak-{n}")
        if rc != 0:
            raise RuntimeError(f"harness run --max-steps {n} failed ({rc}): {text[-2000:]}")
        r = read_results(out)[0]
        if r.steps != n:
            raise RuntimeError(f"the {n}-step episode stopped after {r.steps} steps ({r.status}: {r.error})")
        peaks[n] = rss
    a, b = lengths
    return [
        row(f"memory: peak RSS of `harness run`, {a}-step episode (MB)", peaks[a] / 1024),
        row(f"memory: peak RSS of `harness run`, {b}-step episode (MB)", peaks[b] / 1024),
        row(f"memory: peak RSS {b} steps / {a} steps", peaks[b] / peaks[a], "<= 1.1"),
    ]


# --- the other bench scripts ----------------------------------------------------------------------------
EXTRA_ARGS = {"static": ["--json"]}  # bench_static prints its JSON instead of writing a file
# --quick: the least work that runs every row of each other script once (a script not listed runs as
# it is; a test checks that every script present has its entry)
QUICK_ARGS: dict[str, list[str]] = {
    "agents": ["--steps", "2"],
    "bundle": ["--episodes", "4", "--runs", "1"],
    "calibration": ["--n", "20", "--pool", "200", "--splits", "20", "--episodes", "20"],
    "farm": ["--latency", "0.2", "--episodes", "2", "--rounds", "1", "--calls", "1", "--ceiling-phones", "4",
             "--ceiling-actors", "1", "--ceiling-steps", "5", "--ceiling-episodes", "1"],
    "guard": ["--repeat", "1"],
    "judges": ["--L", "0.02", "--repeat", "1"],
    "judges_offline": ["--episodes", "4", "--steps", "2", "--concurrency", "4", "--latency", "0.05"],
    "judges_scale": ["--scale", "4,8", "--concurrency", "4", "--latency", "0.05"],
    "preflight": ["--repeat", "1"],
    "replies": ["--small", "2000", "--repeat", "1"],
    "runner": ["--steps", "4"],
    "static": ["--steps", "200"],
    "view": ["--episodes", "20", "--sample", "10"],
}
QUICK_MINE = {"shots": 3, "settle_steps": 3, "overhead_steps": 3, "episodes": 4, "latency": 0.1,
              "memory_steps": "5,10"}
# benches that take longer than --other-timeout on a busy 2-core machine: their own limit (s)
TIMEOUTS = {"farm": 3600.0, "view": 3600.0}


def other_benches() -> list[str]:
    """Names of the ``scripts/bench_<name>`` wrappers present (not this one)."""
    names = []
    for p in sorted((ROOT / "scripts").glob("bench_*")):
        if p.suffix or not p.is_file():
            continue
        names.append(p.name[len("bench_"):])
    return names


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_rows(items: Any) -> list[dict[str, Any]] | None:
    if isinstance(items, list) and items and all(isinstance(x, dict) and "name" in x and "value" in x for x in items):
        return items
    return None


def fold(name: str, data: Any) -> list[dict[str, Any]]:
    """A bench's JSON as rows named ``<name>: ...``."""
    rows = _as_rows(data) or (_as_rows(data.get("rows")) or _as_rows(data.get("results")) if isinstance(data, dict) else None)
    if rows is not None:
        out = []
        for r in rows:
            target = r.get("target")
            new = row(f"{name}: {str(r['name']).strip()}", r["value"], target if isinstance(target, str) else None)
            if "holds" in r and r["holds"] is not None:
                new["holds"] = r["holds"]
            out.append(new)
        return out
    adapter = ADAPTERS.get(name)
    if adapter is not None:
        return adapter(data)
    out = []  # unknown shape: its top-level numbers
    if isinstance(data, dict):
        for k, v in data.items():
            if _num(v):
                out.append(row(f"{name}: {k}", v))
            elif isinstance(v, dict):
                out += [row(f"{name}: {k}.{k2}", v2) for k2, v2 in v.items() if _num(v2)]
    return out[:20] or [row(f"{name}: (no numbers found in its JSON)", None)]


def _fold_judges_offline(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    p1, p2 = d.get("pass1") or {}, d.get("pass2_cached") or {}
    target = d.get("target_ratio")
    if _num(p1.get("ratio")):
        out.append(row(f"judges_offline: {d.get('judge', '?')} {d.get('episodes', '?')} episodes, "
                       f"L={d.get('latency_s', '?')}s: wall / ideal", p1["ratio"],
                       f"<= {target}" if _num(target) else None))
    if _num(p2.get("fraction_of_pass1")):
        out.append(row("judges_offline: cached second pass / first pass (wall)", p2["fraction_of_pass1"]))
    return out


def _fold_agents(d: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in d if isinstance(d, list) else []:
        a = r.get("agent", "?") + (f" at {r['size']}" if r.get("size") else "")
        if _num(r.get("agent_layer")):
            out.append(row(f"agents: {a}: agent layer per step, no model time (ms)", r["agent_layer"]))
        if _num(r.get("bytes_sent_kb")):
            out.append(row(f"agents: {a}: request bytes per step (KB, {r.get('images', '?')} images)", r["bytes_sent_kb"]))
    return out


def _fold_static(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [row(f"static: {p['profile']} scoring (ms per 1000 steps)", p["ms_per_1000_steps"])
            for p in d.get("profiles", []) if _num(p.get("ms_per_1000_steps"))]


ADAPTERS: dict[str, Callable[[Any], list[dict[str, Any]]]] = {
    "judges_offline": _fold_judges_offline, "agents": _fold_agents, "static": _fold_static,
}


def run_other(name: str, timeout: float, log_dir: Path, quick: bool = False) -> list[dict[str, Any]]:
    script = ROOT / "scripts" / f"bench_{name}"
    out_json = BENCH / f"{name}.json"
    started = time.time()
    t0 = time.monotonic()
    args = [*EXTRA_ARGS.get(name, []), *(QUICK_ARGS.get(name, []) if quick else [])]
    print(f"  running scripts/bench_{name} {' '.join(args)}...", flush=True)
    try:
        p = subprocess.run(["bash", str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "CRATE_BENCH_DIR": str(BENCH)})
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = None, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), ""
    log = log_dir / f"bench_{name}.log"
    log.write_text(f"$ scripts/bench_{name}\n{stdout}\n--- stderr ---\n{stderr}", encoding="utf-8")
    took = time.monotonic() - t0
    data = None
    if out_json.exists() and out_json.stat().st_mtime >= started - 1:
        data = json.loads(out_json.read_text(encoding="utf-8"))
    else:
        try:
            data = json.loads(stdout)
        except json.JSONDecodeError:
            pass
    if rc != 0 and (rc is None or data is None):  # (a script that exits 1 for a missed target wrote its rows)
        why = "timed out" if rc is None else f"exit {rc}"
        print(f"  scripts/bench_{name}: {why} after {took:.0f}s (log: {log})", flush=True)
        tail = [line for line in (stderr or stdout).strip().splitlines() if line.strip()][-12:]
        for line in tail:  # why, where it is read (a CI log keeps this, not the file under /tmp)
            print(f"    | {line}", flush=True)
        return [row(f"{name}: FAILED ({why}; log {log})", None, None) | {"holds": False}]
    if data is None:
        return [row(f"{name}: FAILED: ran, but wrote no {name}.json and printed no JSON (log {log})", None)
                | {"holds": False}]
    print(f"  scripts/bench_{name}: done in {took:.0f}s", flush=True)
    try:
        return fold(name, data)
    except Exception as e:  # a changed shape must not lose the other results
        return [row(f"{name}: FAILED: could not read its results ({type(e).__name__}: {e})", None) | {"holds": False}]


# --- table --------------------------------------------------------------------------------------------
def print_table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"crate-harness benchmarks ({len(rows)} results)")
    t.add_column("benchmark", overflow="fold")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    t.add_column("holds", justify="center")
    for r in rows:
        v = r["value"]
        shown = "-" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v))
        holds = {True: "[green]yes[/green]", False: "[red]NO[/red]", None: ""}[r["holds"]]
        t.add_row(r["name"], shown, r["target"] or "", holds)
    Console(width=140).print(t)


def main() -> int:
    global BENCH
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help=f"comma-separated subset of {', '.join(ITEMS)}, others, or other scripts' names "
                                   f"({', '.join(other_benches())})")
    ap.add_argument("--quick", action="store_true", help="every row once at its smallest size, into bench/quick/ "
                                                         "(checks that every row runs; measures nothing)")
    ap.add_argument("--out", type=Path, help="the folder for the results (default bench/, with --quick bench/quick/)")
    ap.add_argument("--skip-others", action="store_true", help="do not run the other scripts/bench_* scripts")
    ap.add_argument("--latency", type=float, default=0.5, help="L, the scripted model's answer time (s)")
    ap.add_argument("--episodes", type=int, default=8, help="episodes in the scale benchmark")
    ap.add_argument("--shots", type=int, default=30, help="screenshots per path in the observation benchmark")
    ap.add_argument("--overhead-steps", type=int, default=30)
    ap.add_argument("--settle-steps", type=int, default=20, help="steps per way in the settle benchmark")
    ap.add_argument("--memory-steps", default="50,500", help="the two episode lengths compared")
    ap.add_argument("--other-timeout", type=float, default=900, help="longest run of one other bench script (s)")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK_MINE.items():
            if getattr(args, k) == ap.get_default(k):
                setattr(args, k, v)
    BENCH = args.out or (BENCH / "quick" if args.quick else BENCH)
    others = other_benches()
    only = set(x.strip() for x in (args.only or ",".join([*ITEMS, "others"])).split(",") if x.strip())
    unknown = only - {*ITEMS, "others", *others}
    if unknown:
        ap.error(f"--only: unknown item(s) {', '.join(sorted(unknown))}")
    BENCH.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.gettempdir()) / "crate-bench-logs"  # outside the tree: nothing to commit by mistake
    log_dir.mkdir(exist_ok=True)
    rows: list[dict[str, Any]] = []
    t_all = time.monotonic()

    def measure(item: str, fn: Callable[[], list[dict[str, Any]]]) -> None:
        if item not in only:
            return
        print(f"  measuring {item} ...", flush=True)
        t0 = time.monotonic()
        try:
            rows.extend(fn())
        except Exception as e:  # report and go on with the rest
            rows.append(row(f"{item}: FAILED ({type(e).__name__}: {str(e)[:200]})", None) | {"holds": False})
        print(f"  {item}: {time.monotonic() - t0:.0f}s", flush=True)

    mine = only & set(ITEMS)
    if mine:
        lab = Lab()
        try:
            measure("observation", lambda: bench_observation(lab, args.shots))
            measure("settle", lambda: bench_settle(lab, args.settle_steps))
            measure("overhead", lambda: bench_overhead(lab, args.overhead_steps))
            measure("payload", bench_payload)
            measure("text", bench_text)
            measure("viewer", bench_viewer)
            measure("live", bench_live)
            scale_phones: list[str] = []
            if "scale" in mine or "memory" in mine:
                scale_phones = [lab.phone("540x1200") for _ in range(4 if "scale" in mine else 1)]
            measure("scale", lambda: bench_scale(lab, args.latency, args.episodes, scale_phones))
            a, b = (int(x) for x in args.memory_steps.split(","))
            measure("memory", lambda: bench_memory(lab, scale_phones[0], (a, b)))
        finally:
            lab.close()
    for name in others:
        if (name in only or ("others" in only and not args.skip_others)):
            rows.extend(run_other(name, max(args.other_timeout, TIMEOUTS.get(name, 0.0)), log_dir, args.quick))
    broken = [r for r in rows if "FAILED" in r["name"]]  # a row that did not run, whatever the mode
    if args.quick:  # nothing measured: no target is judged
        rows = [r if r in broken else {**r, "holds": None} for r in rows]
    (BENCH / "results.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(rows)
    failed = [r for r in rows if r["holds"] is False]
    print(f"{len(rows)} results in {time.monotonic() - t_all:.0f}s; {sum(r['holds'] is True for r in rows)} targets "
          f"hold, {len(failed)} do not; {len(broken)} row(s) failed to run; written to {BENCH / 'results.json'}"
          + (" (quick: every row once, nothing measured)" if args.quick else ""))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
