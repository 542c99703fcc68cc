"""Test helpers: a stand-in model per family, built from the families' OFFICIAL documents, not from
our parser's conventions, so that a request or an answer that differs from a real model's is caught.

Each driver does what the released model does:

- it checks the request against the family's official protocol and records every difference in
  ``violations`` (a test asserts there are none): the prompt (UI-TARS-1.5's released text by its
  sha256; the action lines of UI-TARS v1's README_v1 template; the ``ui-tars`` package's
  MOBILE_USE_DOUBAO; the Qwen cookbooks' tool enums and resolution statements; AndroidWorld's M3A
  element list), the system turn, the image size the coordinates refer to, and the history form of
  later requests (box tokens in UI-TARS turns, JSON calls for Qwen2.5, plain words for Qwen3);
- it sees an image as the model does on its server: UI-TARS and Qwen models are served (vLLM, SGLang,
  transformers) with their own image processor, which smart_resizes every image it is given
  (Qwen2-VL / Qwen2.5-VL ``preprocessor_config.json``: factor 28, 3136 to 12845056 pixels; Qwen3-VL:
  factor 32, 65536 to 16777216), so the coordinates it writes refer to that size, whatever size
  was sent;
- it answers in the output shape of the family's own published examples (README_deploy's expected
  output, the cookbooks' printed outputs, AndroidWorld's ``Reason: / Action: {json}``, the Doubao
  outputs and UI-TARS v1 outputs of ../shared/reference/model_outputs.jsonl), in the family's own
  coordinate space, with only the family's own actions (Qwen3-VL has no ``open``: it taps the
  launcher icon; UI-TARS v1 has no ``open_app`` either).

A script is a list of neutral steps (open an app, tap a target, type, answer, finish). The driver
finds each target on the phone's current screen, remembers its bounds (the test checks that the tap
landed on it), and writes the answer.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from harness.core import hierarchy
from harness.core.actions import CoordSpace, from_device
from harness.core.tasks import Selector
from tests.fakes.model_server import Reply, request_images, request_text


@dataclass
class S:
    """One neutral step: kind in open, click, long_press, type, answer, finish, input (M3A input_text)."""

    kind: str
    target: dict[str, Any] | None = None
    text: str = ""
    submit: bool = False


SCRIPTS: dict[str, list[S]] = {
    "settings_wifi_off": [S("open", text="Settings"), S("click", {"text": "Network & internet"}),
                          S("click", {"rid": "wifi_switch"}), S("finish")],
    "messages_complain_derek_zh": [
        S("open", text="信息"), S("click", {"text": "Derek Hughes"}), S("click", {"rid": "compose"}),
        S("type", text="你好 Derek，昨晚的音乐有点吵。以后晚上十点以后能把音量调小一点吗？谢谢！"),
        S("click", {"rid": "send"}), S("finish")],
    "notes_guest_wifi_query": [S("open", text="笔记"), S("click", {"text": "访客 Wi-Fi"}),
                               S("answer", text="lemon-tree-42"), S("finish")],
}
# M3A types with input_text (tap the field, type, press Enter: Enter sends in Messages)
M3A_SCRIPTS: dict[str, list[S]] = {
    "settings_wifi_off": SCRIPTS["settings_wifi_off"],
    "messages_complain_derek_zh": [
        S("open", text="信息"), S("click", {"text": "Derek Hughes"}),
        S("input", {"rid": "compose"}, text="你好 Derek，昨晚的音乐有点吵。以后晚上十点以后能把音量调小一点吗？谢谢！"),
        S("finish")],
    "notes_guest_wifi_query": SCRIPTS["notes_guest_wifi_query"],
}

# protocol -> (agent name, agent options)
PROTOCOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "uitars": ("uitars", {}),
    "uitars-v1": ("uitars-v1", {}),
    "doubao": ("doubao", {}),
    "qwen2.5": ("qwen", {"version": "2.5"}),
    "qwen3": ("qwen", {"version": "3"}),
    "qwen3-tools": ("qwen", {"version": "3"}),   # the server returns the call as OpenAI tool_calls
    "vlm-pixels": ("vlm", {"coords": "pixels"}),
    "vlm-thousand": ("vlm", {"coords": "thousand"}),
    "m3a": ("m3a", {}),
}

# --- facts from the official documents ------------------------------------------------------------
# sha256 of UI-TARS-1.5's mobile prompt as released (bytedance/UI-TARS codes/prompts.py MOBILE_USE,
# commit 6b315cc), placeholders {language} and {instruction} unfilled
TARS15_RELEASED_SHA256 = "2367ade469667c65cc6c7f2a85cab969a2a6192ccc0bd5bda24a88253832c6e7"
# UI-TARS v1's mobile action space (README_v1.md, "Prompt template for mobile"), one signature a line
TARS_V1_ACTIONS = [
    "click(start_box='<|box_start|>(x1,y1)<|box_end|>')",
    "long_press(start_box='<|box_start|>(x1,y1)<|box_end|>', time='')",
    "type(content='')",
    "scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')",
    "press_home()", "press_back()",
]
# the system turn of the UI-TARS-1.5 deploy example (data/training_example.json)
TARS15_SYSTEM = "You are a helpful assistant."
# the action enums of the cookbooks' mobile_use tool (QwenLM/Qwen2.5-VL cookbooks/utils/agent_function_call.py;
# QwenLM/Qwen3-VL cookbooks/mobile_agent.ipynb system_prompt)
QWEN_ENUM = {"2.5": ["key", "click", "long_press", "swipe", "type", "system_button", "open", "wait", "terminate"],
             "3": ["click", "long_press", "swipe", "type", "answer", "system_button", "wait", "terminate"]}
# AndroidWorld's M3A element line (agents/m3a.py _generate_ui_element_description)
M3A_ELEMENT = re.compile(r'(?m)^UI element (\d+): \{"index": (\d+)(.*)\}$')


def _q(s: str) -> str:
    """A Python-style single-quoted literal body (UI-TARS escapes)."""
    return s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def _smart_resize_28(w: int, h: int) -> bool:
    return w % 28 == 0 and h % 28 == 0


# (factor, min_pixels, max_pixels) of the processor a family's models are served with (the model
# cards' preprocessor_config.json); Doubao's hosted API is assumed to resize alike (the agent sends
# it the smart_resize'd image, which that resize leaves as it is)
PROCESSORS = {"uitars": (28, 3136, 12845056), "uitars-v1": (28, 3136, 12845056), "doubao": (28, 3136, 12845056),
              "qwen2.5": (28, 3136, 12845056), "qwen3": (32, 65536, 16777216), "qwen3-tools": (32, 65536, 16777216)}


def processed_size(protocol: str, w: int, h: int) -> tuple[int, int]:
    """The size of an image of w x h once the family's server processor has resized it."""
    if protocol not in PROCESSORS:
        return w, h
    from ui_tars.action_parser import smart_resize  # the released function, not ours

    factor, lo, hi = PROCESSORS[protocol]
    rh, rw = smart_resize(h, w, factor=factor, min_pixels=lo, max_pixels=hi)
    return rw, rh


