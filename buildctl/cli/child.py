"""One build, or one verification, of a multi-recipe build (scaleout.multibuild), as a process of its own:
its own signal handling, key lock, clean-up and repro bundle, exactly as `invoke build --recipe R --engine
E --json` (or `invoke verify --recipe R --json` on E) on its own, and the same output: its JSON on stdout,
its steps and errors on stderr, the same exit code.

    python -m buildctl.cli.child < JOB.json

JOB: {"task": "build" | "verify", "recipe": R, "sets": [...], "engine": URL, "no_preflight": bool,
"until": a step or null (`invoke bisect --until`), "settings": the multi-build's (or the bisect's)
Settings, with its one engine}. It comes on stdin, so no --set value or
secret stands on a command line; the Settings are taken as they are, never read again from the
environment (which the child inherits as the multi-build was given it)."""

from __future__ import annotations

import json
import sys

from invoke.exceptions import Exit

from buildctl.settings import Settings

MAX_JOB_BYTES = 1 << 20


def main() -> int:
    job = json.loads(sys.stdin.read(MAX_JOB_BYTES))
    chosen = Settings.model_validate(job["settings"])  # as the multi-build chose them: not from the environment
    try:
        if job["task"] == "verify":
            from buildctl.cli.verify import VerifyRequest, verify
            from buildctl.verify.options import VerifyOptions

            verify(VerifyRequest(recipe=job["recipe"], sets=tuple(job["sets"])), options=VerifyOptions(json_out=True),
                   settings=chosen, engine_url=job["engine"] or None)
        else:
            from buildctl.cli.build import build

            build(job["recipe"], job["sets"], settings=chosen, no_preflight=job["no_preflight"], as_json=True,
                  until=job.get("until"))
    except Exit as e:
        return e.code or 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
