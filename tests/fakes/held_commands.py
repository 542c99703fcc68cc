"""Device-side kill points: simulated phones served in the test's process hold a chosen shell
command until the test lets it go, so a runner in another process can be stopped at a known state
(waiting on that command) rather than after a sleep that a fast or loaded machine outruns."""

from __future__ import annotations

import threading
from typing import Any, Callable


class HeldCommands:
    """Device-side kill points for a runner in another process: wraps the shells of simulated
    phones served in this process, counts the shell commands they receive by kind, and, once armed
    with ``arm(kind, k)``, holds the k-th command of that kind (over all the phones) until
    ``release_all()``. ``reached`` is set when the held command arrives, so a test that waits for
    it knows the runner is blocked on exactly that command, on a fast machine or a loaded one.

    Kinds: ``any`` (every command), ``reset`` (the sim's reset broadcast), ``input`` (``input ...``:
    a step's action or a reset's home key), ``screenshot`` (``screencap``) and ``state`` (the
    oracle's full ``dumpsys crate_sim``)."""

    KINDS: dict[str, Callable[[str], bool]] = {
        "any": lambda c: True,
        "reset": lambda c: "com.crate.sim.RESET" in c,
        "input": lambda c: c.startswith("input "),
        "screenshot": lambda c: c.startswith("screencap"),
        "state": lambda c: c.strip() == "dumpsys crate_sim",
    }

    def __init__(self, phones: list[Any]):
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {k: 0 for k in self.KINDS}
        self.target: tuple[str, int] | None = None
        self.reached = threading.Event()
        self.released = threading.Event()
        for p in phones:
            self._wrap(p.handle.shell)

    def _wrap(self, shell: Any) -> None:
        real = shell.run

        def run(cmdline: str, *args: Any, **kwargs: Any) -> int:
            hold = False
            with self.lock:
                for kind, match in self.KINDS.items():
                    if match(cmdline):
                        self.counts[kind] += 1
                        if self.target == (kind, self.counts[kind]):
                            hold = True
                            self.reached.set()
            if hold:
                self.released.wait(300)
            return real(cmdline, *args, **kwargs)

        shell.run = run  # an instance attribute: the phone's ADB services look it up per command

    def arm(self, kind: str, k: int) -> None:
        assert kind in self.KINDS, kind
        with self.lock:
            self.counts = {c: 0 for c in self.KINDS}
            self.target = (kind, k)
            self.reached.clear()
            self.released.clear()

    def release_all(self) -> None:
        with self.lock:
            self.target = None
        self.released.set()
