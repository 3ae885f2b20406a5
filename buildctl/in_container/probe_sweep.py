#!/usr/bin/env python3
"""The probe's all-reduce sweep, after nccl-tests' definitions (all_reduce_perf): algbw = bytes / 1e9 / s,
busbw = algbw * 2(n-1)/n (0 for n = 1); warm-up first (the NCCL communicator is created lazily), then
`iters` back-to-back timed calls per size, then an untimed correctness pass on a refilled buffer.

STANDALONE, like probe.py (standard library and torch); shipped next to probe.py, which imports it.
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import re
import socket
import tempfile
import time

MiB = 1 << 20
DEFAULT_SIZES = "8:256M"
DEFAULT_CPU_MAX = 16 * MiB  # gloo on a couple of CPU cores: 256 MiB x iters would take minutes
DTYPE_BYTES = 4  # float32, as nccl-tests' default


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


class _Rank:
    """This process' rank of the sweep: its device chosen, its process group joined, and the waits and timed
    blocks of the sweep on it."""

    def __init__(self, torch, dist, rank: int, cfg: dict) -> None:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(cfg["port"]), RANK=str(rank),
                          WORLD_SIZE=str(cfg["world_size"]), LOCAL_RANK=str(rank))
        self.torch, self.dist, self.rank, self.n = torch, dist, rank, cfg["world_size"]
        self.devmod = None
        device = cfg["device"]
        if device == "cuda":
            torch.cuda.set_device(rank)
            self.devmod = torch.cuda
        elif device == "npu":
            import torch_npu  # noqa: F401

            torch.npu.set_device(rank)
            self.devmod = torch.npu
        else:
            torch.set_num_threads(1)  # n processes on few cores: do not oversubscribe
        self.dev = torch.device(device, rank) if device != "cpu" else torch.device("cpu")
        dist.init_process_group(cfg["backend"], rank=rank, world_size=self.n,
                                timeout=datetime.timedelta(seconds=cfg["timeout"]))
        self.flag = torch.zeros(1, dtype=torch.float32, device=self.dev)

    def sync(self) -> None:
        if self.devmod is not None:
            self.devmod.synchronize()

    def barrier(self) -> None:
        # A 1-element all-reduce: NCCL's barrier() guesses devices and warns.
        self.dist.all_reduce(self.flag)
        self.sync()

    def timing_events(self):
        """(start, end) events timing on the device, or None where there are none (the host's clock times)."""
        if self.devmod is None or not hasattr(self.devmod, "Event"):
            return None
        # Created and recorded once up front: a CUDA event is created lazily at its first record, and
        # the first creation in a process is slow enough to inflate whichever size is timed first.
        events = (self.devmod.Event(enable_timing=True), self.devmod.Event(enable_timing=True))
        for ev in events:
            ev.record()
        self.sync()
        return events

    def warm_up(self, buf, smallest: int, warmup: int) -> None:
        # Warm-up, untimed: creates the communicator (lazily, at the first collective) and, on a GPU,
        # keeps it busy long enough to leave its idle clocks before the first (smallest) size is timed
        # (on CPU: lets both ranks settle into the loop).
        for _ in range(max(warmup, 1000 if self.devmod is not None else 100)):
            self.dist.all_reduce(buf[: smallest // DTYPE_BYTES])
        for _ in range(warmup):
            self.dist.all_reduce(buf)
        self.sync()

    def timed(self, t, iters: int, events) -> tuple[float, float]:
        """(time_us, host_us): one call's share of `iters` back-to-back all-reduces of `t`, on the device's
        events where there are (else the host's clock) and on the host's."""
        gc.disable()  # no collector pauses inside a timed block (as timeit does)
        if events is not None:
            start, end = events
            h0 = time.perf_counter()
            start.record()
            for _ in range(iters):
                self.dist.all_reduce(t)
            end.record()
            end.synchronize()
            host_us = (time.perf_counter() - h0) * 1e6 / iters
            time_us = start.elapsed_time(end) * 1e3 / iters
        else:
            h0 = time.perf_counter()
            for _ in range(iters):
                self.dist.all_reduce(t)
            self.sync()
            host_us = (time.perf_counter() - h0) * 1e6 / iters
            time_us = host_us
        gc.enable()
        return time_us, host_us

    def checked_row(self, t, size: int, time_us: float, host_us: float) -> dict:
        """The size's row of the table: the times averaged over the ranks (and the slowest), and its
        correctness, untimed: refill (earlier calls accumulated), reduce once, compare exactly."""
        n = self.n
        t.fill_(float(self.rank + 1))
        self.dist.all_reduce(t)
        self.sync()
        wrong = int((t != float(n * (n + 1) // 2)).sum().item())
        stats = self.torch.tensor([time_us, host_us, float(wrong)], dtype=self.torch.float64, device=self.dev)
        tmax = stats.clone()
        self.dist.all_reduce(stats)
        self.dist.all_reduce(tmax, op=self.dist.ReduceOp.MAX)
        self.sync()
        mean_us, mean_host = stats[0].item() / n, stats[1].item() / n
        alg = algbw_gbs(size, mean_us)
        return {"size": size, "count": size // DTYPE_BYTES, "time_us": round(mean_us, 3),
                "time_us_max": round(tmax[0].item(), 3), "host_us": round(mean_host, 3),
                "algbw_gbs": alg, "busbw_gbs": busbw_gbs(alg, n),
                "wrong": int(stats[2].item())}


def _sweep_worker(rank: int, cfg: dict) -> None:
    """One rank of the sweep (top level so that spawn can import it)."""
    import torch
    import torch.distributed as dist

    me = _Rank(torch, dist, rank, cfg)
    sizes, iters, warmup = cfg["sizes"], cfg["iters"], cfg["warmup"]
    buf = torch.zeros(max(sizes) // DTYPE_BYTES, dtype=torch.float32, device=me.dev)
    events = me.timing_events()
    me.warm_up(buf, sizes[0], warmup)
    rows = []
    # One discarded pass of the smallest size: on an H200 the first timed block came out 2-3x slow
    # (host-side, once per process) even after the warm-up above.
    for i, size in enumerate([sizes[0], *sizes]):
        t = buf[: size // DTYPE_BYTES]
        t.zero_()  # in-place all-reduce accumulates; zeros stay finite
        for _ in range(max(warmup, 1)):  # per size: protocol/algorithm of this size warmed up
            dist.all_reduce(t)
        me.barrier()
        time_us, host_us = me.timed(t, iters, events)
        if i > 0:  # the pilot pass is discarded
            rows.append(me.checked_row(t, size, time_us, host_us))
    graph = {"state": "n/a", "reason": "CUDA graphs need a GPU", "latency_us": None, "ops": None}
    if cfg["device"] == "cuda" and me.n == 1:
        graph["reason"] = "1 rank: an in-place all-reduce launches no kernel, the graph would be empty"
    elif cfg["device"] == "cuda":
        graph = _graph_latency(torch, dist, buf[: sizes[0] // DTYPE_BYTES], iters, me.barrier)
    if rank == 0:
        with open(cfg["result_path"], "w") as f:
            json.dump({"rows": rows, "graph": graph}, f)
    try:
        me.barrier()
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
