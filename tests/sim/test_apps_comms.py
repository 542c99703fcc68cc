"""Contacts and Messages on the simulated phone: every task's reference replays in-process on two
screen sizes, and the apps' behaviour (validation, confirmations, scrolling, back, sharing)."""

from __future__ import annotations

import pytest

from harness.sim.phone import SimPhone
from harness.core.tasks import load_suite
from reference_checks import ROOT, SIZES, check_reference, load_tasks, size_id
from screen import find, list_titles, long_press, make, state, tap

TASKS = load_tasks("contacts", "messages", "comms_cross")

CONTACTS = "com.android.contacts"
MESSAGES = "com.android.messaging"


# --- helpers --------------------------------------------------------------------------------------
def contact(p: SimPhone, name: str):
    return next((c for c in state(p)["apps"]["contacts"]["contacts"] if c["name"] == name), None)


def thread(p: SimPhone, number: str):
    return next((t for t in state(p)["apps"]["messages"]["threads"] if t["number"] == number), None)


@pytest.fixture
def phone() -> SimPhone:
    return make()


# --- task suite -----------------------------------------------------------------------------------
def test_task_files_load_and_cover_the_brief():
    load_suite(ROOT / "tasks/sim")
    ids = [t.id for t in TASKS]
    assert len(ids) == len(set(ids)) and len(ids) >= 22
    assert all(t.id.startswith(("contacts_", "messages_", "comms_")) for t in TASKS)
    assert sum(t.language == "zh" for t in TASKS) >= 8
    assert all(t.setup.sim.locale == "zh" for t in TASKS if t.language == "zh")
    assert any(t.reference_steps >= 20 for t in TASKS)
    assert any(t.reference_steps == 2 for t in TASKS)
    cats = {c for t in TASKS for c in t.categories}
    assert {"cross-app", "multi-constraint", "multi-goal", "information-query"} <= cats
    unsafe = {t.safety.category for t in TASKS if t.safety.label == "unsafe"}
    assert {"Privacy Violations", "Prompt Injection", "Destructive Actions", "Harmful Content",
            "Security Evasion"} <= unsafe
    by_id = {t.id: t for t in TASKS}
    for t in TASKS:
        if t.safety.twin:
            twin = by_id[t.safety.twin]
            assert twin.safety.twin == t.id and twin.safety.label != t.safety.label
            assert t.safety.unsafe_effects, f"{t.id} names no unsafe effects"


@pytest.mark.parametrize("size", SIZES, ids=size_id)
@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_reference_replays(task, size):
    check_reference(task, size)


# --- Contacts -------------------------------------------------------------------------------------
def test_contacts_list_is_alphabetical_with_favourites_and_scrolls(phone):
    phone.launch(CONTACTS)
    assert state(phone)["screen"]["page"] == "contacts/home"
    rows = list_titles(phone, "contact_list")
    assert rows[:4] == ["Alex Morgan", "Emma Wilson", "Lena Fischer", "Mom"]  # favourites first
    assert find(phone, text="Yuki Tanaka") is None  # far down: needs scrolling
    lst = find(phone, rid="contact_list")
    assert lst.scrollable
    for _ in range(10):
        x, y = lst.center
        phone.swipe(x, y + 300, x, y - 300)
        if find(phone, text="Yuki Tanaka"):
            break
    assert find(phone, text="Yuki Tanaka") is not None
    assert find(phone, text="Alex Morgan") is None  # scrolled out of view and out of the tree
    names = [c["name"] for c in phone.by_key["contacts"].sorted_contacts()]
    assert names.index("Aisha Khan") < names.index("Ben Carter") < names.index("Tom Becker") < names.index("王芳")


def test_contacts_search_and_label_filter(phone):
    phone.launch(CONTACTS)
    tap(phone, rid="search")
    assert state(phone)["screen"]["keyboard"] is True
    phone.input_text("555-015")
    titles = set(list_titles(phone, "contact_list"))
    assert titles == {"Carlos Mendes", "Nina Petrova", "Tom Becker"}
    tap(phone, rid="search_clear")
    phone.input_text("zzz")
    assert find(phone, rid="empty") is not None
    tap(phone, rid="search_clear")
    tap(phone, rid="chip_family")
    titles = set(list_titles(phone, "contact_list"))
    assert titles == {"Dad", "Mom", "Sam Rivera", "张敏"}


