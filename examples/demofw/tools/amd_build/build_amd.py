"""Hipify demofw's CUDA sources for a ROCm build -- after PyTorch's tools/amd_build/build_amd.py.

PyTorch's ROCm build runs `python tools/amd_build/build_amd.py` before `setup.py`: its hipify
(torch/utils/hipify) rewrites the CUDA sources into HIP ones (cudaMalloc -> hipMalloc, nccl.h ->
rccl.h, ...), files under a cuda/ directory into a sibling hip/ one. demofw does the same with a
mapping table of the names its sources use:

    csrc/cuda/kernels.cu          -> csrc/hip/kernels.hip    (device code, compiled for PYTORCH_ROCM_ARCH)
    csrc/cuda/cuda_hooks.cpp      -> csrc/hip/cuda_hooks.cpp (HIP runtime calls, C++ compiler)
    csrc/distributed/nccl.cpp     -> csrc/hip/nccl.cpp       (RCCL through the NCCL API)

A file is rewritten only when its content changes, so a rerun recompiles nothing. An identifier
starting with `cuda` that the table does not know stops the run (a silent pass-through would fail
later, in the compiler, far from the cause). `--check` reports what would change and exits 1 if
anything would.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = "csrc/hip"
SOURCES = {
    "csrc/cuda/kernels.cu": "csrc/hip/kernels.hip",
    "csrc/cuda/cuda_hooks.cpp": "csrc/hip/cuda_hooks.cpp",
    "csrc/distributed/nccl.cpp": "csrc/hip/nccl.cpp",
}

# CUDA name -> HIP name (the subset demofw uses; torch/utils/hipify/cuda_to_hip_mappings.py has the
# same entries among its thousands).
IDENTIFIERS = {
    "cudaError_t": "hipError_t",
    "cudaSuccess": "hipSuccess",
    "cudaGetErrorName": "hipGetErrorName",
    "cudaGetErrorString": "hipGetErrorString",
    "cudaGetLastError": "hipGetLastError",
    "cudaGetDeviceCount": "hipGetDeviceCount",
    "cudaRuntimeGetVersion": "hipRuntimeGetVersion",
    "cudaMalloc": "hipMalloc",
    "cudaFree": "hipFree",
    "cudaMemcpy": "hipMemcpy",
    "cudaMemcpyHostToDevice": "hipMemcpyHostToDevice",
    "cudaMemcpyDeviceToHost": "hipMemcpyDeviceToHost",
    "cudaErrorInsufficientDriver": "hipErrorInsufficientDriver",
    # demofw's own switch: the ROCm build compiles the GPU path under DFW_USE_ROCM
    "DFW_USE_CUDA": "DFW_USE_ROCM",
}
INCLUDES = {
    "cuda_runtime.h": "hip/hip_runtime.h",
    "cuda_runtime_api.h": "hip/hip_runtime_api.h",
    # RCCL is found as the system NCCL: NCCL_INCLUDE_DIR points at the directory holding rccl.h
    "nccl.h": "rccl.h",
}

_IDENT = re.compile(r"\b(" + "|".join(sorted(map(re.escape, IDENTIFIERS), key=len, reverse=True)) + r")\b")
_INCLUDE = re.compile(r'^(\s*#\s*include\s*[<"])([^>"]+)([>"])', re.M)
_UNKNOWN = re.compile(r"\bcuda[A-Z][A-Za-z0-9_]*\b")


class HipifyError(Exception):
    pass


def hipify_text(text: str, name: str) -> str:
    out = _INCLUDE.sub(lambda m: m.group(1) + INCLUDES.get(m.group(2), m.group(2)) + m.group(3), text)
    out = _IDENT.sub(lambda m: IDENTIFIERS[m.group(1)], out)
    left = sorted(set(_UNKNOWN.findall(out)))
    if left:
        raise HipifyError(f"{name}: no HIP mapping for {', '.join(left)}; add them to IDENTIFIERS in {Path(__file__).name}")
    header = f"// Generated from {name} by tools/amd_build/build_amd.py (hipify). Do not edit.\n"
    return header + out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report what would change; exit 1 if anything would")
    ap.add_argument("--root", type=Path, default=ROOT, help="the demofw source tree (default: this one)")
    args = ap.parse_args(argv)
    changed = 0
    try:
        for src, dst in SOURCES.items():
            text = hipify_text((args.root / src).read_text(), src)
            target = args.root / dst
            same = target.is_file() and target.read_text() == text
            if not same:
                changed += 1
                if not args.check:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_suffix(target.suffix + ".tmp")
                    tmp.write_text(text)
                    tmp.replace(target)
            print(f"{src} -> {dst} {'[skipped, unchanged]' if same else '[ok]'}", flush=True)
    except HipifyError as e:
        print(f"hipify: {e}", file=sys.stderr)
        return 2
    print(f"Successfully preprocessed all matching files ({changed} written).", flush=True)
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
