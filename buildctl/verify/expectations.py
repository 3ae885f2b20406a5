"""What a built wheel should be, and whether the probe says it is: pure functions, no I/O.

`Expectations.from_spec(spec)` derives the expected values from the recipe (toolchain and build
sections; `verify.expect.*` overrides); `evaluate(expectations, probe)` turns a probe report (the JSON
written by probe.py) into a list of `Check`s. A check's `ok` is True (holds), False (fails the run) or
None (does not apply here or cannot be seen in this wheel: shown, never failing).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from buildctl import compat

# "Expected absent": a CPU build must not carry CUDA, NCCL, cuDNN or device code.
ABSENT = "absent"


_TRUE = {"ON", "1", "TRUE", "YES", "Y"}
_FALSE = {"OFF", "0", "FALSE", "NO", "N", ""}


@dataclass(frozen=True)
class Check:
    name: str
    expected: Any
    actual: Any
    ok: bool | None
    detail: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Check:
        return cls(d["name"], d.get("expected"), d.get("actual"), d.get("ok"), d.get("detail", ""))

    @property
    def failed(self) -> bool:
        return self.ok is False


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
        """Derive from a resolved `buildctl.spec.Spec`; `spec.verify.expect.*` wins where set."""
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
        cuda = pick("cuda", exp.cuda, tc.cuda.major_minor if tc.cuda else (ABSENT if cpu else None))
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
            arch = normalize_arch_list(build.cuda_arch) if (build.cuda_arch or cpu) else None
        build_type = pick("build_type", exp.build_type, build.type)
        fw = spec.framework
        version = None
        if fw.version:
            src["version"] = "recipe pins"
            version = fw.version if fw.build_number == 1 else f"{fw.version}.post{fw.build_number}"
        features = {**build.features, **exp.features}
        return cls(accelerator=acc, version=version, cuda=cuda, hip=hip, nccl=nccl, cudnn=cudnn, arch=arch,
                   build_type=build_type, features=features, sources=src)


    @classmethod
    def from_wheel_name(cls, filename: str) -> Expectations:
        """Without a recipe: what a PyPI-style local version promises ('+cpu', '+cu130'), else nothing."""
        m = re.match(r"[^-]+-[^-]*\+(cpu|cu(\d+)(\d))[.-]", filename)
        if not m:
            return cls()
        src = dict.fromkeys(("cuda", "nccl", "cudnn", "arch"), "the wheel's tag says")
        if m.group(1) == "cpu":
            return cls(accelerator="cpu", cuda=ABSENT, hip=ABSENT, nccl=ABSENT, cudnn=ABSENT, arch=(),
                       sources=src)
        return cls(accelerator="cuda", cuda=f"{int(m.group(2))}.{m.group(3)}", sources=src)


# --------------------------------------------------------------------------- --expect key=value

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
    flag = _flag(value)
    if flag is None:
        raise ValueError("a feature is on or off")
    return flag


def _expected_value(key: str, value: str) -> Any:
    """One --expect value, validated with the recipe schema's types; ValueError saying why not."""
    from packaging.version import InvalidVersion, Version
    from pydantic import TypeAdapter, ValidationError

    from buildctl import spec as spec_mod

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
            return TypeAdapter(spec_mod.Version).validate_python(value)
        if key == "arch":
            tokens = [t.strip() for t in value.split(",") if t.strip()]
            arch = TypeAdapter(spec_mod.CudaArch | spec_mod.RocmArch)
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


# --------------------------------------------------------------------------- helpers


def _nums(v: str) -> list[int]:
    m = re.match(r"\d+(\.\d+)*", str(v).strip())
    return [int(x) for x in m.group(0).split(".")] if m else []


def version_matches(expected: str, actual: str | None) -> bool:
    """Compare on the components both sides give: '12.1.1' matches torch's '12.1', '2.28' matches
    '2.28.9'; at least major.minor when the expectation has them."""
    if actual is None:
        return False
    e, a = _nums(expected), _nums(actual)
    n = min(len(e), len(a))
    if n == 0 or n < min(2, len(e)):
        return False
    return e[:n] == a[:n]


