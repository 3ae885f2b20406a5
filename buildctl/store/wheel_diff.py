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
Members are read in chunks, never whole (a CUDA wheel's libraries are GBs): memory stays a few MiB.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
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
        differ_at = _first_difference_at(_chunks(za, a), _chunks(zb, b))
        if differ_at is not None:
            found.update(_classify(_summary(_chunks(za, a), build_paths), _summary(_chunks(zb, b), build_paths),
                                   build_paths, _difference_text(a.file_size, b.file_size, differ_at)))
            if name.endswith(".dist-info/RECORD") and "content" in found:
                found["content"] = "the recorded hashes of " + ", ".join(record_lines_differing(za.read(a), zb.read(b)))
        if a.date_time != b.date_time:
            found.setdefault("timestamps", f"zip date {_date(a.date_time)} vs {_date(b.date_time)}")
        i, j = order_a.index(name), position_b[name]
        if i != j:
            found["ordering"] = f"member #{i + 1} vs #{j + 1}"
        meta = _metadata_difference(a, b, same_bytes=differ_at is None)
        if meta and "content" not in found:
            found["content"] = meta
        elif meta:
            found["content"] += f"; {meta}"
        if found:
            kinds = tuple(k for k in KINDS if k in found)
            out.append(MemberDifference(name, kinds, "; ".join(found[k] for k in kinds)))
    return out


# --------------------------------------------------------------------------- members read in chunks

# A member is read CHUNK bytes at a time, never whole: a CUDA wheel's libraries are GBs. The patterns are
# found across chunk boundaries by holding back, at each boundary, as many bytes as a match can span.
CHUNK = 256 << 10
_DATES_SPAN = 64  # the longest embedded date _DATES matches (a run of fractional digits aside)
_NVCC_SPAN = 21  # _GLOBAL__N__ + 8 hex + _
MAX_DATES_KEPT = 10_000  # embedded dates kept per member to name the first that differs; all are hashed


def _chunks(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with z.open(info) as f:
        while chunk := f.read(CHUNK):
            yield chunk


def _first_difference_at(a: Iterable[bytes], b: Iterable[bytes]) -> int | None:
    """Where two byte streams first differ (the shorter one's length when it is the other's start); None
    when they are the same bytes."""
    offset, rest_a, rest_b = 0, b"", b""
    it_a, it_b = iter(a), iter(b)
    while True:
        if not rest_a:
            rest_a = next(it_a, b"")
        if not rest_b:
            rest_b = next(it_b, b"")
        if not rest_a or not rest_b:
            return None if not rest_a and not rest_b else offset
        n = min(len(rest_a), len(rest_b))
        if rest_a[:n] != rest_b[:n]:
            return offset + next(i for i in range(n) if rest_a[i] != rest_b[i])
        offset, rest_a, rest_b = offset + n, rest_a[n:], rest_b[n:]


def _difference_text(size_a: int, size_b: int, at: int) -> str:
    return f"{size_a} vs {size_b} bytes, first difference at byte {at}"


def _replacing(chunks: Iterable[bytes], old: bytes, new: bytes, seen: list[int]) -> Iterator[bytes]:
    """`chunks` with every `old` replaced by `new` as bytes.replace would (leftmost, not overlapping);
    seen[0] counts them."""
    keep, carry = len(old) - 1, b""
    for chunk in chunks:
        buf, pos, out = carry + chunk, 0, []
        while (at := buf.find(old, pos)) != -1:
            out += [buf[pos:at], new]
            seen[0], pos = seen[0] + 1, at + len(old)
        cut = max(pos, len(buf) - keep)  # a match starting after `cut` would end in the next chunk
        out.append(buf[pos:cut])
        carry = buf[cut:]
        yield b"".join(out)
    yield carry


def _finding(chunks: Iterable[bytes], pattern: re.Pattern, span: int, found: Callable[[bytes], None],
             sub: bytes | None = None, literal: bytes = b"") -> Iterator[bytes]:
    """`chunks` with each match of `pattern` passed to `found` (and replaced by `sub`, when given), as
    pattern.finditer over the whole stream would: a match is taken once `span` bytes follow it.
    `literal`: bytes every match contains (a chunk without them is not searched)."""
    carry = b""
    for chunk in chunks:
        buf = carry + chunk
        final = len(buf) - span  # a match ending by here cannot grow with the next chunk
        pos, cut, out = 0, None, []
        for m in pattern.finditer(buf) if literal in buf else ():
            if m.end() > final:
                cut = m.start()
                break
            found(m.group(1) if pattern.groups else m.group(0))
            out += [buf[pos:m.start()], m.group(0) if sub is None else sub]
            pos = m.end()
        cut = max(pos, final) if cut is None else cut
        out.append(buf[pos:cut])
        carry = buf[cut:]
        yield b"".join(out)
    for m in pattern.finditer(carry):  # the end of the stream: nothing follows
        found(m.group(1) if pattern.groups else m.group(0))
    yield carry if sub is None else pattern.sub(sub, carry)


@dataclass(frozen=True)
class _Summary:
    """What classifying a member needs of its bytes, gathered in one pass."""

    path_counts: tuple[int, ...]  # occurrences of each build path, longest first (a longer one replaced first)
    nvcc_hashes: tuple[bytes, ...]  # nvcc's anonymous-namespace hashes, in order
    dates: tuple[bytes, ...]  # the first MAX_DATES_KEPT embedded dates (of the bytes with the paths replaced)
    dates_digest: str  # of every embedded date, in order
    without_paths: str  # sha256 of the bytes with each build path as <build>
    without_dates: str  # sha256 of those bytes with each date as <date> too


def _longest_first(build_paths) -> list[str]:
    return sorted(set(build_paths), key=len, reverse=True)  # one may contain the other


def _summary(chunks: Iterable[bytes], build_paths) -> _Summary:
    nvcc: list[bytes] = []
    stream = _finding(chunks, _NVCC_ANONYMOUS, _NVCC_SPAN, nvcc.append, literal=b"_GLOBAL__N__")
    counts = []
    for p in _longest_first(build_paths):
        counts.append([0])
        stream = _replacing(stream, p.encode(), b"<build>", counts[-1])
    dates: list[bytes] = []
    all_dates = hashlib.sha256()

    def date(d: bytes) -> None:
        all_dates.update(d + b"\0")
        if len(dates) < MAX_DATES_KEPT:
            dates.append(d)

    without_paths, without_dates = hashlib.sha256(), hashlib.sha256()

    def hashed(chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            without_paths.update(chunk)
            yield chunk

    for chunk in _finding(hashed(stream), _DATES, _DATES_SPAN, date, b"<date>"):
        without_dates.update(chunk)
    return _Summary(tuple(c[0] for c in counts), tuple(nvcc), tuple(dates), all_dates.hexdigest(),
                    without_paths.hexdigest(), without_dates.hexdigest())


def _first_pair(xs, ys) -> tuple[bytes | None, bytes | None]:
    """The first position where two sequences differ: (x, y), None where one has ended."""
    return next(((x, y) for x, y in itertools.zip_longest(xs, ys) if x != y), (None, None))


def _classify(a: _Summary, b: _Summary, build_paths, content: str) -> dict[str, str]:
    """{kind: how} for two members whose bytes differ; `content`: how, should nothing else explain it."""
    found: dict[str, str] = {}
    embedded = [(p, na, nb) for p, na, nb in zip(_longest_first(build_paths), a.path_counts, b.path_counts, strict=True)
                if na or nb]
    if embedded:
        found["paths"] = "embeds " + ", ".join(f"{p} ({na}x first, {nb}x second)" for p, na, nb in embedded)
    elif set(a.nvcc_hashes) != set(b.nvcc_hashes):
        x, y = _first_pair(a.nvcc_hashes, b.nvcc_hashes)
        name = lambda h: f"_GLOBAL__N__{h.decode()}" if h is not None else "(none)"  # noqa: E731
        found["paths"] = f"nvcc's anonymous-namespace names hash the source file's path: {name(x)} vs {name(y)}"
    if a.dates_digest != b.dates_digest and a.without_dates == b.without_dates:
        x, y = _first_pair(a.dates, b.dates)
        x, y = (d.decode(errors="replace") if d is not None else "" for d in (x, y))
        found["timestamps"] = f"embedded date {x!r} vs {y!r}"
    elif a.without_paths != b.without_paths and "paths" not in found:
        found["content"] = content
    return found


def classify_bytes(a: bytes, b: bytes, build_paths=()) -> dict[str, str]:
    """{kind: how} for two different byte strings of one member: paths, timestamps and/or content."""
    at = _first_difference_at([a], [b])
    return _classify(_summary([a], build_paths), _summary([b], build_paths), build_paths,
                     _difference_text(len(a), len(b), min(len(a), len(b)) if at is None else at))


def record_lines_differing(a: bytes, b: bytes) -> list[str]:
    """The members whose lines differ between two RECORD files (path,hash,size per line)."""
    def lines(data: bytes) -> dict[str, str]:
        return {line.split(",", 1)[0]: line for line in data.decode(errors="replace").splitlines() if line}
    la, lb = lines(a), lines(b)
    return sorted(n for n in la.keys() | lb.keys() if la.get(n) != lb.get(n))


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
