"""What a wheel should be: derived from the recipe, from a wheel's name, or given as --expect key=value."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from buildctl.verify.expectations.matching import ABSENT, flag_value, normalize_arch_list


@dataclass(frozen=True)
class Expectations:
    """Expected facts; None means "no expectation", ABSENT means "must not be there"."""

    accelerator: str | None = None  # cpu | cuda | rocm | ascend
    version: str | None = None  # the framework's public version (PYTORCH_BUILD_VERSION[.postN])
    cuda: str | None = None
    hip: str | None = None
    nccl: str | None = None
    cudnn: str | None = None
    arch: tuple[str, ...] | None = None  # normalised: sm_90, sm_90a, compute_90, gfx90a
    build_type: str | None = None
    features: dict[str, bool] = field(default_factory=dict)
    # Where each expectation came from, for messages: "recipe pins" / "verify.expect says".
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["arch"] = list(self.arch) if self.arch is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Expectations:
        d = dict(d)
        if d.get("arch") is not None:
            d["arch"] = tuple(d["arch"])
        return cls(**d)

    @classmethod
    def from_spec(cls, spec) -> Expectations:
        """Derive from a resolved `buildctl.recipe.schema.Spec`; `spec.verify.expect.*` wins where set."""
        tc, build, exp = spec.toolchain, spec.build, spec.verify.expect
        acc = spec.accelerator
        src: dict[str, str] = {}

        def pick(name: str, override, derived):
            if override is not None:
                src[name] = "verify.expect says"
                return override
            src[name] = "recipe pins"
            return derived

        cpu = acc == "cpu" or acc == "ascend"  # torch_npu builds on a CPU torch
        # A prebuilt framework's CUDA and archs are its own: the recipe's are its extensions' toolchain
        theirs = spec.framework.source.prebuilt is not None and not cpu
        cuda = pick("cuda", exp.cuda, None if theirs else tc.cuda.major_minor if tc.cuda else (ABSENT if cpu else None))
        hip = ".".join(tc.rocm.version.split(".")[:2]) if tc.rocm else (ABSENT if cpu else None)
        if tc.nccl and tc.nccl.install != "none":
            nccl_derived = tc.nccl.version
        elif tc.rocm and tc.rocm.rccl:
            nccl_derived = tc.rocm.rccl  # RCCL reports the NCCL API version it implements
        else:
            nccl_derived = ABSENT if cpu else None
        nccl = pick("nccl", exp.nccl, nccl_derived)
        cudnn = pick("cudnn", exp.cudnn, tc.cudnn.version if tc.cudnn else (ABSENT if cpu else None))
        if exp.arch is not None:
            src["arch"] = "verify.expect says"
            arch = normalize_arch_list(exp.arch)
        elif tc.rocm:
            src["arch"] = "recipe pins"
            arch = tuple(tc.rocm.arch)
        else:
            src["arch"] = "recipe pins"
            arch = normalize_arch_list(build.cuda_arch) if (build.cuda_arch or cpu) and not theirs else None
        fw = spec.framework
        # A prebuilt framework was not built by this recipe: its build section is the extensions'
        prebuilt = fw.source.prebuilt is not None
        build_type = pick("build_type", exp.build_type, None if prebuilt else build.type)
        version = None
        if fw.version:
            src["version"] = "recipe pins"
            version = fw.version if fw.build_number == 1 else f"{fw.version}.post{fw.build_number}"
        features = {**({} if prebuilt else build.features), **exp.features}
        return cls(accelerator=acc, version=version, cuda=cuda, hip=hip, nccl=nccl, cudnn=cudnn, arch=arch,
                   build_type=build_type, features=features, sources=src)


    @classmethod
    def from_wheel_name(cls, filename: str) -> Expectations:
        """Without a recipe: what a PyPI-style local version promises ('+cpu', '+cu130'), else nothing."""
        m = re.match(r"[^-]+-[^-]*\+(cpu|cu([0-9]{1,3})([0-9]))[.-]", filename)
        if not m:
            return cls()
        src = dict.fromkeys(("cuda", "nccl", "cudnn", "arch"), "the wheel's tag says")
        if m.group(1) == "cpu":
            return cls(accelerator="cpu", cuda=ABSENT, hip=ABSENT, nccl=ABSENT, cudnn=ABSENT, arch=(),
                       sources=src)
        return cls(accelerator="cuda", cuda=f"{int(m.group(2))}.{m.group(3)}", sources=src)


# Spelled as in a recipe's verify.expect (spec.Expect), plus what a recipe pins elsewhere.
EXPECT_KEYS = ("version", "accelerator", "cuda", "hip", "nccl", "cudnn", "arch", "build_type")
EXPECT_HELP = (f"keys: {', '.join(EXPECT_KEYS)} (or the module's name for version), USE_*/BUILD_* features "
               "(on/off); cuda/hip/nccl/cudnn=none for 'must be absent'; arch a comma list (8.0,9.0+PTX or gfx90a)")


def parse_expect(items, module: str = "torch") -> Expectations:
    """`--expect torch=2.6.0 --expect cuda=none --expect USE_MPI=on` as Expectations, each value validated
    as the recipe's verify.expect validates it (spec.Expect); InputError (one line) otherwise."""
    from buildctl.errors import InputError

    values: dict[str, Any] = {}
    features: dict[str, bool] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if key == module:
            key = "version"
        try:
            if not sep or not key or not value:
                raise ValueError("not key=value")
            if key in values or key in features:
                raise ValueError(f"{key} is expected twice")
            if re.fullmatch(r"(USE|BUILD)_[A-Z0-9_]+", key):
                features[key] = _expected_flag(value)
            else:
                values[key] = _expected_value(key, value)
        except ValueError as e:
            shown = ascii(str(item)[:80])[1:-1]
            raise InputError(f"--expect {shown}: {e}; fix: --expect key=value, {EXPECT_HELP}") from None
    sources = dict.fromkeys([*values, *(["features"] if features else [])], "--expect says")
    return Expectations(**values, features=features, sources=sources)


