"""Wheels for the hostile tests, made in the test (nothing downloaded, small on disk). No tests in here.

* `wheel`: a real, installable pure-Python wheel of a package `demofw` whose `__init__.py` is given.
* `zeros_member_wheel`: a valid zip whose one member inflates to `size` zero bytes from ~1 KB per MiB,
  written without ever compressing (or holding) the whole thing: one deflate block for 1 MiB of zeros,
  ended by a full flush, is the same bytes every time, so the stream is that block repeated.
* `many_members_zip`: a zip whose central directory really lists `count` (empty) members.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zipfile
import zlib
from pathlib import Path

WHEEL_NAME = "demofw-0.1.0-cp311-cp311-linux_x86_64.whl"
DIST_INFO = "demofw-0.1.0.dist-info"
METADATA = "Metadata-Version: 2.1\nName: demofw\nVersion: 0.1.0\n"
WHEEL = "Wheel-Version: 1.0\nGenerator: buildctl-tests\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n"
MiB = 1 << 20


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel(folder: Path, init_py: str) -> Path:
    """An installable demofw wheel (METADATA, WHEEL, RECORD) with this `demofw/__init__.py`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / WHEEL_NAME
    files = {"demofw/__init__.py": init_py, f"{DIST_INFO}/METADATA": METADATA, f"{DIST_INFO}/WHEEL": WHEEL}
    record = [f"{n},sha256={_b64(hashlib.sha256(t.encode()).digest())},{len(t.encode())}" for n, t in files.items()]
    record.append(f"{DIST_INFO}/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{DIST_INFO}/RECORD", "\n".join(record) + "\n")
    return path


_LOCAL = struct.Struct("<4s5H3L2H")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_END64 = struct.Struct("<4sQ2H2L4Q")
_LOCATOR64 = struct.Struct("<4sLQL")


def _zeros_stream(size: int) -> tuple[bytes, int]:
    """(raw deflate stream, crc32) of `size` zero bytes (a multiple of 1 MiB)."""
    assert size % MiB == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(MiB)) + c.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
    crc, zero = 0, bytes(MiB)
    for _ in range(size // MiB):
        crc = zlib.crc32(zero, crc)
    return block * (size // MiB) + end, crc


def _zip(path: Path, members: list[tuple[str, bytes, int, int, int]]) -> Path:
    """A zip of (name, data as stored, method, crc, uncompressed size) members (each below 4 GiB; more
    than 65535 of them get the ZIP64 end records)."""
    body: list[bytes] = []
    central: list[bytes] = []
    offset = 0
    for name, data, method, crc, size in members:
        n = name.encode()
        central.append(_CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(data), size, len(n), 0, 0,
                                     0, 0, 0, offset) + n)
        local = _LOCAL.pack(b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(n), 0) + n
        body += [local, data]
        offset += len(local) + len(data)
    directory = b"".join(central)
    count = len(members)
    end = b""
    if count > 0xFFFF:  # ZIP64 end records carry the real count
        end = (_END64.pack(b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(directory), offset)
               + _LOCATOR64.pack(b"PK\x06\x07", 0, offset + len(directory), 1))
        count = 0xFFFF
    end += _END.pack(b"PK\x05\x06", 0, 0, count, count, len(directory), offset, 0)
    with open(path, "wb") as f:
        f.writelines([*body, directory, end])
    return path


def zeros_member_wheel(folder: Path, member: str, size: int) -> Path:
    """demofw's wheel with METADATA and WHEEL, plus `member` inflating to `size` zero bytes (~1 KB/MiB)."""
    folder.mkdir(parents=True, exist_ok=True)
    data, crc = _zeros_stream(size)
    members = [(n, t.encode(), 0, zlib.crc32(t.encode()), len(t.encode()))
               for n, t in ((f"{DIST_INFO}/WHEEL", WHEEL), ("demofw/__init__.py", ""))]
    if member != f"{DIST_INFO}/METADATA":
        members.append((f"{DIST_INFO}/METADATA", METADATA.encode(), 0, zlib.crc32(METADATA.encode()), len(METADATA)))
    members.append((member, data, zipfile.ZIP_DEFLATED, crc, size))
    return _zip(folder / WHEEL_NAME, members)


def many_members_zip(folder: Path, count: int) -> Path:
    """demofw's wheel name on a zip that really holds `count` empty members (plus METADATA)."""
    folder.mkdir(parents=True, exist_ok=True)
    members = [(f"{DIST_INFO}/METADATA", METADATA.encode(), 0, zlib.crc32(METADATA.encode()), len(METADATA))]
    members += [(f"demofw/{i:x}", b"", 0, 0, 0) for i in range(count)]
    return _zip(folder / WHEEL_NAME, members)
