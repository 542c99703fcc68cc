"""A report of single episodes reads exactly as before repeats (byte for byte against the output of
the code before them, tests/report/fixtures/report_single), from run folders and from their
bundles; a bundle round-trips (report from the bundle equals the report from the run in every
format, keys, serials and host paths absent); verify finds a changed or missing member; downscaled
screenshots keep the phone's size for the viewer's overlays; view reads a bundle."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.records import EpisodeResult, RunWriter, StepRecord
from harness.report.bundle import BundleError, make_bundle, read_bundle, unpack
from harness.report.viewer_files import source_size

FIXTURES = Path(__file__).parent / "fixtures" / "report_single"
FORMATS = ("md", "csv", "json", "html")
TASKS = """
- id: a
  instruction: A
  language: en
  categories: [single-app]
  reference_steps: 2
- id: b
  instruction: B
  language: zh
  reference_steps: 2
- id: c
  instruction: C
  language: en
  reference_steps: 3
"""
KEY = "sk-proj-" + "Zq9" * 12
SERIAL = "R58M41ABCDE"


def _png(w: int = 540, h: int = 1200, shade: int = 0) -> bytes:
    from PIL import Image

    im = Image.new("RGB", (w, h), (shade, 80, 160))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def write_single(path: Path, agent: str, outs: dict, *, secrets: bool = False) -> Path:
    """The runs the goldens were made from (and, with ``secrets``, the same with keys, a serial and
    host paths planted in the records the report does not print)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "tasks.yaml").write_text(TASKS)
    with RunWriter(path, fsync=False) as run:
        manifest = {"agent": {"name": agent, "label": agent}, "suite": {"path": "suite-x", "files": {"tasks.yaml": None}}}
        if secrets:
            manifest["devices"] = [{"serial": SERIAL, "kind": "phone"}]
            manifest["note"] = f"written in {path.resolve()} by {Path.home()}"
        run.write_manifest(manifest)
        for t, o in outs.items():
            extra = {}
            if secrets:
                ep = run.start_episode(t)
                ep.write_screen(0, _png(shade=ord(t)))
                ep.write_screen(1, _png(shade=ord(t) + 1))
                ep.append_step(StepRecord(index=1, action={"type": "click", "x": 270, "y": 600},
                                          screen_before="screens/000.png", screen_after="screens/001.png",
                                          raw_output=f"Thought: use the key {KEY} on {SERIAL}\nAction: click",
                                          thought=f"Authorization: Bearer {KEY}"))
                extra = {"device": SERIAL, "error": None, "conditions": {"device": SERIAL, "note": f"api_key={KEY}"}}
            run.append_result(EpisodeResult(task_id=t, agent=agent, status="infra_error" if o is None else "finished",
                                            steps=2, cap=5, verdicts={} if o is None else {"oracle": o},
                                            duration_s=1.5, seed=0, usage={"total_tokens": 100}, **extra))
    return path


def _reports(capsys, *runs: str) -> dict[str, str]:
    out = {}
    for fmt in FORMATS:
        capsys.readouterr()
        assert main(["report", *runs, "--format", fmt]) == 0
        out[fmt] = capsys.readouterr().out
    return out


def _two(root: Path, secrets: bool = False) -> None:
    write_single(root / "runs" / "x", "X", {"a": True, "b": False, "c": True}, secrets=secrets)
    write_single(root / "runs" / "y", "Y", {"a": False, "b": False, "c": True}, secrets=secrets)


