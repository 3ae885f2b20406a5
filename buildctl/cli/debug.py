"""`invoke debug`: Python run against a recipe's artifact under gdb, the crash's backtrace printed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from invoke.exceptions import Exit

from buildctl.cli.common import command, console, load_spec, out, print_json, recipes_dir, site_options
from buildctl.errors import InputError
from buildctl.settings import Settings
from buildctl.terminal_text import strip_controls


def _artifact_of(spec, artifact: str | None, key: str | None, settings: Settings) -> Path:
    """The artifact folder to debug (--artifact, else the one of the key the request names: its key now, or
    --key; never the recipe's newest), refused in one line when it is none, another recipe's, or holds no
    wheel of its own framework."""
    from buildctl.pipeline.published import request_artifact
    from buildctl.store import artifacts
    from buildctl.store.manifest import Manifest

    if artifact is not None and key is not None:
        raise InputError("--artifact and --key both name an artifact; fix: give one of them")
    if artifact is None:
        found = request_artifact(spec, key=key, root=settings.artifacts,
                                 engine_url=settings.engines[0] if settings.engines else None,
                                 environ=settings.environ())
    else:
        found = Path(artifact)
        if not artifacts.is_published(found):
            raise InputError(f"--artifact {artifact}: not an artifact folder (no manifest.json); fix: give "
                             f"artifacts/{spec.name}/<key>, or leave --artifact out for this request's own")
    fix = f"fix: rebuild it (invoke build --recipe {spec.name})"
    manifest = Manifest.read(found, fix)
    if manifest.recipe != spec.name:
        raise InputError(f"{found} is an artifact of {manifest.recipe}, not of {spec.name}; fix: --recipe "
                         f"{manifest.recipe}")
    own = manifest.framework_wheel
    if own is None:
        raise InputError(f"{found} holds no wheel of its own framework (a prebuilt one): nothing of it was built "
                         "with debug info; fix: debug a recipe that builds its framework")
    if "/" in own.file or own.file in (".", "..") or not (found / own.file).is_file():
        raise InputError(f"{found}/manifest.json names no wheel file beside it ({ascii(own.file[:100])}); {fix}")
    return found.resolve()


def debug_recipe_of(name: str) -> str | None:
    """A recipe beside `name` that extends it with build.type Debug (the one to build for file:line)."""
    import yaml

    from buildctl.recipe import loader

    for path in loader.list_recipes(recipes_dir()):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # a broken neighbour is not this command's business
        build = data.get("build") if isinstance(data, dict) else None
        if data and data.get("extends") == f"{name}.yaml" and isinstance(build, dict) and build.get("type") == "Debug":
            return path.stem
    return None


@dataclasses.dataclass(frozen=True)
class DebugRequest:
    """What `invoke debug` is asked: the recipe (and --set), which artifact, the program (--code or
    --script), its time limit, or a shell."""

    recipe: str | None = None
    sets: tuple[str, ...] = ()
    artifact: str | None = None
    key: str | None = None
    code: str | None = None
    script: str | None = None
    timeout: float = 600.0
    shell: bool = False


@command
def debug(request: DebugRequest, *, settings: Settings, as_json: bool) -> None:
    from buildctl.pipeline import published
    from buildctl.verify import debug_report
    from buildctl.verify.debug import Program, check_timeout

    if request.shell and as_json:
        raise InputError("--shell opens an interactive terminal, which has no JSON; fix: leave out --json")
    # bad input refused before the recipe, the artifact or the engine; a shell may start with no program
    bare_shell = request.shell and request.code is None and request.script is None
    program = None if bare_shell else Program.of(request.code, request.script)
    timeout = check_timeout(request.timeout)
    spec, _ = load_spec(request.recipe or "", list(request.sets), base_image=settings.base_image,
                        site=site_options(settings), preflight=False)
    found = _artifact_of(spec, request.artifact, request.key, settings)
    cache_dir = settings.cache_dir

    def on_line(line: str) -> None:
        console.print(f"  {strip_controls(line)}", style="dim", markup=False, highlight=False)

    if request.shell:
        raise Exit(code=published.debug_artifact(spec, found, program, timeout=timeout, cache_dir=cache_dir,
                                                environ=settings.environ(), shell=True, on_line=on_line))
    result = published.debug_artifact(spec, found, program, timeout=timeout, cache_dir=cache_dir,
                                      environ=settings.environ(), on_line=on_line)
    if result.crashed and not result.has_lines and result.facts.get("build_type") != "Debug":
        result = dataclasses.replace(result, facts={**result.facts, "debug_recipe": debug_recipe_of(spec.name)})
    if as_json:
        print_json(result.to_dict())
    if not result.crashed:
        console.print(debug_report.not_crashed_line(result), markup=False, highlight=False, soft_wrap=True)
        raise Exit(code=1)
    if not as_json:
        for line in debug_report.text_lines(result):
            out.print(line, markup=False, highlight=False)
