"""What the recipe's own fields ask of the variables the build exports to CMake, before build.env:
toolchain.cuda is USE_CUDA=1, build.cuda_arch is TORCH_CUDA_ARCH_LIST, build.features.USE_MKL is USE_MKL,
build.type is DEBUG / REL_WITH_DEB_INFO / CMAKE_BUILD_TYPE.

build.env is exported last and wins in the build script; a build.env value that says otherwise than the
field beside it is a contradiction the recipe carries (`build.env.TORCH_CUDA_ARCH_LIST=9.0` with
`build.cuda_arch: [8.0, 9.0]`: CMake compiles 9.0 only while the recipe, its key and its manifest say
both). Preflight refuses it; the configure gate compares what CMake decided with the field, wherever an
override came from (pipeline/configure_gate.py).

Pure: the spec only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from buildctl.recipe.schema import Spec

_ON = {"1", "ON", "YES", "TRUE", "Y"}
_OFF = {"", "0", "OFF", "NO", "FALSE", "N"}
_ARCH_LISTS = {"TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH"}


@dataclass(frozen=True)
class FieldAsk:
    value: str  # as the build would export it
    by: str  # the recipe field that asks it


@dataclass(frozen=True)
class Conflict:
    """A build.env value that overrides a recipe field with another meaning."""

    name: str
    override: str
    asked: FieldAsk

    def line(self) -> str:
        return (f"build.env.{self.name}={self.override} overrides {self.asked.by} "
                f"({self.name}={self.asked.value}): CMake would build what build.env says while the recipe, its key "
                f"and its manifest say what {self.asked.by} says")

    def fix(self) -> str:
        return f"remove build.env.{self.name} and ask for it in {self.asked.by}"


def asks(spec: Spec) -> dict[str, FieldAsk]:
    """{variable: what the recipe's fields ask of it}, for the variables a field decides."""
    tc, out = spec.toolchain, {}
    if tc.cuda is not None:
        out["USE_CUDA"] = FieldAsk("1", "toolchain.cuda")
        out["TORCH_CUDA_ARCH_LIST"] = FieldAsk(";".join(spec.build.cuda_arch), "build.cuda_arch")
    if tc.rocm is not None:
        out["USE_ROCM"] = FieldAsk("1", "toolchain.rocm")
        out["USE_CUDA"] = FieldAsk("0", "toolchain.rocm")
        out["PYTORCH_ROCM_ARCH"] = FieldAsk(";".join(tc.rocm.arch), "toolchain.rocm.arch")
    if tc.cuda is None and tc.rocm is None:
        by = f"a {spec.accelerator} recipe (no toolchain.cuda or rocm)"
        out["USE_CUDA"] = out["USE_ROCM"] = FieldAsk("0", by)
    if tc.cudnn is not None:
        out["USE_CUDNN"] = FieldAsk("1", "toolchain.cudnn")
    if tc.nccl is not None:
        out["USE_NCCL"] = FieldAsk("0" if tc.nccl.install == "none" else "1", "toolchain.nccl")
    build_type = spec.build.type
    out["CMAKE_BUILD_TYPE"] = FieldAsk(build_type, "build.type")
    out["DEBUG"] = FieldAsk("1" if build_type == "Debug" else "0", "build.type")
    out["REL_WITH_DEB_INFO"] = FieldAsk("1" if build_type == "RelWithDebInfo" else "0", "build.type")
    for key, on in spec.build.features.items():  # the features win, as in the build script
        out[key] = FieldAsk("1" if on else "0", f"build.features.{key}")
    return out


def same(name: str, a: str, b: str) -> bool:
    """Whether two values of `name` mean the same to the build: a switch's on/off, an arch list's set."""
    if name in _ARCH_LISTS:
        return set(re.split(r"[;,\s]+", a.strip())) - {""} == set(re.split(r"[;,\s]+", b.strip())) - {""}
    if name == "CMAKE_BUILD_TYPE":
        return a.strip().lower() == b.strip().lower()
    x, y = a.strip().upper(), b.strip().upper()
    if x in _ON | _OFF and y in _ON | _OFF:
        return (x in _ON) == (y in _ON)
    return x == y


def conflicts(spec: Spec) -> list[Conflict]:
    """The build.env values that say otherwise than the recipe field beside them."""
    fields = asks(spec)
    return [Conflict(name, value, fields[name]) for name, value in sorted(spec.build.env.items())
            if name in fields and not same(name, value, fields[name].value)]
