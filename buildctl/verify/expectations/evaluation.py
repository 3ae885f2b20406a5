"""Whether the probe says the wheel is what was expected: one Check a fact, and their summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from buildctl.recipe import compat
from buildctl.verify.expectations.expected import Expectations
from buildctl.verify.expectations.matching import (
    ABSENT,
    flag_value,
    format_arch_set,
    gpu_runs_on,
    show_value,
    version_matches,
    version_numbers,
    wheel_accelerator,
    wheel_archs,
)


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
            detail = "" if ok else f"{label} {show_value(actual)} in the wheel, {how} {expected}"
        checks.append(Check(label, show_value(expected), show_value(actual), ok, detail))

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


def cell_name(cell: dict) -> str:
    """`torch.compile inductor reduce-overhead fullgraph dynamic`: the backend, then the axes set off
    their default (a probe before the four axes names backend and mode only)."""
    parts = [cell.get("backend"), *([cell["mode"]] if cell.get("mode") not in (None, "default") else []),
             *(["fullgraph"] if cell.get("fullgraph") else []), *(["dynamic"] if cell.get("dynamic") else [])]
    return "torch.compile " + " ".join(str(p) for p in parts)


def framework_check_results(exp: Expectations, probe: dict) -> list[Check]:
    """numerics, the torch.compile matrix, the DDP step, and debug information (checks.py)."""
    res = probe.get("checks") or {}
    out: list[Check] = []
    for name, label in (("numerics", "numerics vs NumPy"), ("ddp", "DDP step (2 ranks, gloo)")):
        r = res.get(name) or {}
        if r.get("state") in ("ok", "failed", "error"):
            ok = r["state"] == "ok"
            # A rank that aborted in teardown after the step agreed passes, and the check says so.
            detail = "; ".join(r.get("teardown") or []) if ok else str(r.get("reason") or "")
            out.append(Check(label, "ok", r["state"], ok, detail))
    cells = (res.get("compile") or {}).get("cells") or []
    for c in cells:
        if c.get("backend") in REQUIRED_COMPILE_BACKENDS and c.get("state") != "skipped":
            ok = c.get("state") == "pass"
            detail = "" if ok else str(c.get("error") or "")
            if ok and c.get("dynamic") and c.get("recompiled"):
                detail = "a dynamic cell recompiled for its second input shape"
            out.append(Check(cell_name(c), "pass", c.get("state"), ok, detail))
    dbg = res.get("debug_info") or {}
    if exp.build_type in ("Debug", "RelWithDebInfo") and dbg.get("state") in ("ok", "failed", "skipped"):
        resolved = dbg.get("resolved")
        ok = bool(resolved)
        actual = resolved["location"] if resolved else dbg.get("reason") or "no debug information"
        out.append(Check("debug information", "a symbol resolves to a source line", actual, ok,
                         "" if ok else f"{exp.build_type} build without usable debug information: {actual}"))
        if any("libtorch_cpu." in str(lib.get("library", "")) for lib in dbg.get("libraries") or []):
            aten = dbg.get("aten")
            ok = bool(aten)
            actual = f"{aten.get('symbol')} at {aten['location']}" if aten else "no at::native function resolves"
            out.append(Check("ATen source line", "an at::native function at aten/src/ATen/...:LINE", actual, ok,
                             "" if ok else "libtorch_cpu's line tables do not reach ATen's sources"))
    out += _debug_assert_checks(exp, res.get("debug_assert") or {})
    return out


def _debug_assert_checks(exp: Expectations, da: dict) -> list[Check]:
    """torch's debug-only assertions: must fire in a Debug build; shown (not judged) in any other."""
    if da.get("state") not in ("ok", "error"):
        return []
    name, expected = "debug-only assertion (aten::neg kernel returning its input)", "fires"
    if da["state"] == "error":
        actual = f"error: {da.get('reason')}"
    elif da.get("fired"):
        actual = f"fired: {da.get('message')}"
    else:
        actual = "did not fire" + (" (the aliased result went through)" if da.get("aliased") else "")
    if exp.build_type == "Debug":
        ok = bool(da.get("fired"))
        return [Check(name, expected, actual, ok, "" if ok else "a Debug build without its debug-only assertions "
                      "(NDEBUG set?)")]
    return [Check(name, f"compiled out ({exp.build_type or 'not a Debug build'})", actual, None,
                  "not checked: only a Debug build compiles these assertions in")]


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
            parts.append(f"missing {format_arch_set(missing)}")
        if extra:
            parts.append(f"unexpected {format_arch_set(extra)}")
        detail = (f"arch list {format_arch_set(have)} in the wheel, {how} {format_arch_set(want)} "
                  f"({'; '.join(parts)})")
        if not want and have:
            detail += "; a CPU recipe should have no device code"
    out.append(Check("arch list", format_arch_set(want), format_arch_set(have), ok, detail))

    cov = probe.get("arch_coverage") or {}
    state = cov.get("state")
    if state == "ok" and "gfx" in cov:
        out.append(rocm_coverage_check(want, cov, how))
    elif state == "ok":
        sass, ptx = set(cov.get("sass") or []), set(cov.get("ptx") or [])
        missing = {a for a in want if a.startswith("sm_") and a not in sass}
        missing |= {a for a in want if a.startswith("compute_") and a not in ptx}
        extra = (sass | ptx) - want
        detail = f"SASS {format_arch_set(sass)}; PTX {format_arch_set(ptx)}"
        if missing:
            detail = f"requested but not in the binary: {format_arch_set(missing)}; " + detail
        elif extra:
            detail += f" (extra arch-specific kernels: {format_arch_set(extra)})"
        out.append(Check("arch coverage (binary)", format_arch_set(want), format_arch_set(sass | ptx), not missing,
                         detail))
    elif want and state not in (None, "skipped"):
        out.append(Check("arch coverage (binary)", format_arch_set(want), state, None,
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
        detail = (f"requested but not in the binary: {format_arch_set(missing)} ({how} {format_arch_set(want)}; "
                  f"code objects only for {format_arch_set(have)})")
    elif extra:
        detail += f" (extra targets: {format_arch_set(extra)})"
    errors = [f"{lib['path']}: {lib['error']}" for lib in cov.get("libraries") or [] if lib.get("error")]
    if errors and not missing:
        detail += "; " + "; ".join(errors)
    return Check("arch coverage (binary)", format_arch_set(want), format_arch_set(have), not missing, detail)


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
        return flag_value(settings[name]), f"{name}={settings[name]} in Build settings"
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
    sass, ptx, whence = wheel_archs(probe)
    for d in devs:
        cc = d.get("compute_capability")
        how = gpu_runs_on(cc, sass, ptx) if cc else None
        name = f"GPU {d.get('index')} {d.get('name')}"
        sm = f"sm_{str(cc).replace('.', '')}"
        if how:
            out.append(Check(f"{name} arch", sm, how, True, f"from the {whence}"))
        else:
            out.append(Check(f"{name} arch", sm, format_arch_set(sass | ptx), False,
                             f"{name} is {sm}; the wheel has {format_arch_set(sass | ptx)} ({whence}) and no kernel "
                             "that runs on it: 'no kernel image is available for execution on the device'"))
    drv = inv.get("driver_version")
    if drv:
        floor = compat.MINOR_COMPAT_FLOOR.get(version_numbers(cuda)[0]) if version_numbers(cuda) else None
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
