"""A build run by another process (pipeline/child_build.py: the job, the events): one build, one
verification or one key of a multi-recipe build (scaleout.multibuild) or a bisect step, as a process of
its own: its own signal handling, key lock, clean-up and repro bundle, as `invoke build --recipe R --engine
E` on its own.

    python -m buildctl.cli.child < JOB.json     (cli/child_command.py: CHILD)

Its stdout carries only the event stream (anything else the code below prints goes to stderr); its
result is the last event, exit code 0, 1 (the build failed) or 2 (the job was bad input). The settings are
the parent's, never read again from the environment; they carry the child's own environment (inherited
from the parent, never written into the job: it holds secrets) for what the build starts."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl.errors import BuildctlError, InputError
from buildctl.pipeline import child_build as cb

if TYPE_CHECKING:
    from buildctl.pipeline.dry_run import DryRun

MAX_BUNDLE_JSON = 4 << 20
FIRST_ERROR_LINES = 12


def run_job(job: cb.Job, view: cb.EventView) -> cb.Result:
    """The job's result; its steps, log lines and warnings go to `view` as they come. BuildctlError
    (bad input, no engine) is the caller's."""
    from buildctl.cli.common import load_spec, recipe_source, site_options
    from buildctl.recipe import preflight

    chosen = job.settings.model_copy(update={"no_verify": not job.verify})
    reads: list = []
    spec, warnings = load_spec(job.recipe, list(job.sets), base_image=chosen.base_image, site=site_options(chosen),
                               preflight=not job.no_preflight and job.task != "verify", reads=reads)
    for text in warnings:
        view.emit(cb.Warned(text))
    if job.task == "verify":
        return _verify(job, spec, view)
    from buildctl.cli.build import build_options, remember_noop
    from buildctl.pipeline.dry_run import dry_run

    preflight.refuse_placeholders(spec, source=recipe_source(job.recipe), image_only=job.until == "image")
    opts = build_options(chosen, until=job.until)
    # a no-op is remembered as `invoke build` remembers it: the parent's next `invoke build` repeats it
    remember = functools.partial(remember_noop, job.recipe, list(job.sets), settings=chosen,
                                 no_preflight=job.no_preflight, spec=spec, reads=reads, warnings=warnings)
    if job.task == "build" and not job.key_first:
        return _build(spec, opts, view, None, remember)
    try:
        looked = dry_run(spec, opts)  # nothing written, nothing pulled
    except BuildctlError as e:  # the engine, the network: nothing of the recipe's or the change's
        return cb.Result(ok=False, failure=cb.Failure("buildctl", f"its key: {_first_line(e)}"))
    known = looked.key in job.known_keys
    view.emit(cb.KeyKnown(looked.key, known))
    if job.task == "key" or known:
        return cb.Result(ok=True, key=looked.key, known=known)
    # the spec as the dry run resolved it (each git ref asked once per step, the build checks out that commit),
    # with its rendered files and key inputs: one render and one key per step
    return _build(looked.spec or spec, opts, view, looked, remember)


def _build(spec, opts, view: cb.EventView, looked: DryRun | None, remember: Callable[..., None]) -> cb.Result:
    """The build; after a dry run (`looked`), from what it rendered and keyed. Its result names the build's
    key: the dry run's, unless the build keyed a base it pulled (prepare.build_inputs)."""
    from buildctl import engine
    from buildctl.cli.build import _run_failed
    from buildctl.pipeline import pipeline

    try:
        with engine.terminate_as_interrupt():
            result = pipeline.run(spec, opts, view, keyed=looked.keyed if looked is not None else None)
    except BuildctlError as e:
        if not _run_failed(e):
            raise
        key = getattr(e, "key", None) or (looked.key if looked is not None else None)  # a failed step's: the build's
        return cb.Result(ok=False, key=key, failure=_failure_of(e))
    finally:
        view.close()
    if isinstance(result, pipeline.PartialResult):
        return cb.Result(ok=True, key=result.key, out_dir=str(result.out_dir.resolve()),
                         compile_cache=_ccache_stats(result.out_dir / "cache-stats.txt"))
    remember(result=result)
    cc = result.manifest.compile_cache
    figures = {"hits": cc["hits"], "misses": cc["misses"]} \
        if isinstance(cc.get("hits"), int) and isinstance(cc.get("misses"), int) else None
    failure = _failure_of(result.verify_error) if result.verify_error is not None else None
    return cb.Result(ok=failure is None, key=result.key, artifact=str(result.artifact), cached=result.cached,
                     published=result.published, compile_cache=figures, failure=failure)