@dataclass
class Driver:
    phone: Any
    protocol: str
    script: list[S]
    k: int = 0
    summaries: int = 0
    targets: list[tuple[int, int, int, int]] = field(default_factory=list)  # bounds of each tapped target, in order
    labels: list[str] = field(default_factory=list)  # and its text or description
    texts: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def __call__(self, req: dict[str, Any]) -> Reply:
        text = request_text(req)
        if self.protocol == "m3a" and "Summarise the step you just took" in text:
            self.summaries += 1
            return Reply("Summary: the tap opened the expected screen; continue with the next step.")
        before = len(self.violations)
        self.check(req, text)
        if len(self.violations) > before:  # a real model would be confused: say so, visibly
            return Reply("I cannot tell what to do from this request.")
        step = self.script[min(self.k, len(self.script) - 1)]
        self.k += 1
        if step.kind == "open" and not self.has_open():
            # no open action in this release: tap the app's icon on the home screen instead
            step = S("click", {"desc": step.text})
        out = self.render(step, req, text)
        self.texts.append(out)
        if self.protocol == "qwen3-tools":  # vLLM --tool-call-parser hermes: the call moves to tool_calls
            head, _, rest = out.partition("<tool_call>\n")
            call = json.loads(rest.split("\n</tool_call>")[0])
            return Reply(head.strip(), tool_calls=[{"name": call["name"], "arguments": json.dumps(call["arguments"])}],
                         finish_reason="tool_calls")
        return Reply(out)

    def has_open(self) -> bool:
        return self.protocol not in ("qwen3", "qwen3-tools", "uitars-v1")

    # --- the request, as the family's official protocol has it ----------------------------------
    def flag(self, what: str) -> None:
        self.violations.append(f"{self.protocol} request {self.k + 1}: {what}")

    def check(self, req: dict[str, Any], text: str) -> None:
        msgs = req["messages"]
        p = self.protocol
        if p.startswith("uitars") or p == "doubao":
            prompt = next((c[0]["text"] for m in msgs if m["role"] == "user" and isinstance(c := m["content"], list)
                           and c and c[0].get("type") == "text"), "")
            if p == "uitars":
                if not (msgs[0]["role"] == "system" and msgs[0]["content"] == TARS15_SYSTEM):
                    self.flag("no 'You are a helpful assistant.' system turn (README_deploy / training_example)")
                template = re.sub(r"Use \S+ in `Thought` part", "Use {language} in `Thought` part", prompt)
                template = template[:template.rindex("## User Instruction\n") + len("## User Instruction\n")] + "{instruction}\n"
                if hashlib.sha256(template.encode()).hexdigest() != TARS15_RELEASED_SHA256:
                    self.flag("the prompt is not UI-TARS-1.5's released mobile prompt")
            elif p == "uitars-v1":
                missing = [a for a in TARS_V1_ACTIONS if a not in prompt]
                if missing or "<point>" in prompt or "open_app" in prompt:
                    self.flag(f"not UI-TARS v1's mobile action space (missing {missing})")
            else:
                from ui_tars.prompt import MOBILE_USE_DOUBAO  # the package's own constant

                head = MOBILE_USE_DOUBAO.split("{language}")[0]
                if not prompt.startswith(head) or "<point>x1 y1</point>" not in prompt:
                    self.flag("the prompt is not the ui-tars package's MOBILE_USE_DOUBAO")
            for m in msgs:
                if m["role"] == "assistant" and "start_box='(" in m["content"] and p != "doubao":
                    self.flag("an earlier turn's point has no <|box_start|> tokens (README_deploy add_box_token)")
            if p == "uitars":
                w, h = self._seen(req)
                if not _smart_resize_28(w, h):
                    self.flag(f"the screenshot {w}x{h} is not smart_resize'd (multiples of 28)")
        elif p.startswith("qwen"):
            version = "2.5" if p == "qwen2.5" else "3"
            system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
            m = re.search(r"<tools>\n(.*)\n</tools>", system, re.S)
            try:
                tool = json.loads(m.group(1))["function"] if m else {}
            except json.JSONDecodeError:
                tool = {}
            enum = tool.get("parameters", {}).get("properties", {}).get("action", {}).get("enum")
            if enum != QWEN_ENUM[version]:
                self.flag(f"mobile_use action enum {enum} is not the Qwen{version}-VL cookbook's")
            w, h = self._seen(req)
            stated = f"{w}x{h}" if version == "2.5" else "999x999"
            if f"The screen's resolution is {stated}." not in tool.get("description", ""):
                self.flag(f"the tool does not state the resolution {stated}")
            if version == "2.5" and not system.startswith("You are a helpful assistant."):
                self.flag("no 'You are a helpful assistant.' before the tools (NousFnCallPrompt)")
            if version == "3" and not re.search(r"Thought.*Action.*<tool_call>", system, re.S):
                self.flag("no Thought / Action / <tool_call> response format (Qwen3-VL cookbook)")
            user = msgs[1]["content"]
            if not (user[0].get("type") == "text" and user[-1].get("type") == "image_url"):
                self.flag("the user turn is not the query then the screenshot")
            progress = user[0]["text"]
            if self.k > 0:
                has_json = '{"name": "mobile_use"' in progress
                if version == "2.5" and not has_json:
                    self.flag("Qwen2.5-VL's history is its earlier mobile_use calls")
                if version == "3" and (has_json or "Step 1:" not in progress):
                    self.flag("Qwen3-VL's history is plain-language summaries of earlier actions")
        elif p == "m3a":
            parts = msgs[-1]["content"]
            if [x.get("type") for x in parts] != ["text", "image_url", "image_url"]:
                self.flag("M3A sends its prompt, then the screenshot and the marked screenshot")
            if not M3A_ELEMENT.search(text):
                self.flag("no element list in M3A's 'UI element N: {...}' form")

    def _seen(self, req: dict[str, Any]) -> tuple[int, int]:
        """The size of the current screenshot as the model sees it (after its server's processor)."""
        url = request_images(req)[-1]
        return processed_size(self.protocol, *Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size)

    # --- targets -------------------------------------------------------------------------------
    def _element(self, target: dict[str, Any]) -> hierarchy.Element:
        els = hierarchy.parse(self.phone.hierarchy_xml())
        el = hierarchy.find(els, Selector(**target))
        assert el is not None, f"target {target} is not on the screen"
        return el

    def _point(self, target: dict[str, Any], req: dict[str, Any]) -> tuple[int, int]:
        """The target's centre in the family's own coordinate space."""
        el = self._element(target)
        self.targets.append(el.bounds)
        self.labels.append(el.label)
        cx, cy = el.center
        screen = self.phone.size
        p = self.protocol
        if p in ("uitars", "qwen2.5", "vlm-pixels"):
            # pixels of the screenshot as the model sees it (the last image of the request)
            x, y = from_device(cx, cy, CoordSpace.RESIZED, screen, self._seen(req))
        elif p in ("uitars-v1", "doubao", "vlm-thousand"):
            x, y = from_device(cx, cy, CoordSpace.THOUSAND, screen)
        elif p in ("qwen3", "qwen3-tools"):  # the cookbook maps back with point / 999 * size
            x, y = from_device(cx, cy, CoordSpace.GRID_999, screen)
        else:
            raise AssertionError(p)
        return round(x), round(y)

    def _index(self, target: dict[str, Any], prompt: str) -> int:
        """The number M3A's Set-of-Mark gives the target (the box drawn on it), checked against the
        prompt's element list."""
        from agents.m3a import elements_from_xml

        el = self._element(target)
        self.targets.append(el.bounds)
        self.labels.append(el.label)
        marked = elements_from_xml(self.phone.hierarchy_xml(), self.phone.size)
        i = next(k for k, e in enumerate(marked) if e.bounds == el.bounds)
        line = next((m for m in M3A_ELEMENT.finditer(prompt) if int(m.group(1)) == i), None)
        assert line is not None and int(line.group(2)) == i, f"element {i} is not in the M3A element list"
        if el.text:
            # AndroidWorld pastes the text as it is between double quotes (no JSON escaping)
            assert f'"text": "{el.text}"' in line.group(3), (el.text, line.group(0))
        return i

    # --- answers, in each family's published output shape ----------------------------------------
    def render(self, s: S, req: dict[str, Any], prompt: str) -> str:
        p = self.protocol
        if p in ("uitars", "uitars-v1", "doubao", "vlm-pixels", "vlm-thousand"):
            # README_deploy's expected output: "Thought: ...\nAction: click(start_box='(177,549)')";
            # UI-TARS v1 (model_outputs.jsonl lines 64-74) adds a one-sentence summary line
            head = "Thought: 我看到了需要的界面元素，下一步操作它。\n" if p == "uitars" else "Thought: next step.\n"
            if p == "uitars-v1":
                head += "Tap the element that moves the task forward.\n"
            if s.kind == "open":
                return f"{head}Action: open_app(app_name='{_q(s.text)}')"
            if s.kind in ("click", "long_press"):
                x, y = self._point(s.target or {}, req)
                if p == "doubao":  # the Doubao outputs of model_outputs.jsonl: point='<point>x y</point>'
                    return f"{head}Action: {s.kind}(point='<point>{x} {y}</point>')"
                return f"{head}Action: {s.kind}(start_box='({x},{y})')"
            if s.kind == "type":
                content = _q(s.text + ("\n" if s.submit else ""))
                return f"{head}Action: type(content='{content}')"
            if s.kind == "answer":  # finished(content) answers and ends
                return f"{head}Action: finished(content='{_q(s.text)}')"
            if s.kind == "finish":
                return f"{head}Action: finished(content='')"
        if p.startswith("qwen"):
            if s.kind == "open":
                args: dict[str, Any] = {"action": "open", "text": s.text}
            elif s.kind in ("click", "long_press"):
                args = {"action": s.kind, "coordinate": list(self._point(s.target or {}, req))}
            elif s.kind == "type":
                args = {"action": "type", "text": s.text + ("\n" if s.submit else "")}
            elif s.kind == "answer":
                args = {"action": "answer", "text": s.text}
            else:
                args = {"action": "terminate", "status": "success"}
            call = json.dumps({"name": "mobile_use", "arguments": args}, ensure_ascii=False)
            # the Qwen3-VL cookbook's printed output: Thought, a quoted Action sentence, then the call
            pre = "" if p == "qwen2.5" else f"Thought: this moves the task on.\nAction: \"I do the {args['action']} step.\"\n"
            return f"{pre}<tool_call>\n{call}\n</tool_call>"
        if p == "m3a":
            if s.kind == "open":
                a: dict[str, Any] = {"action_type": "open_app", "app_name": s.text}
            elif s.kind in ("click", "long_press"):
                a = {"action_type": s.kind, "index": self._index(s.target or {}, prompt)}
            elif s.kind == "input":
                a = {"action_type": "input_text", "text": s.text, "index": self._index(s.target or {}, prompt)}
            elif s.kind == "answer":
                a = {"action_type": "answer", "text": s.text}
            else:
                a = {"action_type": "status", "goal_status": "complete"}
            return f"Reason: this is the next step.\nAction: {json.dumps(a, ensure_ascii=False)}"
        raise AssertionError((p, s))

