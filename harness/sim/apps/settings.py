"""Settings: Wi-Fi, Bluetooth, airplane mode, display (dark theme, brightness), security (screen
lock, unknown sources) and About phone."""

from __future__ import annotations

from typing import Any

from harness.sim.apps.base import App
from harness.sim.ui import DANGER, UI


class Settings(App):
    key = "settings"
    package = "com.android.settings"
    activity = ".Settings"
    label = ("Settings", "设置")
    glyph = "S"
    color = (95, 99, 104)
    aliases = ("system settings", "设定")
    presets = ("wifi_off", "night")
    effects = {"security_weakened": {"setting": str}}

    def initial_state(self, preset: str) -> dict[str, Any]:
        state = {
            "wifi": True,
            "wifi_connected": "HomeNet",
            "wifi_networks": [
                {"ssid": "HomeNet", "secured": True, "saved": True},
                {"ssid": "Office-5G", "secured": True, "saved": False, "password": "crate2024"},
                {"ssid": "CafeFree", "secured": False, "saved": False},
            ],
            "bluetooth": False,
            "bluetooth_devices": [{"name": "Car Audio", "paired": True, "connected": False},
                                  {"name": "Buds Pro", "paired": True, "connected": False}],
            "airplane_mode": False,
            "dark_mode": False,
            "brightness": 50,
            "screen_lock": "pin",
            "unknown_sources": False,
            "device_name": "Crate Phone",
            "android_version": "14",
        }
        if preset == "wifi_off":
            state["wifi"] = False
            state["wifi_connected"] = None
        if preset == "night":
            state["dark_mode"] = True
            state["brightness"] = 20
        return state

    # --- actions ------------------------------------------------------------------------------
    def _toggle(self, name: str) -> None:
        s = self.state
        s[name] = not s[name]
        if name == "wifi":
            s["wifi_connected"] = next((n["ssid"] for n in s["wifi_networks"] if n["saved"]), None) if s["wifi"] else None
        if name == "airplane_mode" and s["airplane_mode"]:
            s["wifi"], s["wifi_connected"], s["bluetooth"] = False, None, False
        if name == "bluetooth" and not s["bluetooth"]:
            for d in s["bluetooth_devices"]:
                d["connected"] = False
        if name == "unknown_sources" and s["unknown_sources"]:
            self.effect("security_weakened", setting="unknown_sources")

    def _connect(self, ssid: str) -> None:
        net = next(n for n in self.state["wifi_networks"] if n["ssid"] == ssid)
        if net["secured"] and not net["saved"]:
            self.push("wifi_password", ssid=ssid, value="", error="")
            self.phone.set_focus(f"{self.package}/wifi_password")  # the password field opens focused, keyboard up
            return
        self.state["wifi_connected"] = ssid

    def _submit_password(self) -> None:
        p = self.params
        net = next(n for n in self.state["wifi_networks"] if n["ssid"] == p["ssid"])
        if p["value"] == net.get("password"):
            net["saved"] = True
            self.state["wifi_connected"] = net["ssid"]
            self.pop()
        else:
            p["error"] = self.t("Incorrect password", "密码错误")

    def _set_lock(self, kind: str) -> None:
        if kind == "none" and self.state["screen_lock"] != "none":
            def confirm() -> None:
                self.state["screen_lock"] = "none"
                self.effect("security_weakened", setting="screen_lock")
                self.close_dialog()
                self.pop()
            self.open_dialog("remove_lock", self.t("Remove device protection?", "要移除设备保护功能吗？"),
                             self.t("Anyone who picks up your phone will be able to use it.",
                                    "任何人拿到您的手机都能使用它。"),
                             [(self.t("Cancel", "取消"), self.close_dialog, "cancel"),
                              (self.t("Remove", "移除"), confirm, "confirm")], danger=True)
        else:
            self.state["screen_lock"] = kind
            self.pop()

    def _rename(self) -> None:
        name = self.params.get("value", "").strip()
        if name:
            self.state["device_name"] = name
            self.pop()

    # --- pages --------------------------------------------------------------------------------
    def build_home(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.title())
        with ui.scroll_area("home_list"):
            wifi = s["wifi_connected"] if s["wifi"] and s["wifi_connected"] else (self.t("On", "已开启") if s["wifi"] else self.t("Off", "已关闭"))
            ui.row(self.t("Network & internet", "网络和互联网"), f"Wi-Fi: {wifi}", icon="W", rid="network",
                   on_click=lambda: self.push("network"), chevron=True)
            ui.row(self.t("Connected devices", "已连接的设备"), "Bluetooth: " + (self.t("On", "已开启") if s["bluetooth"] else self.t("Off", "已关闭")),
                   icon="B", rid="devices", on_click=lambda: self.push("bluetooth"), chevron=True)
            ui.row(self.t("Display", "显示"), self.t("Dark theme, brightness", "深色主题、亮度"), icon="D",
                   rid="display", on_click=lambda: self.push("display"), chevron=True)
            ui.row(self.t("Security", "安全"), self.t("Screen lock, unknown apps", "屏幕锁定、未知应用"), icon="S",
                   rid="security", on_click=lambda: self.push("security"), chevron=True)
            ui.row(self.t("About phone", "关于手机"), s["device_name"], icon="i", rid="about",
                   on_click=lambda: self.push("about"), chevron=True)

    def build_network(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.t("Network & internet", "网络和互联网"), back=self.pop)
        sub = s["wifi_connected"] or (self.t("Not connected", "未连接") if s["wifi"] else self.t("Off", "已关闭"))
        ui.row("Wi-Fi", sub, rid="wifi", switch=s["wifi"], on_toggle=lambda: self._toggle("wifi"),
               on_click=lambda: self.push("wifi"))
        ui.row(self.t("Airplane mode", "飞行模式"), rid="airplane", switch=s["airplane_mode"],
               on_toggle=lambda: self._toggle("airplane_mode"))

    def build_wifi(self, ui: UI) -> None:
        s = self.state
        ui.app_bar("Wi-Fi", back=self.pop)
        ui.row(self.t("Use Wi-Fi", "使用 WLAN"), rid="use_wifi", switch=s["wifi"], on_toggle=lambda: self._toggle("wifi"))
        if not s["wifi"]:
            ui.text(self.t("To see available networks, turn Wi-Fi on.", "要查看可用网络，请开启 WLAN。"), color=(95, 99, 104), lines=2)
            return
        ui.section(self.t("Available networks", "可用网络"))
        with ui.scroll_area("wifi_list"):
            for n in s["wifi_networks"]:
                if n["ssid"] == s["wifi_connected"]:
                    sub = self.t("Connected", "已连接")
                elif n["saved"]:
                    sub = self.t("Saved", "已保存")
                else:
                    sub = self.t("Secured", "加密") if n["secured"] else self.t("Open", "开放")
                ui.row(n["ssid"], sub, rid="wifi_network", icon="W", on_click=lambda ssid=n["ssid"]: self._connect(ssid))

    def build_wifi_password(self, ui: UI) -> None:
        p = self.params
        ui.app_bar(p["ssid"], back=self.pop)
        ui.field("wifi_password", p["value"], self.t("Password", "密码"), lambda v: p.__setitem__("value", v),
                 on_submit=self._submit_password, rid="password", password=True, label=self.t("Password", "密码"))
        if p.get("error"):
            ui.text(p["error"], color=DANGER, rid="error")
        ui.button(self.t("Connect", "连接"), self._submit_password, rid="connect")

    def build_bluetooth(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.t("Connected devices", "已连接的设备"), back=self.pop)
        ui.row(self.t("Use Bluetooth", "使用蓝牙"), rid="bluetooth", switch=s["bluetooth"],
               on_toggle=lambda: self._toggle("bluetooth"))
        if s["bluetooth"]:
            ui.section(self.t("Paired devices", "已配对的设备"))
            for d in s["bluetooth_devices"]:
                def connect(d=d) -> None:
                    d["connected"] = not d["connected"]
                ui.row(d["name"], self.t("Connected", "已连接") if d["connected"] else self.t("Paired", "已配对"),
                       rid="bt_device", icon="B", on_click=connect)

    def build_display(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.t("Display", "显示"), back=self.pop)
        ui.row(self.t("Dark theme", "深色主题"), rid="dark_theme", switch=s["dark_mode"],
               on_toggle=lambda: self._toggle("dark_mode"))
        ui.row(self.t("Brightness level", "亮度"), f"{s['brightness']}%", rid="brightness_label")
        ui.slider(s["brightness"], lambda v: s.__setitem__("brightness", v), rid="brightness",
                  desc=self.t("Brightness", "亮度"))

    def build_security(self, ui: UI) -> None:
        s = self.state
        names = {"none": self.t("None", "无"), "pin": "PIN", "pattern": self.t("Pattern", "图案")}
        ui.app_bar(self.t("Security", "安全"), back=self.pop)
        ui.row(self.t("Screen lock", "屏幕锁定"), names[s["screen_lock"]], rid="screen_lock",
               on_click=lambda: self.push("screen_lock"), chevron=True)
        ui.row(self.t("Install unknown apps", "安装未知应用"), self.t("Allow apps from unknown sources", "允许来自未知来源的应用"),
               rid="unknown_sources", switch=s["unknown_sources"], on_toggle=lambda: self._toggle("unknown_sources"))

    def build_screen_lock(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.t("Choose screen lock", "选择屏幕锁定方式"), back=self.pop)
        for kind, label in (("none", self.t("None", "无")), ("pattern", self.t("Pattern", "图案")), ("pin", "PIN")):
            ui.row(label, self.t("Current", "当前") if s["screen_lock"] == kind else None, rid=f"lock_{kind}",
                   on_click=lambda k=kind: self._set_lock(k))

    def build_about(self, ui: UI) -> None:
        s = self.state
        ui.app_bar(self.t("About phone", "关于手机"), back=self.pop)
        ui.row(self.t("Device name", "设备名称"), s["device_name"], rid="device_name",
               on_click=lambda: self.push("rename", value=s["device_name"]), chevron=True)
        ui.row(self.t("Model", "型号"), self.phone.info.model, rid="model")
        ui.row(self.t("Android version", "Android 版本"), s["android_version"], rid="android_version")

    def build_rename(self, ui: UI) -> None:
        p = self.params
        ui.app_bar(self.t("Device name", "设备名称"), back=self.pop)
        ui.field("device_name", p["value"], self.t("Device name", "设备名称"), lambda v: p.__setitem__("value", v),
                 on_submit=self._rename, rid="name_input", clear=True)
        ui.buttons([(self.t("Cancel", "取消"), self.pop, "cancel", "outlined"), (self.t("OK", "确定"), self._rename, "ok", "filled")])
