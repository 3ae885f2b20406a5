#!/usr/bin/env python3
"""Bench: the memory budget against a job count (issue 45). A sample of real PyTorch 2.6 units (ATen's,
spread as bench/dist.py spreads them, with FlashAttention's AVX512 kernel and the longest units of the
measured cold build), compiled in a container with a memory limit (default 3 GiB on 2 cores), three ways:

  old rule    MAX_JOBS from today's rule for the container's memory (parallel_jobs.max_jobs: 1 at 3 GiB for
              a CPU build), the budget out of the way (a 1 TiB BUILDCTL_MEM_BUDGET)
  fixed-K     MAX_JOBS=K for each K from 1 to --max-jobs, the budget out of the way: the best of these
              that had no OOM kill is the best fixed MAX_JOBS a person could have found by trying each
  budget      as many jobs as cores, each unit waiting for its predicted memory; first with nothing
              learned (budget-cold, before any other run: every unit the conservative default), last with
              the peaks every run before it measured (budget): the figure the goals are about

    python bench/memory.py [--recipe pytorch2.6-cpu-trixie] [--sample 60] [--memory 3g] [--cpuset 0-1]
                           [--max-jobs 4] [--out docs/evidence/memory-budget/result.json] [--state DIR]

Goals (printed PASS/FAIL, exit 1 when one is missed): budget_oom_kills == 0, ratio_vs_best_fixed (budget
wall / best fixed wall) <= 1.10, speedup_vs_old_rule (old rule wall / budget wall) >= 1.4. The JSON carries
these, every run's wall time (the span of the sample's steps in ninja's log), OOM kills and retries, and
each unit's peak as the launcher measured it.

Setup (untimed): the recipe configured once per build key (the budget's, and the one with the budget out
of the way) into a namespace of the bench's own, the sample's dependencies (code generation) built. Before
each run the sample's objects are deleted; no compile cache (build.cache=none), so every unit compiles.
Needs hours on a 2-core machine and the machine to itself: run it when the lead says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

CPU_BUILD_LOG = REPO / "docs/evidence/pytorch2.6-cpu-trixie/release-cold-idle-b440caa04e810758.ninja_log"
GOALS = {"budget_oom_kills": 0, "ratio_vs_best_fixed": 1.10, "speedup_vs_old_rule": 1.4}
FLASH_AVX512 = "FlashAttentionKernel.cpp.AVX512.cpp.o"
OFF = "build.env.BUILDCTL_MEM_BUDGET=1099511627776"  # the build script's export wins: every unit admitted
NO_CACHE = "build.cache=none"  # a cache hit would skip the compiler and its memory


# ---------------------------------------------------------------------------------------------- pure parts

def longest_units(log_text: str, n: int) -> list[str]:
    """The n compile steps (.o) that took longest in a ninja log (its last entry per output)."""
    last: dict[str, int] = {}
    for line in log_text.splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3].endswith(".o") and parts[0].isdigit() and parts[1].isdigit():
            last[parts[3]] = int(parts[1]) - int(parts[0])
    return [u for u, _ in sorted(last.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def select_sample(objects: list[str], n: int, longest: list[str]) -> list[str]:
    """ATen's native units spread evenly (bench/dist.py's rule), FlashAttention's AVX512 kernel and the
    longest units that this build has; each once, in the build's order."""
    from dist import spread

    aten = [o for o in objects if "/aten/src/ATen/native/" in o and o.endswith(".cpp.o") and "torch_cpu.dir" in o]
    chosen = set(spread(aten, n))
    chosen |= {o for o in objects if o.endswith(FLASH_AVX512)}
    chosen |= set(longest) & set(objects)
    return [o for o in objects if o in chosen]


