"""Replaying an opened bundle: rebuild its image, rerun the failing step (or open a shell there), and
say whether the failure reproduced. Only fresh copies of the bundle's own volumes are mounted."""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from buildctl import archive, engine
from buildctl.engine.dockerfile import recorded_base_image_arg
from buildctl.errors import InputError, StepFailed
from buildctl.failure import diagnose
from buildctl.failure.repro.reader import FIX_BUNDLE, SOURCE_CAPS, Bundle
from buildctl.secrets import MASK, checked_argv
from buildctl.store import artifacts, downloads


def preflight(b: Bundle, *, environ: Mapping[str, str], shell: bool = False):
    """Refuse what cannot be replayed here before anything runs; the engine client (None for fetch), of the
    engine `environ` (the command's) names."""
    if shell and b.data.step in ("fetch", "image"):
        raise InputError(f"bundle {b.given}: step {b.data.step} runs no container, so there is no shell to open "
                         "at it; fix: replay it without --shell")
    if b.data.step == "fetch":
        return None
    client = engine.connect(environ=environ)
    for ref in b.bases:
        if not engine.image_exists(client, ref):
            raise InputError(f"bundle {b.given}: context/Dockerfile takes the image {ref}, which is not in the "
                             "engine, and buildctl never pulls; fix: make it with `invoke base-image`, `docker "
                             "load` it, or `docker pull` it yourself if you trust it")
    return client


def summary(b: Bundle, *, shell: bool = False) -> list[str]:
    """What the replay will run, in plain lines (environment values masked), shown before it runs."""
    d = b.data
    lines = [f"bundle {b.given}: {d.recipe} failed in step {d.step} (exit {d.exit_code}); the replay runs:"]
    if d.step == "fetch":
        lines.append("  nothing in Docker: the sha256 of each file in downloads/ is checked against bundle.json")
        return lines
    net = d.network or "default"
    bases = ', '.join(b.bases) or 'nothing'
    if d.base_image_id:  # the base the build used, as _build picks it
        bases = f"base {d.base_image_id} while it has it, else {bases}"
    lines.append(f"  image:   docker build --target {d.target} of the bundle's context/ (network {net}; "
                 f"from the engine's {bases})")
    if d.step == "image":
        return lines
    if shell:
        lines.append(f"  command: bash, interactive (the step's own: {shlex.join(b.command or ['none'])})")
    else:
        lines.append(f"  command: {shlex.join(b.command or [])}" + (", then a look for the wheel in /work/out"
                                                                      if d.step == "wheel" else ""))
    mounts = [f"a fresh volume {name}-repro-… at {path}" for name, path in d.volumes.items()]
    if (b.folder / "source.tar.gz").is_file():
        mounts.append("the bundle's source.tar.gz copied into /work/src")
    lines.append(f"  mounts:  {'; '.join(mounts) or 'none'} (no host folder)")
    lines.append(f"  network: {net}" + (f", memory {d.memory}" if d.memory else ""))
    lines.append(f"  env:     {', '.join(f'{k}={MASK}' for k in d.env) or 'none'}")
    return lines


def replay(b: Bundle, client=None, *, on_line=None) -> dict:
    """Rebuild the image and rerun the failing step; returns {reproduced, exit_code, diagnosis, image_id,
    same_image} (same_image: the rebuilt image is the bundle's image id, layer for layer and label for label)."""
    data = b.data.model_dump()
    lines: list[str] = []

    def sink(line: str) -> None:
        lines.append(line)
        if on_line:
            on_line(line)

    step = b.data.step
    _bundle_used(b)
    if step == "fetch":
        return _replay_fetch(b, data, sink, lines)
    if client is None:
        raise ValueError("replay: a step that runs in the engine takes preflight's client")
    built = _build(b, client, sink)
    if isinstance(built, StepFailed):
        return _outcome(data, "image", built.returncode, "\n".join(lines) or built.log)
    if step == "image":
        return {"reproduced": False, "step": "image", "exit_code": 0, "diagnosis": None,
                "expected": data.get("diagnosis"), **built}
    command = b.command
    assert command is not None  # validated: the script's steps name one, wheel reruns the build
    with _volumes_and_source(b, client) as (volumes, inputs), \
            tempfile.TemporaryDirectory(prefix="buildctl-repro-out-") as out:
        result = engine.run_container(
            client,
            engine.ContainerSpec(
                built["image_id"],
                command,
                env=b.data.env,
                inputs=inputs or None,
                volumes=volumes,
                network_mode=b.data.network,
                mem_limit=b.data.memory,
                outputs={"/work/out": Path(out)} if step == "wheel" else None,
                labels={"buildctl.step": "repro"},
            ),
            on_line=sink,
        )
        exit_code = result.exit_code
        if step == "wheel" and result.ok and not list(Path(out).glob("*.whl")):
            sink("buildctl: the build produced no wheel")  # the wheel step's failure, as the build reports it
            exit_code = 1
    return {**_outcome(data, step, exit_code, "\n".join(lines), oom=result.oom_killed), **built}


def _root(b: Bundle) -> Path | None:
    """The artifacts root a bundle folder is in (<root>/failures/<name>), else None (the default root)."""
    given = Path(b.given).absolute()
    return given.parent.parent if given.is_dir() and given.parent.name == "failures" else None


