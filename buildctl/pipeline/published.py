"""What runs against an artifact published before, on its own: `invoke verify --recipe R`, `invoke publish
--recipe R` and `invoke debug`. The artifact is the one of the key the request names (`request_artifact`: the
key a build of the request has now, or `--key K`), never the recipe's newest; it is held under its key's lock,
shared, as a build that finds it holds it, and served only while its wheels are those its manifest records."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from buildctl import engine
from buildctl.errors import InputError
from buildctl.pipeline.engine_names import work_volume_name
from buildctl.pipeline.pipeline import LOCK_SLACK_S
from buildctl.pipeline.stages import artifact
from buildctl.recipe.schema import Spec
from buildctl.store import artifacts
from buildctl.verify.options import VerifyOptions

if TYPE_CHECKING:
    from rich.console import Console

KEY = re.compile(r"[0-9a-f]{16}")  # store.key.KeyInputs.key


def request_artifact(spec: Spec, *, key: str | None = None, root: Path | None = None,
                     engine_url: str | None = None, environ: Mapping[str, str]) -> Path:
    """The artifact folder of the key the request names: `key` (--key) when given, else the key a build of
    `spec` has now (`invoke build --dry-run`'s: the engine is asked for the base image's id, nothing is built or
    pulled). InputError in one line when the store holds none, naming the recipe's newest and how to take it.
    `environ`: the command's (BuildOptions.environ of the dry run)."""
    from buildctl.pipeline.dry_run import dry_run
    from buildctl.pipeline.stages import BuildOptions
    from buildctl.store import key as key_mod

    root = artifacts.root_or_default(root)
    if key is not None:
        if not KEY.fullmatch(key):
            raise InputError(f"--key {key}: not an artifact key (16 hex digits); fix: a key as `invoke build` or "
                             f"`--dry-run` prints it, e.g. the folder name in {root}/{spec.name}/")
        found = artifacts.artifact_dir(spec.name, key, root)
        if not artifacts.is_published(found):
            raise InputError(f"--key {key}: no artifact of {spec.name} with that key in {root}/; fix: a folder name "
                             f"of {root}/{spec.name}/, or leave --key out for this request's own")
    elif artifacts.newest(spec.name, root) is None:  # said without asking the engine for the key
        raise InputError(f"no artifact of {spec.name} yet; fix: invoke build --recipe {spec.name}")
    else:
        look = dry_run(spec, BuildOptions(artifacts_root=root, engine_url=engine_url, environ=environ))
        found = artifacts.artifact_dir(spec.name, look.key, root)
        if not artifacts.is_published(found):
            newest = artifacts.newest(spec.name, root)
            since = (f"; the newest, {newest.name}, differs: {key_mod.describe(look.changed)}" if newest is not None
                     and look.changed else f"; the newest is {newest.name}" if newest is not None else "")
            take = f", or --key {newest.name} to take the newest" if newest is not None else ""
            raise InputError(f"no artifact of {spec.name} for this request (key {look.key}){since}; fix: invoke build "
                             f"--recipe {spec.name} (with the same --set){take}")
    artifacts.record_use({"artifact": [f"{spec.name}/{found.name}"]}, root)
    return found


@contextlib.contextmanager
def published_artifact(spec: Spec, artifact_dir: Path, on_line=None):
    """A published artifact found on its own, under its key's lock, shared, as a build that finds it."""
    recipe, key = artifact_dir.parent.name, artifact_dir.name
    with artifacts.key_lock(recipe, key, artifact_dir.parent.parent, shared=True, on_wait=on_line,
                            timeout=spec.build.timeout_s + LOCK_SLACK_S):
        if not artifacts.is_published(artifact_dir):
            raise InputError(f"{artifact_dir} was removed meanwhile (by invoke clean?); fix: invoke build --recipe "
                             f"{spec.name}")
        problem = artifacts.unvouched(artifact_dir)
        if problem is not None:
            raise InputError(f"{problem}; fix: rebuild it: invoke build --recipe {spec.name}")
        yield artifact.found(recipe, key, artifact_dir)


def verify_artifact(spec: Spec, artifact_dir: Path, *, on_line, console: Console,
                    options: VerifyOptions | None = None, client=None):
    """`invoke verify --recipe R`: verify a published artifact on its own, from what its manifest
    records (the runtime image's context); on the engine of `client` (None: the one options.environ names);
    its report printed on `console`, the command's."""
    from buildctl.pipeline.stages import verify as verify_stage

    with published_artifact(spec, artifact_dir, on_line) as published:
        return verify_stage.verify(spec, published, on_line=on_line, options=options or VerifyOptions(), console=console,
                                   client=client).report


def debug_artifact(spec: Spec, artifact_dir: Path, program, *, on_line, timeout: float, cache_dir: Path,
                   environ: Mapping[str, str], shell: bool = False):
    """`invoke debug`: `program` (verify.debug.Program) under gdb against a published artifact's wheel, in
    a fresh container of its runtime image (as verification builds it); the DebugResult. `shell`: that
    container interactive instead, with the build directory's sources; the shell's exit code. `environ`:
    the command's (the engine it names, what the shell's `docker run` starts from)."""
    from buildctl.pipeline.stages import verify as verify_stage
    from buildctl.verify import debug
    from buildctl.verify.targets import RuntimeImage

    with published_artifact(spec, artifact_dir, on_line) as published:
        manifest = published.manifest
        client = engine.connect(environ=environ)
        image, namespace = verify_stage.artifact_runtime_image(spec, published, client=client, on_line=on_line)
        facts = {"recipe": manifest.recipe, "key": published.key, "build_type": manifest.build_type,
                 "artifact": str(artifact_dir), "image": image}
        wheel = artifact_dir / manifest.framework_wheel.file
        runtime = RuntimeImage(spec, image, namespace, client, artifact_dir.parent.parent)
        if shell:
            return debug.open_shell(wheel, program, runtime=runtime, on_line=on_line, cache_dir=cache_dir,
                                    environ=environ, volume=work_volume_name(spec.name, published.key, namespace))
        return debug.run_program(wheel, program, runtime=runtime, on_line=on_line, timeout=timeout,
                                 cache_dir=cache_dir, facts=facts)


def test_artifact(spec: Spec, artifact_dir: Path, command: str, *, on_line, cache_dir: Path, timeout: float,
                  environ: Mapping[str, str], engine_url: str | None = None):
    """`invoke bisect --test`: a shell command against a published artifact's wheels in a fresh container of
    its runtime image (as verification builds it); its CommandResult (the exit code decides). `environ`: the
    command's (the engine it names)."""
    from buildctl.pipeline.stages import verify as verify_stage
    from buildctl.verify.command import run_command
    from buildctl.verify.targets import RuntimeImage

    with published_artifact(spec, artifact_dir, on_line) as published:
        client = engine.connect(engine_url, environ=environ)
        image, namespace = verify_stage.artifact_runtime_image(spec, published, client=client, on_line=on_line)
        own = published.manifest.framework_wheel
        return run_command(command, artifact=artifact_dir, wheel=artifact_dir / own.file if own else None,
                           runtime=RuntimeImage(spec, image, namespace, client, artifact_dir.parent.parent),
                           cache_dir=cache_dir,
                           on_line=on_line, timeout=timeout)
