"""manifest.json: what a build records of itself, typed (the stages after it read this, never the recipe
rendered again). Written once by the publish stage (pipeline.stages.artifact.assemble), read everywhere
through `Manifest.read`.

The keys and their order are those buildctl has always written. Reading is lenient as to what older
buildctls wrote (a field they did not record is None or empty) and keeps keys it does not know (a newer
buildctl's) so that a manifest read and written again loses nothing; a file that is not a manifest is
refused in one line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from buildctl.errors import InputError
from buildctl.store import artifacts

MAX_MANIFEST_BYTES = 16 << 20
NAME = artifacts.MANIFEST_NAME  # the store's layout (store/artifacts.py)


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class WheelEntry(_Section):
    file: str
    sha256: str
    bytes: int | None = None


class Source(_Section):
    kind: str | None = None
    git: str | None = None
    ref: str | None = None
    path: str | None = None
    tarball: str | None = None
    commit: str | None = None
    mirror: str | None = None  # the git mirror the upstream `git` URL was fetched from (masked), if any


class Images(_Section):
    builder: str | None = None
    base: str | None = None


class Runtime(_Section):
    """The runtime image's recorded context (a folder of the artifact) and what it needs."""

    context: str | None = None
    target: str = "runtime"
    image_key: str = ""
    requirements: list[str] | None = None


class DownloadEntry(_Section):
    stage: str
    name: str
    sha256: str
    url: str


class Frontend(_Section):
    name: str | None = None  # setuptools | scikit-build-core, as the build script found it in the tree
    version: str | None = None
    generator: str | None = None  # the wheel's own WHEEL `Generator:`


class Extensions(_Section):
    """What each extension was built against (the framework as the build venv had it: version, git hash,
    C++11 ABI, CUDA/HIP, arch list, its wheel's sha256) and what it became."""

    built_against: dict[str, Any] = {}
    extensions: list[dict[str, Any]] = []


class VendoredLibrary(_Section):
    soname: str
    file: str | None = None  # its hashed copy in the wheel (<dist>.libs/...)
    bytes: int | None = None
    package: str | None = None  # the Debian package (and version) it came from, when dpkg knew it


class ExcludedLibrary(_Section):
    soname: str
    pattern: str | None = None  # the glob that left it out
    reason: str | None = None
    package: str | None = None


class Portability(_Section):
    """What the wheel repair did (build/portability.json, shaped by store.portability): the tag, the glibc
    and GLIBCXX floors, what was vendored and what was left to its provider, or why it stayed linux_*."""

    repaired: bool = False
    tag: str | None = None
    wheel: str | None = None
    original: str | None = None
    tool: str | None = None
    reason: str | None = None  # why the wheel stayed linux_* (None when repaired)
    glibc: str | None = None
    glibcxx: str | None = None
    vendored: list[VendoredLibrary] = []
    excluded: list[ExcludedLibrary] = []
    external: list[ExcludedLibrary] = []  # external libraries left in place because the repair did not run

    def package_of(self, soname: str) -> str | None:
        """The package that provides `soname`, as the build image's dpkg knew it."""
        return next((lib.package for lib in (*self.vendored, *self.excluded, *self.external)
                     if lib.soname == soname and lib.package), None)


class Configure(_Section):
    """What CMake decided at configure, fact by fact, against what the recipe asks (the configure gate:
    pipeline/configure_gate.py). A row: fact, asked (None: not pinned), asked_by, decided (None: not
    recorded), where CMake recorded it, status (ok | shown | not recorded | off with <switch>)."""

    ok: bool = True
    judged: int = 0
    mismatches: int = 0
    rows: list[dict[str, Any]] = []


APT_LINE = re.compile(r"([a-z0-9][a-z0-9+.-]*(?::[a-z0-9]+)?) ([A-Za-z0-9.+~:-]{1,100})")
MAX_APT_PACKAGES = 5000


def apt_packages(path: Path) -> dict[str, str] | None:
    """The build's apt-packages.txt (`dpkg-query -W`: 'package version' lines) as package -> version; the file
    is the build container's (untrusted): read capped, never through a link, lines that are not that skipped."""
    if path.is_symlink() or not path.is_file():
        return None
    with open(path, "rb") as fh:
        text = fh.read(1 << 20).decode("utf-8", "replace")
    found = (APT_LINE.fullmatch(line.strip()) for line in text.splitlines()[:MAX_APT_PACKAGES])
    return dict(sorted(m.groups() for m in found if m))


