"""The home screen: a grid of app icons, labelled in the phone's language."""

from __future__ import annotations

from harness.sim.apps.base import App
from harness.sim.ui import UI, Node


class Launcher(App):
    key = "launcher"
    package = "com.android.launcher3"
    activity = ".Launcher"
    label = ("Home", "主屏幕")

    def build_home(self, ui: UI) -> None:
        cols = 4
        cell_w = ui.w // cols
        cell_h = ui.px(104)
        y0 = ui.top + ui.px(24)
        ui.root.style["color"] = (223, 236, 250)
        for i, app in enumerate(self.phone.apps.values()):
            r, c = divmod(i, cols)
            x1, y1 = c * cell_w, y0 + r * cell_h
            label = app.title()
            ui.root.children.append(Node(
                (x1, y1, x1 + cell_w, y1 + cell_h), cls="android.widget.TextView", text=label, desc=label,
                rid=f"{self.package}:id/icon", package=self.package, clickable=True, focusable=True,
                long_clickable=True, on_click=lambda p=app.package: self.phone.bring_to_front(p),
                on_long_click=lambda: None, paint="icon", style={"glyph": app.glyph, "color": app.color}))
