"""The task a recording makes: its reference (the recorded steps, then the answer if one was given,
then finish), c (``reference_steps``: the length of that reference, so the actions done on the
phone plus the closing answer and finish), draft milestones at the
screens where the page changed, and the rest from the task it re-records (``--from``) or the
command line.

Pages are the simulated phone's ``screen.page`` (with its dialog), or the window's
package/activity on a real phone. A draft milestone's ``key_text`` is the new screen's title;
on the simulated phone it also gets the state check the oracle evaluates. On the simulated phone
an unsafe task's ``first_unsafe_step`` is found again in the recording: the first step after
which the effect log holds one of the task's unsafe effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.recorder.steps import Step
from harness.core.tasks import Task

LAUNCHER_PAGES = ("launcher/home",)
NOT_APPS = ("com.android.systemui", "com.android.inputmethod.latin", "android")


@dataclass
class TaskSpec:
    """What the command line says about the task being recorded."""

    id: str
    instruction: str
    language: str = "en"
    apps: list[str] = field(default_factory=list)
    answer: str | None = None
    template: Task | None = None


def page_of(state: dict[str, Any] | None, fallback: str) -> str:
    if not state:
        return fallback
    screen = state.get("screen", {})
    page = str(screen.get("page") or fallback)
    return page + (f" + dialog {screen['dialog']}" if screen.get("dialog") else "")


def _page_check(state: dict[str, Any]) -> dict[str, Any]:
    screen = state.get("screen", {})
    check = {"path": "screen.page", "eq": screen.get("page")}
    if screen.get("dialog"):
        return {"all": [check, {"path": "screen.dialog", "eq": screen["dialog"]}]}
    return check


def _is_launcher(page: str) -> bool:
    return page in LAUNCHER_PAGES or "launcher" in page.split("/")[0]


def draft_milestones(steps: list[Step], language: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, s in enumerate(steps, 1):
        if s.after is None or s.after.page == s.before.page or _is_launcher(s.after.page):
            continue
        title = s.after.title()
        shown = title or s.after.page
        desc = f"“{shown}”已显示" if language == "zh" else f"The {shown!r} screen is shown"
        m: dict[str, Any] = {"description": desc}
        if title:
            m["key_text"] = title
        if s.after.state is not None:
            m["check"] = _page_check(s.after.state)
        m["reference_step"] = i
        out.append(m)
    return out


def first_unsafe_step(steps: list[Step], task: Task) -> int | None:
    for i, s in enumerate(steps, 1):
        if s.after is None or s.after.state is None or s.before.state is None:
            continue
        seen = max((e.get("id", 0) for e in s.before.state.get("effects", [])), default=0)
        new = [e for e in s.after.state.get("effects", []) if e.get("id", 0) > seen]
        if any(m.matches(e) for e in new for m in task.safety.unsafe_effects):
            return i
    return None


def visited_apps(steps: list[Step]) -> list[str]:
    apps: list[str] = []
    for s in steps:
        for screen in (s.before, s.after):
            if screen is None:
                continue
            pkg = (screen.state or {}).get("screen", {}).get("package") if screen.state else screen.page.split("/")[0]
            if pkg and pkg not in apps and pkg not in NOT_APPS and "launcher" not in pkg:
                apps.append(pkg)
    return apps


def build_task(spec: TaskSpec, steps: list[Step], first: Any, source: str) -> dict[str, Any]:
    """The task dict (validated by the caller). ``first`` is the screen before the first step."""
    t = spec.template
    reference = [dict(s.ref) for s in steps if s.action is not None]  # (a touch not placed is no step of it)
    answer = spec.answer if spec.answer is not None else (t.answer if t is not None else None)
    if answer is not None:
        reference.append({"type": "answer", "text": answer})
    reference.append({"type": "finish", "status": "complete"})
    task: dict[str, Any] = {"id": spec.id, "instruction": spec.instruction, "language": spec.language}
    if t is not None:
        dumped = t.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
        for key in ("apps", "categories", "difficulty", "setup", "success", "answer", "key_components", "safety"):
            if key in dumped:
                task[key] = dumped[key]
    else:
        if spec.apps or visited_apps(steps):
            task["apps"] = spec.apps or visited_apps(steps)
        if answer is not None:
            task["answer"] = answer  # the person's answer is the one to expect
    if "setup" not in task and first is not None and first.state is not None:
        device = first.state.get("device", {})
        task["setup"] = {"sim": {"preset": device.get("preset", "default"), "locale": device.get("locale", spec.language)}}
    # c counts every reference step, the closing answer and finish too, as the suite's task checks
    # require (a smaller c would cap agents below the reference)
    task["reference_steps"] = len(reference)
    task["reference"] = reference
    task["milestones"] = draft_milestones(steps, spec.language)
    if t is not None and t.safety.label == "unsafe":
        safety = dict(task.get("safety", {}))
        found = first_unsafe_step(steps, t)
        if found is None:
            safety.pop("first_unsafe_step", None)
        else:
            safety["first_unsafe_step"] = found
        task["safety"] = safety
    task["source"] = source
    return task
