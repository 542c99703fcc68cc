"""The simulated phone's ``/system/bin/sh``: a small POSIX-ish shell plus Android's commands.

What arrives here is exactly what a host tool sent in a ``shell:``/``shell,v2:``/``exec:`` service:
adbutils shell-quotes list arguments with ``shlex.quote`` and appends ``; echo X4EXIT:$?`` for exit
codes (``adbutils/_device_base.py``: ``_shell_v1``); uiautomator2 3.7.1 launches its server with
``CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p 9008``
(``uiautomator2/core.py``: ``launch_uiautomator``) and checks the jar with ``toybox md5sum``.

- ``parse``: the command line into words, redirects and pipelines (quotes, ``$VAR``, ``$(...)``,
  ``;`` ``&&`` ``||`` ``|``, redirections, globs; no control flow, and it says so).
- ``runtime``: the Shell (one per phone, its shared state) running a parsed line.
- ``context``: what a command sees (Ctx) and may raise (CommandError, ExitShell).
- ``table`` and ``commands``: the command table and the commands, grouped by what they serve
  (builtins, files, text, input, screen, dumpsys, am, pm, settings, system), mapped onto
  ``harness.sim.phone_api.PhoneAPI``.
"""

from harness.sim.shell.context import BytesSource, CommandError, Ctx, ExitShell, InputSource, ShellResult
from harness.sim.shell.parse import ShellSyntaxError, parse, static_argv
from harness.sim.shell.runtime import Shell

__all__ = ["BytesSource", "CommandError", "Ctx", "ExitShell", "InputSource", "Shell", "ShellResult", "ShellSyntaxError",
           "parse", "static_argv"]
