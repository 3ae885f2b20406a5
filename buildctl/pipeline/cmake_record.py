"""What one CMake configure recorded, as the build script keeps it: the summary block's `-- key : value`
lines (cmake-summary.txt), the cache's entries (cmake-cache.txt, a grep of CMakeCache.txt), the
found-package lines (cmake-found.txt) and the whole configure log (configure.log), read as CMake
messages. The configure gate (configure_gate.py) reads its facts here.

Everything here was written by the build container: bounded reads, plain text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_READ = 4 << 20  # per file: a PyTorch configure log is about 1 MB
CONFIGURE_LOG = "configure.log"  # the full configure log, beside the build script's cmake-*.txt


# --------------------------------------------------------------------------- what CMake recorded


@dataclass(frozen=True)
class Recorded:
    """What one configure left: the summary block's `-- key : value` lines, the CMake cache's entries
    (without UNINITIALIZED ones: a -D the project never declared is the request echoed, not a decision),
    the found-package lines, and the configure log as CMake messages (a wrapped warning joined into one)."""

    summary: Mapping[str, str]
    cache: Mapping[str, str]
    found: Mapping[str, str]
    messages: tuple[str, ...]

    @classmethod
    def read(cls, out_dir: Path, log_text: str = "") -> Recorded:
        """From the build script's files in `out_dir` (and its configure.log, else `log_text`: the
        build's own log, which carries the configure's output when it ran in this build)."""
        return cls.of(_read(out_dir / "cmake-summary.txt"), _read(out_dir / "cmake-cache.txt"),
                      _read(out_dir / "cmake-found.txt"), _read(out_dir / CONFIGURE_LOG) or log_text)

    @classmethod
    def of(cls, summary: str, cache: str, found: str = "", log: str = "") -> Recorded:
        return cls(_summary(summary), _cache(cache), _found(found), cmake_messages(log))

    def value(self, where: str, *, empty_is_off: bool = False) -> str | None:
        """What CMake recorded at `where` ("summary:USE_MKL"); None when nothing. A switch recorded empty
        (`USE_MKL :`, `USE_X:BOOL=`: a variable CMake never set) is CMake's off when `empty_is_off`."""
        kind, _, name = where.partition(":")
        table = {"summary": self.summary, "cache": self.cache, "found": self.found}[kind]
        value = (table.get(name) or "").strip()
        if not value and empty_is_off and name in table:
            return "OFF"
        return value or None


_SUMMARY_LINE = re.compile(r"^--\s+(?P<key>[A-Za-z][\w .+/()-]*?)\s*:\s*(?P<value>.*?)\s*$")
_CACHE_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.+-]*):(?P<type>[A-Z]+)=(?P<value>.*)$")
_FOUND_WITH_VERSION = re.compile(r'^-- Found (?P<name>\w+): (?P<where>.*?)\s*\(found (?:suitable )?version "(?P<version>[^"]+)"')
_FOUND_HIP = re.compile(r"^-- Found (?P<name>\w+) (?P<version>\d[\w.+-]*): (?P<where>.+?)\s*$")
_FOUND_NCCL = re.compile(r"^-- Found NCCL \(include: (?P<include>[^,]+), library: (?P<library>[^)]+)\)")
_FOUND = re.compile(r"^-- Found (?P<name>\w+): (?P<where>.+?)\s*$")
_VERSION_LINE = re.compile(r"^-- (?P<name>\w+) version: (?P<version>\S+)\s*$")


def _summary(text: str) -> dict[str, str]:
    """{key: value}: the first (outer) value of a repeated key; "" for a key printed only empty (a switch
    CMake never set, i.e. off: PyTorch prints `USE_MKL :` when CAFFE2_USE_MKL is unset)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _SUMMARY_LINE.match(line)
        if m:
            key, value = m.group("key").strip(), m.group("value")
            if value.strip() and not out.get(key):
                out[key] = value
            else:
                out.setdefault(key, "")
    return out


def _cache(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _CACHE_LINE.match(line)
        if m and m.group("type") != "UNINITIALIZED":
            out[m.group("name")] = m.group("value")
    return out


def _found(text: str) -> dict[str, str]:
    """`-- Found X: where (found version "V")` as {X: where, "X version": V}; NCCL's own lines too."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if m := _FOUND_NCCL.match(line):
            out.setdefault("NCCL library", m.group("library").strip())
        elif m := (_FOUND_WITH_VERSION.match(line) or _FOUND_HIP.match(line)):
            out.setdefault(m.group("name"), m.group("where"))
            out.setdefault(f"{m.group('name')} version", m.group("version"))
        elif m := _FOUND.match(line):
            out.setdefault(m.group("name"), m.group("where"))
        elif m := _VERSION_LINE.match(line):
            out.setdefault(f"{m.group('name')} version", m.group("version"))
    return out


