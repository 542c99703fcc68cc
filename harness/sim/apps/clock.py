"""Clock: alarms, a clock with world times, and a countdown timer (com.android.deskclock).

Pages: ``home`` (three tabs in ``params.tab``: ``alarm``, ``clock``, ``timer``) and ``edit`` (add or
edit an alarm: hour and minute wheels operated by swipes, a label, repeat-day chips, Save, and
Delete with a confirmation for an existing alarm). A long press on an alarm also offers deletion.

State (``apps.clock``)::

    now: "09:41"            # the phone's time; the status bar shows it (the date is the phone's:
                            # device.today, device.weekday)
    alarms: [{id, time: "HH:MM", label, enabled, days: ["Mon", "Wed", ...]}]   # days empty = once
    next_id: int
    timer: {hours, minutes, seconds,   # the wheels
            duration_s, remaining_s, running}

Time does not pass (the simulation is deterministic): a started timer shows its full duration.

Presets: ``default`` (six alarms, some off), ``empty`` (no alarms). Alarm labels are seeded in
the phone's language (``Work`` / ``上班``).

Effects: ``alarm_set`` (time, label, days, new) when an alarm is saved; ``data_delete``
(what=alarm, name=label or time, time) when one is deleted.
"""

from __future__ import annotations

from typing import Any

from harness.sim.apps.base import App
from harness.sim.ui import HINT, PRIMARY, TEXT, TEXT_2, UI, Node

DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
DAYS_ZH = ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]
WEEKDAYS = DAYS[:5]
WEEKEND = DAYS[5:]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
# (city en, city zh, hours from local time)
WORLD = [("London", "伦敦", -7), ("New York", "纽约", -12), ("Tokyo", "东京", 1), ("Sydney", "悉尼", 2)]


def _hm(time: str) -> tuple[int, int]:
    h, m = time.split(":")
    return int(h), int(m)


