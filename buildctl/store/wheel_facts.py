"""What a wheel file says about itself, read without trusting it: its tags (from the file name), its
METADATA (from the zip, within caps checked before zipfile parses the directory) and its requirements.

Used by verification (before pip or anything else opens the wheel) and meant for publishing too.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from buildctl.errors import InputError
from buildctl.recipe.schema import Spec


def wheel_tags(wheel: Path) -> dict:
    """name, version, python ('3.11'), abi, platform from a wheel file name (PEP 427, read by `packaging`)."""
    try:
        name, version, _build, tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename:
        raise InputError(f"{ascii(wheel.name)[1:-1][:200]} is not a wheel file name (name-version-python-abi-platform.whl); "
                         "fix: give the .whl that the build produced") from None
    pythons = sorted({t.interpreter for t in tags})
    cpython = sorted({f"{m.group(1)}.{m.group(2)}" for t in tags if (m := re.fullmatch(r"cp(\d)(\d+)", t.interpreter))})
    return {"name": str(name), "version": str(version), "python_tag": ".".join(pythons),
            "abi": ".".join(sorted({t.abi for t in tags})), "platform": ".".join(sorted({t.platform for t in tags})),
            "python": cpython[0] if len(cpython) == 1 else None}


# A wheel is a zip the host opens, and pip unpacks, before anything else: bounded before it is parsed.
# torch 2.14 wheels: ~13k members, a 38 KB METADATA, 1.1 GB unpacked from 528 MB (2.1x); 3.6x for CPU.
MAX_WHEEL_MEMBERS = 200_000
MAX_CENTRAL_DIRECTORY = 16 << 20
MAX_METADATA_BYTES = 1 << 20
MAX_WHEEL_UNCOMPRESSED = 64 << 30
MAX_EXPANSION = 50  # unpacked / on disk, checked beyond 1 GiB unpacked: a 1 MB zip of zeros unpacks to 1 GB
_EOCD = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")


def _central_directory_size(f, file_size: int) -> tuple[int, int]:
    """(members, bytes) of a zip's central directory, from its end records, before zipfile reads it."""
    tail = min(file_size, _EOCD.size + 0xFFFF)
    f.seek(file_size - tail)
    data = f.read(tail)
    at = data.rfind(b"PK\x05\x06")
    if at < 0 or len(data) - at < _EOCD.size:
        raise zipfile.BadZipFile("no end of central directory record")
    _, _, _, _, members, cd_bytes, _, _ = _EOCD.unpack_from(data, at)
    if (members == 0xFFFF or cd_bytes == 0xFFFFFFFF) and at >= _ZIP64_LOCATOR.size:
        sig, _, zip64_at, _ = _ZIP64_LOCATOR.unpack_from(data, at - _ZIP64_LOCATOR.size)
        if sig == b"PK\x06\x07" and zip64_at + _ZIP64_EOCD.size <= file_size:
            f.seek(zip64_at)
            rec = f.read(_ZIP64_EOCD.size)
            if rec[:4] == b"PK\x06\x06":
                fields = _ZIP64_EOCD.unpack(rec)
                members, cd_bytes = fields[7], fields[8]
    return members, cd_bytes


def wheel_metadata(wheel: Path, fh: BinaryIO | None = None, member: str = "METADATA") -> bytes:
    """The wheel's .dist-info/METADATA (or another .dist-info `member`: WHEEL), read within the caps
    above (`fh`: the wheel, already open)."""
    refuse = f"{wheel.name}: {{}}; fix: give the .whl that the build produced (this one is not a sane wheel)"
    try:
        with contextlib.nullcontext(fh) if fh is not None else open(wheel, "rb") as f:
            return _metadata_within_caps(f, refuse, member)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError, ValueError) as e:
        raise InputError(f"{wheel.name}: not a readable wheel ({str(e)[:200]}); fix: rebuild or re-download it") from None


def wheel_generator(wheel: Path) -> str | None:
    """`Generator:` of the wheel's WHEEL file (the backend that packed it: "scikit-build-core 1.1.1")."""
    text = wheel_metadata(wheel, member="WHEEL").decode("utf-8", "replace")
    m = re.search(r"^Generator:\s*(.+?)\s*$", text, re.M)
    return m.group(1)[:200] if m else None


