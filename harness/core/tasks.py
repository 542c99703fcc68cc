"""Task suites: the YAML task format, its validation, and loading suites from files or folders.

A suite is a YAML file holding a list of tasks (or ``{tasks: [...]}``), or a folder of such files
(read in name order). Every task is validated on load; an error names the file, the task and the
field (``tasks/sim/settings.yaml: task 'wifi_off': reference_steps: must be >= 1``).

The full format is documented in ``docs/tasks.md``. The step cap of an episode is ``2c + 1`` where
c is ``reference_steps`` (SPA-Bench's convention, FIELD_NOTES section 1).
"""

from __future__ import annotations

import hashlib
import os
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import (BaseModel, ConfigDict, Discriminator, Field, PrivateAttr, Tag, ValidationError,
                      field_validator, model_validator)

from harness.core.actions import ACTION_TYPES, Action, ActionError, parse_action
from harness.core.state_checks import OPERATORS, Check

# MobileRisk's risk categories (FIELD_NOTES section 4; OS-Sentinel's MobileRisk labels).
RISK_CATEGORIES = (
    "Over-Automation", "Privacy Violations", "Legal/Compliance", "Destructive Actions",
    "Malicious Use", "Harmful Content", "Prompt Injection", "Resource Abuse",
    "UI Interference", "Security Evasion",
)
# AndroidLens's task categories (seed 002, section 3.3) plus our own tags are free-form strings;
# these are the ones the reports know how to group by.
KNOWN_CATEGORIES = ("single-app", "cross-app", "multi-constraint", "multi-goal", "unsafe", "safe-twin",
                    "anomaly", "information-query")

TASK_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"


class TaskError(ValueError):
    """A defect in a task file: the message names the file, the task and the field."""

    def __init__(self, file: str | Path, task: str | None, field: str | None, message: str,
                 position: int | None = None):
        self.file, self.task, self.field, self.message = str(file), task, field, message
        self.position = position  # the task's place in its file, for listing errors in file order
        where = self.file
        if task:
            where += f": task {task!r}"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {message}")


class TaskErrors(TaskError):
    """Several defects at once, one per line in file and task order; ``errors`` holds each. Its own
    file, task, field and message are the first one's."""

    def __init__(self, errors: list[TaskError]):
        if not errors:
            raise ValueError("TaskErrors needs at least one error")
        self.errors = list(errors)
        first = self.errors[0]
        self.file, self.task, self.field, self.message = first.file, first.task, first.field, first.message
        ValueError.__init__(self, "\n".join(str(e) for e in self.errors))


def errors_of(e: TaskError) -> list[TaskError]:
    return list(e.errors) if isinstance(e, TaskErrors) else [e]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Selector(_Strict):
    """Picks a node of the accessibility tree (uiautomator dump) for reference trajectories.

    All given fields must match; ``index`` picks among several matches in document order."""

    text: str | None = None
    text_contains: str | None = None
    desc: str | None = None
    rid: str | None = None
    cls: str | None = Field(default=None, alias="class")
    index: int = 0

    @model_validator(mode="after")
    def _some(self) -> "Selector":
        if not any([self.text, self.text_contains, self.desc, self.rid, self.cls]):
            raise ValueError("a target needs at least one of text, text_contains, desc, rid, class")
        return self

    def describe(self) -> str:
        parts = [f"{k}={v!r}" for k, v in self.model_dump(by_alias=True, exclude_none=True).items() if k != "index" or v]
        return "target(" + ", ".join(parts) + ")"


AIMED = ("click", "long_press", "double_tap", "swipe")  # a target gives these their point
WHEN_VISIBLE = ("answer", "wait")         # a target makes these wait until it is on screen (scroll_to: scroll to it)


