"""The known-failure table `diagnose` matches build logs against, and the explanations behind it.

`SIGNATURES` is in priority order: when several rows match, the first wins. The order puts root
causes before their consequences: a kill by the OOM killer or a full disk explains any later error;
a failed download explains a bad checksum. Each row pairs precompiled patterns with a small function
that turns the matched fields and the build context into a cause and a fix naming the recipe field,
environment variable or command to change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from buildctl.recipe import compat

Explain = Callable[[dict[str, str], Mapping[str, Any]], tuple[str, str]]


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    patterns: tuple[re.Pattern[str], ...]
    explain: Explain


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


# ---------------------------------------------------------------------------------------------
# Helpers. The arch and driver facts the fixes quote come from compat's tables.

def _arch_from_nvcc(name: str) -> str:
    """compute_70 -> 7.0, sm_90a -> 9.0a, compute_120f -> 12.0f."""
    m = re.fullmatch(r"(?:compute|sm|lto)_(\d+)([a-z]?)", name)
    if not m:
        return name
    digits, suffix = m.groups()
    return f"{digits[:-1] or '0'}.{digits[-1]}{suffix}"


def _arch_range(arch: str) -> str | None:
    """'7.0' -> 'CUDA >= 9.0 and < 13.0'; None for an arch compat does not know."""
    rng = compat.CUDA_ARCH_RANGE.get(arch) or compat.CUDA_ARCH_RANGE.get(arch.rstrip("af"))
    return compat.describe_cuda_range(rng) if rng else None


def _cuda_major_minor(code: str) -> str:
    """CUDA version as the driver API reports it: 11040 -> 11.4."""
    n = int(code)
    return f"{n // 1000}.{(n % 1000) // 10}"


def _jobs(fields: Mapping[str, str], ctx: Mapping[str, Any]) -> int | None:
    jobs = ctx.get("max_jobs")
    if isinstance(jobs, int) and not isinstance(jobs, bool) and jobs > 0:
        return jobs
    if fields.get("log_jobs"):
        return int(fields["log_jobs"])
    return None


# ---------------------------------------------------------------------------------------------
# Explanations: (fields from the matched lines, context) -> (cause, fix).


def _oom(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    prog = f.get("prog") or "a compiler or linker process"
    if f.get("exit") and not f.get("prog"):
        prog = "the build"
    jobs = _jobs(f, ctx)
    cause = f"{prog} was killed (SIGKILL), almost always by the out-of-memory killer: "
    if jobs == 1:  # halving is no help: one job alone needs more than the container has
        cause += "a single compile job (MAX_JOBS=1) needed more memory than the container had."
        fix = ("MAX_JOBS=1 is already the minimum (build.max_jobs: 1 / --jobs 1): give the build container "
               "more memory: raise or drop `invoke build --memory` (BUILDCTL_MEMORY), or Docker's own limit.")
    elif jobs:
        cause += f"{jobs} parallel compile jobs needed more memory than the container had."
        half = max(1, jobs // 2)
        fix = (f"rebuild with MAX_JOBS={half}: set build.max_jobs: {half} in the recipe, "
               f"or pass --jobs {half} (CUDA and flash-attention units need several GB each).")
    else:
        cause += "the parallel compile jobs needed more memory than the container had."
        fix = ("halve the parallel jobs: set build.max_jobs in the recipe to half of the MAX_JOBS "
               "this build used, or pass --jobs N with that number; give the container more memory "
               "if one job alone does not fit.")
    return cause, fix


def _disk_full(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    return (
        "the disk filled up during the build (a CUDA build of PyTorch needs tens of GB for the "
        "source, the build tree, the compiler cache and the image layers).",
        "free space where Docker keeps images and containers (`docker system prune`, "
        "`docker builder prune`) and where the build tree and compiler cache live, or move them "
        "to a larger disk, then rebuild.",
    )


def _cuda_arch(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    arch = _arch_from_nvcc(f.get("arch", ""))
    sm = f.get("arch", arch)
    cuda = ctx.get("cuda_version")
    span = _arch_range(arch)
    who = f"nvcc from CUDA {cuda}" if cuda else "this nvcc"
    cause = f"{who} cannot compile for {sm} (arch {arch})"
    cause += f"; that arch is supported by {span}." if span else "."
    archs = [str(a) for a in ctx.get("cuda_arch") or ()]
    keep = [a for a in archs if a.split("+")[0] != arch]
    drop = f"drop '{arch}' from build.cuda_arch"
    if archs and keep:
        drop += f" (leaving {keep})"
    fix = drop + (f", or set toolchain.cuda.version to a CUDA that supports it ({span})." if span
                  else ", or set toolchain.cuda.version to a CUDA that supports it.")
    return cause, fix


def _nccl(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    pin = ctx.get("nccl_pin")
    if f.get("header") and f.get("library"):
        cause = (f"the NCCL header (nccl.h, {f['header']}) and the libnccl the build links "
                 f"({f['library']}) come from different NCCL installs.")
    else:
        cause = ("CMake found nccl.h and libnccl from different NCCL installs "
                 "(FindNCCL compares their versions and stops).")
    if f.get("include_dir") and f.get("library_file"):
        cause = cause.removesuffix(".") + f": nccl.h from {f['include_dir']}, the library {f['library_file']}."
    target = f"the pinned NCCL {pin}" if pin else "one NCCL install"
    fix = (f"point the build at {target} for both: USE_SYSTEM_NCCL=1 with NCCL_INCLUDE_DIR and "
           "NCCL_LIB_DIR (e.g. /usr/local/cuda/include and /usr/local/cuda/lib64), and remove other "
           "libnccl copies from the image (a distro libnccl-dev or a pip nvidia-nccl wheel).")
    return cause, fix


def explain_nccl_report(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    got, want = f.get("actual"), f.get("expected") or ctx.get("nccl_pin")
    if got and want:
        cause = f"the wheel uses NCCL {got}, the recipe pins {want}."
    else:
        cause = "the wheel does not load the NCCL the recipe pins."
    fix = (f"make the build link NCCL {want or '(the pinned version)'}: USE_SYSTEM_NCCL=1 with "
           "NCCL_INCLUDE_DIR/NCCL_LIB_DIR pointing at that install (USE_STATIC_NCCL=1 links it in), "
           "or, for a shared libnccl, set the wheel's rpath to it; otherwise PyTorch builds its own "
           "NCCL checkout or the loader picks up another libnccl.so.2 at run time.")
    return cause, fix


def _python_env(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    venv_python = ctx.get("python") or f.get("venv") or "/opt/venv/bin/python"
    if f.get("missing") or f.get("found") == "missing":  # the guard's word when `command -v python` fails
        cause = (f"there is no `python` on the build's PATH: the venv's {venv_python} is not on it, and the "
                 "image has no other `python`.")
    elif f.get("found"):
        cause = f"the build ran {f['found']}, not the venv's {f.get('venv') or venv_python}."
    elif f.get("module"):
        cause = (f"the Python the build used has no '{f['module']}': CMake or setup.py ran an "
                 f"interpreter other than {venv_python}, or the venv lacks the package.")
    else:
        cause = (f"CMake's FindPython found a Python without NumPy, i.e. not the venv's "
                 f"{venv_python} (or the venv lacks numpy).")
    fix = (f"build with {venv_python}: keep build.venv_guard: true, do not set PATH or "
           "Python_EXECUTABLE in build.env, and list the build requirements (numpy, pyyaml, "
           "typing_extensions, ...) in python.packages.")
    return cause, fix


def _cuda_missing(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    home = ctx.get("cuda_home") or "/usr/local/cuda"
    return (
        "the build found no CUDA toolkit: CUDA_HOME is unset or nvcc is not where CMake looks.",
        f"set CUDA_HOME={home} and put {home}/bin on PATH (or CUDACXX={home}/bin/nvcc); check that "
        "toolchain.cuda installs the compiler: the pip nvidia-cuda-nvcc wheels ship no bin/nvcc, so "
        "use install: runfile, apt or a base image with the toolkit.",
    )


def _checksum(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    if f.get("package"):  # pip --require-hashes: the recipe's pip lock names another file of that version
        return (f"the index serves {f['package']} as a file the recipe's pip lock does not name (expected "
                f"{f['expected'][:12]}…, got {f['got'][:12]}…; {f['url']})", "check the index; if its file is the one "
                f"to trust, lock again against it: invoke lock --recipe {ctx.get('recipe') or 'R'} --index-url URL")
    what = f.get("file") or "a downloaded file"
    cause = f"{what} does not have the sha256 the recipe gives"
    if f.get("expected") and f.get("got"):
        cause += f" (expected {f['expected'][:12]}…, got {f['got'][:12]}…)"
    cause += ": a truncated or corrupted download, a proxy's error page, or a wrong sha256."
    fix = (f"delete the staged copy of {what} from the download cache (site.download_cache) and "
           "stage it again; if it still differs, check the recipe's sha256 against the vendor's "
           "published checksum and fix whichever is wrong.")
    return cause, fix


def _tls(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    return (
        "a TLS connection failed certificate verification: a proxy that re-signs HTTPS with a "
        "corporate CA the container does not trust.",
        "pass that CA bundle: `invoke build --recipe R --ca-cert /path/to/corp-ca.pem` (or set "
        "BUILDCTL_CA_CERT, or list it in site.ca_certs); it is added to the image's trust store for "
        "pip, git, curl and apt. Do not turn verification off.",
    )


def _network(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    host = f.get("host") or f.get("url")
    where = f" {host}" if host else " a download server"
    return (
        f"the build container could not reach{where} (name resolution or connection failed).",
        "retry if the network was down; otherwise give the container a route out: set "
        "site.http_proxy/https_proxy/no_proxy, or site.pip_index_url and site.apt_mirror for "
        "internal mirrors (site.network: host if bridge networking has no DNS), or pre-stage the "
        "downloads in site.download_cache to build offline.",
    )


def _git_ref(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    ref = f.get("ref")
    what = f"'{ref}'" if ref else "the requested ref"
    return (
        f"git has no branch, tag or commit {what} in the source repository.",
        f"fix framework.source.ref (or toolchain.nccl.ref) {what}: PyTorch tags look like v2.9.0, "
        "NCCL tags like v2.28.9-1; a full commit sha also works. Check with "
        "`git ls-remote <url> <ref>`.",
    )


def _driver(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    cuda = ctx.get("cuda_version")
    floor = None
    if cuda and str(cuda).split(".")[0].isdigit():
        floor = compat.MINOR_COMPAT_FLOOR.get(compat.major(str(cuda)))
    need = f"CUDA {cuda} needs a driver >= {floor}" if floor else "the driver must support the wheel's CUDA"
    if f.get("toolkit"):
        return (
            "Docker cannot give the container a GPU: the NVIDIA Container Toolkit is not set up on "
            "this host.",
            "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
            "restart Docker, or run the GPU checks on a host that has it.",
        )
    if f.get("nvml"):
        return (
            "the loaded NVIDIA kernel module and the user-space driver libraries have different "
            "versions (a driver update without a reboot).",
            "reboot the host (or reload the nvidia kernel modules); the wheel is fine.",
        )
    if f.get("found"):
        cause = f"the host driver supports CUDA up to {_cuda_major_minor(f['found'])}; {need}."
    elif f.get("nodriver"):
        cause = "no NVIDIA driver is visible where the wheel was run (no GPU, or none passed in)."
    else:
        cause = f"the host driver is older than the CUDA runtime of the wheel; {need}."
    fix = ("update the host's NVIDIA driver"
           + (f" to >= {floor}" if floor else "")
           + ", or build for a CUDA version the installed driver supports; run GPU checks on a host "
           "with a GPU and the driver (the wheel itself is fine).")
    return cause, fix


def _cudnn(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    if f.get("lib"):
        cause = f"{f['lib']} is not on the loader's path where torch is imported."
    else:
        cause = (f"the cuDNN loaded at run time lacks {f.get('symbol') or 'a cuDNN symbol'}: it is "
                 "another cuDNN version than the one built against, or torch was not linked to cuDNN.")
    fix = ("ship or install the same cuDNN as toolchain.cudnn.version at run time (the matching "
           "nvidia-cudnn-cu<major> wheel, or libcudnn in the runtime image) and check with "
           "`ldd torch/lib/libtorch_cuda.so | grep cudnn`; rebuild if cuDNN is not linked at all.")
    return cause, fix


def _patch(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    cause = f"patch {f['patch']} does not apply to this source: {f['where']}."
    fix = ("refresh the patch against the recipe's framework.source (or pin the source it was written "
           "for), or leave it out: `skip:` for a series entry, or remove it from framework.patches.")
    return cause, fix


def _apt_package(f: dict[str, str], ctx: Mapping[str, Any]) -> tuple[str, str]:
    pkg, distro = f.get("package", "a package"), ctx.get("distro")
    on = f"{distro}'s" if distro else "the base image's"
    python = re.fullmatch(r"python(\d+\.\d+)(?:-\w+)?", pkg)
    if python:
        shipped = compat.PYTHON_BY_DISTRO.get(distro or "")
        if shipped == python.group(1):
            return (f"apt has no {pkg}, which {distro} packages: the base image is not {distro}.",
                    f"use a {distro} base image (--base-image buildctl/base:{distro}, made by `invoke base-image "
                    f"{distro}`), or a recipe for the image's distro.")
        return (f"apt has no {pkg} in {on} archive: Python {python.group(1)} is not what it packages"
                + (f" (it ships Python {shipped})." if shipped else "."),
                f"use a base image of the recipe's distro (base.image, --base-image buildctl/base:{distro or 'DISTRO'})"
                + (f", or python.version: \"{shipped}\" for {distro}" if shipped else "") + ".")
    return (f"apt has no package {pkg} in {on} archive as the image's sources list it.",
            f"check that base.image is {distro or 'the recipe distro'} (a base image of another distro lacks its "
            "packages), the name in the recipe's packages (apt-cache search on that distro), and, for non-free "
            "or contrib packages, that the sources enable that component (site.apt_mirror).")


# ---------------------------------------------------------------------------------------------
# The table, in priority order (first match wins).

SIGNATURES: tuple[Signature, ...] = (
    Signature("oom", "Compiler killed: out of memory", _p(
        r"Killed signal terminated program (?P<prog>[\w+.-]+)",
        r"internal compiler error: Killed \(program (?P<prog>[\w+.-]+)\)",
        r"'(?P<prog>cicc|ptxas|nvlink|fatbinary|cudafe\+\+|cc1plus)' died due to signal 9",
        r"fatal error: (?P<prog>[\w+.-]+) terminated with signal 9 \[Killed\]",
        r"died due to signal 9 \(Kill signal\)",
        r"virtual memory exhausted: Cannot allocate memory",
        r"(?P<prog>cc1plus|cc1): out of memory allocating \d+ bytes",
    ), _oom),
    Signature("disk-full", "Disk full", _p(
        r"No space left on device",
        r"\[Errno 28\]",
    ), _disk_full),
    Signature("tls-untrusted", "TLS certificate not trusted (corporate CA missing)", _p(
        r"CERTIFICATE_VERIFY_FAILED",
        r"SSL certificate problem",
        r"server certificate verification failed",
        r"certificate verify failed",
        r"x509: certificate signed by unknown authority",
        r"cannot verify \S+'s certificate",
        r"The certificate of '[^']+' is not trusted",
        r"SSLError\(",
    ), _tls),
    Signature("network", "Network failure during a download", _p(
        r"Temporary failure resolving '(?P<host>[^']+)'",
        r"Could not resolve host:? '?(?P<host>[\w.-]+)",
        r"Temporary failure in name resolution",
        r"Name or service not known",
        r"Connection timed out",
        r"Network is unreachable",
        r"Failed to establish a new connection",
        r"HTTPSConnectionPool\(host='(?P<host>[^']+)'.*(?:Max retries exceeded|Read timed out)",
        r"ConnectionError\b",
        r"E: Failed to fetch (?P<url>\S+)",
    ), _network),
    Signature("checksum-mismatch", "Downloaded file has the wrong checksum", _p(
        r"buildctl: sha256 mismatch for (?P<file>\S+?):? expected (?P<expected>[0-9a-f]+),? "
        r"got (?P<got>[0-9a-f]+)",
        r"(?:sha256sum|sha512sum|shasum|md5sum): WARNING: \d+ computed checksums? did NOT match",
        r"(?P<package>\S+==[^\s:]+) from (?P<url>[^\s#]+)[^\n]*\n\s*Expected sha256 (?P<expected>\w{64})(?:\s+or \w{64})*\s+Got\s+(?P<got>\w{64})",
        r"THESE PACKAGES DO NOT MATCH THE HASHES",
    ), _checksum),
    Signature("apt-package-missing", "apt cannot find a package", _p(
        r"E: Unable to locate package (?P<package>[\w.+-]+)",
        r"E: Package '(?P<package>[\w.+-]+)' has no installation candidate",
        r"E: Couldn't find any package by (?:glob|regex) '(?P<package>[\w.+*-]+)'",
    ), _apt_package),
    Signature("patch-does-not-apply", "A source patch does not apply", _p(
        r"buildctl: patch (?P<patch>\S+) does not apply: (?P<where>.+)",
        r"buildctl: skip names (?P<patch>\S+), which the series (?P<where>\S+) does not list",
    ), _patch),
    Signature("git-ref-not-found", "Git ref not found", _p(
        r"fatal: Remote branch (?P<ref>\S+) not found in upstream origin",
        r"error: pathspec '(?P<ref>[^']+)' did not match any file\(s\) known to git",
        r"fatal: [Cc]ouldn't find remote ref (?P<ref>\S+)",
        r"fatal: reference is not a tree: (?P<ref>\S+)",
    ), _git_ref),
    Signature("cuda-arch-unsupported", "nvcc does not support a requested GPU arch", _p(
        r"nvcc fatal\s*:\s*Unsupported gpu architecture '(?P<arch>(?:compute|sm|lto)_\d+[a-z]?)'",
        r"Value '(?P<arch>(?:compute|sm)_\d+[a-z]?)' is not defined for option 'gpu-(?:architecture|name)'",
    ), _cuda_arch),
    Signature("nccl-mismatch", "NCCL header and library versions differ", _p(
        r"Found NCCL header version and library version do not match",
        r"NCCL header version\D{0,20}?(?P<header>\d+(?:\.\d+)*)\b.{0,120}?"
        r"library version\D{0,20}?(?P<library>\d+(?:\.\d+)*)",
        # FindNCCL's message (PyTorch's names the two files, demofw's also the versions) as CMake
        # wraps it: "... do not match! (include:\n  DIR, library:\n  LIB) header version X, library\n
        # version Y." (A bare "(include: DIR, library: LIB)" is also how the found-it lines end.)
        r"do not match! \(include:\s+(?P<include_dir>[^\s,]+),\s+library:\s+(?P<library_file>[^\s)]+)\)",
        r"header\s+version\s+(?P<header>\d+(?:\.\d+)+),\s+library\s+version\s+(?P<library>\d+(?:\.\d+)+)",
    ), _nccl),
    Signature("cuda-toolkit-missing", "CUDA toolkit or nvcc not found", _p(
        r"CUDA_HOME environment variable is not set",
        r"No CMAKE_CUDA_COMPILER could be found",
        r"nvcc: (?:command )?not found",
        r"nvcc: No such file or directory",
    ), _cuda_missing),
    Signature("python-env", "Build used the wrong Python (no NumPy / not the venv's)", _p(
        r"buildctl: python is (?P<found>[^\s,]+)[^\n]*?not the venv(?:'s)?\s*(?P<venv>/[^\s,;]+)?",
        r"Could NOT find Python3? \(missing:[^)]*NumPy",
        r"Could NOT find NumPy",
        r"No module named '?(?P<module>numpy|yaml|typing_extensions|setuptools|wheel)\b",
        r"(?P<missing>python)3?: command not found",  # bash, once PATH lost the venv (guard off)
    ), _python_env),
    Signature("driver", "NVIDIA driver missing or too old", _p(
        r"CUDA driver version is insufficient for CUDA runtime version",
        r"(?P<nodriver>Found no NVIDIA driver on your system)",
        r"NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)",
        r"(?P<toolkit>could not select device driver \"[^\"]*\" with capabilities: \[\[gpu\]\])",
        r"(?P<nvml>Failed to initialize NVML: Driver/library version mismatch)",
    ), _driver),
    Signature("cudnn", "cuDNN missing or a different version at run time", _p(
        r"undefined symbol: (?P<symbol>cudnn\w*)",
        r"(?P<lib>libcudnn\w*\.so[.\d]*): cannot open shared object file",
    ), _cudnn),
)