def _metadata_within_caps(f: BinaryIO, refuse: str, member: str = "METADATA") -> bytes:
    on_disk = os.fstat(f.fileno()).st_size
    members, cd_bytes = _central_directory_size(f, on_disk)
    if members > MAX_WHEEL_MEMBERS or cd_bytes > MAX_CENTRAL_DIRECTORY:
        raise InputError(refuse.format(f"{members} members in a {cd_bytes >> 20} MiB directory "
                                       f"(caps {MAX_WHEEL_MEMBERS}, {MAX_CENTRAL_DIRECTORY >> 20} MiB)"))
    f.seek(0)
    with zipfile.ZipFile(f) as z:
        infos = z.infolist()
        if len(infos) > MAX_WHEEL_MEMBERS:
            raise InputError(refuse.format(f"{len(infos)} members (cap {MAX_WHEEL_MEMBERS})"))
        total = sum(i.file_size for i in infos)
        if total > MAX_WHEEL_UNCOMPRESSED or (total > 1 << 30 and total > MAX_EXPANSION * on_disk):
            raise InputError(refuse.format(f"it unpacks to {total / 2**20:.0f} MiB from {on_disk / 2**20:.1f} MiB (caps "
                                           f"{MAX_WHEEL_UNCOMPRESSED >> 30} GiB, {MAX_EXPANSION}x): a zip bomb?"))
        metas = [i for i in infos if re.fullmatch(rf"[^/]+\.dist-info/{member}", i.filename)]
        if len(metas) != 1:
            raise InputError(refuse.format(f"{len(metas)} .dist-info/{member} files, a wheel has exactly one"))
        meta = metas[0]
        if meta.file_size > MAX_METADATA_BYTES:
            raise InputError(refuse.format(f"its {member} unpacks to {meta.file_size} bytes "
                                           f"(cap {MAX_METADATA_BYTES}): a zip bomb?"))
        with z.open(meta) as member:
            data = member.read(MAX_METADATA_BYTES + 1)  # the declared size may lie: read no further
        if len(data) > MAX_METADATA_BYTES:
            raise InputError(refuse.format(f"its {member} unpacks beyond {MAX_METADATA_BYTES} bytes: a zip bomb?"))
    return data


def wheel_requires(wheel: Path) -> list[str]:
    """Requires-Dist of the wheel's METADATA (for the wheelhouse key), read with bounded memory."""
    raw, _ = parse_email(wheel_metadata(wheel).decode("utf-8", "replace"))
    requires = list(raw.get("requires_dist") or [])
    for r in requires:
        try:
            Requirement(r)
        except InvalidRequirement:
            raise InputError(f"{wheel.name}: METADATA has an invalid Requires-Dist {ascii(r[:100])}; "
                             "fix: give the .whl that the build produced") from None
    return requires


def requires_for_python(requires: Sequence[str], python: str) -> list[str]:
    """The requirements (no extras) whose markers hold on CPython `python` on Linux."""
    env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
           "platform_system": "Linux", "implementation_name": "cpython", "extra": ""}
    out = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            out.append(str(req))
    return out


@dataclass(frozen=True)
class WheelFacts:
    """What a wheel says of itself, read once (issue 37: verification read its zip again at every step):
    the file, the tags of its name and the Requires-Dist of its METADATA (one bounded read of the zip)."""

    path: Path
    tags: Mapping[str, str | None]
    requires: tuple[str, ...]

    @classmethod
    def read(cls, wheel: Path) -> WheelFacts:
        return cls(Path(wheel), wheel_tags(Path(wheel)), tuple(wheel_requires(Path(wheel))))

    @property
    def name(self) -> str:
        return self.path.name

    def is_cuda(self, spec: Spec | None) -> bool:
        return is_cuda_wheel(self.path, spec, self.requires)


def is_cuda_wheel(wheel: Path, spec: Spec | None, requires: Sequence[str] | None = None) -> bool:
    if spec is not None:
        return spec.accelerator == "cuda"
    if re.search(r"\+cu\d+", wheel.name):
        return True
    reqs = wheel_requires(wheel) if requires is None else requires
    return any(canonicalize_name(Requirement(r).name).startswith("nvidia-") for r in reqs)
