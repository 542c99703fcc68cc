"""Writing a recorded task into a suite file: the task as YAML in the suite's own style (one flow
mapping per reference step), appended to the file, or put in place of the task with the same id
(``--replace``), leaving every other byte of the file (comments included) as it was. The new file
is validated as a suite file before it replaces the old one, atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.records import atomic_write_bytes
from harness.core.tasks import TaskError, load_file, parse_task

HEADER = "# Tasks recorded with `harness record` (docs/tasks.md, \"Recording a task\").\n"
_FLOW_KEYS = ("reference", "milestones")
_ORDER = ("id", "instruction", "language", "apps", "categories", "difficulty", "reference_steps", "answer",
          "setup", "reference", "milestones", "success", "key_components", "safety", "source")


def _flow(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, sort_keys=False, width=10_000)
    return text.removesuffix("\n...\n").strip()  # a lone scalar is dumped as a document


def task_yaml(task: dict[str, Any]) -> str:
    """The task as one YAML list item (``- id: ...``), reference steps and milestones one a line."""
    lines: list[str] = []
    keys = [k for k in _ORDER if k in task] + [k for k in task if k not in _ORDER]
    for n, key in enumerate(keys):
        value = task[key]
        lead = "- " if n == 0 else "  "
        if key in _FLOW_KEYS and isinstance(value, list):
            lines.append(f"{lead}{key}:" + (" []" if not value else ""))
            lines.extend(f"    - {_flow(item)}" for item in value)
        elif isinstance(value, (dict, list)) and value:
            if key == "setup":
                lines.append(f"{lead}{key}: {_flow(value)}")
                continue
            body = yaml.safe_dump(value, allow_unicode=True, sort_keys=False, width=120, default_flow_style=False)
            lines.append(f"{lead}{key}:")
            lines.extend("    " + line for line in body.rstrip("\n").split("\n"))
        else:
            lines.append(f"{lead}{key}: {_flow(value)}")
    return "\n".join(lines) + "\n"


def existing_ids(path: Path) -> set[str]:
    """The task ids already in ``path`` (none when it does not exist); TaskError if it is not a
    valid task file (nothing is written to a file we cannot read)."""
    if not path.exists():
        return set()
    tasks, _ = load_file(path)
    return {t.id for t in tasks}


def _item_ranges(text: str) -> tuple[list[tuple[str | None, int, int]], int | None, str | None]:
    """(id, start, end) of every task in the file's text, where a new task goes, and the list's
    indent; from the YAML node marks, so nothing else in the file moves."""
    node = yaml.compose(text)
    if node is None:
        return [], None, None
    seq = node
    if isinstance(node, yaml.MappingNode):
        seq = next((v for k, v in node.value if getattr(k, "value", None) == "tasks"), None)
    if not isinstance(seq, yaml.SequenceNode) or seq.flow_style:
        return [], None, None
    items = []
    for item in seq.value:
        tid = None
        if isinstance(item, yaml.MappingNode):
            tid = next((v.value for k, v in item.value if getattr(k, "value", None) == "id"
                        and isinstance(v, yaml.ScalarNode)), None)
        # a block item starts at its "- " (the node mark is after it) and ends at its last line: the
        # comments and blank lines the parser counts in it belong to what follows
        start = text.rfind("\n", 0, item.start_mark.index) + 1
        lines = text[start:item.end_mark.index].split("\n")
        while len(lines) > 1 and (not lines[-1].strip() or (lines[-1].lstrip().startswith("#") and
                                  len(lines[-1]) - len(lines[-1].lstrip()) <= item.start_mark.column)):
            lines.pop()
        items.append((tid, start, start + len("\n".join(lines))))
    indent = " " * seq.value[0].start_mark.column if seq.value else ""
    return items, seq.end_mark.index, indent[:-2] if len(indent) >= 2 else ""


def write_task(path: Path, task: dict[str, Any], replace: bool = False) -> str:
    """Append ``task`` to the suite file ``path`` (created when missing), or replace the task with
    its id when ``replace``; returns what was done. TaskError for a refused id or a file that would
    not load afterwards (the file is then left as it was)."""
    parse_task(task, path)  # a task that would not load is never written
    tid = task["id"]
    block = task_yaml(task)
    if not path.exists():
        new = HEADER + block
        done = "created"
    else:
        text = path.read_text(encoding="utf-8")
        if not text.strip() or yaml.safe_load(text) is None:
            new, done = text + ("" if text.endswith("\n") or not text else "\n") + block, "appended"
        else:
            items, end, indent = _item_ranges(text)
            if end is None:
                raise TaskError(path, tid, None, "the file's tasks are not a block list this command can add to; "
                                "add the task by hand (it is in the recording's tasks.yaml)")
            same = [r for r in items if r[0] == tid]
            if same and not replace:
                raise TaskError(path, tid, "id", "a task with this id is already in the file (--replace to replace it)")
            pad = "\n".join(indent + line if line else line for line in block.rstrip("\n").split("\n")) + "\n"
            if same:
                _, start, stop = same[0]
                after = text[stop:]
                new, done = text[:start] + pad + ("\n" + after.lstrip("\n") if after.strip() else ""), "replaced"
            else:
                at = end if end is not None else len(text)
                head = text[:at]
                sep = "" if head.endswith("\n\n") or not head else ("\n" if head.endswith("\n") else "\n\n")
                new, done = head + sep + pad + text[at:], "appended"
    tmp = path.with_name(f".{path.name}.check.yaml")
    try:
        tmp.write_text(new, encoding="utf-8")
        loaded, _ = load_file(tmp)
    finally:
        tmp.unlink(missing_ok=True)
    ids = [t.id for t in loaded]
    if ids.count(tid) != 1:
        raise TaskError(path, tid, None, "the file would not hold the task exactly once; left unchanged")
    atomic_write_bytes(path, new.encode("utf-8"))
    return done
