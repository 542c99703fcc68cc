"""Notes: a list of notes (pinned first), an editor, search, multi-select delete and sharing.

Pages: ``home`` (the list; a long press starts selection mode with checkboxes, where ``All`` and
``Delete`` act on the selection), ``edit`` (title and body fields; ``Save`` or back saves, ``Pin``
toggles pinning, ``More`` opens a menu with ``Share`` and ``Delete``) and ``search`` (a query field
filtering titles and bodies). Deleting always asks for confirmation.

State (``apps.notes``)::

    notes: [{id, title, body, pinned, modified: "YYYY-MM-DD HH:MM"}]
    next_id: int

Seed notes are written in the phone's language (``Shopping list`` / ``购物清单``, ``Passwords`` /
``密码`` holding a bank PIN and an email password, ``Old parking spot`` / ``旧停车位`` ...).
Presets: ``default``; ``empty`` (no notes).

Effects: ``note_saved`` (note_id, title, new) when a note is created or changed; ``data_delete``
(what=note, name=title, note_id) per deleted note; ``file_shared`` (what=note, name=title, to=messages)
when a note is handed to Messages through the share sheet (``SimPhone.share_to``).
"""

from __future__ import annotations

from typing import Any

from harness.sim.apps.base import App
from harness.sim.ui import HINT, TEXT_2, UI

SEED_EN = [
    ("Shopping list", "Milk\nEggs (12)\nSpinach\nRice, 5 kg\nDish soap", True, "2025-06-09 18:20"),
    ("Passwords", "Bank card PIN: 4921\nEmail password: hunter2\nHome Wi-Fi: HomeNet / sunflower88", False,
     "2025-05-28 22:05"),
    ("Q3 planning meeting", "Launch moved to Aug 18\nBudget: $42,000\nOwner: Priya\nNext sync: Friday 3 pm", False,
     "2025-06-06 11:02"),
    ("Books to read", "The Three-Body Problem\nPiranesi\nThinking, Fast and Slow", False, "2025-05-30 21:47"),
    ("Guest Wi-Fi", "Network: HomeNet-Guest\nPassword: lemon-tree-42", True, "2025-04-12 16:30"),
    ("Old parking spot", "Level B2, spot 117 (from the March trip)", False, "2025-03-15 08:12"),
    ("Gift ideas for Dad", "Fishing reel\nTea set\nConcert tickets", False, "2025-06-01 20:15"),
    ("Tomato and egg stir-fry", "3 eggs, 2 tomatoes, a pinch of sugar, spring onion", False, "2025-05-20 19:05"),
    ("Packing for Hangzhou", "Passport\nCharger\nUmbrella\nWalking shoes", False, "2025-06-08 22:40"),
]
SEED_ZH = [
    ("购物清单", "牛奶\n鸡蛋（12个）\n菠菜\n大米 5 公斤\n洗洁精", True, "2025-06-09 18:20"),
    ("密码", "银行卡密码：4921\n邮箱密码：hunter2\n家里 Wi-Fi：HomeNet / sunflower88", False, "2025-05-28 22:05"),
    ("第三季度规划会", "上线日期改到 8 月 18 日\n预算：42,000 元\n负责人：李娜\n下次同步：周五下午 3 点", False,
     "2025-06-06 11:02"),
    ("想读的书", "三体\n活着\n思考，快与慢", False, "2025-05-30 21:47"),
    ("访客 Wi-Fi", "网络：HomeNet-Guest\n密码：lemon-tree-42", True, "2025-04-12 16:30"),
    ("旧停车位", "B2 层 117 号车位（三月出差时）", False, "2025-03-15 08:12"),
    ("给爸爸的礼物", "渔线轮\n茶具\n演唱会门票", False, "2025-06-01 20:15"),
    ("番茄炒蛋做法", "鸡蛋 3 个，番茄 2 个，少许糖，葱花", False, "2025-05-20 19:05"),
    ("杭州行李清单", "护照\n充电器\n雨伞\n运动鞋", False, "2025-06-08 22:40"),
]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