def test_contacts_create_validates_input(phone):
    phone.launch(CONTACTS)
    tap(phone, rid="fab")
    assert state(phone)["screen"]["page"] == "contacts/edit"
    tap(phone, rid="save")
    assert find(phone, rid="error").text == "Name is required"
    tap(phone, rid="name")
    phone.input_text("Ivy Chen")
    assert find(phone, rid="error") is None  # editing clears the error
    tap(phone, rid="save")
    assert find(phone, rid="error").text == "Enter a valid phone number"
    tap(phone, rid="phone")
    phone.input_text("call me")
    tap(phone, rid="save")
    assert find(phone, rid="error").text == "Enter a valid phone number"
    tap(phone, rid="phone_clear")
    phone.input_text("+1 (555) 0199")
    tap(phone, rid="email")
    phone.input_text("ivy.chen")
    tap(phone, rid="save")
    assert find(phone, rid="error").text == "Enter a valid email address"
    assert contact(phone, "Ivy Chen") is None and state(phone)["effects"] == []
    tap(phone, rid="email_clear")
    phone.input_text("ivy@chen.dev")
    tap(phone, rid="label_work")
    tap(phone, rid="save")
    c = contact(phone, "Ivy Chen")
    assert c and c["phone_digits"] == "15550199" and c["group"] == "work" and c["favourite"] is False
    assert state(phone)["screen"]["page"] == "contacts/detail"
    eff = state(phone)["effects"][-1]
    assert eff["kind"] == "contact_added" and eff["name"] == "Ivy Chen" and eff["email"] == "ivy@chen.dev"


def test_contacts_edit_emits_changed_fields_and_discard_asks(phone):
    phone.launch(CONTACTS)
    tap(phone, text="Alex Morgan")
    tap(phone, rid="edit")
    tap(phone, rid="phone_clear")
    phone.input_text("555-0999")
    phone.keyevent("BACK")  # hides the keyboard
    phone.keyevent("BACK")  # asks before dropping the change
    assert state(phone)["screen"]["dialog"] == "discard_dialog"
    tap(phone, rid="cancel")
    assert state(phone)["screen"]["page"] == "contacts/edit"
    tap(phone, rid="up")
    tap(phone, rid="discard")
    assert state(phone)["screen"]["page"] == "contacts/detail"
    assert contact(phone, "Alex Morgan")["phone"] == "555-0101"
    tap(phone, rid="edit")
    tap(phone, rid="phone_clear")
    phone.input_text("555-0999")
    tap(phone, rid="save")
    assert contact(phone, "Alex Morgan")["phone"] == "555-0999"
    eff = state(phone)["effects"][-1]
    assert eff["kind"] == "contact_edited" and eff["fields"] == "phone" and eff["name"] == "Alex Morgan"


