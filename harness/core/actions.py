"""The unified action space: one typed, validated, JSON-serialisable object per agent action.

Every agent's output is turned into one of these before it reaches a device, every recorded step
holds one, and every judge reads one. Points are always device pixels (x to the right, y down,
origin top-left). Conversions from the coordinate spaces models use (0-1 fractions, the 0-1000
grid, pixels of a resized image) live in this module and nowhere else.

JSON shapes (``type`` selects the kind)::

    {"type": "click", "x": 540, "y": 1200}
    {"type": "long_press", "x": 540, "y": 1200, "duration_ms": 1000}
    {"type": "double_tap", "x": 540, "y": 1200}
    {"type": "swipe", "start": [540, 1800], "end": [540, 600], "duration_ms": 300}
    {"type": "type", "text": "hello", "submit": false, "clear": false}   # clear: empty the field first
    {"type": "key", "key": "back"}            # back, home, enter, delete, app_switch, or a keycode int
    {"type": "open_app", "app": "Settings"}   # a label or a package name
    {"type": "wait", "seconds": 2}
    {"type": "answer", "text": "42"}
    {"type": "finish", "status": "complete"}  # or "infeasible"
    {"type": "needs_user", "text": "Please enter the PIN"}  # the agent hands the phone to a person
"""

from __future__ import annotations

import math
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, StrictInt, TypeAdapter, ValidationError, field_validator,
                      model_serializer)

# Largest coordinate we accept at all; real screens are far below this. Anything larger is a
# model's mistake (or an attack on integer handling) and is refused at validation time.
MAX_COORD = 100_000
# Android keycodes are small integers (KeyEvent.java goes up to ~320); a bound keeps garbage out.
MAX_KEYCODE = 1000
MAX_TEXT = 10_000

NAMED_KEYS = ("back", "home", "enter", "delete", "app_switch")


class ActionError(ValueError):
    """An action that cannot be built or executed; the message says which field is wrong."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def describe(self) -> str:
        """A short human/model-readable rendering, e.g. ``click(540, 1200)``."""
        fields = {k: v for k, v in self.to_json().items() if k != "type"}
        inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        return f"{self.type}({inner})"  # type: ignore[attr-defined]


# strict: a JSON true is not the coordinate 1, and "12" is not 12 (models send both by mistake)
Coord = Annotated[StrictInt, Field(ge=0, le=MAX_COORD)]


class Click(_Base):
    type: Literal["click"] = "click"
    x: Coord
    y: Coord


class LongPress(_Base):
    type: Literal["long_press"] = "long_press"
    x: Coord
    y: Coord
    duration_ms: int = Field(default=1000, ge=1, le=60_000)


class DoubleTap(_Base):
    """Two taps at one point, close enough in time that Android's GestureDetector calls it a double
    tap (its second touch comes 40-300 ms after the first, ViewConfiguration DOUBLE_TAP_MIN_TIME and
    DOUBLE_TAP_TIMEOUT). AndroidWorld's ``double_tap`` (env/json_action.py) is this action."""

    type: Literal["double_tap"] = "double_tap"
    x: Coord
    y: Coord


class Swipe(_Base):
    """A finger moving from ``start`` to ``end``. Content under the finger moves the same way: a
    swipe from bottom to top scrolls a list towards its end (this is the finger's direction, not
    the scroll direction; datasets disagree on the word, see FIELD_NOTES section 6)."""

    type: Literal["swipe"] = "swipe"
    start: tuple[Coord, Coord]
    end: tuple[Coord, Coord]
    duration_ms: int = Field(default=300, ge=1, le=60_000)


class TypeText(_Base):
    """Text into the focused field. ``clear`` empties the field first (its old text would
    otherwise stay in front of the new); ``submit`` presses enter after."""

    type: Literal["type"] = "type"
    text: str = Field(max_length=MAX_TEXT)
    submit: bool = False
    clear: bool = False

    @model_serializer(mode="wrap")
    def _omit_no_clear(self, handler: Any) -> dict[str, Any]:
        # ``clear`` appears in the JSON only when set: records and fixtures written before it
        # existed read and compare the same
        out = handler(self)
        if not self.clear:
            out.pop("clear", None)
        return out


class Key(_Base):
    type: Literal["key"] = "key"
    key: Union[Literal["back", "home", "enter", "delete", "app_switch"], Annotated[StrictInt, Field(ge=0, le=MAX_KEYCODE)]]

    @field_validator("key", mode="before")
    @classmethod
    def _normalise(cls, v: Any) -> Any:
        if isinstance(v, str):
            low = v.strip().lower().removeprefix("keycode_")
            aliases = {"recent": "app_switch", "recents": "app_switch", "app_switch": "app_switch",
                       "backspace": "delete", "del": "delete", "return": "enter"}
            low = aliases.get(low, low)
            if low.isdigit():
                return int(low)
            return low
        return v


class OpenApp(_Base):
    type: Literal["open_app"] = "open_app"
    app: str = Field(min_length=1, max_length=200)


class Wait(_Base):
    type: Literal["wait"] = "wait"
    seconds: float = Field(default=1.0, ge=0, le=60)


class Answer(_Base):
    type: Literal["answer"] = "answer"
    text: str = Field(max_length=MAX_TEXT)


