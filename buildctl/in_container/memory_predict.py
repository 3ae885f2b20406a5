"""How much memory a compile, link or nvcc unit will need: the nearest measurement, else a default.

Standard library only: the host builds a build's table from its store of measurements (`table`), the
compile container's launcher (memory_launcher.py, beside it) predicts each unit from that table (`predict`).

A measurement is {"framework", "version", "build_type", "unit", "peak_bytes"}: the peak resident memory of
the largest process of one unit (the launcher's wait4 rusage), the unit named by its output path relative
to the build directory. The nearest match, in this order:

  exact          the same unit of the same framework, version and build type (the latest measurement)
  other version  the same unit and build type in the nearest other version
  same folder    the largest unit measured in the unit's folder (same framework and build type)
  same kind      the 90th percentile of units of its kind (C, C++, CUDA, HIP, link) and build type, any framework
  default        the conservative default the caller gives (learning replaces it)
"""

from __future__ import annotations

import posixpath
import re

HOWS = ("exact", "other version", "same folder", "same kind", "default")
KIND_QUANTILE = 0.9
_VERSION_NUMBER = re.compile(r"\d+")


def kind_of(unit: str) -> str:
    """The kind of unit from its output path: cuda, hip, c, cxx, archive, link (a library or program)."""
    name = posixpath.basename(unit)
    for suffix, kind in ((".cu.o", "cuda"), (".hip.o", "hip"), (".c.o", "c"), (".o", "cxx"), (".obj", "cxx"),
                         (".a", "archive")):
        if name.endswith(suffix):
            return kind
    return "link"


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in _VERSION_NUMBER.findall(version)[:4])


def _distance(a: str, b: str) -> tuple[int, ...]:
    """How far two versions are apart, major first (2.6 is nearer 2.5 than 3.6, and 2.6.1 nearer 2.6.0 than 2.7)."""
    ta, tb = _version_tuple(a), _version_tuple(b)
    width = max(len(ta), len(tb), 1)
    ta, tb = ta + (0,) * (width - len(ta)), tb + (0,) * (width - len(tb))
    return tuple(abs(x - y) for x, y in zip(ta, tb, strict=True))


def _quantile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(measurements: list[dict], framework: str, version: str, build_type: str) -> dict:
    """A build's prediction table from every measurement of the store (later ones replace earlier ones):
    {"exact": {unit: bytes}, "other_version": {unit: bytes}, "folder": {dir: bytes}, "kind": {kind: bytes}}."""
    exact: dict[str, int] = {}
    nearest: dict[str, tuple[tuple[int, ...], int]] = {}
    folder: dict[str, int] = {}
    by_kind: dict[str, list[int]] = {}
    for m in measurements:
        unit, peak = m.get("unit"), m.get("peak_bytes")
        if not isinstance(unit, str) or not isinstance(peak, int) or peak <= 0:
            continue
        if m.get("build_type") != build_type:
            continue
        by_kind.setdefault(kind_of(unit), []).append(peak)
        if m.get("framework") != framework:
            continue
        d = posixpath.dirname(unit)
        folder[d] = max(folder.get(d, 0), peak)
        other = str(m.get("version", ""))
        if other == version:
            exact[unit] = peak
        else:
            distance = _distance(version, other)
            if unit not in nearest or distance <= nearest[unit][0]:
                nearest[unit] = (distance, peak)
    return {"exact": exact,
            "other_version": {u: p for u, (_, p) in nearest.items() if u not in exact},
            "folder": folder,
            "kind": {k: _quantile(v, KIND_QUANTILE) for k, v in by_kind.items()}}


def predict(tab: dict, unit: str, default_bytes: int) -> tuple[int, str]:
    """(bytes, how) for one unit: the nearest match in the table (HOWS), else `default_bytes`."""
    for how, section, name in (("exact", "exact", unit), ("other version", "other_version", unit),
                               ("same folder", "folder", posixpath.dirname(unit)),
                               ("same kind", "kind", kind_of(unit))):
        value = (tab.get(section) or {}).get(name)
        if isinstance(value, int) and value > 0:
            return value, how
    return default_bytes, "default"
