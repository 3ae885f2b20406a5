"""Preflight: a recipe checked against the compatibility facts of compat.py before anything runs
(an arch the CUDA release cannot compile, a Python the distro lacks, an NCCL for another CUDA major,
placeholder digests, ...), and whether this host's GPUs can run what it builds (`can_run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from buildctl.errors import RecipeError
from buildctl.recipe import field_env, rules
from buildctl.recipe.compat import (
    KNOWN_ROCM_ARCH,
    PYTHON_BY_DISTRO,
    ROCM_FROM_DISTRO,
    ROCM_OFFLOAD_ARCH,
    TORCH_PYTHON_RANGE,
    TORCH_RELEASE_PINS,
    archs_cover,
    driver_supports,
    major,
    major_minor,
    vcmp,
)
from buildctl.recipe.fields import DISTROS
from buildctl.recipe.rules import torch_version
from buildctl.secrets import mask_url

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    from buildctl.recipe.schema import Spec


class Gpu(Protocol):
    """What can_run reads of a GPU (host.gpus.GpuInfo has it; this module imports nothing above it)."""

    name: str
    compute_capability: str


# ---------------------------------------------------------------------------------------------------
# Recipe facts read from file names
# ---------------------------------------------------------------------------------------------------




def cuda_version(spec: Spec) -> str | None:
    """The toolkit version as precisely as the recipe tells: the runfile's X.Y.Z, else toolchain.cuda."""
    if spec.toolchain.cuda is None:
        return None
    rf = rules.runfile_versions(spec)
    return rf[0] if rf else spec.toolchain.cuda.version


# ---------------------------------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------------------------------


def preflight(spec: Spec, *, source: str) -> list[str]:
    """Refuse recipes that cannot build (RecipeError) and return warnings for doubtful ones.

    Runs before any Docker call; `source` is the recipe file, for the error location.
    """
    warnings: list[str] = []

    def refuse(field: str, problem: str, fix: str) -> None:
        raise RecipeError(source, field, problem, fix)

    def warn(field: str, text: str) -> None:
        warnings.append(f"{field}: {text}")

    _check_base_distro(spec, refuse)
    _check_python(spec, refuse, warn)
    if spec.toolchain.cuda is not None:
        _check_cuda(spec, refuse, warn)
    if spec.toolchain.rocm is not None:
        _check_rocm(spec, refuse, warn)
    _check_providers(spec, refuse)
    _check_torch(spec, warn)
    for conflict in field_env.conflicts(spec):  # build.env would win in the build, the recipe says otherwise
        refuse(f"build.env.{conflict.name}", conflict.line(), conflict.fix())
    return warnings


def _downloads(spec: Spec) -> list[tuple[str, object]]:
    """(field path, Download) of every pinned download in the recipe."""
    tc, out = spec.toolchain, []
    if spec.framework.source.tarball is not None:
        out.append(("framework.source.tarball", spec.framework.source.tarball))
    if tc.cuda is not None and tc.cuda.runfile is not None:
        out.append(("toolchain.cuda.runfile", tc.cuda.runfile))
    if tc.cudnn is not None and tc.cudnn.archive is not None:
        out.append(("toolchain.cudnn.archive", tc.cudnn.archive))
    if tc.nccl is not None and tc.nccl.archive is not None:
        out.append(("toolchain.nccl.archive", tc.nccl.archive))
    if tc.ascend is not None:
        out.append(("toolchain.ascend.installer", tc.ascend.installer))
        if tc.ascend.torch_npu.tarball is not None:
            out.append(("toolchain.ascend.torch_npu.tarball", tc.ascend.torch_npu.tarball))
    return out


def placeholders(spec: Spec) -> list[tuple[str, str, str]]:
    """(field, problem, fix) of every download whose sha256 is the all-zero placeholder: a download the
    site must pin (e.g. a login-gated installer). Rendering shows them; only a build refuses them."""
    return [(f"{field}.sha256", f"placeholder sha256 for {dl.name} ({mask_url(dl.url)}: no file has that digest)",
             f"fetch it where {dl.url.split('/')[2] if '://' in dl.url else 'it'} is reachable, put it in a "
             f"--download-cache folder and pin it: --set {field}.sha256=$(sha256sum {dl.name} | cut -c1-64)"
             + (" (or build from a git mirror: --set framework.source.git=URL --set framework.source.ref=REF)"
                if field.startswith("framework.source") else ""))
            for field, dl in _downloads(spec) if set(dl.sha256) == {"0"}]


