"""What could make repeats of a task differ, recorded with each episode (the result line's
``conditions``, docs/records.md): the sampling settings the agent's model was asked with, the
``system_fingerprint`` each role's model server answered with (where it gives one), the device,
its profile and build, and the start screen after the reset. ``harness report`` says when repeats of
a task differ in any of these (harness.report.repeats), so a flake on another phone is told apart
from a flake of the agent. The episode's seed is the result's own ``seed``.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

SAMPLING_KEYS = ("model", "temperature", "top_p", "max_tokens", "seed")
BUILD_PROPS = ("ro.build.fingerprint", "ro.build.display.id", "ro.build.id")


def sampling(agent_spec: Any) -> dict[str, Any] | None:
    """The sampling settings of the agent's model (its spec's ``model``: temperature, top_p,
    max_tokens, the model seed), or None for an agent without a model (replay, random, script)."""
    model = agent_spec.get("model") if isinstance(agent_spec, dict) else None
    if not isinstance(model, dict):
        return None
    return {k: model.get(k) for k in SAMPLING_KEYS if k in model}


def fingerprints(usage: Any) -> dict[str, list[str]] | None:
    """Role -> the ``system_fingerprint`` values its model calls were answered with, from the
    episode's usage (harness.core.usage.Meter); None when no server sent one."""
    roles = usage.get("by_role") if isinstance(usage, dict) else None
    out = {role: sorted(row["system_fingerprints"]) for role, row in (roles or {}).items()
           if isinstance(row, dict) and row.get("system_fingerprints")}
    return out or None


def device_identity(device: Any) -> dict[str, Any]:
    """The device's profile (maker, model, screen size and density) and build, read once per device
    object from its properties; empty fields when the device cannot say (it is asked again next time)."""
    known = getattr(device, "_crate_identity", None)
    if known is not None:
        return known
    try:
        props = device.props() if hasattr(device, "props") else {}
        size = device.screen_size()
    except Exception:  # noqa: BLE001 (a device that cannot say now: the episode already met it, or will)
        return {"profile": None, "build": None}
    maker, model = props.get("ro.product.manufacturer", ""), props.get("ro.product.model", "")
    density = props.get("ro.sf.lcd_density") or props.get("qemu.sf.lcd_density") or ""
    profile = " ".join(x for x in (maker, model) if x) or "unknown"
    profile += f" {size[0]}x{size[1]}" + (f" @{density}dpi" if density else "")
    build = next((props[p] for p in BUILD_PROPS if props.get(p)), None)
    known = {"profile": profile, "build": build}
    try:
        device._crate_identity = known
    except AttributeError:
        pass
    return known


def start_screen(png: bytes | None) -> dict[str, str] | None:
    """The screen after the reset (``screens/000.png``): the sha256 of its bytes, and its 64-bit
    difference hash (dHash: a 9x8 grey thumbnail, one bit per neighbour pair brighter to the right;
    Krawetz 2013), which two encodings of the same screen share; the report compares the dHash."""
    if not png:
        return None
    from PIL import Image

    try:
        with Image.open(io.BytesIO(png)) as im:
            grey = im.convert("L").resize((9, 8), Image.Resampling.BILINEAR)
            px = grey.tobytes()
    except Exception:  # noqa: BLE001 (an unreadable image: the bytes' hash still says what it was)
        return {"sha256": hashlib.sha256(png).hexdigest()}
    bits = 0
    for row in range(8):
        for col in range(8):
            bits = (bits << 1) | (px[row * 9 + col] > px[row * 9 + col + 1])
    return {"sha256": hashlib.sha256(png).hexdigest(), "dhash": f"{bits:016x}"}


def episode_conditions(device_name: str, device: Any, agent: Any, usage: Any,
                       start_png: bytes | None) -> dict[str, Any]:
    """The result line's ``conditions`` for an episode run on ``device`` (named as the run knows it:
    its serial, ``node/serial`` on a farm) by ``agent``."""
    spec = agent.spec() if agent is not None and hasattr(agent, "spec") else None
    out: dict[str, Any] = {"device": device_name, **device_identity(device), "sampling": sampling(spec),
                           "system_fingerprints": fingerprints(usage), "start_screen": start_screen(start_png)}
    return out
