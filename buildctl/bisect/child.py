"""One step of `invoke bisect` as a child build (pipeline/child_build.py, as scale-out runs its builds: its
own signal handling, key lock, clean-up, artifact or repro bundle): its job, and its result as the `build`
part of a bisect log entry. The result's texts are a build's output: shown without terminal controls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from buildctl import settings
from buildctl.bisect import search
from buildctl.bisect.record import BuildRecord, CacheFigures, Diagnosis, Entry, StepCriterion
from buildctl.pipeline import child_build
from buildctl.terminal_text import strip_controls

FIRST_ERROR_LINES = 12


@dataclass(frozen=True)
class Criterion:
    """What makes a step pass or fail: a step of the build (--until), the whole build with or without its
    verification, or a test command against its wheels."""

    until: str | None = None
    verify: bool = True
    test: str | None = None
    test_timeout: float = 1800

    def as_dict(self) -> dict:
        return self.logged().to_json()

    def logged(self) -> StepCriterion:
        """What a step's log entry records of it (a test's digest goes with the test)."""
        return StepCriterion(self.until, self.verify and self.until is None and self.test is None)

    def describe(self) -> str:
        if self.test:
            return f"the test `{self.test}` (exit 0 good, 125 skip, 1-127 bad)"
        if self.until:
            return f"the build up to its {self.until} step"
        return "the build and its verification" if self.verify else "the build"


def build_job(recipe: str, sets: Sequence[str], criterion: Criterion, chosen: settings.Settings, engine_url: str,
              *, no_preflight: bool = False, known_keys: frozenset[str] = frozenset()) -> child_build.Job:
    """The child build of one step: the command's --set overrides, then the step's own; not verified when a
    test decides or the command said --no-verify; `known_keys`: the keys the logs hold a result for (the
    child reports such a key and builds nothing). On stdin, no --set value or password stands on a command
    line."""
    verify = not chosen.no_verify and (bool(criterion.until) or (not criterion.test and criterion.verify))
    return child_build.job_for("build", recipe, sets, chosen, engine_url, until=criterion.until or None,
                               verify=verify, no_preflight=no_preflight, key_first=True, known_keys=known_keys)


def clip_lines(lines: Any, n: int = FIRST_ERROR_LINES) -> list[str]:
    return [strip_controls(str(x))[:300] for x in (lines if isinstance(lines, (list, tuple)) else [])][:n]


def build_record(result: child_build.Result, seconds: float) -> BuildRecord:
    """The `build` part of a log entry from a child build's result (a stream that did not read: the
    caller's Result with a failure in step "buildctl")."""
    figures = result.compile_cache or {}
    cache = CacheFigures(figures["hits"], figures["misses"]) if "hits" in figures and "misses" in figures else None
    failure = result.failure
    if result.ok and failure is None:
        return BuildRecord(True, seconds, result.cached, result.artifact, result.out_dir, cache)
    if failure is None:  # not expected: a child says why it failed
        failure = child_build.Failure("buildctl", "the build failed and said nothing of why")
    error = strip_controls(failure.error).removeprefix("error: ")[:300]
    diagnosis = failure.diagnosis
    title = diagnosis.title if diagnosis else (None if failure.bundle else error)
    shown = Diagnosis(*(strip_controls(str(getattr(diagnosis, k) or ""))[:500] for k in ("id", "title", "cause", "fix"))) \
        if diagnosis else None
    return BuildRecord(False, seconds, result.cached, result.artifact, result.out_dir, cache,
                       search.Failure(failure.step, diagnosis.id if diagnosis else None, title), error, failure.bundle,
                       tuple(clip_lines(failure.first_error)) if (failure.first_error or failure.bundle) else (error,),
                       shown)


def failure_of(entry: Entry) -> search.Failure | None:
    """The entry's failure as the search compares it (its title without terminal controls)."""
    f = entry.failure
    if f is None:
        return None
    return search.Failure(f.step, f.diagnosis, strip_controls(f.title)[:200] if f.title else None)
