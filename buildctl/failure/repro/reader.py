"""Opening a repro bundle: unpacked within caps, bundle.json validated, the context's base images read.

A bundle is untrusted input: it may come from anyone (a CI upload, a mail). It is unpacked by
archive.extract, bundle.json is validated below, and a summary of what the replay will run is shown
before anything runs. A replay mounts only fresh copies of the bundle's own build-dir and cache
volumes, on a validated network, and builds its image only from images the engine already has.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
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

from buildctl import archive, engine
from buildctl.errors import EngineError, InputError
from buildctl.failure.repro.writer import CARRY_LIMIT
from buildctl.ui import STAGES

# The build's stages that can fail into a bundle (publish and verify write none).
STEPS = tuple(s for s in STAGES if s not in ("publish", "verify"))
CONTAINER_STEPS = tuple(s for s in STEPS if s not in ("fetch", "image", "wheel"))  # the build script's own
MOUNT_POINTS = ("/work", "/cache")
MAX_BUNDLE_JSON = 1 << 20  # bytes; buildctl writes a few KB
MAX_TEXT_FILE = 1 << 20  # context/Dockerfile
BUNDLE_CAPS = archive.Caps(total_bytes=2 << 30, members=50_000, file_bytes=2 * CARRY_LIMIT)
SOURCE_CAPS = archive.Caps(total_bytes=CARRY_LIMIT, members=200_000, file_bytes=CARRY_LIMIT)
FIX_BUNDLE = "use a bundle written by `invoke build`, unchanged"
# buildctl's own volume names (engine_names.volume_names): Docker's alphabet, no path, no option separator.
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
    # the base image's id the key named (the build's FROM); None: an older buildctl's, or no id was read
    base_image_id: Annotated[str, StringConstraints(strict=True, pattern=r"^sha256:[0-9a-f]{64}$")] | None = None
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
            from buildctl.render.rendering import BUILD_COMMAND

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
        raise InputError(f"{what}: not a regular file; fix: {FIX_BUNDLE}")
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{what}: larger than {limit} bytes; fix: {FIX_BUNDLE}")
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
            archive.extract(path, tmp / "bundle", what=f"bundle {path}", fix=FIX_BUNDLE, caps=BUNDLE_CAPS)
            tops = [p for p in (tmp / "bundle").iterdir() if p.is_dir()]
            folder = tmp / "bundle" if (tmp / "bundle" / "bundle.json").exists() or len(tops) != 1 else tops[0]
        else:
            raise InputError(f"{path}: not a bundle folder or .tar.gz; fix: give a path under artifacts/failures/")
        if not (folder / "bundle.json").exists():
            raise InputError(f"{path}: no bundle.json in it; fix: give a bundle made by `invoke build` "
                             "(a folder under artifacts/failures/ or its .tar.gz)")
        for name in ("context", "source.tar.gz", "downloads", "recipe.resolved.yaml"):
            if (folder / name).is_symlink():
                raise InputError(f"bundle {path}: {name} is a symbolic link; fix: {FIX_BUNDLE}")
        text = _read_capped(folder / "bundle.json", MAX_BUNDLE_JSON, f"bundle {path}: bundle.json")
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise InputError(f"bundle {path}: bundle.json is not JSON ({e}); fix: {FIX_BUNDLE}") from None
        try:
            data = BundleData.model_validate(raw)
        except ValidationError as e:
            raise InputError(f"bundle {path}: bundle.json: {_first_error(e)}; fix: {FIX_BUNDLE}") from None
        bases: list[str] = []
        if data.step != "fetch":
            where = f"bundle {path}: context/Dockerfile"
            dockerfile = _read_capped(folder / "context" / "Dockerfile", MAX_TEXT_FILE, where)
            try:
                bases = engine.base_image_refs(dockerfile, {})  # the replay passes no build args
            except EngineError as e:
                raise InputError(f"{where}: {e}") from None
            bad = next((ref for ref in bases if not _IMAGE_REF.match(ref)), None)
            if bad is not None:
                raise InputError(f"{where}: {bad!r} is not an image reference; fix: {FIX_BUNDLE}")
        yield Bundle(path, folder, data, tuple(bases))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
