"""Distinct PNG files of one image, for benchmarks that must not be helped by a cache keyed on a
file's bytes (the model client's encode cache, a viewer's thumbnails): a ``tEXt`` chunk carrying a
tag is put right after the header (PNG spec, section 11.3.4.3: ancillary, ignored by decoders), so
the pixels, and what decoding them costs, are unchanged."""

from __future__ import annotations

import struct
import zlib

_IHDR_END = 8 + 4 + 4 + 13 + 4  # signature, then IHDR's length, type, 13 bytes of data and CRC


def tagged(png: bytes, tag: str) -> bytes:
    """``png`` with a ``Comment`` text chunk holding ``tag`` (ASCII): another file, the same image."""
    if png[12:16] != b"IHDR":
        raise ValueError("not a PNG whose first chunk is IHDR")
    data = b"Comment\x00" + tag.encode("ascii")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:_IHDR_END] + chunk + png[_IHDR_END:]
