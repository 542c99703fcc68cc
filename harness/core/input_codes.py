"""Linux input event codes and the names ``getevent -l`` prints for them.

Shared by the simulated phone's kernel side (``harness.sim.evdev``) and the recorder that reads a
phone's ``getevent -lt`` stream (``harness.recorder.evdev``). The numbers are the kernel's
(``include/uapi/linux/input-event-codes.h``); the label tables follow AOSP's toolbox
``getevent.h``, which is generated from that header, so a label here is the exact word a phone
prints. Only the codes phones' touchscreens, keys and sensors use are listed; an unlisted code
is printed as four hex digits, as ``getevent`` does for a code it has no label for.
"""

from __future__ import annotations

EV_SYN, EV_KEY, EV_REL, EV_ABS, EV_MSC, EV_SW = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05
SYN_REPORT, SYN_CONFIG, SYN_MT_REPORT, SYN_DROPPED = 0, 1, 2, 3

KEY_ENTER, KEY_BACKSPACE, KEY_HOME = 28, 14, 102
KEY_VOLUMEDOWN, KEY_VOLUMEUP, KEY_POWER = 114, 115, 116
KEY_MENU, KEY_BACK, KEY_HOMEPAGE, KEY_APPSELECT, KEY_WAKEUP = 139, 158, 172, 0x244, 143
BTN_TOOL_FINGER, BTN_TOUCH = 0x145, 0x14A

ABS_X, ABS_Y, ABS_Z = 0x00, 0x01, 0x02
ABS_MT_SLOT = 0x2F
ABS_MT_TOUCH_MAJOR, ABS_MT_TOUCH_MINOR, ABS_MT_WIDTH_MAJOR, ABS_MT_WIDTH_MINOR = 0x30, 0x31, 0x32, 0x33
ABS_MT_ORIENTATION, ABS_MT_POSITION_X, ABS_MT_POSITION_Y, ABS_MT_TOOL_TYPE = 0x34, 0x35, 0x36, 0x37
ABS_MT_BLOB_ID, ABS_MT_TRACKING_ID, ABS_MT_PRESSURE, ABS_MT_DISTANCE = 0x38, 0x39, 0x3A, 0x3B
ABS_MT_FIRST, ABS_MT_LAST = ABS_MT_TOUCH_MAJOR, 0x3D  # the per-contact (slotted) axes

INPUT_PROP_POINTER, INPUT_PROP_DIRECT, INPUT_PROP_BUTTONPAD, INPUT_PROP_SEMI_MT = 0, 1, 2, 3

EV_NAMES = {EV_SYN: "EV_SYN", EV_KEY: "EV_KEY", EV_REL: "EV_REL", EV_ABS: "EV_ABS", EV_MSC: "EV_MSC",
            EV_SW: "EV_SW", 0x11: "EV_LED", 0x12: "EV_SND", 0x14: "EV_REP", 0x15: "EV_FF", 0x16: "EV_PWR",
            0x17: "EV_FF_STATUS"}
# what ``getevent -p`` calls each event type in its capability listing (getevent.c)
EV_SHORT = {EV_KEY: "KEY", EV_REL: "REL", EV_ABS: "ABS", EV_MSC: "MSC", EV_SW: "SW ", 0x11: "LED",
            0x12: "SND", 0x14: "REP", 0x15: "FF ", 0x16: "PWR", 0x17: "FFS"}
SYN_NAMES = {SYN_REPORT: "SYN_REPORT", SYN_CONFIG: "SYN_CONFIG", SYN_MT_REPORT: "SYN_MT_REPORT",
             SYN_DROPPED: "SYN_DROPPED"}
# The keyboard block (KEY_ESC .. KEY_SPACE: a hardware keyboard, the emulator's qwerty2, the
# letters a touch controller reports for wake gestures), then the keys phones' own nodes report.
_KEYBOARD = ("KEY_ESC KEY_1 KEY_2 KEY_3 KEY_4 KEY_5 KEY_6 KEY_7 KEY_8 KEY_9 KEY_0 KEY_MINUS KEY_EQUAL "
             "KEY_BACKSPACE KEY_TAB KEY_Q KEY_W KEY_E KEY_R KEY_T KEY_Y KEY_U KEY_I KEY_O KEY_P KEY_LEFTBRACE "
             "KEY_RIGHTBRACE KEY_ENTER KEY_LEFTCTRL KEY_A KEY_S KEY_D KEY_F KEY_G KEY_H KEY_J KEY_K KEY_L "
             "KEY_SEMICOLON KEY_APOSTROPHE KEY_GRAVE KEY_LEFTSHIFT KEY_BACKSLASH KEY_Z KEY_X KEY_C KEY_V KEY_B "
             "KEY_N KEY_M KEY_COMMA KEY_DOT KEY_SLASH KEY_RIGHTSHIFT KEY_KPASTERISK KEY_LEFTALT KEY_SPACE").split()