class RefStep(_Strict):
    """One step of a reference trajectory.

    Either a complete unified action (``{type: click, x: 540, y: 1200}``) or an action aimed at a
    node (``{type: click, target: {text: Wi-Fi}}``); a targeted swipe moves the finger from the
    node's centre in ``direction`` (the finger's direction) by ``distance`` times the node's
    height (or width for left/right), and is refused if that would leave the screen. With
    ``scroll_to`` (true, or a target naming the list) a target below the fold is first scrolled
    into view. An ``answer`` or ``wait`` with a target happens once the target is on screen (an
    answer read off a row further down a list). Targets make a reference work on every screen size."""

    model_config = ConfigDict(extra="allow")

    type: str
    target: Selector | None = None
    direction: Literal["up", "down", "left", "right"] | None = None
    distance: float = Field(default=0.5, gt=0, le=3)
    scroll_to: bool | Selector = False  # scroll the target's list until it is on screen

    @model_validator(mode="after")
    def _valid(self) -> "RefStep":
        if self.type not in ACTION_TYPES:
            raise ValueError(f"type: unknown action type {self.type!r}")
        if self.target is None:
            if self.direction is not None:
                raise ValueError("direction needs a target")
            if self.scroll_to is not False:
                raise ValueError("scroll_to needs a target")
            self.action()  # validates the concrete action now, not at replay time
        elif self.type in WHEN_VISIBLE:
            if self.direction is not None:
                raise ValueError(f"direction is for swipes, not {self.type}")
            self.action()  # the action itself, done once the target is on screen
        else:
            if self.type not in AIMED:
                raise ValueError(f"target is only for {', '.join(AIMED + WHEN_VISIBLE)}, not {self.type}")
            if self.type == "swipe" and self.direction is None:
                raise ValueError("a targeted swipe needs direction (up/down/left/right)")
            extra = dict(self.model_extra or {})
            placed = sorted(set(extra) & {"x", "y", "start", "end"})
            if placed:
                raise ValueError(f"a targeted step takes its point from the target; remove {', '.join(placed)}")
            allowed = {"duration_ms"}
            unknown = sorted(set(extra) - allowed)
            if unknown:
                raise ValueError(f"unknown field(s) for a targeted {self.type}: {', '.join(unknown)}")
            # validate what is left against the action it becomes, with a stand-in point
            probe = {"type": self.type, **extra}
            if self.type == "swipe":
                probe.update(start=(0, 0), end=(1, 1))
            else:
                probe.update(x=0, y=0)
            try:
                parse_action(probe)
            except ActionError as e:
                raise ValueError(str(e)) from None
        return self

    def action(self) -> Action:
        """The concrete action (for steps without a target, and answer/wait once theirs shows)."""
        data = dict(self.model_extra or {})
        data["type"] = self.type
        try:
            return parse_action(data)
        except ActionError as e:
            raise ValueError(str(e)) from None


class Milestone(_Strict):
    """A progress point (AndroidLens, seed 002 section 4.2): a description the judge reads, the key
    text that must be visible, an optional screen region (fractions x1,y1,x2,y2), and for simulated
    tasks an optional state check the oracle evaluates after every step."""

    description: str
    key_text: str | None = None
    region: tuple[float, float, float, float] | None = None
    check: Check | None = None
    reference_step: int | None = Field(default=None, ge=1)

    @field_validator("region")
    @classmethod
    def _region(cls, v):
        if v is not None and not (0 <= v[0] < v[2] <= 1 and 0 <= v[1] < v[3] <= 1):
            raise ValueError("region is x1,y1,x2,y2 as fractions with x1<x2, y1<y2 in [0,1]")
        return v


class MilestoneGroup(_Strict):
    """Milestones that may be reached in any order; the group is done when all are."""

    unordered: list[Milestone] = Field(min_length=1)


def _milestone_kind(v: Any) -> str:
    return "group" if isinstance(v, dict) and "unordered" in v or isinstance(v, MilestoneGroup) else "one"


# pick the member by the presence of ``unordered`` so a bad milestone is reported by its own field
MilestoneItem = Annotated[Union[Annotated[MilestoneGroup, Tag("group")], Annotated[Milestone, Tag("one")]],
                          Discriminator(_milestone_kind)]


class EffectMatch(_Strict):
    """An effect in the simulated phone's effect log that makes a step unsafe for this task.

    ``where`` maps an effect field to a value it must equal (``{to: Tom}``, typed: ``true`` is not
    ``"true"``) or to one state-check operator (``{to: {ne: Tom}}``, ``{text: {contains: "4716"}}``,
    ``{amount: {gte: 100}}``, ``{to: {in: [A, B]}}``, ``{text: {not: {contains: ok}}}``)."""

    kind: str
    where: dict[str, Any] = Field(default_factory=dict)
    _tests: list[Check] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _compile(self) -> "EffectMatch":
        self._tests = [effect_field_check(k, v) for k, v in self.where.items()]
        return self

    @property
    def field_checks(self) -> list[Check]:
        """One state check per ``where`` entry, in order, evaluated on the effect."""
        return list(self._tests)

    def matches(self, effect: dict[str, Any]) -> bool:
        return effect.get("kind") == self.kind and all(t.evaluate(effect) for t in self._tests)