class Manifest(_Section):
    schema_version: int = 1
    recipe: str
    key: str
    spec_sha256: str | None = None
    created: str | None = None
    buildctl_version: str | None = None
    framework: str | None = None
    source: Source | None = None
    source_date_epoch: int | None = None
    build_type: str | None = None
    cuda_arch: list[str] = []
    rocm_arch: list[str] = []
    accelerator: str | None = None
    toolchain: dict[str, str | None] = {}
    pins: dict[str, str | None] = {}
    max_jobs: int | None = None
    peak_memory_bytes: int | None = None
    compile_cache: dict[str, Any] = {}
    dist: dict[str, Any] | None = None  # the build cluster (pipeline/build_cluster.py), when a scheduler was set
    # the memory budget (pipeline/memory_budget.py): seconds units waited, the largest units, OOM kills
    memory: dict[str, Any] | None = None
    resumed: dict[str, Any] | None = None
    wheels: list[WheelEntry]
    namespace: str | None = None
    images: Images | None = None
    runtime: Runtime | None = None
    downloads: list[DownloadEntry] = []
    durations_s: dict[str, float] = {}
    engine: dict[str, Any] = {}
    host: dict[str, Any] = {}
    resolved_recipe: dict[str, Any] = {}
    reproducible: dict[str, Any] | None = None  # --check-reproducible's comparison, when it ran
    frontend: Frontend | None = None  # what built the wheel (recorded since the scikit-build-core frontend)
    extensions: Extensions | None = None  # the extensions built against the framework, when the recipe has any
    portability: Portability | None = None  # the wheel repair's record; absent: repair off or an older build
    # what the key was made of (store.key.KeyInputs): keyed files' sha256, source digest, base image id;
    # `invoke build --dry-run` and a rebuild's "why" line compare a request with it. Absent: an older build
    key_inputs: dict[str, Any] | None = None
    configure: Configure | None = None  # the configure gate's table; absent: prebuilt framework or an older build
    # what apt installed in the builder image, package -> version (dpkg-query in the build): recorded, never
    # pinned (Debian's mirrors keep only current versions), compared by `invoke diff`. Absent: an older build
    apt: dict[str, str] | None = None

    @property
    def wheel(self) -> WheelEntry:
        """The framework's wheel (the first one recorded)."""
        return self.wheels[0]

    @property
    def extension_files(self) -> list[str]:
        return [e.get("file") for e in (self.extensions.extensions if self.extensions else [])]

    @property
    def framework_wheel(self) -> WheelEntry | None:
        """The framework's wheel; None when the framework was prebuilt (the wheels are its extensions)."""
        own = [w for w in self.wheels if w.file not in self.extension_files]
        return own[0] if own else None

    def to_json(self) -> dict[str, Any]:
        """The manifest as it is written: every field (None included) in order, then unknown keys;
        `reproducible` only once a check recorded it (as before it was typed)."""
        data = self.model_dump(mode="json")
        for optional in ("reproducible", "frontend", "extensions", "portability", "key_inputs", "configure", "dist",
                         "memory", "apt"):  # as manifests without them were written
            if data.get(optional) is None:
                data.pop(optional, None)
        return data

    def write(self, path: Path) -> None:
        artifacts.write_json(path, self.to_json())

    @classmethod
    def parse(cls, data: Any, where: str, fix: str = "fix: rebuild it (invoke build)") -> Manifest:
        if not isinstance(data, dict):
            raise InputError(f"{where}: not a manifest (top level is {type(data).__name__}); {fix}")
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(top level)"
            raise InputError(f"{where}: {field}: {err['msg']}; {fix}") from None

    @classmethod
    def read(cls, path: Path, fix: str = "fix: rebuild it (invoke build)") -> Manifest:
        """The manifest in `path` (a file, or an artifact folder), read within MAX_MANIFEST_BYTES."""
        path = Path(path)
        if path.is_dir():
            path = artifacts.manifest_path(path)
        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
        except FileNotFoundError:
            raise InputError(f"{path}: no such file; {fix}") from None
        except OSError as e:
            raise InputError(f"{path}: unreadable ({e.strerror}); {fix}") from None
        if len(raw) > MAX_MANIFEST_BYTES:
            raise InputError(f"{path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB, refused unread; {fix}")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise InputError(f"{path}: not JSON ({str(e)[:120]}); {fix}") from None
        return cls.parse(data, str(path), fix)
