"""Expectations: recipe -> expected facts -> checks against a probe report (pure logic)."""

from __future__ import annotations

import pytest
from verify_fixtures import cpu_probe, cuda_spec, h200_probe, make_spec, multi_gpu_probe

from buildctl.verify.expectations import (
    ABSENT,
    Expectations,
    evaluate,
    failed,
    gpu_runs_on,
    normalize_arch_list,
    summary_line,
    verdict,
    version_matches,
)


def by_name(checks):
    return {c.name: c for c in checks}


def test_cpu_spec_passes_on_the_cpu_wheel():
    exp = Expectations.from_spec(make_spec())
    assert exp.accelerator == "cpu"
    assert (exp.cuda, exp.nccl, exp.cudnn, exp.hip) == (ABSENT,) * 4
    assert exp.arch == () and exp.build_type == "Release"
    checks = evaluate(exp, cpu_probe())
    assert not failed(checks), summary_line(checks)
    names = by_name(checks)
    assert names["CUDA"].ok and names["NCCL"].ok and names["arch list"].ok
    assert names["all-reduce correctness"].ok
    assert names["GPUs here"].ok is None  # no driver is a state, not a failure


def test_cuda_spec_passes_on_the_real_h200_report():
    checks = evaluate(Expectations.from_spec(cuda_spec()), h200_probe())
    assert not failed(checks), summary_line(checks)
    names = by_name(checks)
    assert names["GPU 0 NVIDIA H200 arch"].actual == "sm_90"
    assert names["driver for CUDA"].ok
    assert names["arch coverage (binary)"].ok


def test_nccl_mismatch_names_both_versions():
    probe = h200_probe()
    probe["framework"]["nccl"] = "2.27.7"
    checks = evaluate(Expectations.from_spec(cuda_spec(toolchain={"nccl": {"version": "2.28.9", "install": "pip"}})), probe)
    bad = failed(checks)
    assert [c.name for c in bad] == ["NCCL"]
    assert bad[0].detail == "NCCL 2.27.7 in the wheel, recipe pins 2.28.9"
    assert "NCCL 2.27.7 in the wheel, recipe pins 2.28.9" in summary_line(checks)


def test_nccl_absent_from_a_cuda_wheel_fails():
    probe = h200_probe()
    probe["framework"]["nccl"] = None
    bad = failed(evaluate(Expectations.from_spec(cuda_spec()), probe))
    assert bad[0].detail == "NCCL absent in the wheel, recipe pins 2.28.9"


def test_nccl_install_none_sets_no_version_expectation():
    exp = Expectations.from_spec(cuda_spec(toolchain={"nccl": {"version": "2.28.9", "install": "none"}}))
    assert exp.nccl is None


def test_verify_expect_overrides_and_says_so():
    exp = Expectations.from_spec(cuda_spec(expect={"nccl": "2.30.7"}))
    assert exp.nccl == "2.30.7"
    bad = failed(evaluate(exp, h200_probe()))
    assert bad[0].detail == "NCCL 2.28.9 in the wheel, verify.expect says 2.30.7"


def test_debug_recipe_with_a_release_wheel_fails_twice():
    exp = Expectations.from_spec(make_spec(build={"type": "Debug"}))
    names = by_name(failed(evaluate(exp, cpu_probe())))
    assert set(names) == {"build type (config)", "build type (version.debug)"}
    assert names["build type (config)"].detail == "BUILD_TYPE Release in the wheel's config, recipe pins Debug"
    assert "a Debug build that is Release" in names["build type (version.debug)"].detail


def test_debug_wheel_passes_a_debug_recipe_and_fails_a_release_one():
    probe = cpu_probe()
    probe["config"]["build_settings"]["BUILD_TYPE"] = "Debug"
    probe["framework"]["debug"] = True
    assert not failed(evaluate(Expectations.from_spec(make_spec(build={"type": "Debug"})), probe))
    names = by_name(failed(evaluate(Expectations.from_spec(make_spec()), probe)))
    assert set(names) == {"build type (config)", "build type (version.debug)"}
    assert "BUILD_TYPE Debug in the wheel's config, recipe pins Release" == names["build type (config)"].detail