def effect_field_check(name: str, spec: Any) -> Check:
    """The state check one ``where`` entry stands for, on the effect as its state."""
    if not isinstance(spec, dict):
        return Check.model_validate({"path": _field_path(name), "eq": spec})
    if len(spec) != 1:
        raise ValueError(f"where.{name}: use one operator ({', '.join(OPERATORS)} or not), got {sorted(spec) or 'none'}")
    (op, arg), = spec.items()
    if op == "not":
        return Check.model_validate({"not": effect_field_check(name, arg).to_json()})
    if op in ("any", "every") or op not in OPERATORS:
        raise ValueError(f"where.{name}: unknown operator {op!r} (use {', '.join(o for o in OPERATORS if o not in ('any', 'every'))} or not)")
    try:
        return Check.model_validate({"path": _field_path(name), op: arg})
    except ValidationError as e:
        raise ValueError(f"where.{name}: {e.errors()[0]['msg']}") from None


def _field_path(name: str) -> str:
    if not name or any(c in name for c in ".[]"):
        raise ValueError(f"where: {name!r} is not an effect field name")
    return name


class Safety(_Strict):
    label: Literal["safe", "unsafe"] = "safe"
    category: str | None = None
    first_unsafe_step: int | None = Field(default=None, ge=1)
    twin: str | None = None
    unsafe_effects: list[EffectMatch] = Field(default_factory=list)
    note: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Safety":
        if self.category is not None and self.category not in RISK_CATEGORIES:
            raise ValueError(f"category: {self.category!r} is not a MobileRisk category ({', '.join(RISK_CATEGORIES)})")
        if self.label == "unsafe" and self.category is None:
            raise ValueError("an unsafe task needs its risk category")
        if self.label == "safe" and self.first_unsafe_step is not None:
            raise ValueError("first_unsafe_step is only for unsafe tasks")
        return self


class SimSetup(_Strict):
    """The simulated phone's start state: a named preset, its locale, anomalies, overrides and
    the date every app agrees on (``today``; the sim's shared default when left out)."""

    preset: str = "default"
    locale: Literal["en", "zh"] | None = None
    anomalies: list[Literal["ad_popup", "permission_prompt"]] = Field(default_factory=list)
    seed: int = 0
    state: dict[str, Any] = Field(default_factory=dict)
    today: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")

    @field_validator("today")
    @classmethod
    def _date(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                date.fromisoformat(v)
            except ValueError:
                raise ValueError(f"{v!r} is not a date (YYYY-MM-DD)") from None
        return v

    def reset_config(self, language: str) -> dict[str, Any]:
        """What the sim's reset broadcast carries (``SimPhone.reset``'s arguments)."""
        config = {"preset": self.preset, "locale": self.locale or language, "anomalies": list(self.anomalies),
                  "seed": self.seed, "state": self.state}
        if self.today is not None:
            config["today"] = self.today
        return config


class Setup(_Strict):
    """What the runner does before an episode: force-stop ``stop`` apps, force-stop and clear
    ``clear`` apps (erases their data: refused on a phone without ``--allow-clear``), go home, start
    ``start`` (``package`` or ``package/activity``), load an emulator snapshot, or a sim preset."""

    stop: list[str] = Field(default_factory=list)
    clear: list[str] = Field(default_factory=list)
    start: str | None = None
    snapshot: str | None = None
    sim: SimSetup | None = None

    def packages(self) -> list[str]:
        """The apps the task needs installed: every package its setup names (stopped, cleared or
        started), in that order. A phone without one of them cannot run the task."""
        named = [*self.stop, *self.clear, *([self.start.partition("/")[0]] if self.start else [])]
        return list(dict.fromkeys(p for p in named if p))


class Task(_Strict):
    id: str = Field(pattern=TASK_ID_PATTERN)
    instruction: str = Field(min_length=1)
    language: Literal["en", "zh"] = "en"
    apps: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)
    difficulty: int | None = Field(default=None, ge=1, le=5)
    reference_steps: int = Field(ge=1)
    reference: list[RefStep] | None = None
    setup: Setup = Field(default_factory=Setup)
    milestones: list[MilestoneItem] = Field(default_factory=list)
    safety: Safety = Field(default_factory=Safety)
    success: Check | None = None
    answer: str | None = None  # the expected answer of an information query (checked by the oracle)
    key_components: list[str] = Field(default_factory=list)  # SPA-Bench's key_component_final
    source: str | None = None
    verified: bool = True  # false: written for devices we could not run it on; its reference is unchecked

    @model_validator(mode="after")
    def _consistent(self) -> "Task":
        if self.id in (".", ".."):
            raise ValueError("id: '.' and '..' are not task ids")
        if self.reference is not None and self.safety.first_unsafe_step is not None:
            if self.safety.first_unsafe_step > len(self.reference):
                raise ValueError("safety.first_unsafe_step is past the end of the reference")
        return self

    @property
    def cap(self) -> int:
        return 2 * self.reference_steps + 1

    @property
    def is_simulated(self) -> bool:
        return self.setup.sim is not None

    def milestone_count(self) -> int:
        return sum(len(m.unordered) if isinstance(m, MilestoneGroup) else 1 for m in self.milestones)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "instruction": self.instruction,
            "language": self.language,
            "apps": self.apps,
            "categories": self.categories,
            "reference_steps": self.reference_steps,
            "cap": self.cap,
            "safety": {"label": self.safety.label, "category": self.safety.category,
                       "first_unsafe_step": self.safety.first_unsafe_step, "twin": self.safety.twin},
            "milestones": self.milestone_count(),
            "simulated": self.is_simulated,
            "has_reference": self.reference is not None,
            "verified": self.verified,
        }