def normalize_arch(token: str) -> tuple[str, ...]:
    """'8.0' -> sm_80; '9.0+PTX' -> sm_90 + compute_90; '9.0a' -> sm_90a; 'sm_90'/'compute_90'/'gfx90a' as is."""
    t = token.strip()
    m = re.fullmatch(r"(\d{1,2})\.(\d)([af]?)(\+PTX)?", t, re.IGNORECASE)
    if m:
        base = f"{m.group(1)}{m.group(2)}{m.group(3).lower()}"
        return (f"sm_{base}", f"compute_{base}") if m.group(4) else (f"sm_{base}",)
    return (t.lower(),)


def normalize_arch_list(tokens) -> tuple[str, ...]:
    out: list[str] = []
    for t in tokens:
        for a in normalize_arch(t):
            if a not in out:
                out.append(a)
    return tuple(out)


def _arch_key(a: str) -> tuple[int, str]:
    m = re.search(r"(\d+)", a)
    return (int(m.group(1)) if m else 0, a)


def _fmt_set(items) -> str:
    items = sorted(items, key=_arch_key)
    return ", ".join(items) if items else "none"


def _flag(value: str | None) -> bool | None:
    if value is None:
        return None
    v = str(value).strip().upper()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return None


def _show(v) -> str:
    return "absent" if v in (None, ABSENT) else str(v)


def wheel_accelerator(probe: dict) -> str:
    fw = probe.get("framework") or {}
    if fw.get("hip"):
        return "rocm"
    if fw.get("cuda"):
        return "cuda"
    return "cpu"


def _wheel_archs(probe: dict) -> tuple[set[str], set[str], str]:
    """(SASS archs, PTX archs, where from): the binary when cuobjdump ran, else the compiled arch list."""
    cov = probe.get("arch_coverage") or {}
    if cov.get("state") == "ok":
        return set(cov.get("sass") or []), set(cov.get("ptx") or []), "binary (cuobjdump)"
    archs = (probe.get("framework") or {}).get("arch_list") or []
    return ({a for a in archs if a.startswith("sm_")}, {a for a in archs if a.startswith("compute_")},
            "compiled arch list")


def binary_arch_to_cuda_arch(token: str) -> str | None:
    """'sm_90a' -> '9.0a', 'compute_90' -> '9.0+PTX' (the TORCH_CUDA_ARCH_LIST spelling compat reads)."""
    m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", token)
    if not m:
        return None
    arch = f"{m.group(2)}.{m.group(3)}{m.group(4)}"
    return arch + "+PTX" if m.group(1) == "compute" else arch


def gpu_runs_on(cc: str, sass: set[str], ptx: set[str]) -> str | None:
    """Which of the wheel's SASS/PTX a GPU of compute capability 'X.Y' runs (compat.arch_runs_on:
    cubin X.y on X.z for z >= y, 'a' only on exactly X.y, PTX JIT on any newer GPU); None if none."""
    exact = "sm_" + str(cc).replace(".", "")
    if exact in sass:
        return exact
    for token in sorted(sass, key=_arch_key, reverse=True) + sorted(ptx, key=_arch_key, reverse=True):
        arch = binary_arch_to_cuda_arch(token)
        try:
            if arch and compat.arch_runs_on(arch, cc):
                return token if token.startswith("sm_") else f"{token} (PTX JIT)"
        except ValueError:
            continue
    return None