def test_relwithdebinfo_is_not_debug():
    probe = cpu_probe()
    probe["config"]["build_settings"]["BUILD_TYPE"] = "RelWithDebInfo"
    assert not failed(evaluate(Expectations.from_spec(make_spec(build={"type": "RelWithDebInfo"})), probe))


def test_missing_build_type_in_config_fails():
    probe = cpu_probe()
    del probe["config"]["build_settings"]["BUILD_TYPE"]
    bad = failed(evaluate(Expectations.from_spec(make_spec()), probe))
    assert bad[0].name == "build type (config)" and "not in the wheel's __config__" in bad[0].detail


def test_arch_normalisation():
    assert normalize_arch_list(["8.0", "9.0+PTX", "9.0a", "10.0f", "sm_86", "compute_120"]) == (
        "sm_80", "sm_90", "compute_90", "sm_90a", "sm_100f", "sm_86", "compute_120")


def test_arch_plus_ptx_needs_compute_in_the_wheel():
    spec = cuda_spec(build={"cuda_arch": ["8.0", "9.0+PTX"]})
    probe = h200_probe()
    probe["arch_coverage"] = {"state": "skipped", "reason": "test", "sass": [], "ptx": [], "libraries": []}
    probe["framework"]["arch_list"] = ["sm_80", "sm_90", "compute_90"]
    assert not failed(evaluate(Expectations.from_spec(spec), probe))
    probe["framework"]["arch_list"] = ["sm_80", "sm_90"]
    bad = failed(evaluate(Expectations.from_spec(spec), probe))
    assert [c.name for c in bad] == ["arch list"]
    assert "missing compute_90" in bad[0].detail


def test_arch_plus_ptx_in_the_binary():
    spec = cuda_spec(build={"cuda_arch": ["8.0", "9.0+PTX"]})
    probe = h200_probe()
    probe["framework"]["arch_list"] = ["sm_80", "sm_90", "compute_90"]
    probe["arch_coverage"].update(sass=["sm_80", "sm_90"], ptx=[])
    names = by_name(failed(evaluate(Expectations.from_spec(spec), probe)))
    assert "requested but not in the binary: compute_90" in names["arch coverage (binary)"].detail
    probe["arch_coverage"].update(ptx=["compute_90"])
    assert not failed(evaluate(Expectations.from_spec(spec), probe))


def test_arch_list_that_fell_back_to_common_fails():
    probe = h200_probe()  # the wheel has sm_75..sm_120; the recipe asked for 9.0 only
    bad = by_name(failed(evaluate(Expectations.from_spec(cuda_spec(build={"cuda_arch": ["9.0"]})), probe)))
    assert "unexpected sm_75, sm_80, sm_86, sm_100, sm_120" in bad["arch list"].detail


def test_cpu_only_wheel_from_a_cuda_recipe():
    bad = by_name(failed(evaluate(Expectations.from_spec(cuda_spec()), cpu_probe())))
    assert "CPU-only wheel, recipe builds for cuda" in bad["accelerator"].detail
    assert bad["CUDA"].detail == "CUDA absent in the wheel, recipe pins 13.0"


def test_gpu_without_its_arch_in_the_wheel_fails():
    probe = h200_probe()
    probe["framework"]["arch_list"] = ["sm_80"]
    probe["arch_coverage"].update(sass=["sm_80"], ptx=[])
    bad = by_name(failed(evaluate(Expectations(), probe)))
    assert "no kernel image is available" in bad["GPU 0 NVIDIA H200 arch"].detail


def test_gpu_arch_rules():
    assert gpu_runs_on("8.6", {"sm_80"}, set()) == "sm_80"  # same major, newer minor
    assert gpu_runs_on("9.0", {"sm_80"}, set()) is None
    assert gpu_runs_on("9.0", {"sm_80"}, {"compute_80"}) == "compute_80 (PTX JIT)"
    assert gpu_runs_on("9.0", {"sm_90a", "sm_90"}, set()) == "sm_90"
    assert gpu_runs_on("10.3", {"sm_90a"}, set()) is None  # 'a' code only on exactly 9.0


def test_old_driver_for_the_wheels_cuda_fails():
    probe = h200_probe()
    probe["gpus"]["driver_version"] = "575.57.08"
    bad = by_name(failed(evaluate(Expectations(), probe)))
    assert bad["driver for CUDA"].expected == ">= 580.65.06"
    assert "575.57.08" in bad["driver for CUDA"].detail


