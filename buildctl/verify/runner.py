"""`invoke verify`: install a wheel somewhere fresh, run probe.py there, judge, report.

Never the build environment: by default a fresh container of a runtime image (the recipe's, or a
minimal Python image made from the recipe's base), with `host=True` a fresh venv in a temp dir on
this machine. Either way the wheel is installed from the host file, its dependencies from a
wheelhouse that the host's pip fills once per (requirements, Python, platform) and that is copied
in: the target needs no network and no index, and the exact wheel under test is what gets installed.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from buildctl.errors import InputError
from buildctl.recipe.compat import PYTHON_BY_DISTRO
from buildctl.recipe.schema import Spec
from buildctl.settings import DEFAULT_CACHE_DIR
from buildctl.store.artifacts import is_published, sha256_of
from buildctl.store.wheel_facts import WheelFacts, wheel_tags
from buildctl.terminal_text import strip_controls
from buildctl.verify import report as rep
from buildctl.verify import report_files
from buildctl.verify.expectations import Expectations, evaluate, summary_line, verdict
from buildctl.verify.options import VerifyOptions, connected
from buildctl.verify.report import VerificationFailed
from buildctl.verify.targets import (
    DEFAULT_BASE_IMAGE,
    VenvContents,
    run_in_container,
    run_on_host,
)
from buildctl.verify.wheelhouse import DISTRO_GLIBC, host_glibc, manylinux_platforms, prepare_wheelhouse

# Installed next to the wheel when they can be had; the probe degrades gracefully without them.
OPTIONAL_TOOLS = ("nvidia-ml-py",)
CUDA_TOOLS = ("nvidia-cuda-cuobjdump",)  # cuobjdump for the arch coverage (nvidia/cu13/bin)
MODULES = {"pytorch": "torch", "torch": "torch", "demofw": "demofw"}


# --------------------------------------------------------------------------- probe invocation


# probe.py --compile-matrix: the smoke set of cells, the whole cross, or none (the wheel's facts and the all-reduce
# without minutes of inductor compiles)
COMPILE_MATRICES = ("smoke", "full", "none")


def probe_args(options: VerifyOptions, out: str) -> list[str]:
    """probe.py's arguments, `options` resolved (module, sweep: `resolved`)."""
    args = ["--module", options.module, "--out", out]
    if options.sweep:
        args += ["--sweep", "--sizes", options.sizes, "--iters", str(options.iters), "--warmup", str(options.warmup)]
    if options.compile_matrix != "smoke":
        args += ["--compile-matrix", options.compile_matrix]
    return args


def check_compile_matrix(compile_matrix: str) -> None:
    if compile_matrix not in COMPILE_MATRICES:
        raise InputError(f"--compile-matrix {ascii(compile_matrix[:40])[1:-1]}: not a set of cells; fix: "
                         f"--compile-matrix {' or '.join(COMPILE_MATRICES)}")


def check_sizes(sizes: str) -> None:
    from buildctl.in_container.probe_sweep import parse_sizes

    try:
        parse_sizes(sizes)
    except ValueError as e:
        raise InputError(f"--sizes: {e}") from None


def check_probe_options(options: VerifyOptions) -> None:
    """The probe's --sizes, --iters, --warm-up and --compile-matrix, each refused in one line when malformed."""
    check_sizes(options.sizes)
    if options.iters < 1 or options.warmup < 0:
        raise InputError("--iters must be >= 1 and warm-up >= 0")
    check_compile_matrix(options.compile_matrix)


def resolved(options: VerifyOptions, spec: Spec | None, module: str, **more) -> VerifyOptions:
    """`options` with the defaults only a run can know filled in, once: the module, the sweep (the recipe's
    verify.allreduce when not given; on without a recipe) and the download cache; `more` set as well."""
    sweep = options.sweep
    if sweep is None:
        sweep = spec.verify.allreduce if spec is not None else True
    cache_dir = Path(options.cache_dir or DEFAULT_CACHE_DIR)
    return replace(options, module=module, sweep=sweep, cache_dir=cache_dir, **more)


def console_lines(console: Console) -> Callable[[str], None]:
    """Where a run's output lines go: `console`, indented and dim, never read as markup."""

    def on_line(line: str) -> None:
        console.print(f"  {strip_controls(line)}", style="dim", markup=False, highlight=False)

    return on_line