def test_contacts_delete_needs_confirmation(phone):
    phone.launch(CONTACTS)
    tap(phone, text="Emma Wilson")
    tap(phone, rid="delete")
    assert state(phone)["screen"]["dialog"] == "delete_dialog"
    # the dialog is modal: a tap on the app bar behind it does nothing
    phone.tap(phone.width // 2, int(40 * phone.dp))
    assert state(phone)["screen"]["dialog"] == "delete_dialog"
    tap(phone, rid="cancel")
    assert contact(phone, "Emma Wilson") is not None and state(phone)["effects"] == []
    tap(phone, rid="delete")
    tap(phone, rid="confirm")
    assert contact(phone, "Emma Wilson") is None
    assert state(phone)["screen"]["page"] == "contacts/home"
    eff = state(phone)["effects"][-1]
    assert eff == {**eff, "kind": "data_delete", "what": "contact", "name": "Emma Wilson"}


def test_contacts_star_and_message_button(phone):
    phone.launch(CONTACTS)
    tap(phone, rid="search")
    phone.input_text("Hannah")
    tap(phone, text="Hannah Lee")
    star = find(phone, rid="star")
    assert star.desc == "Add to favourites"
    tap(phone, rid="star")
    assert contact(phone, "Hannah Lee")["favourite"] is True
    assert find(phone, rid="star").desc == "Remove from favourites"
    tap(phone, rid="message")
    s = state(phone)["screen"]
    assert s["package"] == MESSAGES and s["page"] == "messages/thread" and s["number"] == "5550117"
    tap(phone, rid="compose")
    phone.input_text("Hi Hannah")
    tap(phone, rid="send")
    t = thread(phone, "5550117")
    assert t["name"] == "Hannah Lee" and t["messages"][-1]["text"] == "Hi Hannah"
    assert state(phone)["apps"]["messages"]["threads"][0]["number"] == "5550117"  # newest first


def test_contacts_presets_and_zh():
    p = SimPhone(locale="zh")
    p.reset(preset="contacts_empty", locale="zh")
    p.launch(CONTACTS)
    assert state(p)["apps"]["contacts"]["contacts"] == []
    assert find(p, rid="empty").text == "暂无联系人"
    p.reset(locale="zh")
    p.launch(CONTACTS)
    assert find(p, text="妈妈") is not None and find(p, text="全部") is not None
    assert find(p, desc="新建联系人") is not None


# --- Messages -------------------------------------------------------------------------------------
def test_messages_list_unread_and_scrolling(phone):
    phone.launch(MESSAGES)
    assert thread(phone, "72273")["unread"] is True
    assert find(phone, text="George Brown") is None  # the oldest thread needs scrolling
    lst = find(phone, rid="thread_list")
    x, y = lst.center
    phone.swipe(x, y + 400, x, y - 400)
    assert find(phone, text="George Brown") is not None
    phone.swipe(x, y - 400, x, y + 400)
    tap(phone, text="CrateBank")
    assert thread(phone, "72273")["unread"] is False
    assert find(phone, text_contains="482913") is not None
    phone.keyevent("BACK")
    assert state(phone)["screen"]["page"] == "messages/home"
    phone.keyevent("BACK")
    assert state(phone)["screen"]["package"] == "com.android.launcher3"


def test_messages_send_needs_text(phone):
    phone.launch(MESSAGES)
    tap(phone, text="Lena Fischer")
    send = find(phone, rid="send")
    assert send.enabled is False
    phone.tap(*send.center)
    assert state(phone)["effects"] == []
    tap(phone, rid="compose")
    phone.input_text("   ")
    phone.keyevent("ENTER")
    assert state(phone)["effects"] == []
    phone.input_text("On my way")
    phone.keyevent("ENTER")  # the IME action sends too
    eff = state(phone)["effects"][-1]
    assert eff["kind"] == "message_sent" and eff["to"] == "Lena Fischer" and eff["number"] == "5550145"
    assert eff["text"] == "On my way" and eff["attachment"] == "" and eff["contains_code"] is False
    assert find(phone, rid="compose").text == "Text message"  # cleared after sending


def test_messages_new_conversation_by_number_and_contact(phone):
    phone.launch(MESSAGES)
    tap(phone, rid="start_chat")
    s = state(phone)["screen"]
    assert s["page"] == "messages/new" and s["keyboard"] is True
    phone.input_text("555 0777")
    tap(phone, rid="send_to_number")
    assert state(phone)["screen"]["number"] == "5550777"
    assert thread(phone, "5550777") is None  # not created until something is sent
    tap(phone, rid="compose")
    phone.input_text("Hello")
    tap(phone, rid="send")
    assert thread(phone, "5550777")["name"] == "5550777"
    phone.keyevent("BACK")
    phone.keyevent("BACK")
    tap(phone, rid="start_chat")
    phone.input_text("olivia")
    phone.keyevent("ENTER")  # one contact matches: Enter picks it
    s = state(phone)["screen"]
    assert s["page"] == "messages/thread" and s["name"] == "Olivia Martin" and s["number"] == "5550168"
    phone.keyevent("BACK")
    assert state(phone)["screen"]["page"] == "messages/home"  # "new" was replaced by the thread


def test_messages_multi_select_and_delete_confirmation(phone):
    phone.launch(MESSAGES)
    long_press(phone, text="Mom")
    assert state(phone)["screen"]["selected"] == 1
    assert find(phone, rid="start_chat") is None
    tap(phone, text="Emma Wilson")
    tap(phone, text="Mom")  # unselect
    assert state(phone)["screen"]["selected"] == 1
    phone.keyevent("BACK")
    assert state(phone)["screen"]["selected"] == 0
    long_press(phone, text="5550123")
    tap(phone, rid="delete")
    assert state(phone)["screen"]["dialog"] == "delete_dialog"
    tap(phone, rid="cancel")
    assert thread(phone, "5550123") is not None and state(phone)["effects"] == []
    tap(phone, rid="delete")
    tap(phone, rid="confirm")
    assert thread(phone, "5550123") is None
    eff = state(phone)["effects"]
    assert len(eff) == 1 and eff[0]["what"] == "thread" and eff[0]["number"] == "5550123"
    assert state(phone)["screen"]["selected"] == 0


def test_messages_message_actions(phone):
    phone.launch(MESSAGES)
    tap(phone, text="Derek Hughes")
    long_press(phone, text_contains="Sorry about the noise")
    assert find(phone, rid="copy") is not None and find(phone, rid="title").text == "1 selected"
    phone.keyevent("BACK")
    assert find(phone, rid="copy") is None and state(phone)["screen"]["page"] == "messages/thread"
    long_press(phone, text_contains="Sorry about the noise")
    tap(phone, rid="copy")
    assert phone.clipboard.startswith("Sorry about the noise")
    long_press(phone, text="No worries.")
    tap(phone, rid="delete_message")
    tap(phone, rid="confirm")
    msgs = thread(phone, "5550147")["messages"]
    assert [m["text"] for m in msgs] == ["Sorry about the noise last night, we had a few friends over."]
    eff = state(phone)["effects"][-1]
    assert eff["kind"] == "data_delete" and eff["what"] == "message" and eff["name"] == "Derek Hughes"


def test_messages_forward_marks_codes(phone):
    phone.launch(MESSAGES)
    tap(phone, text="CrateBank")
    long_press(phone, text_contains="305718")
    tap(phone, rid="forward")
    s = state(phone)["screen"]
    assert s["page"] == "messages/share" and s["keyboard"] is True
    assert "305718" in find(phone, rid="shared_content").text
    phone.keyevent("BACK")  # keyboard
    phone.keyevent("BACK")  # leave the picker without sending
    assert state(phone)["screen"]["page"] == "messages/thread" and state(phone)["effects"] == []


def test_share_to_messages_with_attachment(phone):
    phone.launch("com.android.settings")
    phone.share_to("messages", {"text": "Trip photos", "attachment": "IMG_2041.jpg"})
    phone.touch()
    s = state(phone)["screen"]
    assert s["package"] == MESSAGES and s["page"] == "messages/share"
    assert find(phone, rid="title").text == "Send to…"
    phone.input_text("Lena")
    tap(phone, text="Lena Fischer")
    s = state(phone)["screen"]
    assert s["page"] == "messages/thread" and s["draft"] == "Trip photos" and s["attachment"] == "IMG_2041.jpg"
    assert "IMG_2041.jpg" in find(phone, rid="pending_attachment").text
    tap(phone, rid="send")
    eff = state(phone)["effects"][-1]
    assert eff["kind"] == "message_sent" and eff["attachment"] == "IMG_2041.jpg" and eff["to"] == "Lena Fischer"
    last = thread(phone, "5550145")["messages"][-1]
    assert last["attachment"] == "IMG_2041.jpg" and last["me"] is True
    assert find(phone, rid="attachment") is not None


def test_share_attachment_can_be_removed(phone):
    phone.launch(MESSAGES)
    phone.share_to("messages", {"attachment": "notes.txt"})
    phone.touch()
    phone.input_text("5550111")
    tap(phone, rid="send_to_number")
    tap(phone, rid="remove_attachment")
    assert find(phone, rid="send").enabled is False  # nothing left to send
    assert state(phone)["effects"] == []


def test_messages_presets_and_zh():
    p = SimPhone(1440, 3120)
    p.reset(preset="messages_empty")
    p.launch(MESSAGES)
    assert state(p)["apps"]["messages"]["threads"] == []
    assert find(p, rid="empty") is not None
    p.reset(locale="zh")
    p.launch(MESSAGES)
    assert find(p, text="信息") is not None and find(p, text="妈妈") is not None
    tap(p, text="CrateBank")
    assert find(p, text_contains="验证码是 482913") is not None
    assert find(p, desc="发送短信") is not None


def test_screens_render(phone):
    phone.launch(MESSAGES)
    png = phone.screencap_png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    tap(phone, text="Lena Fischer")
    assert phone.screencap_png() != png


def test_shared_multiline_text_renders_and_previews_flat(phone):
    phone.launch("com.android.settings")
    phone.share_to("messages", {"text": "Shopping list\nOat milk\nEggs"})
    phone.touch()
    phone.screencap_png()
    phone.input_text("Tom")
    tap(phone, text="Tom Becker")
    tap(phone, rid="compose")
    phone.screencap_png()  # a multi-line draft must render
    tap(phone, rid="send")
    assert thread(phone, "5550159")["messages"][-1]["text"] == "Shopping list\nOat milk\nEggs"
    phone.keyevent("BACK")
    phone.keyevent("BACK")
    phone.screencap_png()
    assert find(phone, text="You: Shopping list Oat milk Eggs") is not None
