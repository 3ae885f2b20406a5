"""ROCm: the toolkit comes with a ROCm base image; PyTorch is hipified before the build."""

from __future__ import annotations

from . import Fragment


def fragment(spec, render_stage) -> Fragment | None:
    rocm = spec.toolchain.rocm
    if rocm is None:
        return None
    check = (f'case "$(cat /opt/rocm/.info/version)" in {rocm.version}*) ;; '
             f'*) echo "buildctl: base image has ROCm $(cat /opt/rocm/.info/version), recipe pins {rocm.version}" >&2; '
             "exit 1;; esac")
    return Fragment(
        provider="rocm-base-image",
        path=("/opt/rocm/bin",),
        image_env={"ROCM_PATH": "/opt/rocm"},
        build_env={"USE_ROCM": "1", "USE_CUDA": "0", "USE_NCCL": "1", "ROCM_PATH": "/opt/rocm",
                   # Required: without it PyTorch runs rocm_agent_enumerator, which fails with no GPU.
                   "PYTORCH_ROCM_ARCH": ";".join(rocm.arch)},
        pre_build=("python tools/amd_build/build_amd.py",),
        image_checks=(check,),
        version_probes={"rocm": "cat /opt/rocm/.info/version", "rccl": "ls /opt/rocm/lib/librccl.so.* | head -n1"},
    )
