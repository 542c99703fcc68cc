"""Settling on the cheapest frames, over the real adb server and simulated phones: what is measured
at connect time, that every source settles on the screen the phone shows (the same pixels as
``screencap -p``), that a change is seen, and that the choice reaches the run's manifest."""

from __future__ import annotations

import json

import pytest

from harness.core.actions import Key, OpenApp
from harness.device.base import InfraError
from harness.device.config import DeviceConfig, SettleConfig
from harness.core.screenshot import Screenshot, image_of


def _pixels(png: bytes) -> bytes:
    return image_of(png).convert("RGB").tobytes()


def test_auto_measures_png_and_raw_and_records_the_choice(serve_sim):
    s = serve_sim(width=540, height=1200)
    dev = s.device()
    rep = dev.frame_choice()
    assert set(rep["candidates"]) == {"png", "raw"} and rep["forced"] is False
    png, raw = rep["candidates"]["png"], rep["candidates"]["raw"]
    assert png["ok"] and raw["ok"] and png["same_frames"] and raw["same_frames"]  # an idle screen
    assert raw["bytes"] == 16 + 540 * 1200 * 4 and png["bytes"] < raw["bytes"]
    assert png["observation_ms"] == 0 and raw["observation_ms"] > 0  # only raw frames are encoded here
    assert rep["chosen"] == min(rep["per_step_ms"], key=rep["per_step_ms"].get)
    assert rep["per_step_ms"]["png"] == pytest.approx(2 * png["grab_ms"], abs=0.02)
    # the raw frame's encode overlaps the confirming grab
    assert rep["per_step_ms"]["raw"] == pytest.approx(raw["grab_ms"] + max(raw["grab_ms"], raw["observation_ms"]),
                                                      abs=0.02)
    assert dev.frame_choice() is rep  # measured once per device
    json.dumps(rep)  # goes into the manifest as it is


@pytest.mark.parametrize("frames", ["png", "raw", "u2"])
def test_every_source_settles_on_the_screen_shown_and_sees_a_change(serve_sim, frames):
    s = serve_sim(width=540, height=1200)
    backend = "uiautomator2" if frames == "u2" else "adb"
    dev = DeviceConfig(backend=backend, adb_port=s.adb.port, settle=SettleConfig(frames=frames)).open(s.serial)
    rep = dev.frame_choice()
    assert rep["chosen"] == frames and rep["forced"] is True
    assert rep["observation"] == ("png" if frames == "png" else "raw" if frames == "raw" else rep["observation"])
    home, timing = dev.settle(None)
    assert isinstance(home, Screenshot) and timing.settled and timing.extra["source"] == frames
    assert _pixels(home) == _pixels(s.phone.screencap_png())
    dev.execute(OpenApp(app="Settings"))
    settings, timing = dev.settle(home)
    assert _pixels(settings) == _pixels(s.phone.screencap_png()) != _pixels(home)
    assert timing.extra["frames"] >= 2
    dev.execute(Key(key="home"))
    back, _ = dev.settle(settings)
    assert _pixels(back) == _pixels(home)
    if frames == "u2":  # the JPEG detects change; the observation is an exact frame, confirmed unchanged
        assert rep["candidates"]["u2"]["exact"] is False and rep["observation"] in ("png", "raw")
        assert timing.extra["frames"] >= 4


def test_a_raw_observation_carries_its_pixels(serve_sim):
    s = serve_sim(width=540, height=1200)
    dev = s.device(settle=SettleConfig(frames="raw"))
    shot, _ = dev.settle(None)
    assert shot._image is not None  # the pixels came with the frame: nobody decodes the PNG again
    assert shot.image().tobytes() == s.phone.screencap_image().tobytes()


def test_u2_frames_need_the_uiautomator2_backend():
    with pytest.raises(ValueError, match="uiautomator2 backend"):
        DeviceConfig(backend="adb", settle=SettleConfig(frames="u2"))
    with pytest.raises(ValueError, match="settle frames must be one of"):
        SettleConfig(frames="jpeg")


def test_a_device_whose_frames_all_fail_is_an_infra_error(serve_sim):
    s = serve_sim(width=540, height=1200)
    dev = s.device(command_timeout=3)
    dev.screen_size()
    s.stop()
    with pytest.raises(InfraError):
        dev.frame_choice()


def test_harness_run_records_the_frames_in_the_manifest(serve_sim, tmp_path, capsys):
    from harness.cli.main import main
    from harness.records import read_manifest, read_results

    s = serve_sim(width=540, height=1200)
    out = tmp_path / "run"
    rc = main(["run", "--suite", "tasks/sim", "--tasks", "settings_wifi_off", "--device", s.serial, "--agent", "replay",
               "--judge", "oracle", "--adb-port", str(s.adb.port), "--settle-frames", "raw", "--out", str(out)])
    assert rc == 0
    assert read_results(out)[0].verdicts["oracle"] is True
    m = read_manifest(out)
    assert m["frames"][s.serial]["chosen"] == "raw" and m["device_config"]["settle"]["frames"] == "raw"
    assert f"{s.serial}: settling on raw frames" in capsys.readouterr().err
    rc = main(["run", "--suite", "tasks/sim", "--device", s.serial, "--agent", "replay", "--settle-frames", "u2",
               "--adb-port", str(s.adb.port), "--out", str(tmp_path / "r2")])
    assert rc == 2 and "--settle-frames" in capsys.readouterr().err


