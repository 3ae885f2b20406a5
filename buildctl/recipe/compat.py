"""Compatibility tables (arch/CUDA, driver/CUDA, cuDNN and NCCL/CUDA, Python/distro, nvcc/GCC, ROCm)
and the small lookups over them; preflight.py checks a recipe against them.

Every table names its source. Facts marked *unconfirmed* are best knowledge without a primary source
at hand; the checks that rest on them only warn.

Versions are compared as numeric tuples (`vkey`), never as strings ("12.10" > "12.9").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# ---------------------------------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------------------------------


def vkey(version: str, width: int = 4) -> tuple[int, ...]:
    """'12.4' -> (12, 4, 0, 0); '535.104.05' -> (535, 104, 5, 0). Raises ValueError if not numeric."""
    parts = version.strip().split(".")
    # ASCII digits, few: str.isdigit takes '²' and int() refuses it, and more than 4300 digits
    if not parts or not all(re.fullmatch(r"[0-9]{1,9}", p) for p in parts):
        raise ValueError(f"not a numeric version: {version[:40]!r}")
    nums = tuple(int(p) for p in parts)
    return nums + (0,) * (width - len(nums)) if len(nums) < width else nums


def vcmp(a: str, b: str) -> int:
    """-1, 0 or 1 as version a is older than, equal to or newer than b (numeric, zero-padded)."""
    ka, kb = vkey(a), vkey(b)
    width = max(len(ka), len(kb))
    ka, kb = ka + (0,) * (width - len(ka)), kb + (0,) * (width - len(kb))
    return (ka > kb) - (ka < kb)


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def major(version: str) -> int:
    return vkey(version.split(".")[0])[0]


# ---------------------------------------------------------------------------------------------------
# Compute capability <-> CUDA toolkit
# ---------------------------------------------------------------------------------------------------

# compute capability -> (first toolkit whose nvcc compiles it, first toolkit that no longer does | None)
# Sources: mesonbuild/meson mesonbuild/modules/cuda.py (per-toolkit arch lists, mirrors the CUDA
# release notes); pytorch cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake;
# CUDA 11.0/12.0/13.0 release notes "Deprecated/Dropped features" (sm_30/32 at 11.0, sm_35/37 at
# 12.0, sm_50..sm_72 at 13.0); CUDA 13.0 renamed sm_101 (Thor) to sm_110. Collected in
# /work/shared/reference/pytorch-build-contract.md section 5. Pre-Maxwell first toolkits are from the
# Wikipedia "CUDA" article (only the removals matter for supported toolkits).
CUDA_ARCH_RANGE: dict[str, tuple[str, str | None]] = {
    "3.0": ("4.2", "11.0"),
    "3.2": ("6.0", "11.0"),
    "3.5": ("5.0", "12.0"),
    "3.7": ("6.5", "12.0"),
    "5.0": ("6.0", "13.0"),
    "5.2": ("6.5", "13.0"),
    "5.3": ("7.0", "13.0"),
    "6.0": ("8.0", "13.0"),
    "6.1": ("8.0", "13.0"),
    "6.2": ("8.0", "13.0"),
    "7.0": ("9.0", "13.0"),
    "7.2": ("9.0", "13.0"),
    "7.5": ("10.0", None),
    "8.0": ("11.0", None),
    "8.6": ("11.1", None),
    "8.7": ("11.5", None),
    "8.9": ("11.8", None),
    "9.0": ("11.8", None),
    "9.0a": ("12.0", None),
    "10.0": ("12.8", None),
    "10.0a": ("12.8", None),
    "10.0f": ("12.9", None),
    "10.1": ("12.8", "13.0"),  # renamed to 11.0 in CUDA 13.0
    "10.1a": ("12.8", "13.0"),
    "10.3": ("12.9", None),
    "10.3a": ("12.9", None),
    "10.3f": ("12.9", None),
    "11.0": ("13.0", None),
    "11.0a": ("13.0", None),
    "11.0f": ("13.0", None),
    "12.0": ("12.8", None),
    "12.0a": ("12.8", None),
    "12.0f": ("12.9", None),
    "12.1": ("12.9", None),
    "12.1a": ("12.9", None),
    "12.1f": ("12.9", None),
}

_ARCH_RE = re.compile(r"^(\d{1,2})\.(\d)([af]?)(\+PTX)?$")

# PyTorch features whose CUDA kernels run only from an arch on, yet are compiled for every listed arch
# (their switch, what they are, the first arch that runs them, their kernel units, the source). Flash
# attention (FlashAttention-2): aten/src/ATen/native/transformers/cuda/flash_attn/kernels/*.cu, about 94
# units in the 2.x releases; can_use_flash_attention() refuses anything below sm80, and pytorch#194502
# (2026-08) turns the switch off when no listed arch reaches sm80 (releases before it compile the set).
FEATURE_ARCH_FLOOR: tuple[tuple[str, str, str, int, str], ...] = (
    ("USE_FLASH_ATTENTION", "flash attention", "8.0", 94, "pytorch#194502; flash_attn/kernels/*.cu"),
)
# The mean compile time of one .cu unit for one arch, measured on this project's CUDA 12.4 sample (4 units,
# 194-1,001 s, a 2-core machine under load: an upper bound; docs/evidence/pytorch2.6-cuda12.4-trixie).
CU_UNIT_SECONDS = 484


def parse_arch(arch: str) -> tuple[str, str, bool]:
    """'9.0a+PTX' -> ('9.0', 'a', True). Raises ValueError on anything else."""
    m = _ARCH_RE.match(arch.strip())
    if not m:
        raise ValueError(f"not a compute capability: {arch!r} (expected e.g. 8.6, 9.0a, 8.0+PTX)")
    return f"{m.group(1)}.{m.group(2)}", m.group(3), bool(m.group(4))


def arch_key(arch: str) -> str:
    """The CUDA_ARCH_RANGE key of an arch entry: '8.0+PTX' -> '8.0', '9.0a' -> '9.0a'."""
    base, suffix, _ = parse_arch(arch)
    return base + suffix


def arch_supported(arch: str, cuda: str) -> tuple[bool, str]:
    """Can CUDA toolkit `cuda` compile `arch` (a TORCH_CUDA_ARCH_LIST entry, `+PTX` accepted)?"""
    key = arch_key(arch)
    if key not in CUDA_ARCH_RANGE:
        return False, f"unknown compute capability {arch} (known: {', '.join(CUDA_ARCH_RANGE)})"
    first, removed = CUDA_ARCH_RANGE[key]
    if vcmp(cuda, first) < 0:
        return False, f"CUDA {cuda} cannot compile {arch} (needs CUDA >= {first})"
    if removed is not None and vcmp(cuda, removed) >= 0:
        return False, f"CUDA {cuda} no longer compiles {arch} (removed in CUDA {removed})"
    return True, f"CUDA {cuda} compiles {arch}"


def cuda_range_for_archs(archs: Iterable[str]) -> tuple[str, str | None] | None:
    """The toolkit range [first, removed) that compiles every arch; None if empty or unknown arch."""
    lo, hi = "0", None
    for arch in archs:
        key = arch_key(arch)
        if key not in CUDA_ARCH_RANGE:
            return None
        first, removed = CUDA_ARCH_RANGE[key]
        lo = first if vcmp(first, lo) > 0 else lo
        if removed is not None and (hi is None or vcmp(removed, hi) < 0):
            hi = removed
    if hi is not None and vcmp(lo, hi) >= 0:
        return None
    return lo, hi


def describe_cuda_range(rng: tuple[str, str | None]) -> str:
    lo, hi = rng
    return f"CUDA >= {lo}" if hi is None else f"CUDA >= {lo} and < {hi}"


def arch_runs_on(arch: str, compute_capability: str) -> bool:
    """Does code built for `arch` run on a GPU of `compute_capability` ('8.6')?

    CUDA C Programming Guide, "Binary Compatibility" / "PTX Compatibility": a cubin for X.y runs on
    X.z with z >= y; arch-specific 'a' code runs only on exactly X.y; family 'f' code on X.z, z >= y;
    PTX for X.y is JIT-compiled by the driver for any capability >= X.y ('a' PTX: exactly X.y).
    """
    base, suffix, ptx = parse_arch(arch)
    gpu = vkey(compute_capability)
    want = vkey(base)
    if suffix == "a":
        return gpu == want
    if gpu[0] == want[0] and gpu[1] >= want[1]:
        return True
    return ptx and suffix == "" and gpu >= want


def archs_cover(cuda_arch: Sequence[str], compute_capability: str) -> bool:
    return any(arch_runs_on(a, compute_capability) for a in cuda_arch)


# ---------------------------------------------------------------------------------------------------
# Driver <-> CUDA toolkit
# ---------------------------------------------------------------------------------------------------

# CUDA toolkit release -> minimum Linux driver ("toolkit driver version", CUDA release notes Table 3,
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#id5; same table in
# mesonbuild/meson modules/cuda.py). Reference: pytorch-build-contract.md section 5.
MIN_DRIVER: dict[str, str] = {
    "11.0.1": "450.36.06",
    "11.0.2": "450.51.05",
    "11.0.3": "450.51.06",
    "11.1.0": "455.23",
    "11.1.1": "455.32",
    "11.2.0": "460.27.03",
    "11.2.1": "460.32.03",
    "11.2.2": "460.32.03",
    "11.3.0": "465.19.01",
    "11.3.1": "465.19.01",
    "11.4.0": "470.42.01",
    "11.4.1": "470.57.02",
    "11.4.2": "470.57.02",
    "11.4.3": "470.82.01",
    "11.4.4": "470.82.01",
    "11.5.0": "495.29.05",
    "11.5.1": "495.29.05",
    "11.5.2": "495.29.05",
    "11.6.0": "510.39.01",
    "11.6.1": "510.47.03",
    "11.6.2": "510.47.03",
    "11.7.0": "515.43.04",
    "11.7.1": "515.48.07",
    "11.8.0": "520.61.05",
    "12.0.0": "525.60.13",
    "12.0.1": "525.85.11",
    "12.1.0": "530.30.02",
    "12.1.1": "530.30.02",
    "12.2.0": "535.54.03",
    "12.2.1": "535.86.09",
    "12.2.2": "535.104.05",
    "12.3.0": "545.23.06",
    "12.3.1": "545.23.08",
    "12.4.0": "550.54.14",
    "12.4.1": "550.54.15",
    "12.5.0": "555.42.02",
    "12.5.1": "555.42.06",
    "12.6.0": "560.28.03",
    "12.6.1": "560.35.03",
    "12.6.2": "560.35.03",
    "12.6.3": "560.35.05",
    "12.8.0": "570.26",
    "12.8.1": "570.124.06",
    "12.9.0": "575.51.03",
    "12.9.1": "575.57.08",
    "13.0.0": "580.65.06",
    "13.0.1": "580.82.07",
    "13.0.2": "580.95.05",
}

# CUDA major -> lowest driver that runs any toolkit of that major through minor-version compatibility
# (https://docs.nvidia.com/deploy/cuda-compatibility/ "Minor Version Compatibility"; the 12.x value is
# the one cuDNN's support matrix and meson use). Features that need the full minimum (above) are
# unavailable on such a driver, notably JIT of PTX newer than the driver.
MINOR_COMPAT_FLOOR: dict[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


def _toolkit_releases(mm: str) -> list[str]:
    return sorted((v for v in MIN_DRIVER if major_minor(v) == mm), key=vkey)


def known_cuda(cuda: str) -> bool:
    """Is `cuda` (major.minor or full) a toolkit release in MIN_DRIVER?"""
    releases = _toolkit_releases(major_minor(cuda))
    if not releases:
        return False
    return len(cuda.split(".")) < 3 or any(vcmp(r, cuda) == 0 for r in releases)


def min_driver(cuda: str) -> str | None:
    """Minimum driver for toolkit `cuda`. For 'X.Y' the X.Y.0 release (the least any X.Y needs);
    for 'X.Y.Z' that release, or the newest known X.Y.z <= Z. None when the table has no X.Y."""
    releases = _toolkit_releases(major_minor(cuda))
    if not releases:
        return None
    if len(cuda.split(".")) < 3:
        return MIN_DRIVER[releases[0]]
    older = [r for r in releases if vcmp(r, cuda) <= 0]
    return MIN_DRIVER[older[-1] if older else releases[0]]


def driver_supports(driver: str, cuda: str) -> tuple[bool, str]:
    """Can a host with driver `driver` run code built with toolkit `cuda`?

    True when the driver meets the toolkit's minimum, or at least its major's minor-version
    compatibility floor (then the reason says which features need the full minimum).
    """
    try:
        dkey = vkey(driver)
    except ValueError:
        return False, f"cannot read driver version {driver[:40]!r}"
    try:
        full = min_driver(cuda)
        floor = MINOR_COMPAT_FLOOR.get(major(cuda))
    except ValueError:
        return False, f"cannot read CUDA version {cuda[:40]!r}"
    if full is not None and dkey >= vkey(full):
        return True, f"driver {driver} >= {full}, the minimum for CUDA {cuda}"
    if floor is not None and dkey >= vkey(floor):
        need = f" {full}" if full else " the toolkit's own minimum"
        return True, (
            f"driver {driver} runs CUDA {cuda} through minor-version compatibility (>= {floor}); "
            f"PTX JIT of newer PTX and some features need{need}"
        )
    if floor is None and full is None:
        return False, f"no driver data for CUDA {cuda}; add it to compat.MIN_DRIVER"
    need = floor or full
    return False, (
        f"driver {driver} is too old for CUDA {cuda}; install driver >= {need}"
        + (f" (>= {full} for every feature)" if full and full != need else "")
    )


# ---------------------------------------------------------------------------------------------------
# cuDNN, NCCL and the PyTorch release pins
# ---------------------------------------------------------------------------------------------------

# cuDNN (major, minor) lower bound -> CUDA majors it has builds for; the last row whose bound is <=
# the version applies. Sources: cuDNN support matrices (docs.nvidia.com/deeplearning/cudnn/
# .../support-matrix.html: 9.0-9.10 list CUDA 11.8 and 12.x, 9.17 lists 12.x and 13.x) and PyPI
# (`pip index versions`): nvidia-cudnn-cu12 starts at 8.8.0.121, nvidia-cudnn-cu11 ends at 9.10.2.21,
# nvidia-cudnn-cu13 starts at 9.12.0.46.
CUDNN_CUDA_MAJORS: list[tuple[tuple[int, int], frozenset[int]]] = [
    ((7, 0), frozenset({10})),
    ((8, 0), frozenset({10, 11})),
    ((8, 8), frozenset({11, 12})),
    ((9, 11), frozenset({12})),
    ((9, 12), frozenset({12, 13})),
]


def cudnn_cuda_majors(cudnn: str) -> frozenset[int]:
    key = vkey(cudnn)[:2]
    majors: frozenset[int] = frozenset()
    for bound, ms in CUDNN_CUDA_MAJORS:
        if key >= bound:
            majors = ms
    return majors


# First NCCL release built for each CUDA major. 13: NCCL 2.27.7 is the first nvidia-nccl-cu13 on PyPI
# (`pip index versions nvidia-nccl-cu13`) and the first NCCL release notes listing CUDA 13.0.
NCCL_FIRST_FOR_CUDA_MAJOR: dict[int, str] = {13: "2.27.7"}

# PyTorch release -> the versions its PyPI Linux x86_64 wheel pins (Requires-Dist of torch==X.Y.0,
# read with `pip install --dry-run --report`; 2.1/2.3/2.5 also in pytorch-build-contract.md section 5).
# Only used for warnings: a source build may pick other versions deliberately.
TORCH_RELEASE_PINS: dict[str, dict[str, str]] = {
    "2.1": {"cuda": "12.1.105", "cudnn": "8.9.2.26", "nccl": "2.18.1", "triton": "2.1.0"},
    "2.2": {"cuda": "12.1.105", "cudnn": "8.9.2.26", "nccl": "2.19.3", "triton": "2.2.0"},
    "2.3": {"cuda": "12.1.105", "cudnn": "8.9.2.26", "nccl": "2.20.5", "triton": "2.3.0"},
    "2.4": {"cuda": "12.1.105", "cudnn": "9.1.0.70", "nccl": "2.20.5", "triton": "3.0.0"},
    "2.5": {"cuda": "12.4.127", "cudnn": "9.1.0.70", "nccl": "2.21.5", "triton": "3.1.0"},
    "2.6": {"cuda": "12.4.127", "cudnn": "9.1.0.70", "nccl": "2.21.5", "triton": "3.2.0"},
    # 2.7 also shipped CUDA 12.8 wheels on download.pytorch.org (first Blackwell release); PyPI's is 12.6.
    "2.7": {"cuda": "12.6.77", "cudnn": "9.5.1.17", "nccl": "2.26.2", "triton": "3.3.0"},
    "2.8": {"cuda": "12.8.90", "cudnn": "9.10.2.21", "nccl": "2.27.3", "triton": "3.4.0"},
    "2.9": {"cuda": "12.8.90", "cudnn": "9.10.2.21", "nccl": "2.27.5", "triton": "3.5.0"},
}

# PyTorch release -> (oldest, newest) CPython it publishes wheels for, experimental ones included.
# Sources: pytorch/pytorch RELEASE.md "Release Compatibility Matrix"; PyPI Requires-Python and
# classifiers of torch 2.2/2.4/2.6/2.8/2.9. Warn only: building for another Python may still work.
TORCH_PYTHON_RANGE: dict[str, tuple[str, str]] = {
    "2.1": ("3.8", "3.11"),
    "2.2": ("3.8", "3.12"),
    "2.3": ("3.8", "3.12"),
    "2.4": ("3.8", "3.12"),
    "2.5": ("3.9", "3.13"),
    "2.6": ("3.9", "3.13"),
    "2.7": ("3.9", "3.13"),
    "2.8": ("3.9", "3.13"),
    "2.9": ("3.10", "3.14"),
}


# ---------------------------------------------------------------------------------------------------
# Distros, compilers, CMake
# ---------------------------------------------------------------------------------------------------

# The python3 each base distro ships (packages.debian.org python3 / packages.ubuntu.com python3).
PYTHON_BY_DISTRO: dict[str, str] = {"bookworm": "3.11", "trixie": "3.13", "jammy": "3.10", "noble": "3.12"}

# The default gcc (build-essential) of each distro (packages.debian.org gcc-defaults,
# packages.ubuntu.com gcc-defaults).
GCC_BY_DISTRO: dict[str, int] = {"bookworm": 12, "trixie": 14, "jammy": 11, "noble": 13}

# The CUDA toolkit each distro packages as nvidia-cuda-toolkit (install: apt). Warn only: from the
# distro package pages, unconfirmed against the archives.
APT_CUDA_BY_DISTRO: dict[str, str] = {"bookworm": "11.8", "trixie": "12.4", "jammy": "11.5", "noble": "12.0"}

# First toolkit -> newest gcc major its nvcc accepts (crt/host_config.h "#error -- unsupported GNU
# version! gcc versions later than N are not supported"). Sources: spack/spack#25054 (host_config.h
# grep 11.0..11.6), NVlabs/instant-ngp#1562 (12.1: 12), karpathy/llm.c#824 (12.5: 13),
# pytorch/pytorch#173366 (12.8: 14), cms-patatrack/pixeltrack-standalone#432 (13.3: 15);
# 12.4 -> 13 and 13.0 -> 15 per the CUDA installation guides (unconfirmed here).
NVCC_MAX_GCC: list[tuple[str, int]] = [
    ("11.0", 9),
    ("11.1", 10),
    ("11.4.1", 11),
    ("12.0", 12),
    ("12.4", 13),
    ("12.8", 14),
    ("13.0", 15),
]

# Environment variables with which a recipe picks its own host compiler (then the gcc check warns).
_COMPILER_ENV = ("CC", "CXX", "CUDAHOSTCXX", "CUDA_HOST_COMPILER", "CMAKE_CUDA_HOST_COMPILER", "NVCC_CCBIN")


def nvcc_max_gcc(cuda: str) -> int | None:
    best = None
    for first, gcc in NVCC_MAX_GCC:
        if vcmp(cuda, first) >= 0:
            best = gcc
    return best


# ROCm gfx targets PyTorch release builds use (pytorch .ci/docker/manywheel/build.sh PYTORCH_ROCM_ARCH)
# plus the RDNA3/4 consumer parts; others warn (they may still be valid for your ROCm).
KNOWN_ROCM_ARCH = frozenset(
    {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1030",
     "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151", "gfx1200", "gfx1201"}
)


# gfx targets each ROCm release's compiler can compile, by ROCm major.minor. A target outside the
# list fails in clang ("invalid target ID 'gfx950'"), so preflight refuses it before any build.
# 5.7: Debian trixie's ROCm 5.7 (hipcc 5.7.1 on clang-17 17.0.6, rocm-device-libs-17), read in a
# trixie container with `clang-17 --target=amdgcn-amd-amdhsa --print-supported-cpus`; the same 42
# targets have an oclc_isa_version_*.bc in rocm-device-libs-17, and `hipcc --offload-arch=gfx950`
# and `--offload-arch=gfx1200` fail with "invalid target ID". AMD's own ROCm 5.7 is LLVM 17 too.
# Other releases are not listed (not checked here): their targets only warn (KNOWN_ROCM_ARCH).
ROCM_OFFLOAD_ARCH: dict[str, frozenset[str]] = {
    "5.7": frozenset(
        "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 gfx805 gfx810 "
        "gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx940 gfx941 gfx942 "
        "gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036 "
        "gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151".split()
    ),
}

# ROCm in a distro's own archive (toolchain.rocm.install: apt): the release, the LLVM it is built
# with, and the run-time packages of a HIP + RCCL binary. Debian trixie main, `apt-cache policy` in a
# trixie container: hipcc and libamdhip64-dev 5.7.1, librccl-dev 5.4.3 (rccl.h declares NCCL API
# 2.13.4), rocm-device-libs-17, clang-17/lld-17/llvm-17 17.0.6, rocm-smi 6.1.2.
ROCM_FROM_DISTRO: dict[str, dict] = {
    "trixie": {"rocm": "5.7", "llvm": "17", "rccl": "2.13.4", "runtime": ("libamdhip64-5", "librccl1"),
               "device_libs": "/usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode"},
}
