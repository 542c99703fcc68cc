"""The simulated shell's commands, one module per thing they serve. Importing this package
registers every command in ``harness.sim.shell.table.COMMANDS``.

Output formats follow Android 14 (``input``, ``screencap``, ``wm``, ``dumpsys``, ``am``, ``pm``,
``monkey``, ``uiautomator dump``, ``getprop``, ``settings``, ``ime``, toybox file tools). A command
reaches the phone and the state every command shares through ``c.shell`` (its Ctx).
"""

from harness.sim.shell.commands import am, builtins, dumpsys, files, input, pm, screen, settings, system, text

__all__ = ["am", "builtins", "dumpsys", "files", "input", "pm", "screen", "settings", "system", "text"]
