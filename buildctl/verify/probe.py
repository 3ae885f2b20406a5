#!/usr/bin/env python3
"""Probe a built framework wheel from inside the environment it was installed into.

STANDALONE: standard library plus the framework under test (and pynvml when importable). buildctl
copies this one file next to a fresh install of the wheel and runs it with that install's Python:

    python probe.py --module torch|demofw [--sweep --sizes 8:256M --iters 20 --warmup 5] --out part.json

Order matters: the GPU inventory (pynvml) is taken before the framework is imported and before any
CUDA call, so a broken CUDA runtime cannot hide what hardware and driver are there. "No NVIDIA driver"
is a normal state, reported, not an error. Every section records its own failure and the probe goes
on; the JSON is always written. Exit status: 0 when the JSON was written (whatever it says), 2 for
bad arguments.

The all-reduce sweep follows nccl-tests' definitions (all_reduce_perf): algbw = bytes / 1e9 / s,
busbw = algbw * 2(n-1)/n (0 for n = 1); warm-up first (the NCCL communicator is created lazily),
then `iters` back-to-back timed calls per size, then an untimed correctness pass on a refilled buffer.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import glob
import importlib
import json
import os
import platform
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

PROBE_VERSION = 1
MiB = 1 << 20
DEFAULT_SIZES = "8:256M"
DEFAULT_CPU_MAX = 16 * MiB  # gloo on a couple of CPU cores: 256 MiB x iters would take minutes
DTYPE_BYTES = 4  # float32, as nccl-tests' default


def log(msg: str) -> None:
    print(f"[probe] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- small pure helpers


def parse_size(text: str) -> int:
    """'8', '64K', '256M', '1G' -> bytes (binary multiples, as nccl-tests -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"bad size {text!r}; use e.g. 8, 64K, 256M, 1G")
    mult = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]
    return int(m.group(1)) * mult


def parse_sizes(text: str) -> tuple[list[int], int]:
    """'MIN:MAX[:FACTOR]' or a comma list '8,1M,256M' -> (sorted sizes in bytes, factor or 0 for a list).

    Sizes are rounded down to whole float32 elements (at least one)."""
    text = text.strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise ValueError(f"bad sizes {text!r}; use MIN:MAX[:FACTOR], e.g. 8:256M or 8:256M:4")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = int(parts[2]) if len(parts) == 3 else 2
        if factor < 2:
            raise ValueError(f"bad sizes {text!r}: FACTOR must be >= 2")
        if lo < 1 or hi < lo:
            raise ValueError(f"bad sizes {text!r}: need 1 <= MIN <= MAX")
        sizes, s = [], lo
        while s <= hi:
            sizes.append(s)
            s *= factor
    else:
        sizes, factor = [parse_size(p) for p in text.split(",") if p.strip()], 0
        if not sizes:
            raise ValueError("no sizes given")
    out = sorted({max(DTYPE_BYTES, s - s % DTYPE_BYTES) for s in sizes})
    return out, factor


def human_size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def algbw_gbs(size_bytes: int, time_us: float) -> float:
    """nccl-tests algbw: bytes / 1e9 / seconds (GB/s, decimal)."""
    if time_us <= 0:
        return 0.0
    return size_bytes / 1e9 / (time_us / 1e6)


def busbw_factor(nranks: int) -> float:
    """nccl-tests AllReduceGetBw: 2(n-1)/n; a single rank moves nothing over a bus."""
    return 0.0 if nranks <= 1 else 2.0 * (nranks - 1) / nranks


def busbw_gbs(algbw: float, nranks: int) -> float:
    return algbw * busbw_factor(nranks)


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


_ARCH_FILE = re.compile(r"\.(sm_\d+[a-z]?)\.(cubin|ptx)\s*$")


