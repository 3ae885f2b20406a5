"""Preflight: a recipe checked against the compatibility facts of compat.py before anything runs
(an arch the CUDA release cannot compile, a Python the distro lacks, an NCCL for another CUDA major,
placeholder digests, ...), and whether this host's GPUs can run what it builds (`can_run`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from buildctl.errors import RecipeError
from buildctl.recipe.compat import (
    _COMPILER_ENV,
    APT_CUDA_BY_DISTRO,
    CUDA_ARCH_RANGE,
    GCC_BY_DISTRO,
    KNOWN_ROCM_ARCH,
    MIN_DRIVER,
    MINOR_COMPAT_FLOOR,
    NCCL_FIRST_FOR_CUDA_MAJOR,
    NVCC_MAX_GCC,
    PYTHON_BY_DISTRO,
    ROCM_FROM_DISTRO,
    ROCM_OFFLOAD_ARCH,
    TORCH_PYTHON_RANGE,
    TORCH_RELEASE_PINS,
    arch_key,
    arch_supported,
    archs_cover,
    cuda_range_for_archs,
    cudnn_cuda_majors,
    describe_cuda_range,
    driver_supports,
    known_cuda,
    major,
    major_minor,
    nvcc_max_gcc,
    parse_arch,
    vcmp,
    vkey,
)

if TYPE_CHECKING:  # pragma: no cover - import for annotations only
    from buildctl.recipe.schema import Spec


class Gpu(Protocol):
    """What can_run reads of a GPU (host.gpus.GpuInfo has it; this module imports nothing above it)."""

    name: str
    compute_capability: str


def torch_version(spec: Spec) -> str | None:
    """major.minor of the PyTorch being built, when the recipe says: framework.version, else a
    release-like git ref (v2.5.1, v2.5.0-rc3, release/2.5). None for main, commits, paths."""
    if spec.framework.name != "pytorch":
        return None
    if spec.framework.version:
        return major_minor(spec.framework.version)
    ref = spec.framework.source.ref or ""
    m = re.fullmatch(r"(?:v|release/)(\d+)\.(\d+)(?:\.\d+)?(?:-?rc\d+)?", ref)
    return f"{m.group(1)}.{m.group(2)}" if m else None


# ---------------------------------------------------------------------------------------------------
# Recipe facts read from file names
# ---------------------------------------------------------------------------------------------------

_NCCL_ARCHIVE_RE = re.compile(r"nccl_(\d+\.\d+\.\d+)-\d+\+cuda(\d+)\.(\d+)")
_CUDNN_ARCHIVE_RE = re.compile(r"cudnn-linux-[a-z0-9_]+-(\d+(?:\.\d+)+)_cuda(\d+)")
_RUNFILE_RE = re.compile(r"cuda_(\d+\.\d+\.\d+)_(\d+\.\d+(?:\.\d+)?)_linux")
_NVIDIA_PIP_RE = re.compile(r"^(nvidia-[a-z0-9-]+?)-cu(\d+)\b", re.IGNORECASE)


def runfile_versions(spec: Spec) -> tuple[str, str] | None:
    """(toolkit version, bundled driver) from a cuda_<ver>_<driver>_linux.run runfile name."""
    cuda = spec.toolchain.cuda
    if cuda is None or cuda.runfile is None:
        return None
    m = _RUNFILE_RE.search(cuda.runfile.name)
    return (m.group(1), m.group(2)) if m else None


def cuda_version(spec: Spec) -> str | None:
    """The toolkit version as precisely as the recipe tells: the runfile's X.Y.Z, else toolchain.cuda."""
    if spec.toolchain.cuda is None:
        return None
    rf = runfile_versions(spec)
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

    _check_python(spec, refuse, warn)
    if spec.toolchain.cuda is not None:
        _check_cuda(spec, refuse, warn)
    if spec.toolchain.rocm is not None:
        _check_rocm(spec, refuse, warn)
    _check_providers(spec, refuse)
    _check_torch(spec, warn)
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
    return [(f"{field}.sha256", f"placeholder sha256 for {dl.name}",
             f"stage the file and pin its digest: --set {field}.sha256=$(sha256sum {dl.name} | cut -c1-64)")
            for field, dl in _downloads(spec) if set(dl.sha256) == {"0"}]


