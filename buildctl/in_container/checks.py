#!/usr/bin/env python3
"""Framework checks the probe runs on a built torch: what a user trusts a wheel for.

STANDALONE, like probe.py (standard library, torch, and NumPy when installed); it sits next to
probe.py wherever that runs, and probe.py imports it. Each check returns a plain dict with a
`state` of ok | failed | error | skipped and never raises:

* numerics: a float32 matmul and a 2-D convolution against NumPy (BLAS and conv kernels of this build);
* compile_matrix: torch.compile with the eager, aot_eager and inductor backends (inductor in its
  modes), each cell in its own process with a timeout: compile time, steady-state time, and whether
  the compiled forward and backward agree with eager. Inductor needs a C++ compiler (CPU) or Triton
  (GPU) at run time: a from-source build is where that toolchain breaks, so every cell is shown;
* ddp_step: two processes, DistributedDataParallel over gloo (rank 1 starts from other weights, so
  equal losses prove DDP's initial broadcast), one training step: the same loss on both ranks,
  gradients equal across ranks and to a single-process reference after the all-reduce;
* debug_info: for Debug/RelWithDebInfo builds, DWARF sections in the framework's libraries, one
  exported function and (torch) an at::native function resolved to file:line (addr2line, binutils).

    python checks.py compile-cell BACKEND MODE DEVICE   # one matrix cell, prints JSON (internal)
    python checks.py ddp-rank                           # one DDP rank, env RANK/WORLD_SIZE/... (internal)
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

COMPILE_CELLS = (
    ("eager", "default"),
    ("aot_eager", "default"),
    ("inductor", "default"),
    ("inductor", "reduce-overhead"),
    ("inductor", "max-autotune-no-cudagraphs"),
)
CELL_TIMEOUT_S = 600.0
DDP_TIMEOUT_S = 300.0
# addr2line over a Debug libtorch_cpu.so (~1.3 GB of DWARF) reads its line tables once per call.
ATEN_RESOLVE_TIMEOUT_S = 600.0
ATEN_SOURCE = "aten/src/ATen/"


def _last_json(stdout: str) -> dict | None:
    """A child process's result: its last line that starts with '{' (torch may print before it)."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("{")), None)
    try:
        return json.loads(line) if line else None
    except ValueError:
        return None


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    # The last line of a traceback says what was raised; that is the line a user needs.
    line = lines[-1] if lines else ""
    return line[:limit]


# --------------------------------------------------------------------------- numerics


def _conv2d_reference(np, x, w):
    """Valid 2-D cross-correlation (PyTorch's conv2d, stride 1, no padding) in NumPy."""
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))  # N,C,H',W',kh,kw
    return np.einsum("nchwij,ocij->nohw", windows, w, optimize=True)


def numerics(torch) -> dict:
    try:
        import numpy as np
    except ImportError as e:
        return {"state": "skipped", "reason": f"NumPy not importable ({e})", "cases": []}
    rng = np.random.default_rng(0)
    cases = []
    try:
        a = rng.standard_normal((96, 64)).astype(np.float32)
        b = rng.standard_normal((64, 80)).astype(np.float32)
        t0 = time.perf_counter()
        got = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
        cases.append(_compare("matmul 96x64 @ 64x80 (float32)", got, a.astype(np.float64) @ b.astype(np.float64),
                              time.perf_counter() - t0, np))
        x = rng.standard_normal((2, 3, 20, 20)).astype(np.float32)
        w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        t0 = time.perf_counter()
        got = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)).numpy()
        cases.append(_compare("conv2d 2x3x20x20 * 4x3x3x3 (float32)", got,
                              _conv2d_reference(np, x.astype(np.float64), w.astype(np.float64)),
                              time.perf_counter() - t0, np))
    except Exception as e:  # noqa: BLE001 - a broken kernel is a result, not a crash
        return {"state": "error", "reason": f"{e.__class__.__name__}: {e}"[:300], "cases": cases}
    bad = [c for c in cases if not c["ok"]]
    return {"state": "failed" if bad else "ok", "reason": "; ".join(c["name"] for c in bad) or None, "cases": cases}


