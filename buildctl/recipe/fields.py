"""The value types of a recipe's fields: strict strings of a known shape, each with the fix a user reads
when a value does not match (PATTERN_HINTS), and the names the build script reserves."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from buildctl import urls

# The fix shown when a value does not match its type's pattern, kept with the pattern: loader.py looks
# it up by the pattern pydantic reports (tests/unit/test_recipe.py checks every pattern of Spec has one).
PATTERN_HINTS: dict[str, str] = {}


def matching(pattern: str, hint: str) -> StringConstraints:
    """A strict string that matches `pattern`; `hint` is the fix a user reads when it does not."""
    if PATTERN_HINTS.setdefault(pattern, hint) != hint:
        raise ValueError(f"pattern {pattern} has two hints")
    return StringConstraints(strict=True, pattern=pattern)


# Versions are strings in the YAML: `3.10` unquoted would be the float 3.1, so floats are refused.
Version = Annotated[str, matching(r"^\d+(\.\d+){0,3}$",
                                  'write a version like "12.1.1" (digits and dots, quoted)')]
# A framework's release may carry a PEP 440 local label naming its stack, as PyTorch's own wheels do
# ("2.6.0+cu124", "2.6.0+cpu"): two recipes of one release then make wheels one index can hold.
FrameworkVersion = Annotated[str, matching(r"^\d+(\.\d+){0,3}((a|b|rc)\d+)?(\.post\d+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?$",
                                           'write a version like "2.6.0" or "2.6.0+cu124" (quoted)')]
PythonVersion = Annotated[str, matching(r"^3\.\d{1,2}$",
                                        'write a Python version like "3.11" (quoted)')]
Sha256 = Annotated[str, matching(r"^[0-9a-f]{64}$",
                                 "a 64-character lowercase hex sha256 (sha256sum FILE)")]
AbsPath = Annotated[str, matching(r"^/[A-Za-z0-9._/+-]*$",
                                  "use an absolute path of letters, digits and ._/+-")]
# Names and refs end up in shell lines and file names; a conservative alphabet keeps them inert.
Name = Annotated[str, matching(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$",
                               "use only letters, digits and ._+- (starting with a letter or digit)")]
# The commit a git ref names, set by buildctl's resolve step before the key (store/git_refs.py); a recipe's
# value is replaced by what its ref names.
GitCommit = Annotated[str, matching(r"^[0-9a-f]{40}$", "a full commit sha: 40 lowercase hex digits")]
GitRef = Annotated[str, matching(r"^[A-Za-z0-9][A-Za-z0-9._/+-]*$",
                                 "use only letters, digits and ._/+- (a tag, branch or commit)")]


def _read_alike(url: str) -> str:
    """A URL every tool reads the same way (buildctl/urls.py: a login with '#' is a host name to pip)."""
    why = urls.problem(url)
    if why:
        raise ValueError(why)
    return url


Url = Annotated[str, matching(r"^(https?|file)://[^\s'\"`$;|&<>\\]+$",
                              "use an http(s):// or file:// URL without quotes, spaces or shell characters"),
                AfterValidator(_read_alike)]
ImageRef = Annotated[str, matching(r"^[a-z0-9][a-z0-9._/:@-]*$",
                                   "use an image reference like ubuntu:22.04 or registry/name:tag (lowercase, no spaces)")]
CudaArch = Annotated[str, matching(r"^\d{1,2}\.\d[af]?(\+PTX)?$",
                                   'write archs like "8.0", "9.0a" or "9.0+PTX"')]
RocmArch = Annotated[str, matching(r"^gfx[0-9a-f]{3,4}$",
                                   "write ROCm archs like gfx90a, gfx942")]
EnvName = Annotated[str, matching(r"^[A-Z_][A-Z0-9_]*$",
                                  "use an UPPER_CASE shell variable name (A-Z, 0-9, _), e.g. CFLAGS")]
def _no_dot_components(path: str) -> str:
    if any(part in (".", "..") for part in path.split("/")):
        raise ValueError("must stay inside the source tree: no . or .. components")
    return path


def exactly_one(model: BaseModel, names: tuple[str, ...], also: str = "") -> None:
    """A model that takes one of several kinds (a source, a patch): ValueError unless exactly one is given."""
    if sum(getattr(model, name) is not None for name in names) != 1:
        raise ValueError(f"give exactly one of {', '.join(names)}{also}")


def plain_path(value: str | None, field: str) -> None:
    """A path a recipe names beside it (a patch file, a source folder): ValueError unless of ._/+- and alphanumerics."""
    if value is not None and not re.fullmatch(r"[A-Za-z0-9._/+-]+", value):
        raise ValueError(f"{field} may use only letters, digits and ._/+-")


# A path inside the source tree: relative, no `..` (it names files the build script reads).
TreePath = Annotated[str, matching(r"^[A-Za-z0-9_+-][A-Za-z0-9._/+-]*$",
                                   "use a path relative to the source tree, of letters, digits and ._/+-"),
                     AfterValidator(_no_dot_components)]
# A Debian/Ubuntu package name (Debian policy 5.6.1), optionally pinned: name=version.
DistroPackage = Annotated[str, matching(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$",
                                        "write a Debian/Ubuntu package name like libopenblas-dev, optionally "
                                        "pinned: name=version")]

# A recipe name becomes a Docker image repository component and part of volume and container names:
# lowercase alphanumerics with single . _ - between them (the OCI distribution spec's path component,
# which also fits Docker's [a-zA-Z0-9][a-zA-Z0-9_.-]+ for volumes and containers).
RECIPE_NAME = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")
RECIPE_NAME_MAX = 64
# Durations like 90m, 12h, 3600s.
Duration = Annotated[str, matching(r"^[1-9][0-9]{0,5}[smh]$", "write a duration like 90m, 12h or 3600s")]
_SECONDS = {"s": 1, "m": 60, "h": 3600}
# Sizes like 200MB or 1GiB (MB and GB decimal, as PyPI and pip print them; MiB and GiB binary).
ByteSize = Annotated[str, matching(r"^[1-9][0-9]{0,5}(KB|MB|GB|KiB|MiB|GiB)$", "write a size like 200MB or 1GiB")]
_SIZE_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def size_bytes(text: str) -> int:
    """The bytes of a ByteSize: 200MB -> 200000000."""
    digits = text.rstrip("KMGiB")
    return int(digits) * _SIZE_UNITS[text[len(digits):]]
# 1980-01-01T00:00:00Z: the earliest date a zip entry (a wheel member) holds; Nix's default too.
DEFAULT_SOURCE_DATE_EPOCH = 315532800

# build.env names the recipe may not set. The build script's own variables (templates/build.sh.j2):
# overriding them turns its `rm -rf "${OUT:?}"/*` into `rm -rf /*` (OUT=/), builds from or into another
# tree (SRC, VENV), defeats the OOM retry (MAX_JOBS) or shares one compile cache between toolchains
# (CCACHE_COMPILERCHECK). And names that change how every process of the build starts: the loader's
# (LD_*), the shell's (BASH_ENV, ENV, SHELLOPTS, BASHOPTS, IFS) and Python's (PYTHONHOME, PYTHONPATH).
RESERVED_BUILD_ENV = (
    # set by build.sh itself
    "SRC", "OUT", "VENV", "VIRTUAL_ENV", "PATH", "MAX_JOBS", "UNTIL", "FRONTEND", "BUILD_TARGET",
    # the extensions step's own (an extension's env may not move its folder or its framework either)
    "EXT", "AGAINST", "FRAMEWORK_VERSION", "DIST_EXTRA_CONFIG", "EXT_LABEL", "PYTORCH_NVCC",
    # buildctl's settings the script reads (invoke build --until / --target; the shared compile cache,
    # a secret: set in build.env it would be rendered into the script and so into a layer)
    "BUILDCTL_UNTIL", "BUILDCTL_TARGETS", "BUILDCTL_CACHE_URL", "CCACHE_REMOTE_STORAGE",
    "PYTHON_EXECUTABLE", "CMAKE_PROGRAM_PATH",
    "CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER",
    "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_COMPILERCHECK", "CCACHE_NOHASHDIR", "SCCACHE_DIR",
    # reproducible builds (docs/reproducible.md): the date is build.source_date_epoch; the second build of
    # --check-reproducible runs elsewhere (BUILDCTL_WORK) without a compile cache
    "SOURCE_DATE_EPOCH", "WORK", "PREFIX_MAP_FLAGS", "CCACHE_DISABLE", "BUILDCTL_WORK", "BUILDCTL_COMPILE_CACHE",
    # the container's own
    "HOME",
    # how every process starts
    "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS",
    "PYTHONHOME", "PYTHONPATH",
)
PipRequirement = Annotated[str, matching(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?((==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!-]+(,(==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!-]+)*)?$",
                                         "write a pip requirement like numpy<2 or pyyaml==6.0.1 (no options, no URLs)")]
PipPin = Annotated[str, matching(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.*+!-]+$",
                                 "write a pin like nvidia-cublas-cu12==12.1.3.1 (name==version)")]

DISTROS = ("bookworm", "trixie", "jammy", "noble")


class Model(BaseModel):
    """Strict: unknown keys are errors, no silent coercion (a YAML float is not a version)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Download(Model):
    """A file fetched over the network or taken pre-staged from the download cache by its sha256."""

    url: Url
    sha256: Sha256
    filename: Name | None = None

    @property
    def name(self) -> str:
        return self.filename or self.url.rstrip("/").rsplit("/", 1)[-1]
