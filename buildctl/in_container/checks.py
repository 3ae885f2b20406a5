#!/usr/bin/env python3
"""Framework checks the probe runs on a built torch: what a user trusts a wheel for.

STANDALONE, like probe.py (standard library, torch, and NumPy when installed); it sits next to
probe.py wherever that runs, and probe.py imports it. Each check returns a plain dict with a
`state` of ok | failed | error | skipped and never raises:

* numerics: a float32 matmul and a 2-D convolution against NumPy (BLAS and conv kernels of this build);
* compile_matrix: torch.compile over the four axes users switch (backend, mode, fullgraph, dynamic), a
  smoke set by default and the whole cross on request, each cell in its own process with a timeout:
  compile time, steady-state time, whether a second input shape recompiled, and whether the compiled
  forward and backward agree with eager on both shapes. A cell that cannot mean anything on this device
  (reduce-overhead, max-autotune or the cudagraphs backend on a CPU: no CUDA graphs) is skipped with the
  reason, never passed. Inductor needs a C++ compiler (CPU) or Triton (GPU) at run time: a from-source
  build is where that toolchain breaks, so every cell is shown;
* ddp_step: two processes, DistributedDataParallel over gloo (rank 1 starts from other weights, so
  equal losses prove DDP's initial broadcast), one training step: the same loss on both ranks,
  gradients equal across ranks and to a single-process reference after the all-reduce;
* debug_info: for Debug/RelWithDebInfo builds, DWARF sections in the framework's libraries, one
  exported function and (torch) an at::native function resolved to file:line (addr2line, binutils).

    python checks.py compile-cell BACKEND MODE FULLGRAPH DYNAMIC DEVICE   # one cell (0/1), prints JSON (internal)
    python checks.py ddp-rank                           # one DDP rank, env RANK/WORLD_SIZE/... (internal)
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def _sibling(name: str):
    """A module beside this file (as probe.py imports its own): relative in the package, top-level where
    the probe's files sit together."""
    import importlib

    return importlib.import_module(f".{name}", __package__) if __package__ else importlib.import_module(name)


probe_arch = _sibling("probe_arch")  # debug_info lives with the other reads of the libraries' binaries


CELL_TIMEOUT_S = 600.0
DDP_TIMEOUT_S = 300.0


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

# A cell: (backend, mode, fullgraph, dynamic). The smoke set (the default) covers the four axes users switch,
# each where it fails differently: eager with fullgraph (graph breaks), aot_eager dynamic with backward,
# inductor as it comes, inductor fullgraph + dynamic, inductor on two shapes (recompilation); on a GPU also
# reduce-overhead, max-autotune-no-cudagraphs and the cudagraphs backend (CUDA graphs). `--compile-matrix
# full` runs the whole cross.
SMOKE_CELLS = (
    ("eager", "default", True, False),
    ("aot_eager", "default", False, True),
    ("inductor", "default", False, False),
    ("inductor", "default", True, True),
    ("inductor", "reduce-overhead", False, False),
    ("inductor", "max-autotune-no-cudagraphs", False, False),
    ("cudagraphs", "default", False, False),
)
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
FULL_CELLS = tuple((backend, mode, fullgraph, dynamic)
                   for backend, modes in (("eager", ("default",)), ("aot_eager", ("default",)),
                                          ("inductor", INDUCTOR_MODES), ("cudagraphs", ("default",)))
                   for mode in modes for fullgraph in (False, True) for dynamic in (False, True))
# Cells smoke runs on a GPU only: on a CPU they test nothing (below), and max-autotune-no-cudagraphs on CPU
# is an hour of autotuning for the smoke set's purpose.
GPU_ONLY_SMOKE = {("inductor", "max-autotune-no-cudagraphs", False, False)}
FIRST_BATCH, SECOND_BATCH = 4, 6  # the second shape: does the compiled model recompile for it?


def cells_for(matrix: str) -> tuple[tuple[str, str, bool, bool], ...]:
    return FULL_CELLS if matrix == "full" else SMOKE_CELLS