def refuse_placeholders(spec: Spec, *, source: str, image_only: bool = False) -> None:
    """A build cannot pass a placeholder sha256 (no file has it): refuse before any Docker call. The
    builder image alone (`--until image`) needs no framework source: only the toolchain's downloads count."""
    for field, problem, fix in placeholders(spec):
        if image_only and field.startswith("framework."):
            continue
        raise RecipeError(source, field, problem, fix)


def _check_providers(spec: Spec, refuse) -> None:
    """Provider combinations whose Dockerfile would be incomplete or contradictory (every other
    combination renders a Dockerfile whose stages all exist: tests/unit/test_provider_combinations.py)."""
    tc = spec.toolchain
    nccl = tc.nccl if tc.nccl is not None and tc.nccl.install != "none" else None
    if tc.ascend is not None and (tc.cuda is not None or tc.rocm is not None):
        other = "cuda" if tc.cuda is not None else "rocm"
        refuse("toolchain.ascend", f"Ascend builds PyTorch for the NPU (USE_CUDA=0), toolchain.{other} builds it for a GPU",
               f"keep one: remove toolchain.{other} or toolchain.ascend")
    if nccl is not None and tc.rocm is not None:
        refuse("toolchain.nccl", "a ROCm build uses RCCL from the ROCm base image, not NVIDIA's NCCL",
               "remove toolchain.nccl (or set install: none)")
    if nccl is not None and nccl.install == "source" and (tc.cuda is None or tc.cuda.install != "runfile"):
        how = f"install: {tc.cuda.install}" if tc.cuda is not None else "no toolchain.cuda"
        refuse("toolchain.nccl.install",
               f"install: source compiles NCCL in the CUDA runfile stage, and this recipe's CUDA is {how} (no such stage)",
               "use install: redist or pip, or toolchain.cuda.install: runfile")


def base_image_distro(image: str) -> str | None:
    """The distro an image's name says it is: buildctl's base images are buildctl/base:<distro>
    (`invoke base-image`), Docker's official ones debian:<codename> and ubuntu:<codename|version>."""
    repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "")
    repo = repo.removeprefix("docker.io/").removeprefix("library/")
    ubuntu = {"22.04": "jammy", "24.04": "noble"}
    if repo in ("buildctl/base", "debian") and tag.split("-")[0] in DISTROS:
        return tag.split("-")[0]
    if repo == "ubuntu":
        return ubuntu.get(tag, tag if tag in DISTROS else None)
    return None


def _check_base_distro(spec: Spec, refuse) -> None:
    """A base image of another distro than the recipe's: its apt has none of the recipe's packages."""
    named = base_image_distro(spec.base.image)
    if named is not None and named != spec.base.distro:
        refuse("base.image", f"{spec.base.image} is {named}, the recipe is for {spec.base.distro} "
                             f"(its packages, Python {spec.python.version} and toolchain are {spec.base.distro}'s)",
               f"give a {spec.base.distro} image (--base-image buildctl/base:{spec.base.distro}, made by "
               f"`invoke base-image {spec.base.distro}`), or a recipe for {named}")


def _check_python(spec: Spec, refuse, warn) -> None:
    distro, py = spec.base.distro, spec.python.version
    shipped = PYTHON_BY_DISTRO.get(distro)
    if shipped is None or shipped == py:
        return
    repo, _, tag = spec.base.image.rpartition(":")
    if repo.rsplit("/", 1)[-1] == "python":  # the official python image brings its own interpreter
        if not tag.startswith(py):
            warn("base.image", f"python image tag {tag!r} does not look like Python {py}")
        return
    others = [d for d, v in PYTHON_BY_DISTRO.items() if v == py]
    alt = f"base.distro {others[0]} (ships {py}) with a matching base.image" if others else (
        "a distro that ships it (" + ", ".join(f"{d} {v}" for d, v in PYTHON_BY_DISTRO.items()) + ")"
    )
    refuse("python.version", f"{distro} ships Python {shipped}, not {py}",
           f"set python.version: '{shipped}', or use {alt}")


def _check_cuda(spec: Spec, refuse, warn) -> None:
    rules.apply(rules.CUDA_RULES, rules.Cuda.of(spec), refuse, warn)