class Finish(_Base):
    type: Literal["finish"] = "finish"
    status: Literal["complete", "infeasible"] = "complete"


class NeedsUser(_Base):
    """The agent asks a person to act on the phone (a login, a PIN, a captcha) and hand it back:
    UI-TARS ``call_user()``, AutoGLM's take-over. ``text`` is what the agent asks for (its own words,
    untrusted: shown escaped). It changes nothing on the phone. With someone watching the run
    pauses for them (their touches are recorded as operator steps); with nobody it ends the
    episode as ``needs_user``."""

    type: Literal["needs_user"] = "needs_user"
    text: str = Field(default="", max_length=MAX_TEXT)


Action = Annotated[
    Union[Click, LongPress, DoubleTap, Swipe, TypeText, Key, OpenApp, Wait, Answer, Finish, NeedsUser],
    Field(discriminator="type"),
]
ACTION_TYPES = ("click", "long_press", "double_tap", "swipe", "type", "key", "open_app", "wait", "answer", "finish",
                "needs_user")
# actions that change nothing on the phone: the device is not asked to do them
NO_DEVICE_EFFECT = (Answer, Finish, NeedsUser)

_adapter: TypeAdapter[Action] = TypeAdapter(Action)


def _format_error(e: ValidationError) -> str:
    parts = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)


def parse_action(data: Any) -> Action:
    """Build an action from its JSON form; raise ActionError naming the field on bad input."""
    if not isinstance(data, dict):
        raise ActionError(f"an action must be a JSON object, got {type(data).__name__}")
    kind = data.get("type")
    if kind not in ACTION_TYPES:
        raise ActionError(f"type: unknown action type {kind!r} (expected one of {', '.join(ACTION_TYPES)})")
    try:
        return _adapter.validate_python(data)
    except ValidationError as e:
        raise ActionError(f"{kind}: {_format_error(e)}") from None


def action_to_json(action: Action) -> dict[str, Any]:
    return action.model_dump(mode="json")


def is_terminal(action: Action) -> bool:
    """Actions after which the episode ends (the agent declared it is done)."""
    return isinstance(action, Finish)


def check_on_screen(action: Action, width: int, height: int) -> None:
    """Raise ActionError when a point of the action lies outside a width x height screen."""
    pts: list[tuple[int, int]] = []
    if isinstance(action, (Click, LongPress, DoubleTap)):
        pts = [(action.x, action.y)]
    elif isinstance(action, Swipe):
        pts = [action.start, action.end]
    for x, y in pts:
        if not (0 <= x < width and 0 <= y < height):
            raise ActionError(f"{action.type}: point ({x}, {y}) is outside the {width}x{height} screen")


# --------------------------------------------------------------------------------------------
# Coordinate spaces: the one place where model coordinates become device pixels and back.
# --------------------------------------------------------------------------------------------


class CoordSpace(str, Enum):
    PIXELS = "pixels"        # device pixels already
    UNIT = "unit"            # 0-1 fractions of the screen
    THOUSAND = "thousand"    # the 0-1000 grid (UI-TARS v1, AgentCPM-GUI, Doubao <point>)
    GRID_999 = "grid999"     # Qwen3-VL's 0-999 grid (values / 999 * size)
    RESIZED = "resized"      # pixels of a resized image (UI-TARS-1.5, Qwen2.5-VL): needs its size


def _clamp(v: float, hi: int) -> int:
    if not math.isfinite(v):  # round() would raise ValueError/OverflowError from deep inside an agent
        raise ActionError(f"coordinate {v} is not a finite number")
    return int(min(max(round(v), 0), hi - 1))


def to_device(x: float, y: float, space: CoordSpace | str, screen: tuple[int, int],
              resized: tuple[int, int] | None = None) -> tuple[int, int]:
    """Map a point from ``space`` to device pixels of a ``screen`` (width, height).

    Results are rounded and clamped into the screen: a model that answers 1000 on the 0-1000 grid
    means the last pixel, not one past it."""
    w, h = screen
    space = CoordSpace(space)
    if space is CoordSpace.PIXELS:
        fx, fy = x / w, y / h
    elif space is CoordSpace.UNIT:
        fx, fy = x, y
    elif space is CoordSpace.THOUSAND:
        fx, fy = x / 1000.0, y / 1000.0
    elif space is CoordSpace.GRID_999:
        fx, fy = x / 999.0, y / 999.0
    else:
        if not resized:
            raise ActionError("resized coordinates need the resized image size")
        fx, fy = x / resized[0], y / resized[1]
    return _clamp(fx * w, w), _clamp(fy * h, h)


def from_device(x: int, y: int, space: CoordSpace | str, screen: tuple[int, int],
                resized: tuple[int, int] | None = None) -> tuple[float, float]:
    """Inverse of :func:`to_device` (for prompts, fixtures and static evaluation)."""
    w, h = screen
    space = CoordSpace(space)
    fx, fy = x / w, y / h
    if space is CoordSpace.PIXELS:
        return float(x), float(y)
    if space is CoordSpace.UNIT:
        return fx, fy
    if space is CoordSpace.THOUSAND:
        return fx * 1000.0, fy * 1000.0
    if space is CoordSpace.GRID_999:
        return fx * 999.0, fy * 999.0
    if not resized:
        raise ActionError("resized coordinates need the resized image size")
    return fx * resized[0], fy * resized[1]
