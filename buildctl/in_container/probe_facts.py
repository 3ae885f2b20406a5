#!/usr/bin/env python3
"""The probe's facts about the environment and the framework: the GPU inventory (NVML, taken before any
CUDA call), the import, versions, Build settings, distributed backends, CPU and BLAS, the runtime, and
whether torch's debug-only assertions are compiled in.

STANDALONE, like probe.py (standard library, the framework, pynvml when importable); it is shipped next
to probe.py, which imports it.
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import re
import subprocess
import sys
import time
import traceback


def parse_build_settings(config_text: str) -> dict[str, str]:
    """The '  - Build settings: K=V, K=V, ...' line of __config__.show() as a dict (values stripped).

    Values may contain spaces (CXX_FLAGS) but a new item always starts with ', KEY='."""
    for line in config_text.splitlines():
        s = line.strip()
        if s.startswith("- Build settings:"):
            body = s[len("- Build settings:"):].strip().rstrip(",").strip()
            out: dict[str, str] = {}
            for item in re.split(r",\s*(?=[A-Za-z_][A-Za-z0-9_]*=)", body):
                if "=" in item:
                    k, v = item.split("=", 1)
                    out[k.strip()] = v.strip().rstrip(",").strip()
            return out
    return {}


def decode_nccl_version(v) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 30, 7[, suffix]) on current torch, an int on old ones."""
    if v is None:
        return None
    if isinstance(v, (tuple, list)):
        nums = [str(x) for x in v[:3]]
        s = ".".join(nums)
        if len(v) > 3 and v[3] not in ("", None):
            s += f"+{v[3]}"
        return s
    if isinstance(v, int):
        # NCCL_VERSION_CODE: >= 2.9 is major*10000 + minor*100 + patch, before that major*1000 + ...
        if v >= 20900:
            return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
        return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"
    return str(v)