def meaningless_on(device: str, backend: str, mode: str) -> str | None:
    """Why a cell cannot mean anything on this device (reported skipped, never passed), or None."""
    if device == "cpu" and (backend == "cudagraphs" or mode == "reduce-overhead"):
        return ("skipping cudagraphs due to cpu device: CUDA graphs need a GPU, on a CPU this cell runs inductor "
                "without them and would pass without testing what it names")
    return None


def _cell(backend: str, mode: str, fullgraph: bool, dynamic: bool, device: str) -> dict:
    """One matrix cell, in this (child) process: compile on a first shape (the compile time), steady
    steps there (the step time), then a second shape (whether it recompiled); forward and backward against
    eager on both."""
    import torch
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 14 * 14, 10),
    ).to(device)
    shapes = [torch.randn(n, 3, 16, 16, device=device) for n in (FIRST_BATCH, SECOND_BATCH)]

    def step(fn, x):
        model.zero_grad(set_to_none=True)
        out = fn(x)
        out.square().mean().backward()
        return out.detach().clone(), model[0].weight.grad.detach().clone()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    refs = [step(model, x) for x in shapes]
    kwargs = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic}
    if mode != "default":
        kwargs["mode"] = mode
    compiled = torch.compile(model, **kwargs)
    t0 = time.perf_counter()
    got = [step(compiled, shapes[0])]
    sync()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    runs = 5
    for _ in range(runs):
        step(compiled, shapes[0])
    sync()
    run_ms = (time.perf_counter() - t0) / runs * 1e3
    graphs = counters["stats"]["unique_graphs"]
    t0 = time.perf_counter()
    got.append(step(compiled, shapes[1]))
    sync()
    second_s = time.perf_counter() - t0
    recompiled = counters["stats"]["unique_graphs"] > graphs
    pairs = [(g, r) for mine, ref in zip(got, refs, strict=True) for g, r in zip(mine, ref, strict=True)]
    err = max(float((g - r).abs().max()) for g, r in pairs)
    ok = all(torch.allclose(g, r, rtol=1e-3, atol=1e-4) for g, r in pairs)
    return {"state": "pass" if ok else "fail", "compile_s": round(compile_s, 2), "run_ms": round(run_ms, 3),
            "second_shape_s": round(second_s, 2), "recompiled": recompiled, "max_abs_err": err,
            "error": None if ok else "compiled forward/backward differ from eager"}


def compile_matrix(torch, device: str, timeout: float = CELL_TIMEOUT_S, matrix: str = "smoke") -> dict:
    """The cells of `matrix` (smoke | full | none), each in its own process with a timeout."""
    if matrix == "none":
        return {"state": "skipped", "reason": "--compile-matrix none", "device": device, "cells": []}
    if not hasattr(torch, "compile"):
        return {"state": "skipped", "reason": "this torch has no torch.compile", "device": device, "cells": []}
    cells = []
    # inductor's CPU code is C++ that it compiles at run time with $CXX or g++ (torch._inductor.config.cpp.cxx)
    cxx = os.environ.get("CXX") or "g++"
    for backend, mode, fullgraph, dynamic in cells_for(matrix):
        if matrix != "full" and device == "cpu" and (backend, mode, fullgraph, dynamic) in GPU_ONLY_SMOKE:
            continue
        axes = {"backend": backend, "mode": mode, "fullgraph": fullgraph, "dynamic": dynamic}
        skip = meaningless_on(device, backend, mode)
        if skip is None and backend == "inductor" and device == "cpu" and shutil.which(cxx) is None:
            skip = f"no C++ compiler ({cxx}) in this image: inductor compiles C++ at run time on CPU"
        if skip is not None:
            cells.append({**axes, "state": "skipped", "compile_s": None, "run_ms": None, "seconds": 0.0,
                          "reason": skip, "error": None})
            continue
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "compile-cell", backend, mode,
                                   str(int(fullgraph)), str(int(dynamic)), device],
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            cells.append({**axes, "state": "timeout", "compile_s": None, "run_ms": None,
                          "seconds": round(time.perf_counter() - t0, 1), "error": f"no result within {timeout:.0f} s"})
            continue
        result = _last_json(proc.stdout)
        if result is None:
            result = {"state": "error", "compile_s": None, "run_ms": None,
                      "error": _first_line(proc.stderr) or f"exit {proc.returncode} without a result"}
        cells.append({**axes, **result, "seconds": round(time.perf_counter() - t0, 1)})
    passed = sum(c["state"] == "pass" for c in cells)
    skipped = sum(c["state"] == "skipped" for c in cells)
    return {"state": "ok", "reason": None, "device": device, "matrix": matrix, "passed": passed, "skipped": skipped,
            "cells": cells}


