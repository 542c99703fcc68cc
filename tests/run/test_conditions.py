"""What could make repeats differ, as recorded per episode (harness.run.conditions): the model
server's system_fingerprint through the client and the meter, the agent's sampling settings, the
start screen's hashes, and a device's profile and build."""

from __future__ import annotations

import io

from PIL import Image

from harness.client.calls import ModelClient
from harness.client.config import ModelConfig
from harness.core.usage import Meter
from harness.run import conditions
from tests.fakes.model_server import Reply, ScriptedModelServer


def _png(colour: tuple[int, int, int], size=(90, 200), fmt_opts=None, left: bool = True) -> bytes:
    im = Image.new("RGB", size, colour)
    for x in (range(size[0] // 2) if left else range(size[0] // 2, size[0])):
        for y in range(size[1]):
            im.putpixel((x, y), (255, 255, 255))
    buf = io.BytesIO()
    im.save(buf, "PNG", **(fmt_opts or {}))
    return buf.getvalue()


def test_fingerprints_reach_the_meter_and_the_conditions():
    replies = [Reply("a", system_fingerprint="fp_1"), Reply("b", system_fingerprint="fp_2"), Reply("c")]
    with ScriptedModelServer(replies) as srv:
        client = ModelClient(ModelConfig(base_url=srv.base_url, model="m", max_retries=0))
        run, episode = Meter(), None
        episode = Meter(parent=run)
        results = [client.chat([{"role": "user", "content": "x"}], meter=episode, role="agent") for _ in range(3)]
    assert [r.system_fingerprint for r in results] == ["fp_1", "fp_2", None]
    usage = episode.to_json()
    assert usage["by_role"]["agent"]["system_fingerprints"] == {"fp_1": 1, "fp_2": 1}
    assert run.to_json()["by_role"]["agent"]["system_fingerprints"] == {"fp_1": 1, "fp_2": 1}
    far = Meter()
    far.add(usage)  # an episode metered on a farm node
    assert far.to_json()["by_role"]["agent"]["system_fingerprints"] == {"fp_1": 1, "fp_2": 1}
    assert conditions.fingerprints(usage) == {"agent": ["fp_1", "fp_2"]}
    assert conditions.fingerprints(Meter().to_json()) is None
    assert "system_fingerprints" not in Meter().to_json().get("by_role", {}).get("agent", {})


def test_sampling_and_start_screen():
    spec = {"name": "uitars", "model": {"model": "m", "temperature": 0.0, "top_p": None, "max_tokens": 512, "seed": 3,
                                        "api_key_env": "X"}}
    assert conditions.sampling(spec) == {"model": "m", "temperature": 0.0, "top_p": None, "max_tokens": 512, "seed": 3}
    assert conditions.sampling({"name": "replay", "perturb": 0.3}) is None
    a, b = _png((0, 0, 0)), _png((0, 0, 0), fmt_opts={"compress_level": 1})
    assert a != b  # the same pixels encoded twice: the bytes differ, the dHash does not
    ha, hb, hc = conditions.start_screen(a), conditions.start_screen(b), conditions.start_screen(_png((0, 0, 0), left=False))
    assert ha["sha256"] != hb["sha256"] and ha["dhash"] == hb["dhash"] and len(ha["dhash"]) == 16
    assert hc["dhash"] != ha["dhash"]
    assert conditions.start_screen(None) is None and "dhash" not in conditions.start_screen(b"not a png")


def test_device_identity_read_once(serve_sim):
    dev = serve_sim(540, 1200).device()
    ident = conditions.device_identity(dev)
    assert "540x1200" in ident["profile"] and ident["build"]
    assert conditions.device_identity(dev) is ident
