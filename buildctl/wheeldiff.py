"""Compare two wheels byte for byte and say, member by member, how they differ. Pure: files in, records out.

Each differing member gets the kinds of difference found, in this order:
  paths       the member's bytes embed a build path (one build's, or the other's): in a binary a path of
              another length also moves what follows it, so other bytes may differ with it
  timestamps  the zip entry's date differs, or the bytes differ only in embedded dates and times
              (__DATE__/__TIME__, date(1), ISO 8601)
  ordering    the member sits at another place in the archive
  content     anything else: other bytes, a member only one wheel has, permissions, compression
A wheel pair whose files differ while no member does (the zip's own comment or layout) gets one line
for "(archive)", so a difference is never reported without a line that names it.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

KINDS = ("paths", "timestamps", "ordering", "content")
ARCHIVE = "(archive)"

_MONTH = rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
# Embedded dates and times as compilers, date(1), time.ctime() and ISO 8601 write them.
_DATES = re.compile(
    rb"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"  # ISO 8601
    rb"|" + _MONTH + rb" [ 0-3]?\d(?:,? \d{4})?"  # __DATE__ "Dec  1 2026", date(1) "Dec  1"
    rb"|\d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]{3,4})?(?: \d{4})?"  # __TIME__, date(1) "10:00:00 UTC 2026"
)

# nvcc (cudafe++) names a .cu file's anonymous namespace _GLOBAL__N__<8 hex>_..., the hex a hash of the
# file's absolute path: no prefix map reaches it (docs/reproducible.md, measured with nvcc 13.0 and 13.2).
_NVCC_ANONYMOUS = re.compile(rb"_GLOBAL__N__([0-9a-f]{8})_")


@dataclass(frozen=True)
class MemberDifference:
    member: str
    kinds: tuple[str, ...]  # a subset of KINDS, in KINDS' order
    detail: str  # how, in words

    def to_dict(self) -> dict:
        return {"member": self.member, "kinds": list(self.kinds), "detail": self.detail}


@dataclass(frozen=True)
class WheelComparison:
    first: str  # wheel file names
    second: str
    first_sha256: str
    second_sha256: str
    differences: tuple[MemberDifference, ...]

    @property
    def identical(self) -> bool:
        return self.first_sha256 == self.second_sha256

    def reason(self, limit: int = 3) -> str:
        """One line: identical, or the differing members with their kinds."""
        if self.identical:
            return f"the two builds made the same wheel (sha256 {self.first_sha256})"
        named = [f"{d.member} ({', '.join(d.kinds)})" for d in self.differences[:limit]]
        more = len(self.differences) - limit
        return ("the two builds' wheels differ: " + "; ".join(named)
                + (f"; and {more} more member(s)" if more > 0 else ""))

    def to_dict(self) -> dict:
        return {"identical": self.identical, "first": {"file": self.first, "sha256": self.first_sha256},
                "second": {"file": self.second, "sha256": self.second_sha256},
                "differences": [d.to_dict() for d in self.differences]}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def compare(first: Path, second: Path, *, build_paths: tuple[str, ...] = ()) -> WheelComparison:
    """Compare two wheels; `build_paths` are the source/build folders of the two builds (looked for in
    the members' bytes)."""
    first, second = Path(first), Path(second)
    sha_a, sha_b = sha256_of(first), sha256_of(second)
    differences: list[MemberDifference] = []
    if sha_a != sha_b:
        with zipfile.ZipFile(first) as za, zipfile.ZipFile(second) as zb:
            differences = _member_differences(za, zb, build_paths)
            if not differences:
                differences = [MemberDifference(ARCHIVE, ("content",), "the zip container differs (its comment, "
                                                "extra fields or layout); every member is the same")]
    if first.name != second.name:
        differences.insert(0, MemberDifference("(file name)", ("content",), f"{first.name} vs {second.name}"))
    return WheelComparison(first.name, second.name, sha_a, sha_b, tuple(differences))


def _member_differences(za: zipfile.ZipFile, zb: zipfile.ZipFile, build_paths) -> list[MemberDifference]:
    infos_a = {i.filename: i for i in za.infolist()}
    infos_b = {i.filename: i for i in zb.infolist()}
    order_a = [n for n in infos_a if n in infos_b]
    order_b = [n for n in infos_b if n in infos_a]
    position_b = {n: i for i, n in enumerate(order_b)}
    out = []
    for name in [*infos_a, *(n for n in infos_b if n not in infos_a)]:
        if name not in infos_b or name not in infos_a:
            which = "first" if name in infos_a else "second"
            out.append(MemberDifference(name, ("content",), f"only in the {which} wheel"))
            continue
        a, b = infos_a[name], infos_b[name]
        found: dict[str, str] = {}
        data_a, data_b = za.read(a), zb.read(b)
        if data_a != data_b:
            found.update(classify_bytes(data_a, data_b, build_paths))
            if name.endswith(".dist-info/RECORD") and "content" in found:
                found["content"] = "the recorded hashes of " + ", ".join(record_lines_differing(data_a, data_b))
        if a.date_time != b.date_time:
            found.setdefault("timestamps", f"zip date {_date(a.date_time)} vs {_date(b.date_time)}")
        i, j = order_a.index(name), position_b[name]
        if i != j:
            found["ordering"] = f"member #{i + 1} vs #{j + 1}"
        meta = _metadata_difference(a, b, same_bytes=data_a == data_b)
        if meta and "content" not in found:
            found["content"] = meta
        elif meta:
            found["content"] += f"; {meta}"
        if found:
            kinds = tuple(k for k in KINDS if k in found)
            out.append(MemberDifference(name, kinds, "; ".join(found[k] for k in kinds)))
    return out


def classify_bytes(a: bytes, b: bytes, build_paths=()) -> dict[str, str]:
    """{kind: how} for two different byte strings of one member: paths, timestamps and/or content."""
    found: dict[str, str] = {}
    embedded, rest_a, rest_b = [], a, b
    for p in sorted(set(build_paths), key=len, reverse=True):  # the longer first: one may contain the other
        na, nb = rest_a.count(p.encode()), rest_b.count(p.encode())
        if na or nb:
            embedded.append((p, na, nb))
        rest_a, rest_b = rest_a.replace(p.encode(), b"\0"), rest_b.replace(p.encode(), b"\0")
    if embedded:
        found["paths"] = "embeds " + ", ".join(f"{p} ({na}x first, {nb}x second)" for p, na, nb in embedded)
    else:
        hashes_a, hashes_b = _NVCC_ANONYMOUS.findall(a), _NVCC_ANONYMOUS.findall(b)
        if set(hashes_a) != set(hashes_b):
            x, y = next((x, y) for x, y in zip(hashes_a, hashes_b, strict=False) if x != y)
            found["paths"] = (f"nvcc's anonymous-namespace names hash the source file's path: _GLOBAL__N__{x.decode()} "
                              f"vs _GLOBAL__N__{y.decode()}")
    norm_a, norm_b = _without_paths(a, build_paths), _without_paths(b, build_paths)
    dates_a, dates_b = _DATES.findall(norm_a), _DATES.findall(norm_b)
    if dates_a != dates_b and _DATES.sub(b"<date>", norm_a) == _DATES.sub(b"<date>", norm_b):
        x, y = next(((x, y) for x, y in zip(dates_a, dates_b, strict=False) if x != y), (b"", b""))
        found["timestamps"] = f"embedded date {x.decode(errors='replace')!r} vs {y.decode(errors='replace')!r}"
    elif norm_a != norm_b and "paths" not in found:
        found["content"] = _first_difference(a, b)
    return found


def record_lines_differing(a: bytes, b: bytes) -> list[str]:
    """The members whose lines differ between two RECORD files (path,hash,size per line)."""
    def lines(data: bytes) -> dict[str, str]:
        return {line.split(",", 1)[0]: line for line in data.decode(errors="replace").splitlines() if line}
    la, lb = lines(a), lines(b)
    return sorted(n for n in la.keys() | lb.keys() if la.get(n) != lb.get(n))


def _without_paths(data: bytes, build_paths) -> bytes:
    for p in sorted(set(build_paths), key=len, reverse=True):  # the longer first: one may contain the other
        data = data.replace(p.encode(), b"<build>")
    return data


def _first_difference(a: bytes, b: bytes) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"{len(a)} vs {len(b)} bytes, first difference at byte {at}"


def _metadata_difference(a: zipfile.ZipInfo, b: zipfile.ZipInfo, *, same_bytes: bool) -> str:
    mode_a, mode_b = (a.external_attr >> 16) & 0o7777, (b.external_attr >> 16) & 0o7777
    if mode_a != mode_b:
        return f"mode {mode_a:04o} vs {mode_b:04o}"
    stored_a, stored_b = (a.compress_type, a.compress_size, a.extra), (b.compress_type, b.compress_size, b.extra)
    if same_bytes and stored_a != stored_b:
        return "stored differently in the zip (compression or extra fields), same bytes"
    return ""


def _date(t) -> str:
    return "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}".format(*t)