def test_minor_version_compatibility_floor():
    probe = h200_probe()
    probe["framework"]["cuda"] = "12.8"
    probe["gpus"].update(driver_version="525.60.13", cuda_driver_version="12.0")
    c = by_name(evaluate(Expectations(), probe))["driver for CUDA"]
    assert c.ok and "minor-version compatibility" in c.detail


def test_features_on_and_off():
    spec = make_spec(build={"features": {"USE_GLOO": True, "USE_MPI": True, "USE_DISTRIBUTED": True,
                                         "BUILD_TEST": False}})
    names = by_name(evaluate(Expectations.from_spec(spec), cpu_probe()))
    assert names["USE_GLOO"].ok is True
    assert names["USE_MPI"].ok is False and "USE_MPI is off in the wheel" in names["USE_MPI"].detail
    assert names["USE_DISTRIBUTED"].ok is True  # not in Build settings: from distributed.is_available()
    assert names["BUILD_TEST"].ok is None  # not visible: shown, not failed


def test_import_failure_is_the_only_check():
    probe = cpu_probe()
    probe["import"] = {"ok": False, "error": "ImportError: libcudnn.so.9: cannot open shared object file"}
    checks = evaluate(Expectations.from_spec(make_spec()), probe)
    assert len(checks) == 1 and checks[0].ok is False and "libcudnn" in checks[0].detail


def test_wrong_all_reduce_results_fail():
    probe = cpu_probe()
    probe["sweep"]["rows"][1]["wrong"] = 3
    bad = failed(evaluate(Expectations(), probe))
    assert bad[0].name == "all-reduce correctness" and "3 wrong elements" in bad[0].detail


def test_sweep_error_fails():
    probe = cpu_probe()
    probe["sweep"] = {"state": "error", "reason": "ProcessRaisedException: boom"}
    bad = failed(evaluate(Expectations(), probe))
    assert bad[0].name == "all-reduce sweep" and "boom" in bad[0].detail


@pytest.mark.parametrize("expected,actual,ok", [
    ("12.1.1", "12.1", True), ("12.1", "12.1", True), ("12.1", "12.4", False), ("2.28", "2.28.9", True),
    ("2.28.9", "2.28.9+cuda13.0", True), ("9.1.0.70", "9.1.0", True), ("13", "13.0", True),
    ("2.28.9", None, False), ("12.1", "12", False),
])
def test_version_matches(expected, actual, ok):
    assert version_matches(expected, actual) is ok


