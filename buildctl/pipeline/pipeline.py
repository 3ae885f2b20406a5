"""`invoke build`: recipe → rendered folder → image → compile in a container → wheel → artifact → verify.

The stages (buildctl/pipeline/stages/) are functions that take the record before them and return the next:

    fetch → Prepared → image → ImageBuilt → compile → Compiled → publish → Published → verify → Verified

This module runs them in order, owns the step names and their clock (the build script's step lines
move it during the compile), and tells the view what started and finished. A failing step leaves a
repro bundle with a diagnosis and raises BuildFailed; Ctrl-C/SIGTERM removes the build container and
leaves no partial artifact (the staging folder is deleted, the published folder appears only by rename).
A build holds its key's lock until the artifact is verified: shared when it finds the artifact (builds
that find it read it together), exclusive when it makes it; `invoke clean` removes an artifact only
under that lock, so never one a build is reading.

Each build renders into a folder of its own (build/.tmp-<recipe>-*), computes the key from exactly
those files and builds its images from that folder, so two builds of one recipe started together
never build from each other's files; a copy is left in build/<recipe>/<key>/ to look at. The engine
objects it creates (image tags, volumes, the compile container) are named in the namespace its options
give (BuildOptions.namespace, the CLI's BUILDCTL_NAMESPACE), else that of its artifacts root
(artifacts.namespace), so two roots never share a build directory.

A build that finds its artifact renders, computes the key and reads the manifest; the modules of the
stages it skips (image, compile, verify, the failure's bundle) are imported where those stages start
(tests/unit/test_import_budget.py).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import engine
from buildctl.errors import StepFailed
from buildctl.pipeline.engine_names import image_tag, volume_names
from buildctl.pipeline.stages import (
    BuildLog,
    BuildOptions,
    ImageBuilt,
    KeyedRender,
    Published,
    Run,
    Verified,
    artifact,
    prepare,
)
from buildctl.recipe.schema import Spec
from buildctl.secrets import filtered
from buildctl.store import artifacts, git_refs
from buildctl.store import key as key_mod
from buildctl.store.manifest import Manifest
from buildctl.ui import TimeLeft, View

if TYPE_CHECKING:
    from buildctl.pipeline import eta, eta_prior
    from buildctl.pipeline.configure_gate import Gate
    from buildctl.verify.report import Report, VerificationFailed

__all__ = ["BuildOptions", "BuildResult", "PartialResult", "run"]

# A build waits for another build of its key at most this much longer than that build may compile.
LOCK_SLACK_S = 2 * 3600
# The build script announces its steps (templates/build.sh.j2 `step`).
STEP_MARKER = re.compile(r"^buildctl: step (source|configure|compile|wheel|extensions)$")


@dataclass(frozen=True)
class BuildResult:
    recipe: str
    key: str
    artifact: Path
    manifest: Manifest
    cached: bool
    durations: Mapping[str, float]  # each step's seconds, and the total
    report: Report | None = None  # the passing verification report
    verify_error: VerificationFailed | None = None  # the wheel is built but not what was asked (its report inside)
    inputs: key_mod.KeyInputs | None = None  # what the key was made of, read at the fetch (the no-op memo's)
    reads: tuple[tuple[str, str], ...] = ()  # the files beside the recipe the render read (path, sha256)

    @property
    def base_image_id(self) -> str:  # the key's base image, as the engine named it
        return self.inputs.base_image if self.inputs is not None else ""
    # False: built, but its verification failed, so it was not published: `artifact` is the folder kept in
    # failures/ (wheel, manifest, report), and the store holds nothing of this key
    published: bool = True


@dataclass(frozen=True)
class PartialResult:
    """What `invoke build --until STEP` produced: the step's outputs, kept in out_dir."""

    recipe: str
    key: str
    until: str
    out_dir: Path
    volume: str  # the build-dir volume a full build resumes from
    durations: Mapping[str, float] = field(default_factory=dict)
    gate: Gate | None = None  # the configure gate's table (every --until past the image)