def refuse_placeholders(spec: Spec, *, source: str) -> None:
    """A build cannot pass a placeholder sha256 (no file has it): refuse before any Docker call."""
    for field, problem, fix in placeholders(spec):
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
    tc = spec.toolchain
    assert tc.cuda is not None
    cuda = cuda_version(spec) or tc.cuda.version
    cmaj = major(cuda)

    # The toolkit itself.
    rf = runfile_versions(spec)
    if tc.cuda.install == "runfile" and rf and major_minor(rf[0]) != tc.cuda.major_minor:
        refuse("toolchain.cuda.runfile", f"runfile {tc.cuda.runfile.name} is CUDA {rf[0]}, not {tc.cuda.version}",
               f"set toolchain.cuda.version: '{rf[0]}' or use the CUDA {tc.cuda.version} runfile")
    if rf and len(tc.cuda.version.split(".")) == 3 and vcmp(rf[0], tc.cuda.version) != 0:
        refuse("toolchain.cuda.version", f"{tc.cuda.version} differs from the runfile's {rf[0]}",
               f"set toolchain.cuda.version: '{rf[0]}'")
    if tc.cuda.install == "pip":
        assert tc.cuda.pip_release is not None
        if major_minor(tc.cuda.pip_release) != tc.cuda.major_minor:
            refuse("toolchain.cuda.pip_release",
                   f"pip release {tc.cuda.pip_release} is not CUDA {tc.cuda.major_minor}",
                   f"use a {tc.cuda.major_minor}.x nvidia-cuda-nvcc release or change toolchain.cuda.version")
        if cmaj < 13:
            refuse("toolchain.cuda.install",
                   f"the nvidia-cuda-nvcc-cu{cmaj} wheels carry no bin/nvcc (only ptxas), so CUDA {cmaj} cannot build from pip",
                   "use install: runfile (or base-image)")
    if tc.cuda.install == "apt":
        apt = APT_CUDA_BY_DISTRO.get(spec.base.distro)
        if apt and apt != tc.cuda.major_minor:
            warn("toolchain.cuda.version",
                 f"install: apt gets {spec.base.distro}'s nvidia-cuda-toolkit ({apt}), not {tc.cuda.version}; "
                 f"set version '{apt}' or use install: runfile")
    newest = max(MIN_DRIVER, key=vkey)
    if cmaj not in MINOR_COMPAT_FLOOR:
        warn("toolchain.cuda.version", f"no driver data for CUDA {cmaj}.x in compat tables; doctor cannot check drivers")
    elif not known_cuda(cuda) and vcmp(major_minor(cuda), major_minor(newest)) < 0:
        warn("toolchain.cuda.version", f"CUDA {cuda} is not a known toolkit release; check the version")

    # Host compiler.
    gcc, gmax = GCC_BY_DISTRO.get(spec.base.distro), nvcc_max_gcc(cuda)
    if tc.cuda.install == "apt":
        # Debian's nvidia-cuda-toolkit-gcc (cuda-gcc/cuda-g++) is the host compiler its nvcc supports;
        # the apt provider installs it and hands it to CMake.
        gcc = None
    if gcc is not None and gmax is not None and gcc > gmax:
        newer = next((first for first, g in NVCC_MAX_GCC if g >= gcc), None)
        older = [d for d, g in GCC_BY_DISTRO.items() if g <= gmax]
        if any(k in spec.build.env for k in _COMPILER_ENV):
            warn("build.env", f"nvcc {cuda} accepts gcc <= {gmax}; make sure the host compiler you set is one")
        else:
            refuse("toolchain.cuda.version",
                   f"nvcc {cuda} accepts gcc <= {gmax} but {spec.base.distro} ships gcc {gcc}",
                   (f"use CUDA >= {newer}" if newer else "use a newer CUDA")
                   + (f" or base.distro {'/'.join(older)}" if older else ""))

    # Architectures.
    archs = spec.build.cuda_arch
    bad = []
    for arch in archs:
        ok, why = arch_supported(arch, cuda)
        if not ok:
            bad.append((arch, why))
    if bad:
        unknown = [a for a, _ in bad if arch_key(a) not in CUDA_ARCH_RANGE]
        if unknown:
            refuse("build.cuda_arch", f"unknown compute capability {', '.join(unknown)}",
                   f"use known ones ({', '.join(k for k in CUDA_ARCH_RANGE if vcmp(k.rstrip('af'), '5.0') >= 0)})")
        names = ", ".join(a for a, _ in bad)
        rng = cuda_range_for_archs(archs)
        fixes = [f"drop {names} from build.cuda_arch"]
        if rng:
            fixes.append(f"use {describe_cuda_range(rng)}")
        refuse("build.cuda_arch", "; ".join(why for _, why in bad), " or ".join(fixes))
    seen: set[str] = set()
    for arch in archs:
        base, suffix, ptx = parse_arch(arch)
        if arch in seen:
            warn("build.cuda_arch", f"{arch} is listed twice")
        seen.add(arch)
        if ptx and suffix == "a":
            warn("build.cuda_arch", f"{arch}: arch-specific PTX runs only on {base} GPUs; use {base}+PTX for forward compatibility")

    # cuDNN.
    if tc.cudnn is not None:
        majors = cudnn_cuda_majors(tc.cudnn.version)
        if cmaj not in majors:
            have = "/".join(str(m) for m in sorted(majors)) or "none"
            refuse("toolchain.cudnn.version", f"cuDNN {tc.cudnn.version} has builds for CUDA {have}, not CUDA {cmaj}",
                   f"use a cuDNN built for CUDA {cmaj} (e.g. {'9.12+' if cmaj >= 13 else '9.1+' if cmaj == 12 else '8.9'})")
        m = _CUDNN_ARCHIVE_RE.search(tc.cudnn.archive.name) if tc.cudnn.archive is not None else None
        if m:
            if int(m.group(2)) != cmaj:
                refuse("toolchain.cudnn.archive", f"{tc.cudnn.archive.name} is the cuda{m.group(2)} build, toolkit is CUDA {cmaj}",
                       f"use the _cuda{cmaj}-archive of cuDNN {tc.cudnn.version}")
            if vcmp(m.group(1), tc.cudnn.version) != 0 and not m.group(1).startswith(tc.cudnn.version + "."):
                refuse("toolchain.cudnn.version", f"{tc.cudnn.version} differs from the archive's {m.group(1)}",
                       f"set toolchain.cudnn.version: '{m.group(1)}' or fix the archive")

    # NCCL.
    nccl = tc.nccl
    if nccl is not None and nccl.install != "none":
        first = NCCL_FIRST_FOR_CUDA_MAJOR.get(cmaj)
        if first and vcmp(nccl.version, first) < 0:
            refuse("toolchain.nccl.version", f"NCCL {nccl.version} predates CUDA {cmaj} support (first: {first})",
                   f"use NCCL >= {first}")
        if nccl.install == "redist" and nccl.archive is not None:
            m = _NCCL_ARCHIVE_RE.search(nccl.archive.name)
            if m:
                if int(m.group(2)) != cmaj:
                    refuse("toolchain.nccl.archive",
                           f"{nccl.archive.name} is built for CUDA {m.group(2)}.{m.group(3)}, toolkit is CUDA {cuda}",
                           f"use the nccl_{nccl.version}-1+cuda{cmaj}.x archive, or install: source")
                if vcmp(m.group(1), nccl.version) != 0:
                    refuse("toolchain.nccl.version", f"{nccl.version} differs from the archive's {m.group(1)}",
                           f"set toolchain.nccl.version: '{m.group(1)}' or fix the archive")
    for req in spec.python.packages:
        m = _NVIDIA_PIP_RE.match(req)
        if m and int(m.group(2)) != cmaj:
            refuse("python.packages", f"{req} is a CUDA {m.group(2)} package, toolkit is CUDA {cmaj}",
                   f"use {m.group(1)}-cu{cmaj}")
    if nccl is None and spec.framework.name == "pytorch":
        feats = spec.build.features
        if feats.get("USE_NCCL", True) and feats.get("USE_DISTRIBUTED", True):
            tv = torch_version(spec)
            if tv is None or vcmp(tv, "2.7") >= 0:
                warn("toolchain.nccl",
                     "absent: PyTorch >= 2.7 git-clones NCCL during the build (fails offline); "
                     "add toolchain.nccl or set build.features.USE_NCCL: false")


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
        if _NVIDIA_PIP_RE.match(req):
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
