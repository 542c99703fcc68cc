"""The step-level call and its caches: keys, the on-disk JSONL cache across instances, processes
and crashes, in-flight de-duplication, reply normalisation, prompt files and action drawings."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

import pytest
from PIL import Image

from harness.core.actions import Click, DoubleTap, Finish, LongPress, Swipe, TypeText
from harness.client.calls import ModelClient
from harness.client.images import ImagePolicy
from judges.draw import annotate_pixels, banner_text
from harness.client.replies import as_bool
from judges.evidence import (CRATE_S_STEP, CRATE_STEP, CallLog, EvidenceStore, MemoryCache, StepCall,
                             StepEvidenceCache, evidence_key, step_evidence)
from judges.verdict_kinds import canonical_category
from judges.prompts import LANGUAGES, PromptError, available, load_prompt
from tests.fakes.model_server import Reply, ScriptedModelServer
from tests.judges.helpers import ROOT, good_reply, model_cfg, png


# --- prompts ---------------------------------------------------------------------------------------
def test_every_prompt_has_both_languages_a_version_and_the_same_placeholders():
    names = {n for n, _ in available()}
    assert names == {"crate_step", "crate_traj", "crate_s_step", "crate_s_traj", "holistic", "milestones"}
    for n in names:
        en, zh = load_prompt(n, "en"), load_prompt(n, "zh")
        assert en.version >= 1 and zh.version >= 1
        assert en.placeholders() == zh.placeholders() and en.placeholders()
        assert en.sha256 != zh.sha256 and en.id.startswith(f"{n}_en@v{en.version}#")
    assert set(LANGUAGES) == {"en", "zh"}


def test_render_refuses_missing_or_extra_values_and_never_rescans():
    p = load_prompt("crate_step", "en")
    with pytest.raises(PromptError, match="missing"):
        p.render(instruction="x", action="y")
    with pytest.raises(PromptError, match="unexpected"):
        p.render(instruction="x", action="y", screen="1x1", extra="z")
    system, user = p.render(instruction="say {{action}}", action="click(x=1, y=2)", screen="1080x2400")
    assert "say {{action}}" in user and "click(x=1, y=2)" in user and "{{" not in system
    with pytest.raises(PromptError):
        load_prompt("crate_step", "fr")


def test_reasoning_comes_before_the_verdict_in_every_reply_and_schema():
    """Structured decoding writes a schema's properties in order, and a model follows the example
    reply: the reasons come first, the verdict last."""
    from judges.crate import CRATE, CRATE_S
    from judges.evidence import CRATE_S_STEP
    from judges.milestones import SCHEMA
    from judges.verdict_kinds import KINDS

    def before(keys, first, last):
        keys = list(keys)
        assert keys.index(first) < keys.index(last), keys

    before(CRATE.traj_verdict.schema["properties"], "reason", "success")
    before(CRATE.traj_verdict.schema["properties"]["conditions"]["items"]["properties"], "evidence", "met")
    before(CRATE_S.traj_verdict.schema["properties"], "reason", "unsafe")
    before(CRATE_S_STEP.verdict.schema["properties"], "reason", "risky")
    before(SCHEMA["properties"]["milestones"]["items"]["properties"], "evidence", "done")
    for name, first, last in (("crate_traj", '"reason"', '"success"'), ("crate_s_traj", '"reason"', '"unsafe"'),
                              ("crate_s_step", '"reason"', '"risky"'), ("milestones", '"evidence"', '"done"')):
        for lang in LANGUAGES:
            example = load_prompt(name, lang).system.rsplit("{", 1)[0] + load_prompt(name, lang).system.rsplit("{", 1)[1]
            assert example.rindex(first) < example.rindex(last), (name, lang)

    def strict(node, where):  # OpenAI's strict subset: every object closed, every property required
        if node.get("type") == "object":
            assert node["additionalProperties"] is False and node["required"] == list(node["properties"]), where
            for k, v in node["properties"].items():
                strict(v, f"{where}.{k}")
        if node.get("type") == "array":
            strict(node["items"], f"{where}[]")

    for kind in KINDS:
        strict(kind.schema, kind.name)
        assert kind.schema["title"] == kind.name


def test_superseded_prompt_versions_stay_readable():
    import hashlib

    from judges.prompts import ARCHIVE_DIR

    current = {"crate_traj": 2, "crate_s_traj": 3, "crate_s_step": 2, "milestones": 2}
    for name, version in current.items():
        for lang in LANGUAGES:
            now = load_prompt(name, lang)
            assert now.version == version
            for v in range(1, version):
                old = load_prompt(name, lang, v)
                assert old.version == v and old.id != now.id
                assert old.sha256 == hashlib.sha256((ARCHIVE_DIR / f"{name}_{lang}.v{v}.md").read_bytes()).hexdigest()
            assert load_prompt(name, lang, now.version) == now
    with pytest.raises(PromptError, match="no version 7"):
        load_prompt("crate_traj", "en", 7)


# --- drawing ---------------------------------------------------------------------------------------
def _img(b):
    return Image.open(io.BytesIO(b)).convert("RGB")


def _drawn(*args, **kw):
    return annotate_pixels(*args, **kw).convert("RGB")


def test_tap_marker_is_drawn_where_the_tap_lands_even_on_a_scaled_image():
    shot = png(0, (1080, 2400))
    plain = _drawn(shot, None)
    marked = _drawn(shot, Click(x=540, y=1200), (1080, 2400))
    assert plain.size == marked.size == (1080, 2400)
    assert marked.getpixel((540 + 1080 // 22, 1200)) != plain.getpixel((540 + 1080 // 22, 1200))  # on the ring
    assert marked.getpixel((100, 2300)) == plain.getpixel((100, 2300))  # far away: untouched
    small = _drawn(shot, Click(x=540, y=1200), (1080, 2400), max_long_side=640)
    assert small.size == (288, 640) and small.getpixel((144 + 288 // 22, 320)) != _drawn(shot, None, None, 640).getpixel((144 + 288 // 22, 320))
    long = _drawn(shot, LongPress(x=540, y=1200), (1080, 2400))
    assert long.getpixel((540 + int(1080 // 22 * 1.6), 1200)) != plain.getpixel((540 + int(1080 // 22 * 1.6), 1200))
    double = _drawn(shot, DoubleTap(x=540, y=1200), (1080, 2400))  # an inner ring marks the second tap
    inner = (540 + round(1080 // 22 * 0.5 * 0.7071), 1200 + round(1080 // 22 * 0.5 * 0.7071))  # on it, off the cross
    assert double.getpixel(inner) != plain.getpixel(inner) and marked.getpixel(inner) == plain.getpixel(inner)


def test_swipe_arrow_and_text_banner():
    shot = png(0, (1080, 2400))
    plain = _img(shot)
    sw = _drawn(shot, Swipe(start=(540, 1800), end=(540, 600)), (1080, 2400))
    assert sw.getpixel((540, 1200)) != plain.getpixel((540, 1200)) and sw.getpixel((100, 1200)) == plain.getpixel((100, 1200))
    typed = _drawn(shot, TypeText(text="给张伟转账 hello", submit=True), (1080, 2400))
    assert typed.getpixel((5, 5)) != plain.getpixel((5, 5)) and typed.getpixel((540, 2000)) == plain.getpixel((540, 2000))
    assert banner_text(TypeText(text="押金", submit=True)) == 'type "押金"  + Enter' and banner_text(Click(x=1, y=1)) is None


def test_drawing_composites_only_the_marked_box_and_gives_the_whole_frame_composite():
    """annotate_image composites the marks over their drawn box only: every pixel equals that of
    compositing the marks layer over the whole frame, for marks inside, at and past the edges."""
    import random

    from judges.draw import annotate_image, marks_layer

    rng = random.Random(7)
    noise = Image.frombytes("RGB", (270, 600), bytes(rng.randrange(256) for _ in range(270 * 600 * 3)))
    actions = [Click(x=540, y=1200), Click(x=0, y=0), LongPress(x=1079, y=2399), DoubleTap(x=30, y=2390),
               Swipe(start=(540, 1800), end=(540, 600)), Swipe(start=(0, 10), end=(1079, 2399)),
               TypeText(text="给张伟转账 hello " * 6, submit=True), Finish(status="complete")]
    for a in actions:
        whole = Image.alpha_composite(noise.convert("RGBA"), marks_layer(noise.size, a, (1080, 2400))).convert("RGB")
        drawn = annotate_image(noise, a, (1080, 2400))
        assert drawn.tobytes() == whole.tobytes(), a
        assert drawn.tobytes() != noise.tobytes(), a  # something was drawn
    assert annotate_image(noise, None).tobytes() == noise.tobytes()


# --- reply normalisation ------------------------------------------------------------------------------
def test_booleans_and_categories():
    assert as_bool(True, "x") is True and as_bool("false", "x") is False and as_bool(1, "x") is True
    with pytest.raises(ValueError):
        as_bool("probably", "x")
    assert canonical_category("over automation") == "Over-Automation"
    assert canonical_category("privacy") == "Privacy Violations"
    assert canonical_category("隐私泄露") == "Privacy Violations"
    assert canonical_category("legal / compliance") == "Legal/Compliance"
    assert canonical_category("null") is None and canonical_category("Weird Risk") == "Weird Risk"


# --- keys and caches -------------------------------------------------------------------------------------
def test_key_depends_on_every_part():
    """The key holds the endpoint, the model, every sampling setting, the prompt and the step's
    inputs: an answer made at temperature 0.9, by another server, or with another seed is not
    served for a question asked otherwise; timeouts, retries and concurrency do not change it."""
    import dataclasses

    from harness.client.config import ModelConfig

    p = load_prompt("crate_step", "en")
    cfg = ModelConfig(base_url="http://a:1/v1", model="m")
    base = evidence_key(cfg, p, b"img", "click(x=1, y=2)", "do it")
    assert base == evidence_key(cfg, p, b"img", "click(x=1, y=2)", "do it") and len(base) == 64
    same = [dataclasses.replace(cfg, timeout_s=5, max_retries=0, concurrency=64, api_key_env="X", max_wait_s=1)]
    assert {evidence_key(c, p, b"img", "click(x=1, y=2)", "do it") for c in same} == {base}
    configs = [dataclasses.replace(cfg, **kw) for kw in (
        {"base_url": "http://b:1/v1"}, {"model": "m2"}, {"temperature": 0.9}, {"top_p": 0.5}, {"seed": 7},
        {"max_tokens": 64}, {"structured": "none"}, {"extra_body": {"top_k": 20}})]
    others = [evidence_key(c, p, b"img", "click(x=1, y=2)", "do it") for c in configs]
    others += [evidence_key(cfg, load_prompt("crate_step", "zh"), b"img", "click(x=1, y=2)", "do it"),
               evidence_key(cfg, p, b"img2", "click(x=1, y=2)", "do it"),
               evidence_key(cfg, p, b"img", "click(x=1, y=3)", "do it"),
               evidence_key(cfg, p, b"img", "click(x=1, y=2)", "do it now"),
               evidence_key(cfg, p, b"img", "click(x=1, y=2)", "do it", {"screen": [1080, 2400]}),
               evidence_key(cfg, p, b"img", "click(x=1, y=2)", "do it", {"draw": None})]
    assert len({base, *others}) == len(others) + 1


def test_jsonl_cache_survives_instances_and_torn_lines(tmp_path):
    path = tmp_path / "c" / "evidence.jsonl"
    a = StepEvidenceCache(path)
    a.put("k1", {"evidence": {"clues": "x", "effect": "y"}})
    with open(path, "ab") as f:
        f.write(b'{"key": "k2", "value": {"evid')  # a crash mid-write
    b = StepEvidenceCache(path)
    assert b.get("k1") == {"evidence": {"clues": "x", "effect": "y"}} and b.get("k2") is None
    b.put("k3", {"evidence": {"n": 3}})  # starts on a fresh line: the torn one stays torn, nothing else breaks
    c = StepEvidenceCache(path)
    assert c.get("k3") == {"evidence": {"n": 3}} and len(c) == 2 and c.skipped_lines == 1
    assert a.get("k3") == {"evidence": {"n": 3}}  # a miss re-reads what others appended


def test_jsonl_cache_keeps_where_entries_are_not_their_values(tmp_path):
    """Its memory holds each key's place in the file; a value is read back when asked for, so a
    pass over thousands of episodes does not hold every answer (issue 18). Its own puts are found
    at once (a miss re-reads the file)."""
    c = StepEvidenceCache(tmp_path / "e.jsonl")
    for i in range(50):
        c.put(f"k{i}", {"evidence": {"i": i, "text": "é" * i}})
        assert c.get(f"k{i}") == {"evidence": {"i": i, "text": "é" * i}}
    assert len(c) == 50 and all(isinstance(v, tuple) for v in c._where.values())
    assert [k for k, v in vars(c).items() if isinstance(v, dict)] == ["_where"]
    c.put("k3", {"evidence": {"i": "again"}})  # an entry for a key already there is not added ...
    assert c.get("k3") == {"evidence": {"i": 3, "text": "ééé"}}
    c.put("k3", {"evidence": {"i": "replaced"}}, replace=True)  # ... unless it replaces one (the newest wins)
    assert c.get("k3") == {"evidence": {"i": "replaced"}} and len(c) == 50
    assert StepEvidenceCache(tmp_path / "e.jsonl").get("k3") == {"evidence": {"i": "replaced"}}
    c.close()
    assert StepEvidenceCache(tmp_path / "e.jsonl").get("k49")["evidence"]["i"] == 49


WRITER = """
import sys
sys.path.insert(0, {root!r})
from judges.evidence import StepEvidenceCache
c = StepEvidenceCache(sys.argv[1], fsync=False)
for i in range(int(sys.argv[3])):
    c.put(f"{{sys.argv[2]}}-{{i}}", {{"evidence": {{"i": i, "pad": "x" * 3000}}}})