class _Preparing:
    """A scripted agent that records what it was told to prepare and what its steps saw."""

    name = "preparing"

    def __init__(self, actions, fail=False):
        self.actions, self.fail = list(actions), fail
        self.prepared, self.seen = [], []

    def spec(self):
        return {"name": self.name}

    def reset(self, ctx):
        pass

    def prepare(self, obs):
        self.prepared.append((obs.step, obs.screenshot))
        if self.fail:
            raise RuntimeError("prepare broke")

    def step(self, obs):
        from harness.core.episode import AgentOutput

        self.seen.append((obs.step, obs.screenshot))
        return AgentOutput(self.actions.pop(0))


def _episode(dev, out_dir, agent):
    """One episode of a 3-step task on ``dev``, recorded under ``out_dir``."""
    from harness.records import RunWriter
    from harness.run.runner import run_episode
    from harness.core.tasks import parse_task

    task = parse_task({"id": "t", "instruction": "x", "reference_steps": 3, "setup": {"sim": {"preset": "default"}}})
    with RunWriter(out_dir, fsync=False) as w:
        return run_episode(task, agent, dev, w.start_episode("t"))


def _three_steps(serve_sim, frames, make_agent, out_dir):
    """A phone settling on ``frames``, and an agent of ``make_agent`` after a finished 3-step episode."""
    from harness.core.actions import Finish

    dev = serve_sim(width=540, height=1200).device(settle=SettleConfig(frames=frames))
    agent = make_agent([OpenApp(app="Settings"), Key(key="home"), Finish()])
    out = _episode(dev, out_dir, agent)
    assert out.status == "finished" and out.steps == 3
    return dev, agent


@pytest.mark.parametrize("frames", ["raw", "png"])
def test_the_runner_tells_the_agent_each_observation_as_it_arrives(serve_sim, tmp_path, frames):
    from harness.core.actions import Finish

    dev, agent = _three_steps(serve_sim, frames, _Preparing, tmp_path / "run")
    # every observation a step saw had been handed to prepare() before the step, the very object
    for step, shot in agent.seen:
        assert any(k == step and p is shot for k, p in agent.prepared), step
    # a prepare that fails changes nothing: the step does the work itself
    broken = _Preparing([OpenApp(app="Settings"), Finish()], fail=True)
    out = _episode(dev, tmp_path / "run2", broken)
    assert out.status == "finished" and out.steps == 2 and len(broken.prepared) >= 2


class _PixelPreparing(_Preparing):
    """Also takes a raw frame's pixels before its PNG (harness.core.episode.PixelPreparingAgent)."""

    def __init__(self, actions, fail=False):
        super().__init__(actions, fail)
        self.told = []  # ("pixels" | "png", step, object) in the order the runner told them

    def prepare_pixels(self, frame):
        self.told.append(("pixels", frame.step, frame.pixels))
        assert frame.screen_size == (540, 1200) and "<hierarchy" in frame.hierarchy()
        if self.fail:
            raise RuntimeError("prepare_pixels broke")

    def prepare(self, obs):
        self.told.append(("png", obs.step, obs.screenshot))
        super().prepare(obs)


@pytest.mark.parametrize("frames", ["raw", "png"])
def test_raw_frames_pixels_reach_the_agent_before_their_png(serve_sim, tmp_path, frames):
    from harness.core.actions import Finish

    dev, agent = _three_steps(serve_sim, frames, _PixelPreparing, tmp_path / "run")
    pixels = [(k, p) for kind, k, p in agent.told if kind == "pixels"]
    if frames == "png":  # a PNG frame has no pixels before its PNG
        assert pixels == []
        return
    for step, shot in agent.seen[1:]:  # every settled observation: its very pixels, told first
        told_at = next(i for i, (kind, k, p) in enumerate(agent.told) if kind == "pixels" and k == step
                       and p is shot._image)
        png_at = next(i for i, (kind, k, p) in enumerate(agent.told) if kind == "png" and p is shot)
        assert told_at < png_at, step
    # a prepare_pixels that fails changes nothing
    broken = _PixelPreparing([OpenApp(app="Settings"), Finish()], fail=True)
    out = _episode(dev, tmp_path / "run2", broken)
    assert out.status == "finished" and out.steps == 2 and any(kind == "pixels" for kind, _, _ in broken.told)
