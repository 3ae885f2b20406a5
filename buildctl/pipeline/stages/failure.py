"""A failure, diagnosed once and carried as a typed error: BuildFailed with its step, diagnosis and
repro bundle; VerificationFailed with its report and diagnosis (also written as diagnosis.json)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from buildctl import engine
from buildctl.errors import BuildctlError, StepFailed
from buildctl.failure import diagnose, repro
from buildctl.failure.diagnose import Diagnosis
from buildctl.pipeline.configure_gate import ConfigureRefused, Gate
from buildctl.pipeline.stages import ImageBuilt, Planned, Prepared, Published, Run
from buildctl.render.rendering import BUILD_COMMAND, Rendered
from buildctl.secrets import filtered, proxy_env
from buildctl.store import artifacts
from buildctl.verify.report import VerificationFailed


def _context(run: Run, max_jobs: int | None) -> dict:
    """What makes a diagnosis's fix concrete (diagnose.diagnose)."""
    spec = run.spec
    context = {"max_jobs": max_jobs, "python": f"{spec.python.venv}/bin/python", "distro": spec.base.distro,
               "recipe": spec.name}
    if spec.toolchain.cuda:
        context.update(cuda_version=spec.toolchain.cuda.major_minor, cuda_arch=list(spec.build.cuda_arch))
    if spec.toolchain.nccl:
        context["nccl_pin"] = spec.toolchain.nccl.version
    return context


# Steps buildctl judges on the host, after the build container (stages.artifact): their StepFailed carries the
# reason, which the build log does not hold.
HOST_STEPS = ("wheel", "extensions")


def build_failed(run: Run, exc: StepFailed, step: str, reached: Rendered | Prepared | Planned | ImageBuilt,
                 durations: Mapping[str, float]) -> BuildFailed:
    """The repro bundle and diagnosis of a step that failed after the pipeline `reached` that record
    (the compile's environment and mounts as it planned them: never worked out again here; before the
    plan, the recipe's proxies, which the fetch used)."""
    built = reached if isinstance(reached, ImageBuilt) else None
    planned = built.planned if built else reached if isinstance(reached, Planned) else None
    prepared = planned.prepared if planned else reached if isinstance(reached, Prepared) else None
    rendered = prepared.rendered if prepared else reached
    max_jobs = exc.max_jobs or (planned.max_jobs if planned else None)
    host_refusal = exc.step in HOST_STEPS and exc.detail
    if host_refusal:  # the build log ends where the container did: the reason goes in it, as an error line
        run.log(f"buildctl: error: {exc.detail}")
    log = run.log.text() if run.log.lines else exc.log
    env = planned.env_with_jobs(max_jobs) if planned else dict(proxy_env(run.spec))
    refused = exc.gate if isinstance(exc, ConfigureRefused) else None
    if refused is not None:  # CMake dropped what the recipe asks: the gate's table says what, not the log
        diag = _gate_diagnosis(refused)
        env["BUILDCTL_UNTIL"] = "configure"  # a replay runs the configure the gate read, and stops there
    elif host_refusal:
        diag = _host_diagnosis(step, exc.detail)
    else:
        diag = diagnose.diagnose(log, step=step, exit_code=exc.returncode, oom_killed=exc.oom_killed,
                                 context=_context(run, max_jobs))
    bundle = repro.write_bundle(
        spec=run.spec,
        rendered=rendered,
        context_dir=prepared.context_dir if prepared else None,
        secrets=run.secrets,
        root=run.opts.artifacts_root,
        failure=repro.FailedStep(step=step, exit_code=exc.returncode, log=log, diagnosis=diag),
        replay=repro.ReplayFacts(
            image_id=built.image_id if built else None,
            command=list(BUILD_COMMAND) if exc.step in ("compile", "configure") else None,
            env=env,
            volumes=dict(planned.mounts) if planned else {},
            network=engine.network_mode_for(run.spec.site.network),
            memory=run.opts.memory,
            namespace=run.namespace,
            engine_name=engine.display_name(run.opts.engine_url or run.opts.environ.get("DOCKER_HOST", "")),
            base_image_id=prepared.base_image_id if prepared and prepared.base_image_id.startswith("sha256:") else None,
        ),
    )
    if refused is not None:  # the whole table beside the bundle's diagnosis: what was judged, shown, not recorded
        artifacts.write_json(bundle / "configure-gate.json", refused.to_dict())
    first = diagnose.first_error(log)
    lines = [f"build of {run.spec.name} failed in step {step} (exit {exc.returncode})"]
    if refused is not None:
        lines.append(refused.message())
    elif host_refusal:  # buildctl's own reason, in full (its fix ends it)
        lines.append(f"step {step} refused on the host: {exc.detail}")
    elif exc.timed_out or exc.step in HOST_STEPS:  # the step's own reason, never in the build log
        lines.append(str(exc))
    elif diag:
        lines.append(diagnose.render_diagnosis(diag))
    elif first:
        lines.append("first error:\n  " + "\n  ".join(first[:20]))
    lines.append(f"repro bundle: {bundle}  (replay: invoke repro {bundle})")
    return BuildFailed("\n".join(lines), step=step, bundle=bundle, diagnosis=diag, durations=durations,
                       key=prepared.key if prepared else None)