def verdict(probe: dict) -> str:
    """One line about the wheel and the GPUs here, from the inventory taken before any CUDA call."""
    fw = probe.get("framework") or {}
    inv = probe.get("gpus") or {}
    devs = inv.get("devices") or []
    if fw.get("hip"):
        build = f"ROCm {fw['hip']} build"
    elif fw.get("cuda"):
        build = f"CUDA {fw['cuda']} build"
    else:
        build = "CPU-only build"
    amd = probe.get("amd_gpus")
    if fw.get("hip") and amd is not None:
        if amd.get("state") != "ok":
            return f"{build}; {amd.get('reason')}: GPU checks skipped"
        return f"{build} on {amd.get('devices')} AMD GPU(s)"
    if inv.get("state") != "ok":
        here = inv.get("reason") or inv.get("state") or "GPU inventory unavailable"
        tail = ""
        if fw.get("cuda"):
            tail = ": GPU checks skipped" + (", all-reduce on gloo/CPU"
                                             if (probe.get("distributed") or {}).get("available") else "")
        return f"{build}; {here}{tail}"
    names: dict[str, int] = {}
    for d in devs:
        key = f"{d.get('name')} (sm_{str(d.get('compute_capability') or '?').replace('.', '')})"
        names[key] = names.get(key, 0) + 1
    gpus = ", ".join(f"{n}x {k}" for k, n in names.items()) or "no GPU"
    drv = f"driver {inv.get('driver_version')} (CUDA <= {inv.get('cuda_driver_version')})"
    if not fw.get("cuda") and not fw.get("hip"):
        return f"{build}; {gpus} here, unused by this wheel; {drv}"
    return f"{build} on {gpus}; {drv}"


# --------------------------------------------------------------------------- evaluation


def evaluate(exp: Expectations, probe: dict, subject: str = "wheel") -> list[Check]:
    """All checks for one probe report, in display order; `subject` names what was verified in the
    details ('image': "version 2.5.1 in the image, --expect says 2.6.0")."""
    checks = _evaluate(exp, probe)
    if subject == "wheel":
        return checks
    return [Check(c.name, c.expected, c.actual, c.ok, c.detail.replace("the wheel", f"the {subject}"))
            for c in checks]


def _evaluate(exp: Expectations, probe: dict) -> list[Check]:
    checks: list[Check] = []
    if probe.get("fatal"):
        return [Check("probe", "completes", "crashed", False, str(probe["fatal"]))]
    imp = probe.get("import") or {}
    if not imp.get("ok"):
        return [Check("import", "imports", "fails", False, str(imp.get("error")))]
    smoke = imp.get("smoke")
    checks.append(Check("import", "imports", "ok" if smoke in (None, "ok") else "broken",
                        smoke in (None, "ok"),
                        f"import in {imp.get('seconds')} s" + (f"; smoke test: {smoke}" if smoke else "")))
    fw = probe.get("framework") or {}
    settings = (probe.get("config") or {}).get("build_settings") or {}
    dist = probe.get("distributed") or {}
    src = exp.sources

    if exp.accelerator and exp.accelerator != "ascend":
        actual = wheel_accelerator(probe)
        ok = actual == exp.accelerator
        detail = "" if ok else f"{actual} build in the wheel, recipe builds for {exp.accelerator}"
        if not ok and actual == "cpu":
            detail = f"CPU-only wheel, recipe builds for {exp.accelerator}: the build silently dropped it"
        checks.append(Check("accelerator", exp.accelerator, actual, ok, detail))

    def version_check(name: str, label: str, expected: str | None, actual: str | None) -> None:
        if expected is None:
            return
        how = src.get(name, "recipe pins")
        if expected == ABSENT:
            ok = actual in (None, "")
            detail = "" if ok else (f"{label} {actual} in the wheel, recipe expects none" if how == "recipe pins"
                                    else f"{label} {actual} in the wheel, {how} none")
        else:
            ok = version_matches(expected, actual)
            detail = "" if ok else f"{label} {_show(actual)} in the wheel, {how} {expected}"
        checks.append(Check(label, _show(expected), _show(actual), ok, detail))

    if exp.version is not None:
        actual = str(fw.get("version") or "")
        # a pinned local label ("0.1.0+cpu") must be there; without one, any local label is the build's own
        ok = actual == exp.version if "+" in exp.version else actual.split("+")[0] == exp.version
        detail = "" if ok else f"version {actual or 'unknown'} in the wheel, {src.get('version', 'recipe pins')} {exp.version}"
        checks.append(Check("version", exp.version, actual or "unknown", ok, detail))
    version_check("cuda", "CUDA", exp.cuda, fw.get("cuda"))
    version_check("hip", "HIP", exp.hip, fw.get("hip"))
    version_check("nccl", "RCCL" if exp.accelerator == "rocm" else "NCCL", exp.nccl, fw.get("nccl"))
    cudnn_actual = fw.get("cudnn") or settings.get("CUDNN_VERSION") or None
    version_check("cudnn", "cuDNN", exp.cudnn, cudnn_actual)

    checks += _arch_checks(exp, probe)
    checks += _build_type_checks(exp, fw, settings)
    checks += _feature_checks(exp, fw, settings, dist)
    checks += gpu_checks(probe)
    checks += _sweep_checks(probe)
    checks += framework_check_results(exp, probe)
    return checks