def timed(run: Callable[[], tuple[dict, dict]]) -> tuple[dict, dict]:
    """run()'s (probe JSON, environment facts), the facts given the seconds it took."""
    t0 = time.monotonic()
    probe, environment = run()
    environment["seconds"] = round(time.monotonic() - t0, 1)
    return probe, environment


# --------------------------------------------------------------------------- entry point


def default_out_dir(wheel: Path) -> Path:
    """Beside the artifact when that folder is writable, else artifacts/verify/<wheel>/ here."""
    if os.access(wheel.parent, os.W_OK):
        return wheel.parent
    return Path("artifacts") / "verify" / wheel.name[: -len(".whl")]


def verify_wheel(
    wheel: Path | None,
    *,
    spec: Spec | None = None,
    options: VerifyOptions | None = None,
    image: str | None = None,
    out_dir: Path | None = None,
    artifact: Path | None = None,
    client=None,
    console: Console,
) -> rep.Report:
    """Verify `wheel`; write report.json/.md/.png to `out_dir`; print its progress and tables on `console`, the
    caller's (with options.json_out one line instead of the tables: the report's JSON is the caller's to print).

    `artifact`: the artifact folder whose manifest lists extensions built against `wheel`: they are
    installed beside it and checked (verify/extensions.py), with the `options.beside` packages (NAME==VERSION).

    `options.runtime_requirements`: with options.host, the pip packages the recipe's runtime image holds
    (its artifact's manifest records them: runtime.requirements).
    Raises VerificationFailed (one line, with the report) when an expectation fails, InputError for
    bad arguments.
    """
    options = options or VerifyOptions()
    if wheel is None:  # a prebuilt framework: its extension set only
        return _verify_prebuilt(spec=spec, image=image, options=options, out_dir=out_dir, console=console,
                                client=client, artifact=artifact)
    wheel = Path(wheel).resolve()
    module, python = _module_and_python(wheel, spec, image, options)
    check_probe_options(options)
    # Its facts read once (one bounded read of an untrusted zip, before pip or anything else opens it) and passed
    facts = WheelFacts.read(wheel)
    out_dir = Path(out_dir) if out_dir else default_out_dir(wheel)
    options = resolved(options, spec, module)
    on_line = console_lines(console)
    cuda = facts.is_cuda(spec)
    plats = manylinux_platforms(_target_glibc(spec, options.host), platform.machine())
    ext_set = _extension_set(spec, artifact, python, plats, options, on_line)
    reqs = _requirements(options, ext_set)
    where = "fresh venv on this host" if options.host else "fresh container"
    console.print(f"[bold]verify[/] {escape(wheel.name)} ({where})")
    optional = [*OPTIONAL_TOOLS, *(CUDA_TOOLS if cuda else ())]
    wheelhouse, have_optional = prepare_wheelhouse(facts, reqs, optional, python, plats, options.cache_dir, on_line)
    venv = VenvContents(wheel, wheelhouse, reqs + have_optional, python, ext_set)
    if not options.host:

        client = connected(client, options)
    probe, environment = timed(lambda: _probe_wheel(venv, image, spec, options, on_line, client, cuda))

    exp = Expectations.from_spec(spec) if spec is not None else Expectations.from_wheel_name(wheel.name)
    checks = _checks(exp, probe, environment)
    if not options.host and artifact is not None:  # a repaired wheel, also where none of its build's packages are
        checks += _portable_checks(artifact, facts, spec, client=client, plats=plats, on_line=on_line, options=options)
    report = rep.Report(
        wheel={"path": str(wheel), "name": wheel.name, "size": wheel.stat().st_size, "sha256": sha256_of(wheel)},
        mode="host" if options.host else "container", module=module, environment=environment,
        expectations=exp.to_dict(), checks=checks, probe=probe, verdict=verdict(probe),
        spec=spec_facts(spec),
    )
    return publish_report(report, out_dir, options, console)


