"""A recipe's `extensions`: packages with compiled ops built against its framework (docs/extensions.md)."""

from __future__ import annotations

from pydantic import StrictStr, field_validator, model_validator

from buildctl.recipe.fields import (
    RESERVED_BUILD_ENV,
    Download,
    EnvName,
    GitCommit,
    GitRef,
    Model,
    Name,
    PipPin,
    Sha256,
    Url,
    exactly_one,
)
from buildctl.recipe.patch import Patch


class ExtensionSource(Model):
    """Exactly one of pypi (an sdist by name==version, with its sha256), tarball, or git (+ ref)."""

    pypi: PipPin | None = None
    sha256: Sha256 | None = None  # the pypi sdist's
    tarball: Download | None = None
    git: Url | None = None
    ref: GitRef | None = None
    commit: GitCommit | None = None  # what ref names, resolved before the key (store/git_refs.py)

    @model_validator(mode="after")
    def _one_kind(self) -> ExtensionSource:
        exactly_one(self, ("pypi", "tarball", "git"))
        if self.pypi and not self.sha256:
            raise ValueError("a pypi source needs sha256 (of the sdist: pip checks it before building)")
        if self.git and not self.ref:
            raise ValueError("a git source needs ref (a tag, branch or commit)")
        return self


class Extension(Model):
    """A package with compiled ops built against this recipe's framework, after it, in the same venv
    (`pip wheel --no-build-isolation --no-deps`, the framework's frontend detection), its own wheel in
    the artifact, its Requires-Dist on the framework pinned to the exact build (docs/extensions.md)."""

    name: Name  # the distribution, e.g. torch-scatter
    source: ExtensionSource
    module: Name | None = None  # what `import` names; default: the name with - as _
    env: dict[EnvName, StrictStr] = {}  # on top of the build's (TORCH_CUDA_ARCH_LIST, MAX_JOBS, compilers)
    # Python run in the runtime image after the set is installed: the extension against plain
    # framework ops; raises (or exits non-zero) when they disagree.
    smoke: StrictStr | None = None
    # Extensions of this set, listed before it, that it imports at run time without saying so (torch-sparse
    # imports torch-scatter; its setup.py requires only scipy): its Requires-Dist pins each to the version
    # built here, so that installing it from an index brings the set's own.
    requires: tuple[Name, ...] = ()
    # Changes to its source, applied in order after it is unpacked, as framework.patches are (an old sdist
    # that does not compile against a new torch or CUDA).
    patches: tuple[Patch, ...] = ()

    @field_validator("env")
    @classmethod
    def _no_reserved_env(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if name in RESERVED_BUILD_ENV:
                raise ValueError(f"{name} is reserved (the build script sets it); fix: remove {name} from the "
                                 "extension's env")
        return env

    @property
    def import_name(self) -> str:
        return self.module or self.name.replace("-", "_")

    @property
    def source_label(self) -> str:
        s = self.source
        return s.pypi or s.tarball.name if (s.pypi or s.tarball) else f"{s.git}@{s.ref}"