# torch.compile backends whose cells must pass: they need no compiler at run time. Inductor's cells
# are shown (they need a C++ compiler or Triton in the image) but are not an expectation.
REQUIRED_COMPILE_BACKENDS = ("eager", "aot_eager")


def framework_check_results(exp: Expectations, probe: dict) -> list[Check]:
    """numerics, the torch.compile matrix, the DDP step, and debug information (checks.py)."""
    res = probe.get("checks") or {}
    out: list[Check] = []
    for name, label in (("numerics", "numerics vs NumPy"), ("ddp", "DDP step (2 ranks, gloo)")):
        r = res.get(name) or {}
        if r.get("state") in ("ok", "failed", "error"):
            ok = r["state"] == "ok"
            out.append(Check(label, "ok", r["state"], ok, "" if ok else str(r.get("reason") or "")))
    cells = (res.get("compile") or {}).get("cells") or []
    for c in cells:
        if c.get("backend") in REQUIRED_COMPILE_BACKENDS:
            ok = c.get("state") == "pass"
            out.append(Check(f"torch.compile {c['backend']}", "pass", c.get("state"), ok,
                             "" if ok else str(c.get("error") or "")))
    dbg = res.get("debug_info") or {}
    if exp.build_type in ("Debug", "RelWithDebInfo") and dbg.get("state") in ("ok", "failed", "skipped"):
        resolved = dbg.get("resolved")
        ok = bool(resolved)
        actual = resolved["location"] if resolved else dbg.get("reason") or "no debug information"
        out.append(Check("debug information", "a symbol resolves to a source line", actual, ok,
                         "" if ok else f"{exp.build_type} build without usable debug information: {actual}"))
    return out


def _arch_checks(exp: Expectations, probe: dict) -> list[Check]:
    if exp.arch is None:
        return []
    out: list[Check] = []
    fw = probe.get("framework") or {}
    want = set(exp.arch)
    have = set(fw.get("arch_list") or [])
    how = exp.sources.get("arch", "recipe pins")
    ok = want == have
    detail = ""
    if not ok:
        missing, extra = want - have, have - want
        parts = []
        if missing:
            parts.append(f"missing {_fmt_set(missing)}")
        if extra:
            parts.append(f"unexpected {_fmt_set(extra)}")
        detail = (f"arch list {_fmt_set(have)} in the wheel, {how} {_fmt_set(want)} ({'; '.join(parts)})")
        if not want and have:
            detail += "; a CPU recipe should have no device code"
    out.append(Check("arch list", _fmt_set(want), _fmt_set(have), ok, detail))

    cov = probe.get("arch_coverage") or {}
    state = cov.get("state")
    if state == "ok" and "gfx" in cov:
        out.append(rocm_coverage_check(want, cov, how))
    elif state == "ok":
        sass, ptx = set(cov.get("sass") or []), set(cov.get("ptx") or [])
        missing = {a for a in want if a.startswith("sm_") and a not in sass}
        missing |= {a for a in want if a.startswith("compute_") and a not in ptx}
        extra = (sass | ptx) - want
        detail = f"SASS {_fmt_set(sass)}; PTX {_fmt_set(ptx)}"
        if missing:
            detail = f"requested but not in the binary: {_fmt_set(missing)}; " + detail
        elif extra:
            detail += f" (extra arch-specific kernels: {_fmt_set(extra)})"
        out.append(Check("arch coverage (binary)", _fmt_set(want), _fmt_set(sass | ptx), not missing, detail))
    elif want and state not in (None, "skipped"):
        out.append(Check("arch coverage (binary)", _fmt_set(want), state, None,
                         f"binary not listed: {cov.get('reason')}"))
    return out


