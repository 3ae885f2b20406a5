#!/usr/bin/env python3
"""Bench: a real (long) build, read from the records it left. Starts nothing.

    python bench/realbuild.py ARTIFACT [--warm ARTIFACT] [--interrupt RECORD] [--json]

ARTIFACT is a published artifact folder (artifacts/<recipe>/<key>/: manifest.json, ninja_log.txt);
--warm the artifact of the same recipe rebuilt after a one-file edit (its own key, the compile cache
warm); --interrupt the record of an interrupted run of ARTIFACT's key (interrupted.json, written by
`invoke build` when Ctrl-C stops a compile; by default the manifest's `resumed.interrupted`).

It prints, each against its goal (PASS/FAIL per line, exit 1 if any goal fails):

* wall time of the build, and per stage;
* core-time busy compiling: the summed duration of every ninja step over the ninja runs' spans x
  MAX_JOBS (runs are split where .ninja_log's clock restarts, i.e. at a resume). Goal >= 90 %;
* peak memory of the build container against what the MAX_JOBS rule budgets (jobs x per-job
  memory, buildctl/recipe/parallel_jobs.py). Goal: measured <= budget;
* warm/cold: the one-file-edit rebuild's wall time over the cold build's. Goal <= 0.1;
* work lost to an interrupt: compiler core-seconds in flight when the build was stopped (they
  are done again after the resume). Goal <= 120 s;
* buildctl's own overhead: wall time that is not apt + pip (the image step), configure or compile,
  as a share of the build. Goal <= 2 %.

The baseline of each ratio is the same build's own records, so a busy machine shows on both sides.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from buildctl.recipe import parallel_jobs  # noqa: E402

GOALS = {"busy_share": 0.90, "warm_cold": 0.10, "lost_s": 120.0, "overhead_share": 0.02}
# Stages that are the framework's own work or the toolchain's download; the rest is buildctl's.
WORK_STAGES = ("image", "configure", "compile")


def ninja_runs(text: str) -> list[list[tuple[int, int, str]]]:
    """.ninja_log steps split into runs: ninja appends each step as it finishes (so end times only
    grow within a run) and each run's clock starts at 0. An edge
    with several outputs (codegen) logs one line per output with one start, end and command hash:
    it counts once."""
    runs: list[list[tuple[int, int, str]]] = []
    seen: set[tuple[str, str, str]] = set()
    last_end = None
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 5 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        start, end = int(parts[0]), int(parts[1])
        if last_end is None or end < last_end:  # clock went back: a new ninja run
            runs.append([])
            seen = set()
        last_end = end
        edge = (parts[0], parts[1], parts[4])
        if edge in seen:
            continue
        seen.add(edge)
        runs[-1].append((start, end, parts[3]))
    return runs


def busy_share(runs, max_jobs: int) -> tuple[float, float, float]:
    """(share, busy core-seconds, span seconds) over all runs."""
    busy = sum(end - start for run in runs for start, end, _ in run) / 1000
    span = sum((max(e for _, e, _ in run) - min(s for s, _, _ in run)) / 1000 for run in runs if run)
    return (busy / (span * max_jobs) if span else 0.0), busy, span


def load(artifact: Path) -> tuple[dict, str]:
    manifest = json.loads((artifact / "manifest.json").read_text())
    log = artifact / "ninja_log.txt"
    return manifest, log.read_text() if log.is_file() else ""


def measure(artifact: Path, warm: Path | None, interrupt: Path | None) -> list[dict]:
    manifest, ninja_log = load(artifact)
    d = manifest.get("durations_s") or {}
    total = float(d.get("total") or sum(v for k, v in d.items() if k != "total"))
    rows = [{"name": "wall time", "value": total, "text": f"{total / 3600:.2f} h ("
             + ", ".join(f"{k} {v / 60:.1f} min" for k, v in d.items() if k != "total") + ")"}]
    max_jobs = int(manifest.get("max_jobs") or 1)
    runs = ninja_runs(ninja_log)
    share, busy, span = busy_share(runs, max_jobs)
    steps = sum(len(r) for r in runs)
    rows.append({"name": "busy compiling", "value": share, "goal": f">= {GOALS['busy_share']:.0%}",
                 "ok": share >= GOALS["busy_share"],
                 "text": f"{share:.1%} of {max_jobs} cores over {span / 3600:.2f} h of ninja ({steps} steps in "
                         f"{len(runs)} run(s), {busy / 3600:.2f} core-hours)"})
    peak = manifest.get("peak_memory_bytes")
    per_job = parallel_jobs.per_job_bytes(manifest.get("accelerator", "cpu"),
                                          manifest.get("build_type", "Release"))
    budget = max_jobs * per_job
    if peak:
        rows.append({"name": "peak memory", "value": peak / budget, "goal": "<= budget", "ok": peak <= budget,
                     "text": f"{peak / 2**30:.2f} GiB measured, {budget / 2**30:.2f} GiB budgeted by the MAX_JOBS "
                             f"rule ({max_jobs} jobs x {per_job / 2**30:.1f} GiB)"})
    if warm is not None:
        wm, _ = load(warm)
        wd = wm.get("durations_s") or {}
        wtotal = float(wd.get("total") or sum(v for k, v in wd.items() if k != "total"))
        cc = wm.get("compile_cache") or {}
        ratio = wtotal / total
        rows.append({"name": "warm/cold (one-file edit)", "value": ratio, "goal": f"<= {GOALS['warm_cold']}",
                     "ok": ratio <= GOALS["warm_cold"],
                     "text": f"{ratio:.3f} ({wtotal / 60:.1f} min vs {total / 60:.1f} min; compile cache "
                             f"{cc.get('hits')} hits / {cc.get('misses')} misses)"})
    rec = json.loads(interrupt.read_text()) if interrupt else (manifest.get("resumed") or {}).get("interrupted")
    if rec is not None:
        lost = sum(p["elapsed_s"] for p in rec.get("in_flight", []))
        rows.append({"name": "work lost to an interrupt", "value": lost, "goal": f"<= {GOALS['lost_s']:.0f} s",
                     "ok": lost <= GOALS["lost_s"],
                     "text": f"{lost:.0f} core-s in {len(rec.get('in_flight', []))} compile(s) in flight at "
                             f"{rec.get('at_step')} (resumed: only the remaining steps compiled)"})
    work = sum(float(d.get(k, 0)) for k in WORK_STAGES)
    overhead = max(0.0, total - work)
    rows.append({"name": "buildctl overhead", "value": overhead / total if total else 0,
                 "goal": f"<= {GOALS['overhead_share']:.0%}", "ok": (overhead / total if total else 0) <= GOALS["overhead_share"],
                 "text": f"{overhead / total:.2%} ({overhead:.0f} s not in " + " + ".join(WORK_STAGES) + ")"})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("artifact", type=Path)
    ap.add_argument("--warm", type=Path)
    ap.add_argument("--interrupt", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    rows = measure(a.artifact, a.warm, a.interrupt)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            mark = "" if "ok" not in r else ("PASS" if r["ok"] else "FAIL")
            print(f"{r['name']:<28} {r['text']}" + (f"   goal {r['goal']}: {mark}" if mark else ""))
    failed = [r["name"] for r in rows if r.get("ok") is False]
    print(f"FAIL: {', '.join(failed)}" if failed else "PASS: every goal met")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
