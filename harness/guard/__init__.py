"""``harness guard``: an adb server endpoint in front of one phone, for agents that bring their own
loop. Clients (the adb binary, adbutils, mobile-mcp, a framework's device layer) talk to it as to the
real adb server; it relays everything to the real server for the guarded phone only, turns every
command that acts on the phone into a unified action, gates it with the same monitors through the
same code the runner uses (harness.run.gate), and records the session as an ordinary run folder.

Modules: ``wire`` (the host protocol's framing), ``relay`` (the endpoint: host requests, transport
switches, moving bytes), ``clients`` (which process sent a request), ``shell_words`` (a command
line as the device's shell splits it), ``commands`` (what a command does: an action, a read, a
channel the guard cannot see, or something it cannot read), ``session`` (gating and recording),
``steps`` (the episode's step records). The command line and the session's set-up are
``harness.cli.guard`` and ``harness.cli.guard_setup``.
"""
