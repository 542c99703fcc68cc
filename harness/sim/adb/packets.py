"""ADB transport messages: a 24-byte header plus an optional payload.

Protocol facts (AOSP ``adb/protocol.txt``, ``adb/adb.h``; also documented in the ya-webadb book,
``apps/book/docs/basics/packet.md`` and ``connection.md``):

* The header is six little-endian u32 words: command, arg0, arg1, data_length, data_check, magic,
  where ``magic == command ^ 0xFFFFFFFF``.
* Commands are four ASCII characters read as a LE u32 (``CNXN`` = 0x4E584E43, ...).
* ``data_check`` is the plain byte sum of the payload. From protocol version 0x01000001
  (``A_VERSION_SKIP_CHECKSUM``) on, receivers ignore it, so a sender may leave it 0.
* CNXN(version, max_payload, banner), AUTH(type, 0, data), OPEN(local_id, 0, "service\\0"),
  OKAY(local_id, remote_id), WRTE(local_id, remote_id, data), CLSE(local_id, remote_id).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


def _cmd(name: bytes) -> int:
    return struct.unpack("<I", name)[0]


A_SYNC = _cmd(b"SYNC")
A_CNXN = _cmd(b"CNXN")
A_AUTH = _cmd(b"AUTH")
A_OPEN = _cmd(b"OPEN")
A_OKAY = _cmd(b"OKAY")
A_CLSE = _cmd(b"CLSE")
A_WRTE = _cmd(b"WRTE")
A_STLS = _cmd(b"STLS")

COMMAND_NAMES = {
    A_SYNC: "SYNC",
    A_CNXN: "CNXN",
    A_AUTH: "AUTH",
    A_OPEN: "OPEN",
    A_OKAY: "OKAY",
    A_CLSE: "CLSE",
    A_WRTE: "WRTE",
    A_STLS: "STLS",
}

A_VERSION_MIN = 0x01000000
A_VERSION_SKIP_CHECKSUM = 0x01000001
A_VERSION = 0x01000001  # the highest version this device speaks

MAX_PAYLOAD_V1 = 4 * 1024  # what version 0x01000000 peers may assume
MAX_PAYLOAD = 1024 * 1024  # adb >= 29 offers 1 MiB in its CNXN

# AUTH packet types (arg0)
AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3
AUTH_TOKEN_SIZE = 20

HEADER = struct.Struct("<6I")
HEADER_SIZE = HEADER.size  # 24


class ProtocolError(Exception):
    """The peer sent something that is not an ADB message: the connection must be dropped."""


@dataclass(frozen=True)
class Message:
    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return COMMAND_NAMES.get(self.command, f"0x{self.command:08x}")

    def __repr__(self) -> str:  # short, for logs
        shown = self.data[:40]
        more = "..." if len(self.data) > 40 else ""
        return f"Message({self.name}, {self.arg0}, {self.arg1}, {shown!r}{more} [{len(self.data)}])"


def checksum(data: bytes) -> int:
    """Byte sum of the payload (the pre-0x01000001 integrity check)."""
    return sum(data) & 0xFFFFFFFF


def encode(msg: Message, with_checksum: bool = True) -> bytes:
    """Header plus payload, ready for the socket."""
    check = checksum(msg.data) if with_checksum and msg.data else 0
    header = HEADER.pack(
        msg.command,
        msg.arg0 & 0xFFFFFFFF,
        msg.arg1 & 0xFFFFFFFF,
        len(msg.data),
        check,
        msg.command ^ 0xFFFFFFFF,
    )
    return header + msg.data


def decode_header(raw: bytes, max_payload: int) -> tuple[int, int, int, int]:
    """(command, arg0, arg1, data_length) from a 24-byte header.

    Raises ProtocolError on a wrong magic, an unknown command, or a payload longer than
    ``max_payload``: the caller drops the connection (``protocol.txt``: "Receipt of an invalid
    message header ... MUST result in the closing of the remote connection").
    """
    if len(raw) != HEADER_SIZE:
        raise ProtocolError(f"short header ({len(raw)} bytes)")
    command, arg0, arg1, length, _check, magic = HEADER.unpack(raw)
    if magic != command ^ 0xFFFFFFFF:
        raise ProtocolError(f"bad magic 0x{magic:08x} for command 0x{command:08x}")
    if command not in COMMAND_NAMES:
        raise ProtocolError(f"unknown command 0x{command:08x}")
    if length > max_payload:
        raise ProtocolError(f"payload length {length} exceeds the limit {max_payload}")
    return command, arg0, arg1, length


def cnxn(version: int, max_payload: int, banner: str) -> Message:
    return Message(A_CNXN, version, max_payload, banner.encode("utf-8"))


def auth_token(token: bytes) -> Message:
    return Message(A_AUTH, AUTH_TOKEN, 0, token)


def okay(local_id: int, remote_id: int) -> Message:
    return Message(A_OKAY, local_id, remote_id)


def wrte(local_id: int, remote_id: int, data: bytes) -> Message:
    return Message(A_WRTE, local_id, remote_id, data)


def clse(local_id: int, remote_id: int) -> Message:
    return Message(A_CLSE, local_id, remote_id)


def banner(product: str, model: str, device: str, features: list[str]) -> str:
    """The device banner of the CNXN payload (``device::key=value;...;features=a,b``).

    Values must not contain ``;`` ``=`` or ``,`` (banner grammar, ya-webadb ``connection.md``).
    """

    def clean(value: str) -> str:
        return "".join("_" if ch in ";=," else ch for ch in value)

    return (
        f"device::ro.product.name={clean(product)};ro.product.model={clean(model)};"
        f"ro.product.device={clean(device)};features={','.join(features)}"
    )


DEFAULT_FEATURES = [
    "shell_v2",
    "cmd",
    "stat_v2",
    "fixed_push_mkdir",
    "fixed_push_symlink_timestamp",
]
