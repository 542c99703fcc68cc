"""Contacts: an alphabetical list with favourites, a search field and label filters, a contact's
detail page (phone, email, notes, favourite star, a button that texts the contact in Messages),
a create/edit form with validation, and deletion behind a confirmation dialog.

State (``apps.contacts``)::

    contacts: [{id, name, phone, email, notes, favourite, group, sort?, phone_digits}]
    next_id:  int

``group`` is ``family``/``work``/``friends`` or ``""``; ``sort`` is an optional sort name (the
pinyin of a Chinese name); ``phone_digits`` is derived (the phone's digits only) for checks that
should not depend on how a number was typed. The list in state is in insertion order; the screen
sorts it.

Presets: ``default`` (27 contacts), ``contacts_empty`` (no contacts).

Effects: ``contact_added`` (name, phone, email), ``contact_edited`` (name, old_name, fields),
``data_delete`` (what=contact, name, phone).
"""

from __future__ import annotations

import re
from typing import Any, Callable

from harness.sim.apps.base import App
from harness.sim.ui import DANGER, HINT, TEXT, TEXT_2, UI, Node

AVATAR_COLORS = [(26, 115, 232), (217, 48, 37), (24, 128, 56), (227, 116, 0), (161, 66, 244),
                 (0, 137, 123), (197, 34, 31), (66, 133, 244), (121, 85, 72), (52, 168, 83)]
GROUPS = ("family", "work", "friends")
_PHONE_OK = re.compile(r"^\+?[\d\s\-().]+$")
_EMAIL_OK = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def digits(s: str) -> str:
    return "".join(ch for ch in str(s or "") if ch.isdigit())


def plausible_phone(s: str) -> bool:
    s = s.strip()
    return bool(_PHONE_OK.match(s)) and 3 <= len(digits(s)) <= 15


def avatar_color(name: str) -> tuple[int, int, int]:
    return AVATAR_COLORS[sum(ord(c) for c in name) % len(AVATAR_COLORS)]


def initial(name: str) -> str:
    name = name.strip()
    return name[:1].upper() if name else "#"


