"""Faults of the commands that read finished runs (view, report, judge, judge-eval): symlinks out of
the run (a screenshot, an episode folder, a screens folder, a trajectory, the report folder), a web
page using DNS rebinding against a running viewer, 200 simultaneous viewer requests, read-only run
folders, torn and repeated judgement lines, and the same run given twice. Afterwards: nothing
outside the run folder was read, copied or served; every request was answered; a read-only folder
got one line and exit 2 (and `view --out DIR` worked); every tolerated problem was reported with
its file and line; no episode was counted twice."""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image

from harness.cli.main import main
from harness.report.serve import ViewServer
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images
from tests.faults.helpers import ROOT, wait_for
from tests.offline_judge import count_judge  # noqa: F401  (registers the count-test judge)
from tests.offline_judge.sample_runs import make_run

pytestmark = pytest.mark.faults

SECRET = (250, 7, 190)  # a colour no recorded screen has


def _secret_png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (90, 200), SECRET).save(path, format="PNG")
    return path


def _is_secret(data: bytes | str) -> bool:
    if isinstance(data, str):  # a data: URL as sent to a model
        data = base64.b64decode(data.split(",", 1)[1])
    with Image.open(io.BytesIO(data)) as im:
        px = im.convert("RGB").resize((1, 1)).getpixel((0, 0))
    return all(abs(a - b) < 24 for a, b in zip(px, SECRET))


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.putrequest("GET", path, skip_host=True)
        if host is not None:
            c.putheader("Host", host)
        c.endheaders()
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


@pytest.fixture
def hostile_run(tmp_path):
    """A run whose episodes lead out of it: a: screens/001.png is a link to a secret image; b: the
    whole episode folder is a link to a folder elsewhere; c: its screens folder is a link; d: its
    trajectory is a link to a trajectory elsewhere (whose screens are the secret)."""
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished"), ("c", 1, "finished"),
                                      ("d", 1, "finished"), ("ok", 1, "finished")])
    outside = tmp_path / "outside"
    secret = _secret_png(outside / "secret.png")
    eps = run / "episodes"
    (eps / "a" / "screens" / "001.png").unlink()
    (eps / "a" / "screens" / "001.png").symlink_to(secret)
    shutil.move(eps / "b", outside / "b")
    for p in (outside / "b" / "screens").iterdir():
        p.unlink()
        shutil.copy(secret, p)
    (eps / "b").symlink_to(outside / "b", target_is_directory=True)
    shots = outside / "c-screens"
    shutil.move(eps / "c" / "screens", shots)
    for p in shots.iterdir():
        p.unlink()
        shutil.copy(secret, p)
    (eps / "c" / "screens").symlink_to(shots, target_is_directory=True)
    traj = outside / "d-trajectory.jsonl"
    traj.write_text(json.dumps({"index": 1, "screen_before": "screens/000.png", "screen_after": "screens/001.png",
                                "action": {"type": "key", "key": "back"}, "raw_output": "FROM OUTSIDE"}) + "\n")
    (eps / "d" / "trajectory.jsonl").unlink()
    (eps / "d" / "trajectory.jsonl").symlink_to(traj)
    # a thumbnail an older viewer made of the linked screen is still there
    stale = run / "report" / "thumbs" / "a" / "001.jpg"
    stale.parent.mkdir(parents=True)
    Image.new("RGB", (24, 48), SECRET).save(stale, format="JPEG")
    return run


