"""Reading a probe report: versions compared as numbers, arch names normalised (sm_90, compute_90, gfx90a),
which of the wheel's kernels a GPU runs, and the verdict on the wheel as a whole."""

from __future__ import annotations

import re

from buildctl.recipe import compat

# "Expected absent": a CPU build must not carry CUDA, NCCL, cuDNN or device code.
ABSENT = "absent"


_TRUE = {"ON", "1", "TRUE", "YES", "Y"}
_FALSE = {"OFF", "0", "FALSE", "NO", "N", ""}


MAX_COMPONENT_DIGITS = 9  # a version component longer than this reads as no version (int() stops at 4300)


def version_numbers(v: str) -> list[int]:
    """The leading dotted numbers of `v` (the wheel under test wrote it): ASCII digits only (str.isdigit
    takes '²', which int() refuses); a component of more than MAX_COMPONENT_DIGITS makes it unreadable, []."""
    m = re.match(r"[0-9]+(?:\.[0-9]+)*", str(v).strip())
    parts = m.group(0).split(".") if m else []
    return [int(x) for x in parts] if all(len(x) <= MAX_COMPONENT_DIGITS for x in parts) else []


def version_matches(expected: str, actual: str | None) -> bool:
    """Compare on the components both sides give: '12.1.1' matches torch's '12.1', '2.28' matches
    '2.28.9'; at least major.minor when the expectation has them."""
    if actual is None:
        return False
    e, a = version_numbers(expected), version_numbers(actual)
    n = min(len(e), len(a))
    if n == 0 or n < min(2, len(e)):
        return False
    return e[:n] == a[:n]


def normalize_arch(token: str) -> tuple[str, ...]:
    """'8.0' -> sm_80; '9.0+PTX' -> sm_90 + compute_90; '9.0a' -> sm_90a; 'sm_90'/'compute_90'/'gfx90a' as is."""
    t = token.strip()
    m = re.fullmatch(r"(\d{1,2})\.(\d)([af]?)(\+PTX)?", t, re.IGNORECASE)
    if m:
        base = f"{m.group(1)}{m.group(2)}{m.group(3).lower()}"
        return (f"sm_{base}", f"compute_{base}") if m.group(4) else (f"sm_{base}",)
    return (t.lower(),)


def normalize_arch_list(tokens) -> tuple[str, ...]:
    out: list[str] = []
    for t in tokens:
        for a in normalize_arch(t):
            if a not in out:
                out.append(a)
    return tuple(out)


def arch_sort_key(a: str) -> tuple[int, str]:
    m = re.search(r"[0-9]+", a)
    digits = m.group(0).lstrip("0") if m else ""
    return (int(digits or 0) if len(digits) <= MAX_COMPONENT_DIGITS else 10 ** MAX_COMPONENT_DIGITS, a)


def format_arch_set(items) -> str:
    items = sorted(items, key=arch_sort_key)
    return ", ".join(items) if items else "none"


def flag_value(value: str | None) -> bool | None:
    if value is None:
        return None
    v = str(value).strip().upper()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return None


def show_value(v) -> str:
    return "absent" if v in (None, ABSENT) else str(v)


def wheel_accelerator(probe: dict) -> str:
    fw = probe.get("framework") or {}
    if fw.get("hip"):
        return "rocm"
    if fw.get("cuda"):
        return "cuda"
    return "cpu"


def wheel_archs(probe: dict) -> tuple[set[str], set[str], str]:
    """(SASS archs, PTX archs, where from): the binary when cuobjdump ran, else the compiled arch list."""
    cov = probe.get("arch_coverage") or {}
    if cov.get("state") == "ok":
        return set(cov.get("sass") or []), set(cov.get("ptx") or []), "binary (cuobjdump)"
    archs = (probe.get("framework") or {}).get("arch_list") or []
    return ({a for a in archs if a.startswith("sm_")}, {a for a in archs if a.startswith("compute_")},
            "compiled arch list")


def binary_arch_to_cuda_arch(token: str) -> str | None:
    """'sm_90a' -> '9.0a', 'compute_90' -> '9.0+PTX' (the TORCH_CUDA_ARCH_LIST spelling compat reads)."""
    m = re.fullmatch(r"(sm|compute)_([0-9]{1,3})([0-9])([af]?)", token)
    if not m:
        return None
    arch = f"{m.group(2)}.{m.group(3)}{m.group(4)}"
    return arch + "+PTX" if m.group(1) == "compute" else arch


def gpu_runs_on(cc: str, sass: set[str], ptx: set[str]) -> str | None:
    """Which of the wheel's SASS/PTX a GPU of compute capability 'X.Y' runs (compat.arch_runs_on:
    cubin X.y on X.z for z >= y, 'a' only on exactly X.y, PTX JIT on any newer GPU); None if none."""
    exact = "sm_" + str(cc).replace(".", "")
    if exact in sass:
        return exact
    for token in sorted(sass, key=arch_sort_key, reverse=True) + sorted(ptx, key=arch_sort_key, reverse=True):
        arch = binary_arch_to_cuda_arch(token)
        try:
            if arch and compat.arch_runs_on(arch, cc):
                return token if token.startswith("sm_") else f"{token} (PTX JIT)"
        except ValueError:
            continue
    return None


def verdict(probe: dict) -> str:
    """One line about the wheel and the GPUs here, from the inventory taken before any CUDA call."""
    fw = probe.get("framework") or {}
    inv = probe.get("gpus") or {}
    devs = inv.get("devices") or []
    if fw.get("hip"):
        build = f"ROCm {fw['hip']} build"
    elif fw.get("cuda"):
        build = f"CUDA {fw['cuda']} build"
    else:
        build = "CPU-only build"
    amd = probe.get("amd_gpus")
    if fw.get("hip") and amd is not None:
        if amd.get("state") != "ok":
            return f"{build}; {amd.get('reason')}: GPU checks skipped"
        return f"{build} on {amd.get('devices')} AMD GPU(s)"
    if inv.get("state") != "ok":
        here = inv.get("reason") or inv.get("state") or "GPU inventory unavailable"
        tail = ""
        if fw.get("cuda"):
            tail = ": GPU checks skipped" + (", all-reduce on gloo/CPU"
                                             if (probe.get("distributed") or {}).get("available") else "")
        return f"{build}; {here}{tail}"
    names: dict[str, int] = {}
    for d in devs:
        key = f"{d.get('name')} (sm_{str(d.get('compute_capability') or '?').replace('.', '')})"
        names[key] = names.get(key, 0) + 1
    gpus = ", ".join(f"{n}x {k}" for k, n in names.items()) or "no GPU"
    drv = f"driver {inv.get('driver_version')} (CUDA <= {inv.get('cuda_driver_version')})"
    if not fw.get("cuda") and not fw.get("hip"):
        return f"{build}; {gpus} here, unused by this wheel; {drv}"
    return f"{build} on {gpus}; {drv}"
