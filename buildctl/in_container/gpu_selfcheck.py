#!/usr/bin/env python3
"""GPU self-check of the verification sweep: probe.py's figures next to an independent minimal loop.

Run with a Python that has a CUDA torch (standard library + torch only; pynvml used when present):

    python buildctl/in_container/gpu_selfcheck.py [--sizes 8:256M] [--iters 20] [--out selfcheck.json]

It (1) runs probe.py (the file beside this one) with --sweep, exactly as `invoke verify` does, and
(2) runs a hand-written torch.distributed all_reduce loop that shares no code with probe.py: one
process per visible GPU, backend nccl, 8 B and 256 MiB, 5 warm-ups, then `iters` calls timed on the
host (perf_counter around the calls plus torch.cuda.synchronize), busbw = algbw * 2(n-1)/n.
Both are printed as one JSON document; `comparison` gives probe/independent time ratios per size.
The probe times with CUDA events, the loop on the host, so a ratio a little below 1 is expected at
8 B (host launch overhead is in the independent figure only); far from 1 means one of them is wrong.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = (8, 256 << 20)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, iters: int, out_path: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    results = []
    for size in SIZES:
        x = torch.zeros(size // 4, dtype=torch.float32, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.all_reduce(torch.zeros(1, device="cuda"))  # barrier
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) * 1e6 / iters
        x.fill_(1.0)
        dist.all_reduce(x)
        torch.cuda.synchronize()
        wrong = int((x != float(world)).sum().item())
        t = torch.tensor([us], dtype=torch.float64, device="cuda")
        dist.all_reduce(t)
        us = t.item() / world
        algbw = size / 1e9 / (us / 1e6)
        busbw = algbw * 2 * (world - 1) / world if world > 1 else 0.0
        results.append({"size": size, "time_us": us, "algbw_gbs": algbw, "busbw_gbs": busbw,
                        "wrong": wrong})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def independent(iters: int) -> dict:
    import torch
    import torch.multiprocessing as mp

    world = torch.cuda.device_count()
    if world == 0:
        return {"state": "error", "reason": "torch sees no GPU"}
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        mp.spawn(_worker, args=(world, _free_port(), iters, path), nprocs=world, join=True)
        with open(path) as f:
            rows = json.load(f)
    except Exception as e:  # noqa: BLE001
        return {"state": "error", "reason": f"{e.__class__.__name__}: {e}"[-1500:]}
    finally:
        os.unlink(path)
    return {"state": "ok", "backend": "nccl", "world_size": world, "iters": iters, "timer": "host",
            "rows": rows, "seconds": round(time.perf_counter() - t0, 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description="probe.py sweep vs an independent all_reduce loop")
    ap.add_argument("--sizes", default="8:256M")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--probe-out", help="keep probe.py's full JSON here")
    args = ap.parse_args()

    fd, probe_out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.join(HERE, "probe.py"), "--module", "torch", "--sweep",
                           "--sizes", args.sizes, "--iters", str(args.iters), "--out", probe_out])
    with open(probe_out) as f:
        probe = json.load(f)
    if args.probe_out:
        os.replace(probe_out, args.probe_out)
    else:
        os.unlink(probe_out)
    probe_seconds = round(time.perf_counter() - t0, 2)

    ind = independent(args.iters)
    sweep = probe.get("sweep") or {}
    by_size = {r["size"]: r for r in sweep.get("rows") or []}
    comparison = []
    for r in ind.get("rows") or []:
        p = by_size.get(r["size"])
        comparison.append({
            "size": r["size"],
            "probe_time_us": p and p["time_us"], "probe_host_us": p and p["host_us"],
            "independent_time_us": r["time_us"],
            "ratio_probe_events_over_independent": p and round(p["time_us"] / r["time_us"], 3),
            "ratio_probe_host_over_independent": p and round(p["host_us"] / r["time_us"], 3),
            "probe_busbw_gbs": p and p["busbw_gbs"], "independent_busbw_gbs": r["busbw_gbs"],
            "wrong": {"probe": p and p["wrong"], "independent": r["wrong"]},
        })
    doc = {
        "probe_exit": proc.returncode,
        "probe_seconds": probe_seconds,
        "gpus": probe.get("gpus"),
        "framework": probe.get("framework"),
        "runtime": probe.get("runtime"),
        "distributed": probe.get("distributed"),
        "build_settings": (probe.get("config") or {}).get("build_settings"),
        "arch_coverage": {k: v for k, v in (probe.get("arch_coverage") or {}).items() if k != "libraries"},
        "arch_coverage_libraries": [{"path": x["path"], "sass": sorted(x["sass"]), "ptx": sorted(x["ptx"]),
                                     "error": x["error"]}
                                    for x in (probe.get("arch_coverage") or {}).get("libraries", [])],
        "probe_errors": probe.get("errors"),
        "probe_sweep": {k: v for k, v in sweep.items()},
        "independent": ind,
        "comparison": comparison,
    }
    text = json.dumps(doc, indent=1, default=str)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    ok = (proc.returncode == 0 and sweep.get("state") == "ok" and ind.get("state") == "ok"
          and all(r["wrong"] == 0 for r in ind["rows"]) and (sweep.get("headline") or {}).get("wrong") == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
