"""The holistic baseline: one call with every screenshot, SPA-Bench's key-component pre-check
short-circuit, and judge_error on failures."""

from __future__ import annotations

import json

from agents.replay import ReplayAgent, ReplayConfig
from harness.core.actions import Click, Finish, OpenApp, TypeText
from judges import holistic
from judges.holistic import HolisticConfig, HolisticJudge, missing_components, spread
from tests.fakes.model_server import Reply, ScriptedModelServer, request_images, request_text
from tests.judges.helpers import ctx_for, end, event, good_reply, model_cfg, run, task


def judge(server=None, base_url=None, screen_text=None, **kw):
    return HolisticJudge(HolisticConfig(model=model_cfg(server, base_url=base_url), **kw), screen_text=screen_text)


EVENTS = [event(1, OpenApp(app="Wallet")), event(2, Click(x=10, y=20)), event(3, TypeText(text="25.50")),
          event(4, Finish(), screenshot_after=None)]


def _drive(j, events=EVENTS, t=None, answer=None):
    j.start(ctx_for(t or task("wallet_transfer_bob_lunch")))
    for e in events:
        j.on_step(e)
    return j.finish(end(3, answer=answer))["holistic"]


def test_one_call_with_every_screenshot(tmp_path):
    t = task("wallet_pay_rent_safe")
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        out, steps = run(tmp_path, t, ReplayAgent(ReplayConfig()), observers=[judge(s, key_components="off")])
    assert out.verdicts["holistic"] is True and len(s.requests) == 1
    images = request_images(s.requests[0])
    shots = {st.screen_before for st in steps} | {st.screen_after for st in steps if st.screen_after}
    assert len(images) == len(shots) == 11  # s_0 and the screen after each of the 10 actions
    text = request_text(s.requests[0])
    assert t.instruction in text and "Step 10: click(" in text and "11 steps" in text and "11 attached" in text
    d = out.judge_details["holistic"]
    assert d["calls"] == {"holistic": 1} and d["images"] == 11 and d["reason"] == "looks done"


def test_result_zero_is_false_and_chinese_prompt_for_zh():
    with ScriptedModelServer([Reply(json.dumps({"reason": "没有完成", "result": 0}))]) as s:
        verdict, d = _drive(judge(s), t=task("wallet_balance_zh"))
    assert verdict is False and "你要判断一个手机自动化智能体是否完成了用户的任务" in request_text(s.requests[0])
    assert d["prompt"].startswith("holistic_zh@v1#")


def test_max_images_keeps_first_last_and_a_spread():
    assert spread(11, 4) == [0, 3, 7, 10] and spread(3, 5) == [0, 1, 2]
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        verdict, d = _drive(judge(s, max_images=2))
    assert verdict is True and len(request_images(s.requests[0])) == 2 and d["images_dropped"] == 2


def test_key_component_precheck_short_circuits_without_a_call():
    t = task("wallet_transfer_bob_lunch").model_copy(update={"key_components": ["Transfer sent", "$25.50"]})
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        verdict, d = _drive(judge(s, screen_text=lambda png: "CrateBank  Review transfer  $25.50"), t=t)
        assert verdict is False and len(s.requests) == 0
        assert d["precheck"]["missing"] == ["Transfer sent"] and "Transfer sent" in d["reason"]
        assert d.get("total_calls", 0) == 0
        # all components present (case, width and spacing ignored): the model is asked
        verdict, d = _drive(judge(s, screen_text=lambda png: "ＴＲＡＮＳＦＥＲ  sent\n$25.50"), t=t)
    assert verdict is True and len(s.requests) == 1 and d["precheck"]["passed"] is True


def test_precheck_on_without_an_ocr_engine_is_judge_error(monkeypatch):
    monkeypatch.setattr(holistic, "rapidocr_text", lambda: None)
    t = task("wallet_transfer_bob_lunch").model_copy(update={"key_components": ["Transfer sent"]})
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        verdict, d = _drive(judge(s, key_components="on"), t=t)
        assert verdict == "judge_error" and "no OCR engine" in d["error"] and not s.requests
        verdict, d = _drive(judge(s, key_components="auto"), t=t)  # auto: skipped, and says so
    assert verdict is True and d["precheck"] == {"ran": False, "why": "no OCR engine (install rapidocr_onnxruntime)"}


def test_answer_text_counts_for_the_precheck():
    assert missing_components(["$2,480.50", "余额"], "可用 余额\n") == ["$2,480.50"]
    t = task("wallet_balance_zh").model_copy(update={"key_components": ["2,480.50"]})
    with ScriptedModelServer(lambda req: Reply(good_reply(req))) as s:
        verdict, d = _drive(judge(s, screen_text=lambda png: "钱包"), t=t, answer="$2,480.50")
    assert verdict is True and d["precheck"]["passed"]


def test_failures_are_judge_error():
    verdict, d = _drive(judge(base_url="http://127.0.0.1:9/v1"))
    assert verdict == "judge_error" and "connection failed" in d["error"]
    with ScriptedModelServer([Reply(json.dumps({"reason": "hmm", "result": "maybe"}))]) as s:
        verdict, d = _drive(judge(s, parse_retries=0))
    assert verdict == "judge_error" and "result" in d["error"]
