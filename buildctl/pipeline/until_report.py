"""What `invoke build --until STEP` shows: the facts a user checks before spending hours.

configure: the CMake summary PyTorch (and demofw) print, reduced to Python, NumPy, the USE_*
switches, BLAS, CPU capability and what CUDA/NCCL/cuDNN CMake found; compile: ninja's step counts
and compile time from .ninja_log; wheel: the wheel file. Reads only the files the build script
left in the step's output folder.
"""

from __future__ import annotations

import re
from pathlib import Path

from buildctl.pipeline import eta

_SUMMARY_LINE = re.compile(r"^--\s+(?P<key>[A-Za-z][\w .+/()-]*?)\s*:\s*(?P<value>.*?)\s*$")
# Summary keys worth a row, in this order; USE_* rows follow.
HEADLINE_KEYS = (
    "Build type", "TORCH_VERSION", "C++ compiler version", "Python version", "Python executable",
    "Python site-package", "Python includes", "NumPy include", "BLAS", "LAPACK", "CPU capability",
    "CUDA version", "CUDA root directory", "NVCC executable", "CUDA host compiler", "cuDNN version",
    "cuDNN library", "NCCL version", "NCCL library", "USE_SYSTEM_NCCL", "HIP version", "ROCM_PATH",
    "Using ccache if found", "CMAKE_BUILD_TYPE", "C++ compiler", "C++ launcher",
)
# Lines CMake prints while finding packages, outside the summary block (PyTorch's FindNCCL).
_FOUND_LINE = re.compile(r"^-- (?:Found NCCL \(include: (?P<nccl_inc>[^,]+), library: (?P<nccl_lib>[^)]+)\)"
                         r"|NCCL version: (?P<nccl_ver>\S+))\s*$", re.M)
# CPU kernels CMake found support for (CMakeCache.txt), shown as "CPU capability".
_CAPABILITY = re.compile(r"^(?:CXX|C)_(AVX512|AVX2|AVX|SVE\d*|VSX|ZVECTOR)_FOUND:\w+=(TRUE|ON|1)$", re.M)


def parse_summary(text: str) -> dict[str, str]:
    """`-- key : value` lines of the CMake summary block, in order; later keys win."""
    facts: dict[str, str] = {}
    for line in text.splitlines():
        m = _SUMMARY_LINE.match(line)
        if m and m.group("key").strip() not in ("General", "Summary"):
            facts[m.group("key").strip()] = m.group("value")
    return facts


def cpu_capability(cache_text: str) -> str | None:
    found = sorted(set(_CAPABILITY.findall(cache_text)), key=lambda kv: kv[0])
    return " ".join(name for name, _ in found) or None


def cache_entries(cache_text: str) -> dict[str, str]:
    """NAME:TYPE=VALUE lines of CMakeCache.txt."""
    out = {}
    for line in cache_text.splitlines():
        name, sep, value = line.partition("=")
        if sep and ":" in name and not line.startswith(("//", "#")):
            out[name.split(":", 1)[0]] = value
    return out


def configure_facts(out_dir: Path) -> dict[str, str]:
    summary = _read(out_dir / "cmake-summary.txt")
    cache_text = _read(out_dir / "cmake-cache.txt")
    facts = parse_summary(summary)
    capability = cpu_capability(cache_text)
    if capability and "CPU capability" not in facts:
        facts["CPU capability"] = capability
    for m in _FOUND_LINE.finditer(_read(out_dir / "cmake-found.txt")):
        if m.group("nccl_ver"):
            facts.setdefault("NCCL version", m.group("nccl_ver"))
        if m.group("nccl_lib"):
            facts.setdefault("NCCL library", m.group("nccl_lib"))
    cache = cache_entries(cache_text)
    # FindPython keeps NumPy's include dir as an internal entry; found = NumPy headers for torch_python.
    numpy = cache.get("_Python_NumPy_INCLUDE_DIR") or cache.get("Python_NumPy_INCLUDE_DIRS")
    if numpy:
        facts.setdefault("NumPy include", numpy)
    return facts


def headline(facts: dict[str, str]) -> list[tuple[str, str]]:
    """The rows to show: the headline keys present, then every USE_* switch."""
    rows = [(k, facts[k]) for k in HEADLINE_KEYS if k in facts]
    rows += [(k, v) for k, v in facts.items() if k.startswith("USE_")]
    return rows


def ninja_steps(out_dir: Path) -> dict[str, float | int]:
    """Steps recorded in .ninja_log (latest entry per output) and their summed compile seconds."""
    latest: dict[str, tuple[int, int]] = {}
    for start, end, out, _ in eta.steps_of(_read(out_dir / "ninja_log.txt")):
        latest[out] = (start, end)
    busy_ms = sum(end - start for start, end in latest.values())
    return {"steps": len(latest), "busy_s": round(busy_ms / 1000, 1)}


def _read(path: Path, limit: int = 4 << 20) -> str:
    try:
        with path.open("rb") as fh:
            return fh.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