def parse_cuobjdump_list(text: str) -> dict[str, int]:
    """cuobjdump --list-elf / --list-ptx output -> {sm_XY or compute_XY: number of entries}.

    Lines look like 'ELF file    1: libtorch_cuda.1.sm_90.cubin' and 'PTX file    1: x.1.sm_90.ptx';
    a PTX entry for sm_90 is reported as compute_90 (virtual architecture), as torch's arch list does."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        m = _ARCH_FILE.search(line)
        if not m:
            continue
        arch, kind = m.group(1), m.group(2)
        if kind == "ptx":
            arch = "compute_" + arch[len("sm_"):]
        counts[arch] = counts.get(arch, 0) + 1
    return counts


def elf_section_names(path: str) -> list[str] | None:
    """Section names of an ELF64 little-endian file; None when it is not one we can read."""
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
                return None
            e_shoff = struct.unpack_from("<Q", ident, 0x28)[0]
            e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
            if not e_shoff or not e_shnum or e_shstrndx >= e_shnum:
                return None
            f.seek(e_shoff)
            table = f.read(e_shentsize * e_shnum)
            headers = [struct.unpack_from("<IIQQQQ", table, i * e_shentsize) for i in range(e_shnum)]
            str_off, str_size = headers[e_shstrndx][4], headers[e_shstrndx][5]
            f.seek(str_off)
            strtab = f.read(str_size)
        names = []
        for h in headers:
            end = strtab.find(b"\0", h[0])
            names.append(strtab[h[0]:end].decode("ascii", "replace"))
        return names
    except (OSError, struct.error):
        return None


def has_device_code(path: str) -> bool:
    names = elf_section_names(path)
    if names is None:
        return True  # unknown format: let cuobjdump decide
    return any(n in (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment") for n in names)


# --------------------------------------------------------------------------- sections


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


def find_cuobjdump() -> str | None:
    found = shutil.which("cuobjdump")
    if found:
        return found
    cands = []
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "bin", "cuobjdump"))
    cands.append("/usr/local/cuda/bin/cuobjdump")
    # PyPI nvidia-cuda-cuobjdump: nvidia/cu13/bin/cuobjdump (13.x), nvidia/cuda_cuobjdump/bin (12.x)
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            cands += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "bin", "cuobjdump")))
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def arch_coverage(mod, facts: dict) -> dict:
    """SASS (cubin) and PTX architectures actually present in the framework's shared libraries."""
    cov: dict = {"state": "ok", "reason": None, "tool": None, "sass": [], "ptx": [], "libraries": []}
    if facts.get("hip"):
        return rocm_arch_coverage(mod)
    if not facts.get("cuda"):
        cov.update(state="n/a", reason="built without CUDA: no device code to list")
        return cov
    tool = find_cuobjdump()
    if not tool:
        cov.update(state="unavailable", reason="cuobjdump not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, "
                   "or the nvidia-cuda-cuobjdump pip package)")
        return cov
    cov["tool"] = tool
    pkg = os.path.dirname(getattr(mod, "__file__", "") or "")
    libs = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(pkg, "**", "*.so*"), recursive=True)
                   if os.path.isfile(p)})
    sass: dict[str, int] = {}
    ptx: dict[str, int] = {}
    for lib in libs:
        if not has_device_code(lib):
            continue
        entry = {"path": os.path.relpath(lib, pkg), "sass": {}, "ptx": {}, "error": None}
        for flag, into, key in (("--list-elf", sass, "sass"), ("--list-ptx", ptx, "ptx")):
            try:
                r = subprocess.run([tool, flag, lib], capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                entry["error"] = f"{flag}: {e}"
                continue
            counts = parse_cuobjdump_list(r.stdout)
            if r.returncode != 0 and not counts and "does not contain" not in (r.stdout + r.stderr):
                entry["error"] = f"{flag}: exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
            entry[key] = counts
            for k, n in counts.items():
                into[k] = into.get(k, 0) + n
        if entry["sass"] or entry["ptx"] or entry["error"]:
            cov["libraries"].append(entry)
    cov["sass"] = sorted(sass, key=_arch_sort_key)
    cov["ptx"] = sorted(ptx, key=_arch_sort_key)
    if not cov["libraries"]:
        cov.update(state="unavailable", reason="no library of the package contains CUDA device code")
    return cov


def _arch_sort_key(a: str) -> tuple[int, str]:
    m = re.search(r"(\d+)", a)
    return (int(m.group(1)) if m else 0, a)


# --------------------------------------------------------------------------- ROCm code objects
#
# A HIP binary keeps its device code in the ELF section .hip_fatbin: one clang offload bundle per HIP
# translation unit ("__CLANG_OFFLOAD_BUNDLE__", entry count, then per entry offset, size and an id
# such as hipv4-amdgcn-amd-amdhsa--gfx90a), each entry an AMDGPU code object (an ELF whose e_flags
# name its gfx target). Read here with the standard library: llvm-objdump --offloading of LLVM 17 does
# not list this (pre-LLVM-18) bundle format, and clang-offload-bundler --list needs the section cut
# out first and is absent from a runtime image anyway.

OFFLOAD_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_BUNDLE_MAGIC = b"CCOB"  # clang >= 18 --offload-compress (ROCm >= 6.2): zstd/zlib inside
EM_AMDGPU = 224
# EF_AMDGPU_MACH (e_flags & 0xff) -> target; read from llc-17 -mcpu=<target> objects in a trixie container.
AMDGPU_MACH = {
    0x20: "gfx600", 0x21: "gfx601", 0x3a: "gfx602", 0x22: "gfx700", 0x23: "gfx701", 0x24: "gfx702",
    0x25: "gfx703", 0x26: "gfx704", 0x3b: "gfx705", 0x28: "gfx801", 0x29: "gfx802", 0x2a: "gfx803",
    0x3c: "gfx805", 0x2b: "gfx810", 0x2c: "gfx900", 0x2d: "gfx902", 0x2e: "gfx904", 0x2f: "gfx906",
    0x30: "gfx908", 0x31: "gfx909", 0x3f: "gfx90a", 0x32: "gfx90c", 0x40: "gfx940", 0x4b: "gfx941",
    0x4c: "gfx942", 0x33: "gfx1010", 0x34: "gfx1011", 0x35: "gfx1012", 0x42: "gfx1013", 0x36: "gfx1030",
    0x37: "gfx1031", 0x38: "gfx1032", 0x39: "gfx1033", 0x3e: "gfx1034", 0x3d: "gfx1035", 0x45: "gfx1036",
    0x41: "gfx1100", 0x46: "gfx1101", 0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150", 0x4a: "gfx1151",
}


def elf_section_bytes(path: str, name: str) -> bytes | None:
    """The contents of one section of an ELF64 little-endian file; None if absent or not such a file."""
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
                return None
            e_shoff = struct.unpack_from("<Q", ident, 0x28)[0]
            e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", ident, 0x3A)
            if not e_shoff or not e_shnum or e_shstrndx >= e_shnum:
                return None
            f.seek(e_shoff)
            table = f.read(e_shentsize * e_shnum)
            headers = [struct.unpack_from("<IIQQQQ", table, i * e_shentsize) for i in range(e_shnum)]
            f.seek(headers[e_shstrndx][4])
            strtab = f.read(headers[e_shstrndx][5])
            for h in headers:
                if strtab[h[0]:strtab.find(b"\0", h[0])] == name.encode():
                    f.seek(h[4])
                    return f.read(h[5])
    except (OSError, struct.error):
        return None
    return None


def parse_offload_bundles(blob: bytes) -> list[dict]:
    """Entries of every clang offload bundle in `blob`: [{'id', 'offset' (in blob), 'size'}].

    Raises ValueError for a truncated or inconsistent bundle (an entry pointing outside the blob)."""
    entries: list[dict] = []
    pos = blob.find(OFFLOAD_BUNDLE_MAGIC)
    while pos != -1:
        (count,) = struct.unpack_from("<Q", blob, pos + 24)
        if count > 4096:
            raise ValueError(f"offload bundle at {pos}: implausible entry count {count}")
        cursor, end = pos + 32, pos + 32
        for _ in range(count):
            offset, size, id_len = struct.unpack_from("<QQQ", blob, cursor)
            bundle_id = blob[cursor + 24:cursor + 24 + id_len].decode("ascii", "replace")
            cursor += 24 + id_len
            if pos + offset + size > len(blob) or len(bundle_id) != id_len:
                raise ValueError(f"offload bundle at {pos}: entry {bundle_id!r} runs past the end of the section")
            entries.append({"id": bundle_id, "offset": pos + offset, "size": size})
            end = max(end, cursor, pos + offset + size)
        pos = blob.find(OFFLOAD_BUNDLE_MAGIC, end)
    return entries


def bundle_target(bundle_id: str) -> str | None:
    """'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-' -> 'gfx90a:xnack-'; None for the host entry."""
    kind, _, target = bundle_id.partition("--")
    if not kind.startswith("hip") or "amdgcn" not in kind or not target:
        return None
    return target


def code_object_target(data: bytes) -> str | None:
    """The gfx target an AMDGPU code object (ELF, e_machine EM_AMDGPU) was compiled for, from its
    e_flags; 'mach 0x..' for one not in the table; None when it is not an AMDGPU ELF."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or struct.unpack_from("<H", data, 18)[0] != EM_AMDGPU:
        return None
    mach = struct.unpack_from("<I", data, 48)[0] & 0xFF
    return AMDGPU_MACH.get(mach, f"mach 0x{mach:x}")


def rocm_code_objects(path: str) -> dict:
    """{'code_objects': {gfx: {'count', 'bytes'}}, 'error'} for one library's .hip_fatbin."""
    out: dict = {"code_objects": {}, "error": None}
    blob = elf_section_bytes(path, ".hip_fatbin")
    if not blob:
        return out
    if blob.startswith(COMPRESSED_BUNDLE_MAGIC):
        out["error"] = "compressed offload bundle (CCOB, --offload-compress): not read by this probe"
        return out
    try:
        entries = parse_offload_bundles(blob)
    except (ValueError, struct.error) as e:
        out["error"] = f".hip_fatbin: {e}"
        return out
    for e in entries:
        target = bundle_target(e["id"])
        if target is None or e["size"] == 0:
            continue
        seen = code_object_target(blob[e["offset"]:e["offset"] + e["size"]])
        if seen != target.split(":")[0]:
            out["error"] = f"bundle {e['id']} holds a code object for {seen or 'no AMDGPU ELF'}"
            continue
        co = out["code_objects"].setdefault(target, {"count": 0, "bytes": 0})
        co["count"] += 1
        co["bytes"] += e["size"]
    return out


def rocm_arch_coverage(mod) -> dict:
    """The gfx targets with code objects in the framework's libraries (the ROCm counterpart of the
    cuobjdump listing): `gfx` lists them, `libraries` has per-library counts and sizes."""
    cov: dict = {"state": "ok", "reason": None, "tool": "probe.py (.hip_fatbin offload-bundle reader)",
                 "sass": [], "ptx": [], "gfx": [], "libraries": []}
    pkg = os.path.dirname(getattr(mod, "__file__", "") or "")
    libs = sorted({os.path.realpath(p) for p in glob.glob(os.path.join(pkg, "**", "*.so*"), recursive=True)
                   if os.path.isfile(p)})
    found: set[str] = set()
    for lib in libs:
        entry = rocm_code_objects(lib)
        if entry["code_objects"] or entry["error"]:
            cov["libraries"].append({"path": os.path.relpath(lib, pkg), **entry})
            found |= {t.split(":")[0] for t in entry["code_objects"]}  # gfx90a:xnack- covers gfx90a
    cov["gfx"] = sorted(found, key=_arch_sort_key)
    if not cov["libraries"]:
        cov.update(state="unavailable", reason="no library of the package has a .hip_fatbin section")
    return cov


def amd_gpu_inventory(runtime: dict) -> dict:
    """AMD GPUs here, for a ROCm build: the kernel driver's device node and what the HIP runtime saw."""
    kfd = os.path.exists("/dev/kfd")
    count = runtime.get("device_count") or 0
    if not kfd:
        return {"state": "no-driver", "devices": 0, "reason": "no AMD GPU: /dev/kfd is absent (no amdgpu driver here)"}
    if count == 0:
        return {"state": "no-device", "devices": 0, "reason": "/dev/kfd is present but the HIP runtime sees no GPU"}
    return {"state": "ok", "devices": count, "reason": None}


# --------------------------------------------------------------------------- all-reduce sweep


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_sweep(mod, runtime: dict, dist_facts: dict, facts: dict) -> dict:
    """Which backend, device and world size: GPUs -> one process per GPU; none -> gloo on CPU, 2 procs."""
    if dist_facts.get("hccl"):
        try:
            npu = mod.npu  # registered by torch_npu
            n = int(npu.device_count())
            if n > 0:
                return {"backend": "hccl", "device": "npu", "world_size": n,
                        "label": f"hccl on {n} Ascend NPU(s)", "timer": "npu-events"}
        except Exception:  # noqa: BLE001
            pass
    n_gpu = runtime.get("device_count") or 0
    if n_gpu > 0 and dist_facts.get("nccl"):
        lib = "RCCL" if facts.get("hip") else "NCCL"
        note = (" (1 GPU: a single-rank in-place all-reduce moves no data: busbw is 0 by definition and "
                "algbw is no bandwidth; the times are call latency)") if n_gpu == 1 else ""
        return {"backend": "nccl", "device": "cuda", "world_size": n_gpu,
                "label": f"{lib} on {n_gpu} GPU(s), one process per GPU{note}", "timer": "cuda-events"}
    why = "no GPU visible" if n_gpu == 0 else "built without NCCL"
    return {"backend": "gloo", "device": "cpu", "world_size": 2,
            "label": f"gloo on CPU, 2 processes ({why}): a CPU figure, not an NCCL one",
            "timer": "perf_counter+barrier"}


def _sweep_worker(rank: int, cfg: dict) -> None:
    """One rank of the sweep (top level so that spawn can import it)."""
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(cfg["port"]), RANK=str(rank),
                      WORLD_SIZE=str(cfg["world_size"]), LOCAL_RANK=str(rank))
    n, backend, device = cfg["world_size"], cfg["backend"], cfg["device"]
    devmod = None
    if device == "cuda":
        torch.cuda.set_device(rank)
        devmod = torch.cuda
    elif device == "npu":
        import torch_npu  # noqa: F401

        torch.npu.set_device(rank)
        devmod = torch.npu
    else:
        torch.set_num_threads(1)  # n processes on few cores: do not oversubscribe
    dev = torch.device(device, rank) if device != "cpu" else torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=cfg["timeout"]))

    def sync():
        if devmod is not None:
            devmod.synchronize()

    flag = torch.zeros(1, dtype=torch.float32, device=dev)

    def barrier():
        # A 1-element all-reduce: NCCL's barrier() guesses devices and warns.
        dist.all_reduce(flag)
        sync()

    sizes, iters, warmup = cfg["sizes"], cfg["iters"], cfg["warmup"]
    buf = torch.zeros(max(sizes) // DTYPE_BYTES, dtype=torch.float32, device=dev)
    events = None
    if devmod is not None and hasattr(devmod, "Event"):
        # Created and recorded once up front: a CUDA event is created lazily at its first record, and
        # the first creation in a process is slow enough to inflate whichever size is timed first.
        events = (devmod.Event(enable_timing=True), devmod.Event(enable_timing=True))
        for ev in events:
            ev.record()
        sync()
    # Warm-up, untimed: creates the communicator (lazily, at the first collective) and, on a GPU,
    # keeps it busy long enough to leave its idle clocks before the first (smallest) size is timed
    # (on CPU: lets both ranks settle into the loop).
    for _ in range(max(warmup, 1000 if devmod is not None else 100)):
        dist.all_reduce(buf[: sizes[0] // DTYPE_BYTES])
    for _ in range(warmup):
        dist.all_reduce(buf)
    sync()
    rows = []
    expect = float(n * (n + 1) // 2)
    # One discarded pass of the smallest size: on an H200 the first timed block came out 2-3x slow
    # (host-side, once per process) even after the warm-up above.
    for i, size in enumerate([sizes[0], *sizes]):
        pilot = i == 0
        count = size // DTYPE_BYTES
        t = buf[:count]
        t.zero_()  # in-place all-reduce accumulates; zeros stay finite
        for _ in range(max(warmup, 1)):  # per size: protocol/algorithm of this size warmed up
            dist.all_reduce(t)
        barrier()
        gc.disable()  # no collector pauses inside a timed block (as timeit does)
        if events is not None:
            start, end = events
            h0 = time.perf_counter()
            start.record()
            for _ in range(iters):
                dist.all_reduce(t)
            end.record()
            end.synchronize()
            host_us = (time.perf_counter() - h0) * 1e6 / iters
            time_us = start.elapsed_time(end) * 1e3 / iters
        else:
            h0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            sync()
            host_us = (time.perf_counter() - h0) * 1e6 / iters
            time_us = host_us
        gc.enable()
        if pilot:
            continue
        # Correctness, untimed: refill (earlier calls accumulated), reduce once, compare exactly.
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        sync()
        wrong = int((t != expect).sum().item())
        stats = torch.tensor([time_us, host_us, float(wrong)], dtype=torch.float64, device=dev)
        tmax = stats.clone()
        dist.all_reduce(stats)
        dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
        sync()
        mean_us, mean_host = stats[0].item() / n, stats[1].item() / n
        alg = algbw_gbs(size, mean_us)
        rows.append({"size": size, "count": count, "time_us": round(mean_us, 3),
                     "time_us_max": round(tmax[0].item(), 3), "host_us": round(mean_host, 3),
                     "algbw_gbs": alg, "busbw_gbs": busbw_gbs(alg, n),
                     "wrong": int(stats[2].item())})
    graph = {"state": "n/a", "reason": "CUDA graphs need a GPU", "latency_us": None, "ops": None}
    if device == "cuda" and n == 1:
        graph["reason"] = "1 rank: an in-place all-reduce launches no kernel, the graph would be empty"
    elif device == "cuda":
        graph = _graph_latency(torch, dist, buf[: sizes[0] // DTYPE_BYTES], iters, barrier)
    if rank == 0:
        with open(cfg["result_path"], "w") as f:
            json.dump({"rows": rows, "graph": graph}, f)
    try:
        barrier()
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass


def _graph_latency(torch, dist, t, iters: int, barrier) -> dict:
    """Device-side latency: `ops` all-reduces captured in one CUDA graph, replayed, timed with events."""
    ops = max(10, min(iters, 100))
    res = {"state": "ok", "reason": None, "latency_us": None, "ops": ops, "size": t.numel() * DTYPE_BYTES}
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                dist.all_reduce(t)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(ops):
                dist.all_reduce(t)
        g.replay()
        torch.cuda.synchronize()
        barrier()
        reps = 5
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        end.synchronize()
        res["latency_us"] = round(start.elapsed_time(end) * 1e3 / (reps * ops), 3)
        del g
    except Exception as e:  # noqa: BLE001
        res.update(state="error", reason=f"{e.__class__.__name__}: {e}"[:500])
    return res


def run_sweep(mod, plan: dict, sizes: list[int], factor: int, iters: int, warmup: int,
              cpu_max: int, timeout: float) -> dict:
    res: dict = {"state": "ok", "reason": None, **plan, "dtype": "float32", "op": "sum",
                 "iters": iters, "warmup": warmup, "factor": factor,
                 "sizes_requested": [sizes[0], sizes[-1]], "capped": None, "rows": [],
                 "graph": None, "headline": None, "seconds": None}
    if plan["device"] == "cpu" and sizes[-1] > cpu_max:
        kept = [s for s in sizes if s <= cpu_max] or [sizes[0]]
        res["capped"] = {"max": kept[-1], "reason": f"gloo on CPU: sizes above {human_size(cpu_max)} "
                         "skipped to keep the run short (probe --cpu-max-size)"}
        sizes = kept
    import torch.multiprocessing as tmp

    fd, result_path = tempfile.mkstemp(prefix="sweep-", suffix=".json")
    os.close(fd)
    cfg = {**plan, "sizes": sizes, "iters": iters, "warmup": warmup, "port": free_port(),
           "result_path": result_path, "timeout": max(60, int(timeout))}
    t0 = time.perf_counter()
    try:
        ctx = tmp.start_processes(_sweep_worker, args=(cfg,), nprocs=plan["world_size"], join=False,
                                  start_method="spawn")
        deadline = time.monotonic() + timeout
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise TimeoutError(f"sweep did not finish within {timeout:.0f} s")
        with open(result_path) as f:
            out = json.load(f)
        res["rows"], res["graph"] = out["rows"], out["graph"]
    except Exception as e:  # noqa: BLE001 - ProcessRaisedException carries the child's traceback
        msg = str(e).strip()
        res.update(state="error", reason=f"{e.__class__.__name__}: {msg[-1500:]}")
    finally:
        try:
            os.unlink(result_path)
        except OSError:
            pass
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res["headline"] = sweep_headline(res["rows"], res.get("graph"), plan["world_size"])
    return res


def sweep_headline(rows: list[dict], graph: dict | None, world_size: int) -> dict | None:
    """Smallest-size latency and peak busbw (None for one rank, where busbw is 0 by definition)."""
    if not rows:
        return None
    small = min(rows, key=lambda r: r["size"])
    peak = max(rows, key=lambda r: (r["busbw_gbs"], -r["size"])) if world_size > 1 else None
    return {"latency_us": small["time_us"], "latency_size": small["size"],
            "peak_busbw_gbs": peak and peak["busbw_gbs"], "peak_busbw_size": peak and peak["size"],
            "peak_algbw_gbs": max(r["algbw_gbs"] for r in rows),
            "graph_latency_us": (graph or {}).get("latency_us"),
            "wrong": sum(r["wrong"] for r in rows)}


# --------------------------------------------------------------------------- main

# Below the host's caps (buildctl/verify/schema.py), which refuse a probe.json with longer strings.
MAX_STR = 8 << 10
MAX_TEXT = 128 << 10
LONG_FIELDS = ("text", "traceback")


def json_safe(value, key: str = ""):
    """What the host accepts: strings cut to MAX_STR (MAX_TEXT for config text and tracebacks, ending in
    '…' when cut), and NaN or infinite numbers (a broken build's matmul) as null: JSON has neither."""
    if isinstance(value, dict):
        return {k: json_safe(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v, key) for v in value]
    if isinstance(value, str):
        limit = MAX_TEXT if key in LONG_FIELDS else MAX_STR
        return value if len(value) <= limit else value[: limit - 1] + "…"
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    return value


def probe(args) -> dict:
    errors: list[str] = []
    report: dict = {"probe_version": PROBE_VERSION, "module": args.module,
                    "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "python": {"version": platform.python_version(), "executable": sys.executable,
                               "platform": platform.platform(), "machine": platform.machine(),
                               "cpu_count": os.cpu_count()},
                    "errors": errors}
    log("GPU inventory (NVML, before any CUDA call)")
    inv = gpu_inventory()
    report["gpus"] = inv
    if inv["state"] == "ok":
        log(f"  driver {inv['driver_version']} (CUDA {inv['cuda_driver_version']}), "
            f"{len(inv['devices'])} GPU(s): " + ", ".join(f"{d['name']} sm_{(d['compute_capability'] or '?').replace('.', '')}"
                                                      for d in inv["devices"]))
    else:
        log(f"  {inv['state']}: {inv['reason']}")
    log(f"importing {args.module}")
    mod, imp = import_framework(args.module)
    report["import"] = imp
    if mod is None:
        log(f"  import FAILED: {imp['error']}")
        return report
    log(f"  ok in {imp['seconds']} s ({imp['file']})")
    try:
        text = str(mod.__config__.show())
    except Exception as e:  # noqa: BLE001
        text = ""
        errors.append(f"__config__.show: {e.__class__.__name__}: {e}")
    report["config"] = {"text": text, "build_settings": parse_build_settings(text)}
    facts = framework_facts(mod, errors)
    report["distributed"] = distributed_facts(mod)
    report["cpu"] = cpu_facts(mod, report["config"]["build_settings"])
    log(f"  CPU capability {report['cpu']['capability']}, BLAS {report['cpu']['blas']}, "
        f"loaded {', '.join(os.path.basename(p) for p in report['cpu']['libraries']) or 'none'}")
    if report["distributed"]["available"]:
        report["distributed"]["tcpstore"] = tcpstore_facts(mod)
        if report["distributed"]["tcpstore"]["state"] != "ok":
            log(f"  TCPStore: {report['distributed']['tcpstore']['reason']}")
    log(f"  {args.module} {facts.get('version')}, cuda {facts.get('cuda')}, hip {facts.get('hip')}, "
        f"nccl {facts.get('nccl')}, cudnn {facts.get('cudnn')}, debug {facts.get('debug')}")
    # Everything above is CUDA-free; what follows may initialise the CUDA runtime.
    report["runtime"] = runtime_facts(mod)
    if facts.get("hip"):
        report["amd_gpus"] = amd_gpu_inventory(report["runtime"])
    facts["arch_list"] = arch_list(mod, facts, errors)
    report["framework"] = facts
    if args.arch_coverage:
        log("arch coverage (device code per target)")
        report["arch_coverage"] = arch_coverage(mod, facts)
        cov = report["arch_coverage"]
        kinds = f"gfx {cov['gfx']}" if "gfx" in cov else f"sass {cov['sass']} ptx {cov['ptx']}"
        log(f"  {cov['state']}: {kinds} {cov['reason'] or ''}")
    else:
        report["arch_coverage"] = {"state": "skipped", "reason": "--no-arch-coverage", "tool": None,
                                   "sass": [], "ptx": [], "libraries": []}
    report["checks"] = framework_checks(mod, args, report)
    if not args.sweep:
        report["sweep"] = {"state": "skipped", "reason": "not requested"}
    elif not report["distributed"]["available"]:
        report["sweep"] = {"state": "skipped",
                           "reason": f"{args.module} has no (available) distributed module"}
    else:
        sizes, factor = parse_sizes(args.sizes)
        plan = plan_sweep(mod, report["runtime"], report["distributed"], facts)
        log(f"all-reduce sweep: {plan['label']}")
        report["sweep"] = run_sweep(mod, plan, sizes, factor, args.iters, args.warmup,
                                    args.cpu_max_size, args.timeout)
        sw = report["sweep"]
        if sw["state"] == "ok":
            h = sw["headline"]
            peak = (f"peak busbw {h['peak_busbw_gbs']:.3f} GB/s at {human_size(h['peak_busbw_size'])}"
                    if h["peak_busbw_gbs"] is not None else "busbw n/a (1 rank)")
            log(f"  {human_size(h['latency_size'])}: {h['latency_us']:.1f} us, {peak}, wrong {h['wrong']}")
        else:
            log(f"  sweep {sw['state']}: {sw['reason']}")
    return report


def framework_checks(mod, args, report: dict) -> dict:
    """checks.py (next to this file): numerics, torch.compile matrix and DDP step for torch; the debug
    information of the libraries for any framework."""
    try:
        import checks
    except ImportError as e:
        return {"state": "skipped", "reason": f"checks.py not found next to the probe ({e})"}
    build_type = ((report.get("config") or {}).get("build_settings") or {}).get("BUILD_TYPE") or (
        "Debug" if (report.get("framework") or {}).get("debug") else None)
    out: dict = {"debug_info": checks.debug_info(os.path.dirname(mod.__file__), build_type)}
    if args.module != "torch" or not args.checks:
        why = "--no-checks" if not args.checks else f"{args.module} is not torch"
        for name in ("numerics", "compile", "ddp"):
            out[name] = {"state": "skipped", "reason": why}
        return out
    device = "cuda" if (report.get("runtime") or {}).get("device_count") else "cpu"
    log("numerics against NumPy")
    out["numerics"] = checks.numerics(mod)
    log(f"  {out['numerics']['state']}")
    log(f"torch.compile matrix on {device} ({len(checks.COMPILE_CELLS)} cells, one process each)")
    out["compile"] = checks.compile_matrix(mod, device, args.compile_timeout)
    for c in out["compile"].get("cells", []):
        log(f"  {c['backend']}/{c['mode']}: {c['state']} ({c.get('seconds')} s){' ' + c['error'] if c.get('error') else ''}")
    log("DDP training step, 2 ranks over gloo")
    out["ddp"] = checks.ddp_step(mod)
    log(f"  {out['ddp']['state']}{': ' + out['ddp']['reason'] if out['ddp'].get('reason') else ''}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", required=True, help="framework module to probe: torch or demofw")
    ap.add_argument("--out", required=True, help="where to write the JSON")
    ap.add_argument("--sweep", action="store_true", help="run the all-reduce sweep")
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help="MIN:MAX[:FACTOR] or a comma list (8:256M)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per size")
    ap.add_argument("--warmup", type=int, default=5, help="untimed warm-up iterations per size")
    ap.add_argument("--cpu-max-size", type=parse_size, default=DEFAULT_CPU_MAX,
                    help="largest size for the CPU (gloo) sweep (16M)")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds for the whole sweep")
    ap.add_argument("--no-arch-coverage", dest="arch_coverage", action="store_false")
    ap.add_argument("--no-checks", dest="checks", action="store_false",
                    help="skip numerics, the torch.compile matrix and the DDP step (checks.py)")
    ap.add_argument("--compile-timeout", type=float, default=600, help="seconds per torch.compile cell")
    args = ap.parse_args(argv)
    try:
        parse_sizes(args.sizes)
    except ValueError as e:
        ap.error(str(e))
    if args.iters < 1 or args.warmup < 0:
        ap.error("--iters must be >= 1 and --warmup >= 0")
    t0 = time.perf_counter()
    try:
        report = probe(args)
    except BaseException as e:  # noqa: BLE001 - the JSON is written whatever happened
        report = {"probe_version": PROBE_VERSION, "module": args.module,
                  "fatal": f"{e.__class__.__name__}: {e}", "traceback": traceback.format_exc(limit=12)}
    report["seconds"] = round(time.perf_counter() - t0, 2)
    report = json_safe(json.loads(json.dumps(report, default=str)))  # odd objects as strings, then cut
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(tmp, args.out)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