def test_expectations_from_wheel_name():
    cpu = Expectations.from_wheel_name("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert cpu.accelerator == "cpu" and cpu.cuda == ABSENT
    cu = Expectations.from_wheel_name("torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl")
    assert cu.cuda == "13.0" and cu.nccl is None
    assert Expectations.from_wheel_name("torch-2.11.0a0+git70d99e-cp312-cp312-linux_x86_64.whl") == Expectations()


def test_expectations_dict_round_trip():
    exp = Expectations.from_spec(cuda_spec(build={"features": {"USE_NCCL": True}}))
    assert Expectations.from_dict(exp.to_dict()) == exp


def test_verdicts():
    assert verdict(cpu_probe()).startswith("CPU-only build; no NVIDIA driver")
    assert verdict(h200_probe()) == "CUDA 13.0 build on 1x NVIDIA H200 (sm_90); driver 580.159.04 (CUDA <= 13.0)"
    p = cpu_probe()
    p["gpus"] = h200_probe()["gpus"]
    assert "unused by this wheel" in verdict(p)


def test_framework_version_from_the_recipe():
    spec = make_spec()
    spec = spec.model_copy(update={"framework": spec.framework.model_copy(update={"version": "2.13.0"})})
    assert Expectations.from_spec(spec).version == "2.13.0"
    assert by_name(evaluate(Expectations.from_spec(spec), cpu_probe()))["version"].ok  # 2.13.0+cpu
    post = spec.model_copy(update={"framework": spec.framework.model_copy(update={"build_number": 2})})
    bad = failed(evaluate(Expectations.from_spec(post), cpu_probe()))
    assert bad[0].detail == "version 2.13.0+cpu in the wheel, recipe pins 2.13.0.post2"


def test_every_gpu_is_checked():
    checks = evaluate(Expectations.from_spec(cuda_spec()), multi_gpu_probe(8))
    assert not failed(checks), summary_line(checks)
    assert sum(c.name.endswith(" arch") and c.name.startswith("GPU ") for c in checks) == 8
    assert verdict(multi_gpu_probe(8)).startswith("CUDA 13.0 build on 8x NVIDIA H200 (sm_90)")


# --------------------------------------------------------------------------- checks.py results


def _probe_with_checks(**checks_results):
    return {"import": {"ok": True}, "framework": {}, "checks": checks_results}


def test_compile_matrix_requires_eager_and_aot_eager_but_only_shows_inductor():
    from buildctl.verify.expectations import Expectations, framework_check_results

    cells = [{"backend": "eager", "mode": "default", "state": "pass"},
             {"backend": "aot_eager", "mode": "default", "state": "pass"},
             {"backend": "inductor", "mode": "default", "state": "error",
              "error": "InvalidCxxCompiler: No working C++ compiler found"}]
    checks = framework_check_results(Expectations(), _probe_with_checks(compile={"cells": cells}))
    assert [(c.name, c.ok) for c in checks] == [("torch.compile eager", True), ("torch.compile aot_eager", True)]


def test_the_compile_checks_name_their_axes_and_a_skipped_cell_is_no_check():
    """issue 34: eager with fullgraph and aot_eager dynamic must pass; reduce-overhead on a CPU is skipped
    (shown in the table, never a passed check); a dynamic cell that recompiled says so."""
    from buildctl.verify.expectations import Expectations, framework_check_results

    cells = [{"backend": "eager", "mode": "default", "fullgraph": True, "dynamic": False, "state": "pass"},
             {"backend": "aot_eager", "mode": "default", "fullgraph": False, "dynamic": True, "state": "pass",
              "recompiled": True},
             {"backend": "aot_eager", "mode": "default", "fullgraph": False, "dynamic": False, "state": "skipped",
              "reason": "not on this device"},
             {"backend": "inductor", "mode": "reduce-overhead", "fullgraph": False, "dynamic": False,
              "state": "skipped", "reason": "skipping cudagraphs due to cpu device"}]
    checks = framework_check_results(Expectations(), _probe_with_checks(compile={"cells": cells}))
    assert [(c.name, c.ok) for c in checks] == [("torch.compile eager fullgraph", True),
                                                ("torch.compile aot_eager dynamic", True)]
    assert checks[1].detail == "a dynamic cell recompiled for its second input shape"


def test_a_failed_ddp_step_or_numerics_is_a_failed_check():
    from buildctl.verify.expectations import Expectations, framework_check_results

    probe = _probe_with_checks(numerics={"state": "failed", "reason": "conv2d 2x3x20x20 * 4x3x3x3 (float32)"},
                               ddp={"state": "ok"})
    checks = {c.name: c for c in framework_check_results(Expectations(), probe)}
    assert checks["numerics vs NumPy"].failed and "conv2d" in checks["numerics vs NumPy"].detail
    assert checks["DDP step (2 ranks, gloo)"].ok


def test_debug_builds_need_a_symbol_resolved_to_a_source_line():
    from buildctl.verify.expectations import Expectations, framework_check_results

    stripped = _probe_with_checks(debug_info={"state": "failed", "reason": "no library has .debug_info and .debug_line",
                                              "resolved": None})
    [check] = framework_check_results(Expectations(build_type="Debug"), stripped)
    assert check.failed and "Debug build without usable debug information" in check.detail
    good = _probe_with_checks(debug_info={"state": "ok", "resolved": {"symbol": "demofw::add", "location": "/work/src/csrc/ops/add.cpp:12"}})
    [check] = framework_check_results(Expectations(build_type="RelWithDebInfo"), good)
    assert check.ok and check.actual.endswith("add.cpp:12")
    assert framework_check_results(Expectations(build_type="Release"), stripped) == []


def test_a_debug_torch_needs_an_aten_function_at_its_source_line():
    from buildctl.verify.expectations import Expectations, framework_check_results

    libs = [{"library": "lib/libtorch_cpu.so", "debug_info": True, "debug_line": True}]
    resolved = {"symbol": "PyInit__C", "location": "./torch/csrc/stub.c:13"}
    aten = {"symbol": "at::native::_fft_r2c_mkl(at::Tensor const&, c10::ArrayRef<long>, long, bool)",
            "location": "/work/src/aten/src/ATen/native/mkl/SpectralOps.cpp:231"}
    checks = {c.name: c for c in framework_check_results(
        Expectations(build_type="Debug"), _probe_with_checks(debug_info={"state": "ok", "libraries": libs,
                                                                        "resolved": resolved, "aten": aten}))}
    assert checks["ATen source line"].ok and checks["ATen source line"].actual.endswith("SpectralOps.cpp:231")
    checks = {c.name: c for c in framework_check_results(
        Expectations(build_type="Debug"), _probe_with_checks(debug_info={"state": "ok", "libraries": libs,
                                                                        "resolved": resolved, "aten": None}))}
    assert checks["ATen source line"].failed
    # the demo framework has no libtorch_cpu: no ATen check
    demo = _probe_with_checks(debug_info={"state": "ok", "resolved": resolved,
                                          "libraries": [{"library": "_C.so", "debug_info": True, "debug_line": True}]})
    assert [c.name for c in framework_check_results(Expectations(build_type="Debug"), demo)] == ["debug information"]


def test_the_debug_only_assertion_must_fire_in_debug_and_is_only_shown_otherwise():
    from buildctl.verify.expectations import Expectations, framework_check_results

    fired = {"state": "ok", "fired": True, "message": "RuntimeError: false INTERNAL ASSERT FAILED at "
             '"/work/src/torch/csrc/autograd/generated/VariableType_0.cpp":13672, please report a bug to PyTorch. '
             "function: neg"}
    went_through = {"state": "ok", "fired": False, "aliased": True}
    [check] = framework_check_results(Expectations(build_type="Debug"), _probe_with_checks(debug_assert=fired))
    assert check.ok and "VariableType_0.cpp" in check.actual
    [check] = framework_check_results(Expectations(build_type="Debug"), _probe_with_checks(debug_assert=went_through))
    assert check.failed and "NDEBUG" in check.detail
    [check] = framework_check_results(Expectations(build_type="Release"), _probe_with_checks(debug_assert=went_through))
    assert check.ok is None and check.actual == "did not fire (the aliased result went through)"
    skipped = _probe_with_checks(debug_assert={"state": "skipped", "reason": "demofw is not torch"})
    assert framework_check_results(Expectations(build_type="Debug"), skipped) == []


def test_an_aten_function_is_resolved_to_its_source_line_with_binutils(tmp_path):
    """checks.py's resolution (probe_arch.py's since issue 34) on a real shared library built with -g (g++,
    nm, addr2line on the host)."""
    import shutil
    import subprocess

    import pytest

    from buildctl.in_container import probe_arch as checks

    if not all(shutil.which(t) for t in ("g++", "nm", "addr2line")):
        pytest.fail("g++ and binutils are needed (build-essential)")
    src = tmp_path / "aten/src/ATen/native/Fake.cpp"
    src.parent.mkdir(parents=True)
    src.write_text("namespace at { namespace native {\n"
                   "int zeta(int x) { return x * 3; }\n"
                   "int beta(int x) {\n  return x + 1;\n}\n} }\n"
                   "int outside(int x) { return x; }\n")
    lib = tmp_path / "libtorch_cpu.so"
    subprocess.run(["g++", "-g", "-O0", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    found = checks._resolve_aten_function(str(lib))
    assert found["symbol"].startswith("at::native::beta")  # mangled-name order: deterministic
    assert found["location"].endswith("aten/src/ATen/native/Fake.cpp:3")
    subprocess.run(["g++", "-O0", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)  # no -g
    assert checks._resolve_aten_function(str(lib)) is None


def test_conv2d_reference_is_pytorch_cross_correlation():
    import numpy as np

    from buildctl.in_container import checks

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 2, 5, 6)), rng.standard_normal((3, 2, 3, 2))
    naive = np.zeros((1, 3, 3, 5))
    for o in range(3):
        for i in range(3):
            for j in range(5):
                naive[0, o, i, j] = np.sum(x[0, :, i:i + 3, j:j + 2] * w[o])
    assert np.allclose(checks._conv2d_reference(np, x, w), naive)
