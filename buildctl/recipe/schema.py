"""The recipe schema and the resolved spec.

A recipe file is YAML; after `extends:` merging and `--set` overrides it is validated into `Spec`,
an immutable tree of plain pydantic models that every later stage reads. Unknown keys, wrong types
and malformed versions are refused here, with the field path; cross-field checks that need the
compatibility tables live in `preflight.preflight`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from buildctl import urls
from buildctl.recipe.extensions import Extension
from buildctl.recipe.fields import (
    _SECONDS,
    DEFAULT_SOURCE_DATE_EPOCH,
    DISTROS,
    RECIPE_NAME,
    RECIPE_NAME_MAX,
    RESERVED_BUILD_ENV,
    AbsPath,
    ByteSize,
    CudaArch,
    DistroPackage,
    Download,
    Duration,
    EnvName,
    FrameworkVersion,
    GitCommit,
    GitRef,
    ImageRef,
    Model,
    Name,
    PipPin,
    PipRequirement,
    PythonVersion,
    Url,
    Version,
    exactly_one,
    matching,
    plain_path,
)
from buildctl.recipe.patch import Patch  # noqa: F401  (re-exported: recipes' patches)
from buildctl.recipe.toolchains import Cuda, Cudnn, Nccl, Rocm
from buildctl.settings import extend_site


class Base(Model):
    image: ImageRef
    distro: Literal[DISTROS]  # type: ignore[valid-type]


class Python(Model):
    version: PythonVersion
    venv: AbsPath = "/opt/venv"
    # Build requirements installed into the venv (the framework's own, e.g. numpy, pyyaml).
    packages: tuple[PipRequirement, ...] = ()
    # Pins for everything pip installs into the images, dependencies included (pip -c): a cuDNN
    # wheel must not pull a cuBLAS of another CUDA release.
    constraints: tuple[PipPin, ...] = ()
    # The builder venv's lock (`invoke lock`: name==version and sha256 of every package, installed with
    # --require-hashes), relative to the recipe file; default locks/<recipe file's name>.txt beside it when there.
    lock: str | None = None


class Packages(Model):
    """Distro (apt) packages: `build` for the builder image only, `runtime` for both images (what
    the built wheel links against, e.g. the system libraries of a USE_SYSTEM_LIBS build)."""

    build: tuple[DistroPackage, ...] = ()
    runtime: tuple[DistroPackage, ...] = ()
    # Archive components to enable beyond main, e.g. [contrib, non-free] for Debian's CUDA packages.
    components: tuple[Literal["contrib", "non-free", "non-free-firmware", "universe", "multiverse", "restricted"], ...] = ()


class PrebuiltIndex(Model):
    """A framework from a package index by its pin (`pypi: torch==2.14.1`), installed with its dependencies into
    the builder's venv and the runtime image's; `index_url`: an index to look in beside the site's (PyTorch's
    own, e.g. https://download.pytorch.org/whl/cu130)."""

    pypi: PipPin
    index_url: Url | None = None

    @property
    def cuda_major(self) -> int | None:
        """The CUDA major the pin's local label names (torch==2.9.1+cu128: 12), or None."""
        m = re.search(r"\+cu(\d+)\d$", self.pypi)
        return int(m.group(1)) if m else None


class Source(Model):
    """Exactly one of git, path (relative to the recipe's directory or absolute), tarball, or prebuilt:
    a framework not built here, its extensions built against it (`base-image`: the one the base image
    has installed, e.g. Debian's python3-torch or NGC's; or a wheel to install, e.g. a buildctl
    artifact's, by URL and sha256)."""

    git: Url | None = None
    ref: GitRef | None = None
    commit: GitCommit | None = None  # what ref names, resolved before the key (store/git_refs.py)
    submodules: StrictBool = True
    path: StrictStr | None = None
    tarball: Download | None = None
    prebuilt: Literal["base-image"] | Download | PrebuiltIndex | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Source:
        exactly_one(self, ("git", "path", "tarball", "prebuilt"))
        if self.git and not self.ref:
            raise ValueError("a git source needs ref (a tag, branch or commit)")
        plain_path(self.path, "path")
        return self

    @property
    def kind(self) -> str:
        if self.prebuilt is not None:
            return "prebuilt"
        return "git" if self.git else "path" if self.path is not None else "tarball"