"""


def test_jsonl_cache_shared_by_processes_appending_at_once(tmp_path):
    path = tmp_path / "shared.jsonl"
    mine = StepEvidenceCache(path)
    script = WRITER.format(root=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(path), tag, "150"]) for tag in ("a", "b", "c")]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert mine.get("b-149") == {"evidence": {"i": 149, "pad": "x" * 3000}}
    fresh = StepEvidenceCache(path)
    assert len(fresh) == 450 and fresh.skipped_lines == 0


def _call(server, store=None, kind=CRATE_STEP, log=None):
    return StepCall(ModelClient(model_cfg(server)), kind, "en", store, ImagePolicy(max_long_side=320),
                    log=log or CallLog())


def test_step_evidence_cached_in_memory_and_on_disk_across_resumes(tmp_path):
    shot = png(3, (540, 1200))
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        disk = StepEvidenceCache(tmp_path / "e.jsonl")
        call = _call(s, EvidenceStore(MemoryCache(), disk))
        r1 = step_evidence(call, shot, Click(x=5, y=6), "do it", (540, 1200))
        r2 = step_evidence(call, shot, Click(x=5, y=6), "do it", (540, 1200))
        assert (r1["cached"], r2["cached"]) == (False, True) and len(s.requests) == 1
        assert r1["evidence"] == {"clues": "clue<click(x=5, y=6)>", "effect": "effect<click(x=5, y=6)>"}
        resumed = _call(s, EvidenceStore(MemoryCache(), StepEvidenceCache(tmp_path / "e.jsonl")))
        r3 = step_evidence(resumed, shot, Click(x=5, y=6), "do it", (540, 1200))
        assert r3["cached"] and r3["evidence"] == r1["evidence"] and len(s.requests) == 1
        step_evidence(resumed, shot, Click(x=5, y=7), "do it", (540, 1200))  # another action: a new call
        assert len(s.requests) == 2
    line = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])
    assert line["value"]["prompt"].startswith("crate_step_en@v1#") and line["value"]["model"] == s.judge_model_name


def test_a_disk_entry_that_fails_validation_is_asked_again_never_trusted(tmp_path):
    """A cached CRATE-S finding is read again, through the same rule, before the gate or a judge
    uses it: an entry whose evidence was edited to "not risky", whose reply no longer reads
    (``"risky": "null"``), that keeps no reply, or that names another prompt, is asked again; the
    fresh answer replaces it on disk (the newest entry wins) and is then served as usual."""
    shot, action = png(6, (540, 1200)), Click(x=9, y=9)
    risky = json.dumps({"reason": "sends the money", "category": "Over-Automation", "risky": True, "score": 0.9})
    path = tmp_path / "e.jsonl"

    def edited(edit):
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        edit(lines[-1]["value"])
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))

    def evidence():  # the step's evidence (and the call log) through a fresh process's memory
        log = CallLog()
        r = step_evidence(_call(s, EvidenceStore(MemoryCache(), StepEvidenceCache(path)), CRATE_S_STEP, log),
                          shot, action, "pay the landlord", (540, 1200))
        return r, log.to_json()

    with ScriptedModelServer(lambda req: Reply(risky)) as s:
        first, _ = evidence()
        assert first["cached"] is False and first["evidence"]["risky"] is True and len(s.requests) == 1
        again, _ = evidence()
        assert again["cached"] is True and len(s.requests) == 1  # a valid entry is served as it is
        edits = [lambda v: v["evidence"].update(risky=False, category=None, score=0.0),  # "talked into safe"
                 lambda v: v.update(reply=v["reply"].replace("true", '"null"')),          # a reply that no longer reads
                 lambda v: v.pop("reply"),                                                 # an older entry: no reply kept
                 lambda v: v.update(prompt="crate_s_step_en@v1#000000")]                   # made for another prompt
        for n, edit in enumerate(edits, start=2):
            edited(edit)
            r, log = evidence()
            assert r["cached"] is False and r["evidence"]["risky"] is True and len(s.requests) == n, (n, r)
            assert log["rejected_cache_entries"] == 1, log
            r, log = evidence()  # the fresh answer replaced the entry
            assert r["cached"] is True and len(s.requests) == n and "rejected_cache_entries" not in log
    assert len(StepEvidenceCache(path)) == 1 and len(path.read_text().splitlines()) == 1 + len(edits)


def test_concurrent_requests_for_one_step_make_one_call():
    shot = png(4, (540, 1200))
    with ScriptedModelServer(lambda req: Reply(good_reply(req), delay_s=0.3)) as s:
        call = _call(s, EvidenceStore(MemoryCache()), kind=CRATE_S_STEP)
        results = []
        threads = [threading.Thread(target=lambda: results.append(step_evidence(call, shot, Click(x=1, y=1), "x")))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(s.requests) == 1 and sorted(r["cached"] for r in results) == [False, True, True, True]
    assert all(r["evidence"]["risky"] is False for r in results)


def test_failures_are_not_cached(tmp_path):
    from judges.evidence import JudgeCallError

    shot = png(5)
    with ScriptedModelServer([Reply("garbage"), Reply("garbage"), Reply(json.dumps({"clues": "c", "effect": "e"}))]) as s:
        call = _call(s, EvidenceStore(MemoryCache(), StepEvidenceCache(tmp_path / "f.jsonl")))
        call.parse_retries = 1
        with pytest.raises(JudgeCallError, match="unusable reply after 2 tries"):
            step_evidence(call, shot, Click(x=1, y=1), "x")
        assert StepEvidenceCache(tmp_path / "f.jsonl").get("anything") is None
        r = step_evidence(call, shot, Click(x=1, y=1), "x")
    assert r["cached"] is False and r["evidence"] == {"clues": "c", "effect": "e"} and len(s.requests) == 3


def test_unknown_screen_size_is_read_from_the_screenshot():
    """Offline judging may not know the screen size (0x0): the screenshot's own size is used."""
    from tests.fakes.model_server import request_text

    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        r = step_evidence(_call(s), png(6, (300, 640)), Click(x=150, y=320), "x", (0, 0))
    assert r["evidence"]["effect"] == "effect<click(x=150, y=320)>"
    assert "Phone screen: 300x640 pixels" in request_text(s.requests[0])


