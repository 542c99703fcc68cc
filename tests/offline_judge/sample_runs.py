"""Small recorded runs for the offline tests, written with the real record writer."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml
from PIL import Image, ImageDraw

from harness.records import EpisodeResult, RunWriter, file_sha256


def png(w: int = 90, h: int = 200, seed: int = 0) -> bytes:
    """A distinct small screenshot for each seed."""
    img = Image.new("RGB", (w, h), ((seed * 37) % 256, (seed * 91) % 256, (seed * 53) % 256))
    d = ImageDraw.Draw(img)
    d.rectangle([seed % (w - 10), (seed * 7) % (h - 10), seed % (w - 10) + 8, (seed * 7) % (h - 10) + 8],
                fill=(255, 255, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def make_run(root: Path, episodes: list[tuple[str, int, str]], *, suite: bool = True, instruction: str = "Do {id}",
             finish_last: bool = False, fsync: bool = False, size: tuple[int, int] = (90, 200),
             extra_result: dict[str, Any] | None = None) -> Path:
    """A run folder with ``episodes`` = [(task_id, steps, status)]; tasks in ``root/suite.yaml``
    named by the manifest (``suite=True``), or only an ``instruction`` in the result lines."""
    run = root
    run.mkdir(parents=True, exist_ok=True)
    tasks = [{"id": tid, "instruction": instruction.format(id=tid), "reference_steps": max(1, n),
              "language": "en", "apps": ["com.example"]} for tid, n, _ in episodes]
    manifest: dict[str, Any] = {"kind": "test run", "agent": {"name": "test"}}
    if suite:
        sp = root.parent / f"{root.name}-suite.yaml"
        sp.write_text(yaml.safe_dump(tasks, sort_keys=False), encoding="utf-8")
        manifest["suite"] = {"path": str(sp), "files": {str(sp): file_sha256(sp)}}
    seed = 0
    with RunWriter(run, fsync=fsync) as w:
        w.write_manifest(manifest)
        for tid, n, status in episodes:
            ep = w.start_episode(tid)
            seed += 1
            before = ep.write_screen(0, png(*size, seed=seed))
            for i in range(1, n + 1):
                seed += 1
                after = ep.write_screen(i, png(*size, seed=seed))
                action: dict[str, Any] = {"type": "click", "x": 10 + i, "y": 20 + i}
                if finish_last and i == n:
                    action = {"type": "finish", "status": "complete"}
                ep.append_step({"index": i, "action": action, "screen_before": before, "screen_after": after,
                                "raw_output": f"click {i}"})
                before = after
            extra = dict(extra_result or {})
            if not suite:
                extra.setdefault("instruction", instruction.format(id=tid))
            w.append_result(EpisodeResult(task_id=tid, agent="test", status=status, steps=n, cap=2 * max(1, n) + 1,
                                          verdicts={"oracle": True} if status != "infra_error" else {}, **extra))
    return run
