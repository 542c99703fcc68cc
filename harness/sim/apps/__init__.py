"""The simulated phone's apps, in launcher order."""

from harness.sim.apps.settings import Settings

APP_CLASSES = [Settings]