class Suite(BaseModel):
    """Tasks in load order, with the files they came from (and their hashes, for the manifest)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tasks: list[Task]
    files: dict[str, str]  # path -> sha256
    origin: dict[str, str] = Field(default_factory=dict)  # task id -> file
    positions: dict[str, int] = Field(default_factory=dict)  # task id -> its place in its file

    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}

    def select(self, ids: list[str] | None) -> list[Task]:
        if not ids:
            return list(self.tasks)
        index = self.by_id()
        missing = [i for i in ids if i not in index]
        if missing:
            raise TaskError(self.where(), None, "--tasks", f"unknown task id(s): {unknown_ids(missing, list(index))}; "
                            f"`harness tasks list --suite {self.where()}` lists them")
        return [index[i] for i in ids]

    def where(self) -> str:
        """The suite as a user named it: its one file, or the folder holding all its files."""
        files = sorted(self.files)
        if len(files) == 1:
            return files[0]
        return os.path.commonpath(files) if files else "suite"


def unknown_ids(missing: list[str], known: list[str]) -> str:
    """``a (did you mean b?), c``: each unknown id with the nearest known ones (difflib's ratio)."""
    import difflib

    out = []
    for m in missing:
        near = difflib.get_close_matches(m, known, n=3, cutoff=0.8)
        out.append(f"{m!r}" + (f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""))
    return ", ".join(out)


def _error_fields(e: ValidationError) -> list[tuple[str, str]]:
    out = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"] if not (isinstance(p, str) and p in ("group", "one")))
        out.append((loc, err["msg"].removeprefix("Value error, ")))
    return out


def task_label(data: Any, position: int | None) -> str | None:
    """How errors name a task: its id, or its position in the file when it has none."""
    if isinstance(data, dict) and isinstance(data.get("id"), str):
        return data["id"]
    return f"#{position + 1}" if position is not None else None


def validate_task(data: Any, file: str | Path = "<memory>", position: int | None = None) -> tuple[Task | None, list[TaskError]]:
    """The task and no errors, or None and every defect pydantic finds in it (each its own line)."""
    label = task_label(data, position)
    if not isinstance(data, dict):
        return None, [TaskError(file, label, None, f"a task must be a mapping, got {type(data).__name__}", position)]
    try:
        return Task.model_validate(data), []
    except ValidationError as e:
        return None, [TaskError(file, label, f, m, position) for f, m in _error_fields(e)]


def parse_task(data: Any, file: str | Path = "<memory>", position: int | None = None) -> Task:
    task, errors = validate_task(data, file, position)
    if errors:
        raise TaskErrors(errors)
    assert task is not None
    return task


MAX_YAML_NODES = 1_000_000  # far above any real task file; YAML aliases can expand a tiny file to billions


def _expanded_nodes(data: Any, limit: int) -> int:
    """How many nodes ``data`` holds with every YAML alias expanded (stops counting past ``limit``).
    Aliases load as shared objects, so the count is memoised by identity and stays cheap."""
    memo: dict[int, int] = {}

    def size(x: Any) -> int:
        if not isinstance(x, (dict, list)):
            return 1
        if id(x) in memo:
            return memo[id(x)]
        n = 1
        for child in (x.values() if isinstance(x, dict) else x):
            n += size(child)
            if n > limit:
                break
        memo[id(x)] = n
        return n

    return size(data)


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(p: Path) -> tuple[list[Any], str]:
    """The raw task entries of one file and its hash; a TaskError if the file itself is bad."""
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise TaskError(p, None, None, f"cannot read: {e.strerror}") from None
    try:
        # libyaml's loader when PyYAML has it (the same safe constructors, ~10x faster: a 2,000-task
        # suite is read at the start of every judging pass), else the pure-Python one
        data = yaml.load(raw.decode("utf-8"), Loader=_YAML_LOADER)
        if _expanded_nodes(data, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise TaskError(p, None, None, f"expands to more than {MAX_YAML_NODES:,} values (YAML aliases?); refused")
    except UnicodeDecodeError as e:
        raise TaskError(p, None, None, f"not UTF-8 text (byte {e.start})") from None
    except RecursionError:
        raise TaskError(p, None, None, "nested too deeply to be a task file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or getattr(e, "reason", None) or str(e)
        if "maximum nesting depth" in str(problem):  # libyaml's limit, where Python's loader recurses too deep
            raise TaskError(p, None, None, f"nested too deeply to be a task file{where}") from None
        raise TaskError(p, None, None, f"invalid YAML{where}: {' '.join(str(problem).split())}") from None
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
    if data is None:
        data = []
    if not isinstance(data, list):
        raise TaskError(p, None, None, "a task file holds a list of tasks (or {tasks: [...]})")
    return data, hashlib.sha256(raw).hexdigest()


def _read_file(p: Path) -> tuple[list[tuple[int, Task]], str, list[TaskError]]:
    try:
        data, digest = _read_yaml(p)
    except TaskError as e:
        return [], "", [e]
    tasks: list[tuple[int, Task]] = []
    errors: list[TaskError] = []
    for i, item in enumerate(data):
        task, errs = validate_task(item, p, i)
        errors.extend(errs)
        if task is not None:
            tasks.append((i, task))
    return tasks, digest, errors


def load_file(path: str | Path) -> tuple[list[Task], str]:
    """The tasks of one file and its sha256; TaskErrors naming every defect in it."""
    tasks, digest, errors = _read_file(Path(path))
    if errors:
        raise TaskErrors(errors)
    return [t for _, t in tasks], digest


def suite_files(path: str | Path) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
        if not files:
            raise TaskError(p, None, None, "no .yaml task files in this folder")
        return files
    if p.exists():
        return [p]
    raise TaskError(p, None, None, "no such file or folder")


def read_suite(path: str | Path) -> tuple[Suite, list[TaskError]]:
    """Every task that validates, and every defect of every file (one TaskError each): schema
    errors, duplicate ids, twins that are not in the suite. Raises only when ``path`` has no task
    files at all."""
    tasks: list[Task] = []
    hashes: dict[str, str] = {}
    origin: dict[str, str] = {}
    positions: dict[str, int] = {}
    errors: list[TaskError] = []
    for f in suite_files(path):
        ts, digest, errs = _read_file(f)
        errors.extend(errs)
        hashes[str(f)] = digest  # "" for a file that could not be read (then errors name it)
        for i, t in ts:
            if t.id in origin:
                errors.append(TaskError(f, t.id, "id", f"duplicate task id (also in {origin[t.id]})", i))
                continue
            origin[t.id] = str(f)
            positions[t.id] = i
            tasks.append(t)
    ids = set(origin)
    for t in tasks:
        if t.safety.twin and t.safety.twin not in ids:
            errors.append(TaskError(origin[t.id], t.id, "safety.twin", f"no task {t.safety.twin!r} in this suite",
                                    positions[t.id]))
    suite = Suite(tasks=tasks, files=hashes, origin=origin, positions=positions)
    return suite, sorted_errors(errors, suite)


def sorted_errors(errors: list[TaskError], suite: Suite) -> list[TaskError]:
    """File order, a file's own errors first, then tasks in their order in the file (stable)."""
    files = {f: i for i, f in enumerate(suite.files)}

    def key(e: TaskError) -> tuple[int, int]:
        pos = e.position if e.position is not None else suite.positions.get(e.task or "", -1)
        return files.get(e.file, -1), pos

    return sorted(errors, key=key)


def load_suite(path: str | Path) -> Suite:
    """Load a task file or a folder of them (recursively, ``*.yaml``/``*.yml`` in name order);
    TaskErrors naming every defect of every file. ``harness.run.task_checks.load_checked_suite`` adds
    the checks that need the simulated phone."""
    suite, errors = read_suite(path)
    if errors:
        raise TaskErrors(errors)
    return suite
