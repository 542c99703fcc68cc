"""The device side of ADB for the simulated phone: packets, the TCP transport, the services.

``harness.sim.serve.serve(phone, port)`` puts a phone on a TCP port; ``adb connect
127.0.0.1:PORT`` (the real adb server), adbutils and uiautomator2 then drive it like a phone.
"""

from harness.sim.adb.packets import Message, ProtocolError
from harness.sim.adb.services import MODE_NORMAL, MODE_SHELL_V1_ONLY, MODE_UNAUTHORIZED, MODES, Device
from harness.sim.adb.transport import AdbDeviceServer, Stream

__all__ = [
    "AdbDeviceServer",
    "Device",
    "Message",
    "MODES",
    "MODE_NORMAL",
    "MODE_SHELL_V1_ONLY",
    "MODE_UNAUTHORIZED",
    "ProtocolError",
    "Stream",
]