def _module_and_python(wheel: Path, spec: Spec | None, image: str | None, options: VerifyOptions) -> tuple[str, str]:
    """The module the probe imports and the CPython version of `wheel` (the recipe's, else its tags'); InputError
    when neither can be told, when they disagree, or when the default image's Python is not the wheel's."""
    if not wheel.is_file():
        raise InputError(f"{wheel}: no such wheel; fix: give the path of a .whl file")
    tags = wheel_tags(wheel)
    module = options.module
    if module is None:
        module = MODULES.get(spec.framework.name if spec else tags["name"])
        if module is None:
            raise InputError(f"cannot tell the module of {wheel.name}; fix: pass module='torch' or 'demofw'")
    python = spec.python.version if spec else tags["python"]
    if python is None:
        raise InputError(f"{wheel.name} names no CPython version; fix: verify with a recipe (--recipe)")
    if tags["python"] and tags["python"] != python:
        raise InputError(f"{wheel.name} is for Python {tags['python']}, the recipe's Python is {python}; "
                         "fix: verify the wheel built by this recipe")
    if not options.host and spec is None and image is None and python != PYTHON_BY_DISTRO["bookworm"]:
        raise InputError(f"{wheel.name} needs Python {python} and the default verification image "
                         f"({DEFAULT_BASE_IMAGE}) has Python {PYTHON_BY_DISTRO['bookworm']}; fix: --recipe with a "
                         f"matching base, or --host with python{python} installed")
    return module, python


def _target_glibc(spec: Spec | None, host: bool) -> tuple[int, int]:
    """The glibc where the probe runs: this host's, else the distro's of the recipe's base (Debian bookworm's)."""
    if host:
        return host_glibc()
    return DISTRO_GLIBC.get(spec.base.distro if spec else "bookworm", (2, 17))


def _requirements(options: VerifyOptions, ext_set) -> list[str]:
    """What is installed beside the wheel: numpy for torch, the extra requirements, with options.host the
    recipe's runtime pip packages (in its image otherwise), and the extension set's requirements."""
    reqs = [*(["numpy"] if options.module == "torch" else []), *options.extra_requirements]
    if options.host:
        reqs += [p for p in options.runtime_requirements if p not in reqs]
    if ext_set is not None:
        reqs += [r for r in ext_set.requirements if r not in reqs]
    return reqs


def _probe_wheel(venv: VenvContents, image: str | None, spec: Spec | None, options: VerifyOptions, on_line,
                 client, cuda: bool) -> tuple[dict, dict]:
    """The probe of `venv`'s wheel in a fresh venv on this host (options.host) or in a fresh container (given
    the GPUs for a CUDA wheel where its engine has them); (probe JSON, environment facts)."""
    if options.host:
        return run_on_host(venv.wheel, venv.wheelhouse, venv.requirements, venv.python, partial(probe_args, options),
                           on_line, options.timeout, options.environ)
    return run_in_container(venv, image, spec, partial(probe_args, options), on_line,
                            gpus=cuda and engine_gives_gpus(client), options=options, client=client)


def _extension_set(spec: Spec | None, artifact: Path | None, python: str, plats: Sequence[str],
                   options: VerifyOptions, on_line):
    """The artifact's extensions (and the --beside packages) to install beside the framework, or None.
    `options` resolved (module, cache_dir)."""
    from buildctl.store.manifest import Manifest
    from buildctl.verify import extensions

    manifest = Manifest.read(artifact) if artifact is not None and is_published(artifact) else None
    beside = options.beside
    if (manifest is None or manifest.extensions is None) and not beside:
        return None
    if options.host:
        raise InputError("an extension set (or --beside) is verified in a container of the runtime image, where "
                         "binutils reads its symbols; fix: drop --host")
    beside_wheels = extensions.fetch_beside(beside, python, plats, options.cache_dir, on_line)
    smoke = {e.name: e.smoke for e in spec.extensions} if spec is not None else {}
    return extensions.from_artifact(artifact, manifest, options.module, smoke, python, beside_wheels)


def _portable_checks(artifact: Path, wheel: WheelFacts, spec: Spec | None, **kwargs) -> list:
    """verify/portable.py's check, when the artifact's manifest records a repair of this wheel."""
    from buildctl.store.manifest import Manifest
    from buildctl.verify import portable

    if not is_published(artifact):
        return []
    return portable.checks(Manifest.read(artifact), wheel, spec, **kwargs)


def _checks(exp: Expectations, probe: dict, environment: dict, subject: str = "wheel") -> list:
    """The framework's checks, then (with an extension set) one per extension, its results in the probe's."""
    from buildctl.verify import extensions

    checks = evaluate(exp, probe, subject=subject)
    found = environment.pop("extensions", None)
    if found is not None:
        probe["extensions"] = found
        checks += extensions.checks(found)
    return checks