# --------------------------------------------------------------------------- DDP training step


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_rank() -> None:
    """One rank's step; prints its result before the process group is torn down, since gloo's teardown can
    abort the process after the step itself agreed (pytorch/pytorch#190489)."""
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
        result = {"rank": rank, "loss": float(loss),
                "losses_equal": all(torch.equal(t, gathered["loss"][0]) for t in gathered["loss"]),
                "grads_equal_across_ranks": all(torch.allclose(t, gathered["grads"][0], atol=1e-6) for t in gathered["grads"]),
                "grads_match_reference": bool(torch.allclose(grads, ref_grads, rtol=1e-5, atol=1e-6)),
                "params_equal_after_step": all(torch.equal(t, gathered["params"][0]) for t in gathered["params"])}
        print(json.dumps(result), flush=True)
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
    ranks, errors, teardown = [], [], []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return {"state": "error", "reason": f"DDP step did not finish within {timeout:.0f} s", "ranks": ranks}
        result = _last_json(out)
        if result is None:
            errors.append(_first_line(err) or f"exit {p.returncode}")
            continue
        ranks.append(result)
        if p.returncode != 0:  # the step is judged by what the ranks printed; a fault after it is reported
            teardown.append(f"rank {rank} exited {p.returncode} after its result: "
                            f"{_first_line(err) or 'no message'}")
    if errors:
        return {"state": "error", "reason": errors[0], "ranks": ranks}
    keys = ("losses_equal", "grads_equal_across_ranks", "grads_match_reference", "params_equal_after_step")
    bad = [k for k in keys if not all(r[k] for r in ranks)]
    return {"state": "failed" if bad else "ok", "reason": ", ".join(bad) or None, "backend": "gloo",
            "world_size": world_size, "seconds": round(time.perf_counter() - t0, 2), "ranks": ranks,
            "teardown": teardown}


# --------------------------------------------------------------------------- entry points


def run_all(torch, *, device: str, build_type: str | None, compile_timeout: float = CELL_TIMEOUT_S,
            compile_matrix_cells: str = "smoke") -> dict:
    module_dir = os.path.dirname(torch.__file__)
    return {"numerics": numerics(torch),
            "compile": compile_matrix(torch, device, compile_timeout, compile_matrix_cells),
            "ddp": ddp_step(torch), "debug_info": probe_arch.debug_info(module_dir, build_type)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["compile-cell"] and len(argv) == 6:
        backend, mode, fullgraph, dynamic, device = argv[1:]
        try:
            result = _cell(backend, mode, fullgraph == "1", dynamic == "1", device)
        except Exception as e:  # noqa: BLE001 - the failure is the cell's result
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = {"state": "error", "compile_s": None, "run_ms": None, "error": f"{e.__class__.__name__}: {first}"[:300]}
        print(json.dumps(result), flush=True)
        return 0
    if argv[:1] == ["ddp-rank"]:
        _ddp_rank()
        os._exit(0)  # past the interpreter's finalization, where gloo's threads can still abort a finished rank
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as _tmp:  # inductor's caches stay inside this run
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", _tmp)
        sys.exit(main(sys.argv[1:]))
