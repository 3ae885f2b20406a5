"""`invoke verify`: a recipe's artifact (the one of the key the request names: its key now, or --key), a wheel
(in a fresh container or on this host), or an existing image."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from buildctl.cli.common import command, console, load_spec, print_json, site_options
from buildctl.errors import InputError
from buildctl.settings import Settings
from buildctl.terminal_text import strip_controls
from buildctl.verify.options import VerifyOptions

if TYPE_CHECKING:
    from buildctl.verify.report import Report


def _request_artifact(spec, key: str | None, settings: Settings) -> Path:
    """The artifact of the key the request names, never the recipe's newest (pipeline.published)."""
    from buildctl.pipeline.published import request_artifact

    return request_artifact(spec, key=key, root=settings.artifacts,
                            engine_url=settings.engines[0] if settings.engines else None, environ=settings.environ())


def _artifact_wheel(artifact: Path) -> Path:
    """The wheel an artifact's manifest names: a plain file name inside the artifact folder."""
    from buildctl.store.manifest import Manifest

    fix = "fix: rebuild it (invoke build), or give the wheel with --wheel"
    manifest = Manifest.read(artifact, fix)
    name = manifest.wheels[0].file if manifest.wheels else None
    if not name or "/" in name or name in (".", ".."):
        raise InputError(f"{artifact}/manifest.json names no wheel file (wheels[0].file); {fix}")
    return artifact / name


def _printed(verification: Callable[[Console], Report], json_out: bool) -> None:
    """`verification` run with the console its progress and tables print on (stdout, or stderr when stdout carries
    the JSON); with --json its report then printed on stdout, passed or failed."""
    from buildctl.verify.report import VerificationFailed

    try:
        report = verification(Console(stderr=json_out))
    except VerificationFailed as e:
        if json_out and e.report is not None:  # judged: the report says what failed
            print_json(e.report.to_dict())
        raise
    if json_out:
        print_json(report.to_dict())


@dataclass(frozen=True)
class VerifyRequest:
    """What `invoke verify` is asked to verify: a recipe's artifact (of the request's key, or `key`), a wheel, or
    an image (with the image's Python and expectations)."""

    recipe: str | None = None
    key: str | None = None
    wheel: str | None = None
    sets: tuple[str, ...] = ()
    image: str | None = None
    python: str | None = None
    expect: tuple[str, ...] = ()


@command
def verify(request: VerifyRequest, *, options: VerifyOptions, settings: Settings,
           engine_url: str | None = None) -> None:
    """`engine_url`: the engine a recipe's artifact is verified on (a multi-recipe build's verification on
    another engine, cli/child.py); None: DOCKER_HOST's."""
    from buildctl import engine
    from buildctl.pipeline import published
    from buildctl.pipeline.stages.artifact import recorded_requirements
    from buildctl.verify import runner

    recipe, wheel, sets, host = request.recipe, request.wheel, list(request.sets), options.host
    if options.beside and (request.image is not None or wheel or host or not recipe):
        raise InputError("--beside installs packages beside a recipe's artifact (its torch and extensions); fix: "
                         "invoke verify --recipe R --beside NAME==VERSION")
    runner.check_compile_matrix(options.compile_matrix)
    if request.image is not None:
        return _verify_image(request, options, settings)
    if request.python or request.expect:
        raise InputError(f"{'--python' if request.python else '--expect'} is for --image; fix: add --image IMAGE, or "
                         "put a wheel's expectations in its recipe (--recipe R, --set verify.expect.cuda=12.4)")
    if not recipe and not wheel:
        raise InputError("give --recipe R (its artifact), --wheel PATH or --image IMAGE")
    if request.key and (wheel or not recipe):
        raise InputError("--key names an artifact of --recipe R; fix: give --recipe R and --key K, or --wheel alone")
    spec = None
    if recipe:
        spec, _ = load_spec(recipe, sets, base_image=settings.base_image, site=site_options(settings),
                            preflight=False)
    if wheel or host:
        wheel_path = Path(wheel) if wheel else None
        if wheel_path is None:
            wheel_path = _artifact_wheel(_request_artifact(spec, request.key, settings))
        network = spec.site.network if spec else settings.network
        options = replace(options, network_mode=engine.network_mode_for(network))
        if host and spec is not None:  # as the recipe's runtime image has them, from what its build recorded
            requirements = recorded_requirements(wheel_path.resolve().parent, wheel_path)
            options = replace(options, runtime_requirements=tuple(requirements))
        _printed(lambda shown: runner.verify_wheel(wheel_path, spec=spec, options=options, console=shown),
                 options.json_out)
        return
    # The runtime image is built from the context the artifact records (the recipe is not rendered again).
    artifact = _request_artifact(spec, request.key, settings)
    client = engine.connect(engine_url, environ=settings.environ()) if engine_url else None
    _printed(lambda shown: published.verify_artifact(
        spec, artifact, on_line=lambda line: console.print(f"  {strip_controls(line)}", style="dim", markup=False,
                                                           highlight=False),
        options=options, console=shown, client=client), options.json_out)


def _verify_image(request: VerifyRequest, options: VerifyOptions, settings: Settings) -> None:
    from buildctl import engine
    from buildctl.verify import image as image_verify
    from buildctl.verify.expectations import parse_expect

    if request.wheel or options.host:
        raise InputError(f"--image verifies what the image holds; {'--wheel' if request.wheel else '--host'} verifies "
                         "a wheel; fix: give one of them")
    module = options.module or "torch"
    expectations = parse_expect(request.expect, module)  # bad input refused before the engine is asked
    spec = None
    if request.recipe:
        spec, _ = load_spec(request.recipe, list(request.sets), site=site_options(settings), preflight=False)
    elif request.sets:
        raise InputError("--set changes a recipe; fix: add --recipe R, or use --expect key=value")
    network = spec.site.network if spec else settings.network
    options = replace(options, module=module, network_mode=engine.network_mode_for(network),
                      artifacts_root=settings.artifacts)
    _printed(lambda shown: image_verify.verify_image(request.image, python=request.python or "python3",
                                                     expect=expectations, spec=spec, options=options, console=shown),
             options.json_out)
