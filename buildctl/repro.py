"""Repro bundles: everything needed to replay a failed build step anywhere, with or without buildctl.

A bundle is one folder, artifacts/failures/<recipe>-<time>/ (or the same packed as .tar.gz):
  context/               the rendered build folder (`docker build --target builder context/`)
  source.tar.gz          a local-path source, when the recipe builds one
  downloads/             pre-staged files that failed their check (when small enough to carry)
  bundle.json            step, exit code, image id, command, environment (secrets masked), volumes,
                         network, memory limit, diagnosis, the downloads the build checks
                         (a replay reads these, never the recipe)
  build.log              the log up to the failure (secrets masked)
  recipe.resolved.yaml   the resolved recipe
  README.md              the plain docker commands that replay it
`invoke repro BUNDLE [--shell]` rebuilds the image and reruns the failing step (or opens a shell there).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from . import archive, artifacts, diagnose, downloads, engine, ui
from .errors import EngineError, InputError, StepFailed
from .secrets import MASK, Masker, mask_data

CARRY_LIMIT = 256 << 20  # sources and staged files up to this size travel inside the bundle
SITE_FILES = ("pip.conf",)


def failures_dir(root: Path | None = None) -> Path:
    return (root or artifacts.artifacts_root()) / "failures"


def write_bundle(*, spec, rendered, context_dir, step, exit_code, log, diagnosis, image_id, command, env,
                 volumes, network, memory, secrets, namespace: str | None = None, root: Path | None = None,
                 engine_name: str | None = None) -> Path:
    mask = Masker(secrets)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    base = failures_dir(root)
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-bundle-", dir=base))
    try:
        ctx = tmp / "context"
        if context_dir and Path(context_dir).is_dir():
            shutil.copytree(context_dir, ctx, ignore=shutil.ignore_patterns("*.lock"))
            for name in SITE_FILES:
                if (ctx / name).exists():
                    (ctx / name).write_text(mask((ctx / name).read_text()))
            _drop_large(ctx / "downloads")
        elif rendered is not None:
            for rel, text in rendered.files.items():
                p = ctx / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(mask(text))
        src = spec.framework.source
        if src.kind == "path" and step not in ("fetch", "image") and _size(Path(src.path)) < CARRY_LIMIT:
            _pack_source(Path(src.path), tmp / "source.tar.gz")
        if step == "fetch" and spec.site.download_cache:
            _carry_downloads(rendered, Path(spec.site.download_cache).expanduser(), tmp / "downloads")
        (tmp / "build.log").write_text(mask(log) + "\n")
        (tmp / "recipe.resolved.yaml").write_text(rendered.files["recipe.resolved.yaml"] if rendered else "")
        data = {
            "schema_version": 1,
            "recipe": spec.name,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "step": step,
            "exit_code": exit_code,
            "image_id": image_id,
            "namespace": namespace,
            "engine": engine_name,
            "target": "builder",
            "command": command,
            "env": {k: mask(v) for k, v in (env or {}).items()},
            "volumes": volumes,
            "network": network,
            "memory": memory,
            "source": {"kind": src.kind, "git": src.git, "ref": src.ref,
                       "carried": (tmp / "source.tar.gz").exists()},
            "diagnosis": diagnosis.to_dict() if diagnosis else None,
            "first_error": diagnose.first_error(mask(log)),
            "downloads": [{"stage": stage, "name": dl.name, "sha256": dl.sha256}
                          for stage, dl in (rendered.downloads if rendered else [])],
        }
        data = mask_data(data, mask)  # the source URL and whatever else holds one
        artifacts.write_json(tmp / "bundle.json", data)
        (tmp / "README.md").write_text(_readme(data))
        final = base / f"{spec.name}-{stamp}-{uuid.uuid4().hex[:4]}"
        os.rename(tmp, final)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _pack_source(root: Path, out: Path) -> None:
    """Regular files only (what a replay accepts): a symlink to a file of the tree travels as that file,
    one leading out of the tree stays out of the bundle (it would carry a host file along)."""
    real_root = root.resolve()
    with tarfile.open(out, "w:gz", dereference=True) as tar:
        for path in sorted(artifacts._source_files(root)):
            target = path.resolve()
            if path.is_symlink() and not (target.is_file() and target.is_relative_to(real_root)):
                continue
            tar.add(path, arcname=path.relative_to(root).as_posix())


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in artifacts._source_files(path)) if path.is_dir() else 0


def _drop_large(downloads_dir: Path) -> None:
    """Big pre-staged files (runfiles are GBs) stay out of the bundle; the README says to stage them."""
    if downloads_dir.is_dir():
        for p in downloads_dir.rglob("*"):
            if p.is_file() and p.stat().st_size > CARRY_LIMIT:
                p.unlink()


def _carry_downloads(rendered, cache: Path, dest: Path) -> None:
    for _stage, dl in rendered.downloads if rendered else []:
        f = cache / dl.name
        if f.is_file() and f.stat().st_size <= CARRY_LIMIT:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dest / dl.name)


def _readme(data: dict) -> str:
    tag = f"buildctl-repro/{data['recipe']}"
    lines = [
        f"# Repro bundle: {data['recipe']} failed in step `{data['step']}` (exit {data['exit_code']})",
        "",
    ]
    d = data.get("diagnosis")
    if d:
        lines += [f"**Diagnosis:** {d['title']}", "", f"- cause: {d['cause']}", f"- fix: {d['fix']}", ""]
    lines += ["## Replay with buildctl", "", "```", "invoke repro .          # rerun the failing step",
              "invoke repro . --shell  # a shell at that point, same mounts and environment", "```", "",
              "## Replay with plain docker", "", "```"]
    if data["step"] == "fetch":
        lines += ["# A pre-staged download failed its sha256 check; the files are in downloads/:",
                  "sha256sum downloads/*   # compare with the sha256 in recipe.resolved.yaml"]
    else:
        net = f"--network {data['network']} " if data.get("network") else ""  # as the image was built
        lines.append(f"docker build {net}--target builder -t {tag} context/")
    if data["step"] not in ("fetch", "image") and data.get("command"):
        run = ["docker", "run", "--rm", "--name", "buildctl-repro"]
        for vol, path in (data.get("volumes") or {}).items():
            run += ["-v", f"{vol}-repro:{path}"]
        for k, v in (data.get("env") or {}).items():
            run += ["-e", f"{k}={v}"]
        if data.get("network"):
            run += ["--network", data["network"]]
        if data.get("memory"):  # no swap on top, as buildctl ran it: a limit is a limit
            run += ["--memory", str(data["memory"]), "--memory-swap", str(data["memory"])]
        if data["source"].get("carried"):
            lines += ["docker volume create " + next(iter(data["volumes"])) + "-repro",
                      "mkdir -p src && tar -xzf source.tar.gz -C src",
                      f"docker run --rm -v {next(iter(data['volumes']))}-repro:/work -v \"$PWD/src\":/in:ro "
                      f"{tag} cp -a /in/. /work/src/"]
        lines.append(shlex.join([*run, tag, *data["command"]]))
    lines += ["```", "", "The full log is build.log; bundle.json holds the exact image id, environment and volumes.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- replaying
# A bundle is untrusted input: it may come from anyone (a CI upload, a mail). It is unpacked by
# archive.extract, bundle.json is validated below, and a summary of what the replay will run is shown
# before anything runs. A replay mounts only fresh copies of the bundle's own build-dir and cache
# volumes, on a validated network, and builds its image only from images the engine already has.

# The build's stages that can fail into a bundle (publish and verify write none).
STEPS = tuple(s for s in ui.STAGES if s not in ("publish", "verify"))
CONTAINER_STEPS = tuple(s for s in STEPS if s not in ("fetch", "image", "wheel"))  # the build script's own
MOUNT_POINTS = ("/work", "/cache")
MAX_BUNDLE_JSON = 1 << 20  # bytes; buildctl writes a few KB
MAX_TEXT_FILE = 1 << 20  # context/Dockerfile
BUNDLE_CAPS = archive.Caps(total_bytes=2 << 30, members=50_000, file_bytes=2 * CARRY_LIMIT)
SOURCE_CAPS = archive.Caps(total_bytes=CARRY_LIMIT, members=200_000, file_bytes=CARRY_LIMIT)
_FIX = "use a bundle written by `invoke build`, unchanged"
# buildctl's own volume names (pipeline.volume_names): Docker's alphabet, no path, no option separator.
_IMAGE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$")
_VOLUME_NAME = re.compile(r"^buildctl-[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")


def _printable(v: str) -> str:
    if not v.isprintable():
        raise ValueError("contains control characters")
    return v


def _no_nul(v: str) -> str:
    if "\x00" in v:
        raise ValueError("contains a NUL character")
    return v


Line = Annotated[str, StringConstraints(strict=True, max_length=4096), AfterValidator(_printable)]
Text = Annotated[str, StringConstraints(strict=True, max_length=65536), AfterValidator(_no_nul)]
EnvName = Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
_MEMORY = re.compile(r"^[1-9][0-9]{0,15}([kmgKMG][bB]?|[bB])?$")  # what docker-py and docker run take


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Source(_Model):
    kind: Literal["git", "path", "tarball"]
    git: Line | None = None
    ref: Line | None = None
    carried: bool = False


class _Diagnosis(_Model):
    id: Line
    title: Line
    cause: Text
    fix: Text
    evidence: Annotated[list[Text], Field(max_length=200)] = []
    step: Line | None = None


class _Download(_Model):
    stage: Line
    name: Annotated[str, StringConstraints(strict=True, pattern=r"^[^/.\x00-\x1f][^/\x00-\x1f]{0,254}$")]  # a file name, no path
    sha256: Annotated[str, StringConstraints(strict=True, pattern=r"^[0-9a-f]{64}$")]


class BundleData(_Model):
    """bundle.json, as `write_bundle` writes it; anything else is refused."""

    schema_version: Literal[1]
    recipe: Annotated[str, StringConstraints(strict=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")]
    created: Line
    step: Literal[STEPS]  # type: ignore[valid-type]
    exit_code: Annotated[int, Field(ge=-1, le=255)]
    image_id: Annotated[str, StringConstraints(strict=True, pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
    # The engine-object namespace of the build: its image carries it as a label, so a cached rebuild
    # with the same labels is the bundle's very image id.
    namespace: Annotated[str, StringConstraints(strict=True, pattern=r"^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$")] | None = None
    engine: Line | None = None  # where it failed: DOCKER_HOST (credentials masked), "local" for the default
    target: Literal["builder"] = "builder"
    command: Annotated[list[Line], Field(min_length=1, max_length=64)] | None = None
    env: Annotated[dict[EnvName, Text], Field(max_length=256)] = {}
    volumes: dict[Line, Line] = {}
    network: Literal["host", "bridge", "none", "default"] | None = None
    memory: str | int | None = None
    source: _Source
    diagnosis: _Diagnosis | None = None
    first_error: Annotated[list[Text], Field(max_length=200)] | None = None
    downloads: Annotated[list[_Download], Field(max_length=1000)] | None = None  # None: an older buildctl's

    @field_validator("volumes")
    @classmethod
    def _own_volumes(cls, v: dict[str, str]) -> dict[str, str]:
        for name, path in v.items():
            if not _VOLUME_NAME.match(name):
                raise ValueError(f"{name!r} is not a buildctl volume name (buildctl-…): a bundle mounts only "
                                 "its own build-dir and cache volumes")
            if path not in MOUNT_POINTS:
                raise ValueError(f"volume {name} is mounted at {path!r}; a bundle mounts only at /work and /cache")
        if len(set(v.values())) != len(v):
            raise ValueError("two volumes at one mount point")
        return v

    @field_validator("memory")
    @classmethod
    def _memory_size(cls, v: str | int | None) -> str | int | None:
        if isinstance(v, int) and v < 6 << 20 or isinstance(v, str) and not _MEMORY.match(v):
            raise ValueError(f"{v!r:.40} is not a memory limit such as 8g (digits, then b, k, m or g; kb, mb, gb too)")
        return v

    @model_validator(mode="after")
    def _command_for_container_steps(self) -> BundleData:
        if self.step in CONTAINER_STEPS and not self.command:
            raise ValueError(f"step {self.step} ran a command in a container, but the bundle names none")
        return self


@dataclass(frozen=True)
class Bundle:
    """An opened, validated bundle: `folder` holds it (unpacked when a .tar.gz was given)."""

    given: Path
    folder: Path
    data: BundleData
    bases: tuple[str, ...] = ()  # images the context's FROM and COPY --from lines take from the engine

    @property
    def command(self) -> list[str] | None:
        """The container command the replay reruns (the wheel step is the build command looked at again)."""
        if self.data.command:
            return list(self.data.command)
        if self.data.step == "wheel":
            from .pipeline import BUILD_COMMAND

            return list(BUILD_COMMAND)
        return None


def _first_error(e: ValidationError) -> str:
    """'field.key: problem' of a validation error, printable and short (keys come from the bundle)."""
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    loc = "".join(c if c.isprintable() else repr(c)[1:-1] for c in loc)
    loc = loc if len(loc) <= 120 else loc[:110] + "…"
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    return f"{loc}: {msg[:400]}" if loc else msg[:400]


def _read_capped(path: Path, limit: int, what: str) -> str:
    if path.is_symlink() or not path.is_file():
        raise InputError(f"{what}: not a regular file; fix: {_FIX}")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{what}: larger than {limit} bytes; fix: {_FIX}")
    return data.decode("utf-8", errors="replace")


@contextlib.contextmanager
def open_bundle(path: Path) -> Iterator[Bundle]:
    """A bundle folder, or a .tar.gz of one (unpacked, removed on exit), with bundle.json validated."""
    path = Path(path)
    tmp = None
    try:
        if path.is_dir():
            folder = path
        elif path.is_file() and path.name.endswith((".tar.gz", ".tgz")):
            tmp = Path(tempfile.mkdtemp(prefix="buildctl-repro-"))
            archive.extract(path, tmp / "bundle", what=f"bundle {path}", fix=_FIX, caps=BUNDLE_CAPS)
            tops = [p for p in (tmp / "bundle").iterdir() if p.is_dir()]
            folder = tmp / "bundle" if (tmp / "bundle" / "bundle.json").exists() or len(tops) != 1 else tops[0]
        else:
            raise InputError(f"{path}: not a bundle folder or .tar.gz; fix: give a path under artifacts/failures/")
        if not (folder / "bundle.json").exists():
            raise InputError(f"{path}: no bundle.json in it; fix: give a bundle made by `invoke build` "
                             "(a folder under artifacts/failures/ or its .tar.gz)")
        for name in ("context", "source.tar.gz", "downloads", "recipe.resolved.yaml"):
            if (folder / name).is_symlink():
                raise InputError(f"bundle {path}: {name} is a symbolic link; fix: {_FIX}")
        text = _read_capped(folder / "bundle.json", MAX_BUNDLE_JSON, f"bundle {path}: bundle.json")
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise InputError(f"bundle {path}: bundle.json is not JSON ({e}); fix: {_FIX}") from None
        try:
            data = BundleData.model_validate(raw)
        except ValidationError as e:
            raise InputError(f"bundle {path}: bundle.json: {_first_error(e)}; fix: {_FIX}") from None
        bases: list[str] = []
        if data.step != "fetch":
            where = f"bundle {path}: context/Dockerfile"
            dockerfile = _read_capped(folder / "context" / "Dockerfile", MAX_TEXT_FILE, where)
            try:
                bases = engine._from_refs(dockerfile, {})  # the replay passes no build args
            except EngineError as e:
                raise InputError(f"{where}: {e}") from None
            bad = next((ref for ref in bases if not _IMAGE_REF.match(ref)), None)
            if bad is not None:
                raise InputError(f"{where}: {bad!r} is not an image reference; fix: {_FIX}")
        yield Bundle(path, folder, data, tuple(bases))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def preflight(b: Bundle, *, shell: bool = False):
    """Refuse what cannot be replayed here before anything runs; the engine client (None for fetch)."""
    if shell and b.data.step in ("fetch", "image"):
        raise InputError(f"bundle {b.given}: step {b.data.step} runs no container, so there is no shell to open "
                         "at it; fix: replay it without --shell")
    if b.data.step == "fetch":
        return None
    client = engine.connect()
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
    lines.append(f"  image:   docker build --target {d.target} of the bundle's context/ (network {net}; "
                 f"from the engine's {', '.join(b.bases) or 'nothing'})")
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


def pack(bundle: Path) -> Path:
    """The bundle as one .tar.gz beside it (for CI uploads and mail)."""
    out = bundle.with_name(bundle.name + ".tar.gz")
    with tarfile.open(out, "w:gz", dereference=True) as tar:  # files, never links: what open_bundle accepts
        tar.add(bundle, arcname=bundle.name)
    return out


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
    if step == "fetch":
        return _replay_fetch(b, data, sink, lines)
    client = client or preflight(b)
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
        result = engine.run_container(client, built["image_id"], command, env=b.data.env, inputs=inputs or None,
                                      volumes=volumes, network_mode=b.data.network, mem_limit=b.data.memory,
                                      outputs={"/work/out": Path(out)} if step == "wheel" else None,
                                      on_line=sink, labels={"buildctl.step": "repro"})
        exit_code = result.exit_code
        if step == "wheel" and result.ok and not list(Path(out).glob("*.whl")):
            sink("buildctl: the build produced no wheel")  # the wheel step's failure, as the build reports it
            exit_code = 1
    return {**_outcome(data, step, exit_code, "\n".join(lines), oom=result.oom_killed), **built}


def _build(b: Bundle, client, sink) -> dict | StepFailed:
    tag = f"buildctl-repro/{b.data.recipe}:{uuid.uuid4().hex[:8]}"
    try:
        # The build's labels too: with them a cached rebuild is the bundle's very image id.
        image = engine.build_image(client, b.folder / "context", tag, target=b.data.target,
                                   network_mode=b.data.network, on_line=sink,
                                   labels=engine.buildctl_labels(recipe=b.data.recipe, namespace=b.data.namespace))
    except StepFailed as exc:
        return exc
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
                            fix=_FIX, caps=SOURCE_CAPS)
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


def shell(b: Bundle, client=None) -> int:
    """An interactive shell at the failing step: same image, (fresh copies of the) volumes and environment.
    Returns the shell's exit code; the volumes are removed afterwards."""
    client = client or preflight(b, shell=True)
    built = _build(b, client, lambda line: print(line, flush=True))
    if isinstance(built, StepFailed):
        raise built
    with _volumes_and_source(b, client) as (volumes, inputs):
        if inputs:  # seed the work volume with the source first, as the build did
            engine.run_container(client, built["image_id"], ["true"], inputs=inputs, volumes=volumes)
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
        print(f"buildctl: rerun the step with: {shlex.join(b.command or [])}", flush=True)
        return subprocess.run(cmd, env={**os.environ, **b.data.env}, check=False).returncode