def test_nothing_outside_the_run_is_read_copied_or_served(hostile_run, capsys):
    run = hostile_run
    assert main(["view", str(run), "--no-serve"]) == 0, capsys.readouterr().err
    report = run / "report"
    thumbs = sorted(p.relative_to(report / "thumbs").as_posix() for p in (report / "thumbs").rglob("*.jpg"))
    # only the run's own screens became thumbnails; the stale one made of the linked screen is gone
    assert thumbs == ["a/000.jpg", "a/002.jpg", "ok/000.jpg", "ok/001.jpg"], thumbs
    assert not any(_is_secret(p.read_bytes()) for p in report.rglob("*.jpg"))
    page_a = (report / "episodes" / "a.html").read_text(encoding="utf-8")
    assert page_a.count("unsafe screenshot path refused") == 1  # step 2's screen (step 1's after)
    for tid in ("b", "c", "d"):
        assert 'class="shot"' not in (report / "episodes" / f"{tid}.html").read_text(encoding="utf-8"), tid
    assert "FROM OUTSIDE" not in (report / "episodes" / "d.html").read_text(encoding="utf-8")
    index = (run / "report.html").read_text(encoding="utf-8")
    assert "resolves outside" in index  # the refusals are listed as warnings
    # served: nothing that resolves outside the run, whatever the path
    with ViewServer(run) as v:
        for path in ("/episodes/a/screens/001.png", "/episodes/b/screens/000.png", "/episodes/c/screens/001.png",
                     "/episodes/b/trajectory.jsonl", "/episodes/d/trajectory.jsonl", "/report/thumbs/a/001.jpg"):
            status, body = _get(v.port, path, f"127.0.0.1:{v.port}")
            assert status == 404, (path, status)
        assert _get(v.port, "/episodes/a/screens/002.png", f"127.0.0.1:{v.port}")[0] == 200
    # report and judge read none of it either
    assert main(["report", str(run), "--format", "json", "--resamples", "10"]) == 0
    capsys.readouterr()
    seen = []

    def responder(req):
        seen.extend(request_images(req))
        return Reply('{"success": true}' if "FINAL" in json.dumps(req) else '{"ok": true}')

    with ScriptedModelServer(responder) as s:
        assert main(["judge", str(run), "--judge", "count-test", "--model-base-url", s.base_url, "--model", "jm",
                     "--retries", "0", "--no-progress", "--no-cache"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert seen and not any(_is_secret(img) for img in seen)
    lines = {d["task_id"]: d for d in map(json.loads, (run / "judgements" / "jm" / "results.jsonl").open())}
    for tid in ("a", "b", "c", "d"):
        assert lines[tid]["verdicts"] == {"count-test": "judge_error"}, (tid, lines[tid])
        assert "outside" in json.dumps(lines[tid]["details"]), lines[tid]
    assert lines["ok"]["verdicts"] == {"count-test": True}


def test_the_viewer_never_writes_through_a_symlink_out_of_the_run(tmp_path, capsys):
    run = make_run(tmp_path / "run", [("a", 1, "finished")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / "report").symlink_to(elsewhere, target_is_directory=True)
    assert main(["view", str(run), "--no-serve"]) == 2
    err = capsys.readouterr().err
    assert "leads out of" in err and err.count("\n") == 1
    assert list(elsewhere.iterdir()) == []


# --- DNS rebinding and many requests at once ---------------------------------------------------------------
def test_the_viewer_answers_only_its_own_host_and_serves_200_requests_at_once(tmp_path):
    run = make_run(tmp_path / "run", [("a", 3, "finished")])
    assert main(["view", str(run), "--no-serve"]) == 0
    v = ViewServer(run, port=0)  # bound and listening; not accepting yet
    try:
        port = v.port
        # 200 clients connect before the server accepts any: the listen backlog holds them all
        socks = []
        for _ in range(200):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)

        def connected(s: socket.socket) -> bool:
            try:
                s.getpeername()
                return True
            except OSError:
                return False

        assert wait_for(lambda: all(connected(s) for s in socks), 20), \
            f"{sum(map(connected, socks))} of 200 connections completed: the backlog drops the rest"
        v.start()
        for s in socks:
            s.setblocking(True)
            s.settimeout(60)
            s.sendall(f"GET /report/thumbs/a/001.jpg HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
                      .encode())
        answers = []
        for s in socks:
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
            answers.append(b"".join(chunks).split(b"\r\n", 1)[0])
            s.close()
        assert answers == [b"HTTP/1.0 200 OK"] * 200, set(answers)
        # DNS rebinding: a page on evil.example whose name now points at 127.0.0.1
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", f"127.0.0.1:{port + 1}",
                     "127.0.0.1", f"[::1]:{port}", f"user@127.0.0.1:{port}", ""):
            status, body = _get(port, "/report.html", host)
            assert status == 421 and b"Run run" not in body, (host, status)
        status, _ = _get(port, "/report.html", None)  # no Host header at all
        assert status == 421
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"localhost.:{port}"):
            assert _get(port, "/report.html", host)[0] == 200, host
    finally:
        v.stop()


# --- read-only run folders ---------------------------------------------------------------------------------
def _harness_read_only(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    """`harness ARGS` while ``folder`` is read-only: a read-only bind mount in a private mount namespace
    when we are root (permissions do not stop root), else the folder's write bits taken away."""
    cmd = [sys.executable, "-m", "harness.cli", *args]
    if os.geteuid() == 0:
        if not shutil.which("unshare"):
            pytest.skip("root without unshare: cannot make a read-only folder")
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" || exit 99; shift; exec "$@"'
        p = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(folder), *cmd], cwd=ROOT,
                           capture_output=True, text=True, timeout=180)
        if p.returncode == 99:
            pytest.skip(f"cannot mount read-only here: {p.stderr.strip()}")
        return p
    modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")] if not p.is_symlink()}
    for p, m in modes.items():
        p.chmod(m & ~0o222)
    try:
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    finally:
        for p, m in modes.items():
            p.chmod(m)


