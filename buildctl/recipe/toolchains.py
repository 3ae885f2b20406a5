"""A recipe's `toolchain` sections for NVIDIA and AMD: what each installs and from where (Ascend, which
builds torch_npu from a `Source`, stays with the schema)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from buildctl.recipe.fields import (
    AbsPath,
    Download,
    GitCommit,
    GitRef,
    Model,
    Name,
    RocmArch,
    Url,
    Version,
)


class Cuda(Model):
    version: Version  # major.minor[.patch] of the toolkit
    install: Literal["runfile", "apt", "pip", "base-image"]
    runfile: Download | None = None  # install: runfile
    pip_release: Version | None = None  # install: pip, the nvidia-cuda-* wheel release, e.g. 13.2.86
    apt_package: Name = "nvidia-cuda-toolkit"  # install: apt
    home: AbsPath = "/usr/local/cuda"

    @model_validator(mode="after")
    def _install_inputs(self) -> Cuda:
        if self.install == "runfile" and self.runfile is None:
            raise ValueError("install: runfile needs runfile: {url, sha256}")
        if self.install == "pip" and self.pip_release is None:
            raise ValueError("install: pip needs pip_release (the nvidia-cuda-nvcc version)")
        return self

    @property
    def major_minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


class Cudnn(Model):
    version: Version
    install: Literal["archive", "pip"]
    archive: Download | None = None  # install: archive (cudnn-linux-x86_64-<ver>_cuda<maj>-archive.tar.xz)

    @model_validator(mode="after")
    def _install_inputs(self) -> Cudnn:
        if self.install == "archive" and self.archive is None:
            raise ValueError("install: archive needs archive: {url, sha256}")
        return self


class Nccl(Model):
    version: Version
    install: Literal["redist", "pip", "apt", "source", "none"]
    archive: Download | None = None  # install: redist (nccl_<ver>-1+cuda<x>_x86_64.txz)
    git: Url = "https://github.com/NVIDIA/nccl"  # install: source
    ref: GitRef | None = None  # install: source, defaults to v<version>-1
    commit: GitCommit | None = None  # what ref names, resolved before the key (store/git_refs.py)

    @model_validator(mode="after")
    def _install_inputs(self) -> Nccl:
        if self.install == "redist" and self.archive is None:
            raise ValueError("install: redist needs archive: {url, sha256}")
        return self


class Rocm(Model):
    """ROCm from a ROCm base image (AMD's layout under /opt/rocm) or from the distro's archive (apt:
    Debian trixie main ships HIP 5.7 under /usr)."""

    version: Version
    arch: tuple[RocmArch, ...] = Field(min_length=1)
    install: Literal["base-image", "apt"] = "base-image"
    # The NCCL API version RCCL's rccl.h declares (RCCL is found as the system NCCL): checked in the
    # image, expected at run time (demofw.cuda.nccl.version(), torch.cuda.nccl.version()).
    rccl: Version | None = None
