"""A simulated phone in a process of its own (``harness sim serve``), started the way the demo,
``harness tasks check``, the benches and the tests start theirs.

The port is chosen free, then given to the new process, which binds it: another program may take
it in between. A port that merely accepts connections proves nothing (the stranger accepts them
too), so the phone counts as started only once its own process says it listens on that port (the
``listening on HOST:PORT`` line ``harness sim serve`` prints once the port is open). A process that
exits because the port was taken is started again on another free port (``START_TRIES`` ports in
all, each retry logged); any other failure, or the last try, raises
:class:`harness.core.ports.StartError` with one line: what was tried, and where the phone's log is.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.ports import START_TRIES, StartError, free_port

log = logging.getLogger(__name__)

TAKEN = "address already in use"  # what a process that lost its port prints (EADDRINUSE; asyncio words it in lower case)


def ready_line(port: int, host: str = "127.0.0.1") -> str:
    """What ``harness sim serve`` prints once it listens on host:port (harness/cli/sim.py, cmd_sim_serve)."""
    return f"listening on {host}:{port};"


@dataclass
class SimProcess:
    """A started phone: its process, the port it listens on, and its log."""

    proc: subprocess.Popen
    port: int
    log: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate it (killed if it does not end within ``timeout``)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _wait_ready(proc: subprocess.Popen, log_path: Path, offset: int, port: int, timeout: float) -> str | None:
    """None once the process says it listens on ``port``; else why not (it exited, or took too long)."""
    want = ready_line(port)
    deadline = time.monotonic() + timeout
    while True:
        text = log_path.read_bytes()[offset:].decode("utf-8", "replace")
        if want in text:
            return None
        if proc.poll() is not None:
            text = log_path.read_bytes()[offset:].decode("utf-8", "replace")
            return _last_line(text) or f"it exited with {proc.returncode} and said nothing"
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(timeout=10)
            return f"it did not say it listens within {timeout:g} s"
        time.sleep(0.05)


def start_sim_process(args: list[str], log_path: str | Path, *, port: int | None = None, tries: int = START_TRIES,
                      timeout: float = 60.0, cwd: str | Path | None = None, env: dict[str, str] | None = None,
                      new_session: bool = False) -> SimProcess:
    """``harness sim serve --port PORT ARGS`` in a process of its own, its output appended to
    ``log_path``; returns once it listens. ``port``: that port only (a phone restarted where it
    was); None: a free one, another when it turns out taken. ``new_session``: out of the
    terminal's process group (Ctrl-C reaches the caller only, which stops the phones itself)."""
    log_path = Path(log_path)
    tried: list[str] = []
    for attempt in range(tries if port is None else 1):
        p = port or free_port()
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "sim", "serve", "--port", str(p), *args],
                                    stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                    start_new_session=new_session)
        why = _wait_ready(proc, log_path, offset, p, timeout)
        if why is None:
            return SimProcess(proc, p, log_path)
        tried.append(f"{p} ({why})")
        if TAKEN not in why.lower():
            break
        if port is None and attempt + 1 < tries:
            log.warning("simulated phone: port %d was taken before it could listen there; trying another", p)
    raise StartError(f"simulated phone did not start: tried port{'s' if len(tried) > 1 else ''} {'; '.join(tried)}; "
                     f"log: {log_path}. "
                     + ("Another program took each port as it was chosen: run the command again"
                        if all(TAKEN in t.lower() for t in tried) else "See the log for why"))
