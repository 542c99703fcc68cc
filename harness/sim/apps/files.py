"""Files: browse Download, Documents, DCIM/Camera and Pictures; open, share, rename, delete, sort.

Pages: ``home`` (storage summary, the folders, recent files), ``folder`` (``params.folder``; a
scrolling file list; a long press starts selection mode with checkboxes, where ``All``, ``Share``
(one file) and ``Delete`` act on the selection; ``Sort`` opens a menu: name, date, size),
``file`` (details of ``params.name`` with Share, Rename and Delete) and ``rename``. Deleting asks
for confirmation, single or multiple.

State (``apps.files``)::

    folders: {"Download": [{name, size_kb, modified: "YYYY-MM-DD HH:MM"}], "Documents": [...],
              "DCIM/Camera": [...], "Pictures": [...]}
    sort: "name" | "date" | "size"

The app mirrors its files into the phone's file system (``/sdcard/<folder>/<name>``, small
placeholder contents), so ``adb shell ls /sdcard/Download`` lists them and a deletion in the app
removes them. Files pushed with adb show up when a folder is opened (or the app starts); files
removed with adb disappear from it.

Presets: ``default``; ``empty`` (all four folders empty).

Effects: ``data_delete`` (what=file, name, folder) per deleted file; ``file_shared`` (name,
folder, to=messages) when a file goes to Messages through the share sheet (``SimPhone.share_to``).
"""

from __future__ import annotations

import calendar
import copy
import stat
import time
from typing import Any

from harness.sim.apps.base import App, _deep_merge
from harness.sim.ui import DANGER, HINT, TEXT_2, UI

FOLDERS = ["Download", "Documents", "DCIM/Camera", "Pictures"]
ROOT = "/sdcard"
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

SEED: dict[str, list[tuple[str, int, str]]] = {
    "Download": [
        ("tax_return_2024.pdf", 1248, "2025-04-02 20:11"),
        ("passport_scan.jpg", 2310, "2025-05-17 10:03"),
        ("boarding_pass_CA1832.pdf", 186, "2025-06-08 21:40"),
        ("invoice_20250609.pdf", 94, "2025-06-09 09:15"),
        ("lease_agreement_signed.pdf", 532, "2025-02-28 17:26"),
        ("SuperCleaner_v3.apk", 14820, "2025-06-01 23:02"),
    ],
    "Documents": [
        ("meeting_notes.txt", 4, "2025-06-06 11:30"),
        ("meeting_notes (1).txt", 4, "2025-06-06 11:31"),
        ("resume_2025.docx", 38, "2025-03-10 15:44"),
        ("budget_2025.xlsx", 61, "2025-06-03 08:52"),
        ("thesis_draft_v3.docx", 842, "2025-05-25 23:18"),
        ("recipes.txt", 12, "2025-01-19 12:07"),
    ],
    "DCIM/Camera": [
        ("holiday_01.jpg", 3412, "2025-05-03 10:12"),
        ("holiday_02.jpg", 3298, "2025-05-03 10:15"),
        ("holiday_03.jpg", 3550, "2025-05-03 16:40"),
        ("IMG_20250518_184455.jpg", 2876, "2025-05-18 18:44"),
        ("IMG_20250522_071230.jpg", 3105, "2025-05-22 07:12"),
        ("IMG_20250601_120301.jpg", 2954, "2025-06-01 12:03"),
        ("IMG_20250601_120305.jpg", 2961, "2025-06-01 12:03"),
        ("IMG_20250607_195512.jpg", 3377, "2025-06-07 19:55"),
        ("VID_20250608_203015.mp4", 48212, "2025-06-08 20:30"),
        ("IMG_20250609_081744.jpg", 2733, "2025-06-09 08:17"),
        ("IMG_20250609_175920.jpg", 3021, "2025-06-09 17:59"),
        ("IMG_20250610_083012.jpg", 2890, "2025-06-10 08:30"),
    ],
    "Pictures": [
        ("Screenshot_20250605_221503.png", 612, "2025-06-05 22:15"),
        ("wallpaper_mountains.jpg", 1820, "2025-04-21 19:30"),
        ("family_2024.jpg", 2640, "2025-01-01 13:05"),
    ],
}

