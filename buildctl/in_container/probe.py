#!/usr/bin/env python3
"""Probe a built framework wheel from inside the environment it was installed into.

STANDALONE: standard library plus the framework under test (and pynvml when importable). buildctl
copies this file and the modules it imports from its own folder (probe_facts.py, probe_arch.py,
probe_sweep.py, checks.py) next to a fresh install of the wheel and runs it with that install's Python:

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
import importlib
import json
import os
import platform
import sys
import time
import traceback


def _sibling(name: str):
    """A module beside this file: relative when imported as buildctl.verify.probe, top-level when run as a
    script (the modules are copied together, buildctl.verify.PROBE_FILES)."""
    return importlib.import_module(f".{name}", __package__) if __package__ else importlib.import_module(name)


probe_arch = _sibling("probe_arch")
probe_facts = _sibling("probe_facts")
probe_sweep = _sibling("probe_sweep")

PROBE_VERSION = 1


def log(msg: str) -> None:
    print(f"[probe] {msg}", file=sys.stderr, flush=True)


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
    inv = probe_facts.gpu_inventory()
    report["gpus"] = inv
    if inv["state"] == "ok":
        log(f"  driver {inv['driver_version']} (CUDA {inv['cuda_driver_version']}), "
            f"{len(inv['devices'])} GPU(s): " + ", ".join(f"{d['name']} sm_{(d['compute_capability'] or '?').replace('.', '')}"
                                                      for d in inv["devices"]))
    else:
        log(f"  {inv['state']}: {inv['reason']}")
    log(f"importing {args.module}")
    mod, imp = probe_facts.import_framework(args.module)
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
    report["config"] = {"text": text, "build_settings": probe_facts.parse_build_settings(text)}
    facts = probe_facts.framework_facts(mod, errors)
    report["distributed"] = probe_facts.distributed_facts(mod)
    report["cpu"] = probe_facts.cpu_facts(mod, report["config"]["build_settings"])
    log(f"  CPU capability {report['cpu']['capability']}, BLAS {report['cpu']['blas']}, "
        f"loaded {', '.join(os.path.basename(p) for p in report['cpu']['libraries']) or 'none'}")
    if report["distributed"]["available"]:
        report["distributed"]["tcpstore"] = probe_facts.tcpstore_facts(mod)
        if report["distributed"]["tcpstore"]["state"] != "ok":
            log(f"  TCPStore: {report['distributed']['tcpstore']['reason']}")
    log(f"  {args.module} {facts.get('version')}, cuda {facts.get('cuda')}, hip {facts.get('hip')}, "
        f"nccl {facts.get('nccl')}, cudnn {facts.get('cudnn')}, debug {facts.get('debug')}")
    # Everything above is CUDA-free; what follows may initialise the CUDA runtime.
    report["runtime"] = probe_facts.runtime_facts(mod)
    if facts.get("hip"):
        report["amd_gpus"] = probe_facts.amd_gpu_inventory(report["runtime"])
    facts["arch_list"] = probe_facts.arch_list(mod, facts, errors)
    report["framework"] = facts
    if args.arch_coverage:
        log("arch coverage (device code per target)")
        report["arch_coverage"] = probe_arch.arch_coverage(mod, facts)
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
        sizes, factor = probe_sweep.parse_sizes(args.sizes)
        plan = probe_sweep.plan_sweep(mod, report["runtime"], report["distributed"], facts)
        log(f"all-reduce sweep: {plan['label']}")
        report["sweep"] = probe_sweep.run_sweep(mod, plan, sizes, factor, args.iters, args.warmup,
                                    args.cpu_max_size, args.timeout)
        sw = report["sweep"]
        if sw["state"] == "ok":
            h = sw["headline"]
            size = probe_sweep.human_size
            peak = (f"peak busbw {h['peak_busbw_gbs']:.3f} GB/s at {size(h['peak_busbw_size'])}"
                    if h["peak_busbw_gbs"] is not None else "busbw n/a (1 rank)")
            log(f"  {size(h['latency_size'])}: {h['latency_us']:.1f} us, {peak}, wrong {h['wrong']}")
        else:
            log(f"  sweep {sw['state']}: {sw['reason']}")
    return report


def framework_checks(mod, args, report: dict) -> dict:
    """checks.py (next to this file): numerics, torch.compile matrix, DDP step and debug-only assertions
    for torch; the debug information of the libraries for any framework."""
    try:
        import checks
    except ImportError as e:
        return {"state": "skipped", "reason": f"checks.py not found next to the probe ({e})"}
    build_type = ((report.get("config") or {}).get("build_settings") or {}).get("BUILD_TYPE") or (
        "Debug" if (report.get("framework") or {}).get("debug") else None)
    out: dict = {"debug_info": probe_arch.debug_info(os.path.dirname(mod.__file__), build_type)}
    if args.module != "torch" or not args.checks:
        why = "--no-checks" if not args.checks else f"{args.module} is not torch"
        for name in ("numerics", "compile", "ddp", "debug_assert"):
            out[name] = {"state": "skipped", "reason": why}
        return out
    device = "cuda" if (report.get("runtime") or {}).get("device_count") else "cpu"
    log("numerics against NumPy")
    out["numerics"] = checks.numerics(mod)
    log(f"  {out['numerics']['state']}")
    log(f"torch.compile matrix on {device} ({args.compile_matrix}: backend x mode x fullgraph x dynamic, one "
        "process per cell)")
    out["compile"] = checks.compile_matrix(mod, device, args.compile_timeout, args.compile_matrix)
    for c in out["compile"].get("cells", []):
        axes = f"{c['backend']}/{c['mode']}{' fullgraph' if c.get('fullgraph') else ''}{' dynamic' if c.get('dynamic') else ''}"
        second = {True: ", 2nd shape recompiled", False: ", 2nd shape reused"}.get(c.get("recompiled"), "")
        why = c.get("error") or c.get("reason")
        log(f"  {axes}: {c['state']} ({c.get('seconds')} s{second}){' ' + why if why else ''}")
    log("DDP training step, 2 ranks over gloo")
    out["ddp"] = checks.ddp_step(mod)
    log(f"  {out['ddp']['state']}{': ' + out['ddp']['reason'] if out['ddp'].get('reason') else ''}")
    for fault in out["ddp"].get("teardown") or []:
        log(f"  {fault}")
    log("debug-only assertions: a CPU kernel of aten::neg that returns its input")
    out["debug_assert"] = probe_facts.debug_assert(mod)
    da = out["debug_assert"]
    log(f"  {'fired: ' + da.get('message', '') if da.get('fired') else 'did not fire' if da['state'] == 'ok' else da['state'] + ': ' + str(da.get('reason'))}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", required=True, help="framework module to probe: torch or demofw")
    ap.add_argument("--out", required=True, help="where to write the JSON")
    ap.add_argument("--sweep", action="store_true", help="run the all-reduce sweep")
    ap.add_argument("--sizes", default=probe_sweep.DEFAULT_SIZES, help="MIN:MAX[:FACTOR] or a comma list (8:256M)")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per size")
    ap.add_argument("--warmup", type=int, default=5, help="untimed warm-up iterations per size")
    ap.add_argument("--cpu-max-size", type=probe_sweep.parse_size, default=probe_sweep.DEFAULT_CPU_MAX,
                    help="largest size for the CPU (gloo) sweep (16M)")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds for the whole sweep")
    ap.add_argument("--no-arch-coverage", dest="arch_coverage", action="store_false")
    ap.add_argument("--no-checks", dest="checks", action="store_false",
                    help="skip numerics, the torch.compile matrix and the DDP step (checks.py)")
    ap.add_argument("--compile-timeout", type=float, default=600, help="seconds per torch.compile cell")
    ap.add_argument("--compile-matrix", choices=("smoke", "full", "none"), default="smoke",
                    help="torch.compile cells: a smoke set over the four axes, their whole cross, or none")
    args = ap.parse_args(argv)
    try:
        probe_sweep.parse_sizes(args.sizes)
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