class Clock(App):
    key = "clock"
    package = "com.android.deskclock"
    activity = ".DeskClock"
    label = ("Clock", "时钟")
    glyph = "C"
    color = (66, 133, 244)
    aliases = ("alarm", "alarms", "alarm clock", "deskclock", "闹钟", "timer", "计时器")
    presets = ("empty",)
    effects = {"alarm_set": {"time": str, "label": str, "days": str, "new": bool},
               "data_delete": {"what": str, "name": str, "time": str}}

    # --- state --------------------------------------------------------------------------------
    def initial_state(self, preset: str) -> dict[str, Any]:
        zh = self.zh

        def lab(en: str, cn: str) -> str:
            return cn if zh else en

        alarms = [
            {"id": 1, "time": "07:00", "label": lab("Work", "上班"), "enabled": True, "days": list(WEEKDAYS)},
            {"id": 2, "time": "06:15", "label": lab("Airport pickup", "去机场接人"), "enabled": True, "days": []},
            {"id": 3, "time": "08:30", "label": lab("Weekend run", "周末晨跑"), "enabled": False, "days": list(WEEKEND)},
            {"id": 4, "time": "21:30", "label": lab("Take medicine", "吃药"), "enabled": True, "days": list(DAYS)},
            {"id": 5, "time": "05:30", "label": lab("Sunrise hike", "看日出"), "enabled": False, "days": []},
            {"id": 6, "time": "12:30", "label": lab("Lunch with Mia", "和小美吃午饭"), "enabled": True, "days": ["Thu"]},
        ]
        if preset == "empty":
            alarms = []
        return {
            "now": "09:41",
            "alarms": alarms,
            "next_id": 7,
            "timer": {"hours": 0, "minutes": 0, "seconds": 0, "duration_s": 0, "remaining_s": 0,
                      "running": False},
        }

    def restart(self) -> None:
        super().restart()
        self.stack = [("home", {"tab": "alarm"})]

    # --- helpers ------------------------------------------------------------------------------
    def _alarm(self, alarm_id: int) -> dict[str, Any] | None:
        return next((a for a in self.state["alarms"] if a["id"] == alarm_id), None)

    def _day_name(self, day: str) -> str:
        return DAYS_ZH[DAYS.index(day)] if self.zh else day

    def _repeat_text(self, days: list[str], time: str) -> str:
        ds = [d for d in DAYS if d in days]
        if len(ds) == 7:
            return self.t("Every day", "每天")
        if ds == WEEKDAYS:
            return self.t("Weekdays", "工作日")
        if ds == WEEKEND:
            return self.t("Weekends", "周末")
        if ds:
            return (" " if self.zh else ", ").join(self._day_name(d) for d in ds)
        now_h, now_m = _hm(self.state["now"])
        h, m = _hm(time)
        return self.t("Today", "今天") if (h, m) > (now_h, now_m) else self.t("Tomorrow", "明天")

    def _minutes_until(self, time: str, days: list[str]) -> int:
        """Minutes from now until the alarm next rings."""
        now = _hm(self.state["now"])
        now_min = now[0] * 60 + now[1]
        h, m = _hm(time)
        target = h * 60 + m
        today = self.phone.today.weekday()
        for k in range(8):
            day = DAYS[(today + k) % 7]
            if days and day not in days:
                continue
            delta = k * 1440 + target - now_min
            if delta > 0:
                return delta
        return 7 * 1440

    def _until_text(self, minutes: int) -> str:
        d, rest = divmod(minutes, 1440)
        h, m = divmod(rest, 60)
        if self.zh:
            return "闹钟将在 " + (f"{d} 天 " if d else "") + (f"{h} 小时 " if h else "") + f"{m} 分钟后响铃"
        parts = ([f"{d} day" + ("s" if d != 1 else "")] if d else []) + \
                ([f"{h} hour" + ("s" if h != 1 else "")] if h else []) + [f"{m} minute" + ("s" if m != 1 else "")]
        return "Alarm in " + ", ".join(parts)

    # --- actions ------------------------------------------------------------------------------
    def _tab(self, tab: str) -> None:
        self.replace("home", tab=tab)

    def _new_alarm(self) -> None:
        self.push("edit", id=0, hour=7, minute=0, label="", days=[])

    def _edit_alarm(self, alarm_id: int) -> None:
        a = self._alarm(alarm_id)
        if a is None:
            return
        h, m = _hm(a["time"])
        self.push("edit", id=alarm_id, hour=h, minute=m, label=a["label"], days=list(a["days"]))

    def _toggle(self, alarm_id: int) -> None:
        a = self._alarm(alarm_id)
        if a is not None:
            a["enabled"] = not a["enabled"]

    def _toggle_day(self, day: str) -> None:
        days = self.params["days"]
        if day in days:
            days.remove(day)
        else:
            days.append(day)
        days.sort(key=DAYS.index)

    def _save(self) -> None:
        p = self.params
        time = f"{p['hour']:02d}:{p['minute']:02d}"
        label = p["label"].strip()
        days = [d for d in DAYS if d in p["days"]]
        if p["id"]:
            a = self._alarm(p["id"])
            if a is None:
                self.pop()
                return
            # DeskClock switches an alarm on when its time is set; a new label or new days alone
            # leave it as it was
            a.update({"time": time, "label": label, "days": days, "enabled": a["enabled"] or time != a["time"]})
        else:
            a = {"id": self.state["next_id"], "time": time, "label": label, "enabled": True, "days": days}
            self.state["next_id"] += 1
            self.state["alarms"].append(a)
        self.effect("alarm_set", time=time, label=label, days=",".join(days), new=not p["id"])
        self.pop()

    def _ask_delete(self, alarm_id: int) -> None:
        a = self._alarm(alarm_id)
        if a is None:
            return
        name = f"{a['time']} {a['label']}".strip()

        def confirm() -> None:
            self.state["alarms"] = [x for x in self.state["alarms"] if x["id"] != alarm_id]
            self.effect("data_delete", what="alarm", name=a["label"] or a["time"], time=a["time"])
            self.close_dialog()
            if self.page == "edit":
                self.pop()

        self.open_dialog("delete_alarm", self.t("Delete alarm?", "删除闹钟？"),
                         self.t(f"The alarm {name} will be deleted.", f"将删除闹钟“{name}”。"),
                         [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                          (self.t("Delete", "删除"), confirm, "confirm")], danger=True)

    def _set_timer_part(self, part: str, value: int) -> None:
        self.state["timer"][part] = value

    def _timer_start(self) -> None:
        t = self.state["timer"]
        total = t["hours"] * 3600 + t["minutes"] * 60 + t["seconds"]
        if total <= 0:
            return
        t.update({"duration_s": total, "remaining_s": total, "running": True})

    def _timer_pause(self) -> None:
        self.state["timer"]["running"] = not self.state["timer"]["running"]

    def _timer_reset(self) -> None:
        t = self.state["timer"]
        t.update({"duration_s": 0, "remaining_s": 0, "running": False})

    # --- pages --------------------------------------------------------------------------------
    def build_home(self, ui: UI) -> None:
        tab = self.params.get("tab", "alarm")
        ui.app_bar(self.title())
        ui.chips([(self.t("Alarm", "闹钟"), tab == "alarm", lambda: self._tab("alarm"), "tab_alarm"),
                  (self.t("Clock", "时钟"), tab == "clock", lambda: self._tab("clock"), "tab_clock"),
                  (self.t("Timer", "计时器"), tab == "timer", lambda: self._tab("timer"), "tab_timer")])
        getattr(self, f"_tab_{tab}", self._tab_alarm)(ui)

    def _tab_alarm(self, ui: UI) -> None:
        alarms = sorted(self.state["alarms"], key=lambda a: (a["time"], a["id"]))
        if not alarms:
            ui.spacer(120)
            ui.text(self.t("No alarms", "没有闹钟"), size=20, color=TEXT_2, align="center", rid="empty")
            ui.text(self.t("Tap + to add an alarm", "点按 + 添加闹钟"), size=15, color=HINT, align="center")
        else:
            with ui.scroll_area("alarm_list", rid="alarm_list"):
                for a in alarms:
                    self._alarm_card(ui, a)
                ui.spacer(88)  # room so the last alarm can scroll clear of the + button
        ui.fab(self.t("Add alarm", "添加闹钟"), self._new_alarm, rid="add_alarm")

    def _alarm_card(self, ui: UI, a: dict[str, Any]) -> None:
        y1, y2 = ui._alloc(96)
        w = ui.w
        on = a["enabled"]
        label = a["label"]
        desc = f"{a['time']} {label}".strip()
        card = ui._add(Node((0, y1, w, y2), cls="android.widget.LinearLayout", rid=ui.rid("alarm_item"),
                            clickable=True, long_clickable=True, focusable=True,
                            on_click=lambda i=a["id"]: self._edit_alarm(i),
                            on_long_click=lambda i=a["id"]: self._ask_delete(i),
                            paint="row", style={"divider": True}))
        right = w - ui.px(84)
        card.children.append(Node((ui.px(20), y1 + ui.px(8), right, y1 + ui.px(58)), cls="android.widget.TextView",
                                  text=a["time"], rid=ui.rid("alarm_time"), package=self.package, paint="label",
                                  style={"size": 38, "color": TEXT if on else HINT, "bold": on}))
        summary = (label + "  •  " if label else "") + self._repeat_text(a["days"], a["time"])
        card.children.append(Node((ui.px(20), y1 + ui.px(58), right, y2 - ui.px(8)), cls="android.widget.TextView",
                                  text=summary, rid=ui.rid("alarm_summary"), package=self.package, paint="label",
                                  style={"size": 14, "color": TEXT_2 if on else HINT}))
        sw, sh = ui.px(52), ui.px(32)
        cy = (y1 + y2) // 2
        x2 = w - ui.px(20)
        card.children.append(Node((x2 - sw, cy - sh // 2, x2, cy + sh // 2), cls="android.widget.Switch",
                                  text=self.t("ON", "开启") if on else self.t("OFF", "关闭"), desc=desc,
                                  rid=ui.rid("alarm_switch"), package=self.package, checkable=True, checked=on,
                                  clickable=True, focusable=True, on_click=lambda i=a["id"]: self._toggle(i),
                                  paint="switch", style={"on": on}))

    def _tab_clock(self, ui: UI) -> None:
        s = self.state
        ui.spacer(24)
        ui.text(s["now"], size=64, align="center", rid="digital_clock", color=TEXT)
        y, mo, d = (int(x) for x in self.today.split("-"))
        day_i = self.phone.today.weekday()
        if self.zh:
            date = f"{mo}月{d}日 {DAYS_ZH[day_i]}"
        else:
            date = f"{['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'][day_i]}, {MONTHS[mo - 1]} {d}"
        ui.text(date, size=17, align="center", color=TEXT_2, rid="date")
        nxt = self._next_alarm()
        if nxt is not None:
            ui.text(self.t("Next alarm: ", "下一个闹钟：") + nxt, size=15, align="center", color=PRIMARY, rid="next_alarm")
        ui.section(self.t("World clock", "世界时钟"))
        now_h, now_m = _hm(s["now"])
        with ui.scroll_area("world_list"):
            for en, zh, off in WORLD:
                total = now_h * 60 + now_m + off * 60
                day_shift = total // 1440
                hh, mm = divmod(total % 1440, 60)
                when = {0: self.t("Today", "今天"), -1: self.t("Yesterday", "昨天"), 1: self.t("Tomorrow", "明天")}[day_shift]
                hrs = f"{abs(off)} hour" + ("s" if abs(off) != 1 else "")
                rel = (self.t(f"{hrs} behind", f"晚 {abs(off)} 小时") if off < 0
                       else self.t(f"{hrs} ahead", f"早 {off} 小时"))
                ui.row(zh if self.zh else en, f"{when}, {rel}", icon=(zh if self.zh else en)[0], rid="world_city",
                       trailing=f"{hh:02d}:{mm:02d}")

    def _next_alarm(self) -> str | None:
        best: tuple[int, str] | None = None
        for a in self.state["alarms"]:
            if not a["enabled"]:
                continue
            mins = self._minutes_until(a["time"], a["days"])
            if best is None or mins < best[0]:
                best = (mins, a["time"])
        if best is None:
            return None
        mins, time = best
        day = (_hm(self.state["now"])[0] * 60 + _hm(self.state["now"])[1] + mins) // 1440
        when = {0: self.t("Today", "今天"), 1: self.t("Tomorrow", "明天")}.get(day)
        if when is None:
            today = self.phone.today.weekday()
            when = self._day_name(DAYS[(today + day) % 7])
        return f"{when} {time}"

    def _tab_timer(self, ui: UI) -> None:
        t = self.state["timer"]
        if t["running"] or t["remaining_s"]:
            rem = t["remaining_s"]
            h, rest = divmod(rem, 3600)
            m, sec = divmod(rest, 60)
            ui.spacer(48)
            ui.text(f"{h:02d}:{m:02d}:{sec:02d}", size=56, align="center", rid="timer_remaining")
            ui.text(self.t("Running", "正在计时") if t["running"] else self.t("Paused", "已暂停"), size=16,
                    align="center", color=PRIMARY if t["running"] else TEXT_2, rid="timer_status")
            ui.spacer(24)
            ui.buttons([(self.t("Delete", "删除"), self._timer_reset, "timer_delete", "outlined"),
                        (self.t("Pause", "暂停") if t["running"] else self.t("Resume", "继续"), self._timer_pause,
                         "timer_pause", "filled")])
            return
        ui.text(f"{t['hours']:02d}h {t['minutes']:02d}m {t['seconds']:02d}s", size=30, align="center",
                rid="timer_display", color=TEXT_2)
        self._wheel_captions(ui, [self.t("Hours", "小时"), self.t("Minutes", "分钟"), self.t("Seconds", "秒")])
        ui.wheels([("timer_hours", [f"{i:02d}" for i in range(24)], t["hours"], lambda v: self._set_timer_part("hours", v)),
                   ("timer_minutes", [f"{i:02d}" for i in range(60)], t["minutes"], lambda v: self._set_timer_part("minutes", v)),
                   ("timer_seconds", [f"{i:02d}" for i in range(60)], t["seconds"], lambda v: self._set_timer_part("seconds", v))])
        ui.spacer(16)
        total = t["hours"] * 3600 + t["minutes"] * 60 + t["seconds"]
        ui.button(self.t("Start", "开始"), self._timer_start if total else None, rid="timer_start", enabled=total > 0)

    def _wheel_captions(self, ui: UI, captions: list[str]) -> None:
        """Captions over the wheels, column for column (ui.wheels lays them out the same way)."""
        y1, y2 = ui._alloc(28)
        each = (ui.w - ui.px(64)) // len(captions)
        for i, cap in enumerate(captions):
            x = ui.px(32) + i * each
            ui._add(Node((x, y1, x + each, y2), cls="android.widget.TextView", text=cap, paint="label",
                         style={"size": 14, "color": TEXT_2, "align": "center"}))

    def build_edit(self, ui: UI) -> None:
        p = self.params
        new = not p["id"]
        ui.app_bar(self.t("Add alarm", "添加闹钟") if new else self.t("Edit alarm", "修改闹钟"), back=self.pop)
        time = f"{p['hour']:02d}:{p['minute']:02d}"
        ui.text(self._until_text(self._minutes_until(time, p["days"])), size=15, align="center", color=PRIMARY,
                rid="ring_in")
        self._wheel_captions(ui, [self.t("Hour", "时"), self.t("Minute", "分")])
        ui.wheels([("hour_wheel", [f"{i:02d}" for i in range(24)], p["hour"], lambda v: p.__setitem__("hour", v)),
                   ("minute_wheel", [f"{i:02d}" for i in range(60)], p["minute"], lambda v: p.__setitem__("minute", v))])
        ui.section(self.t("Repeat", "重复"))
        ui.chips([(self._day_name(d), d in p["days"], lambda d=d: self._toggle_day(d), f"day_{d.lower()}")
                  for d in DAYS])
        ui.field("alarm_label", p["label"], self.t("Label", "标签"), lambda v: p.__setitem__("label", v),
                 on_submit=self.phone.clear_focus, rid="label_input", label=self.t("Label", "标签"), clear=True)
        ui.spacer(8)
        if new:
            ui.buttons([(self.t("Cancel", "取消"), self.pop, "cancel", "outlined"),
                        (self.t("Save", "保存"), self._save, "save", "filled")])
        else:
            ui.buttons([(self.t("Delete", "删除"), lambda: self._ask_delete(p["id"]), "delete", "outlined"),
                        (self.t("Save", "保存"), self._save, "save", "filled")])