class Framework(Model):
    name: Literal["pytorch", "demofw"]
    source: Source
    patches: tuple[Patch, ...] = ()
    version: FrameworkVersion | None = None  # PYTORCH_BUILD_VERSION; None keeps version.txt + git sha
    build_number: StrictInt = Field(default=1, ge=1)
    # How the tree is built: what its pyproject.toml's build-backend says (auto: found in the tree at
    # build time, the build script carries both paths), or the one a recipe knows its source has (the
    # build script carries that path only, and refuses a tree that says otherwise).
    frontend: Literal["auto", "setuptools", "scikit-build-core"] = "auto"

    @property
    def dist(self) -> str:
        """The distribution its wheel is (what an extension's Requires-Dist names), also its module."""
        return {"pytorch": "torch", "demofw": "demofw"}[self.name]

    @model_validator(mode="after")
    def _post_before_local(self) -> Framework:
        if self.version and "+" in self.version and self.build_number > 1:  # setup.py appends .postN last
            raise ValueError(f"build_number {self.build_number} would make {self.version}.post{self.build_number}, "
                             f"a .post inside the local label; write version: "
                             f"\"{self.version.replace('+', f'.post{self.build_number}+', 1)}\" and build_number: 1")
        return self


class Ascend(Model):
    cann_version: Annotated[str, matching(r"^\d+\.\d+\.[A-Za-z0-9.]+$",
                                          'write a CANN version like "8.0.0" or "8.0.RC3" (quoted)')]
    installer: Download  # Ascend-cann-toolkit_<ver>_linux-<arch>.run
    install_path: AbsPath = "/usr/local/Ascend"
    torch_npu: Source


class Toolchain(Model):
    cuda: Cuda | None = None
    cudnn: Cudnn | None = None
    nccl: Nccl | None = None
    rocm: Rocm | None = None
    ascend: Ascend | None = None


# A soname glob auditwheel leaves out of the wheel (`auditwheel repair --exclude`), e.g. libfoo.so.*
SonameGlob = Annotated[str, matching(r"^lib[A-Za-z0-9_.+*?\[\]-]{1,120}$",
                                     "write a soname glob, e.g. libfoo.so.* (letters, digits, . _ + - and * ? [ ])")]


class Wheel(Model):
    """What happens to the framework's wheel once it is built (docs/portable-wheels.md)."""

    # auto: a Release wheel of a CPU, CUDA or ROCm build is repaired (auditwheel); off: an image-only
    # wheel, tagged linux_*. Debug/RelWithDebInfo (for chasing a crash in its image) and Ascend stay off.
    repair: Literal["auto", "off"] = "auto"
    # sonames never vendored, beyond the driver and what the toolchain's wheels provide
    exclude: tuple[SonameGlob, ...] = ()
    # the repair fails the build when the libraries it vendors add up to more than this (unpacked)
    max_vendored: ByteSize | None = None

    @field_validator("repair", mode="before")
    @classmethod
    def _yaml_off(cls, v):
        return "off" if v is False else v  # YAML reads an unquoted `off` as false


