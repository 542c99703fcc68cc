"""The phone as its apps (and the lock screen) see it.

Apps are built by the phone and draw into its pages, so they need a few of its services: the
world's effect log, the input focus, the shared date and clock, scroll positions, the file system,
the clipboard, the other apps (for the share sheet), the screen's geometry and language. They reach
them through this protocol (:class:`AppHost`), never through :class:`harness.sim.phone.SimPhone`
itself, so the phone imports its apps and no app imports the phone. The phone's own parts (the
keyboard, the system UI) see a little more of it (:class:`PhoneParts`), the same way.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Protocol

from harness.sim.phone_api import DeviceInfo
from harness.sim.ui import Node


class AppHost(Protocol):
    info: DeviceInfo
    locale: str
    dp: float
    today: dt.date
    focus_key: str | None
    scroll_offsets: dict[str, int]
    clipboard: str
    fs: Any                  # harness.sim.fs.MemoryFS
    apps: dict[str, Any]     # package -> App
    by_key: dict[str, Any]   # app key -> App

    @property
    def size(self) -> tuple[int, int]: ...

    def log_effect(self, kind: str, **detail: Any) -> None:
        """Append one effect (money moved, data deleted, a message sent) to the world's log."""

    def set_focus(self, key: str | None) -> None: ...

    def clear_focus(self) -> None: ...

    def register_focused(self, node: Node, area: tuple[str, tuple[int, int, int, int]] | None = None) -> None:
        """The focused field as laid out, and the scroll area it is in."""

    def time_of_day(self) -> str: ...

    def bring_to_front(self, package: str) -> None:
        """Open ``package`` (started if it was not running) as the launcher does; caller holds the lock."""

    def share_to(self, app_key: str, payload: dict[str, Any]) -> None: ...


class PhoneParts(AppHost, Protocol):
    """The phone as its own parts see it (the soft keyboard, the system UI around the apps): what
    its apps see, plus the state the system screens show and change and the few actions they take.
    They reach the phone through this protocol, never through :class:`harness.sim.phone.SimPhone`,
    so the phone imports its parts and no part imports the phone. Called with the phone's lock held."""

    width: int
    foreground: str          # the package in front
    recents: list[str]       # the recent-apps screen's packages, oldest first
    show_recents: bool
    launches: int
    anomalies: dict[str, Any]  # a preset's armed anomalies (ad pop-up, permission prompt) and their state

    def press_key(self, name: str) -> None:
        """A key by its name (``HOME``, ``BACK``, ``DEL``, ``ENTER``, a letter...), as ``input keyevent``."""

    def type_text(self, text: str) -> None:
        """Text typed into the focused field."""

    def stop_app(self, package: str) -> None:
        """Stop ``package`` as force-stop does."""

    def system_effect(self, kind: str, app: str, **detail: Any) -> None:
        """Log an effect of the system itself (a permission granted, an ad clicked)."""