def cmake_messages(log: str) -> tuple[str, ...]:
    """The configure log as one line per message: `CMake Warning at F:N (message): text` with CMake's
    wrapped, indented text joined; `-- status` lines as they are."""
    out: list[str] = []
    block: list[str] = []
    for raw in log.splitlines():
        line = raw.rstrip()
        if block:
            if line.startswith((" ", "\t")) and line.strip():
                block.append(line.strip())
                continue
            if not line.strip() and len(block) == 1:
                continue  # the blank line between the header and its text
            out.append(" ".join(block))
            block = []
        if line.startswith(("CMake Warning", "CMake Error", "CMake Deprecation Warning")):
            block = [line.strip()]
        elif line.strip():
            out.append(line.strip())
    if block:
        out.append(" ".join(block))
    return tuple(out)


def _read(path: Path) -> str:
    """A file the build container wrote: bounded, never followed out of place."""
    try:
        if path.is_symlink() or not path.is_file():
            return ""
        with path.open("rb") as fh:
            return fh.read(MAX_READ).decode("utf-8", errors="replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- values

_ON = {"1", "ON", "YES", "TRUE", "Y"}
_OFF = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}


def on_off(value: str) -> str | None:
    """A CMake boolean as ON or OFF (1, TRUE, YES, ... / 0, FALSE, *-NOTFOUND, ...); None for any other value."""
    up = value.strip().upper()
    return "ON" if up in _ON else "OFF" if up in _OFF or up.endswith("-NOTFOUND") else None


def version_parts(text: str) -> tuple[str, ...]:
    """The first version in `text` as its parts: `release 12.4, V12.4.131` -> (12, 4)."""
    m = re.search(r"\d+(?:\.\d+)*", text)
    return tuple(m.group(0).split(".")) if m else ()


def arch_set(text: str) -> set[str]:
    """`8.0;9.0+PTX`, `8.0 9.0`, `-gencode arch=compute_90,code=sm_90`, `gfx90a;gfx942` as a set of
    archs: `9.0` for device code, `9.0+PTX` for PTX, gfx names as they are. What follows
    "(environment" (demofw's echo of the variable) is not a decision."""
    text = text.split("(environment", 1)[0]
    if "code=" in text:
        out = set()
        for kind, digits, suffix in re.findall(r"code=\[?(sm|compute)_(\d+)([af]?)", text):
            arch = f"{digits[:-1]}.{digits[-1]}{suffix}"
            out.add(arch if kind == "sm" else f"{arch}+PTX")
        return out
    out = set()
    for token in re.split(r"[;,\s]+", text.strip()):
        if re.fullmatch(r"gfx[0-9a-f]+", token):
            out.add(token)
        elif m := re.fullmatch(r"(\d+\.\d[af]?)(\+PTX)?", token):
            out.add(m.group(1))
            if m.group(2):
                out.add(f"{m.group(1)}+PTX")
    return out


# --------------------------------------------------------------------------- comparisons (the gate's)

def as_read(kind: str, decided: str | None) -> str | None:
    """A decision as a person reads it: a switch ON/OFF, archs as a list (not nvcc's whole flag line)."""
    if decided is None:
        return None
    if kind == "switch":
        return on_off(decided) or decided
    if kind == "archs":
        return " ".join(sorted(arch_set(decided), key=lambda a: (a.startswith("gfx"), a))) or decided
    return decided


def same(kind: str, asked: str, decided: str) -> bool:
    if kind == "switch":
        return (on_off(decided) or decided.strip()) == asked
    if kind == "version":  # as precisely as the less precise side says: 12.4 is 12.4.131, 9.1.0 is 9.1.0.70
        a, d = version_parts(asked), version_parts(decided)
        n = min(len(a), len(d))
        return n > 0 and a[:n] == d[:n]
    if kind == "under":
        return os.path.normpath(decided).startswith(asked) or (decided.rstrip("/") + "/") == asked
    if kind == "prefix":
        return decided.startswith(asked)
    if kind == "archs":
        return arch_set(asked) == arch_set(decided)
    if kind == "blas":  # CMake records BLAS_INFO: open for OpenBLAS, mkl, generic, flexi for FlexiBLAS, ...
        a, d = asked.strip().lower(), decided.strip().lower()
        return bool(d) and (a.startswith(d) or d.startswith(a))
    if kind == "tool":
        return os.path.basename(decided.strip()) == os.path.basename(asked.strip())
    return decided.strip() == asked.strip()