def _verify(job: cb.Job, spec, view: cb.EventView) -> cb.Result:
    """The published artifact the job names (the build's, on another engine), verified on the job's engine."""
    from buildctl import engine
    from buildctl.pipeline import published
    from buildctl.verify.options import VerifyOptions

    if not job.artifact:
        raise InputError("a verify job names no artifact; fix: give the build's artifact")
    options = VerifyOptions(json_out=True, cache_dir=job.settings.cache_dir, step_summary=job.settings.step_summary,
                            environ=job.settings.environ())
    client = engine.connect(job.engine_url, environ=job.settings.environ()) if job.engine_url else None
    report = published.verify_artifact(spec, Path(job.artifact), on_line=view.line, options=options,
                                       console=view.console, client=client)
    if report.ok:
        return cb.Result(ok=True, artifact=job.artifact)
    return cb.Result(ok=False, artifact=job.artifact, failure=_checks_failure(report, "verification failed"))


def _failure_of(error: BuildctlError) -> cb.Failure:
    """A failed step (its bundle says the step and the first error lines) or a verification that does not hold."""
    from buildctl.pipeline.stages.failure import BuildFailed

    message = _first_line(error)
    if not isinstance(error, BuildFailed):
        return _checks_failure(error.report, message)
    bundle = _read_bundle(error.bundle)
    d = error.diagnosis
    return cb.Failure(step=str(bundle.get("step") or error.step or "build"), error=message,
                      diagnosis=cb.Diagnosis(d.id, d.title, d.cause, d.fix) if d is not None else None,
                      bundle=str(error.bundle), first_error=_lines(bundle.get("first_error")))


def _checks_failure(report, message: str) -> cb.Failure:
    """A verification that does not hold: its failed checks are the diagnosis."""
    checks = [c for c in (report.checks if report is not None else []) if c.ok is False]
    names = sorted(str(c.name) for c in checks)
    diagnosis = cb.Diagnosis("checks:" + ",".join(names)[:200], "verification: " + ", ".join(names)[:200]) \
        if names else None
    return cb.Failure(step="verify", error=message, diagnosis=diagnosis,
                      first_error=_lines([c.detail or c.name for c in checks]))


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0][:300]


def _lines(lines) -> tuple[str, ...]:
    return tuple(str(x)[:300] for x in (lines if isinstance(lines, list) else []))[:FIRST_ERROR_LINES]


def _read_bundle(bundle: Path) -> dict:
    """bundle.json of the failed build (step, first error lines), read capped; {} when it does not read."""
    try:
        with (Path(bundle) / "bundle.json").open("rb") as f:
            raw = f.read(MAX_BUNDLE_JSON + 1)
        data = json.loads(raw) if len(raw) <= MAX_BUNDLE_JSON else None
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _ccache_stats(path: Path) -> dict[str, int] | None:
    """ccache's hits and misses the build left in --until's output folder."""
    if not path.is_file():
        return None
    stats = {}
    for line in path.read_text(errors="replace")[:100_000].splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1].strip().isdigit():
            stats[parts[0].strip()] = int(parts[1])
    return {"hits": stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0),
            "misses": stats.get("cache_miss", 0)}


def main() -> int:
    from rich.console import Console

    events = sys.stdout
    sys.stdout = sys.stderr  # the stream is the events' alone: anything else printed goes to stderr
    view = cb.EventView(events, Console(stderr=True, highlight=False))
    try:
        job = cb.Job.from_json(json.loads(sys.stdin.read(cb.MAX_JOB_BYTES)), environ=os.environ)
        result = run_job(job, view)
    except KeyboardInterrupt:
        return 130  # stopped: no result (the parent stopped it, or a Ctrl-C)
    except (BuildctlError, ValueError) as e:
        code = e.exit_code if isinstance(e, BuildctlError) else 2
        step = "refused" if code == 2 else "buildctl"
        result = cb.Result(ok=False, failure=cb.Failure(step=step, error=_first_line(e)))
    except Exception as e:  # a bug: the parent still gets a result that says so, in one line
        result = cb.Result(ok=False, failure=cb.Failure(step="buildctl", error=f"internal error: "
                                                                                f"{e.__class__.__name__}: {_first_line(e)}"))
    with contextlib.suppress(BrokenPipeError):
        view.emit(result)
    return 0 if result.ok else (2 if result.failure is not None and result.failure.step == "refused" else 1)


if __name__ == "__main__":
    sys.exit(main())
