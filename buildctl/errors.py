"""Errors that end a command with a one-line message and a CI-usable exit code.

Exit codes: 0 ok, 1 a run failed (engine, build, verification), 2 bad input (recipe, CLI).

A failure carries what its callers need as fields set when it is raised (the step, the log): nothing
is attached afterwards or read back from disk. The failures of a later stage live with it, on these
bases: pipeline.stages.failure.BuildFailed, pipeline.rebuild_check.NotReproducible,
verify.report.VerificationFailed. This module imports nothing of buildctl.
"""

from __future__ import annotations


class BuildctlError(Exception):
    """A failure reported to the user as one line, never as a traceback."""

    exit_code = 1


class InputError(BuildctlError):
    """Bad input: a recipe, an override or a command-line value. Nothing has been written."""

    exit_code = 2


class RecipeError(InputError):
    """A recipe problem, located: file (and line when known), field, and the fix."""

    def __init__(self, file: str, field: str, problem: str, fix: str, line: int | None = None):
        self.file, self.field, self.problem, self.fix, self.line = file, field, problem, fix, line
        where = f"{file}:{line}" if line else file
        loc = f" {field}:" if field else ""
        super().__init__(f"{where}:{loc} {problem}; fix: {fix}")


class EngineError(BuildctlError):
    """The container engine is missing, unreachable or failed."""


def one_line(text: str, limit: int = 400) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class StepFailed(BuildctlError):
    """A build step (image build or a command in a container) ended with a non-zero exit code.

    `returncode` is the step's own exit code (the `exit_code` argument); the class attribute
    `exit_code` stays the command's exit code (1), as for every BuildctlError. `max_jobs`: the
    parallel jobs the step ran with, when it compiled (a retry after an OOM kill halves them).
    """

    def __init__(self, step: str, exit_code: int, log: str, oom_killed: bool = False, detail: str = "",
                 timed_out: bool = False, max_jobs: int | None = None):
        self.step, self.returncode, self.log, self.oom_killed = step, exit_code, log, oom_killed
        self.timed_out, self.max_jobs = timed_out, max_jobs
        self.detail = detail  # buildctl's own reason, when it gave one (a refusal on the host), in full
        if not detail:
            detail = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "")
        why = f"exit code {exit_code}" + (", killed: out of memory" if oom_killed else "") + (
            ", stopped: timed out" if timed_out else "")
        super().__init__(f"step {step} failed ({why}): {one_line(detail, 300)}")