def _bundle_used(b: Bundle) -> None:
    """invoke clean: a bundle folder of an artifacts root is in use when replayed."""
    if _root(b) is not None:
        artifacts.record_use({"bundle": [f"failures/{Path(b.given).name}"]}, _root(b))


def _base_arg(b: Bundle, client) -> dict[str, str]:
    """FROM the base id the failed build's key named, as the build did, while the engine has it; else {}: the
    Dockerfile's default, the tag (an older bundle, or its base removed since)."""
    return recorded_base_image_arg(client, b.data.base_image_id or "")


def _build(b: Bundle, client, sink) -> dict | StepFailed:
    tag = f"buildctl-repro/{b.data.recipe}:{uuid.uuid4().hex[:8]}"
    base_arg = _base_arg(b, client)
    # invoke clean: in use (first: the image is built FROM them)
    artifacts.record_images(client, [*b.bases, *base_arg.values()], _root(b))
    try:
        # The build's labels too: with them a cached rebuild is the bundle's very image id.
        image = engine.build_image(
            client,
            engine.ImageSpec(
                b.folder / "context",
                tag,
                target=b.data.target,
                buildargs=base_arg,
                network_mode=b.data.network,
                labels=engine.buildctl_labels(recipe=b.data.recipe, namespace=b.data.namespace),
            ),
            on_line=sink,
        )
    except StepFailed as exc:
        return exc
    artifacts.record_images(client, [image], _root(b))  # the build's own image when cached (same_image)
    return {"image": tag, "image_id": image, "same_image": image == b.data.image_id}


@contextlib.contextmanager
def _volumes_and_source(b: Bundle, client) -> Iterator[tuple[dict[str, str], dict[str, Path]]]:
    """Fresh copies of the bundle's volumes (never the originals) and its source, removed afterwards."""
    suffix = uuid.uuid4().hex[:8]
    volumes = {f"{name}-repro-{suffix}": path for name, path in b.data.volumes.items()}
    src_dir = None
    try:
        inputs = {}
        if (b.folder / "source.tar.gz").is_file():
            src_dir = Path(tempfile.mkdtemp(prefix="buildctl-repro-src-"))
            archive.extract(b.folder / "source.tar.gz", src_dir, what=f"bundle {b.given}: source.tar.gz",
                            fix=FIX_BUNDLE, caps=SOURCE_CAPS)
            inputs["/work/src"] = src_dir
        yield volumes, inputs
    finally:
        for vol in volumes:
            with contextlib.suppress(Exception):
                engine.remove_volume(client, vol)
        if src_dir is not None:
            shutil.rmtree(src_dir, ignore_errors=True)


def _replay_fetch(b: Bundle, data: dict, sink, lines) -> dict:
    if b.data.downloads is None:
        raise InputError(f"bundle {b.given}: bundle.json records no download list (an older buildctl wrote it); "
                         "fix: rebuild to get a new bundle (invoke build --recipe R)")
    try:
        # The downloads the build checked, as its bundle records them: the recipe is not read again.
        _staged, notes = downloads.stage([(d.stage, d) for d in b.data.downloads], b.folder / "downloads")
        for n in notes:
            sink(n)
        return {"reproduced": False, "step": "fetch", "exit_code": 0, "diagnosis": None,
                "expected": data.get("diagnosis")}
    except StepFailed as exc:
        sink(exc.log)
        return _outcome(data, "fetch", exc.returncode, "\n".join(lines))


def _outcome(data: dict, step: str, exit_code: int, log: str, oom: bool = False) -> dict:
    diag = diagnose.diagnose(log, step=step, exit_code=exit_code, oom_killed=oom) if exit_code else None
    expected = (data.get("diagnosis") or {}).get("id")
    return {"reproduced": exit_code != 0 and (expected is None or (diag and diag.id == expected)),
            "step": step, "exit_code": exit_code, "diagnosis": diag.to_dict() if diag else None,
            "expected": data.get("diagnosis"), "first_error": diagnose.first_error(log)}


def shell(b: Bundle, client=None, *, on_line: Callable[[str], None], environ: Mapping[str, str]) -> int:
    """An interactive shell at the failing step: same image, (fresh copies of the) volumes and environment.
    Returns the shell's exit code; the volumes are removed afterwards. `on_line`: the image build's lines,
    then the step's command, before the shell starts; `environ`: the command's, what `docker run` starts from."""
    client = client or preflight(b, environ=environ, shell=True)
    _bundle_used(b)
    built = _build(b, client, on_line)
    if isinstance(built, StepFailed):
        raise built
    with _volumes_and_source(b, client) as (volumes, inputs):
        if inputs:  # seed the work volume with the source first, as the build did
            engine.run_container(
                client, engine.ContainerSpec(built["image_id"], ["true"], inputs=inputs, volumes=volumes)
            )
        cmd = ["docker", "run", "--rm", "-it"]
        for vol, path in volumes.items():
            cmd += ["-v", f"{vol}:{path}"]
        for k in b.data.env:
            cmd += ["-e", k]  # the value travels in the environment, not on a command line others can read
        if b.data.network:
            cmd += ["--network", b.data.network]
        if b.data.memory:
            cmd += ["--memory", str(b.data.memory), "--memory-swap", str(b.data.memory)]
        cmd += [built["image_id"], "bash"]
        on_line(f"buildctl: rerun the step with: {shlex.join(b.command or [])}")
        return subprocess.run(checked_argv(cmd), env={**environ, **b.data.env}, check=False).returncode