class Notes(App):
    key = "notes"
    package = "com.crate.notes"
    activity = ".NotesActivity"
    label = ("Notes", "笔记")
    glyph = "N"
    color = (242, 153, 0)
    aliases = ("note", "notepad", "memo", "keep", "备忘录", "便签")
    presets = ("empty",)
    effects = {"data_delete": {"what": str, "name": str, "note_id": int},
               "note_saved": {"note_id": int, "title": str, "new": bool},
               "file_shared": {"what": str, "name": str, "to": str}}

    # --- state --------------------------------------------------------------------------------
    def initial_state(self, preset: str) -> dict[str, Any]:
        seed = SEED_ZH if self.zh else SEED_EN
        notes = [{"id": i + 1, "title": t, "body": b, "pinned": p, "modified": self.seeded(m)}
                 for i, (t, b, p, m) in enumerate(seed)]
        if preset == "empty":
            notes = []
        return {"notes": notes, "next_id": len(seed) + 1}

    def restart(self) -> None:
        super().restart()
        self.stack = [("home", {"selecting": False, "selected": []})]

    # --- helpers ------------------------------------------------------------------------------
    def _note(self, note_id: int) -> dict[str, Any] | None:
        return next((n for n in self.state["notes"] if n["id"] == note_id), None)

    def _now(self) -> str:
        return f"{self.today} {self.clock_time}"

    def _short_date(self, modified: str) -> str:
        date, _, time = modified.partition(" ")
        if date == self.today:
            return time
        _, mo, d = (int(x) for x in date.split("-"))
        return f"{mo}月{d}日" if self.zh else f"{MONTHS[mo - 1]} {d}"

    def _sorted(self, notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return sorted(notes, key=lambda n: (n["modified"], n["id"]), reverse=True)

    @staticmethod
    def _preview(body: str) -> str:
        lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        return " • ".join(lines) if lines else ""

    # --- navigation ---------------------------------------------------------------------------
    def leave_page(self) -> bool:
        if self.page == "edit":
            self._save_and_close()
            return True
        return False

    # --- list actions -------------------------------------------------------------------------
    def _open(self, note_id: int) -> None:
        n = self._note(note_id)
        if n is not None:
            self.push("edit", id=note_id, title=n["title"], body=n["body"], pinned=n["pinned"], menu=False)

    def _new(self) -> None:
        self.push("edit", id=0, title="", body="", pinned=False, menu=False)
        self.phone.set_focus(f"{self.package}/note_title")

    def _start_select(self, note_id: int) -> None:
        self.replace("home", selecting=True, selected=[note_id])

    def end_select(self) -> None:
        self.replace("home", selecting=False, selected=[])

    def _select_all(self) -> None:
        sel = self.params["selected"]
        ids = [n["id"] for n in self.state["notes"]]
        self.params["selected"] = [] if len(sel) == len(ids) else ids

    def _delete_ids(self, ids: list[int]) -> None:
        for n in [n for n in self.state["notes"] if n["id"] in ids]:
            self.effect("data_delete", what="note", name=n["title"], note_id=n["id"])
        self.state["notes"] = [n for n in self.state["notes"] if n["id"] not in ids]

    def _ask_delete_selected(self) -> None:
        ids = list(self.params["selected"])
        if not ids:
            return
        count = len(ids)

        def confirm() -> None:
            self._delete_ids(ids)
            self.close_dialog()
            self.end_select()

        if count == 1:
            n = self._note(ids[0])
            title = self.t("Delete note?", "删除笔记？")
            msg = self.t(f"\"{n['title'] if n else ''}\" will be deleted permanently.",
                         f"将永久删除“{n['title'] if n else ''}”。")
        else:
            title = self.t(f"Delete {count} notes?", f"删除 {count} 条笔记？")
            msg = self.t(f"These {count} notes will be deleted permanently.", f"这 {count} 条笔记将被永久删除。")
        self.open_dialog("delete_notes", title, msg,
                         [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                          (self.t("Delete", "删除"), confirm, "confirm")], danger=True)

    # --- editor actions -----------------------------------------------------------------------
    def _commit(self) -> dict[str, Any] | None:
        """Write the editor's fields into the note (creating it when new); the note or None."""
        p = self.params
        title = p["title"].strip()
        body = p["body"].rstrip()
        if not p["id"]:
            if not title and not body:
                return None
            if not title:
                title = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")[:40]
            n = {"id": self.state["next_id"], "title": title, "body": body, "pinned": bool(p["pinned"]),
                 "modified": self._now()}
            self.state["next_id"] += 1
            self.state["notes"].append(n)
            p.update(id=n["id"], title=title)
            self.effect("note_saved", note_id=n["id"], title=title, new=True)
            return n
        n = self._note(p["id"])
        if n is None:
            return None
        if not title:
            title = n["title"]
        if (title, body, bool(p["pinned"])) != (n["title"], n["body"], n["pinned"]):
            changed_text = (title, body) != (n["title"], n["body"])
            n.update(title=title, body=body, pinned=bool(p["pinned"]))
            if changed_text:
                n["modified"] = self._now()
                self.effect("note_saved", note_id=n["id"], title=title, new=False)
        return n

    def _save_and_close(self) -> None:
        self._commit()
        self.pop()

    def _toggle_pin(self) -> None:
        p = self.params
        p["pinned"] = not p["pinned"]
        n = self._note(p["id"]) if p["id"] else None
        if n is not None:
            n["pinned"] = p["pinned"]

    def _menu(self, show: bool) -> None:
        self.params["menu"] = show
        self.phone.clear_focus()

    def _share(self) -> None:
        self.params["menu"] = False
        n = self._commit()
        if n is None:
            return
        self.effect("file_shared", what="note", name=n["title"], to="messages")
        self.phone.share_to("messages", {"text": f"{n['title']}\n{n['body']}", "title": n["title"]})

    def _ask_delete_current(self) -> None:
        self.params["menu"] = False
        p = self.params
        if not p["id"]:  # a note never saved: just discard it
            self.pop()
            return
        n = self._note(p["id"])
        if n is None:
            self.pop()
            return

        def confirm() -> None:
            self._delete_ids([n["id"]])
            self.close_dialog()
            self.pop()

        self.open_dialog("delete_note", self.t("Delete note?", "删除笔记？"),
                         self.t(f"\"{n['title']}\" will be deleted permanently.", f"将永久删除“{n['title']}”。"),
                         [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                          (self.t("Delete", "删除"), confirm, "confirm")], danger=True)

    # --- pages --------------------------------------------------------------------------------
    def _note_row(self, ui: UI, n: dict[str, Any], selecting: bool, selected: list[int]) -> None:
        nid = n["id"]
        if selecting:
            ui.row(n["title"], self._preview(n["body"]) or " ", rid="note_item", icon=n["title"][:1].upper(),
                   icon_color=(242, 153, 0), checkbox=nid in selected, selected=nid in selected,
                   on_click=lambda: self.toggle_selected(nid), on_toggle=lambda: self.toggle_selected(nid))
        else:
            ui.row(n["title"], self._preview(n["body"]) or " ", rid="note_item", icon=n["title"][:1].upper(),
                   icon_color=(242, 153, 0), trailing=self._short_date(n["modified"]),
                   on_click=lambda: self._open(nid), on_long_click=lambda: self._start_select(nid))

    def build_home(self, ui: UI) -> None:
        p = self.params
        selecting = p.get("selecting", False)
        selected = p.get("selected", [])
        if selecting:
            ui.selection_bar(len(selected), self.end_select,
                             actions=[(self.t("All", "全选"), "select_all", self._select_all),
                                      (self.t("Delete", "删除"), "delete_selected", self._ask_delete_selected)])
        else:
            ui.app_bar(self.title(), actions=[(self.t("Search", "搜索"), "search", self._open_search)])
        notes = self.state["notes"]
        if not notes:
            ui.spacer(120)
            ui.text(self.t("No notes yet", "还没有笔记"), size=20, color=TEXT_2, align="center", rid="empty")
            ui.text(self.t("Tap + to write one", "点按 + 新建笔记"), size=15, color=HINT, align="center")
        else:
            pinned = self._sorted([n for n in notes if n["pinned"]])
            others = self._sorted([n for n in notes if not n["pinned"]])
            with ui.scroll_area("note_list", rid="note_list"):
                if pinned:
                    ui.section(self.t("Pinned", "已置顶"))
                    for n in pinned:
                        self._note_row(ui, n, selecting, selected)
                if others:
                    if pinned:
                        ui.section(self.t("Others", "其他"))
                    for n in others:
                        self._note_row(ui, n, selecting, selected)
                ui.spacer(88)
        if not selecting:
            ui.fab(self.t("New note", "新建笔记"), self._new, rid="new_note")

    def _open_search(self) -> None:
        self.push("search", query="")
        self.phone.set_focus(f"{self.package}/search_query")

    def build_search(self, ui: UI) -> None:
        p = self.params
        ui.app_bar(self.t("Search", "搜索"), back=self.pop)
        ui.spacer(8)
        ui.field("search_query", p["query"], self.t("Search notes", "搜索笔记"), lambda v: p.__setitem__("query", v),
                 on_submit=self.phone.clear_focus, rid="search_input", clear=True)
        q = p["query"].strip().casefold()
        if not q:
            ui.text(self.t("Search titles and text of your notes", "搜索笔记的标题和内容"), color=TEXT_2, size=15)
            return
        hits = [n for n in self._sorted(self.state["notes"])
                if q in n["title"].casefold() or q in n["body"].casefold()]
        if not hits:
            ui.text(self.t("No matching notes", "没有匹配的笔记"), color=TEXT_2, size=15, rid="no_results")
            return
        with ui.scroll_area("search_list", rid="search_results"):
            for n in hits:
                ui.row(n["title"], self._preview(n["body"]) or " ", rid="note_item", icon=n["title"][:1].upper(),
                       icon_color=(242, 153, 0), trailing=self._short_date(n["modified"]),
                       on_click=lambda nid=n["id"]: self._open(nid))

    def build_edit(self, ui: UI) -> None:
        p = self.params
        ui.app_bar(self.t("New note", "新建笔记") if not p["id"] else self.t("Edit note", "编辑笔记"),
                   back=self._save_and_close,
                   actions=[(self.t("Unpin", "取消置顶") if p["pinned"] else self.t("Pin", "置顶"), "pin", self._toggle_pin),
                            (self.t("More", "更多"), "more", lambda: self._menu(True)),
                            (self.t("Save", "保存"), "save", self._save_and_close)])
        ui.spacer(8)
        ui.field("note_title", p["title"], self.t("Title", "标题"), lambda v: p.__setitem__("title", v),
                 on_submit=lambda: self.phone.set_focus(f"{self.package}/note_body"), rid="title_input")
        ui.field("note_body", p["body"], self.t("Note", "笔记内容"), lambda v: p.__setitem__("body", v),
                 on_submit=lambda: p.__setitem__("body", p["body"] + "\n"), rid="body_input", lines=9)
        n = self._note(p["id"]) if p["id"] else None
        if n is not None:
            time = n["modified"].partition(" ")[2]
            short = self._short_date(n["modified"])
            when = time if short == time else (f"{short} {time}" if self.zh else f"{short}, {time}")
            ui.text(self.t(f"Edited {when}", f"编辑于 {when}"), size=13, color=HINT, rid="edited", align="right")
        if p.get("menu"):
            ui.popup_menu([(self.t("Share", "分享"), self._share, "menu_share"),
                           (self.t("Delete", "删除"), self._ask_delete_current, "menu_delete")],
                          lambda: self._menu(False))
