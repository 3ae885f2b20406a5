"""The CUDA stack's compatibility rules as data: one rule, one row (the field it is reported at, whether
it refuses or warns, the check, the fact's source), as Spack writes `conflicts(..., when=..., msg=...)`.

A check reads the recipe through `Cuda` (the facts every rule needs, worked out once) and answers None
when the rule holds, else (problem, fix) for a refusal or a text for a warning. preflight applies them
all; adding a rule is adding a row here, and its test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from buildctl.recipe.compat import (
    _COMPILER_ENV,
    APT_CUDA_BY_DISTRO,
    CU_UNIT_SECONDS,
    CUDA_ARCH_RANGE,
    FEATURE_ARCH_FLOOR,
    GCC_BY_DISTRO,
    MIN_DRIVER,
    MINOR_COMPAT_FLOOR,
    NCCL_FIRST_FOR_CUDA_MAJOR,
    NVCC_MAX_GCC,
    arch_key,
    arch_supported,
    cuda_range_for_archs,
    cudnn_cuda_majors,
    describe_cuda_range,
    known_cuda,
    major,
    major_minor,
    nvcc_max_gcc,
    parse_arch,
    vcmp,
    vkey,
)

if TYPE_CHECKING:  # pragma: no cover
    from buildctl.recipe.schema import Spec

_NCCL_ARCHIVE_RE = re.compile(r"nccl_(\d+\.\d+\.\d+)-\d+\+cuda(\d+)\.(\d+)")
_CUDNN_ARCHIVE_RE = re.compile(r"cudnn-linux-[a-z0-9_]+-(\d+(?:\.\d+)+)_cuda(\d+)")
_RUNFILE_RE = re.compile(r"cuda_(\d+\.\d+\.\d+)_(\d+\.\d+(?:\.\d+)?)_linux")
NVIDIA_PIP = re.compile(r"^(nvidia-[a-z0-9-]+?)-cu(\d+)\b", re.IGNORECASE)


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


def runfile_versions(spec: Spec) -> tuple[str, str] | None:
    """(toolkit version, bundled driver) from a cuda_<ver>_<driver>_linux.run runfile name."""
    cuda = spec.toolchain.cuda
    if cuda is None or cuda.runfile is None:
        return None
    m = _RUNFILE_RE.search(cuda.runfile.name)
    return (m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class Cuda:
    """The facts the CUDA rules read, from one recipe."""

    spec: Spec
    version: str  # as precisely as the recipe says: the runfile's X.Y.Z, else toolchain.cuda.version
    major: int
    runfile: tuple[str, str] | None

    @classmethod
    def of(cls, spec: Spec) -> Cuda:
        rf = runfile_versions(spec)
        version = rf[0] if rf else spec.toolchain.cuda.version
        return cls(spec, version, major(version), rf)

    @property
    def tc(self):
        return self.spec.toolchain

    @property
    def host_gcc(self) -> int | None:
        """The distro's gcc, unless the apt provider brings nvcc's own (Debian's nvidia-cuda-toolkit-gcc)."""
        return None if self.tc.cuda.install == "apt" else GCC_BY_DISTRO.get(self.spec.base.distro)


Answer = tuple[str, str] | str | None


@dataclass(frozen=True)
class Rule:
    field: str
    severity: Literal["refuse", "warn"]
    check: Callable[[Cuda], Answer | list[Answer]]
    source: str


# -- the checks that need more than a line --------------------------------------------------------------


def _gcc_too_new(c: Cuda) -> Answer:
    gcc, gmax = c.host_gcc, nvcc_max_gcc(c.version)
    if gcc is None or gmax is None or gcc <= gmax or any(k in c.spec.build.env for k in _COMPILER_ENV):
        return None
    newer = next((first for first, g in NVCC_MAX_GCC if g >= gcc), None)
    older = [d for d, g in GCC_BY_DISTRO.items() if g <= gmax]
    return (f"nvcc {c.version} accepts gcc <= {gmax} but {c.spec.base.distro} ships gcc {gcc}",
            (f"use CUDA >= {newer}" if newer else "use a newer CUDA") + (f" or base.distro {'/'.join(older)}" if older else ""))


def _gcc_set_by_hand(c: Cuda) -> Answer:
    gcc, gmax = c.host_gcc, nvcc_max_gcc(c.version)
    if gcc is None or gmax is None or gcc <= gmax or not any(k in c.spec.build.env for k in _COMPILER_ENV):
        return None
    return f"nvcc {c.version} accepts gcc <= {gmax}; make sure the host compiler you set is one"


def _archs_unknown(c: Cuda) -> Answer:
    unknown = [a for a in c.spec.build.cuda_arch if not arch_supported(a, c.version)[0] and arch_key(a) not in CUDA_ARCH_RANGE]
    if not unknown:
        return None
    known = ", ".join(k for k in CUDA_ARCH_RANGE if vcmp(k.rstrip("af"), "5.0") >= 0)
    return f"unknown compute capability {', '.join(unknown)}", f"use known ones ({known})"


def _archs_unsupported(c: Cuda) -> Answer:
    archs = c.spec.build.cuda_arch
    bad = [(a, why) for a in archs for ok, why in [arch_supported(a, c.version)] if not ok]
    if not bad:
        return None
    rng = cuda_range_for_archs(archs)
    fixes = [f"drop {', '.join(a for a, _ in bad)} from build.cuda_arch"] + ([f"use {describe_cuda_range(rng)}"] if rng else [])
    return "; ".join(why for _, why in bad), " or ".join(fixes)


def _archs_twice(c: Cuda) -> list[Answer]:
    archs = list(c.spec.build.cuda_arch)
    return [f"{a} is listed twice" for i, a in enumerate(archs) if a in archs[:i]]


def _arch_specific_ptx(c: Cuda) -> list[Answer]:
    out: list[Answer] = []
    for arch in c.spec.build.cuda_arch:
        base, suffix, ptx = parse_arch(arch)
        if ptx and suffix == "a":
            out.append(f"{arch}: arch-specific PTX runs only on {base} GPUs; use {base}+PTX for forward compatibility")
    return out


def _cudnn_for_other_cuda(c: Cuda) -> Answer:
    cudnn = c.tc.cudnn
    if cudnn is None or c.major in (majors := cudnn_cuda_majors(cudnn.version)):
        return None
    have = "/".join(str(m) for m in sorted(majors)) or "none"
    e = "9.12+" if c.major >= 13 else "9.1+" if c.major == 12 else "8.9"
    return (f"cuDNN {cudnn.version} has builds for CUDA {have}, not CUDA {c.major}",
            f"use a cuDNN built for CUDA {c.major} (e.g. {e})")


def _cudnn_archive(c: Cuda) -> list[Answer]:
    cudnn = c.tc.cudnn
    m = _CUDNN_ARCHIVE_RE.search(cudnn.archive.name) if cudnn is not None and cudnn.archive is not None else None
    if not m:
        return []
    out: list[Answer] = []
    if int(m.group(2)) != c.major:
        out.append((f"{cudnn.archive.name} is the cuda{m.group(2)} build, toolkit is CUDA {c.major}",
                    f"use the _cuda{c.major}-archive of cuDNN {cudnn.version}"))
    return out


def _cudnn_archive_version(c: Cuda) -> Answer:
    cudnn = c.tc.cudnn
    m = _CUDNN_ARCHIVE_RE.search(cudnn.archive.name) if cudnn is not None and cudnn.archive is not None else None
    if not m or vcmp(m.group(1), cudnn.version) == 0 or m.group(1).startswith(cudnn.version + "."):
        return None
    return (f"{cudnn.version} differs from the archive's {m.group(1)}",
            f"set toolchain.cudnn.version: '{m.group(1)}' or fix the archive")


def _nccl(c: Cuda):
    n = c.tc.nccl
    return n if n is not None and n.install != "none" else None


def _nccl_archive(c: Cuda):
    n = _nccl(c)
    return _NCCL_ARCHIVE_RE.search(n.archive.name) if n and n.install == "redist" and n.archive is not None else None


def _nccl_too_old(c: Cuda) -> Answer:
    n, first = _nccl(c), NCCL_FIRST_FOR_CUDA_MAJOR.get(c.major)
    if n is None or not first or vcmp(n.version, first) >= 0:
        return None
    return f"NCCL {n.version} predates CUDA {c.major} support (first: {first})", f"use NCCL >= {first}"


def _nccl_archive_cuda(c: Cuda) -> Answer:
    m = _nccl_archive(c)
    if not m or int(m.group(2)) == c.major:
        return None
    n = c.tc.nccl
    return (f"{n.archive.name} is built for CUDA {m.group(2)}.{m.group(3)}, toolkit is CUDA {c.version}",
            f"use the nccl_{n.version}-1+cuda{c.major}.x archive, or install: source")


def _nccl_archive_version(c: Cuda) -> Answer:
    m = _nccl_archive(c)
    if not m or vcmp(m.group(1), c.tc.nccl.version) == 0:
        return None
    return (f"{c.tc.nccl.version} differs from the archive's {m.group(1)}",
            f"set toolchain.nccl.version: '{m.group(1)}' or fix the archive")


def _pip_for_other_cuda(c: Cuda) -> list[Answer]:
    out: list[Answer] = []
    for req in c.spec.python.packages:
        m = NVIDIA_PIP.match(req)
        if m and int(m.group(2)) != c.major:
            out.append((f"{req} is a CUDA {m.group(2)} package, toolkit is CUDA {c.major}", f"use {m.group(1)}-cu{c.major}"))
    return out


def _archs_a_feature_cannot_use(c: Cuda) -> list[Answer]:
    """A PyTorch feature whose kernels need a newer arch than some listed ones: those archs' passes over its
    units are compile time for code that never runs (all of it, when no listed arch reaches the floor)."""
    spec, out = c.spec, []
    if spec.framework.name != "pytorch":
        return out
    for switch, what, floor, units, source in FEATURE_ARCH_FLOOR:
        if not spec.build.features.get(switch, True) or spec.build.env.get(switch, "1") in ("0", "OFF", "off"):
            continue
        low = [a for a in spec.build.cuda_arch if vcmp(arch_key(a).rstrip("af"), floor) < 0]
        if not low:
            continue
        archs = ", ".join(low)
        passes = len(low) * units
        hours = passes * CU_UNIT_SECONDS / 3600
        if len(low) == len(spec.build.cuda_arch):
            out.append(f"{what} ({switch}) needs sm{floor.replace('.', '')}+ and no listed arch ({archs}) has it: its "
                       f"{units} kernel units would be compiled for nothing, about {hours:.0f} core-hours at "
                       f"{CU_UNIT_SECONDS} s per unit and arch ({source}); set build.features.{switch}: false")
        else:
            out.append(f"{what} ({switch}) is compiled for {archs} too, which cannot run it (sm{floor.replace('.', '')}+): "
                       f"{passes} more nvcc passes over its {units} kernel units, up to {hours:.0f} core-hours at "
                       f"{CU_UNIT_SECONDS} s per unit and arch ({source}); drop {archs} from build.cuda_arch if no "
                       f"GPU of them needs this build, or set build.features.{switch}: false")
    return out


def _torch_clones_nccl(c: Cuda) -> Answer:
    feats, spec = c.spec.build.features, c.spec
    if c.tc.nccl is not None or spec.framework.name != "pytorch" or not (feats.get("USE_NCCL", True) and feats.get("USE_DISTRIBUTED", True)):
        return None
    if spec.framework.source.kind == "prebuilt":  # no PyTorch is built: nothing clones NCCL
        return None
    tv = torch_version(spec)
    if tv is not None and vcmp(tv, "2.7") < 0:
        return None
    return ("absent: PyTorch >= 2.7 git-clones NCCL during the build (fails offline); "
            "add toolchain.nccl or set build.features.USE_NCCL: false")


CUDA_RULES: tuple[Rule, ...] = (
    # the toolkit itself
    Rule("toolchain.cuda.runfile", "refuse", lambda c: (
        f"runfile {c.tc.cuda.runfile.name} is CUDA {c.runfile[0]}, not {c.tc.cuda.version}",
        f"set toolchain.cuda.version: '{c.runfile[0]}' or use the CUDA {c.tc.cuda.version} runfile")
        if c.tc.cuda.install == "runfile" and c.runfile and major_minor(c.runfile[0]) != c.tc.cuda.major_minor else None,
        "the runfile's name: cuda_<version>_<driver>_linux.run"),
    Rule("toolchain.cuda.version", "refuse", lambda c: (
        f"{c.tc.cuda.version} differs from the runfile's {c.runfile[0]}", f"set toolchain.cuda.version: '{c.runfile[0]}'")
        if c.runfile and len(c.tc.cuda.version.split(".")) == 3 and vcmp(c.runfile[0], c.tc.cuda.version) != 0 else None,
        "the runfile's name"),
    Rule("toolchain.cuda.pip_release", "refuse", lambda c: (
        f"pip release {c.tc.cuda.pip_release} is not CUDA {c.tc.cuda.major_minor}",
        f"use a {c.tc.cuda.major_minor}.x nvidia-cuda-nvcc release or change toolchain.cuda.version")
        if c.tc.cuda.install == "pip" and major_minor(c.tc.cuda.pip_release) != c.tc.cuda.major_minor else None,
        "PyPI: nvidia-cuda-nvcc's release numbers carry the toolkit's"),
    Rule("toolchain.cuda.install", "refuse", lambda c: (
        f"the nvidia-cuda-nvcc-cu{c.major} wheels carry no bin/nvcc (only ptxas), so CUDA {c.major} cannot build from pip",
        "use install: runfile (or base-image)") if c.tc.cuda.install == "pip" and c.major < 13 else None,
        "PyPI: nvidia-cuda-nvcc-cu12 12.1.105/12.4.131/12.8.93 hold only ptxas; the 13.x wheels a real nvcc"),
    Rule("toolchain.cuda.version", "warn", lambda c: (
        f"install: apt gets {c.spec.base.distro}'s nvidia-cuda-toolkit ({apt}), not {c.tc.cuda.version}; "
        f"set version '{apt}' or use install: runfile")
        if c.tc.cuda.install == "apt" and (apt := APT_CUDA_BY_DISTRO.get(c.spec.base.distro)) and apt != c.tc.cuda.major_minor
        else None, "Debian/Ubuntu archives: nvidia-cuda-toolkit per release"),
    Rule("toolchain.cuda.version", "warn", lambda c: (
        f"no driver data for CUDA {c.major}.x in compat tables; doctor cannot check drivers")
        if c.major not in MINOR_COMPAT_FLOOR else None, "compat.MINOR_COMPAT_FLOOR"),
    Rule("toolchain.cuda.version", "warn", lambda c: f"CUDA {c.version} is not a known toolkit release; check the version"
         if c.major in MINOR_COMPAT_FLOOR and not known_cuda(c.version)
         and vcmp(major_minor(c.version), major_minor(max(MIN_DRIVER, key=vkey))) < 0 else None,
         "CUDA release notes, Table 3 (compat.MIN_DRIVER)"),
    # the host compiler
    Rule("toolchain.cuda.version", "refuse", _gcc_too_new, "CUDA installation guides: supported host compilers (compat.NVCC_MAX_GCC)"),
    Rule("build.env", "warn", _gcc_set_by_hand, "compat.NVCC_MAX_GCC"),
    # architectures
    Rule("build.cuda_arch", "refuse", _archs_unknown, "compat.CUDA_ARCH_RANGE (first/last toolkit per arch)"),
    Rule("build.cuda_arch", "refuse", _archs_unsupported, "compat.CUDA_ARCH_RANGE"),
    Rule("build.cuda_arch", "warn", _archs_twice, "-"),
    Rule("build.cuda_arch", "warn", _arch_specific_ptx, "CUDA programming guide: arch-specific features (sm_XYa)"),
    Rule("build.cuda_arch", "warn", _archs_a_feature_cannot_use, "compat.FEATURE_ARCH_FLOOR (pytorch#194502)"),
    # cuDNN
    Rule("toolchain.cudnn.version", "refuse", _cudnn_for_other_cuda, "cuDNN support matrix (compat.CUDNN_CUDA_MAJORS)"),
    Rule("toolchain.cudnn.archive", "refuse", _cudnn_archive, "the archive's name: cudnn-linux-<arch>-<ver>_cuda<major>"),
    Rule("toolchain.cudnn.version", "refuse", _cudnn_archive_version, "the archive's name"),
    # NCCL
    Rule("toolchain.nccl.version", "refuse", _nccl_too_old, "NCCL release notes (compat.NCCL_FIRST_FOR_CUDA_MAJOR)"),
    Rule("toolchain.nccl.archive", "refuse", _nccl_archive_cuda, "the archive's name: nccl_<ver>-1+cuda<X.Y>"),
    Rule("toolchain.nccl.version", "refuse", _nccl_archive_version, "the archive's name"),
    Rule("python.packages", "refuse", _pip_for_other_cuda, "PyPI: nvidia-*-cu<major> packages"),
    Rule("toolchain.nccl", "warn", _torch_clones_nccl, "tools/build_pytorch_libs.py checkout_nccl (PyTorch >= 2.7)"),
)


def apply(rules: tuple[Rule, ...], facts: Cuda, refuse, warn) -> None:
    """Each rule against the recipe, in order: refuse(field, problem, fix) raises; warn(field, text) collects."""
    for rule in rules:
        answers = rule.check(facts)
        for answer in answers if isinstance(answers, list) else [answers]:
            if answer is None:
                continue
            if rule.severity == "refuse":
                refuse(rule.field, *answer)
            else:
                warn(rule.field, answer)