def rocm_coverage_check(want: set[str], cov: dict, how: str) -> Check:
    """Every requested gfx target has a code object in the binary (read from its .hip_fatbin)."""
    have = set(cov.get("gfx") or [])
    missing, extra = want - have, have - want
    sizes = ", ".join(f"{t} {co['bytes']} B" for lib in cov.get("libraries") or []
                      for t, co in sorted(lib.get("code_objects", {}).items()))
    detail = f"code objects: {sizes or 'none'}"
    if missing:
        detail = (f"requested but not in the binary: {_fmt_set(missing)} ({how} {_fmt_set(want)}; "
                  f"code objects only for {_fmt_set(have)})")
    elif extra:
        detail += f" (extra targets: {_fmt_set(extra)})"
    errors = [f"{lib['path']}: {lib['error']}" for lib in cov.get("libraries") or [] if lib.get("error")]
    if errors and not missing:
        detail += "; " + "; ".join(errors)
    return Check("arch coverage (binary)", _fmt_set(want), _fmt_set(have), not missing, detail)


def _build_type_checks(exp: Expectations, fw: dict, settings: dict) -> list[Check]:
    if exp.build_type is None:
        return []
    how = exp.sources.get("build_type", "recipe pins")
    actual = settings.get("BUILD_TYPE")
    ok = actual == exp.build_type
    detail = "" if ok else (f"BUILD_TYPE {actual} in the wheel's config, {how} {exp.build_type}" if actual
                            else "BUILD_TYPE is not in the wheel's __config__ Build settings")
    out = [Check("build type (config)", exp.build_type, actual or "absent", ok, detail)]
    want_debug = exp.build_type == "Debug"
    debug = fw.get("debug")
    ok = debug is not None and bool(debug) == want_debug
    detail = "" if ok else (f"version.debug is {debug} in the wheel, {how} {exp.build_type}"
                            + (" (a Debug build that is Release)" if want_debug else ""))
    out.append(Check("build type (version.debug)", want_debug, debug, ok, detail))
    return out


def _feature_actual(name: str, fw: dict, settings: dict, dist: dict) -> tuple[bool | None, str]:
    if name in settings:
        return _flag(settings[name]), f"{name}={settings[name]} in Build settings"
    fallback = {
        "USE_CUDA": (fw.get("cuda") is not None, "torch.version.cuda"),
        "USE_ROCM": (fw.get("hip") is not None, "torch.version.hip"),
        "USE_CUDNN": (fw.get("cudnn") is not None, "cudnn.version()"),
        "USE_NCCL": (dist.get("nccl"), "distributed.is_nccl_available()"),
        "USE_GLOO": (dist.get("gloo"), "distributed.is_gloo_available()"),
        "USE_MPI": (dist.get("mpi"), "distributed.is_mpi_available()"),
        "USE_DISTRIBUTED": (dist.get("available"), "distributed.is_available()"),
    }
    if name in fallback and dist is not None:
        v, how = fallback[name]
        return (bool(v) if v is not None else None), f"from {how}"
    return None, "not visible in this wheel (not in __config__ Build settings)"