def _compare(name: str, got, want, seconds: float, np) -> dict:
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    scale = float(np.max(np.abs(want))) or 1.0
    # float32 accumulation over a few dozen terms: relative error ~1e-6; 1e-4 leaves room for BLAS order.
    ok = bool(got.shape == want.shape and err <= 1e-4 * scale)
    return {"name": name, "ok": ok, "max_abs_err": err, "scale": scale, "ms": round(seconds * 1e3, 3)}


# --------------------------------------------------------------------------- torch.compile matrix


def _cell(backend: str, mode: str, device: str) -> dict:
    """One matrix cell, in this (child) process."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10),
    ).to(device)
    x = torch.randn(4, 3, 16, 16, device=device)

    def step(fn):
        model.zero_grad(set_to_none=True)
        out = fn(x)
        out.square().mean().backward()
        return out.detach().clone(), model[0].weight.grad.detach().clone()

    ref_out, ref_grad = step(model)
    kwargs = {"backend": backend}
    if mode != "default":
        kwargs["mode"] = mode
    compiled = torch.compile(model, **kwargs)
    t0 = time.perf_counter()
    out, grad = step(compiled)
    if device == "cuda":
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    runs = 5
    for _ in range(runs):
        step(compiled)
    if device == "cuda":
        torch.cuda.synchronize()
    run_ms = (time.perf_counter() - t0) / runs * 1e3
    err = max(float((out - ref_out).abs().max()), float((grad - ref_grad).abs().max()))
    ok = bool(torch.allclose(out, ref_out, rtol=1e-3, atol=1e-4) and torch.allclose(grad, ref_grad, rtol=1e-3, atol=1e-4))
    return {"state": "pass" if ok else "fail", "compile_s": round(compile_s, 2), "run_ms": round(run_ms, 3),
            "max_abs_err": err, "error": None if ok else "compiled forward/backward differ from eager"}


def compile_matrix(torch, device: str, timeout: float = CELL_TIMEOUT_S) -> dict:
    if not hasattr(torch, "compile"):
        return {"state": "skipped", "reason": "this torch has no torch.compile", "device": device, "cells": []}
    cells = []
    # inductor's CPU code is C++ that it compiles at run time with $CXX or g++ (torch._inductor.config.cpp.cxx)
    cxx = os.environ.get("CXX") or "g++"
    for backend, mode in COMPILE_CELLS:
        if backend == "inductor" and device == "cpu" and shutil.which(cxx) is None:
            cells.append({"backend": backend, "mode": mode, "state": "skipped", "compile_s": None, "run_ms": None,
                          "seconds": 0.0, "error": f"no C++ compiler ({cxx}) in this image: inductor compiles "
                                                   "C++ at run time on CPU"})
            continue
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "compile-cell", backend, mode, device],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            cells.append({"backend": backend, "mode": mode, "state": "timeout", "compile_s": None, "run_ms": None,
                          "seconds": round(time.perf_counter() - t0, 1), "error": f"no result within {timeout:.0f} s"})
            continue
        result = _last_json(proc.stdout)
        if result is None:
            result = {"state": "error", "compile_s": None, "run_ms": None,
                      "error": _first_line(proc.stderr) or f"exit {proc.returncode} without a result"}
        cells.append({"backend": backend, "mode": mode, **result, "seconds": round(time.perf_counter() - t0, 1)})
    passed = sum(c["state"] == "pass" for c in cells)
    return {"state": "ok", "reason": None, "device": device, "passed": passed, "cells": cells}


# --------------------------------------------------------------------------- DDP training step


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_rank() -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    try:
        torch.manual_seed(1234 + rank)  # rank 1 starts from other weights: DDP must broadcast rank 0's
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        ddp = DistributedDataParallel(model)
        gen = torch.Generator().manual_seed(7)
        x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
        # Reference: the same step without DDP on rank 0's initial weights (as broadcast).
        reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
        reference.load_state_dict(model.state_dict())
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        ref_grads = torch.cat([p.grad.flatten() for p in reference.parameters()])
        torch.optim.SGD(model.parameters(), lr=0.1).step()
        params = torch.cat([p.detach().flatten() for p in model.parameters()])
        gathered = {name: [torch.zeros_like(t) for _ in range(dist.get_world_size())]
                    for name, t in (("loss", loss.detach().reshape(1)), ("grads", grads), ("params", params))}
        for name, t in (("loss", loss.detach().reshape(1)), ("grads", grads), ("params", params)):
            dist.all_gather(gathered[name], t)
        return {"rank": rank, "loss": float(loss),
                "losses_equal": all(torch.equal(t, gathered["loss"][0]) for t in gathered["loss"]),
                "grads_equal_across_ranks": all(torch.allclose(t, gathered["grads"][0], atol=1e-6) for t in gathered["grads"]),
                "grads_match_reference": bool(torch.allclose(grads, ref_grads, rtol=1e-5, atol=1e-6)),
                "params_equal_after_step": all(torch.equal(t, gathered["params"][0]) for t in gathered["params"])}
    finally:
        dist.destroy_process_group()


def ddp_step(torch, world_size: int = 2, timeout: float = DDP_TIMEOUT_S) -> dict:
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_gloo_available()):
            return {"state": "skipped", "reason": "torch.distributed with gloo is not available in this build"}
    except Exception as e:  # noqa: BLE001
        return {"state": "skipped", "reason": f"torch.distributed: {e}"[:300]}
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "WORLD_SIZE": str(world_size), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "ddp-rank"], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world_size)]
    ranks, errors = [], []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return {"state": "error", "reason": f"DDP step did not finish within {timeout:.0f} s", "ranks": ranks}
        result = _last_json(out)
        if p.returncode != 0 or result is None:
            errors.append(_first_line(err) or f"exit {p.returncode}")
        else:
            ranks.append(result)
    if errors:
        return {"state": "error", "reason": errors[0], "ranks": ranks}
    keys = ("losses_equal", "grads_equal_across_ranks", "grads_match_reference", "params_equal_after_step")
    bad = [k for k in keys if not all(r[k] for r in ranks)]
    return {"state": "failed" if bad else "ok", "reason": ", ".join(bad) or None, "backend": "gloo",
            "world_size": world_size, "seconds": round(time.perf_counter() - t0, 2), "ranks": ranks}


# --------------------------------------------------------------------------- debug information


def _sections(path: str) -> list[str]:
    try:
        out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return re.findall(r"\]\s+(\.\S+)", out)


def _exported_functions(path: str, kinds: str) -> list[list[str]]:
    """[address, kind, name] of the dynamic symbols of `path` whose nm kind is in `kinds`."""
    try:
        nm = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [parts for parts in map(str.split, nm.splitlines()) if len(parts) == 3 and parts[1] in kinds]


def _resolve_one_symbol(path: str) -> dict | None:
    """An exported function of `path` resolved to source:line with addr2line, or None."""
    functions = _exported_functions(path, "TtWw")
    # C++ functions first (a library's API); an extension module built with hidden visibility exports
    # only its PyInit_ function (and weak template instances), which must do then.
    functions.sort(key=lambda parts: (not parts[2].startswith("_ZN"), parts[1] not in "Tt"))
    for parts in functions[:20]:
        try:
            res = subprocess.run(["addr2line", "-f", "-C", "-e", path, f"0x{parts[0]}"],
                                 capture_output=True, text=True, timeout=60).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired):
            return None
        if len(res) >= 2 and not res[1].startswith("??"):
            return {"symbol": res[0][:200], "location": res[1][:300]}
    return None


def _resolve_aten_function(path: str, limit: int = 32) -> dict | None:
    """An ATen operator implementation (at::native::...) exported by `path`, resolved to its
    aten/src/ATen file and line: what a crash inside ATen shows in a backtrace. Candidates are taken in
    name order (deterministic) and resolved in one addr2line run (the line tables are read once)."""
    # _ZN2at6native...: a function in namespace at::native (mangled), defined in the text section
    picked = sorted({(name, addr) for addr, _, name in _exported_functions(path, "Tt")
                     if name.startswith("_ZN2at6native")})[:limit]
    if not picked:
        return None
    try:
        res = subprocess.run(["addr2line", "-f", "-C", "-e", path, *(f"0x{addr}" for _, addr in picked)],
                             capture_output=True, text=True, timeout=ATEN_RESOLVE_TIMEOUT_S).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return None
    for function, location in zip(res[0::2], res[1::2]):
        if ATEN_SOURCE in location:
            return {"symbol": function[:200], "location": location[:300]}
    return None


def debug_info(module_dir: str, build_type: str | None) -> dict:
    libs = sorted(glob.glob(os.path.join(module_dir, "lib", "*.so*")) + glob.glob(os.path.join(module_dir, "_C*.so")))
    if not libs:
        return {"state": "skipped", "reason": f"no shared libraries under {module_dir}", "libraries": []}
    if not (shutil.which("readelf") and shutil.which("addr2line") and shutil.which("nm")):
        return {"state": "skipped", "reason": "binutils (readelf, nm, addr2line) not in the image", "libraries": []}
    rows = []
    for lib in libs[:12]:
        secs = _sections(lib)
        rows.append({"library": os.path.relpath(lib, module_dir), "debug_info": ".debug_info" in secs,
                     "debug_line": ".debug_line" in secs, "bytes": os.path.getsize(lib)})
    with_debug = [r for r in rows if r["debug_info"] and r["debug_line"]]
    resolved = None
    for r in sorted(with_debug, key=lambda r: r["bytes"]):  # the smallest library resolves fastest
        resolved = _resolve_one_symbol(os.path.join(module_dir, r["library"]))
        if resolved:
            resolved["library"] = r["library"]
            break
    aten = None
    aten_lib = next((r for r in with_debug if os.path.basename(r["library"]).startswith("libtorch_cpu.")), None)
    if aten_lib:
        aten = _resolve_aten_function(os.path.join(module_dir, aten_lib["library"]))
        if aten:
            aten["library"] = aten_lib["library"]
    want = build_type in ("Debug", "RelWithDebInfo")
    ok = bool(with_debug) and resolved is not None
    if not want:
        state, reason = "ok", None  # informational for Release
    elif ok:
        state, reason = "ok", None
    else:
        state = "failed"
        reason = ("no library has .debug_info and .debug_line" if not with_debug
                  else "no exported function resolves to a source line")
    return {"state": state, "reason": reason, "build_type": build_type, "libraries": rows, "resolved": resolved,
            "aten": aten}


# --------------------------------------------------------------------------- entry points


def run_all(torch, *, device: str, build_type: str | None, compile_timeout: float = CELL_TIMEOUT_S) -> dict:
    module_dir = os.path.dirname(torch.__file__)
    return {"numerics": numerics(torch), "compile": compile_matrix(torch, device, compile_timeout),
            "ddp": ddp_step(torch), "debug_info": debug_info(module_dir, build_type)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["compile-cell"] and len(argv) == 4:
        try:
            result = _cell(*argv[1:])
        except Exception as e:  # noqa: BLE001 - the failure is the cell's result
            result = {"state": "error", "compile_s": None, "run_ms": None,
                      "error": f"{e.__class__.__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]}
        print(json.dumps(result), flush=True)
        return 0
    if argv[:1] == ["ddp-rank"]:
        print(json.dumps(_ddp_rank()), flush=True)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as _tmp:  # inductor's caches stay inside this run
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _tmp)
        sys.exit(main(sys.argv[1:]))
