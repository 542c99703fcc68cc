"""Put a simulated phone on a TCP port as an ADB device.

    handle = serve(phone, 0)              # background thread; handle.port, handle.serial
    subprocess.run(["adb", "connect", handle.serial])
    ...
    handle.stop()

    serve(phone, 6520, block=True)        # the CLI (``harness sim serve``): runs until Ctrl-C
    serve(SimPhone(as_phone=True), 0, command_log="cmds.jsonl")   # a retail-looking phone, logged

``command_log``: append every shell command line the phone receives to that file as a JSON line
(``harness.sim.command_log``). A retail-looking phone is ``SimPhone(as_phone=True)``
(``harness.sim.persona``).

The server listens on 127.0.0.1 by default: an unauthenticated ADB port lets anyone who can reach
it drive the device, so binding another address logs a warning. Avoid ports 5555-5585 for test
devices: the adb server probes the odd ones there for emulators (FIELD_NOTES §8).
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from harness.core.ports import StartError, free_port
from harness.sim.adb.services import MODE_NORMAL, MODE_UNAUTHORIZED, Device
from harness.sim.adb.transport import AUTH_NORMAL, AUTH_UNAUTHORIZED, AdbDeviceServer

if TYPE_CHECKING:  # pragma: no cover
    from harness.sim.phone_api import PhoneAPI
    from harness.sim.shell import Shell
    from harness.sim.u2 import U2Server

log = logging.getLogger(__name__)


class SimServer:
    """A running (or startable) ADB endpoint for one phone."""

    def __init__(
        self,
        phone: "PhoneAPI",
        port: int = 0,
        host: str = "127.0.0.1",
        mode: str = MODE_NORMAL,
        shell: "Shell | None" = None,
        u2: "U2Server | None" = None,
        command_log: "str | None" = None,
        port_tries: int = 1,
    ) -> None:
        self.phone = phone
        self.port_tries = max(1, port_tries)  # a port found taken is replaced by a free one, this many ports in all
        self.command_log_path = command_log
        self.host = host
        self.requested_port = port
        self.mode = mode
        self._shell = shell
        self._u2 = u2
        self.device: Device | None = None
        self._server: AdbDeviceServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stop_event: asyncio.Event | None = None
        _warn_if_exposed(host)

    # --- properties -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            return self.requested_port
        return self._server.port

    @property
    def serial(self) -> str:
        """The serial ``adb connect`` gives this device."""
        return f"{self.host}:{self.port}"

    @property
    def shell(self) -> "Shell":
        assert self.device is not None, "server not started"
        return self.device.shell

    @property
    def u2(self) -> "U2Server":
        assert self.device is not None, "server not started"
        return self.device.u2

    @property
    def running(self) -> bool:
        return self._ready.is_set() and not self._stopped.is_set()

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 10.0) -> "SimServer":
        """Start serving in a background thread; returns once the port is listening."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._ready.clear()
        self._stopped.clear()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, name=f"adb-sim-{self.requested_port}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("the ADB sim server did not start")
        if self._error is not None:
            raise self._error
        return self

    def serve_forever(self) -> None:
        """Serve in the current thread until ``stop()`` (from another thread) or Ctrl-C."""
        try:
            asyncio.run(self._main())
        except KeyboardInterrupt:
            pass

    def stop(self, timeout: float = 5.0) -> None:
        loop = self._loop
        if loop is not None and not self._stopped.is_set():
            try:
                loop.call_soon_threadsafe(self._stop_event_set)
            except RuntimeError:
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the server has stopped."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> "SimServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- internals ------------------------------------------------------------------------------
    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported through start()
            self._error = e
            self._ready.set()

    def _stop_event_set(self) -> None:
        if self._stop_event is not None:
            self._stop_event.set()

    async def _listen(self, auth: int) -> None:
        """Listen on the requested port; one found taken (another program bound it after it was
        chosen) is replaced by a free one while ``port_tries`` lasts, each retry logged."""
        port, tried = self.requested_port, []
        while True:
            self._server = AdbDeviceServer(self.device, self.host, port, auth=auth)
            try:
                await self._server.start()
                return
            except OSError as e:
                if e.errno != errno.EADDRINUSE or not port or len(tried) + 1 >= self.port_tries:
                    if tried:
                        raise StartError(f"simulated phone: no port to listen on: tried {', '.join(tried)} and {port} "
                                         f"({e.strerror}); another program took each one as it was chosen: try again")
                    raise
                tried.append(str(port))
                log.warning("simulated phone: port %d is taken (%s); trying another", port, e.strerror)
                port = free_port()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        self._executor = ThreadPoolExecutor(max_workers=64, thread_name_prefix="adb-sim")
        self.device = Device(self.phone, mode=self.mode, shell=self._shell, u2=self._u2, executor=self._executor)
        own_log = None
        if self.command_log_path and self.device.shell.command_log is None:
            from harness.sim.command_log import CommandLog

            own_log = self.device.shell.command_log = CommandLog(self.command_log_path)
        auth = AUTH_UNAUTHORIZED if self.mode == MODE_UNAUTHORIZED else AUTH_NORMAL
        try:
            await self._listen(auth)
        except BaseException as e:
            self._error = e
            if own_log is not None:
                self.device.shell.command_log = None
                own_log.close()
            self._ready.set()
            self._stopped.set()
            return
        log.info("simulated phone %s serving ADB on %s:%d (%s)", self.phone.info.serial, self.host, self._server.port, self.mode)
        self._ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await self._server.stop()
            self._executor.shutdown(wait=False, cancel_futures=True)
            if own_log is not None:
                self.device.shell.command_log = None
                own_log.close()
            self._stopped.set()
            self._loop = None


def serve(
    phone: "PhoneAPI",
    port: int = 0,
    host: str = "127.0.0.1",
    mode: str = MODE_NORMAL,
    *,
    block: bool = False,
    shell: "Shell | None" = None,
    u2: "U2Server | None" = None,
    command_log: "str | None" = None,
    port_tries: int = 1,
) -> SimServer:
    """Serve ``phone`` as an ADB device on ``host:port`` (0 = a free port).

    ``mode``: ``normal`` (online without auth), ``unauthorized`` (adb lists it ``unauthorized``)
    or ``shell_v1_only`` (no ``shell_v2`` in the banner, so adb falls back to the legacy shell).
    With ``block=False`` (default) the server runs in a daemon thread and the started handle is
    returned; with ``block=True`` it serves in this thread until Ctrl-C and returns when stopped.
    ``port_tries``: a port found taken is replaced by a free one, up to this many ports in all
    (for a port chosen free beforehand, which another program may have taken meanwhile).
    """
    server = SimServer(phone, port=port, host=host, mode=mode, shell=shell, u2=u2, command_log=command_log,
                       port_tries=port_tries)
    if block:
        server.serve_forever()
        return server
    return server.start()


def _warn_if_exposed(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        log.warning(
            "serving an unauthenticated ADB device on %s: anyone who can reach this address can drive the phone",
            host,
        )
