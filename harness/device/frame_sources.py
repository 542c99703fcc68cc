"""Where settling gets its frames, chosen by measuring what the device offers.

Settling waits until ``stable_frames`` frames in a row are the same, so it pays for several frames
per step while only the last becomes the observation. What a frame costs differs by source and
device:

- ``png``: ``screencap -p``. The device encodes a PNG on every call: hundreds of ms on a phone at
  1080x2400 and more (a published measurement on an Android 15 emulator at 1440x3120: median
  2.1 s, 0.66-3.0 s; elliotgao2.github.io/handsets "Why adb screencap is slow"). The frame is the
  observation as it is.
- ``raw``: ``screencap`` without ``-p``: the pixels with a small header (harness.core.screenshot
  .parse_raw_screencap), compared on the host with the last frame (a memcmp: cheaper than any hash
  of 10 MB). No encode on the device, but width x height x 4 bytes
  to move (same source: 675 ms for 17.5 MB, steady). Only the frame that becomes the observation
  is encoded to PNG, on the host (harness.core.screenshot.encode_png_fast), started as soon as that
  frame arrives so that it runs while the confirming frame is fetched.
- ``u2``: uiautomator2's screenshot (its server's ``takeScreenshot``: a JPEG encoded on the device,
  small to move; with the uiautomator2 backend only). Lossy, so it only detects change: once it
  has settled, the observation is taken with the cheapest exact source and one more JPEG confirms
  that the screen did not change meanwhile.

:func:`choose` grabs a few frames of each source on the idle screen when the device is first used
and settles on the source with the lowest estimated cost per step (``stable_frames`` frames plus
what the observation costs); the estimate and every measurement go into the run's manifest.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from PIL import Image

from harness.device.base import InfraError
from harness.device.screencap import ScreencapError, find_raw
from harness.core.screenshot import RawFrame, Screenshot, encode_png_fast

OnFrame = Callable[[Screenshot], None] | None
OnPixels = Callable[[Image.Image], None] | None
PROBE_GRABS = 3  # per source: the first warms up (a u2 server may be starting), the rest are timed


@dataclass
class Frame:
    """One frame: what the source returned (``data``, compared whole with the next frame's: two
    frames are the same screen when their bytes are equal) and, parsed, its PNG or pixels."""

    data: bytes
    png: bytes | None = None
    raw: RawFrame | None = None

    def same(self, other: "Frame") -> bool:
        return self.data == other.data


class FrameSource:
    """One way to get frames from a device (the device's own methods do the I/O)."""

    name = ""
    exact = True          # every pixel change changes the digest; the frame can be the observation
    encodes = False       # its observation is encoded on the host (worth starting early)
    what = ""

    def grab(self) -> Frame:
        raise NotImplementedError

    def pixels(self, frame: Frame) -> Image.Image | None:
        """The frame's pixels when they come before its PNG (raw frames), else None."""
        return None

    def observation(self, frame: Frame, pixels: Image.Image | None = None) -> Screenshot:
        """The frame as the observation (``pixels``: what :meth:`pixels` gave for it)."""
        raise NotImplementedError(f"{self.name} frames cannot be the observation")


class PngFrames(FrameSource):
    name, what = "png", "screencap -p (a PNG encoded on the device)"

    def __init__(self, screenshot: Callable[[], bytes]):
        self.screenshot = screenshot

    def grab(self) -> Frame:
        png = self.screenshot()
        return Frame(png, png=png)

    def observation(self, frame: Frame, pixels: Image.Image | None = None) -> Screenshot:
        assert frame.png is not None
        return frame.png if isinstance(frame.png, Screenshot) else Screenshot(frame.png)


class RawFrames(FrameSource):
    name, what, encodes = "raw", "screencap (raw pixels, hashed on the host; the observation encoded here)", True

    def __init__(self, exec_out: Callable[[str], bytes], size: Callable[[], tuple[int, int]], serial: str,
                 command: Callable[[], str] = lambda: "screencap"):
        self.exec_out, self.size, self.serial, self.command = exec_out, size, serial, command

    def grab(self) -> Frame:
        data = self.exec_out(self.command())
        try:  # the frame after any text the phone wrote before it (harness.device.screencap)
            raw, _ = find_raw(data, self.size())
        except ScreencapError as e:
            raise InfraError(f"{self.serial}: screencap returned {len(data)} bytes that are not a raw frame: {e}") from None
        return Frame(data, raw=raw)

    def pixels(self, frame: Frame) -> Image.Image | None:
        assert frame.raw is not None
        return frame.raw.image()

    def observation(self, frame: Frame, pixels: Image.Image | None = None) -> Screenshot:
        img = pixels if pixels is not None else self.pixels(frame)
        return Screenshot(encode_png_fast(img), image=img)


class U2Frames(FrameSource):
    name, exact = "u2", False
    what = "uiautomator2 takeScreenshot (a JPEG encoded on the device; detects change, not the observation)"

    def __init__(self, take: Callable[[], str | None], serial: str):
        self.take, self.serial = take, serial

    def grab(self) -> Frame:
        b64 = self.take()
        if not b64:
            raise InfraError(f"{self.serial}: uiautomator2 takeScreenshot returned nothing")
        return Frame(base64.b64decode(b64))


@dataclass
class FrameChoice:
    """The source settling uses, the exact source for observations, and how they were chosen."""

    detector: FrameSource
    observer: FrameSource
    report: dict[str, Any] = field(default_factory=dict)


def _probe(src: FrameSource, grabs: int) -> dict[str, Any]:
    out: dict[str, Any] = {"what": src.what, "exact": src.exact}
    times, frames = [], []
    try:
        for _ in range(grabs):
            t0 = time.perf_counter()
            frames.append(src.grab())
            times.append(time.perf_counter() - t0)
        frame = frames[-1]
        out["bytes"] = len(frame.data)
        out["grab_ms"] = round(statistics.mean(times[1:] or times) * 1000, 2)
        # the idle screen gave the same frame every time (false: it was changing while measured)
        out["same_frames"] = all(f.same(frame) for f in frames)
        encode = 0.0
        if src.exact and src.encodes:  # a PNG frame is its own observation
            t0 = time.perf_counter()
            src.observation(frame)
            encode = time.perf_counter() - t0
        out["observation_ms"] = round(encode * 1000, 2)
        out["ok"] = True
    except InfraError as e:
        out.update(ok=False, error=str(e))
    return out


def choose(sources: list[FrameSource], stable_frames: int, forced: str = "auto", grabs: int = PROBE_GRABS) -> FrameChoice:
    """Measure ``sources`` (or only the ``forced`` one) and pick the cheapest per step: ``stable_frames``
    grabs plus the observation (its encode for ``raw``, which overlaps the grabs after the first; for an inexact source the observation
    grab and encode of the cheapest exact source, and one more grab to confirm). InfraError when no
    source gives frames (the first source's error: the device's fault is reported as before)."""
    by_name = {s.name: s for s in sources}
    if forced != "auto" and forced not in by_name:
        raise InfraError(f"settle frames {forced!r} are not offered here (sources: {', '.join(by_name)})")
    probed = [by_name[forced]] if forced != "auto" else sources
    if forced != "auto" and not by_name[forced].exact:  # an inexact source needs an exact one beside it
        probed = [by_name[forced], *[s for s in sources if s.exact]]
    t0 = time.perf_counter()
    reports = {s.name: _probe(s, grabs) for s in probed}
    exact = [s for s in probed if s.exact and reports[s.name]["ok"]]
    if not exact:
        first = reports[probed[0].name] if forced == "auto" else reports[forced]
        raise InfraError(first.get("error") or "no source gives frames")
    best_exact = min(exact, key=lambda s: reports[s.name]["grab_ms"] + reports[s.name]["observation_ms"])
    cost: dict[str, float] = {}
    for s in probed:
        r = reports[s.name]
        if not r["ok"]:
            continue
        if s.exact:  # a host-side encode runs while the confirming frames are fetched (Settler)
            cost[s.name] = r["grab_ms"] + max((stable_frames - 1) * r["grab_ms"], r["observation_ms"])
        else:
            obs = reports[best_exact.name]
            cost[s.name] = (stable_frames + 1) * r["grab_ms"] + obs["grab_ms"] + obs["observation_ms"]
    if forced != "auto":
        if forced not in cost:
            raise InfraError(reports[forced].get("error") or f"{forced} frames failed")
        pick = by_name[forced]
    else:
        pick = by_name[min(cost, key=cost.get)]
    observer = pick if pick.exact else best_exact
    report = {"chosen": pick.name, "observation": observer.name, "forced": forced != "auto",
              "stable_frames": stable_frames, "per_step_ms": {k: round(v, 2) for k, v in cost.items()},
              "candidates": reports, "probe_s": round(time.perf_counter() - t0, 3)}
    return FrameChoice(pick, observer, report)


class Settler:
    """Settling with a :class:`FrameChoice`; the observation of an exact source's frame is started
    on a worker thread as soon as the frame arrives (PNG encoding releases the GIL), so it runs
    while the next frame is fetched, and is dropped when that frame differs. A raw frame's pixels go
    to ``on_pixels`` before its PNG is encoded, the PNG to ``on_frame`` (each candidate's)."""

    def __init__(self, choice: FrameChoice, name: str):
        self.choice = choice
        self.pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"frames-{name}")

    @staticmethod
    def _observe(src: FrameSource, frame: Frame, on_frame: OnFrame, on_pixels: OnPixels) -> Screenshot:
        pixels = src.pixels(frame)
        if pixels is not None and on_pixels is not None:
            on_pixels(pixels)
        shot = src.observation(frame, pixels)
        if on_frame is not None:
            on_frame(shot)
        return shot

    def _start(self, frame: Frame, on_frame: OnFrame, on_pixels: OnPixels) -> cf.Future:
        src = self.choice.detector
        if not src.exact:
            return cf.Future()  # never used: the observation comes from the exact source
        if not src.encodes:
            f: cf.Future = cf.Future()
            f.set_result(self._observe(src, frame, on_frame, on_pixels))
            return f
        return self.pool.submit(self._observe, src, frame, on_frame, on_pixels)

    def settle(self, cfg: Any, on_frame: OnFrame = None,
               on_pixels: OnPixels = None) -> tuple[Screenshot, dict[str, Any]]:
        det, obs = self.choice.detector, self.choice.observer
        t0 = time.monotonic()
        if cfg.min_s:
            time.sleep(cfg.min_s)
        frame = det.grab()
        grabs, same = 1, 1
        pending = self._start(frame, on_frame, on_pixels)
        while True:
            while same < cfg.stable_frames and time.monotonic() - t0 < cfg.max_s:
                if cfg.interval_s:
                    time.sleep(cfg.interval_s)
                nxt = det.grab()
                grabs += 1
                if nxt.same(frame):
                    same += 1
                    continue
                pending.cancel()
                frame, same, pending = nxt, 1, self._start(nxt, on_frame, on_pixels)
            if det.exact:
                shot = pending.result()
                break
            shot = self._observe(obs, obs.grab(), on_frame, on_pixels)
            check = det.grab()
            grabs += 2
            if check.same(frame) or time.monotonic() - t0 >= cfg.max_s:
                break
            frame, same = check, 1  # it changed while the observation was taken: settle again
        return shot, {"frames": grabs, "source": det.name, "settled": same >= cfg.stable_frames}

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