def _expected_flag(value: str) -> bool:
    flag = flag_value(value)
    if flag is None:
        raise ValueError("a feature is on or off")
    return flag


def _expected_value(key: str, value: str) -> Any:
    """One --expect value, validated with the recipe schema's types; ValueError saying why not."""
    from packaging.version import InvalidVersion, Version
    from pydantic import TypeAdapter, ValidationError

    from buildctl.recipe import fields
    from buildctl.recipe import schema as spec_mod

    try:
        if key == "version":
            try:
                Version(value)
            except InvalidVersion:
                raise ValueError("not a version (e.g. 2.6.0)") from None
            return value
        if key == "accelerator":
            if value not in ("cpu", "cuda", "rocm"):
                raise ValueError("the accelerator is cpu, cuda or rocm")
            return value
        if key in ("cuda", "hip", "nccl", "cudnn"):
            if value.lower() in ("none", ABSENT):
                return ABSENT
            return TypeAdapter(fields.Version).validate_python(value)
        if key == "arch":
            tokens = [t.strip() for t in value.split(",") if t.strip()]
            arch = TypeAdapter(fields.CudaArch | fields.RocmArch)
            return normalize_arch_list(arch.validate_python(t) for t in tokens)
        if key == "build_type":
            return spec_mod.Expect.model_validate({key: value}).build_type
    except ValidationError as e:
        raise ValueError(e.errors(include_url=False, include_input=False)[0]["msg"]) from None
    raise ValueError(f"unknown key {ascii(key[:40])[1:-1]}")


def merge(base: Expectations, override: Expectations) -> Expectations:
    """`base` (a recipe's) with every expectation `override` sets (--expect) put over it."""
    set_fields = {k: getattr(override, k) for k in EXPECT_KEYS if getattr(override, k) is not None}
    return Expectations(**{**base.to_dict(), "arch": base.arch, **set_fields,
                           "features": {**base.features, **override.features},
                           "sources": {**base.sources, **override.sources}})