def old_rule_jobs(cpus: int, mem_bytes: int, accelerator: str = "cpu", build_type: str = "Release") -> int:
    """Today's rule for a container of `mem_bytes` and `cpus` (docs/compatibility.md "Parallel jobs")."""
    from buildctl.recipe import parallel_jobs

    return parallel_jobs.max_jobs("auto", cpus=cpus, mem_bytes=mem_bytes, accelerator=accelerator,
                                  build_type=build_type)[0]


def parse_memory(text: str) -> int:
    """docker's --memory form (3g, 512m, 1073741824) in bytes."""
    units = {"k": 1024, "m": 1024**2, "g": 1024**3}
    text = text.strip().lower().rstrip("b")
    if text[-1:] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def best_fixed(runs: dict[str, dict]) -> tuple[str, dict] | None:
    """The fastest fixed-K run with no OOM kill (and no retry after one)."""
    clean = [(name, r) for name, r in runs.items() if name.startswith("fixed-") and r["ok"] and not r["oom_kills"]]
    return min(clean, key=lambda kv: kv[1]["wall_s"]) if clean else None


def summarise(runs: dict[str, dict], peaks: dict[str, int]) -> dict:
    """The result: the three figures the goals are about, each run, the units' peaks, and the verdicts."""
    budget, old = runs.get("budget"), runs.get("old-rule")
    best = best_fixed(runs)
    result: dict = {"runs": runs, "peaks_bytes": dict(sorted(peaks.items(), key=lambda kv: -kv[1]))}
    if budget:
        result["budget_oom_kills"] = budget["oom_kills"]
    if budget and best and budget["ok"]:
        result["best_fixed"] = best[0]
        result["ratio_vs_best_fixed"] = round(budget["wall_s"] / best[1]["wall_s"], 3)
    if budget and old and budget["ok"] and old["ok"]:
        result["speedup_vs_old_rule"] = round(old["wall_s"] / budget["wall_s"], 3)
    result["goals"] = {
        "budget_oom_kills": result.get("budget_oom_kills") == GOALS["budget_oom_kills"],
        "ratio_vs_best_fixed": result.get("ratio_vs_best_fixed", 99) <= GOALS["ratio_vs_best_fixed"],
        "speedup_vs_old_rule": result.get("speedup_vs_old_rule", 0) >= GOALS["speedup_vs_old_rule"],
    }
    return result


def run_record(units: list[dict], log_text: str, span_s: float, ok: bool) -> dict:
    """One run's figures from the launcher's lines and the build's log."""
    killed = sum(1 for u in units if u.get("killed"))
    retried = "retrying once" in log_text
    return {"ok": ok, "wall_s": round(span_s, 1), "oom_kills": max(killed, 1 if retried else 0),
            "retried": retried, "units": len(units),
            "waited_s": round(sum(float(u.get("wait_s", 0)) for u in units), 1)}


# ---------------------------------------------------------------------------------------------- the runs