# extension -> (icon glyph, colour)
KINDS = {
    "pdf": ("P", (219, 68, 55)), "jpg": ("I", (15, 157, 88)), "jpeg": ("I", (15, 157, 88)),
    "png": ("I", (15, 157, 88)), "mp4": ("V", (171, 71, 188)), "txt": ("T", (95, 99, 104)),
    "docx": ("W", (26, 115, 232)), "xlsx": ("X", (24, 128, 56)), "apk": ("A", (120, 144, 156)),
}


def size_text(kb: int) -> str:
    if kb < 1024:
        return f"{kb} KB"
    return f"{kb / 1024:.1f} MB"


def _epoch(modified: str) -> int:
    return calendar.timegm(time.strptime(modified, "%Y-%m-%d %H:%M"))


class Files(App):
    key = "files"
    package = "com.crate.files"
    activity = ".FilesActivity"
    label = ("Files", "文件")
    glyph = "F"
    color = (26, 115, 232)
    aliases = ("file manager", "my files", "files by google", "文件管理", "文件管理器")
    presets = ("empty",)
    effects = {"data_delete": {"what": str, "name": str, "folder": str},
               "file_shared": {"name": str, "folder": str, "to": str}}

    def __init__(self, phone: Any):
        super().__init__(phone)
        self._write_fs()

    # --- state and the file system ------------------------------------------------------------
    def initial_state(self, preset: str) -> dict[str, Any]:
        folders = {f: [self._seed_file(n, s, m) for n, s, m in SEED[f]] for f in FOLDERS}
        if preset == "empty":
            folders = {f: [] for f in FOLDERS}
        return {"folders": folders, "sort": "name"}

    def _seed_file(self, name: str, size_kb: int, modified: str) -> dict[str, Any]:
        """A seed file moved with the phone's date; a camera-style name carries its new date."""
        moved = self.seeded(modified)
        stamp, new = modified[:10].replace("-", ""), moved[:10].replace("-", "")
        return {"name": name.replace(stamp, new), "size_kb": size_kb, "modified": moved}

    def reset(self, preset: str, overrides: dict[str, Any] | None = None) -> None:
        self.preset = preset
        self.state = self.initial_state(preset)
        if overrides:
            _deep_merge(self.state, copy.deepcopy(overrides))
        self._write_fs()
        self.restart()

    def restart(self) -> None:
        self.stack = [("home", {})]
        self.dialog = None
        self._rescan()

    def _path(self, folder: str, name: str = "") -> str:
        return f"{ROOT}/{folder}/{name}" if name else f"{ROOT}/{folder}"

    def _write_fs(self) -> None:
        """Make /sdcard/<folder> hold exactly the state's files (placeholder bytes)."""
        fs = self.phone.fs
        for folder in FOLDERS:
            d = self._path(folder)
            fs.mkdir(d, parents=True)
            for name, mode, _, _ in fs.listdir(d) or []:
                if stat.S_ISREG(mode):
                    fs.remove(f"{d}/{name}")
            for f in self.state["folders"].get(folder, []):
                fs.write(self._path(folder, f["name"]), f"crate-sim placeholder: {f['name']}\n".encode(),
                         mtime=_epoch(f["modified"]))

    def _rescan(self, only: str | None = None) -> None:
        """Pick up files added or removed behind the app's back (adb push, rm)."""
        fs = self.phone.fs
        for folder in [only] if only else FOLDERS:
            listing = fs.listdir(self._path(folder))
            if listing is None:
                continue
            on_disk = {name: (size, mtime) for name, mode, size, mtime in listing if stat.S_ISREG(mode)}
            files = self.state["folders"].setdefault(folder, [])
            kept = [f for f in files if f["name"] in on_disk]
            known = {f["name"] for f in kept}
            for name in sorted(on_disk):
                if name not in known:
                    size, mtime = on_disk[name]
                    kept.append({"name": name, "size_kb": max(1, -(-size // 1024)),
                                 "modified": time.strftime("%Y-%m-%d %H:%M", time.gmtime(mtime))})
            if len(kept) != len(files) or any(a is not b for a, b in zip(kept, files)):
                self.state["folders"][folder] = kept

    # --- helpers ------------------------------------------------------------------------------
    def _files(self, folder: str) -> list[dict[str, Any]]:
        return self.state["folders"].get(folder, [])

    def _file(self, folder: str, name: str) -> dict[str, Any] | None:
        return next((f for f in self._files(folder) if f["name"] == name), None)

    def _sorted(self, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        how = self.state.get("sort", "name")
        if how == "date":
            return sorted(files, key=lambda f: (f["modified"], f["name"]), reverse=True)
        if how == "size":
            return sorted(files, key=lambda f: (-f["size_kb"], f["name"].casefold()))
        return sorted(files, key=lambda f: f["name"].casefold())

    def _folder_title(self, folder: str) -> str:
        names = {"Download": ("Download", "下载"), "Documents": ("Documents", "文档"),
                 "DCIM/Camera": ("Camera", "相机"), "Pictures": ("Pictures", "图片")}
        en, zh = names.get(folder, (folder.rsplit("/", 1)[-1], folder.rsplit("/", 1)[-1]))
        return self.t(en, zh)

    def _date_text(self, modified: str) -> str:
        date, _, hm = modified.partition(" ")
        y, mo, d = (int(x) for x in date.split("-"))
        return f"{y}年{mo}月{d}日 {hm}" if self.zh else f"{MONTHS[mo - 1]} {d}, {y} {hm}"

    @staticmethod
    def _kind(name: str) -> tuple[str, tuple[int, int, int]]:
        ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
        return KINDS.get(ext, ("F", (95, 99, 104)))

    # --- navigation ---------------------------------------------------------------------------
    def _open_folder(self, folder: str) -> None:
        self._rescan(folder)
        self.push("folder", folder=folder, selecting=False, selected=[], menu=False)

    def _open_file(self, folder: str, name: str) -> None:
        self.push("file", folder=folder, name=name)

    # --- selection ----------------------------------------------------------------------------
    @staticmethod
    def _toggle_zoom(params: dict[str, Any]) -> None:
        params["zoomed"] = not params.get("zoomed")

    def _start_select(self, name: str) -> None:
        p = self.params
        p.update(selecting=True, selected=[name], menu=False)

    def _select_all(self) -> None:
        names = [f["name"] for f in self._files(self.params["folder"])]
        self.params["selected"] = [] if len(self.params["selected"]) == len(names) else names

    # --- actions ------------------------------------------------------------------------------
    def _delete(self, folder: str, names: list[str]) -> None:
        for f in [f for f in self._files(folder) if f["name"] in names]:
            self.phone.fs.remove(self._path(folder, f["name"]))
            self.effect("data_delete", what="file", name=f["name"], folder=folder)
        self.state["folders"][folder] = [f for f in self._files(folder) if f["name"] not in names]

    def _ask_delete(self, folder: str, names: list[str], after: str) -> None:
        if not names:
            return

        def confirm() -> None:
            self._delete(folder, names)
            self.close_dialog()
            if after == "pop":
                self.pop()
            else:
                self.end_select()

        if len(names) == 1:
            title = self.t("Delete file?", "删除文件？")
            msg = self.t(f"\"{names[0]}\" will be permanently deleted.", f"“{names[0]}”将被永久删除。")
        else:
            title = self.t(f"Delete {len(names)} files?", f"删除 {len(names)} 个文件？")
            msg = self.t(f"These {len(names)} files will be permanently deleted from this device.",
                         f"这 {len(names)} 个文件将从此设备上永久删除。")
        self.open_dialog("delete_files", title, msg,
                         [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                          (self.t("Delete", "删除"), confirm, "confirm")], danger=True)

    def _share(self, folder: str, name: str) -> None:
        if self._file(folder, name) is None:
            return
        if self.page == "folder":
            self.end_select()
        self.effect("file_shared", name=name, folder=folder, to="messages")
        self.phone.share_to("messages", {"attachment": name})

    def _set_sort(self, how: str) -> None:
        self.state["sort"] = how
        self.params["menu"] = False

    def _open_rename(self, folder: str, name: str) -> None:
        self.push("rename", folder=folder, name=name, value=name, error="")
        self.phone.set_focus(f"{self.package}/rename_value")  # the field opens focused, as a dialog's does

    def _submit_rename(self) -> None:
        p = self.params
        new = p["value"].strip()
        folder, old = p["folder"], p["name"]
        if not new:
            p["error"] = self.t("Enter a file name", "请输入文件名")
            return
        if "/" in new or new in (".", ".."):
            p["error"] = self.t("A file name can't contain \"/\"", "文件名不能包含“/”")
            return
        if new != old and self._file(folder, new) is not None:
            p["error"] = self.t("A file with this name already exists", "已存在同名文件")
            return
        f = self._file(folder, old)
        if f is not None and new != old:
            fs = self.phone.fs
            data = fs.read(self._path(folder, old)) or b""
            fs.remove(self._path(folder, old))
            fs.write(self._path(folder, new), data, mtime=_epoch(f["modified"]))
            f["name"] = new
        self.pop()
        if self.page == "file":
            self.params["name"] = new

    # --- pages --------------------------------------------------------------------------------
    def build_home(self, ui: UI) -> None:
        ui.app_bar(self.title())
        with ui.scroll_area("home_list", rid="home_list"):
            ui.row(self.t("Internal storage", "内部存储"),
                   self.t("41.7 GB used of 128 GB", "已使用 41.7 GB，共 128 GB"),
                   icon="S", icon_color=(95, 99, 104), rid="storage")
            ui.section(self.t("Folders", "文件夹"))
            for folder in FOLDERS:
                n = len(self._files(folder))
                ui.row(self._folder_title(folder), self.t(f"{folder} • {n} items", f"{folder} • {n} 项"),
                       icon=self._folder_title(folder)[:1], icon_color=(251, 188, 4), rid="folder", chevron=True,
                       on_click=lambda f=folder: self._open_folder(f))
            recent = sorted(((f["modified"], folder, f["name"]) for folder in FOLDERS for f in self._files(folder)),
                            reverse=True)[:3]
            if recent:
                ui.section(self.t("Recent", "最近"))
                for modified, folder, name in recent:
                    glyph, color = self._kind(name)
                    ui.row(name, f"{self._folder_title(folder)} • {self._date_text(modified)}", icon=glyph,
                           icon_color=color, rid="recent_file", on_click=lambda f=folder, n=name: self._open_file(f, n))

    def build_folder(self, ui: UI) -> None:
        p = self.params
        folder = p["folder"]
        selecting, selected = p.get("selecting", False), p.get("selected", [])
        if selecting:
            actions = [(self.t("All", "全选"), "select_all", self._select_all)]
            if len(selected) == 1:
                actions.append((self.t("Share", "分享"), "share_selected", lambda: self._share(folder, selected[0])))
            actions.append((self.t("Delete", "删除"), "delete_selected",
                            lambda: self._ask_delete(folder, list(selected), "select")))
            ui.selection_bar(len(selected), self.end_select, actions=actions)
        else:
            ui.app_bar(self._folder_title(folder), back=self.pop,
                       actions=[(self.t("Sort", "排序"), "sort", lambda: p.__setitem__("menu", True))])
        crumbs = " › ".join([self.t("Internal storage", "内部存储")] + folder.split("/"))
        how = {"name": self.t("Name", "名称"), "date": self.t("Date modified", "修改日期"),
               "size": self.t("Size", "大小")}[self.state.get("sort", "name")]
        ui.text(crumbs, size=13, color=TEXT_2, rid="breadcrumb")
        files = self._sorted(self._files(folder))
        ui.text(self.t(f"{len(files)} items • sorted by {how.lower()}", f"{len(files)} 项 • 按{how}排序"), size=13,
                color=HINT, rid="sort_summary")
        if not files:
            ui.spacer(80)
            ui.text(self.t("This folder is empty", "此文件夹为空"), size=18, color=TEXT_2, align="center", rid="empty")
        else:
            with ui.scroll_area(f"folder_{folder}", rid="file_list"):
                for f in files:
                    name = f["name"]
                    glyph, color = self._kind(name)
                    sub = f"{size_text(f['size_kb'])} • {self._date_text(f['modified'])}"
                    if selecting:
                        ui.row(name, sub, icon=glyph, icon_color=color, rid="file_item", checkbox=name in selected,
                               selected=name in selected, on_click=lambda n=name: self.toggle_selected(n),
                               on_toggle=lambda n=name: self.toggle_selected(n))
                    else:
                        ui.row(name, sub, icon=glyph, icon_color=color, rid="file_item",
                               on_click=lambda n=name: self._open_file(folder, n),
                               on_long_click=lambda n=name: self._start_select(n))
        if p.get("menu") and not selecting:
            cur = self.state.get("sort", "name")
            items = []
            for key, en, zh in (("name", "Name (A to Z)", "名称（A-Z）"), ("date", "Date (newest first)", "日期（最新优先）"),
                                ("size", "Size (largest first)", "大小（从大到小）")):
                items.append((("✓ " if key == cur else "   ") + self.t(en, zh), lambda k=key: self._set_sort(k),
                              f"sort_{key}"))
            ui.popup_menu(items, lambda: p.__setitem__("menu", False), rid="sort_menu")

    def build_file(self, ui: UI) -> None:
        p = self.params
        folder, name = p["folder"], p["name"]
        f = self._file(folder, name)
        ui.app_bar(name, back=self.pop)
        if f is None:
            ui.text(self.t("This file no longer exists", "此文件已不存在"), color=TEXT_2, rid="missing")
            return
        glyph, color = self._kind(name)
        ext = name.rsplit(".", 1)[-1].upper() if "." in name else "FILE"
        zoomed = bool(p.get("zoomed"))
        # a double tap zooms the preview in and out, as Android image viewers do
        ui.block(180, left=16, top=12, right=16, bottom=8, cls="android.widget.ImageView",
                 desc=self.t(f"Preview of {name}" + (" (zoomed in)" if zoomed else ""),
                             f"{name} 的预览" + ("（已放大）" if zoomed else "")),
                 rid="preview", paint="image", selected=zoomed, on_double_click=lambda: self._toggle_zoom(p),
                 style={"glyph": ext, "zoom": 2 if zoomed else 1,
                        "color": tuple(min(255, c + (255 - c) * 3 // 4) for c in color)})
        ui.row(self.t("Name", "名称"), name, rid="info_name")
        ui.row(self.t("Size", "大小"), size_text(f["size_kb"]), rid="info_size")
        ui.row(self.t("Modified", "修改时间"), self._date_text(f["modified"]), rid="info_modified")
        ui.row(self.t("Location", "位置"), self._path(folder), rid="info_path")
        ui.buttons([(self.t("Share", "分享"), lambda: self._share(folder, name), "share", "outlined"),
                    (self.t("Rename", "重命名"), lambda: self._open_rename(folder, name), "rename", "outlined"),
                    (self.t("Delete", "删除"), lambda: self._ask_delete(folder, [name], "pop"), "delete", "outlined")])

    def build_rename(self, ui: UI) -> None:
        p = self.params
        ui.app_bar(self.t("Rename", "重命名"), back=self.pop)
        ui.field("rename_value", p["value"], self.t("File name", "文件名"), lambda v: p.update(value=v, error=""),
                 on_submit=self._submit_rename, rid="name_input", label=self.t("New name", "新名称"), clear=True)
        if p.get("error"):
            ui.text(p["error"], color=DANGER, rid="error", size=14)
        ui.buttons([(self.t("Cancel", "取消"), self.pop, "cancel", "outlined"),
                    (self.t("OK", "确定"), self._submit_rename, "ok", "filled")])
