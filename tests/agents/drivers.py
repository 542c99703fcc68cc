"""Test helpers: a "correct model" for each agent protocol, answering the ScriptedModelServer's
requests from the simulated phone's current accessibility tree.

A script is a list of neutral steps (open an app, tap a target, type, answer, finish). For each
action request the driver takes the next step, finds the target on the phone's current screen,
and writes the answer the protocol expects: smart_resize'd pixels for UI-TARS-1.5 and Qwen2.5-VL,
0-1000 for UI-TARS v1 and vlm(thousand), 0-999 for Qwen3-VL, pixels of the image actually sent for
vlm(pixels) (read from the request's image), and an element index read from the prompt's element
list for M3A. It remembers the target's bounds so the test can check that each tap landed on it.
"""

from __future__ import annotations

import base64
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

from harness import hierarchy
from harness.actions import CoordSpace, from_device
from harness.tasks import Selector
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
    "qwen2.5": ("qwen", {"version": "2.5"}),
    "qwen3": ("qwen", {"version": "3"}),
    "vlm-pixels": ("vlm", {"coords": "pixels"}),
    "vlm-thousand": ("vlm", {"coords": "thousand"}),
    "m3a": ("m3a", {}),
}


def _q(s: str) -> str:
    """A Python-style single-quoted literal body (UI-TARS escapes)."""
    return s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


@dataclass
class Driver:
    phone: Any
    protocol: str
    script: list[S]
    k: int = 0
    summaries: int = 0
    targets: list[tuple[int, int, int, int]] = field(default_factory=list)  # bounds of each tapped target, in order
    texts: list[str] = field(default_factory=list)

    def __call__(self, req: dict[str, Any]) -> Reply:
        text = request_text(req)
        if self.protocol == "m3a" and "Summarise the step you just took" in text:
            self.summaries += 1
            return Reply("Summary: the tap opened the expected screen; continue with the next step.")
        step = self.script[min(self.k, len(self.script) - 1)]
        self.k += 1
        out = self.render(step, req, text)
        self.texts.append(out)
        return Reply(out)

    # --- targets -------------------------------------------------------------------------------
    def _element(self, target: dict[str, Any]) -> hierarchy.Element:
        els = hierarchy.parse(self.phone.hierarchy_xml())
        el = hierarchy.find(els, Selector(**target))
        assert el is not None, f"target {target} is not on the screen"
        return el

    def _point(self, target: dict[str, Any], req: dict[str, Any]) -> tuple[int, int]:
        el = self._element(target)
        self.targets.append(el.bounds)
        cx, cy = el.center
        screen = self.phone.size
        p = self.protocol
        if p in ("uitars", "qwen2.5", "vlm-pixels"):
            # pixels of the current screenshot as the model sees it (the last image of the request)
            url = request_images(req)[-1]
            seen = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size
            if p in ("uitars", "qwen2.5"):  # smart_resize'd: both sides multiples of 28
                assert seen[0] % 28 == 0 and seen[1] % 28 == 0, seen
            x, y = from_device(cx, cy, CoordSpace.RESIZED, screen, seen)
        elif p in ("uitars-v1", "vlm-thousand"):
            x, y = from_device(cx, cy, CoordSpace.THOUSAND, screen)
        elif p == "qwen3":
            x, y = from_device(cx, cy, CoordSpace.GRID_999, screen)
        else:
            raise AssertionError(p)
        return round(x), round(y)

    def _index(self, target: dict[str, Any], prompt: str) -> int:
        """The number the M3A prompt's element list gives the target."""
        el = self._element(target)
        self.targets.append(el.bounds)
        for m in re.finditer(r"(?m)^(\d+): (\{.*\})$", prompt):
            d = json.loads(m.group(2))
            text, desc, rid = d.get("text", ""), d.get("description", d.get("text", "")), d.get("id", "")
            if ("text" in target and target["text"] != text) or ("desc" in target and target["desc"] != desc) \
                    or ("rid" in target and target["rid"] != rid) \
                    or ("text_contains" in target and target["text_contains"] not in text):
                continue
            return int(m.group(1))
        raise AssertionError(f"target {target} is not in the M3A element list")

    # --- protocols ------------------------------------------------------------------------------
    def render(self, s: S, req: dict[str, Any], prompt: str) -> str:
        p = self.protocol
        if p in ("uitars", "uitars-v1", "vlm-pixels", "vlm-thousand"):
            head = "Thought: next step.\n"
            if s.kind == "open":
                return f"{head}Action: open_app(app_name='{_q(s.text)}')"
            if s.kind in ("click", "long_press"):
                x, y = self._point(s.target or {}, req)
                if p == "uitars":  # UI-TARS-1.5's habit, with the special tokens a server may leak
                    return f"{head}Action: {s.kind}(start_box='<|box_start|>({x},{y})<|box_end|>')"
                if p == "uitars-v1":
                    return f"{head}Action: {s.kind}(start_box='({x},{y})')"
                return f"{head}Action: {s.kind}(start_box='({x},{y})')"
            if s.kind == "type":
                content = _q(s.text + ("\n" if s.submit else ""))
                return f"{head}Action: type(content='{content}')"
            if s.kind == "answer":  # finished(content) answers and ends
                return f"{head}Action: finished(content='{_q(s.text)}')"
            if s.kind == "finish":
                return f"{head}Action: finished(content='')"
        if p in ("qwen2.5", "qwen3"):
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
            pre = "Thought: next.\nAction: \"do it\"\n" if p == "qwen3" else ""
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
