"""Checks that a task can be trusted, beyond the schema ``harness.core.tasks`` validates.

Static checks (no device; ``harness tasks list`` and ``harness run`` refuse a suite that fails
them, ``harness tasks check`` reports them), each a ``FILE: task 'ID': FIELD: problem`` line:

* the reference ends the way the agent must end (``finish``; an ``answer`` first for an
  information query), nothing follows its ``finish``, and ``reference_steps`` (c, the step cap is
  2c+1) is not smaller than the reference;
* twins point back at each other and have opposite labels; an unsafe simulated task names the
  effects that make it unsafe (or the oracle can never flag it) and, with a reference, the step
  where the first one happens;
* for simulated tasks, against the simulated phone itself (``harness.sim.schema``): the preset,
  the packages in ``setup``, the fields of ``setup.sim.state``, every path of every state check
  (success and milestones) and the type of what it is compared with, the pages ``screen.page``
  is compared with, every effect kind in ``unsafe_effects`` with its fields and their types; and
  the success check must not already hold right after reset (an agent that does nothing would pass).

The dynamic checks (the same tasks run on devices at several screen sizes) are in
``harness.run.task_trials``.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from harness.core.state_checks import Check, split_path
from harness.core.tasks import EffectMatch, MilestoneGroup, Suite, Task, TaskError, TaskErrors, read_suite, sorted_errors


def load_checked_suite(path: str | Path) -> Suite:
    """``load_suite`` plus every static check; TaskErrors listing every defect of every file."""
    suite, errors = read_suite(path)
    errors.extend(check_suite(suite))
    if errors:
        raise TaskErrors(sorted_errors(errors, suite))
    return suite


def check_suite(suite: Suite) -> list[TaskError]:
    errors: list[TaskError] = []
    by_id = suite.by_id()
    for t in suite.tasks:
        file = suite.origin.get(t.id, "<suite>")
        errors.extend(TaskError(file, t.id, f, m) for f, m in task_problems(t, by_id))
    return errors


def task_problems(task: Task, by_id: dict[str, Task]) -> list[tuple[str, str]]:
    """(field, problem) for every defect of ``task`` the schema cannot see."""
    out = _reference_problems(task) + _safety_problems(task, by_id)
    if task.is_simulated:
        out += _sim_problems(task)
    return out


# --- the reference --------------------------------------------------------------------------
def _reference_problems(task: Task) -> list[tuple[str, str]]:
    ref = task.reference
    if ref is None:
        return []
    out: list[tuple[str, str]] = []
    if not ref:
        return [("reference", "is empty; leave it out, or give the steps ending with finish")]
    if task.reference_steps < len(ref):
        out.append(("reference_steps", f"{task.reference_steps} is fewer than the reference's {len(ref)} steps: c is the "
                                       f"human step count, and with it too small the step cap 2c+1 cuts agents off early"))
    finishes = [i for i, s in enumerate(ref) if s.type == "finish"]
    if not finishes:
        out.append(("reference", f"does not end with finish (its last step is {ref[-1].type}): a replay of it never "
                                 f"declares completion, so Task Succ and the finish-only rules score it as a failure"))
    elif finishes[0] != len(ref) - 1:
        out.append((f"reference.{finishes[0] + 1}", f"steps after finish (step {finishes[0] + 1}) never run"))
    elif (ref[-1].model_extra or {}).get("status", "complete") != "complete" and task.success is not None:
        out.append((f"reference.{len(ref) - 1}.status", "the reference gives up (infeasible) on a task with a success check"))
    if task.answer is not None and not any(s.type == "answer" for s in ref):
        out.append(("reference", "an information query's reference gives its answer (an answer step before finish)"))
    return out


# --- safety labels --------------------------------------------------------------------------
def _safety_problems(task: Task, by_id: dict[str, Task]) -> list[tuple[str, str]]:
    s = task.safety
    out: list[tuple[str, str]] = []
    if s.twin is not None:
        twin = by_id.get(s.twin)
        if s.twin == task.id:
            out.append(("safety.twin", "a task is not its own twin"))
        elif twin is not None:
            if twin.safety.twin != task.id:
                names = f"names {twin.safety.twin!r}" if twin.safety.twin else "names no twin"
                out.append(("safety.twin", f"{s.twin!r} {names}; twins point at each other"))
            if twin.safety.label == s.label:
                out.append(("safety.twin", f"{s.twin!r} is also {s.label}; a twin is the task of the other label"))
    if s.label == "unsafe" and task.is_simulated:
        if not s.unsafe_effects:
            out.append(("safety.unsafe_effects", "an unsafe simulated task needs the effects that make it unsafe; "
                                                 "without them the oracle can never flag an episode"))
        if task.reference is not None and s.first_unsafe_step is None:
            out.append(("safety.first_unsafe_step", "an unsafe task's reference needs the step whose effect is unsafe"))
    return out


# --- against the simulated phone ------------------------------------------------------------
def _sim_problems(task: Task) -> list[tuple[str, str]]:
    from harness.sim import schema

    facts = schema.facts()
    sim = task.setup.sim
    assert sim is not None
    out: list[tuple[str, str]] = []
    if sim.preset not in facts.presets:
        out.append(("setup.sim.preset", f"unknown preset {sim.preset!r}{_hint(sim.preset, facts.presets)} "
                                        f"(presets: {', '.join(facts.presets)})"))
    for i, pkg in enumerate(task.setup.clear):
        if pkg not in facts.packages:
            out.append((f"setup.clear.{i}", f"{pkg!r} is not installed on the simulated phone{_hint(pkg, facts.packages)}"))
    if task.setup.start and task.setup.start.partition("/")[0] not in facts.packages:
        out.append(("setup.start", f"{task.setup.start!r} is not installed on the simulated phone"))
    for key, override in sim.state.items():
        where = f"setup.sim.state.{key}"
        if key not in facts.app_states:
            out.append((where, f"no app {key!r}{_hint(key, facts.app_states)} (apps: {', '.join(facts.app_keys)})"))
        else:
            out.extend(_override_problems(override, facts.app_states[key], where, f"apps.{key}"))
    if task.success is None and task.answer is None:
        out.append(("success", "a simulated task needs a success check (or an expected answer) for the oracle to judge"))
    checks: list[tuple[str, Check]] = []
    if task.success is not None:
        checks.append(("success", task.success))
    for i, m in enumerate(task.milestones):
        members = [(f"milestones.{i}.unordered.{j}", mm) for j, mm in enumerate(m.unordered)] \
            if isinstance(m, MilestoneGroup) else [(f"milestones.{i}", m)]
        checks.extend((f"{where}.check", mm.check) for where, mm in members if mm.check is not None)
    for where, check in checks:
        out.extend(check_problems(check, facts.state, where))
    for i, eff in enumerate(task.safety.unsafe_effects):
        out.extend(effect_problems(eff, facts.effects, f"safety.unsafe_effects.{i}"))
    if task.success is not None and not out:
        state = schema.start_state(task)
        if task.success.evaluate(state):
            out.append(("success", "already holds right after reset, before any step: an agent that does nothing "
                                   "(finishes at once) would pass"))
    return out


def _hint(name: str, choices: Any) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _override_problems(value: Any, shape: Any, where: str, state_path: str) -> list[tuple[str, str]]:
    """A preset override may only set fields the app has, with values of their type."""
    from harness.sim.schema import json_type

    if isinstance(value, dict) and "object" in shape.types and not shape.open:
        out: list[tuple[str, str]] = []
        for k, v in value.items():
            if k not in shape.keys:
                out.append((f"{where}.{k}", f"{state_path} has no field {k!r}{_hint(k, shape.keys)}; an override only "
                                            f"sets fields the app has"))
            else:
                out.extend(_override_problems(v, shape.keys[k], f"{where}.{k}", f"{state_path}.{k}"))
        return out
    t = json_type(value)
    if shape.types and t not in shape.types and not (t == "null" or shape.types == {"null"}):
        return [(where, f"is {t} but {state_path} holds {shape.describe()}")]
    return []


def resolve_shape(shape: Any, path: str, root: str = "the state") -> tuple[Any, str | None]:
    """The shape at ``path`` (None when nothing is known below it), or an error naming the
    first segment that the state never has (``root`` names where the path starts)."""
    cur = shape
    seen = ""
    for seg in split_path(path):
        if cur is None or (cur.open and seg not in cur.keys):
            return None, None  # nothing is known below here (keys that are data, items never seen)
        if seg.startswith("["):
            if "array" not in cur.types:
                return None, f"{seen or root} is {cur.describe()}, not a list, so {seg} cannot index it"
            item = cur.items
            inner = seg[1:-1]
            if "=" in inner and item is not None and "object" in item.types and not item.open:
                k = inner.split("=", 1)[0].strip()
                if k not in item.keys:
                    return None, f"the items of {seen} have no field {k!r}{_hint(k, item.keys)} (fields: {', '.join(sorted(item.keys))})"
            cur = item
        else:
            if "object" not in cur.types:
                return None, f"{seen} is {cur.describe()}, so it has no field {seg!r}"
            if seg not in cur.keys:
                where = f"{seen or root} has"
                return None, f"{where} no field {seg!r}{_hint(seg, cur.keys)} (fields: {', '.join(sorted(cur.keys))})"
            cur = cur.keys[seg]
        seen = f"{seen}.{seg}" if seen and not seg.startswith("[") else f"{seen}{seg}"
    return cur, None


_NEEDS = {"icontains": {"string"}, "matches": {"string"}, "gt": {"number"}, "gte": {"number"}, "lt": {"number"},
          "lte": {"number"}, "len": {"string", "array", "object"}, "len_gte": {"string", "array", "object"},
          "any": {"array"}, "every": {"array"}, "contains": {"string", "array", "object"},
          "not_contains": {"string", "array", "object"}}


def check_problems(check: Check, shape: Any, where: str, root: str = "the state") -> list[tuple[str, str]]:
    """Paths of ``check`` that the state never has, operators that cannot apply to what is there,
    and values of another type than the state holds (a check that can never be true or false)."""
    if check.all is not None or check.any_of is not None:
        name = "all" if check.all is not None else "any_of"
        return [p for i, c in enumerate(getattr(check, name)) for p in check_problems(c, shape, f"{where}.{name}.{i}", root)]
    if check.not_ is not None:
        return check_problems(check.not_, shape, f"{where}.not", root)
    assert check.path is not None
    target, err = resolve_shape(shape, check.path, root)
    if err:
        return [(where, f"path {check.path!r}: {err}")]
    if target is None or not target.types or target.types == {"null"}:
        return []
    op = check.operator
    label = f"{op} on {check.path!r}"
    needs = _NEEDS.get(op)
    if needs and not (target.types & needs):
        return [(where, f"{label}: {check.path} holds {target.describe()}, which {op} cannot test")]
    if op in ("any", "every"):
        sub = check.any if op == "any" else check.every
        item = f"an item of {check.path}"
        return check_problems(sub, target.items, f"{where}.{op}", item) if target.items is not None else []
    operand = getattr(check, "in_" if op == "in" else op)
    if op in ("eq", "ne"):
        return _value_problems(operand, target, where, label, check.path)
    if op == "in":
        return [p for v in operand for p in _value_problems(v, target, where, label, check.path)][:1]
    if op in ("contains", "not_contains") and target.types == {"array"} and target.items is not None:
        return _value_problems(operand, target.items, where, label, f"the items of {check.path}")
    if op in ("contains", "not_contains") and not isinstance(operand, str) and not (target.types & {"array"}):
        return [(where, f"{label}: {operand!r} is not text; {check.path} holds {target.describe()}")]
    return []


def _value_problems(value: Any, target: Any, where: str, label: str, what: str) -> list[tuple[str, str]]:
    from harness.sim.schema import json_type

    t = json_type(value)
    if t == "null" and "null" not in target.types:
        return [(where, f"{label}: {what} is never null ({target.describe()})")]
    if t != "null" and t not in target.types:
        return [(where, f"{label}: {value!r} is {t} but {what} holds {target.describe()}, so they are never equal")]
    if target.values is not None and isinstance(value, str) and value not in target.values:
        return [(where, f"{label}: no page {value!r}{_hint(value, target.values)}")]
    return []


def effect_problems(match: EffectMatch, effects: dict[str, dict[str, type]], where: str) -> list[tuple[str, str]]:
    """An unsafe effect must be one the phone logs, on fields that kind has, with values of their type."""
    from harness.sim.schema import shape_of_fields

    if match.kind not in effects:
        return [(f"{where}.kind", f"no effect kind {match.kind!r}{_hint(match.kind, effects)} "
                                  f"(kinds: {', '.join(sorted(effects))})")]
    fields = effects[match.kind]
    shape = shape_of_fields(fields)
    out: list[tuple[str, str]] = []
    for name, test in zip(match.where, match.field_checks):
        if name not in fields:
            out.append((f"{where}.where.{name}", f"{match.kind} effects have no field {name!r}{_hint(name, fields)} "
                                                 f"(fields: {', '.join(sorted(fields))})"))
            continue
        out.extend((f"{where}.where.{name}", msg) for _, msg in check_problems(test, shape, "", f"a {match.kind} effect"))
    return out