class Steps:
    """Which step runs and how long each took: started and finished by the pipeline, moved during
    the compile by the build script's step lines, reported to the view; during the compile, ninja's
    status lines move its ETA (weighted by `prior`, once the pipeline chose one)."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.current: str | None = None
        self.durations: dict[str, float] = {}
        self._since = 0.0
        self.prior: eta_prior.Prior | None = None
        self._eta: eta.Eta | None = None
        self._ninja_status: re.Pattern[str] | None = None  # eta.STATUS, with the ETA

    def start(self, name: str) -> None:
        if name == self.current:
            return  # announced twice (the pipeline, then the script's step line): one step, one clock
        self.finish()
        self.current, self._since = name, time.monotonic()
        self._eta = None
        if name == "compile" and self.prior:
            from buildctl.pipeline.eta import STATUS, Eta  # a no-op never compiles: loaded when one does

            self._eta, self._ninja_status = Eta(self.prior.costs, start=self._since), STATUS
        self.view.step_started(name)

    def finish(self, status: str = "ok") -> None:
        if self.current is None:
            return
        name, self.current = self.current, None
        # a step that runs again (source and configure: once for the configure gate, once more, briefly,
        # as the compile container resumes the configured build directory) counts all its time
        self.durations[name] = round(self.durations.get(name, 0.0) + time.monotonic() - self._since, 2)
        self.view.step_finished(name, self.durations[name], status)

    def skip(self, name: str, status: str) -> None:
        self.view.step_finished(name, None, status)

    def line(self, text: str) -> None:
        m = STEP_MARKER.match(text)
        if m:
            self.start(m.group(1))
        elif self._eta is not None and self._ninja_status.match(text):
            now = time.monotonic()
            self._eta.line(text, now)
            self.view.time_left(TimeLeft(self._eta.remaining(now), now, self.prior.source))

    def failed(self, exc: StepFailed) -> str:
        """Mark the running step failed; the step a failure is reported in (for a compile: the
        script's own step, e.g. configure)."""
        step = self.current if exc.step == "compile" and self.current else exc.step
        if self.current is None:
            self.current, self._since = exc.step, time.monotonic()
        self.finish("failed")
        return step


def run(spec: Spec, opts: BuildOptions, view: View, keyed: KeyedRender | None = None) -> BuildResult | PartialResult:
    """Build (or find) the artifact of `spec`; verify it unless told not to. `keyed`: a dry run's render and
    key inputs (a bisect step's child): taken instead of rendering and keying again when of this very spec."""
    t0 = time.monotonic()
    steps = Steps(view)

    def on_line(line: str) -> None:
        steps.line(line)
        view.line(line)

    steps.start("fetch")
    ctx = Run.of(spec, opts, BuildLog(on_line), engine.EngineConnection.open(opts.engine_url, environ=opts.environ))
    looked = keyed if keyed is not None and keyed.spec == ctx.spec else None
    reached = rendered = looked.rendered if looked is not None else prepare.render_files(ctx)
    prepared = None
    # The key's lock is held until the artifact is verified: shared while a found artifact is read (builds
    # that find it read it together), exclusive while one is built; `invoke clean` removes none of it meanwhile.
    held = contextlib.ExitStack()
    try:
        with held:
            try:
                reached = prepared = prepare.prepare(ctx, rendered, looked.inputs if looked is not None else None)
                git_refs.record(ctx.spec, opts.artifacts_root)  # what --offline builds from next time
                steps.finish()
                if opts.until:
                    from buildctl.pipeline.stages import compile as compile_stage

                    held.enter_context(_key_lock(ctx, prepared.key))
                    reached = planned = prepare.plan(ctx, prepared)
                    steps.start("image")
                    reached = compile_stage.build_image(ctx, planned)
                    steps.finish()
                    if opts.until == "image":
                        return _image_only(ctx, steps, reached)
                    return _build_until(ctx, steps, reached)
                held.enter_context(_key_lock(ctx, prepared.key, shared=True))
                published, verification = _found(ctx, prepared.key), None
                if published is None:
                    held.close()  # the shared lock is given up before the exclusive one is waited for
                    held.enter_context(_key_lock(ctx, prepared.key))
                    published = _found(ctx, prepared.key, say_why=True)  # built while we waited?
                    if published is None:
                        _say_why_it_builds(ctx, prepared)
                        if "pip.lock" not in rendered.files:  # pip chooses: say so (the index is keyed then)
                            from buildctl.render.pip_lock import pip_line

                            ctx.log(f"buildctl: {pip_line(spec, locked=False)}")
                        from buildctl.pipeline.stages import compile as compile_stage

                        reached = planned = prepare.plan(ctx, prepared)
                        steps.start("image")
                        reached = compile_stage.build_image(ctx, planned)
                        steps.finish()
                        published, verification = _compile_and_publish(ctx, steps, reached, prepared.context_dir)
            except StepFailed as exc:
                from buildctl.pipeline.stages import (
                    failure,  # the repro bundle and diagnosis: loaded only when a step failed
                )

                step = steps.failed(exc)
                raise failure.build_failed(ctx, exc, step, reached, steps.durations) from None
            if published.cached:
                for name in ("image", "compile", "wheel", *(("extensions",) if spec.extensions else ())):
                    steps.skip(name, "cached")
            if verification is None:  # found published: its stored report, or a verification of it now
                verification = _verify(ctx, steps, published, prepared.context_dir) if opts.verify else (None, None)
            verified, verify_error = verification
    finally:
        if prepared is not None:  # this build's private render folder
            prepare.discard(prepared)
    total = round(time.monotonic() - t0, 2)
    view.finished(total)
    return BuildResult(spec.name, published.key, published.artifact, published.manifest, published.cached,
                       {**steps.durations, "total": total}, verified.report if verified else None, verify_error,
                       prepared.inputs, rendered.reads, published.stored)


def _key_lock(ctx: Run, key: str, *, shared: bool = False):
    """One build of a key at a time (or, shared, builds reading its artifact); the wait is at most the
    recipe's build.timeout + LOCK_SLACK_S."""
    opts = ctx.opts
    timeout = opts.lock_timeout if opts.lock_timeout is not None else ctx.spec.build.timeout_s + LOCK_SLACK_S
    return artifacts.key_lock(ctx.spec.name, key, opts.artifacts_root, timeout=timeout, on_wait=ctx.log,
                              shared=shared)


def _found(ctx: Run, key: str, *, say_why: bool = False) -> Published | None:
    """The artifact of this key, published before; None also for one whose wheels are not those its manifest
    records (deleted, corrupted) or that records no runtime image context (an older buildctl's): it is built
    again (publishing replaces the folder), so later stages find what they read. One that fails a policy a
    fresh build applies (build.wheel.max_vendored) is StepFailed at the wheel step, as a fresh build's."""
    refused: list[str] = []
    found = artifacts.lookup(ctx.spec.name, key, ctx.opts.artifacts_root, on_refused=refused.append)
    if found is None:
        if refused and say_why:
            ctx.log(f"buildctl: {refused[0]}: the artifact cannot be served; building it again")
        return None
    published = artifact.found(ctx.spec.name, key, found)
    if published.manifest.runtime is None:
        if say_why:
            ctx.log(f"buildctl: {found} records no runtime image context (an older buildctl built it); "
                    "building it again")
        return None
    artifact.refuse_found(ctx, published)  # the policies a fresh build applies (the size guard)
    return published


def _say_why_it_builds(ctx: Run, prepared) -> None:
    """The line a build prints when the recipe had an artifact and this request does not find it: what changed
    since the latest one (`invoke build --dry-run` names the same)."""
    from buildctl.pipeline.dry_run import changes_since_latest

    latest, changes = changes_since_latest(ctx.spec, prepared.inputs, ctx.opts.artifacts_root)
    if latest is not None and latest.name != prepared.key:
        ctx.log(f"buildctl: building key {prepared.key}; since {latest.name}: {key_mod.describe(changes)}")


def _compile_and_publish(ctx: Run, steps: Steps, built: ImageBuilt,
                         context_dir: Path) -> tuple[Published, tuple[Verified | None, VerificationFailed | None]]:
    """Compile, assemble the artifact in a staging folder, verify it there, and only then publish it (a
    rename into the store): what the store holds passed verification, or was built with --no-verify. A
    failed verification keeps the folder in failures/ instead, to look at, and publishes nothing."""
    from buildctl.pipeline.stages import compile as compile_stage

    spec, opts, key = ctx.spec, ctx.opts, built.prepared.key
    with artifacts.staging(spec.name, key, opts.artifacts_root) as staging:
        out_dir = Path(tempfile.mkdtemp(prefix="buildctl-out-"))
        try:
            steps.prior = _eta_prior(ctx)
            steps.start("source")  # then configure, compile, wheel, from the script's step lines
            configured = compile_stage.configure(ctx, built, out_dir)  # stops here when CMake dropped a feature
            compiled = compile_stage.compile(ctx, configured, out_dir)
            steps.finish()
            steps.start("publish")
            manifest = artifact.assemble(ctx, compiled, staging, dict(steps.durations))
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
        steps.finish()
        verified, verify_error = (_verify(ctx, steps, Published(spec.name, key, staging, manifest, cached=False),
                                          context_dir) if opts.verify else (None, None))
        if verify_error is not None:
            from buildctl.pipeline.stages import failure

            kept, verify_error = failure.keep_unverified(ctx, staging, verify_error)
            return Published(spec.name, key, kept, manifest, cached=False, stored=False), (None, verify_error)
        published = artifact.publish(ctx, staging, manifest)
    if verified is not None:  # verified in the staging folder: its report names the published one
        from buildctl.verify import report_files

        verified = Verified(report_files.relocate(verified.report, staging, published.artifact), cached=False)
    return published, (verified, None)


def _eta_prior(ctx: Run) -> eta_prior.Prior:
    """The earlier build whose step costs weight the compile's ETA, named in the build log."""
    from buildctl.pipeline import eta_prior

    prior = eta_prior.find(ctx.spec, ctx.opts.artifacts_root, log=ctx.log)
    ctx.log(prior.note())
    return prior


def _image_only(ctx: Run, steps: Steps, built: ImageBuilt) -> PartialResult:
    """`--until image`: the builder image is built (its Dockerfile checked the toolchain's pins); nothing
    is fetched or compiled, and what pip installed in it is listed for the user to compare."""
    spec, key = ctx.spec, built.prepared.key
    out_dir = ctx.opts.render_root / ".until" / spec.name / key / "image"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    (out_dir / "image.txt").write_text(filtered(f"{image_tag(spec.name, key, ctx.namespace)} {built.image_id}\n"))
    (out_dir / "build.log").write_text(filtered(ctx.log.text()) + "\n")
    work, _ = volume_names(spec, key, ctx.namespace)
    return PartialResult(spec.name, key, "image", out_dir, work, dict(steps.durations))


def _build_until(ctx: Run, steps: Steps, built: ImageBuilt) -> PartialResult:
    """Run the build script up to opts.until in the key's build directory; keep what it produced."""
    from buildctl.pipeline.stages import compile as compile_stage

    spec, opts, key = ctx.spec, ctx.opts, built.prepared.key
    # outside the render folder, and per key: two --until builds of one recipe never share it
    out_dir = opts.render_root / ".until" / spec.name / key / opts.until
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    steps.prior = _eta_prior(ctx)
    steps.start("source")
    configured = compile_stage.configure(ctx, built, out_dir)
    if opts.until != "configure":
        compile_stage.compile(ctx, configured, out_dir)
    steps.finish()
    (out_dir / "build.log").write_text(filtered(ctx.log.text()) + "\n")
    work, _ = volume_names(spec, key, ctx.namespace)
    return PartialResult(spec.name, key, opts.until, out_dir, work, dict(steps.durations), configured.gate)


def _verify(ctx: Run, steps: Steps, published: Published,
            context_dir: Path) -> tuple[Verified | None, VerificationFailed | None]:
    """The stored report of an unchanged artifact, else a verification in a fresh container; a
    failed one is diagnosed (the wheel is published all the same)."""
    from buildctl.pipeline.stages import verify as verify_stage
    from buildctl.verify.report import VerificationFailed

    stored = verify_stage.stored_report(published, ctx.spec) if published.cached else None
    if stored is not None:  # a no-op starts no container: the artifact passed verification already
        steps.skip("verify", "cached")
        return Verified(stored, cached=True), None
    steps.start("verify")
    try:
        own = verify_stage.OwnBuild(context_dir, secrets=ctx.secrets, namespace=ctx.namespace)
        verified = verify_stage.verify(ctx.spec, published, client=ctx.client, on_line=ctx.log, own=own,
                                       options=ctx.opts.verify_options, console=steps.view.console)
    except VerificationFailed as e:  # built and published, but not what the recipe asks for
        steps.finish("failed")
        from buildctl.pipeline.stages import failure

        return None, failure.verification_failed(published, e)
    except BaseException:
        steps.finish("failed")
        raise
    steps.finish()
    return verified, None