def _host_diagnosis(step: str, reason: str) -> Diagnosis:
    """A refusal buildctl made on the host after the container ran (the size guard, no wheel, an extension
    wheel refused) as the bundle's diagnosis: the reason, and its fix when it names one."""
    cause, _, fix = reason.partition("; fix: ")
    return Diagnosis("host-refusal", f"buildctl refused what the build made (step {step})", cause,
                     fix or "see the cause: the build ran, what it left is what buildctl refused", [reason], step)


def _gate_diagnosis(gate: Gate) -> Diagnosis:
    """The configure gate's mismatches as the bundle's (and --json's) diagnosis."""
    bad = gate.mismatches
    return Diagnosis(
        "configure-gate", "CMake dropped or changed what the recipe asks",
        "; ".join(f"{r.fact}: asked {r.asked} ({r.asked_by}), CMake decided {r.decided} ({r.where})" for r in bad),
        "; ".join(f"{r.fact}: {r.fix}" for r in bad), [r.why for r in bad if r.why][:5], "configure")


def verification_failed(published: Published, exc: VerificationFailed) -> VerificationFailed:
    """The known cause of a failed verification (e.g. the wheel loads another NCCL than pinned),
    also recorded beside the artifact as diagnosis.json."""
    diag = None
    if exc.report is not None:
        pins = published.manifest.pins
        diag = diagnose.diagnose("", step="verify", report=exc.report.to_dict(), context={"nccl_pin": pins.get("nccl")})
    if diag is not None:
        artifacts.write_json(published.artifact / "diagnosis.json", diag.to_dict())
    return VerificationFailed(str(exc), report=exc.report, diagnosis=diag)


def keep_unverified(run: Run, staging: Path, exc: VerificationFailed) -> tuple[Path, VerificationFailed]:
    """A built artifact whose verification failed, moved out of the staging folder (it is never published)
    into failures/<recipe>-<time>-unverified/, with a README: the wheel, manifest, build log and report to
    look at. The error names the kept report."""
    import os
    import uuid
    from datetime import datetime, timezone

    base = repro.failures_dir(run.opts.artifacts_root)
    base.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    kept = base / f"{run.spec.name}-{stamp}-{uuid.uuid4().hex[:4]}-unverified"
    staging.chmod(0o755)  # mkdtemp made it private; like an artifact, it is for the team to read
    (staging / "README.md").write_text(filtered(
        f"# {run.spec.name}: built, verification failed, not published\n\n"
        "The build finished and its artifact was verified before it was published; a check failed (report.md\n"
        "says which), so the store holds nothing of this key and `invoke build` builds it again. What the\n"
        "build made is kept here to look at: the wheel, manifest.json, build.log, report.json/.md/.png.\n\n"
        f"Re-check the wheel on its own: `invoke verify --wheel <this folder>/<the .whl> --recipe {run.spec.name}`.\n"))
    os.rename(staging, kept)
    if exc.report is not None:
        from buildctl.verify import report_files

        report_files.relocate(exc.report, staging, kept)
    message = str(exc).replace(str(staging), str(kept))
    return kept, VerificationFailed(f"{message}; not published: kept in {kept}", report=exc.report,
                                    diagnosis=exc.diagnosis)


class BuildFailed(BuildctlError):
    """The build ran and failed in `step`; the diagnosis (None: no known cause) and the repro bundle
    were written."""

    def __init__(self, message: str, *, step: str, bundle: Path, diagnosis: Diagnosis | None,
                 durations: Mapping[str, float] | None = None, key: str | None = None):
        super().__init__(message)
        self.step, self.bundle, self.diagnosis = step, bundle, diagnosis
        self.key = key  # the build's key, once its fetch computed it
        self.durations = dict(durations or {})  # each step's seconds up to the failure
