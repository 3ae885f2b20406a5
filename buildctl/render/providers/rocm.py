"""ROCm: from a ROCm base image (AMD's /opt/rocm) or from the distro's archive (apt, Debian's /usr
layout). Either way the build follows PyTorch's ROCm contract: USE_ROCM=1, ROCM_PATH, an explicit
PYTORCH_ROCM_ARCH, the sources hipified before the build (tools/amd_build/build_amd.py), and RCCL
found as the system NCCL.
"""

from __future__ import annotations

import shlex

from buildctl.recipe import compat
from buildctl.render.providers.fragment import Fragment


def _rccl_probe(header: str) -> str:
    """The NCCL API version rccl.h declares (NCCL_MAJOR/MINOR/PATCH), e.g. 2.13.4."""
    return ("awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v=v (v?\".\":\"\") $3} END{print v}' "
            f"{header}")


def _rccl_check(header: str, pin: str) -> str:
    return (f'rccl_h="$({_rccl_probe(header)})"; if [ "$rccl_h" != {pin} ]; then'
            f' echo "buildctl: rccl.h declares NCCL API $rccl_h, recipe pins rccl {pin}" >&2; exit 1; fi')


def _contract_env(spec, rocm_path: str) -> dict[str, str]:
    return {"USE_ROCM": "1", "USE_CUDA": "0", "USE_NCCL": "1", "ROCM_PATH": rocm_path,
            # Required: without it PyTorch runs rocm_agent_enumerator, which fails with no GPU.
            "PYTORCH_ROCM_ARCH": ";".join(spec.toolchain.rocm.arch)}


def fragment(spec, render_stage) -> Fragment | None:
    rocm = spec.toolchain.rocm
    if rocm is None:
        return None
    if rocm.install == "apt":
        return _apt(spec)
    check = (f'case "$(cat /opt/rocm/.info/version)" in {rocm.version}*) ;; '
             f'*) echo "buildctl: base image has ROCm $(cat /opt/rocm/.info/version), recipe pins {rocm.version}" >&2; '
             "exit 1;; esac")
    header = "/opt/rocm/include/rccl/rccl.h"
    return Fragment(
        provider="rocm-base-image",
        path=("/opt/rocm/bin",),
        image_env={"ROCM_PATH": "/opt/rocm"},
        build_env=_contract_env(spec, "/opt/rocm"),
        pre_build=("python tools/amd_build/build_amd.py",),
        image_checks=(check, *((_rccl_check(header, rocm.rccl),) if rocm.rccl else ())),
        version_probes={"rocm": "cat /opt/rocm/.info/version", "rccl": _rccl_probe(header)},
    )


def _apt(spec) -> Fragment:
    """Debian's ROCm (trixie main: HIP 5.7 built with its clang-17): everything under /usr, the CMake
    packages under /usr/lib/<multiarch>/cmake, RCCL's header in /usr/include/rccl."""
    rocm = spec.toolchain.rocm
    distro = compat.ROCM_FROM_DISTRO[spec.base.distro]  # preflight refused any other distro
    llvm = distro["llvm"]
    include, lib = "/usr/include", "/usr/lib/x86_64-linux-gnu"
    pin = shlex.quote(rocm.version)
    version_check = (f'hipcc_deb="$(dpkg-query -W -f=\'${{Version}}\' hipcc)"; case "$hipcc_deb" in {pin}|{pin}.*|{pin}-*) ;; '
                     f'*) echo "buildctl: hipcc is ROCm $hipcc_deb, recipe pins {rocm.version}" >&2; exit 1;; esac')
    # The compiler of this image must know every target (compat.ROCM_OFFLOAD_ARCH was read from it).
    arch_check = (f'supported="$(clang-{llvm} --target=amdgcn-amd-amdhsa --print-supported-cpus 2>&1)"; '
                  f'for a in {" ".join(rocm.arch)}; do echo "$supported" | grep -qw "$a" || '
                  f'{{ echo "buildctl: clang-{llvm} of ROCm {rocm.version} cannot compile for $a" >&2; exit 1; }}; done')
    # ROCM_PATH=/usr alone breaks Debian's clang and hipcc: they look for the device libraries in
    # $ROCM_PATH/amdgcn/bitcode ("cannot find ROCm device library"); HIP_DEVICE_LIB_PATH names them.
    image_env = {"ROCM_PATH": "/usr", "HIP_DEVICE_LIB_PATH": distro["device_libs"]}
    build_env = {
        **_contract_env(spec, "/usr"),
        "HIP_DEVICE_LIB_PATH": distro["device_libs"],
        # CMake's HIP language compiler (demofw; PyTorch's FindHIP path runs hipcc, which finds it too)
        "HIPCXX": f"/usr/bin/clang++-{llvm}",
        # RCCL as the system NCCL, like nccl-apt
        "USE_SYSTEM_NCCL": "1", "NCCL_INCLUDE_DIR": f"{include}/rccl", "NCCL_LIB_DIR": lib, "NCCL_ROOT": "/usr",
    }
    if spec.build.cache != "none":
        build_env["CMAKE_HIP_COMPILER_LAUNCHER"] = spec.build.cache
    header = f"{include}/rccl/rccl.h"
    return Fragment(
        provider="rocm-apt",
        apt_packages=("hipcc", "libamdhip64-dev", "librccl-dev", f"rocm-device-libs-{llvm}", f"clang-{llvm}",
                      f"lld-{llvm}", f"llvm-{llvm}",
                      # clang's runtime builtins: CMake's HIP language (hip-lang-config.cmake) needs them
                      f"libclang-rt-{llvm}-dev"),
        apt_runtime=distro["runtime"],
        image_env=image_env,
        build_env=build_env,
        pre_build=("python tools/amd_build/build_amd.py",),
        image_checks=(version_check, arch_check, *((_rccl_check(header, rocm.rccl),) if rocm.rccl else ())),
        version_probes={"rocm": "dpkg-query -W -f='${Version}' hipcc | cut -d- -f1",
                        "hip": "hipconfig --version", "rccl": _rccl_probe(header)},
    )