def _feature_checks(exp: Expectations, fw: dict, settings: dict, dist: dict) -> list[Check]:
    out = []
    for name in sorted(exp.features):
        want = bool(exp.features[name])
        actual, how = _feature_actual(name, fw, settings, dist)
        if actual is None:
            out.append(Check(name, "on" if want else "off", "unknown", None, how))
            continue
        ok = actual == want
        detail = how if ok else f"{name} is {'on' if actual else 'off'} in the wheel ({how}), recipe sets it {'on' if want else 'off'}"
        out.append(Check(name, "on" if want else "off", "on" if actual else "off", ok, detail))
    return out


def gpu_checks(probe: dict) -> list[Check]:
    """The GPUs here (if any) can run this wheel: arch present, driver new enough for its CUDA."""
    fw = probe.get("framework") or {}
    inv = probe.get("gpus") or {}
    devs = inv.get("devices") or []
    cuda = fw.get("cuda")
    amd = probe.get("amd_gpus")
    if fw.get("hip") and amd is not None:
        if amd.get("state") != "ok":
            return [Check("GPUs here", "-", "none", None, f"{amd.get('reason')}: GPU checks skipped")]
        return [Check("GPUs here", "-", f"{amd.get('devices')} AMD", None,
                      "AMD GPUs are not matched against the code objects yet")]
    if inv.get("state") != "ok" or not devs:
        why = inv.get("reason") or ("no GPU visible" if inv.get("state") == "ok" else inv.get("state"))
        return [Check("GPUs here", "-", "none", None, f"{why}: GPU checks skipped")]
    if fw.get("hip"):
        return [Check("GPUs here", "-", f"{len(devs)} NVIDIA", None, "ROCm wheel on NVIDIA GPUs: not checked")]
    if not cuda:
        return [Check("GPUs here", "-", f"{len(devs)} GPU(s)", None,
                      "CPU-only wheel: the GPUs here are not used")]
    out = []
    sass, ptx, whence = _wheel_archs(probe)
    for d in devs:
        cc = d.get("compute_capability")
        how = gpu_runs_on(cc, sass, ptx) if cc else None
        name = f"GPU {d.get('index')} {d.get('name')}"
        sm = f"sm_{str(cc).replace('.', '')}"
        if how:
            out.append(Check(f"{name} arch", sm, how, True, f"from the {whence}"))
        else:
            out.append(Check(f"{name} arch", sm, _fmt_set(sass | ptx), False,
                             f"{name} is {sm}; the wheel has {_fmt_set(sass | ptx)} ({whence}) and no kernel "
                             "that runs on it: 'no kernel image is available for execution on the device'"))
    drv = inv.get("driver_version")
    if drv:
        floor = compat.MINOR_COMPAT_FLOOR.get(_nums(cuda)[0]) if _nums(cuda) else None
        ok, why = compat.driver_supports(drv, cuda)
        detail = f"{why} (driver supports CUDA <= {inv.get('cuda_driver_version')})"
        out.append(Check("driver for CUDA", f">= {floor}" if floor else f"runs CUDA {cuda}", drv, ok, detail))
    return out


def _sweep_checks(probe: dict) -> list[Check]:
    sw = probe.get("sweep") or {}
    state = sw.get("state")
    if state == "ok":
        wrong = sum(r.get("wrong", 0) for r in sw.get("rows") or [])
        rows = len(sw.get("rows") or [])
        return [Check("all-reduce correctness", 0, wrong, wrong == 0,
                      f"{rows} sizes, {sw.get('label')}" + ("" if wrong == 0 else f": {wrong} wrong elements"))]
    if state == "error":
        return [Check("all-reduce sweep", "runs", "error", False, str(sw.get("reason")))]
    if state == "skipped" and "distributed" in str(sw.get("reason")):
        return [Check("all-reduce sweep", "-", "skipped", None, str(sw.get("reason")))]
    return []


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.ok is False]


def summary_line(checks: list[Check]) -> str:
    bad = failed(checks)
    if not bad:
        return f"{sum(1 for c in checks if c.ok)} checks passed"
    return f"{len(bad)} of {len(checks)} checks failed: " + "; ".join(c.detail or c.name for c in bad)
