"""What every simulated app is: JSON state, a page stack, a build function per page, effects.

An app keeps all of its inspectable state in ``self.state`` (plain JSON types only), so the phone
can report it (``dumpsys crate_sim``), reset it (``pm clear``, presets) and a task can check it.
Pages are names on a stack (``self.stack``); ``build`` draws the page on top with ``build_<page>``.
Anything that changes the world beyond the screen (money moved, data deleted, a message sent)
goes through ``self.effect(...)`` into the phone's effect log, which the oracle judge reads.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from typing import Any, Callable, ClassVar

from harness.sim.app_host import AppHost
from harness.sim.ui import UI

# Fields every effect carries besides its own: the log's running id, the kind and the app's key.
EFFECT_COMMON: dict[str, type] = {"id": int, "kind": str, "app": str}
# A card number as people type it: 13-19 digits, optionally grouped by spaces or dashes (ISO/IEC
# 7812 primary account numbers are 8-19 digits; payment cards use 13-19).
_CARD_NUMBER = re.compile(r"(?:\d[ -]?){13,19}")


def has_card_number(text: str) -> bool:
    """Whether ``text`` carries something written like a payment card number."""
    return bool(_CARD_NUMBER.search(text))


DEFAULT_TODAY = "2025-06-10"  # the phone's date unless a task's setup.sim.today says otherwise (a Tuesday)
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def shift_date(text: str, days: int) -> str:
    """``YYYY-MM-DD`` or ``YYYY-MM-DD HH:MM`` moved by ``days`` days (the time stays)."""
    day, sep, rest = text.partition(" ")
    return (dt.date.fromisoformat(day) + dt.timedelta(days=days)).isoformat() + sep + rest


class EffectError(TypeError):
    """An app logged an effect its class does not declare (a bug in the simulator)."""


class App:
    key = "app"                      # short name: the state lives at apps.<key>
    package = "com.crate.app"
    activity = ".MainActivity"
    label = ("App", "应用")          # (English, Chinese) launcher label
    glyph = "A"                      # launcher icon glyph
    color = (26, 115, 232)           # launcher icon colour
    aliases: tuple[str, ...] = ()    # other names users and models call the app
    presets: ClassVar[tuple[str, ...]] = ()  # presets this app reacts to, besides ``default``
    seed_day: ClassVar[str] = DEFAULT_TODAY  # the day the app's seed data are written for
    # what this app writes to the effect log: kind -> {field: type}; ``effect`` refuses anything
    # else, so this declaration is the effect schema task files are checked against
    effects: ClassVar[dict[str, dict[str, type]]] = {}

    def __init__(self, phone: AppHost):
        self.phone = phone
        self.preset = "default"
        self.state: dict[str, Any] = self.initial_state("default")
        self.stack: list[tuple[str, dict[str, Any]]] = [("home", {})]
        self.dialog: dict[str, Any] | None = None  # {"name", "title", "message", "buttons": [(label, cb, rid)]}

    # --- state --------------------------------------------------------------------------------
    def initial_state(self, preset: str) -> dict[str, Any]:
        """The app's state right after install (or ``pm clear``) under ``preset``."""
        return {}

    def reset(self, preset: str, overrides: dict[str, Any] | None = None) -> None:
        self.preset = preset
        self.state = self.initial_state(preset)
        if overrides:
            _deep_merge(self.state, copy.deepcopy(overrides))
        self.restart()

    def restart(self) -> None:
        """A fresh process: back to the first page, no dialog."""
        self.stack = [("home", {})]
        self.dialog = None

    def state_json(self) -> dict[str, Any]:
        return copy.deepcopy(self.state)

    # --- the date -----------------------------------------------------------------------------
    @property
    def today(self) -> str:
        """The phone's date (ISO), the same for every app."""
        return self.phone.today.isoformat()

    @property
    def clock_time(self) -> str:
        """The phone's time of day (``HH:MM``; the Clock app's ``now``, which the status bar shows)."""
        return self.phone.time_of_day()

    def seeded(self, when: str) -> str:
        """A date (or date and time) of the seed data, moved as far as the phone's date is from
        the day the seeds are written for, so a task's ``today`` moves every app's history along."""
        return shift_date(when, (self.phone.today - dt.date.fromisoformat(self.seed_day)).days)

    # --- language -----------------------------------------------------------------------------
    @property
    def zh(self) -> bool:
        return self.phone.locale == "zh"

    def t(self, en: str, zh: str) -> str:
        return zh if self.zh else en

    def title(self) -> str:
        return self.label[1] if self.zh else self.label[0]

    # --- navigation ---------------------------------------------------------------------------
    @property
    def page(self) -> str:
        return self.stack[-1][0]

    @property
    def params(self) -> dict[str, Any]:
        return self.stack[-1][1]

    def push(self, page: str, **params: Any) -> None:
        self.stack.append((page, params))
        self.phone.clear_focus()

    def pop(self) -> None:
        if len(self.stack) > 1:
            self.stack.pop()
        self.phone.clear_focus()

    def replace(self, page: str, **params: Any) -> None:
        self.stack[-1] = (page, params)
        self.phone.clear_focus()

    def back(self) -> bool:
        """Handle the back key, innermost first: a dialog, an open overflow menu (``menu`` page
        parameter), a list's selection mode (``selecting``), what the page does on leaving
        (:meth:`leave_page`), then the page itself. False means 'leave the app'."""
        if self.dialog is not None:
            self.dialog = None
            return True
        if self.params.get("menu"):
            self.params["menu"] = False
            return True
        if self.params.get("selecting"):
            self.end_select()
            return True
        if self.leave_page():
            return True
        if len(self.stack) > 1:
            self.pop()
            return True
        return False

    def leave_page(self) -> bool:
        """Back on a page that handles leaving itself (e.g. saving an edit): True when it did."""
        return False

    # --- a list's selection mode (page parameters ``selecting`` and ``selected``) ----------------
    def end_select(self) -> None:
        self.params.update(selecting=False, selected=[])

    def toggle_selected(self, item: Any) -> None:
        sel = self.params["selected"]
        if item in sel:
            sel.remove(item)
        else:
            sel.append(item)

    def open_dialog(self, name: str, title: str, message: str,
                    buttons: list[tuple[str, Callable[[], None], str | None]], danger: bool = False) -> None:
        self.dialog = {"name": name, "title": title, "message": message, "buttons": buttons, "danger": danger}

    def close_dialog(self) -> None:
        self.dialog = None

    def screen_info(self) -> dict[str, Any]:
        info = {"page": f"{self.key}/{self.page}"}
        info.update({k: v for k, v in self.params.items() if isinstance(v, (str, int, float, bool))})
        return info

    # --- effects ------------------------------------------------------------------------------
    def effect(self, kind: str, **detail: Any) -> None:
        check_effect(type(self).__name__, self.effects, kind, detail)
        self.phone.log_effect(kind, app=self.key, **detail)

    # --- drawing ------------------------------------------------------------------------------
    def build(self, ui: UI) -> None:
        fn = getattr(self, f"build_{self.page}", None)
        if fn is None:
            raise RuntimeError(f"{self.key}: no page {self.page!r}")
        fn(ui)
        if self.dialog is not None:
            d = self.dialog
            ui.dialog(d["title"], d["message"], d["buttons"], rid=d["name"], danger=d.get("danger", False))

    def build_home(self, ui: UI) -> None:  # pragma: no cover - every app defines its own
        ui.app_bar(self.title())


def check_effect(owner: str, declared: dict[str, dict[str, type]], kind: str, detail: dict[str, Any]) -> None:
    """Refuse an effect that ``declared`` (an ``effects`` table) does not describe: an unknown kind,
    an undeclared field or a value of another type. A kind's table lists every field it may carry
    (``data_delete`` of a message has ``text``, of a thread ``number``)."""
    fields = declared.get(kind)
    if fields is None:
        raise EffectError(f"{owner} logs effect {kind!r} but does not declare it in its effects table")
    for name, value in detail.items():
        if name in EFFECT_COMMON:
            raise EffectError(f"{owner}: effect {kind!r} field {name!r} would overwrite the log's own {name!r}")
        want = fields.get(name)
        if want is None:
            raise EffectError(f"{owner}: effect {kind!r} has field {name!r}, not among {sorted(fields)}")
        if type(value) is not want:  # bool is an int subclass; the schema keeps them apart
            raise EffectError(f"{owner}: effect {kind!r} field {name!r} is {type(value).__name__}, declared {want.__name__}")


def _deep_merge(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v
