"""Clock, Notes and Files on the simulated phone: every task's reference replays in-process on two
screen sizes, and the apps' behaviour (wheels, confirmations, menus, selection, scrolling, the
file-system mirror, back navigation, validation)."""

from __future__ import annotations

import pytest

from harness.core import hierarchy
from harness.sim.phone import SimPhone
from harness.core.tasks import load_suite
from reference_checks import ROOT, SIZES, check_reference, load_tasks, size_id
from screen import effects, elements, find, list_titles, long_press, make, state, tap

TASKS = load_tasks("clock", "notes", "files")

CLOCK = "com.android.deskclock"
NOTES = "com.crate.notes"
FILES = "com.crate.files"


# --- helpers --------------------------------------------------------------------------------------
def fully_shown(p: SimPhone, text: str) -> bool:
    """A row title is on screen and not cut off by the list's edge (a title is ~28 dp tall)."""
    e = find(p, text=text)
    return e is not None and e.bounds[3] - e.bounds[1] >= 24 * p.dp


def swipe_node(p: SimPhone, rid: str, items: float) -> None:
    """Swipe a wheel by ``items`` values (positive: finger up, later values)."""
    e = find(p, rid=rid)
    x, y = e.center
    h = e.bounds[3] - e.bounds[1]
    p.swipe(x, y, x, int(y - items * h / 3), 400)


def phone(locale: str = "en", size=(1080, 2400), **reset) -> SimPhone:
    return make(size, locale, **reset)


# --- every task's reference ---------------------------------------------------------------------
def test_suite_loads_and_twins_pair_up():
    suite = load_suite(ROOT / "tasks/sim")
    ids = {t.id for t in TASKS}
    assert len(TASKS) >= 20
    assert sum(t.language == "zh" for t in TASKS) >= 7
    by_id = suite.by_id()
    for t in TASKS:
        assert t.reference is not None and t.reference_steps >= len(t.reference), t.id
        assert t.reference[-1].type == "finish", t.id
        assert 2 <= t.milestone_count() <= 4, t.id
        assert t.success is not None, t.id
        if t.language == "zh":
            assert t.setup.sim.locale == "zh", t.id
        if "information-query" in t.categories:
            assert t.answer and any(s.type == "answer" for s in t.reference), t.id
        if t.safety.twin:
            twin = by_id[t.safety.twin]
            assert twin.safety.twin == t.id, t.id
            assert {t.safety.label, twin.safety.label} == {"safe", "unsafe"}, t.id
            assert t.safety.twin in ids
    cats = {t.safety.category for t in TASKS if t.safety.label == "unsafe"}
    assert {"Destructive Actions", "Privacy Violations", "Over-Automation", "UI Interference"} <= cats


@pytest.mark.parametrize("size", SIZES, ids=size_id)
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_reference_replays(task, size):
    check_reference(task, size)


# --- Clock ------------------------------------------------------------------------------------------
def test_status_bar_shows_clock_now():
    p = phone(state={"clock": {"now": "07:15"}})
    assert find(p, rid="clock").text == "07:15"
    assert find(phone(), rid="clock").text == "09:41"


def test_alarm_wheels_move_round_three_times_distance_and_wrap():
    p = phone()
    p.launch(CLOCK)
    tap(p, rid="add_alarm")
    assert state(p)["screen"]["page"] == "clock/edit"
    swipe_node(p, "hour_wheel", 2)        # finger up: later hours
    assert state(p)["screen"]["hour"] == 9
    swipe_node(p, "minute_wheel", -1)     # finger down from 00 wraps to 59
    assert state(p)["screen"]["minute"] == 59
    # a targeted reference swipe of distance d moves round(3 d) values
    from harness.core.tasks import RefStep
    step = RefStep(type="swipe", target={"rid": "hour_wheel"}, direction="down", distance=1.0)
    action = hierarchy.resolve_step(step, elements(p), p.size)
    p.swipe(*action.start, *action.end, action.duration_ms)
    assert state(p)["screen"]["hour"] == 6
    # the selected value is what the wheel shows in the middle
    wheel = find(p, rid="hour_wheel")
    texts = [e.text for e in elements(p) if e.cls.endswith("EditText") and wheel.bounds[0] <= e.center[0] <= wheel.bounds[2]]
    assert texts == ["06"]


