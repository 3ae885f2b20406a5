"""Probe reports from real runs, trimmed, and a report made from one, shared by the verify tests
(unit and integration; no tests in here).

H200_PROBE: probe.py on one NVIDIA H200 (driver 580.159.04) with PyPI torch 2.11.0+cu130, cuobjdump on
PATH, all-reduce sweep over NCCL with world size 1 (its graph section as the probe now writes it for one rank). CPU_PROBE: probe.py with the PyPI torch 2.13.0 CPU
wheel on a 2-core machine without a GPU driver, gloo sweep with 2 processes. Sweep rows are a subset.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from buildctl.recipe.schema import Spec
from buildctl.verify import report as rep
from buildctl.verify.expectations import Expectations, evaluate, verdict

_H200 = r'''{
 "probe_version": 1,
 "module": "torch",
 "started": "2026-11-30T00:17:46+00:00",
 "python": {
  "version": "3.12.3",
  "executable": "/opt/venv/bin/python",
  "platform": "Linux-6.18.44-fc-v657-gpu-x86_64-with-glibc2.39",
  "machine": "x86_64",
  "cpu_count": 16
 },
 "errors": [],
 "gpus": {
  "state": "ok",
  "reason": null,
  "driver_version": "580.159.04",
  "cuda_driver_version": "13.0",
  "devices": [
   {
    "index": 0,
    "name": "NVIDIA H200",
    "compute_capability": "9.0",
    "memory_total": 150754820096
   }
  ],
  "source": "pynvml"
 },
 "import": {
  "ok": true,
  "seconds": 3.863,
  "error": null,
  "file": "/opt/venv/lib/python3/site-packages/torch/__init__.py",
  "smoke": "ok"
 },
 "config": {
  "text": "PyTorch built with:\n  - GCC 13.3\n  - C++ Version: 201703\n  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture applications\n  - Intel(R) MKL-DNN v3.10.2 (Git Hash f1d471933dc852f956fd05389f9313c7148783d5)\n  - OpenMP 201511 (a.k.a. OpenMP 4.5)\n  - LAPACK is enabled (usually provided by MKL)\n  - NNPACK is enabled\n  - CPU capability usage: AVX512\n  - CUDA Runtime 13.0\n  - NVCC architecture flags: -gencode;arch=compute_75,code=sm_75;-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_86,code=sm_86;-gencode;arch=compute_90,code=sm_90;-gencode;arch=compute_100,code=sm_100;-gencode;arch=compute_120,code=sm_120\n  - CuDNN 91.9  (built against CUDA 13.1)\n  - Magma 2.6.1\n  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, COMMIT_SHA=70d99e998b4955e0049d13a98d77ae1b14db1f45, CUDA_VERSION=13.0, CUDNN_VERSION=9.19.0, CXX_COMPILER=/opt/rh/gcc-toolset-13/root/usr/bin/c++, CXX_FLAGS= -fvisibility-inlines-hidden -DUSE_PTHREADPOOL -DNDEBUG -DUSE_KINETO -DLIBKINETO_NOROCTRACER -DLIBKINETO_NOXPUPTI=ON -DUSE_FBGEMM -DUSE_MSLK -DUSE_PYTORCH_QNNPACK -DUSE_XNNPACK -DSYMBOLICATE_MOBILE_DEBUG_HANDLE -O2 -fPIC -DC10_NODEPRECATED -Wall -Wextra -Werror=return-type -Werror=non-virtual-dtor -Werror=range-loop-construct -Werror=bool-operation -Wnarrowing -Wno-missing-field-initializers -Wno-unknown-pragmas -Wno-unused-parameter -Wno-strict-overflow -Wno-strict-aliasing -Wno-stringop-overflow -Wsuggest-override -Wno-psabi -Wno-error=old-style-cast -faligned-new -Wno-maybe-uninitialized -fno-math-errno -fno-trapping-math -Werror=format -Wno-dangling-reference -Wno-error=dangling-reference -Wno-stringop-overflow, LAPACK_INFO=mkl, PERF_WITH_AVX=1, PERF_WITH_AVX2=1, TORCH_VERSION=2.11.0, USE_CUDA=ON, USE_CUDNN=ON, USE_CUSPARSELT=1, USE_GFLAGS=OFF, USE_GLOG=OFF, USE_GLOO=ON, USE_MKL=ON, USE_MKLDNN=ON, USE_MPI=OFF, USE_NCCL=1, USE_NNPACK=ON, USE_OPENMP=ON, USE_ROCM=OFF, USE_ROCM_KERNEL_ASSERT=OFF, USE_XCCL=OFF, USE_XPU=OFF, \n",
  "build_settings": {
   "BLAS_INFO": "mkl",
   "BUILD_TYPE": "Release",
   "COMMIT_SHA": "70d99e998b4955e0049d13a98d77ae1b14db1f45",
   "CUDA_VERSION": "13.0",
   "CUDNN_VERSION": "9.19.0",
   "CXX_COMPILER": "/opt/rh/gcc-toolset-13/root/usr/bin/c++",
   "CXX_FLAGS": "-fvisibility-inlines-hidden -DUSE_PTHREADPOOL -DNDEBUG -DUSE_KINETO -DLIBKINETO_NOROCTRACER -DLIBKINETO_NOXPUPTI=ON -DUSE_FBGEMM -DUSE_MSLK -DUSE_PYTORCH_QNNPACK -DUSE_XNNPACK -DSYMBOLICATE_MOBILE_DEBUG_HANDLE -O2 -fPIC -DC10_NODEPRECATED -Wall -Wextra -Werror=return-type -Werror=non-virtual-dtor -Werror=range-loop-construct -Werror=bool-operation -Wnarrowing -Wno-missing-field-initializers -Wno-unknown-pragmas -Wno-unused-parameter -Wno-strict-overflow -Wno-strict-aliasing -Wno-stringop-overflow -Wsuggest-override -Wno-psabi -Wno-error=old-style-cast -faligned-new -Wno-maybe-uninitialized -fno-math-errno -fno-trapping-math -Werror=format -Wno-dangling-reference -Wno-error=dangling-reference -Wno-stringop-overflow",
   "LAPACK_INFO": "mkl",
   "PERF_WITH_AVX": "1",
   "PERF_WITH_AVX2": "1",
   "TORCH_VERSION": "2.11.0",
   "USE_CUDA": "ON",
   "USE_CUDNN": "ON",
   "USE_CUSPARSELT": "1",
   "USE_GFLAGS": "OFF",
   "USE_GLOG": "OFF",
   "USE_GLOO": "ON",
   "USE_MKL": "ON",
   "USE_MKLDNN": "ON",
   "USE_MPI": "OFF",
   "USE_NCCL": "1",
   "USE_NNPACK": "ON",
   "USE_OPENMP": "ON",
   "USE_ROCM": "OFF",
   "USE_ROCM_KERNEL_ASSERT": "OFF",
   "USE_XCCL": "OFF",
   "USE_XPU": "OFF"
  }
 },
 "distributed": {
  "available": true,
  "nccl": true,
  "gloo": true,
  "mpi": false,
  "hccl": false
 },
 "runtime": {
  "cuda_available": true,
  "device_count": 1,
  "devices": [
   "NVIDIA H200"
  ],
  "error": null
 },
 "framework": {
  "version": "2.11.0+cu130",
  "git_version": "70d99e998b4955e0049d13a98d77ae1b14db1f45",
  "debug": false,
  "cuda": "13.0",
  "hip": null,
  "cudnn_raw": 91900,
  "cudnn": "9.19.0",
  "nccl_raw": [
   2,
   28,
   9
  ],
  "nccl": "2.28.9",
  "cxx11_abi": true,
  "arch_list": [
   "sm_75",
   "sm_80",
   "sm_86",
   "sm_90",
   "sm_100",
   "sm_120"
  ]
 },
 "arch_coverage": {
  "state": "ok",
  "reason": null,
  "tool": "/usr/local/cuda/bin/cuobjdump",
  "sass": [
   "sm_75",
   "sm_80",
   "sm_86",
   "sm_89",
   "sm_90",
   "sm_90a",
   "sm_100",
   "sm_100a",
   "sm_103a",
   "sm_120",
   "sm_120a",
   "sm_121a"
  ],
  "ptx": [],
  "libraries": [
   {
    "path": "lib/libtorch_cuda.so",
    "sass": {
     "sm_75": 444,
     "sm_80": 444,
     "sm_86": 444,
     "sm_90": 444,
     "sm_100": 444,
     "sm_120": 444,
     "sm_100a": 59,
     "sm_103a": 59,
     "sm_90a": 4,
     "sm_89": 1,
     "sm_120a": 1,
     "sm_121a": 1
    },
    "ptx": {},
    "error": null
   },
   {
    "path": "lib/libtorch_cuda_linalg.so",
    "sass": {
     "sm_80": 99,
     "sm_86": 99,
     "sm_90": 99,
     "sm_100": 99,
     "sm_120": 99
    },
    "ptx": {},
    "error": null
   },
   {
    "path": "lib/libtorch_nvshmem.so",
    "sass": {
     "sm_75": 1,
     "sm_80": 1,
     "sm_86": 1,
     "sm_90": 1,
     "sm_100": 1,
     "sm_120": 1
    },
    "ptx": {},
    "error": null
   }
  ]
 },
 "sweep": {
  "state": "ok",
  "reason": null,
  "backend": "nccl",
  "device": "cuda",
  "world_size": 1,
  "label": "NCCL on 1 GPU(s), one process per GPU (1 GPU: a single-rank all-reduce is a local copy, busbw 0 by definition)",
  "timer": "cuda-events",
  "dtype": "float32",
  "op": "sum",
  "iters": 20,
  "warmup": 5,
  "factor": 2,
  "sizes_requested": [
   8,
   268435456
  ],
  "capped": null,
  "rows": [
   {
    "size": 8,
    "count": 2,
    "time_us": 27.264,
    "time_us_max": 27.264,
    "host_us": 30.409,
    "algbw_gbs": 0.00029342724096770106,
    "busbw_gbs": 0.0,
    "wrong": 0
   },
   {
    "size": 1024,
    "count": 256,
    "time_us": 15.054,
    "time_us_max": 15.054,
    "host_us": 15.837,
    "algbw_gbs": 0.06801997967105676,
    "busbw_gbs": 0.0,
    "wrong": 0
   },
   {
    "size": 1048576,
    "count": 262144,
    "time_us": 15.835,
    "time_us_max": 15.835,
    "host_us": 16.771,
    "algbw_gbs": 66.21804482643967,
    "busbw_gbs": 0.0,
    "wrong": 0
   },
   {
    "size": 16777216,
    "count": 4194304,
    "time_us": 15.965,
    "time_us_max": 15.965,
    "host_us": 16.781,
    "algbw_gbs": 1050.8879456381512,
    "busbw_gbs": 0.0,
    "wrong": 0
   },
   {
    "size": 268435456,
    "count": 67108864,
    "time_us": 24.008,
    "time_us_max": 24.008,
    "host_us": 25.432,
    "algbw_gbs": 11181.083686755088,
    "busbw_gbs": 0.0,
    "wrong": 0
   }
  ],
  "graph": {
   "state": "n/a",
   "reason": "1 rank: an in-place all-reduce launches no kernel, the graph would be empty",
   "latency_us": null,
   "ops": null
  },
  "headline": {
   "latency_us": 27.264,
   "latency_size": 8,
   "peak_busbw_gbs": null,
   "peak_busbw_size": null,
   "peak_algbw_gbs": 11181.083686755088,
   "graph_latency_us": null,
   "wrong": 0
  },
  "seconds": 7.45
 },
 "seconds": 24.5
}'''

_CPU = r'''{
 "probe_version": 1,
 "module": "torch",
 "started": "2026-11-30T00:16:17+00:00",
 "python": {
  "version": "3.11.7",
  "executable": "/opt/venv/bin/python",
  "platform": "Linux-6.18.44-fc-v769-x86_64-with-glibc2.36",
  "machine": "x86_64",
  "cpu_count": 2
 },
 "errors": [],
 "gpus": {
  "state": "no-driver",
  "reason": "no NVIDIA driver: NVML Shared Library Not Found",
  "driver_version": null,
  "cuda_driver_version": null,
  "devices": [],
  "source": "pynvml"
 },
 "import": {
  "ok": true,
  "seconds": 2.435,
  "error": null,
  "file": "/opt/venv/lib/python3/site-packages/torch/__init__.py",
  "smoke": "ok"
 },
 "config": {
  "text": "PyTorch built with:\n  - GCC 13.3\n  - C++ Version: 202002\n  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture applications\n  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd69a3df32adcccb623b12cd7baa22)\n  - OpenMP 201511 (a.k.a. OpenMP 4.5)\n  - LAPACK is enabled (usually provided by MKL)\n  - NNPACK is enabled\n  - CPU capability usage: AVX512\n  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, COMMIT_SHA=cf30153c4c131c8164ee7798e5022d810682e2cb, CUDA_FLAGS= -DLIBCUDACXX_ENABLE_SIMPLIFIED_COMPLEX_OPERATIONS -Xfatbin -compress-all  -Wno-deprecated-gpu-targets --expt-extended-lambda -DCUB_WRAPPED_NAMESPACE=at_cuda_detail -DDISABLE_CUSPARSE_DEPRECATED -DCUDA_HAS_FP16=1 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -DC10_NODEPRECATED, CXX_COMPILER=/opt/rh/gcc-toolset-13/root/usr/bin/c++, CXX_FLAGS= -fvisibility-inlines-hidden -DUSE_PTHREADPOOL -DNDEBUG -DUSE_KINETO -DUSE_FBGEMM -DUSE_PYTORCH_QNNPACK -DSYMBOLICATE_MOBILE_DEBUG_HANDLE -O2 -fPIC -DC10_NODEPRECATED -Wall -Wextra -Werror=return-type -Werror=non-virtual-dtor -Werror=range-loop-construct -Werror=bool-operation -Wnarrowing -Wno-missing-field-initializers -Wno-unknown-pragmas -Wno-unused-parameter -Wno-strict-overflow -Wno-strict-aliasing -Wno-stringop-overflow -Wsuggest-override -Wno-psabi -Wno-error=old-style-cast -faligned-new -Wno-maybe-uninitialized -fno-math-errno -fno-trapping-math -Werror=format -Wno-dangling-reference -Wno-error=dangling-reference -Wno-stringop-overflow, LAPACK_INFO=mkl, PERF_WITH_AVX=1, PERF_WITH_AVX2=1, TORCH_VERSION=2.13.0, USE_CUDA=0, USE_CUDNN=OFF, USE_CUSPARSELT=OFF, USE_GFLAGS=OFF, USE_GLOG=OFF, USE_GLOO=ON, USE_MKL=ON, USE_MKLDNN=ON, USE_MPI=OFF, USE_NCCL=OFF, USE_NNPACK=ON, USE_OPENMP=ON, USE_ROCM=OFF, USE_ROCM_KERNEL_ASSERT=OFF, USE_XCCL=OFF, USE_XPU=OFF, \n",
  "build_settings": {
   "BLAS_INFO": "mkl",
   "BUILD_TYPE": "Release",
   "COMMIT_SHA": "cf30153c4c131c8164ee7798e5022d810682e2cb",
   "CUDA_FLAGS": "-DLIBCUDACXX_ENABLE_SIMPLIFIED_COMPLEX_OPERATIONS -Xfatbin -compress-all  -Wno-deprecated-gpu-targets --expt-extended-lambda -DCUB_WRAPPED_NAMESPACE=at_cuda_detail -DDISABLE_CUSPARSE_DEPRECATED -DCUDA_HAS_FP16=1 -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -DC10_NODEPRECATED",
   "CXX_COMPILER": "/opt/rh/gcc-toolset-13/root/usr/bin/c++",
   "CXX_FLAGS": "-fvisibility-inlines-hidden -DUSE_PTHREADPOOL -DNDEBUG -DUSE_KINETO -DUSE_FBGEMM -DUSE_PYTORCH_QNNPACK -DSYMBOLICATE_MOBILE_DEBUG_HANDLE -O2 -fPIC -DC10_NODEPRECATED -Wall -Wextra -Werror=return-type -Werror=non-virtual-dtor -Werror=range-loop-construct -Werror=bool-operation -Wnarrowing -Wno-missing-field-initializers -Wno-unknown-pragmas -Wno-unused-parameter -Wno-strict-overflow -Wno-strict-aliasing -Wno-stringop-overflow -Wsuggest-override -Wno-psabi -Wno-error=old-style-cast -faligned-new -Wno-maybe-uninitialized -fno-math-errno -fno-trapping-math -Werror=format -Wno-dangling-reference -Wno-error=dangling-reference -Wno-stringop-overflow",
   "LAPACK_INFO": "mkl",
   "PERF_WITH_AVX": "1",
   "PERF_WITH_AVX2": "1",
   "TORCH_VERSION": "2.13.0",
   "USE_CUDA": "0",
   "USE_CUDNN": "OFF",
   "USE_CUSPARSELT": "OFF",
   "USE_GFLAGS": "OFF",
   "USE_GLOG": "OFF",
   "USE_GLOO": "ON",
   "USE_MKL": "ON",
   "USE_MKLDNN": "ON",
   "USE_MPI": "OFF",
   "USE_NCCL": "OFF",
   "USE_NNPACK": "ON",
   "USE_OPENMP": "ON",
   "USE_ROCM": "OFF",
   "USE_ROCM_KERNEL_ASSERT": "OFF",
   "USE_XCCL": "OFF",
   "USE_XPU": "OFF"
  }
 },
 "distributed": {
  "available": true,
  "nccl": false,
  "gloo": true,
  "mpi": false,
  "hccl": false
 },
 "runtime": {
  "cuda_available": false,
  "device_count": 0,
  "devices": [],
  "error": null
 },
 "framework": {
  "version": "2.13.0+cpu",
  "git_version": "cf30153c4c131c8164ee7798e5022d810682e2cb",
  "debug": false,
  "cuda": null,
  "hip": null,
  "cudnn_raw": null,
  "cudnn": null,
  "nccl_raw": null,
  "nccl": null,
  "cxx11_abi": true,
  "arch_list": []
 },
 "arch_coverage": {
  "state": "n/a",
  "reason": "built without CUDA: no device code to list",
  "tool": null,
  "sass": [],
  "ptx": [],
  "libraries": []
 },
 "sweep": {
  "state": "ok",
  "reason": null,
  "backend": "gloo",
  "device": "cpu",
  "world_size": 2,
  "label": "gloo on CPU, 2 processes (no GPU visible): a CPU figure, not an NCCL one",
  "timer": "perf_counter+barrier",
  "dtype": "float32",
  "op": "sum",
  "iters": 20,
  "warmup": 5,
  "factor": 2,
  "sizes_requested": [
   8,
   268435456
  ],
  "capped": {
   "max": 16777216,
   "reason": "gloo on CPU: sizes above 16 MiB skipped to keep the run short (probe --cpu-max-size)"
  },
  "rows": [
   {
    "size": 8,
    "count": 2,
    "time_us": 157.926,
    "time_us_max": 158.072,
    "host_us": 157.926,
    "algbw_gbs": 5.1e-05,
    "busbw_gbs": 5.1e-05,
    "wrong": 0
   },
   {
    "size": 1024,
    "count": 256,
    "time_us": 430.969,
    "time_us_max": 432.779,
    "host_us": 430.969,
    "algbw_gbs": 0.002376,
    "busbw_gbs": 0.002376,
    "wrong": 0
   },
   {
    "size": 1048576,
    "count": 262144,
    "time_us": 1931.466,
    "time_us_max": 1935.894,
    "host_us": 1931.466,
    "algbw_gbs": 0.542891,
    "busbw_gbs": 0.542891,
    "wrong": 0
   },
   {
    "size": 16777216,
    "count": 4194304,
    "time_us": 14919.079,
    "time_us_max": 14956.156,
    "host_us": 14919.079,
    "algbw_gbs": 1.124548,
    "busbw_gbs": 1.124548,
    "wrong": 0
   }
  ],
  "graph": {
   "state": "n/a",
   "reason": "CUDA graphs need a GPU",
   "latency_us": null,
   "ops": null
  },
  "headline": {
   "latency_us": 157.926,
   "latency_size": 8,
   "peak_busbw_gbs": 1.124548,
   "peak_busbw_size": 16777216,
   "peak_algbw_gbs": 1.124548,
   "graph_latency_us": null,
   "wrong": 0
  },
  "seconds": 4.41
 },
 "seconds": 6.94
}'''


def h200_probe() -> dict:
    return copy.deepcopy(json.loads(_H200))


def cpu_probe() -> dict:
    return copy.deepcopy(json.loads(_CPU))


def make_spec(*, toolchain: dict | None = None, build: dict | None = None, expect: dict | None = None,
              framework: str = "pytorch", base_image: str = "buildctl/base:bookworm") -> Spec:
    """A resolved recipe (Spec) with the given sections; CPU-only by default."""
    return Spec.model_validate({
        "name": "verify-test",
        "base": {"image": base_image, "distro": "bookworm"},
        "python": {"version": "3.11"},
        "framework": {"name": framework, "source": {"git": "https://github.com/pytorch/pytorch", "ref": "v2.13.0"}},
        "toolchain": toolchain or {},
        "build": build or {},
        "verify": {"expect": expect or {}},
    })


def cuda_spec(**kw) -> Spec:
    """CUDA 13.0 + NCCL 2.28.9 + cuDNN 9.19, archs 7.5 8.0 8.6 9.0 10.0 12.0: what the H200 torch has."""
    build = {"cuda_arch": ["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], **kw.pop("build", {})}
    toolchain = {
        "cuda": {"version": "13.0", "install": "base-image"},
        "nccl": {"version": "2.28.9", "install": "pip"},
        "cudnn": {"version": "9.19.0", "install": "pip"},
        **kw.pop("toolchain", {}),
    }
    return make_spec(toolchain=toolchain, build=build, **kw)


def multi_gpu_probe(n: int = 8) -> dict:
    """The H200 report as an n-GPU run would shape it (synthetic sweep numbers, n ranks, graph latency)."""
    p = h200_probe()
    p["gpus"]["devices"] = [dict(p["gpus"]["devices"][0], index=i) for i in range(n)]
    p["runtime"].update(device_count=n, devices=["NVIDIA H200"] * n)
    sw = p["sweep"]
    factor = 2 * (n - 1) / n
    for r in sw["rows"]:
        r["time_us"] = 15.0 + r["size"] / 370e3  # ~370 GB/s busbw at the large end
        r["algbw_gbs"] = r["size"] / 1e9 / (r["time_us"] / 1e6)
        r["busbw_gbs"] = r["algbw_gbs"] * factor
    sw.update(world_size=n, label=f"NCCL on {n} GPU(s), one process per GPU")
    sw["graph"] = {"state": "ok", "reason": None, "latency_us": 6.1, "ops": 20, "size": 8}
    peak = max(sw["rows"], key=lambda r: r["busbw_gbs"])
    sw["headline"] = {"latency_us": sw["rows"][0]["time_us"], "latency_size": 8, "peak_busbw_gbs": peak["busbw_gbs"],
                      "peak_busbw_size": peak["size"], "peak_algbw_gbs": peak["algbw_gbs"],
                      "graph_latency_us": 6.1, "wrong": 0}
    return p


def debian_probe() -> dict:
    """probe.py run by `invoke verify --image` with the Python of a trixie image holding Debian's own
    python3-torch 2.6.0 (apt, --no-install-recommends): reference BLAS, TCPStore without libuv, gloo sweep
    8 B..64 KiB with 2 processes on a 2-core machine without a GPU driver."""
    return json.loads((Path(__file__).parent / "fixtures" / "debian-python3-torch-2.6.0.probe.json").read_text())


def make_report(probe: dict | None = None, spec=None) -> rep.Report:
    probe = probe or cpu_probe()
    spec = spec or make_spec()
    exp = Expectations.from_spec(spec)
    return rep.Report(
        wheel={"path": "/x/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
               "name": "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "size": 1, "sha256": "0" * 64},
        mode="host", module="torch", environment={"python": "/tmp/v/bin/python"},
        expectations=exp.to_dict(), checks=evaluate(exp, probe), probe=probe, verdict=verdict(probe),
        spec={"name": spec.name, "accelerator": spec.accelerator, "framework": spec.framework.name},
    )