KEY_NAMES = {
    **{code: name for code, name in enumerate(_KEYBOARD, start=1)},
    KEY_HOME: "KEY_HOME", 103: "KEY_UP", 105: "KEY_LEFT", 106: "KEY_RIGHT", 108: "KEY_DOWN",
    113: "KEY_MUTE", KEY_VOLUMEDOWN: "KEY_VOLUMEDOWN", KEY_VOLUMEUP: "KEY_VOLUMEUP", KEY_POWER: "KEY_POWER",
    KEY_MENU: "KEY_MENU", KEY_WAKEUP: "KEY_WAKEUP", 148: "KEY_PROG1", KEY_BACK: "KEY_BACK",
    KEY_HOMEPAGE: "KEY_HOMEPAGE", 212: "KEY_CAMERA", 217: "KEY_SEARCH", KEY_APPSELECT: "KEY_APPSELECT",
    0x279: "KEY_PRIVACY_SCREEN_TOGGLE", 0x27B: "KEY_NEXT_ELEMENT", 0x280: "KEY_NAV_CHART",
    # buttons: getevent prints the header's first name for a value, so 0x140 is BTN_DIGI (BTN_TOOL_PEN's
    # value; the vivo tablet's pen lists "BTN_DIGI"), 0x133 BTN_NORTH (BTN_X's), 0x134 BTN_WEST
    0x133: "BTN_NORTH", 0x134: "BTN_WEST", 0x140: "BTN_DIGI", 0x141: "BTN_TOOL_RUBBER",
    BTN_TOOL_FINGER: "BTN_TOOL_FINGER", BTN_TOUCH: "BTN_TOUCH", 0x14B: "BTN_STYLUS", 0x14C: "BTN_STYLUS2",
}
ABS_NAMES = {
    ABS_X: "ABS_X", ABS_Y: "ABS_Y", ABS_Z: "ABS_Z", 0x18: "ABS_PRESSURE", 0x19: "ABS_DISTANCE",
    0x1A: "ABS_TILT_X", 0x1B: "ABS_TILT_Y", 0x28: "ABS_MISC",
    ABS_MT_SLOT: "ABS_MT_SLOT", ABS_MT_TOUCH_MAJOR: "ABS_MT_TOUCH_MAJOR", ABS_MT_TOUCH_MINOR: "ABS_MT_TOUCH_MINOR",
    ABS_MT_WIDTH_MAJOR: "ABS_MT_WIDTH_MAJOR", ABS_MT_WIDTH_MINOR: "ABS_MT_WIDTH_MINOR",
    ABS_MT_ORIENTATION: "ABS_MT_ORIENTATION", ABS_MT_POSITION_X: "ABS_MT_POSITION_X",
    ABS_MT_POSITION_Y: "ABS_MT_POSITION_Y", ABS_MT_TOOL_TYPE: "ABS_MT_TOOL_TYPE", ABS_MT_BLOB_ID: "ABS_MT_BLOB_ID",
    ABS_MT_TRACKING_ID: "ABS_MT_TRACKING_ID", ABS_MT_PRESSURE: "ABS_MT_PRESSURE", ABS_MT_DISTANCE: "ABS_MT_DISTANCE",
}
MSC_NAMES = {0: "MSC_SERIAL", 3: "MSC_RAW", 4: "MSC_SCAN", 5: "MSC_TIMESTAMP"}
CODE_NAMES = {EV_SYN: SYN_NAMES, EV_KEY: KEY_NAMES, EV_ABS: ABS_NAMES, EV_MSC: MSC_NAMES}
KEY_VALUE_NAMES = {0: "UP", 1: "DOWN", 2: "REPEAT"}
MT_TOOL_NAMES = {0: "MT_TOOL_FINGER", 1: "MT_TOOL_PEN", 2: "MT_TOOL_PALM"}
PROP_NAMES = {INPUT_PROP_POINTER: "INPUT_PROP_POINTER", INPUT_PROP_DIRECT: "INPUT_PROP_DIRECT",
              INPUT_PROP_BUTTONPAD: "INPUT_PROP_BUTTONPAD", INPUT_PROP_SEMI_MT: "INPUT_PROP_SEMI_MT"}

EV_BY_NAME = {v: k for k, v in EV_NAMES.items()}
# getevent prints a label in at most 20 characters ("%.20s" in the -p listing, "%-20.20s" in the event
# stream), so a long name is read by its first 20 too: KEY_PRIVACY_SCREEN_TOGGLE is listed as
# "KEY_PRIVACY_SCREEN_T" (the vivo tablet's listing)
LABEL_WIDTH = 20
CODE_BY_NAME = {t: {**{v[:LABEL_WIDTH]: k for k, v in names.items()}, **{v: k for k, v in names.items()}}
                for t, names in CODE_NAMES.items()}
PROP_BY_NAME = {v: k for k, v in PROP_NAMES.items()}


def code_name(ev_type: int, code: int) -> str | None:
    return CODE_NAMES.get(ev_type, {}).get(code)


def value_name(ev_type: int, code: int, value: int) -> str | None:
    """The word ``getevent -l`` prints instead of a value: key states, and the MT tool type."""
    if ev_type == EV_KEY:
        return KEY_VALUE_NAMES.get(value)
    if ev_type == EV_ABS and code == ABS_MT_TOOL_TYPE:
        return MT_TOOL_NAMES.get(value)
    return None


def is_button(code: int) -> bool:
    """A button (mouse, joystick, gamepad, digitizer: BTN_MISC 0x100 up to KEY_OK 0x160, and the
    BTN_TRIGGER_HAPPY block 0x2c0-0x2e7) rather than a key; a touchscreen's BTN_TOUCH and
    BTN_TOOL_* say a finger or a pen is there, not that a key was pressed."""
    return 0x100 <= code < 0x160 or 0x2C0 <= code < 0x2E8


def is_mt_axis(code: int) -> bool:
    return ABS_MT_FIRST <= code <= ABS_MT_LAST