def _check_rocm(spec: Spec, refuse, warn) -> None:
    rocm = spec.toolchain.rocm
    assert rocm is not None
    if not rocm.arch:
        refuse("toolchain.rocm.arch", "empty: PyTorch runs rocm_agent_enumerator, which fails with no GPU in the build",
               "list the targets, e.g. ['gfx90a', 'gfx942']")
    if rocm.install == "apt":
        shipped = ROCM_FROM_DISTRO.get(spec.base.distro)
        if shipped is None:
            refuse("toolchain.rocm.install", f"apt: {spec.base.distro} has no ROCm in its archive that buildctl knows",
                   "use base.distro " + " or ".join(ROCM_FROM_DISTRO) + ", or install: base-image with a ROCm image")
        if major_minor(rocm.version) != shipped["rocm"]:
            refuse("toolchain.rocm.version", f"{spec.base.distro} ships ROCm {shipped['rocm']}, not {rocm.version}",
                   f"set toolchain.rocm.version: '{shipped['rocm']}', or install: base-image")
        if rocm.rccl is not None and rocm.rccl != shipped["rccl"]:
            refuse("toolchain.rocm.rccl", f"{spec.base.distro}'s RCCL declares NCCL API {shipped['rccl']}, not {rocm.rccl}",
                   f"set toolchain.rocm.rccl: '{shipped['rccl']}'")
    known = ROCM_OFFLOAD_ARCH.get(major_minor(rocm.version))
    for arch in rocm.arch:
        if known is not None and arch not in known:
            mm = major_minor(rocm.version)
            refuse("toolchain.rocm.arch", f"{arch} is not a target ROCm {mm}'s compiler knows (clang: invalid target ID)",
                   f"drop {arch} or use a newer ROCm ({mm} knows {len(known)} targets, e.g. gfx90a, gfx942; "
                   "docs/rocm.md lists them)")
        if arch not in KNOWN_ROCM_ARCH:
            warn("toolchain.rocm.arch", f"{arch} is not a target PyTorch release builds use; check ROCm {rocm.version} supports it")
    for req in spec.python.packages:
        if rules.NVIDIA_PIP.match(req):
            refuse("python.packages", f"{req} is a CUDA package in a ROCm recipe", f"remove {req}")


def _check_torch(spec: Spec, warn) -> None:
    tv = torch_version(spec)
    if tv is None:
        return
    rng = TORCH_PYTHON_RANGE.get(tv)
    py = spec.python.version
    if rng and not (vcmp(rng[0], py) <= 0 <= vcmp(rng[1], py)):
        warn("python.version", f"PyTorch {tv} supports Python {rng[0]}-{rng[1]}, not {py}; the build may fail")
    pins = TORCH_RELEASE_PINS.get(tv)
    tc = spec.toolchain
    if not pins or tc.cuda is None:
        return
    if tc.nccl is not None and tc.nccl.install != "none" and vcmp(tc.nccl.version, pins["nccl"]) != 0:
        warn("toolchain.nccl.version", f"PyTorch {tv} release wheels use NCCL {pins['nccl']}, recipe has {tc.nccl.version}")
    if tc.cudnn is not None and major(tc.cudnn.version) != major(pins["cudnn"]):
        warn("toolchain.cudnn.version", f"PyTorch {tv} release wheels use cuDNN {pins['cudnn']}, recipe has {tc.cudnn.version}")


# ---------------------------------------------------------------------------------------------------
# can_run (doctor)
# ---------------------------------------------------------------------------------------------------


def can_run(spec: Spec, gpus: Sequence[Gpu], driver: str | None) -> tuple[bool, str]:
    """Can this host run the built wheel's GPU verification? False with the reason (and fix) if not;
    verification still runs on CPU (gloo) when there is no usable GPU."""
    acc = spec.accelerator
    if acc == "cpu":
        return True, "CPU build: verification runs on CPU (gloo)"
    if acc == "rocm":
        return False, "ROCm build: GPU verification needs an AMD GPU (not inventoried); runs on CPU (gloo) only"
    if acc == "ascend":
        return False, "Ascend build: NPU verification needs an Ascend NPU (not inventoried); runs on CPU only"
    cuda = cuda_version(spec) or ""
    if driver is None or not gpus:
        return False, "no NVIDIA driver/GPU: verification runs on CPU (gloo) only"
    ok, why = driver_supports(driver, cuda)
    if not ok:
        return False, why
    uncovered = sorted({g.compute_capability for g in gpus if not archs_cover(spec.build.cuda_arch, g.compute_capability)})
    if uncovered:
        names = ", ".join(f"{g.name} ({g.compute_capability})" for g in gpus if g.compute_capability in uncovered)
        return False, (f"GPU arch {', '.join(uncovered)} not in build.cuda_arch "
                       f"[{', '.join(spec.build.cuda_arch)}] ({names}); add {', '.join(uncovered)} to build.cuda_arch")
    return True, f"{len(gpus)} GPU(s) covered by build.cuda_arch; {why}"