def decode_cudnn_version(v) -> str | None:
    """torch.backends.cudnn.version(): 92400 -> '9.24.0' (cuDNN 9: M*10000+m*100+p); 8902 -> '8.9.2'."""
    if v is None:
        return None
    if not isinstance(v, int):
        return str(v)
    if v >= 90000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def decode_cuda_driver_version(v: int) -> str:
    """nvmlSystemGetCudaDriverVersion(): 12020 -> '12.2' (nvml.h NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR)."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def gpu_inventory() -> dict:
    """NVIDIA GPUs and driver via NVML, before anything touches CUDA. Never raises."""
    inv: dict = {"state": "ok", "reason": None, "driver_version": None, "cuda_driver_version": None,
                 "devices": [], "source": "pynvml"}
    try:
        import pynvml  # nvidia-ml-py
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        inv.update(state="unavailable", reason=f"pynvml not importable ({e.__class__.__name__}); "
                   "install nvidia-ml-py into the verified environment")
        return inv
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded: no driver here
        inv.update(state="no-driver", reason=f"no NVIDIA driver: {e}")
        return inv
    try:
        def s(x):
            return x.decode() if isinstance(x, bytes) else str(x)

        inv["driver_version"] = s(pynvml.nvmlSystemGetDriverVersion())
        try:
            inv["cuda_driver_version"] = decode_cuda_driver_version(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        except Exception:  # noqa: BLE001
            pass
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            dev = {"index": i, "name": s(pynvml.nvmlDeviceGetName(h)), "compute_capability": None,
                   "memory_total": None}
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
                dev["compute_capability"] = f"{major}.{minor}"
            except Exception:  # noqa: BLE001
                pass
            try:
                dev["memory_total"] = int(pynvml.nvmlDeviceGetMemoryInfo(h).total)
            except Exception:  # noqa: BLE001
                pass
            inv["devices"].append(dev)
    except Exception as e:  # noqa: BLE001
        inv.update(state="error", reason=f"NVML query failed: {e}")
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return inv


def _call(obj, dotted: str):
    """Follow a dotted attribute path; call the last one when callable. Raises what it raises."""
    cur = obj
    for part in dotted.split("."):
        cur = getattr(cur, part)
    return cur() if callable(cur) else cur


def import_framework(module: str) -> tuple[object | None, dict]:
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit/ImportError/OSError from a broken .so alike
        return None, {"ok": False, "seconds": round(time.perf_counter() - t0, 3),
                      "error": f"{e.__class__.__name__}: {e}", "traceback": traceback.format_exc(limit=8)}
    info = {"ok": True, "seconds": round(time.perf_counter() - t0, 3), "error": None,
            "file": getattr(mod, "__file__", None), "smoke": None}
    # A tiny computation: an import that succeeds with broken kernels is not a working wheel.
    try:
        if hasattr(mod, "ones"):  # torch
            v = float((mod.ones(4) * 2 + 1).sum())
            info["smoke"] = "ok" if v == 12.0 else f"wrong result {v} for sum(ones(4)*2+1), expected 12"
        elif hasattr(mod, "add"):  # demofw: element-wise add in its native core
            v = mod.add([1.0, 2.0], [3.0, 4.0])
            info["smoke"] = "ok" if list(v) == [4.0, 6.0] else f"wrong result {v!r} for add([1,2],[3,4])"
    except Exception as e:  # noqa: BLE001
        info["smoke"] = f"{e.__class__.__name__}: {e}"
    return mod, info


def framework_facts(mod, errors: list[str]) -> dict:
    """Versions and build facts that need no CUDA call."""
    facts: dict = {}

    def get(key, dotted, post=None):
        try:
            v = _call(mod, dotted)
            facts[key] = post(v) if post else v
        except AttributeError:
            facts[key] = None
        except Exception as e:  # noqa: BLE001
            facts[key] = None
            errors.append(f"{dotted}: {e.__class__.__name__}: {e}")

    get("version", "__version__", str)
    get("git_version", "version.git_version")
    get("debug", "version.debug")
    get("cuda", "version.cuda")
    get("hip", "version.hip")
    get("cudnn_raw", "backends.cudnn.version")
    facts["cudnn"] = decode_cudnn_version(facts.get("cudnn_raw"))
    try:  # torch without NCCL: AttributeError (no _nccl_version); demofw: RuntimeError. Both: absent.
        v = _call(mod, "cuda.nccl.version")
        facts["nccl_raw"] = list(v) if isinstance(v, tuple) else v
    except (AttributeError, RuntimeError):
        facts["nccl_raw"] = None
    except Exception as e:  # noqa: BLE001
        facts["nccl_raw"] = None
        errors.append(f"cuda.nccl.version: {e.__class__.__name__}: {e}")
    facts["nccl"] = decode_nccl_version(facts.get("nccl_raw"))
    get("cxx11_abi", "_C._GLIBCXX_USE_CXX11_ABI")
    if facts.get("version") is None:
        get("version", "version.__version__", str)
    return facts


def arch_list(mod, facts: dict, errors: list[str]) -> list[str] | None:
    """torch.cuda.get_arch_list(); on releases that return [] without a usable GPU, the compiled flags."""
    archs = None
    try:
        archs = list(mod.cuda.get_arch_list())
    except AttributeError:
        pass
    except Exception as e:  # noqa: BLE001
        errors.append(f"cuda.get_arch_list: {e.__class__.__name__}: {e}")
    if not archs and (facts.get("cuda") or facts.get("hip")):
        try:
            flags = mod._C._cuda_getArchFlags()
            if flags:
                archs = flags.split()
        except Exception:  # noqa: BLE001
            pass
    return archs


def distributed_facts(mod) -> dict:
    d = {"available": False, "nccl": False, "gloo": False, "mpi": False, "hccl": False}
    dist = getattr(mod, "distributed", None)
    if dist is None:
        return d
    try:
        d["available"] = bool(dist.is_available())
    except Exception:  # noqa: BLE001
        return d
    if not d["available"]:
        return d
    for k in ("nccl", "gloo", "mpi"):
        try:
            d[k] = bool(getattr(dist, f"is_{k}_available")())
        except Exception:  # noqa: BLE001
            pass
    try:
        importlib.import_module("torch_npu")
        d["hccl"] = True
    except Exception:  # noqa: BLE001
        pass
    return d


# Libraries whose loaded copy says which BLAS/LAPACK and OpenMP runtime do the CPU math. A distro torch
# links the generic libblas.so.3, and the alternatives system decides which one that is.
_CPU_MATH_LIB = re.compile(r"lib(open)?blas|libcblas|liblapack|libmkl|libblis|libflexiblas|libgomp|libiomp|libomp")


def loaded_libraries(pattern: re.Pattern[str] = _CPU_MATH_LIB) -> list[str]:
    """Real paths of the shared libraries mapped into this process whose file name matches `pattern`."""
    found: set[str] = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path.startswith("/") and pattern.search(os.path.basename(path)):
                    found.add(os.path.realpath(path))
    except OSError:
        return []
    return sorted(found)


def cpu_facts(mod, settings: dict) -> dict:
    """The CPU kernels the dispatcher picked on this CPU (torch.backends.cpu.get_cpu_capability), the BLAS
    and LAPACK the build names, MKL/oneDNN/OpenMP, and the BLAS libraries a matmul really loaded."""
    out: dict = {"state": "ok", "reason": None, "capability": None, "blas": settings.get("BLAS_INFO"),
                 "lapack": settings.get("LAPACK_INFO"), "mkl": None, "mkldnn": None, "openmp": None,
                 "threads": None, "libraries": []}
    backends = getattr(mod, "backends", None)
    if backends is None or not hasattr(mod, "matmul"):
        out.update(state="n/a", reason=f"{getattr(mod, '__name__', 'the module')} has no torch.backends")
        return out
    errors = []
    for key, dotted in (("capability", "cpu.get_cpu_capability"), ("mkl", "mkl.is_available"),
                        ("mkldnn", "mkldnn.is_available"), ("openmp", "openmp.is_available")):
        try:
            out[key] = _call(backends, dotted)
        except Exception as e:  # noqa: BLE001 - older releases lack some of these
            errors.append(f"backends.{dotted}: {e.__class__.__name__}: {e}")
    try:
        out["threads"] = int(mod.get_num_threads())
        a = mod.ones(64, 64)
        float(mod.matmul(a, a).sum())  # a BLAS call: a lazily opened BLAS is mapped after it
    except Exception as e:  # noqa: BLE001
        errors.append(f"matmul: {e.__class__.__name__}: {e}")
    out["libraries"] = loaded_libraries()
    if errors:
        out["reason"] = "; ".join(errors)[:2000]
    return out


def tcpstore_facts(mod) -> dict:
    """Which TCPStore backend init_process_group gets. Since torch 2.4 it asks for libuv by default, and
    a torch built without libuv (it comes with TensorPipe; Debian's python3-torch) fails every rank with
    'use_libuv was requested but PyTorch was build without libuv support'. Then this sets USE_LIBUV=0
    (torch's own switch, read by the env:// rendezvous) for the ranks the probe starts, and says so."""
    dist = getattr(mod, "distributed", None)
    store_cls = getattr(dist, "TCPStore", None)
    if store_cls is None:
        return {"state": "n/a", "reason": "no distributed.TCPStore", "libuv": None, "use_libuv_env": None}
    if os.environ.get("USE_LIBUV") == "0":
        return {"state": "ok", "reason": "USE_LIBUV=0 was set", "libuv": False, "use_libuv_env": "0"}
    try:
        store = store_cls("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=30),
                          wait_for_workers=False, use_libuv=True)
    except TypeError:  # before torch 2.2: no use_libuv argument, no libuv backend
        return {"state": "ok", "reason": "TCPStore has no libuv backend in this release", "libuv": False,
                "use_libuv_env": None}
    except Exception as e:  # noqa: BLE001
        msg = " ".join(str(e).split())[:500]
        if "libuv" not in msg:
            return {"state": "error", "reason": f"{e.__class__.__name__}: {msg}", "libuv": None, "use_libuv_env": None}
        os.environ["USE_LIBUV"] = "0"
        return {"state": "fallback", "reason": f"built without libuv ({msg}); the ranks run with USE_LIBUV=0",
                "libuv": False, "use_libuv_env": "0"}
    libuv = getattr(store, "libuvBackend", None)
    del store
    return {"state": "ok", "reason": None, "libuv": None if libuv is None else bool(libuv), "use_libuv_env": None}


def runtime_facts(mod) -> dict:
    """After the inventory: does the framework's own runtime see devices? (This is a CUDA call.)"""
    rt: dict = {"cuda_available": None, "device_count": None, "devices": [], "error": None}
    cuda = getattr(mod, "cuda", None)
    if cuda is None or not hasattr(cuda, "is_available"):
        return rt
    try:
        rt["cuda_available"] = bool(cuda.is_available())
        rt["device_count"] = int(cuda.device_count()) if rt["cuda_available"] else 0
        if hasattr(cuda, "get_device_name"):
            for i in range(rt["device_count"]):
                rt["devices"].append(str(cuda.get_device_name(i)))
    except Exception as e:  # noqa: BLE001
        rt["error"] = f"{e.__class__.__name__}: {e}"
    return rt


def amd_gpu_inventory(runtime: dict) -> dict:
    """AMD GPUs here, for a ROCm build: the kernel driver's device node and what the HIP runtime saw."""
    kfd = os.path.exists("/dev/kfd")
    count = runtime.get("device_count") or 0
    if not kfd:
        return {"state": "no-driver", "devices": 0, "reason": "no AMD GPU: /dev/kfd is absent (no amdgpu driver here)"}
    if count == 0:
        return {"state": "no-device", "devices": 0, "reason": "/dev/kfd is present but the HIP runtime sees no GPU"}
    return {"state": "ok", "devices": count, "reason": None}


# aten::neg's CPU kernel replaced by one that breaks the operator's contract (it returns its input), then
# called. A Debug build's autograd kernel (generated VariableType, under #ifndef NDEBUG) asserts that the
# result is not shared: INTERNAL ASSERT FAILED ... "function: neg". With NDEBUG (Release,
# RelWithDebInfo) the alias goes through. In a child process: the override must not outlive the call.
_CONTRACT_BREAKING_CALL = """
import json, warnings
import torch
warnings.simplefilter("ignore")  # 'Overriding a previously registered kernel' is the point
x = torch.ones(3)
lib = torch.library.Library("aten", "IMPL")
lib.impl("neg", lambda self: self, "CPU")
try:
    y = torch.neg(x)
except RuntimeError as e:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    line = next((ln for ln in lines if "INTERNAL ASSERT FAILED" in ln), lines[0] if lines else "")
    print(json.dumps({"fired": True, "message": line[:300]}))
else:
    print(json.dumps({"fired": False, "aliased": y.data_ptr() == x.data_ptr()}))
"""


def debug_assert(mod, timeout: float = 300.0) -> dict:
    """Whether torch's debug-only internal assertions fire (compiled in: NDEBUG unset)."""
    if not hasattr(getattr(mod, "library", None), "Library"):
        return {"state": "skipped", "reason": "torch.library.Library is not in this torch"}
    try:
        proc = subprocess.run([sys.executable, "-c", _CONTRACT_BREAKING_CALL], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"state": "error", "reason": f"the call did not return within {timeout:.0f} s"}
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), "")
    try:
        return {"state": "ok", **json.loads(line)}
    except ValueError:
        err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        return {"state": "error", "reason": f"exit {proc.returncode}: {err[-1][:300] if err else 'no output'}"}