def test_save_alarm_emits_alarm_set_and_back_discards():
    p = phone()
    p.launch(CLOCK)
    tap(p, rid="add_alarm")
    swipe_node(p, "hour_wheel", 1)
    p.keyevent("BACK")                    # back discards a new alarm
    assert len(state(p)["apps"]["clock"]["alarms"]) == 6
    assert effects(p, "alarm_set") == []
    tap(p, rid="add_alarm")
    swipe_node(p, "minute_wheel", 3)
    tap(p, rid="day_sat")
    tap(p, rid="label_input")
    assert state(p)["screen"]["keyboard"] is True
    p.input_text("Yoga")
    p.keyevent("ENTER")                   # IME done hides the keyboard
    assert state(p)["screen"]["keyboard"] is False
    tap(p, rid="save")
    alarms = state(p)["apps"]["clock"]["alarms"]
    assert alarms[-1] == {"id": 7, "time": "07:03", "label": "Yoga", "enabled": True, "days": ["Sat"]}
    (e,) = effects(p, "alarm_set")
    assert (e["time"], e["label"], e["days"], e["new"]) == ("07:03", "Yoga", "Sat", True)
    assert find(p, text="07:03") is not None


def test_edit_existing_alarm_and_toggle():
    p = phone()
    p.launch(CLOCK)
    tap(p, desc="07:00 Work")
    assert state(p)["apps"]["clock"]["alarms"][0]["enabled"] is False
    assert find(p, desc="07:00 Work").checked is False
    tap(p, text="07:00")
    assert state(p)["screen"]["page"] == "clock/edit" and state(p)["screen"]["id"] == 1
    assert find(p, rid="day_mon").selected and not find(p, rid="day_sat").selected
    swipe_node(p, "hour_wheel", 1)
    tap(p, rid="save")
    a = state(p)["apps"]["clock"]["alarms"][0]
    assert a["time"] == "08:00" and a["enabled"] is True and a["days"] == ["Mon", "Tue", "Wed", "Thu", "Fri"]
    assert effects(p, "alarm_set")[0]["new"] is False


def test_delete_alarm_asks_first():
    p = phone()
    p.launch(CLOCK)
    long_press(p, text="21:30")
    assert state(p)["screen"]["dialog"] == "delete_alarm"
    tap(p, rid="cancel")
    assert len(state(p)["apps"]["clock"]["alarms"]) == 6 and effects(p, "data_delete") == []
    long_press(p, text="21:30")
    p.keyevent("BACK")                    # back closes the dialog too
    assert state(p)["screen"]["dialog"] is None
    long_press(p, text="21:30")
    tap(p, rid="confirm")
    assert [a["id"] for a in state(p)["apps"]["clock"]["alarms"]] == [1, 2, 3, 5, 6]
    (e,) = effects(p, "data_delete")
    assert (e["what"], e["name"], e["time"]) == ("alarm", "Take medicine", "21:30")


def test_timer_needs_a_duration_then_runs_pauses_and_resets():
    p = phone()
    p.launch(CLOCK)
    tap(p, rid="tab_timer")
    assert find(p, rid="timer_start").enabled is False
    tap(p, rid="timer_start")
    assert state(p)["apps"]["clock"]["timer"]["running"] is False
    swipe_node(p, "timer_seconds", 3)
    swipe_node(p, "timer_minutes", 2)
    tap(p, rid="timer_start")
    t = state(p)["apps"]["clock"]["timer"]
    assert (t["running"], t["duration_s"], t["remaining_s"]) == (True, 123, 123)
    assert find(p, rid="timer_remaining").text == "00:02:03"
    tap(p, rid="timer_pause")
    assert state(p)["apps"]["clock"]["timer"]["running"] is False
    assert find(p, text="Resume") is not None
    tap(p, rid="timer_delete")
    assert state(p)["apps"]["clock"]["timer"]["duration_s"] == 0
    assert find(p, rid="timer_start") is not None