def _verify_prebuilt(*, spec: Spec | None, image: str | None, options: VerifyOptions, out_dir: Path | None,
                     console: Console, client, artifact: Path | None) -> rep.Report:
    """A prebuilt framework's extension set, in a fresh container of the recipe's runtime image: the
    framework as the image has it (probed like a wheel), the set installed beside it and checked."""

    if spec is None or image is None or artifact is None:
        raise InputError("a prebuilt framework's extension set is verified from its artifact; fix: invoke verify "
                         "--recipe R")
    module, python = spec.framework.dist, spec.python.version
    out_dir = Path(out_dir) if out_dir else artifact
    options = resolved(options, spec, module, host=False)
    check_sizes(options.sizes)
    on_line = console_lines(console)
    plats = manylinux_platforms(_target_glibc(spec, host=False), platform.machine())
    ext_set = _extension_set(spec, artifact, python, plats, options, on_line)
    console.print(f"[bold]verify[/] the extension set of {escape(spec.name)} against {module} as {escape(image)} "
                  "has it (fresh container)")
    wheelhouse, have_optional = prepare_wheelhouse(None, list(ext_set.requirements), OPTIONAL_TOOLS, python, plats,
                                                   options.cache_dir, on_line)
    client = connected(client, options)
    venv = VenvContents(None, wheelhouse, (*ext_set.requirements, *have_optional), python, ext_set)
    probe, environment = timed(lambda: run_in_container(venv, image, spec, partial(probe_args, options), on_line,
                                                        gpus=engine_gives_gpus(client), options=options, client=client))
    exp = Expectations.from_spec(spec)
    ident = image_id(client, image)
    report = rep.Report(
        wheel=None, image={"reference": image, "id": ident, "python": f"{spec.python.venv}/bin/python"},
        mode="container", module=module, environment=environment, expectations=exp.to_dict(),
        checks=_checks(exp, probe, environment, subject="image"), probe=probe, verdict=verdict(probe),
        spec=spec_facts(spec))
    return publish_report(report, out_dir, options, console)


def engine_gives_gpus(client) -> bool:
    """Whether containers of the engine that runs the verification get GPUs (--gpus all): that engine's
    own fact, its NVIDIA runtime (`docker info` Runtimes), for a local engine as for a remote one; never
    this host's NVML, which says nothing of an engine elsewhere nor of the runtime here."""
    from buildctl import engine

    return bool(engine.engine_facts(client).get("nvidia_runtime"))


def spec_facts(spec: Spec | None) -> dict | None:
    """The recipe a report was made against, with what decides whether it still holds for a later build of
    the same artifact (pipeline.stages.verify.stored_report): the resolved recipe's digest (site settings aside:
    verify.expect included) and the verification files' digest."""
    if spec is None:
        return None
    from buildctl.in_container import verification_files_sha256
    from buildctl.recipe.loader import spec_hash

    return {"name": spec.name, "accelerator": spec.accelerator, "framework": spec.framework.name,
            "sha256": spec_hash(spec), "checks_sha256": verification_files_sha256()}


def publish_report(report: rep.Report, out_dir: Path, options: VerifyOptions, console: Console) -> rep.Report:
    """Write report.json/.md/.png, append the step summary (options.step_summary), print its tables on `console`
    (with options.json_out its outcome in one line: the caller prints the JSON); VerificationFailed (with the
    report) when a check failed."""
    report_files.write_all(report, out_dir)
    report_files.append_step_summary(report, options.step_summary)
    if options.json_out:
        console.print(f"{'passed' if report.ok else 'FAILED'}: {summary_line(report.checks)}; "
                      f"{rep.headline_text(report)}", markup=False, highlight=False)
    else:
        rep.render(report, console)
    if not report.ok:
        raise VerificationFailed(f"{report.subject}: {summary_line(report.checks)} (report: {report.files['json']})",
                                 report=report)
    return report


def image_id(client, reference: str) -> str:
    """The id (sha256:...) of a local image; InputError when the engine does not have it (never pulled)."""
    return str(inspect_image(client, reference)["Id"])


def inspect_image(client, reference: str) -> dict:
    from buildctl import engine

    facts = engine.inspect_image(client, reference)
    if facts is None:
        raise InputError(f"image {reference} is not in the Docker engine, and buildctl never pulls; fix: "
                         f"`docker pull {reference}` (or docker load / docker build it) first")
    return facts