def test_read_only_run_folders_give_one_line_and_view_out_writes_elsewhere(tmp_path):
    run = make_run(tmp_path / "run", [("a", 2, "finished"), ("b", 1, "finished")])
    before = sorted(p.relative_to(run).as_posix() for p in run.rglob("*"))
    p = _harness_read_only(run, ["view", str(run), "--no-serve"])
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr and "--out DIR" in p.stderr, p.stderr
    p = _harness_read_only(run, ["judge", str(run), "--judge", "crate-s", "--model-base-url", "http://127.0.0.1:9/v1",
                                 "--model", "m", "--no-progress"])
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "read-only" in p.stderr and "Traceback" not in p.stderr, p.stderr
    out = tmp_path / "pages"
    p = _harness_read_only(run, ["view", str(run), "--no-serve", "--out", str(out)])
    assert p.returncode == 0, p.stderr
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*")) == before  # the run is untouched
    assert (out / "report.html").is_file() and (out / "report" / "thumbs" / "a" / "002.jpg").is_file()
    assert (out / "run").is_symlink() and (out / "run").resolve() == run.resolve()
    page = (out / "report" / "episodes" / "a.html").read_text(encoding="utf-8")
    assert 'href="../../run/episodes/a/screens/001.png"' in page
    # opened from disk, the link reaches the run's screenshot; served, /run/... is the run folder
    assert (out / "report" / "episodes" / "../../run/episodes/a/screens/001.png").resolve().is_file()
    with ViewServer(out, run=run) as v:
        host = f"127.0.0.1:{v.port}"
        status, body = _get(v.port, "/run/episodes/a/screens/001.png", host)
        assert status == 200 and body == (run / "episodes" / "a" / "screens" / "001.png").read_bytes()
        assert _get(v.port, "/report/episodes/a.html", host)[0] == 200
        assert _get(v.port, "/run/manifest.json", host)[0] == 200
        for path in ("/run/../../etc/passwd", "/run/%2e%2e/%2e%2e/etc/passwd", "/run/..%2f..%2fetc/passwd",
                     "/run/report.html/../../../etc/passwd"):
            assert _get(v.port, path, host)[0] == 404, path


# --- torn and repeated judgement lines; the same run twice ---------------------------------------------------
def _judged_run(tmp_path: Path) -> Path:
    run = make_run(tmp_path / "run", [(f"t{i}", 1, "finished") for i in range(8)])
    d = run / "judgements" / "S"
    d.mkdir(parents=True)
    lines = [json.dumps({"task_id": f"t{i}", "verdicts": {"crate": i % 2 == 0}}) for i in range(8)]
    (d / "manifest.json").write_text("{}")
    # t7's line torn in half by an interrupted append; t0 judged twice (the second time false)
    body = "\n".join(lines[:7]) + "\n" + json.dumps({"task_id": "t0", "verdicts": {"crate": False}}) + "\n" + lines[7][:20]
    (d / "results.jsonl").write_text(body)
    return run


def test_torn_or_repeated_judgement_lines_are_reported_with_file_and_line(tmp_path, capsys):
    run = _judged_run(tmp_path)
    path = run / "judgements" / "S" / "results.jsonl"
    assert main(["report", str(run), "--format", "json", "--resamples", "10"]) == 0
    rep = json.loads(capsys.readouterr().out)
    sr = rep["groups"][0]["sr"]["crate"]
    assert (sr["k"], sr["n"]) == (3, 7)  # t0 counts once (its last line), t7 has no verdict
    warnings = "\n".join(rep["warnings"])
    assert f"{path}:9: ignored a partial last line" in warnings
    assert f"{path}:8: second line for task 't0' (first at line 1)" in warnings
    assert main(["report", str(run), "--format", "md", "--resamples", "10"]) == 0
    md = capsys.readouterr().out
    assert f"{path}:9:" in md and "&lt;" not in md and "RUN/judgements/SET/results.jsonl" in md
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"task_id": f"t{i}", "success": True}) + "\n" for i in range(8)))
    assert main(["judge-eval", str(run), "--labels", str(labels), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert f"{path}:9: ignored a partial last line" in err and f"{path}:8: second line" in err
    assert f"{path}:9" in "\n".join(json.loads(out)["warnings"])


def test_the_same_run_given_twice_counts_once(tmp_path, capsys):
    run = _judged_run(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(run, target_is_directory=True)
    for args in ([str(run), str(run)], [str(run), str(link)], [str(run), str(run) + "/"]):
        assert main(["report", *args, "--format", "json", "--resamples", "10"]) == 0
        rep = json.loads(capsys.readouterr().out)
        g = rep["groups"][0]
        assert g["episodes"] == 8 and (g["sr"]["oracle"]["k"], g["sr"]["oracle"]["n"]) == (8, 8), args
        assert any("given twice" in w for w in rep["warnings"]), rep["warnings"]
        assert len(rep["runs"]) == 1
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"task_id": f"t{i}", "success": True}) + "\n" for i in range(8)))
    assert main(["judge-eval", str(run), str(link), "--labels", str(labels), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "given twice" in err
    assert json.loads(out)["episodes"] == 8
    with ScriptedModelServer(lambda req: Reply('{"success": true}' if "FINAL" in json.dumps(req) else '{"ok": true}')) as s:
        assert main(["judge", str(run), str(link), "--judge", "count-test", "--model-base-url", s.base_url,
                     "--model", "jm", "--retries", "0", "--no-progress", "--no-cache"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the summary's lines are wrapped
    assert "(given twice); it is judged once" in out and "8 judged" in out
    assert len((run / "judgements" / "jm" / "results.jsonl").read_text().splitlines()) == 8
