"""What the harness asks ``getevent`` (AOSP toolbox ``getevent.c``): the input devices with their
axes and properties (``-lp``: labelled, then exits), and the stream of every device's events,
labelled and timed (``-lt``: runs until the stream is closed). ``harness.recorder.evdev`` reads both;
``harness.recorder.session`` sends them."""

from __future__ import annotations

GETEVENT_LISTING = ("getevent", "-lp")   # the input devices, their axes and props
GETEVENT_STREAM = ("getevent", "-lt")    # every device's events, labelled and timed
COMMANDS = (GETEVENT_LISTING, GETEVENT_STREAM)
