"""Errors that end a command with a one-line message and a CI-usable exit code.

Exit codes: 0 ok, 1 a run failed (engine, build, verification), 2 bad input (recipe, CLI).

A failure carries what its callers need as fields set when it is raised (the step, the diagnosis,
the repro bundle, the verification report): nothing is attached afterwards or read back from disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from buildctl.failure.diagnose import Diagnosis
    from buildctl.verify.report import Report


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
        if not detail:
            detail = next((ln.strip() for ln in reversed(log.splitlines()) if ln.strip()), "")
        why = f"exit code {exit_code}" + (", killed: out of memory" if oom_killed else "") + (
            ", stopped: timed out" if timed_out else "")
        super().__init__(f"step {step} failed ({why}): {one_line(detail, 300)}")


class BuildFailed(BuildctlError):
    """The build ran and failed in `step`; the diagnosis (None: no known cause) and the repro bundle
    were written."""

    def __init__(self, message: str, *, step: str, bundle: Path, diagnosis: Diagnosis | None):
        super().__init__(message)
        self.step, self.bundle, self.diagnosis = step, bundle, diagnosis


class NotReproducible(BuildctlError):
    """--check-reproducible: the second build's wheel differs from the first (the message names how)."""

    diagnosis = None  # the comparison is the diagnosis: it names the members and the kind of difference


class VerificationFailed(BuildctlError):
    """An expectation of the recipe does not hold for the built wheel. `report`: the verification
    report (None when verification stopped before judging: no container, no dependencies);
    `diagnosis`: its known cause, when the build pipeline looked for one."""

    def __init__(self, message: str, *, report: Report | None = None, diagnosis: Diagnosis | None = None):
        super().__init__(message)
        self.report, self.diagnosis = report, diagnosis