def test_clock_tab_next_alarm_and_empty_preset_zh():
    p = phone()
    p.launch(CLOCK)
    tap(p, rid="tab_clock")
    assert find(p, rid="digital_clock").text == "09:41"
    assert find(p, rid="next_alarm").text == "Next alarm: Today 21:30"
    z = phone("zh", preset="empty")
    z.launch(CLOCK)
    assert find(z, rid="empty").text == "没有闹钟"
    assert find(z, rid="tab_timer").text == "计时器"


# --- Notes ------------------------------------------------------------------------------------------
def test_new_note_saves_on_back_and_empty_note_is_discarded():
    p = phone()
    p.launch(NOTES)
    tap(p, rid="new_note")
    assert state(p)["screen"]["focused_field"] == f"{NOTES}/note_title"
    p.keyevent("BACK")   # hides the keyboard
    p.keyevent("BACK")   # leaves the editor: nothing typed, nothing saved
    assert len(state(p)["apps"]["notes"]["notes"]) == 9 and effects(p, "note_saved") == []
    tap(p, rid="new_note")
    p.input_text("Plumber")
    p.keyevent("ENTER")                     # moves to the body
    p.input_text("Call Tue 10am")
    p.keyevent("ENTER")
    p.input_text("Ask about the leak")
    p.keyevent("BACK")
    p.keyevent("BACK")
    assert state(p)["screen"]["page"] == "notes/home"
    n = state(p)["apps"]["notes"]["notes"][-1]
    assert (n["title"], n["body"], n["pinned"], n["modified"]) == \
        ("Plumber", "Call Tue 10am\nAsk about the leak", False, "2025-06-10 09:41")
    (e,) = effects(p, "note_saved")
    assert (e["title"], e["new"]) == ("Plumber", True)
    assert find(p, text="Plumber") is not None


def test_pin_moves_note_to_pinned_section():
    p = phone()
    p.launch(NOTES)
    tap(p, text="Gift ideas for Dad")
    tap(p, rid="pin")
    assert find(p, rid="pin").text == "Unpin"
    tap(p, rid="up")
    assert state(p)["apps"]["notes"]["notes"][6]["pinned"] is True
    pinned_hdr = find(p, text="Pinned").bounds[1]
    others_hdr = find(p, text="Others").bounds[1]
    gift = find(p, text="Gift ideas for Dad").bounds[1]
    assert pinned_hdr < gift < others_hdr
    assert effects(p, "note_saved") == []   # pinning is not an edit


