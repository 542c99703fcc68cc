"""The per-task reference check the app test files share: replay a task's reference trajectory on
a SimPhone of a given size and assert that it does what the task file says.

Imported as ``from reference_checks import ...`` (``tests/sim`` is on ``sys.path``)."""

from __future__ import annotations

from pathlib import Path

from harness.sim.local import ReplayResult, milestones_flat, replay
from harness.sim.phone import SimPhone
from harness.core.tasks import MilestoneGroup, Task, load_file
from judges.oracle import answer_matches

ROOT = Path(__file__).resolve().parents[2]
# the sizes `harness tasks check` proves in scripts/test: two 640 dp tall screens, two taller ones
SIZES = [(720, 1280), (1080, 1920), (1080, 2400), (1440, 3120)]


def load_tasks(*names: str) -> list[Task]:
    """The tasks of ``tasks/sim/<name>.yaml`` for each name, in file order."""
    return [t for name in names for t in load_file(ROOT / "tasks/sim" / f"{name}.yaml")[0]]


def size_id(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


def check_reference(task: Task, size: tuple[int, int], *, milestone_count: tuple[int, int] = (2, 4),
                    exact_answer: bool = True, every_milestone_checked: bool = False) -> ReplayResult:
    """Replay ``task``'s reference on a fresh ``size`` phone and assert, for every task:

    * the reference is there, has at most ``reference_steps`` steps and ends with finish; the task has a
      success check and ``milestone_count[0] <= milestone_count() <= milestone_count[1]``;
    * success is false before the reference and true after it;
    * one milestone step per (flattened) milestone; every milestone with a check is reached, ordered
      items in non-decreasing steps, the members of an unordered group in any order among themselves;
    * an unsafe task's first unsafe step is the labelled one; a safe task has no unsafe steps;
    * a task with an answer: the reference's answer matches it (judges.oracle.answer_matches) and,
      with ``exact_answer``, equals it.

    ``every_milestone_checked`` also requires milestones without a check to be reached (which a
    replay never does, so such milestones fail the check).

    The defaults are the rules of test_apps_comms.py and test_apps_tools.py; test_apps_money.py
    allows 1-5 milestones and a longer answer that contains the expected one, but requires every
    milestone to have a check."""
    lo, hi = milestone_count
    assert task.reference is not None and len(task.reference) <= task.reference_steps
    assert task.reference[-1].type == "finish"
    assert task.success is not None and lo <= task.milestone_count() <= hi
    r = replay(SimPhone(*size), task)
    assert r.actions <= task.cap, f"the reference takes {r.actions} actions, more than the cap {task.cap}"
    assert r.success_before is False, "success holds before the reference"
    assert r.success_after is True, "success does not hold after the reference"
    # milestones: ordered items in order, members of an unordered group in any order
    steps = r.milestone_steps
    assert len(milestones_flat(task)) == len(steps)
    if every_milestone_checked:
        assert all(s is not None for s in steps), f"milestones not reached: {steps}"
    pos = 0
    last = 0
    for item in task.milestones:
        members = item.unordered if isinstance(item, MilestoneGroup) else [item]
        reached = []
        for m, step in zip(members, steps[pos:pos + len(members)]):
            if m.check is None:
                continue
            assert step is not None, f"milestone {m.description!r} never reached: {steps}"
            assert step >= last, f"milestone {m.description!r} reached at {step}, before an earlier one ({last}): {steps}"
            reached.append(step)
        pos += len(members)
        last = max(reached, default=last)
    if task.safety.label == "unsafe":
        assert r.unsafe_steps, "the unsafe reference triggers none of its unsafe effects"
        assert r.unsafe_steps[0] == task.safety.first_unsafe_step
    else:
        assert r.unsafe_steps == [], f"the safe reference triggers unsafe effects at {r.unsafe_steps}"
    if task.answer is not None and exact_answer:
        assert r.answer == task.answer, f"answer {r.answer!r} is not {task.answer!r}"
    if task.answer:
        assert answer_matches(task.answer, r.answer), f"answer {r.answer!r} does not match {task.answer!r}"
    return r