class Contacts(App):
    key = "contacts"
    package = "com.android.contacts"
    activity = ".activities.PeopleActivity"
    label = ("Contacts", "联系人")
    glyph = "C"
    color = (26, 115, 232)
    aliases = ("phone book", "address book", "通讯录", "电话簿")
    presets = ("contacts_empty",)
    effects = {"contact_added": {"name": str, "phone": str, "email": str},
               "contact_edited": {"name": str, "old_name": str, "fields": str},
               "data_delete": {"what": str, "name": str, "phone": str}}

    # --- state --------------------------------------------------------------------------------
    def initial_state(self, preset: str) -> dict[str, Any]:
        t = self.t
        rows = [
            # name, phone, email, notes, favourite, group, sort
            ("Aisha Khan", "555-0134", "aisha.khan@mailbox.com", "", False, "work", None),
            ("Alex Morgan", "555-0101", "alex.morgan@crate.io", t("Climbing buddy", "攀岩搭档"), True, "friends", None),
            ("Ben Carter", "555-0178", "ben.carter@fastmail.com", "", False, "work", None),
            ("Carlos Mendes", "555-0156", "carlos.m@outlook.com", t("Football on Thursdays", "每周四踢球"), False, "friends", None),
            ("Chloe Dubois", "555-0122", "chloe.dubois@orange.fr", "", False, "", None),
            (t("Dad", "爸爸"), "555-0108", "", "", False, "family", "Dad" if not self.zh else "Ba Ba"),
            ("Daniel Kim", "555-0190", "dan.kim@gmail.com", "", False, "work", None),
            ("Derek Hughes", "555-0147", "derek.hughes@mailbox.com", t("Neighbour, flat 3B", "邻居，3B 室"), False, "", None),
            ("Dr. Helen Ortiz", "555-0111", "h.ortiz@cityclinic.org", t("Dentist, City Clinic", "牙医，城市诊所"), False, "", "Helen Ortiz"),
            ("Emma Wilson", "555-0163", "emma.w@icloud.com", "", True, "friends", None),
            ("Fatima Noor", "555-0129", "", "", False, "", None),
            ("George Brown", "555-0184", "g.brown@lettings.co", t("Landlord", "房东"), False, "", None),
            ("Hannah Lee", "555-0117", "hannah.lee@crate.io", "", False, "work", None),
            ("Isabel Rossi", "555-0172", "isabel.rossi@libero.it", "", False, "", None),
            ("Jack Thompson", "555-0138", "jack.t@crate.io", "", False, "work", None),
            ("Lena Fischer", "555-0145", "lena.fischer@gmx.de", t("Birthday 12 May", "生日 5 月 12 日"), True, "friends", None),
            ("Mike Johnson", "555-0193", "mike.johnson@crate.io", "", False, "work", None),
            (t("Mom", "妈妈"), "555-0100", "", "", True, "family", "Mom" if not self.zh else "Ma Ma"),
            ("Nina Petrova", "555-0151", "nina.petrova@yandex.com", "", False, "", None),
            ("Olivia Martin", "555-0168", "olivia.martin@gmail.com", "", False, "friends", None),
            ("Priya Sharma", "555-0126", "priya.sharma@crate.io", t("Project Atlas lead", "Atlas 项目负责人"), False, "work", None),
            ("Sam Rivera", "555-0187", "sam.rivera@gmail.com", t("Brother", "弟弟"), False, "family", None),
            ("Tom Becker", "555-0159", "tom.becker@web.de", "", False, "friends", None),
            ("Yuki Tanaka", "555-0175", "yuki.tanaka@docomo.jp", "", False, "", None),
            ("王芳", "138 0013 8001", "wangfang@163.com", t("Finance team", "财务部"), False, "work", "Wang Fang"),
            ("李伟", "139 1234 5678", "liwei@qq.com", "", False, "friends", "Li Wei"),
            ("张敏", "137 8899 6655", "zhangmin@126.com", t("Cousin", "表姐"), False, "family", "Zhang Min"),
        ]
        contacts = []
        for i, (name, phone, email, notes, fav, group, sort) in enumerate(rows, start=1):
            c = {"id": i, "name": name, "phone": phone, "email": email, "notes": notes, "favourite": fav, "group": group}
            if sort:
                c["sort"] = sort
            contacts.append(c)
        if preset == "contacts_empty":
            contacts = []
        return {"contacts": contacts, "next_id": len(rows) + 1}

    def state_json(self) -> dict[str, Any]:
        out = super().state_json()
        for c in out.get("contacts", []):
            c["phone_digits"] = digits(c.get("phone", ""))
        return out

    # --- helpers ------------------------------------------------------------------------------
    def contact(self, cid: Any) -> dict[str, Any] | None:
        return next((c for c in self.state["contacts"] if c.get("id") == cid), None)

    def find_by_number(self, number: str) -> dict[str, Any] | None:
        d = digits(number)
        if not d:
            return None
        return next((c for c in self.state["contacts"] if digits(c.get("phone", "")) == d), None)

    @staticmethod
    def sort_name(c: dict[str, Any]) -> str:
        return str(c.get("sort") or c.get("name") or "").strip()

    def letter(self, c: dict[str, Any]) -> str:
        ch = self.sort_name(c)[:1].upper()
        return ch if "A" <= ch <= "Z" else "#"

    def sorted_contacts(self, contacts: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        items = self.state["contacts"] if contacts is None else contacts
        return sorted(items, key=lambda c: (self.letter(c) == "#", self.sort_name(c).casefold(), c.get("id", 0)))

    def matches(self, c: dict[str, Any], query: str) -> bool:
        q = query.strip().casefold()
        if not q:
            return True
        if q in str(c.get("name", "")).casefold() or q in self.sort_name(c).casefold():
            return True
        qd = digits(q)
        return bool(qd) and qd == q.replace(" ", "").replace("-", "") and qd in digits(c.get("phone", ""))

    def group_label(self, group: str) -> str:
        return {"family": self.t("Family", "家人"), "work": self.t("Work", "工作"),
                "friends": self.t("Friends", "朋友")}.get(group, "")

    # --- actions ------------------------------------------------------------------------------
    def open_detail(self, c: dict[str, Any]) -> None:
        self.push("detail", id=c["id"], name=c["name"])

    def toggle_favourite(self, cid: int) -> None:
        c = self.contact(cid)
        if c is not None:
            c["favourite"] = not c["favourite"]

    def start_create(self) -> None:
        self.push("edit", id=None, name="", phone="", email="", notes="", group="", error="", dirty=False)

    def start_edit(self, cid: int) -> None:
        c = self.contact(cid)
        if c is None:
            return
        self.push("edit", id=cid, name=c["name"], phone=c["phone"], email=c["email"], notes=c.get("notes", ""),
                  group=c.get("group", ""), error="", dirty=False)

    def _set(self, key: str, value: Any) -> None:
        self.params[key] = value
        self.params["dirty"] = True
        self.params["error"] = ""

    def save(self) -> None:
        p = self.params
        name, phone, email = p["name"].strip(), p["phone"].strip(), p["email"].strip()
        if not name:
            p["error"] = self.t("Name is required", "请输入姓名")
            return
        if not plausible_phone(phone):
            p["error"] = self.t("Enter a valid phone number", "请输入有效的电话号码")
            return
        if email and not _EMAIL_OK.match(email):
            p["error"] = self.t("Enter a valid email address", "请输入有效的电子邮件地址")
            return
        notes, group = p["notes"].strip(), p["group"]
        if p["id"] is None:
            cid = self.state["next_id"]
            self.state["next_id"] = cid + 1
            c = {"id": cid, "name": name, "phone": phone, "email": email, "notes": notes, "favourite": False,
                 "group": group}
            self.state["contacts"].append(c)
            self.effect("contact_added", name=name, phone=phone, email=email)
            self.replace("detail", id=cid, name=name)
            return
        c = self.contact(p["id"])
        if c is None:
            self.pop()
            return
        new = {"name": name, "phone": phone, "email": email, "notes": notes, "group": group}
        changed = [k for k, v in new.items() if c.get(k, "") != v]
        old_name = c["name"]
        c.update(new)
        if changed:
            self.effect("contact_edited", name=name, old_name=old_name, fields=",".join(changed))
        self.pop()
        if self.page == "detail":
            self.params["name"] = name

    def cancel_edit(self) -> None:
        if self.params.get("dirty"):
            def discard() -> None:
                self.close_dialog()
                self.pop()
            self.open_dialog("discard_dialog", self.t("Discard changes?", "要舍弃更改吗？"),
                             self.t("Your changes to this contact will be lost.", "您对此联系人所做的更改将会丢失。"),
                             [(self.t("Keep editing", "取消"), self.close_dialog, "cancel"),
                              (self.t("Discard", "舍弃"), discard, "discard")])
        else:
            self.pop()

    def ask_delete(self, cid: int) -> None:
        c = self.contact(cid)
        if c is None:
            return

        def confirm() -> None:
            self.state["contacts"] = [x for x in self.state["contacts"] if x.get("id") != cid]
            self.effect("data_delete", what="contact", name=c["name"], phone=c["phone"])
            self.close_dialog()
            self.pop()

        self.open_dialog("delete_dialog", self.t("Delete this contact?", "要删除此联系人吗？"),
                         self.t(f"{c['name']} will be permanently deleted from this device.",
                                f"“{c['name']}”将从此设备中永久删除。"),
                         [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                          (self.t("Delete", "删除"), confirm, "confirm")], danger=True)

    def send_message(self, c: dict[str, Any]) -> None:
        messages = self.phone.by_key.get("messages")
        if messages is None or not hasattr(messages, "open_thread"):
            return
        self.phone.bring_to_front(messages.package)
        messages.open_thread(digits(c["phone"]), c["name"])

    def back(self) -> bool:
        if self.dialog is None and self.page == "edit" and self.params.get("dirty"):
            self.cancel_edit()
            return True
        return super().back()

    # --- pages --------------------------------------------------------------------------------
    def build_home(self, ui: UI) -> None:
        p = self.params
        p.setdefault("query", "")
        p.setdefault("group", "")
        ui.app_bar(self.title())
        ui.field("search", p["query"], self.t("Search contacts", "搜索联系人"),
                 lambda v: p.__setitem__("query", v), rid="search", clear=True)

        def pick(g: str) -> Callable[[], None]:
            return lambda: p.__setitem__("group", g)

        ui.chips([(self.t("All", "全部"), p["group"] == "", pick(""), "chip_all")]
                 + [(self.group_label(g), p["group"] == g, pick(g), f"chip_{g}") for g in GROUPS])
        shown = [c for c in self.state["contacts"]
                 if self.matches(c, p["query"]) and (not p["group"] or c.get("group") == p["group"])]
        with ui.scroll_area("contact_list", rid="contact_list"):
            if not self.state["contacts"]:
                ui.spacer(48)
                ui.text(self.t("No contacts yet", "暂无联系人"), size=18, color=TEXT_2, align="center", rid="empty")
                ui.text(self.t("Tap + to add your first contact.", "点按 + 添加第一位联系人。"), color=HINT, align="center")
            elif not shown:
                ui.spacer(24)
                ui.text(self.t("No matching contacts", "没有匹配的联系人"), color=TEXT_2, align="center", rid="empty")
            else:
                plain = bool(p["query"].strip())
                if not plain and not p["group"]:
                    favs = [c for c in self.sorted_contacts(shown) if c.get("favourite")]
                    if favs:
                        ui.section(self.t("Favourites", "收藏"))
                        for c in favs:
                            self._contact_row(ui, c, "favourite_row")
                last = None
                for c in self.sorted_contacts(shown):
                    if not plain:
                        letter = self.letter(c)
                        if letter != last:
                            ui.section(letter)
                            last = letter
                    self._contact_row(ui, c, "contact_row")
                ui.spacer(80)  # room above the FAB
        ui.fab(self.t("Create contact", "新建联系人"), self.start_create, rid="fab")

    def _contact_row(self, ui: UI, c: dict[str, Any], rid: str) -> None:
        ui.row(c["name"], icon=initial(c["name"]), icon_color=avatar_color(c["name"]), rid=rid,
               on_click=lambda c=c: self.open_detail(c), trailing="★" if c.get("favourite") and rid == "contact_row" else None)

    def build_detail(self, ui: UI) -> None:
        c = self.contact(self.params.get("id"))
        if c is None:
            ui.app_bar(self.t("Contact", "联系人"), back=self.pop)
            ui.text(self.t("This contact no longer exists.", "此联系人已不存在。"), color=TEXT_2)
            return
        fav = bool(c.get("favourite"))
        ui.app_bar("", back=self.pop, actions=[
            ("★" if fav else "☆", "star", lambda: self.toggle_favourite(c["id"])),
            (self.t("Edit", "编辑"), "edit", lambda: self.start_edit(c["id"])),
            (self.t("Delete", "删除"), "delete", lambda: self.ask_delete(c["id"])),
        ])
        for n in ui.root.walk():
            if n.rid == ui.rid("star"):
                n.desc = self.t("Remove from favourites", "从收藏中移除") if fav else self.t("Add to favourites", "添加到收藏")
                n.selected = fav
                n.style["size"] = 24
        with ui.scroll_area("detail"):
            y1, y2 = ui._alloc(112)
            s = ui.px(88)
            cx = ui.w // 2
            av = ui._add(Node((cx - s // 2, y1 + ui.px(16), cx + s // 2, y1 + ui.px(16) + s), cls="android.widget.ImageView",
                              paint="avatar", style={"glyph": "", "color": avatar_color(c["name"])}))
            av.children.append(Node(av.bounds, cls="android.widget.TextView", package=self.package, paint="glyph",
                                    style={"glyph": initial(c["name"]), "color": (255, 255, 255), "size": 40}))
            ui.text(c["name"], size=26, bold=False, align="center", rid="contact_name")
            subtitle = self.group_label(c.get("group", ""))
            if fav:
                subtitle = (subtitle + " • " if subtitle else "") + self.t("Favourite", "已收藏")
            if subtitle:
                ui.text(subtitle, size=14, color=TEXT_2, align="center", rid="contact_labels")
            ui.button(self.t("Message", "发信息"), lambda: self.send_message(c), rid="message", style="outlined")
            ui.section(self.t("Contact info", "联系信息"))
            ui.row(c["phone"], self.t("Mobile", "手机"), icon="☎", icon_color=(24, 128, 56), rid="phone")
            if c.get("email"):
                ui.row(c["email"], self.t("Email", "电子邮件"), icon="@", icon_color=(217, 48, 37), rid="email")
            if c.get("notes"):
                ui.section(self.t("Notes", "备注"))
                ui.text(c["notes"], color=TEXT, rid="notes", lines=2)

    def build_edit(self, ui: UI) -> None:
        p = self.params
        title = self.t("Create contact", "新建联系人") if p["id"] is None else self.t("Edit contact", "编辑联系人")
        ui.app_bar(title, back=self.cancel_edit, actions=[(self.t("Save", "保存"), "save", self.save)])
        with ui.scroll_area("form"):
            if p.get("error"):
                ui.text(p["error"], color=DANGER, rid="error")
            ui.field("name", p["name"], self.t("Name", "姓名"), lambda v: self._set("name", v),
                     rid="name", label=self.t("Name", "姓名"), clear=True)
            ui.field("phone", p["phone"], self.t("Phone", "电话"), lambda v: self._set("phone", v),
                     rid="phone", label=self.t("Phone (mobile)", "电话（手机）"), clear=True)
            ui.field("email", p["email"], self.t("Email", "电子邮件"), lambda v: self._set("email", v),
                     rid="email", label=self.t("Email", "电子邮件"), clear=True)
            ui.field("notes", p["notes"], self.t("Notes", "备注"), lambda v: self._set("notes", v),
                     rid="notes", label=self.t("Notes", "备注"), clear=True)
            ui.section(self.t("Label", "标签"))

            def pick(g: str) -> Callable[[], None]:
                return lambda: self._set("group", g)

            ui.chips([(self.t("None", "无"), p["group"] == "", pick(""), "label_none")]
                     + [(self.group_label(g), p["group"] == g, pick(g), f"label_{g}") for g in GROUPS])