def timed(bench, label: str, targets: list[str], extra: tuple[str, ...]) -> tuple[dict, list[dict]]:
    """One compile of the sample (its objects deleted first); never exits on a failed build (an OOM kill
    that the retry did not survive is a result)."""
    from build import invoke_cmd
    from dist import ninja_span

    from buildctl.pipeline import memory_budget

    bench.reset(targets, cache=False)
    # one artifacts root for every run: the host's store of peaks (artifacts/.memory-peaks.json) learns from all
    env = {**os.environ, "BUILDCTL_NAMESPACE": bench.namespace, "BUILDCTL_ARTIFACTS": str(bench.work.parent / "artifacts")}
    cmd = [*invoke_cmd(), "build", "--recipe", bench.args.recipe, "--network", bench.args.network, "--ca-cert",
           bench.args.ca_cert, "--no-verify", "--json", *[a for x in bench.sets for a in ("--set", x)],
           "--until", "compile", "--memory", bench.args.memory, "--cpuset", bench.args.cpuset, *extra,
           *[a for t in targets for a in ("--target", t)]]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=bench.work, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    (bench.work / f"{label}.log").write_text(proc.stderr)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    out = Path(payload.get("out_dir") or bench.work / "none")
    units = memory_budget.read_units(out) if out.is_dir() else []
    span, _ = ninja_span(out / "ninja_log.txt", set(targets)) if (out / "ninja_log.txt").is_file() else (wall, 0)
    record = run_record(units, proc.stderr, span or wall, proc.returncode == 0)
    print(f"{label:12} {record['wall_s']:9.1f} s  ok {record['ok']}  OOM kills {record['oom_kills']}  "
          f"waited {record['waited_s']:.0f} s")
    return record, units


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="pytorch2.6-cpu-trixie")
    ap.add_argument("--sample", type=int, default=60, help="how many ATen units, spread evenly")
    ap.add_argument("--longest", type=int, default=8, help="the longest units of the measured build, added")
    ap.add_argument("--memory", default="3g")
    ap.add_argument("--cpuset", default="0-1")
    ap.add_argument("--max-jobs", type=int, default=4, help="fixed MAX_JOBS tried: 1..this")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--state", type=Path)
    ap.add_argument("--network", default="host")
    ap.add_argument("--ca-cert", default="/etc/ssl/certs/ca-certificates.crt")
    args = ap.parse_args()
    from dist import Bench

    from buildctl.pipeline import memory_budget

    work = args.state or Path(tempfile.mkdtemp(prefix="bench-memory-"))
    budgeted = Bench(args, work / "budget", (NO_CACHE,))
    unbudgeted = Bench(args, work / "off", (NO_CACHE, OFF))
    for bench in (budgeted, unbudgeted):
        bench.key = bench.invoke("--until", "configure", label="configure")["key"]
    targets = _sample(budgeted, args)
    print(f"{args.recipe}: {len(targets)} units, {args.memory} on CPUs {args.cpuset}")
    for bench in (budgeted, unbudgeted):  # untimed: the sample's dependencies (code generation)
        bench.invoke("--until", "compile", "--target", targets[0], "--jobs", "1", label="prime")
    cpus = memory_budget.cpuset_size(args.cpuset)
    old = old_rule_jobs(cpus, parse_memory(args.memory))
    runs: dict[str, dict] = {}
    peaks: dict[str, int] = {}
    # nothing learned yet: every unit gets the conservative default (what a first build on a machine does)
    runs["budget-cold"], _ = timed(budgeted, "budget-cold", targets, ())
    runs["old-rule"], _ = timed(unbudgeted, "old-rule", targets, ("--jobs", str(old)))
    for k in range(1, args.max_jobs + 1):
        runs[f"fixed-{k}"], _ = timed(unbudgeted, f"fixed-{k}", targets, ("--jobs", str(k)))
    # with the peaks learned by every run above (the launcher measures with the budget out of the way too)
    runs["budget"], units = timed(budgeted, "budget", targets, ())
    peaks.update({u["unit"]: u["peak_bytes"] for u in units})
    result = {"recipe": args.recipe, "memory": args.memory, "cpuset": args.cpuset, "old_rule_jobs": old,
              "targets": targets, **summarise(runs, peaks)}
    for name in GOALS:
        print(f"{name:22} {result.get(name)}  {'PASS' if result['goals'][name] else 'FAIL'}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    if not args.state:
        for bench in (budgeted, unbudgeted):
            bench.remove()
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all(result["goals"].values()) else 1


def _sample(bench, args) -> list[str]:
    """The build's objects (ninja's targets) and the bench's selection from them."""
    listing = bench.in_build_dir("ninja -C /work/src/build -t targets all")
    objects = sorted({line.split(":")[0] for line in listing.splitlines() if line.split(":")[0].endswith(".o")})
    return select_sample(objects, args.sample, longest_units(CPU_BUILD_LOG.read_text(), args.longest))


if __name__ == "__main__":
    sys.exit(main())