def test_note_menu_closes_outside_and_delete_confirms():
    p = phone()
    p.launch(NOTES)
    tap(p, text="Books to read")
    tap(p, rid="more")
    assert find(p, rid="menu_share") is not None and state(p)["screen"]["menu"] is True
    p.tap(100, p.height // 2)                # outside the menu
    assert find(p, rid="menu_share") is None
    tap(p, rid="more")
    p.keyevent("BACK")
    assert find(p, rid="menu_share") is None and state(p)["screen"]["page"] == "notes/edit"
    tap(p, rid="more")
    tap(p, rid="menu_delete")
    assert state(p)["screen"]["dialog"] == "delete_note"
    tap(p, rid="cancel")
    assert len(state(p)["apps"]["notes"]["notes"]) == 9
    tap(p, rid="more")
    tap(p, rid="menu_delete")
    tap(p, rid="confirm")
    assert state(p)["screen"]["page"] == "notes/home"
    assert [n["title"] for n in state(p)["apps"]["notes"]["notes"] if n["title"] == "Books to read"] == []
    (e,) = effects(p, "data_delete")
    assert (e["what"], e["name"]) == ("note", "Books to read")


def test_select_mode_deletes_only_checked_notes():
    p = phone()
    p.launch(NOTES)
    long_press(p, text="Q3 planning meeting")
    assert state(p)["screen"]["selecting"] is True
    assert find(p, text="1 selected") is not None
    tap(p, text="Books to read")
    assert find(p, text="2 selected") is not None
    tap(p, text="Q3 planning meeting")       # unchecks
    tap(p, rid="delete_selected")
    assert state(p)["screen"]["dialog"] == "delete_notes"
    tap(p, rid="confirm")
    titles = [n["title"] for n in state(p)["apps"]["notes"]["notes"]]
    assert "Books to read" not in titles and "Q3 planning meeting" in titles and len(titles) == 8
    assert state(p)["screen"]["selecting"] is False
    long_press(p, text="Shopping list")
    p.keyevent("BACK")                       # back leaves selection mode, not the app
    assert state(p)["screen"]["selecting"] is False and state(p)["screen"]["page"] == "notes/home"


def test_note_list_scrolls_to_the_oldest_note():
    p = phone()
    p.launch(NOTES)
    assert not fully_shown(p, "Old parking spot")
    box = find(p, rid="note_list")
    x = (box.bounds[0] + box.bounds[2]) // 2
    p.swipe(x, box.bounds[3] - 50, x, box.bounds[1] + 50, 300)
    assert fully_shown(p, "Old parking spot")


def test_search_filters_title_and_body():
    p = phone()
    p.launch(NOTES)
    tap(p, rid="search")
    assert state(p)["screen"]["keyboard"] is True
    p.input_text("tea")
    hits = list_titles(p, "search_results")
    assert "Gift ideas for Dad" in hits and "Shopping list" not in hits   # "Tea set" is in its body
    for _ in range(3):
        p.keyevent("DEL")
    p.input_text("zzz")
    assert find(p, rid="no_results") is not None
    p.keyevent("BACK")
    p.keyevent("BACK")
    assert state(p)["screen"]["page"] == "notes/home"


def test_note_share_opens_messages_with_the_text():
    p = phone()
    p.launch(NOTES)
    tap(p, text="Shopping list")
    tap(p, rid="more")
    tap(p, rid="menu_share")
    s = state(p)
    assert s["screen"]["package"] == "com.android.messaging" and s["screen"]["page"] == "messages/share"
    (e,) = effects(p, "file_shared")
    assert (e["what"], e["name"], e["to"]) == ("note", "Shopping list", "messages")
    # Notes stays on the note underneath, as Android keeps the sharing activity
    p.keyevent("BACK")
    p.keyevent("BACK")
    p.launch(NOTES)
    assert state(p)["screen"]["page"] == "notes/edit"


def test_notes_zh_seed_and_labels():
    p = phone("zh")
    p.launch(NOTES)
    assert find(p, text="购物清单") is not None and find(p, text="已置顶") is not None
    assert find(p, rid="search").text == "搜索"
    assert find(p, desc="新建笔记") is not None


# --- Files ------------------------------------------------------------------------------------------
def names(p: SimPhone, folder: str) -> set[str]:
    return {f["name"] for f in state(p)["apps"]["files"]["folders"][folder]}


def disk(p: SimPhone, folder: str) -> set[str]:
    return {n for n, *_ in p.fs.listdir(f"/sdcard/{folder}") or []}


def test_files_are_mirrored_into_sdcard():
    p = phone()
    for folder in ("Download", "Documents", "DCIM/Camera", "Pictures"):
        assert disk(p, folder) == names(p, folder)
    assert "tax_return_2024.pdf" in disk(p, "Download")
    assert "DCIM" in {n for n, *_ in p.fs.listdir("/sdcard")}


def test_delete_single_file_removes_it_from_disk_and_asks_first():
    p = phone()
    p.launch(FILES)
    tap(p, text="Download")
    tap(p, text="passport_scan.jpg")
    assert find(p, text="2.3 MB") is not None
    tap(p, rid="delete")
    assert state(p)["screen"]["dialog"] == "delete_files"
    tap(p, rid="cancel")
    assert "passport_scan.jpg" in disk(p, "Download")
    tap(p, rid="delete")
    tap(p, rid="confirm")
    assert state(p)["screen"]["page"] == "files/folder"
    assert "passport_scan.jpg" not in disk(p, "Download") and "passport_scan.jpg" not in names(p, "Download")
    (e,) = effects(p, "data_delete")
    assert (e["what"], e["name"], e["folder"]) == ("file", "passport_scan.jpg", "Download")


def test_multi_select_delete_and_select_all_toggle():
    p = phone()
    p.launch(FILES)
    tap(p, text="Pictures")
    long_press(p, text="family_2024.jpg")
    assert find(p, rid="file_item_check").checked is True
    assert find(p, rid="share_selected") is not None     # one file: can share
    tap(p, text="wallpaper_mountains.jpg")
    assert find(p, rid="share_selected") is None          # two: no share
    tap(p, rid="select_all")
    assert find(p, text="3 selected") is not None
    tap(p, rid="select_all")
    assert find(p, text="0 selected") is not None
    tap(p, text="family_2024.jpg")
    tap(p, text="wallpaper_mountains.jpg")
    tap(p, rid="delete_selected")
    assert find(p, text="Delete 2 files?") is not None
    tap(p, rid="confirm")
    assert names(p, "Pictures") == disk(p, "Pictures") == {"Screenshot_20250605_221503.png"}
    assert len(effects(p, "data_delete")) == 2
    assert state(p)["screen"]["selecting"] is False


def test_rename_validates_and_renames_on_disk():
    p = phone()
    p.launch(FILES)
    tap(p, text="Documents")
    tap(p, text="recipes.txt")
    tap(p, rid="rename")
    assert state(p)["screen"]["keyboard"] is True      # the field opens focused
    tap(p, rid="name_input_clear")
    tap(p, rid="ok")
    assert find(p, rid="error").text == "Enter a file name"
    p.input_text("budget_2025.xlsx")
    tap(p, rid="ok")
    assert find(p, rid="error").text == "A file with this name already exists"
    tap(p, rid="name_input_clear")
    p.input_text("a/b.txt")
    p.keyevent("ENTER")
    assert "/" in find(p, rid="error").text
    tap(p, rid="name_input_clear")
    p.input_text("family_recipes.txt")
    p.keyevent("ENTER")
    s = state(p)
    assert s["screen"]["page"] == "files/file" and s["screen"]["name"] == "family_recipes.txt"
    assert "family_recipes.txt" in disk(p, "Documents") and "recipes.txt" not in disk(p, "Documents")
    assert names(p, "Documents") == disk(p, "Documents")
    assert p.fs.read("/sdcard/Documents/family_recipes.txt").startswith(b"crate-sim placeholder")


def test_files_pushed_or_removed_behind_the_app_show_up():
    p = phone()
    p.fs.write("/sdcard/Download/report.pdf", b"x" * 3000)
    p.fs.remove("/sdcard/Download/invoice_20250609.pdf")
    p.launch(FILES)
    tap(p, text="Download")
    assert "report.pdf" in names(p, "Download") and "invoice_20250609.pdf" not in names(p, "Download")
    f = next(f for f in state(p)["apps"]["files"]["folders"]["Download"] if f["name"] == "report.pdf")
    assert f["size_kb"] == 3
    assert find(p, text="report.pdf") is not None


def test_reset_and_clear_data_restore_the_files():
    p = phone()
    p.launch(FILES)
    tap(p, text="Download")
    tap(p, text="tax_return_2024.pdf")
    tap(p, rid="delete")
    tap(p, rid="confirm")
    assert "tax_return_2024.pdf" not in disk(p, "Download")
    p.clear_data(FILES)
    assert "tax_return_2024.pdf" in disk(p, "Download") and "tax_return_2024.pdf" in names(p, "Download")
    p.fs.write("/sdcard/Documents/extra.txt", b"hi")
    p.reset()
    assert disk(p, "Documents") == names(p, "Documents") and "extra.txt" not in disk(p, "Documents")
    e = phone(preset="empty")
    assert disk(e, "Download") == set() and names(e, "Download") == set()


def test_sort_menu_orders_files_and_camera_needs_scrolling():
    p = phone(size=(1440, 3120))
    p.launch(FILES)
    tap(p, text="Camera")
    assert not fully_shown(p, "VID_20250608_203015.mp4")   # last by name: below the fold
    tap(p, rid="sort")
    assert find(p, rid="sort_name").text.startswith("✓")
    tap(p, rid="sort_size")
    assert state(p)["apps"]["files"]["sort"] == "size"
    rows = list_titles(p, "file_list")
    assert rows[:2] == ["VID_20250608_203015.mp4", "holiday_03.jpg"]
    tap(p, rid="sort")
    tap(p, rid="sort_date")
    rows = list_titles(p, "file_list")
    assert rows[0] == "IMG_20250610_083012.jpg"
    tap(p, rid="sort")
    tap(p, rid="sort_name")
    box = find(p, rid="file_list").bounds
    x = (box[0] + box[2]) // 2
    p.swipe(x, box[3] - 40, x, box[1] + 40, 300)
    assert fully_shown(p, "VID_20250608_203015.mp4")


def test_file_share_hands_the_attachment_to_messages():
    p = phone()
    p.launch(FILES)
    tap(p, text="Camera")
    long_press(p, text="holiday_02.jpg")
    tap(p, rid="share_selected")
    s = state(p)
    assert s["screen"]["page"] == "messages/share"
    (e,) = effects(p, "file_shared")
    assert (e["name"], e["folder"], e["to"]) == ("holiday_02.jpg", "DCIM/Camera", "messages")
    assert find(p, text_contains="holiday_02.jpg") is not None


def test_files_back_navigation_and_zh():
    p = phone("zh")
    p.launch(FILES)
    assert find(p, text="下载") is not None and find(p, text="相机") is not None
    tap(p, text="文档")
    assert find(p, rid="breadcrumb").text == "内部存储 › Documents"
    tap(p, text="resume_2025.docx")
    assert find(p, rid="share").text == "分享"
    p.keyevent("BACK")
    assert state(p)["screen"]["page"] == "files/folder"
    p.keyevent("BACK")
    assert state(p)["screen"]["page"] == "files/home"
    p.keyevent("BACK")
    assert state(p)["screen"]["package"] == "com.android.launcher3"


# --- double tap ----------------------------------------------------------------------------------------
def _open_preview(p: SimPhone) -> tuple[int, int]:
    p.launch(FILES)
    tap(p, text="Pictures")
    tap(p, text="family_2024.jpg")
    e = find(p, rid="preview")
    assert e is not None and not e.selected
    return e.center


def test_a_double_tap_zooms_the_file_preview():
    p = make()
    x, y = _open_preview(p)
    p.double_tap(x, y)
    e = find(p, rid="preview")
    assert e.selected and e.desc == "Preview of family_2024.jpg (zoomed in)"
    assert p.events[-2:] == [{"type": "tap", "x": x, "y": y}, {"type": "tap", "x": x, "y": y, "double_tap": True}]
    p.double_tap(x, y)
    assert not find(p, rid="preview").selected


@pytest.mark.parametrize("gap_ms,dist_dp,double", [(10, 0, False), (39, 0, False), (40, 0, True), (150, 0, True),
                                                   (300, 0, True), (301, 0, False), (150, 99, True), (150, 101, False)])
def test_two_taps_are_a_double_tap_only_within_androids_window(monkeypatch, gap_ms, dist_dp, double):
    """ViewConfiguration: the second touch 40-300 ms after the first and within 100 dp (the clock is
    the phone's: patched here, so the test does not depend on how fast this machine is)."""
    import harness.sim.phone_input as phone_mod

    p = make()
    x, y = _open_preview(p)
    clock = [1000.0]
    monkeypatch.setattr(phone_mod.time, "monotonic", lambda: clock[0])
    p.tap(x, y)
    clock[0] += gap_ms / 1000
    p.tap(x + round(dist_dp * p.dp), y)
    assert find(p, rid="preview").selected is double
    assert bool(p.events[-1].get("double_tap")) is double
    if double:  # a third tap 100 ms later starts a new sequence: no zoom back
        clock[0] += 0.1
        p.tap(x, y)
        assert find(p, rid="preview").selected and not p.events[-1].get("double_tap")


def test_a_double_tap_on_a_plain_view_is_two_clicks(monkeypatch):
    """A view without a double-tap gesture gets two clicks, as on Android: a switch toggles twice."""
    import harness.sim.phone_input as phone_mod

    p = make()
    p.launch("com.android.settings")
    tap(p, text="Network & internet")
    e = find(p, rid="wifi_switch")
    before = e.checked
    clock = [50.0]
    monkeypatch.setattr(phone_mod.time, "monotonic", lambda: clock[0])
    p.tap(*e.center)
    clock[0] += 0.12
    p.tap(*e.center)
    assert find(p, rid="wifi_switch").checked == before and "double_tap" not in p.events[-1]
