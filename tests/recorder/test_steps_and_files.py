"""The recorder's rules without a phone: gestures on given screens become steps (node targets,
navigation keys, typing read from the field, hints, deletions, Enter), and recorded tasks go into
suite files in their own style, appended or replaced, other text kept, duplicates refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.core import hierarchy
from harness.recorder.evdev import Touch
from harness.recorder.steps import Screen, StepBuilder
from harness.recorder.task_file import write_task
from harness.core.tasks import TaskError, load_file

IME = "com.android.inputmethod.latin"


def node(bounds, **kw) -> str:
    attrs = {"text": "", "resource-id": "", "class": "android.widget.TextView", "package": "com.app",
             "content-desc": "", "clickable": "false", "focused": "false", "scrollable": "false",
             "long-clickable": "false", "enabled": "true", **kw}
    x1, y1, x2, y2 = bounds
    return "<node " + " ".join(f'{k}="{v}"' for k, v in attrs.items()) + f' bounds="[{x1},{y1}][{x2},{y2}]" />'


def screen(*nodes: str, field_text: str | None = None, keyboard: bool = False, page: str = "app/main") -> Screen:
    parts = list(nodes)
    if field_text is not None:
        parts.append(node((0, 300, 1080, 400), **{"class": "android.widget.EditText", "resource-id": "com.app:id/name",
                                                  "text": field_text, "focused": "true", "clickable": "true"}))
    if keyboard:
        parts.append(node((0, 1600, 1080, 2300), package=IME, **{"class": "android.inputmethodservice.KeyboardView"}))
        for i, key in enumerate(["a", "b", "Delete", "Enter"]):
            parts.append(node((i * 200, 1700, i * 200 + 200, 1800), package=IME, clickable="true", **{"content-desc": key}))
    parts.append(node((0, 2300, 360, 2400), package="com.android.systemui", clickable="true",
                      **{"resource-id": "com.android.systemui:id/back", "content-desc": "Back"}))
    xml = "<hierarchy>" + "".join(parts) + "</hierarchy>"
    return Screen(b"\x89PNG", xml, hierarchy.parse(xml), page, None)


def tap(x: int, y: int, t: float = 0.0, ms: int = 50) -> Touch:
    return Touch(t, t + ms / 1000, [(x, y)])


ROWS = [node((0, 500 + 200 * i, 1080, 700 + 200 * i), clickable="true", **{"resource-id": "com.app:id/row"})
        .replace(" />", ">") + node((40, 520 + 200 * i, 600, 680 + 200 * i), text=name) + "</node>"
        for i, name in enumerate(["Bob Chen", "Amy"])]


def builder() -> StepBuilder:
    return StepBuilder({IME}, density=420, size=(1080, 2400))


def test_taps_are_aimed_at_nodes_and_nav_buttons_are_keys():
    b = builder()
    b.start(screen(*ROWS))
    b.gesture(tap(900, 800))          # on the second row, right of its text: the row is named by its text
    b.capture(screen(*ROWS, page="app/detail"))
    b.gesture(tap(100, 2350))         # the navigation bar's Back
    b.gesture(Touch(1.0, 1.6, [(540, 600)]))  # held 600 ms: a long press on the first row
    b.gesture(tap(1070, 100))         # nothing named there: kept as pixels
    refs = [s.ref for s in b.steps]
    assert refs[0] == {"type": "click", "target": {"text": "Amy"}}
    assert refs[1] == {"type": "key", "key": "back"}
    assert refs[2] == {"type": "long_press", "target": {"text": "Bob Chen"}, "duration_ms": 600}
    assert refs[3] == {"type": "click", "x": 1070, "y": 100} and any("replays only at 1080x2400" in w for w in b.steps[3].warnings)


def test_typing_is_read_from_the_field_hint_delete_and_enter():
    b = builder()
    b.start(screen(field_text="Name", keyboard=True))   # empty field showing its hint
    b.gesture(tap(100, 1750))                             # 'a'
    b.gesture(tap(300, 1750))                             # 'b'
    b.capture(screen(field_text="Amir Khan", keyboard=True))
    b.gesture(tap(700, 1750))                             # Enter: ends typing, submits
    b.capture(screen(field_text="1", keyboard=True))
    b.gesture(tap(500, 1750))                             # Delete on "1"
    b.gesture(tap(100, 1750))
    b.capture(screen(field_text="50", keyboard=True))
    b.gesture(tap(100, 2350))                             # Back ends typing
    b.capture(screen(field_text="50"))
    assert [s.ref for s in b.steps] == [
        {"type": "type", "text": "Amir Khan", "submit": True},   # the hint "Name" was not text to delete
        {"type": "key", "key": "delete"}, {"type": "type", "text": "50"},
        {"type": "key", "key": "back"}]
    assert b.steps[0].gesture["keys"] == 3 and b.steps[2].gesture["text_before"] == "1"


A, B, DELETE = (100, 1750), (300, 1750), (500, 1750)


def typed_in(initial: str, *keys_then_looks) -> list[dict]:
    """Typing from a field showing ``initial``: a tuple of key positions is one batch of taps
    (the keys the recorder read before it looked again), a string the field seen after them."""
    b = builder()
    b.start(screen(field_text=initial, keyboard=True))
    for item in keys_then_looks:
        if isinstance(item, str):
            b.glimpse(screen(field_text=item, keyboard=True))
        else:
            for xy in item:
                b.gesture(tap(*xy))
    b.gesture(tap(100, 2350))  # Back ends typing
    return [s.ref for s in b.steps][:-1]


def test_corrections_while_typing_over_a_short_hint_delete_nothing_of_it():
    # the hint "To" is two characters; two corrections are two Delete taps, none of which could
    # reach it (the field showed typed text each time)
    assert typed_in("To", (A,), "a", (B,), "ab", (DELETE,), "a", (B,), "ab", (DELETE,), "a", (B,), "ab") == [
        {"type": "type", "text": "ab"}]
    # letters composing a syllable leave the field as it was (still the hint): the Delete taps
    # after them remove letters of the syllable, not the hint's characters
    assert typed_in("To", (A, A), "To", (DELETE, DELETE), "To", (A, B), "ab") == [{"type": "type", "text": "ab"}]
    # keys read in one batch from a look at the hint: the Deletes follow letters not yet seen to land
    assert typed_in("To", (A, B, DELETE, DELETE, A, B), "ab") == [{"type": "type", "text": "ab"}]


def test_deleting_earlier_text_is_still_recorded_as_deletes():
    delete = {"type": "key", "key": "delete"}
    # one Delete at a time, each look showing the field shorter
    assert typed_in("Milk", (DELETE,), "Mil", (DELETE,), "Mi", (A,), "Mia") == [delete, delete, {"type": "type", "text": "a"}]
    # both Deletes read before the recorder looked again
    assert typed_in("Milk", (DELETE, DELETE), "Mi") == [delete, delete]
    # a letter typed and taken back, then one character of the earlier text
    assert typed_in("Milk", (A,), "Milka", (DELETE,), "Milk", (DELETE,), "Mil") == [delete]
    # a letter and the Deletes faster than any look: part of the earlier text stayed, so it was text
    assert typed_in("Milk", (A, DELETE, DELETE), "Mil") == [delete]
    # the whole earlier text deleted, then new text
    assert typed_in("ab", (DELETE,), "a", (DELETE,), "Name", (B,), "b") == [delete, delete, {"type": "type", "text": "b"}]


def test_enter_alone_is_a_key_and_taps_that_change_nothing_are_not_steps():
    b = builder()
    b.start(screen(field_text="Milk", keyboard=True))
    b.gesture(tap(700, 1750))  # Enter with nothing typed
    b.capture(screen(field_text="Milk\n", keyboard=True))
    b.gesture(tap(100, 1650))  # on the keyboard, between keys
    b.finish(screen(field_text="Milk\n", keyboard=True))
    assert [s.ref for s in b.steps] == [{"type": "key", "key": "enter"}]
    assert "changed no text" in b.warnings[-1]


def test_a_key_held_past_the_long_press_timeout_is_still_a_key_of_the_typing():
    # a tap that reached the phone's kernel 450 ms after its touch began (a loaded machine, or a
    # slow finger) is a long press by Android's rule; on the keyboard it is one more key: the
    # amount is typed as one step, not split around a long press on a key's pixels
    b = builder()
    b.start(screen(field_text="Amount", keyboard=True))
    b.gesture(tap(100, 1750, t=0.0))
    b.glimpse(screen(field_text="2480.", keyboard=True))
    b.gesture(tap(300, 1750, t=1.0, ms=450))
    b.gesture(tap(100, 1750, t=2.0))
    b.glimpse(screen(field_text="2480.50", keyboard=True))
    b.gesture(tap(100, 2350, t=3.0))  # Back ends typing
    assert [s.ref for s in b.steps] == [{"type": "type", "text": "2480.50"}, {"type": "key", "key": "back"}]
    assert b.steps[0].gesture["keys"] == 3


TASK = {"id": "rec_one", "instruction": "Add Amir", "language": "en", "reference_steps": 1,
        "reference": [{"type": "click", "target": {"text": "Contacts"}}, {"type": "finish", "status": "complete"}],
        "milestones": [{"description": "Contacts is open", "check": {"path": "screen.page", "eq": "contacts/home"},
                        "reference_step": 1}]}


def test_tasks_are_appended_in_the_files_style_and_replaced_in_place(tmp_path: Path):
    f = tmp_path / "mine.yaml"
    assert write_task(f, TASK) == "created"
    text = f.read_text(encoding="utf-8")
    assert "    - {type: click, target: {text: Contacts}}" in text
    f.write_text("# my tasks\n" + text + "# trailing note\n", encoding="utf-8")
    assert write_task(f, {**TASK, "id": "rec_two"}) == "appended"
    with pytest.raises(TaskError, match="already in the file"):
        write_task(f, TASK)
    assert write_task(f, {**TASK, "instruction": "Add Amir Khan"}, replace=True) == "replaced"
    text = f.read_text(encoding="utf-8")
    assert text.startswith("# my tasks\n") and "# trailing note" in text
    assert [(t.id, t.instruction) for t in load_file(f)[0]] == [("rec_one", "Add Amir Khan"), ("rec_two", "Add Amir")]
    nested = tmp_path / "nested.yaml"
    nested.write_text("tasks:\n  - id: a1\n    instruction: x\n    reference_steps: 1\n", encoding="utf-8")
    write_task(nested, TASK)
    assert [t.id for t in load_file(nested)[0]] == ["a1", "rec_one"]
    assert yaml.safe_load(nested.read_text(encoding="utf-8"))["tasks"][1]["milestones"][0]["reference_step"] == 1
    with pytest.raises(TaskError):  # a task that would not load is never written
        write_task(f, {**TASK, "id": "rec_bad", "reference_steps": 0})
    assert "rec_bad" not in f.read_text(encoding="utf-8")
