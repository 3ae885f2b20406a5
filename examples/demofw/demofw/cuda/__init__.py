"""CUDA surface, as torch.cuda (the subset a build verifier reads)."""

from __future__ import annotations

from demofw import _C
from demofw.cuda import nccl  # noqa: F401

__all__ = ["is_available", "device_count", "get_arch_list", "get_gencode_flags", "add", "nccl", "is_built"]


def is_built() -> bool:
    """Whether demofw was compiled with CUDA (torch.backends.cuda.is_built())."""
    return bool(_C._has_cuda)


def is_available() -> bool:
    """True when a CUDA device can be used. Never raises: without a driver (or on a CPU
    build) it returns False; the reason is in unavailable_reason()."""
    return bool(_C._cuda_isAvailable())


def unavailable_reason() -> str:
    return _C._cuda_unavailableReason()


def device_count() -> int:
    return int(_C._cuda_getDeviceCount())


def get_arch_list() -> list[str]:
    """The architectures compiled in, e.g. ['sm_80', 'sm_90'] (plus 'compute_XY' for +PTX), the gfx
    targets on a ROCm build (['gfx90a', 'gfx942'], as torch on ROCm); [] for CPU builds. Unlike
    torch, this does not return [] when no GPU is present, so a
    build can be checked on a machine without one."""
    return list(_C._cuda_getArchList())


def get_gencode_flags() -> str:
    """Like torch.cuda.get_gencode_flags(): '-gencode compute=compute_80,code=sm_80 ...'."""
    out = []
    for arch in get_arch_list():
        if arch.startswith("gfx"):  # ROCm build: torch gives no gencode flags for HIP targets either
            continue
        kind, num = arch.split("_", 1)
        out.append(f"-gencode compute=compute_{num},code={kind}_{num}")
    return " ".join(out)


def runtime_version() -> int | None:
    """cudaRuntimeGetVersion() of the (statically linked) runtime, e.g. 13020; None on CPU builds."""
    return _C._cuda_runtimeVersion()


def add(a, b):
    """a + b computed by a CUDA kernel on device 0 (float64); RuntimeError without CUDA."""
    return _C._cuda_add(a, b)
