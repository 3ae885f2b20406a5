"""A child build for tests without an engine: the real entry point (buildctl.cli.child's main: the job read
from stdin, stdout kept for the events, the result, the exit code) with the build replaced by pure logic,
chosen by the job's recipe:

    every-event  each kind of event once, and a stray print (which must not reach the stream)
    garbage      a step, then a line that is not an event, then it waits (the parent must not)
    truncated    a step, then the process ends without a result
    bisect       a bisect step over a `f=VALUE` axis: its key is key-VALUE; a known key builds nothing; a
                 VALUE from "d" on fails in compile (the regression), "b" fails in configure (a skip)

    python tests/fake_child.py < JOB.json
"""

from __future__ import annotations

import os
import sys
import time

from buildctl.cli import child
from buildctl.pipeline import child_build as cb


def run_job(job: cb.Job, view: cb.EventView) -> cb.Result:
    if job.recipe == "every-event":
        view.step_started("fetch")
        view.line("\x1b[31mcloning\x1b[0m demo")
        view.emit(cb.Warned("a warning"))
        view.emit(cb.KeyKnown("k1"))
        print("a stray print")
        view.step_finished("fetch", 1.5)
        return cb.Result(ok=True, key="k1", artifact="/a/demo/k1", compile_cache={"hits": 3, "misses": 1})
    if job.recipe == "garbage":
        view.step_started("fetch")
        view.stream.write("[compile] ...\n")
        view.stream.flush()
        time.sleep(600)
    if job.recipe == "truncated":
        view.step_started("fetch")
        sys.stderr.write("Segmentation fault\n")
        sys.stderr.flush()
        os._exit(3)
    value = next(s.split("=", 1)[1] for s in job.sets if s.startswith("f="))
    key = f"key-{value}"
    view.emit(cb.KeyKnown(key, key in job.known_keys))
    if key in job.known_keys:
        return cb.Result(ok=True, key=key, known=True)
    for step in ("configure", "compile"):
        view.step_started(step)
        if (step, value >= "d") == ("compile", True) or (step, value) == ("configure", "b"):
            return cb.Result(ok=False, key=key, failure=cb.Failure(step, f"build failed in step {step} (exit 1)",
                                                                    bundle=f"/bundles/{value}",
                                                                    first_error=(f"error in {value}",)))
        view.step_finished(step, 0.1)
    return cb.Result(ok=True, key=key, artifact=f"/a/{key}")


if __name__ == "__main__":
    child.run_job = run_job
    sys.exit(child.main())