def test_a_reply_cut_off_at_max_tokens_is_not_asked_again_unchanged():
    """An unparseable reply is asked again once; a truncated one would be cut off at the same place,
    so it is a JudgeCallError (kind truncated) that names the setting, after a single call."""
    from judges.evidence import JudgeCallError, ask_json

    cut = Reply('{"clues": "the screen shows a transfer dialog with the amount', finish_reason="length")
    with ScriptedModelServer([cut, Reply('{"clues": "c", "effect": "e"}')]) as s:
        log = CallLog()
        with pytest.raises(JudgeCallError) as e:
            ask_json(ModelClient(model_cfg(s, max_tokens=12)), load_prompt("crate_step", "en"),
                     {"instruction": "x", "action": "tap", "screen": "1080x2400"}, verdict=CRATE_STEP.verdict,
                     log=log)
    assert e.value.kind == "truncated" and "max_tokens=12" in str(e.value) and "--judge-max-tokens" in str(e.value)
    assert len(s.requests) == 1 and log.to_json()["reasked_unparseable"] == 0
    with ScriptedModelServer([Reply("not json at all"), Reply('{"clues": "c", "effect": "e"}')]) as s:  # not cut: asked again
        assert ask_json(ModelClient(model_cfg(s)), load_prompt("crate_step", "en"),
                        {"instruction": "x", "action": "tap", "screen": "1080x2400"},
                        verdict=CRATE_STEP.verdict).value == {"clues": "c", "effect": "e"}
    assert len(s.requests) == 2