def test_single_episodes_read_as_before_from_runs_and_bundles(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _two(tmp_path)
    golden = {fmt: (FIXTURES / f"golden.{fmt}").read_text(encoding="utf-8") for fmt in FORMATS}
    # --out wrote the goldens; printing adds nothing but the text itself
    assert _reports(capsys, "runs/x", "runs/y") == golden
    (tmp_path / "b" / "runs").mkdir(parents=True)
    for name in ("x", "y"):
        make_bundle(tmp_path / "runs" / name, tmp_path / "b" / "runs" / name)
    monkeypatch.chdir(tmp_path / "b")  # the bundles under the names the runs had: the same report, byte for byte
    assert _reports(capsys, "runs/x", "runs/y") == golden


def test_bundle_round_trip_without_keys(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _two(tmp_path, secrets=True)
    from_runs = _reports(capsys, "runs/x", "runs/y")
    (tmp_path / "b" / "runs").mkdir(parents=True)
    for name in ("x", "y"):
        capsys.readouterr()
        assert main(["bundle", f"runs/{name}", "-o", f"b/runs/{name}"]) == 0
        printed = capsys.readouterr().out
        digest = printed.split("signature: ")[1].split()[0]
        assert main(["bundle", "verify", f"b/runs/{name}"]) == 0
        assert f"signature: {digest}" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path / "b")
    assert _reports(capsys, "runs/x", "runs/y") == from_runs
    # nothing secret in any member: keys, the serial, the host paths
    dest = tmp_path / "unpacked"
    v = unpack(tmp_path / "b" / "runs" / "x", dest)
    assert v.files == len(v.index["files"]) + 6 and v.index["redacted"]["devices"] == 1  # + 6 sealed screenshots
    text = b"".join(p.read_bytes() for p in dest.rglob("*") if p.is_file() and p.suffix != ".png")
    for secret in (KEY, SERIAL, str(tmp_path), str(Path.home())):
        assert secret.encode() not in text, secret
    assert b"device-1" in text and b"***redacted***" in text and b"<run>" in text
    assert sorted(p.name for p in (dest / "episodes" / "a" / "screens").iterdir()) == ["000.png", "001.png"]
    assert not (dest / ".lock").exists()


def _rewrite(src: Path, dst: Path, change, extra: tuple[str, bytes] | None = None) -> None:
    """The bundle's members read back and written again, ``change(name, data)`` deciding each (None:
    left out); ``extra`` (name, data) added at the end."""
    import zstandard

    with open(src, "rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as z, tarfile.open(fileobj=z, mode="r|") as t:
        members = [(ti, t.extractfile(ti).read()) for ti in t]
    with open(dst, "wb") as raw, zstandard.ZstdCompressor().stream_writer(raw) as z, tarfile.open(fileobj=z, mode="w|") as t:
        for ti, data in members:
            data = change(ti.name, data)
            if data is None:
                continue
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
        if extra is not None:
            ti = tarfile.TarInfo(extra[0])
            ti.size = len(extra[1])
            t.addfile(ti, io.BytesIO(extra[1]))


def test_verify_finds_what_changed(tmp_path, capsys):
    run = write_single(tmp_path / "r", "X", {"a": True, "b": False}, secrets=True)
    good = tmp_path / "r.tar.zst"
    digest, index, files = make_bundle(run, good)
    v = read_bundle(good)
    assert v.signature == digest and index["seal"] == "bundle-seal.json" and v.files == files
    bad = tmp_path / "bad"
    _rewrite(good, bad, lambda name, data: data.replace(b'"oracle":true', b'"oracle":fals') if name == "results.jsonl" else data)
    with pytest.raises(BundleError, match="results.jsonl: its content differs from the index"):
        read_bundle(bad)
    assert main(["bundle", "verify", str(bad)]) == 2
    assert "results.jsonl" in capsys.readouterr().err
    _rewrite(good, bad, lambda name, data: None if name.endswith("001.png") and "/a/" in name else data)
    with pytest.raises(BundleError, match="not in the bundle"):
        read_bundle(bad)
    _rewrite(good, bad, lambda name, data: data[:-8] + b"\x00" * 8 if name.endswith("a/screens/001.png") else data)
    with pytest.raises(BundleError, match="a/screens/001.png: its content differs from the index"):
        read_bundle(bad)
    _rewrite(good, bad, lambda name, data: None if name == "bundle-seal.json" else data)
    with pytest.raises(BundleError, match="no seal"):
        read_bundle(bad)
    _rewrite(good, bad, lambda name, data: data, extra=("episodes/a/planted.json", b"{}"))
    with pytest.raises(BundleError, match="planted.json: after the seal"):
        read_bundle(bad)
    cut = tmp_path / "cut"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(BundleError, match="damaged|not in the bundle"):
        read_bundle(cut)
    assert main(["bundle", str(tmp_path / "none"), "-o", str(tmp_path / "x")]) == 2
    with RunWriter(run, resume=True, fsync=False):  # a run still being written is refused
        with pytest.raises(BundleError, match="still being written"):
            make_bundle(run, tmp_path / "y")


def test_downscaled_screens_keep_the_phone_size_and_view_reads_a_bundle(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    run = write_single(tmp_path / "r", "X", {"a": True}, secrets=True)
    small = tmp_path / "small.tar.zst"
    assert main(["bundle", str(run), "-o", str(small), "--screens-max-side", "120"]) == 0
    dest = tmp_path / "u"
    unpack(small, dest)
    shot = dest / "episodes" / "a" / "screens" / "000.png"
    from PIL import Image

    with Image.open(shot) as im:
        assert max(im.size) == 120
    assert source_size(shot) == (540, 1200)  # the overlays are drawn in the phone's pixels
    assert small.stat().st_size < (tmp_path / "r").stat().st_size + 10 ** 6
    capsys.readouterr()
    assert main(["view", str(small), "--no-serve"]) == 0
    pages = list((tmp_path / "cache").rglob("report.html"))
    assert len(pages) == 1 and "unpacked into" in capsys.readouterr().err
    page = (pages[0].parent / "report" / "episodes" / "a.html").read_text()
    assert 'viewBox="0 0 540 1200"' in page and KEY not in page


def test_lines_copied_as_written_only_when_nothing_is_redacted():
    """The bundle's quick path (a line copied when redaction would change nothing) never lets a
    secret through: every line redact() changes, or that names a serial or a host path, goes the
    slow way."""
    from harness.report.bundle import Redactor

    red = Redactor({SERIAL: "device-1"}, {"/home/someone/runs/r": "<run>"}).compile()
    lines = [{"raw_output": f"use {KEY}"}, {"apiKey": "abc"}, {"X-Api-Key": "abc"}, {"headers": {"Authorization": "x y"}},
             {"cmd": ["--token", "abcdef"]}, {"t": "Bearer abcdefghijkl"}, {"api key": "v"}, {"passphrase": "p"},
             {"note": "hf_" + "a" * 24}, {"device": SERIAL}, {"out": "/home/someone/runs/r/x"}, {"k": "\\u0073k-x"},
             {"thought": "tap the blue button", "usage": None}, {"steps": [1, 2], "x": "pass the salt"}]
    for obj in lines:
        raw = json.dumps(obj).encode()
        changed = red.record(obj) != obj
        assert not (changed and red.untouched(raw)), obj
    assert red.untouched(json.dumps({"thought": "tap the blue button"}).encode())
    # a key spelt with a JSON escape (\u0073k- is sk-) is never copied as it is
    assert not red.untouched(json.dumps({"k": "\u0073k-" + "a" * 20}, ensure_ascii=True).encode().replace(b"sk", b"\\u0073k"))
