"""Preflight: the checks a command makes before anything touches a phone (``harness preflight``, and
the start of ``harness run``, ``judge`` and ``record``; the guard calls the same entry point).

Each check is a small function over the command's configuration and its devices that returns the
problem it found, one line saying what failed and what to do (:class:`Problem`):

- every model endpoint answers, as the run will call it (``GET /models``, then one tiny chat
  request with the run's key rule, model name and structured-output choice): :mod:`.endpoints`;
- every device is attached (a wrong serial lists the attached ones), usable, unlocked or
  unlockable, of a kind every judge can judge (the oracle needs the simulated phone), has the
  apps the tasks need, and can take ``--size``: :mod:`.devices`;
- the run folder (``--resume`` only resumes; a new run never lands in a folder holding something
  else), ``--watch-port`` free, and unsafe tasks on a real device without a gate monitor refused
  unless ``--allow-unguarded-unsafe``: :mod:`.run_setup`.

:func:`preflight` (in :mod:`.plan`) runs those a :class:`Plan` asks for, the endpoints and devices at
once, and raises :class:`PreflightFailed` listing every problem (the command line prints each as a
``harness: error:`` line and exits 2) or returns what passed (:class:`Passed`).
"""

from harness.preflight.devices import DeviceNeeds
from harness.preflight.endpoints import PROBE_TEXT, Endpoint
from harness.preflight.plan import Plan, preflight
from harness.preflight.problems import Passed, PreflightFailed, Problem

__all__ = ["DeviceNeeds", "Endpoint", "PROBE_TEXT", "Passed", "Plan", "PreflightFailed", "Problem", "preflight"]
