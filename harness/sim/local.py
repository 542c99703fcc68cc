"""Drive a SimPhone in-process, without ADB: for app tests, task authoring and the sim benchmark.

The real runner never uses this (it talks to every phone over adb); this exists so an app author
can check a task's reference and checks in milliseconds. ``tests/`` also replays every task over
real adb to prove the same holds there.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from harness.core import hierarchy
from harness.core.actions import NO_DEVICE_EFFECT, Action, Answer, Click, DoubleTap, Key, LongPress, OpenApp, Swipe, TypeText, Wait
from harness.sim.phone import SimPhone
from harness.core.tasks import Milestone, MilestoneGroup, Task

_KEYS = {"back": "BACK", "home": "HOME", "enter": "ENTER", "delete": "DEL", "app_switch": "APP_SWITCH"}


def reset_for_task(phone: SimPhone, task: Task) -> None:
    sim = task.setup.sim
    if sim is None:
        raise ValueError(f"task {task.id} is not a simulated task (no setup.sim)")
    config = sim.reset_config(task.language)
    out = phone.broadcast("com.crate.sim.RESET", {"config": base64.b64encode(json.dumps(config).encode()).decode()})
    if "result=-1" not in out:
        raise ValueError(f"task {task.id}: sim reset failed: {out}")
    if task.setup.start:
        pkg = task.setup.start.split("/", 1)[0]
        if not phone.launch(pkg):
            raise ValueError(f"task {task.id}: setup.start {task.setup.start!r} is not installed on the sim")


def execute(phone: SimPhone, action: Action) -> None:
    if isinstance(action, Click):
        phone.tap(action.x, action.y)
    elif isinstance(action, LongPress):
        phone.long_press(action.x, action.y, action.duration_ms)
    elif isinstance(action, DoubleTap):
        phone.double_tap(action.x, action.y)
    elif isinstance(action, Swipe):
        phone.swipe(*action.start, *action.end, action.duration_ms)
    elif isinstance(action, TypeText):
        if action.clear:
            phone.clear_text()
        phone.input_text(action.text)
        if action.submit:
            phone.keyevent("ENTER")
    elif isinstance(action, Key):
        phone.keyevent(_KEYS.get(action.key, action.key) if isinstance(action.key, str) else action.key)
    elif isinstance(action, OpenApp):
        pkg = phone.resolve_app(action.app)
        if pkg is None:
            raise ValueError(f"open_app: no app called {action.app!r}")
        phone.launch(pkg)
    elif isinstance(action, (Wait, *NO_DEVICE_EFFECT)):
        pass


@dataclass
class ReplayResult:
    success_before: bool | None
    success_after: bool | None
    answer: str | None
    milestone_steps: list[int | None]          # reference step at which each milestone (flattened) was first met
    unsafe_steps: list[int]                    # reference steps whose effects match the task's unsafe effects
    states: list[dict[str, Any]] = field(default_factory=list)
    actions: int = 0                           # actions played (scrolls towards scroll_to targets included)


def milestones_flat(task: Task) -> list[Milestone]:
    out: list[Milestone] = []
    for m in task.milestones:
        out.extend(m.unordered if isinstance(m, MilestoneGroup) else [m])
    return out


def replay(phone: SimPhone, task: Task, keep_states: bool = False) -> ReplayResult:
    """Reset for ``task``, run its reference, and report checks, milestones and unsafe steps
    (numbered as reference steps, whatever scrolling a ``scroll_to`` step needed)."""
    if task.reference is None:
        raise ValueError(f"task {task.id} has no reference trajectory")
    reset_for_task(phone, task)
    state = phone.state_json()
    before = task.success.evaluate(state) if task.success else None
    flat = milestones_flat(task)
    reached: list[int | None] = [None] * len(flat)
    unsafe: list[int] = []
    seen_effects = len(state["effects"])
    answer = None
    states = [state] if keep_states else []
    player = hierarchy.ReferencePlayer(task.reference)
    actions = 0
    while not player.finished:
        play = player.next(lambda: hierarchy.parse(phone.hierarchy_xml()), phone.size)
        if play.action is None:
            raise AssertionError(f"task {task.id}: {play.invalid} (screen {state['screen']})")
        actions += 1
        if isinstance(play.action, Answer):
            answer = play.action.text
        execute(phone, play.action)
        state = phone.state_json()
        if keep_states:
            states.append(state)
        new = state["effects"][seen_effects:]
        seen_effects = len(state["effects"])
        if any(m.matches(e) for e in new for m in task.safety.unsafe_effects) and play.step not in unsafe:
            unsafe.append(play.step)
        for k, m in enumerate(flat):
            if reached[k] is None and m.check is not None and m.check.evaluate(state):
                reached[k] = play.step
    after = task.success.evaluate(state) if task.success else None
    return ReplayResult(before, after, answer, reached, unsafe, states, actions)
