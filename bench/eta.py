#!/usr/bin/env python3
"""Bench: the live ETA replayed on a real build's .ninja_log. Starts nothing.

    python bench/eta.py ACTUAL --prior PRIOR [--partial] [--json]

ACTUAL and PRIOR are artifact folders (their ninja_log.txt) or .ninja_log files: ACTUAL's steps are
replayed in the order they ended (a resumed build's runs end to end) and, after each, the estimate of
the time left is compared with the time that really was left:

* cost-weighted (buildctl/pipeline/eta.py, what the live view shows when the recipe, or one of the same
  framework and version, was built before): each step weighted by its duration in PRIOR;
* step rate over the whole run (what the live view shows without a prior) and over the last 600 s
  (what it showed before), for comparison.

A resumed build's log (several ninja runs) is replayed as one run, for the goal, and then its last
run as its own ninja showed it ([N/M] from the run's start, M the steps left then): what a person
watching the resumed build saw (the runs before it were stopped, so their time left is unknown).

Error = (estimated left - really left) / really left, at 10, 25, 50, 75 and 90 % of the build's wall
time, and the largest |error| over every step from 10 % to 90 %. Goal: within +-10 % from 10 % of
the build on (past 90 % a few seconds' miss is a large share of what is left). The baseline is the
same build's own clock.

--partial: ACTUAL or PRIOR is still compiling (its .ninja_log copied while ninja runs). The time that
is really left is known only up to ACTUAL's last logged step, so the replay is cut to the first steps
of ACTUAL that PRIOR logged too (up to its first step PRIOR has not reached, less a 5 % slack for the
order ninja picked), and PRIOR to those steps: the figures say how the estimate settles on that
prefix of the build, with the real cost shape of PRIOR against ACTUAL, not how it ends.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from buildctl.pipeline import eta, eta_prior  # noqa: E402
from buildctl.store.manifest import Manifest  # noqa: E402

GOAL = 0.10
CHECKPOINTS = (0.10, 0.25, 0.50, 0.75, 0.90)
WINDOW_S = 600.0
# A last run shorter than this is the wheel step's ninja (it finds a step or two left), not a resume.
MIN_RESUMED_STEPS = 20


def build_type(path: Path) -> str | None:
    """The build type an artifact folder's manifest records; None for a bare .ninja_log."""
    if not (path / "manifest.json").is_file():
        return None
    return Manifest.read(path).build_type


def read_log(path: Path) -> str:
    return (path / "ninja_log.txt").read_text() if path.is_dir() else path.read_text()


def cut_to_common_prefix(actual: str, prior: dict[str, float]) -> tuple[str, dict[str, float], int]:
    """ACTUAL's log cut to its longest first run of steps that PRIOR knows (5 % of them may be
    unknown: the two builds' ninja did not pick the same order), PRIOR cut to those steps."""
    ends = eta.timeline(actual)
    known = cut = 0
    for i, (_, out) in enumerate(ends, 1):
        known += out in prior
        if known >= 0.95 * i:
            cut = i
    kept = {out for _, out in ends[:cut]}
    lines = [ln for ln in actual.splitlines() if ln.split("\t")[3:4] and ln.split("\t")[3] in kept]
    return "\n".join(lines) + "\n", {o: c for o, c in prior.items() if o in kept}, cut


def step_rate_rows(rows: list[tuple[float, float, float]], total_steps: int) -> list[tuple[float, float, float]]:
    """The old estimate on the same events: steps left over the step rate of the last WINDOW_S."""
    out, times = [], [t for t, _, _ in rows]
    for i, (t, _, really) in enumerate(rows):
        lo = next(j for j, tj in enumerate(times) if tj >= t - WINDOW_S)
        span, steps = t - (times[lo - 1] if lo else 0.0), i + 1 - lo
        rate = steps / span if span > 0 else 0.0
        out.append((t, (total_steps - i - 1) / rate if rate else float("inf"), really))
    return out


def score(rows: list[tuple[float, float, float]]) -> dict:
    finish = rows[-1][0] + rows[-1][2]
    at = {}
    for f in CHECKPOINTS:
        t, left, really = min(rows, key=lambda r: abs(r[0] - f * finish))
        at[f"{f:.0%}"] = (left - really) / really if really else 0.0
    window = [(left - really) / really for t, left, really in rows if 0.10 * finish <= t <= 0.90 * finish and really]
    worst = max(window, key=abs) if window else 0.0
    return {"at": at, "worst_10_90": worst, "ok": abs(worst) <= GOAL}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("actual", type=Path)
    ap.add_argument("--prior", type=Path, required=True)
    ap.add_argument("--partial", action="store_true", help="ACTUAL or PRIOR is still compiling: see above")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    actual, prior = read_log(a.actual), eta.ninja_costs(read_log(a.prior))
    # as the build would weigh this prior: a prior on the other side of -O0 has its kernels reweighted
    actual_type, prior_type = build_type(a.actual), build_type(a.prior)
    if actual_type:
        prior, why = eta_prior.across_optimisation(prior, prior_type, actual_type, "")
        if why:
            print(f"prior reweighted ({prior_type} for {actual_type}):{why.lstrip(';')}", file=sys.stderr)
    all_steps = len(eta.timeline(actual))
    if a.partial:
        actual, prior, _ = cut_to_common_prefix(actual, prior)
    rows = eta.replay(actual, prior)
    results = {"cost-weighted": score(rows), "step rate (whole)": score(eta.replay(actual, None)),
               "step rate (600 s)": score(step_rate_rows(rows, len(rows)))}
    runs = [] if a.partial else eta.replay_runs(actual, prior)
    # the last resumed run: a run after the first, not the wheel step's ninja finding a step or two left
    resumed = [i for i, run in enumerate(runs) if i > 0 and len(run) >= MIN_RESUMED_STEPS]
    if resumed:
        results[f"run {resumed[-1] + 1} (resumed)"] = score(runs[resumed[-1]])
    finish = rows[-1][0] + rows[-1][2]
    if a.json:
        print(json.dumps({"steps": len(rows), "wall_s": finish, "prior_steps": len(prior), "partial": a.partial,
                          "logged_steps": all_steps, **results}, indent=1))
    else:
        cut = f" (partial: its first {len(rows)} of {all_steps} logged steps)" if a.partial else ""
        print(f"{a.actual}: {len(rows)} steps{cut}, {finish / 3600:.2f} h of ninja; prior {a.prior}: "
              f"{len(prior)} steps")
        print(f"{'ETA':<20}" + "".join(f"{f:>8.0%}" for f in CHECKPOINTS)
              + "   worst 10-90 %")
        for name, r in results.items():
            mark = ("PASS" if r["ok"] else "FAIL") if name == "cost-weighted" else ""
            print(f"{name:<20}" + "".join(f"{v:>+8.0%}" for v in r["at"].values())
                  + f"   {r['worst_10_90']:+.0%}" + (f"   goal +-{GOAL:.0%}: {mark}" if mark else ""))
    return 0 if results["cost-weighted"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