class Build(Model):
    type: Literal["Release", "Debug", "RelWithDebInfo"] = "Release"
    cuda_arch: tuple[CudaArch, ...] = ()
    max_jobs: Literal["auto"] | Annotated[StrictInt, Field(ge=1, le=1024)] = "auto"
    # USE_*/BUILD_* switches, forwarded to CMake by PyTorch's setup.py.
    features: dict[Annotated[str, matching(r"^(USE|BUILD)_[A-Z0-9_]+$", "use a USE_* or BUILD_* switch, e.g. "
                                           "USE_MKLDNN; put other variables in build.env")], StrictBool] = {}
    env: dict[EnvName, StrictStr] = {}
    cache: Literal["ccache", "sccache", "none"] = "ccache"
    # The compile step is stopped after this long (a hung build fails instead of blocking CI).
    timeout: Duration = "12h"
    # Build-time check that `python` is the venv's; off only to reproduce the failure it prevents.
    venv_guard: StrictBool = True
    # Shell lines run once in the patched source tree before configure (trusted, like the recipe),
    # e.g. regenerating a header against the distro's flatbuffers.
    prepare: tuple[StrictStr, ...] = ()
    # SOURCE_DATE_EPOCH of the build (seconds, UTC); unset: the commit date of a git source, else
    # DEFAULT_SOURCE_DATE_EPOCH (docs/reproducible.md). Zip entries hold 1980..2107.
    source_date_epoch: Annotated[StrictInt, Field(ge=DEFAULT_SOURCE_DATE_EPOCH, le=4102444800)] | None = None
    # unset: Wheel() (repair auto, no exclusions); None keeps the resolved recipe of a recipe without it as it was
    wheel: Wheel | None = None

    @field_validator("env")
    @classmethod
    def _no_reserved_env(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if name in RESERVED_BUILD_ENV:
                raise ValueError(f"{name} is reserved (the build script sets it, or it changes how every "
                                 f"process of the build starts); fix: remove {name} from build.env")
        return env

    @property
    def wheel_settings(self) -> Wheel:
        return self.wheel or Wheel()

    @property
    def timeout_s(self) -> int:
        return int(self.timeout[:-1]) * _SECONDS[self.timeout[-1]]


class Expect(Model):
    """What verification checks; unset fields are derived from the toolchain and build sections."""

    cuda: Version | None = None
    nccl: Version | None = None
    cudnn: Version | None = None
    arch: tuple[CudaArch, ...] | None = None
    build_type: Literal["Release", "Debug", "RelWithDebInfo"] | None = None
    features: dict[str, StrictBool] = {}


class Verify(Model):
    expect: Expect = Expect()
    allreduce: StrictBool = True


class Site(Model):
    """Host and network facts that do not change the output: kept out of the artifact key."""

    ca_certs: tuple[StrictStr, ...] = ()
    pip_index_url: Url | None = None
    pip_extra_index_urls: tuple[Url, ...] = ()
    apt_mirror: Url | None = None
    http_proxy: Url | None = None
    https_proxy: Url | None = None
    no_proxy: StrictStr | None = None
    network: Literal["host", "bridge", "none", "default"] = "default"
    download_cache: StrictStr | None = None
    # A shared compile cache (redis://): handed to the compile container at run time, never rendered.
    cache_url: StrictStr | None = None
    # An sccache-dist scheduler (http[s]://[:TOKEN@]HOST[:PORT]): the compile container's launcher sends its
    # compiles there at run time; never rendered, never keyed (left out of the resolved recipe while unset).
    dist_scheduler: StrictStr | None = None
    # Git mirrors, PREFIX=MIRROR (git's url.<MIRROR>.insteadOf PREFIX): handed to the build at run time
    # with its credentials, never rendered; the manifest records the upstream URL and the mirror used.
    git_mirrors: tuple[StrictStr, ...] = ()

    @field_validator("git_mirrors")
    @classmethod
    def _mirrors(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for pair in v:
            prefix, eq, mirror = pair.partition("=")
            if not eq:
                raise ValueError("a git mirror is PREFIX=MIRROR; fix: e.g. https://github.com/=https://git.corp/github/")
            for what, url in (("prefix", prefix), ("mirror", mirror)):
                why = urls.problem(url)
                if why:  # the value is not quoted: the mirror's may hold a password
                    raise ValueError(f"git mirror {what}: {why}")
        return v

    @field_validator("cache_url")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        why = v and urls.redis_problem(v)
        if why:  # the value is not quoted: it holds a password
            raise ValueError(urls.redis_refusal(why))
        return v

    @field_validator("dist_scheduler")
    @classmethod
    def _scheduler_url(cls, v: str | None) -> str | None:
        why = v and urls.dist_problem(v)
        if why:  # the value is not quoted: it holds a token
            raise ValueError(urls.dist_refusal(why))
        return v


Site = extend_site(Site)  # the site options only settings.py declares, e.g. pull


class Spec(Model):
    """A resolved recipe: everything the later stages need, nothing that refers back to YAML."""

    name: StrictStr  # checked by _docker_name
    description: StrictStr = ""
    labels: tuple[Name, ...] = ()
    base: Base
    python: Python
    packages: Packages = Packages()
    framework: Framework
    toolchain: Toolchain = Toolchain()
    build: Build = Build()
    extensions: tuple[Extension, ...] = ()
    verify: Verify = Verify()
    site: Site = Site()

    @field_validator("name")
    @classmethod
    def _docker_name(cls, v: str) -> str:
        if len(v) > RECIPE_NAME_MAX or not RECIPE_NAME.fullmatch(v):
            fix = re.sub(r"[^a-z0-9]+", "-", v.lower()).strip("-")[:RECIPE_NAME_MAX] or "my-recipe"
            raise ValueError(f"{v!r} is not a name Docker accepts for images and volumes; fix: rename the "
                             f"recipe (its file, or name:) to lowercase letters and digits with single . _ - "
                             f"between them, at most {RECIPE_NAME_MAX} characters, e.g. {fix!r}")
        return v

    @field_validator("description")
    @classmethod
    def _one_line(cls, v: str) -> str:
        return " ".join(v.split())

    @model_validator(mode="after")
    def _stack(self) -> Spec:
        tc = self.toolchain
        if tc.cuda and tc.rocm:
            raise ValueError("toolchain: cuda and rocm are exclusive (PyTorch refuses both); keep one")
        if tc.nccl and tc.nccl.install != "none" and not (tc.cuda or tc.rocm):
            raise ValueError("toolchain.nccl needs toolchain.cuda; remove nccl or add cuda")
        if tc.cudnn and not tc.cuda:
            raise ValueError("toolchain.cudnn needs toolchain.cuda; remove cudnn or add cuda")
        if tc.cuda and not self.build.cuda_arch:
            raise ValueError(
                "build.cuda_arch is empty; list the archs, e.g. ['8.0', '9.0'] "
                "(PyTorch guesses wrong in a GPU-less container)"
            )
        if self.build.cuda_arch and not tc.cuda:
            raise ValueError("build.cuda_arch is set but toolchain.cuda is absent; remove cuda_arch")
        prebuilt = self.framework.source.prebuilt
        if isinstance(prebuilt, PrebuiltIndex) and tc.cuda and prebuilt.cuda_major not in (
                None, int(tc.cuda.version.split(".")[0])):
            raise ValueError(f"{prebuilt.pypi} is a CUDA {prebuilt.cuda_major} build, toolchain.cuda pins "
                             f"{tc.cuda.version}: its nvcc must be of torch's CUDA major; fix: set toolchain.cuda."
                             f"version to {prebuilt.cuda_major}.x (CUDA 12: install apt, Debian trixie's 12.4)")
        if self.framework.source.kind == "prebuilt" and not self.extensions:
            raise ValueError("framework.source.prebuilt builds no framework, and extensions is empty: nothing to "
                             "build; fix: list the extensions to build against it, or build the framework from source")
        names = [e.name.lower().replace("_", "-") for e in self.extensions]
        if len(set(names)) != len(names):
            raise ValueError("extensions: a name is listed twice; fix: list each extension once")
        if self.framework.dist in names:
            raise ValueError(f"extensions: {self.framework.dist} is the framework itself; fix: remove it")
        for i, ext in enumerate(self.extensions):
            for needed in ext.requires:
                if needed.lower().replace("_", "-") not in names[:i]:
                    raise ValueError(f"extensions: {ext.name} requires {needed}, which is not an extension listed "
                                     f"before it; fix: list {needed} above {ext.name}, or drop it from requires")
        return self

    @property
    def accelerator(self) -> str:
        tc = self.toolchain
        return "cuda" if tc.cuda else "rocm" if tc.rocm else "ascend" if tc.ascend else "cpu"
