"""Unit tests for buildctl.recipe.compat: every table rule, preflight refusals and warnings, can_run."""

from __future__ import annotations

import copy

import pytest

from buildctl.errors import RecipeError
from buildctl.host.gpus import GpuInfo
from buildctl.recipe import compat
from buildctl.recipe.compat import (
    arch_runs_on,
    arch_supported,
    cuda_range_for_archs,
    cudnn_cuda_majors,
    driver_supports,
    min_driver,
    vcmp,
    vkey,
)
from buildctl.recipe.preflight import can_run, placeholders, preflight, refuse_placeholders, torch_version
from buildctl.recipe.schema import Spec

SHA = "a" * 64


def runfile(version: str, driver: str) -> dict:
    return {
        "url": f"https://developer.download.nvidia.com/compute/cuda/{version}/local_installers/cuda_{version}_{driver}_linux.run",
        "sha256": SHA,
    }


BASE = {
    "name": "t",
    "base": {"image": "debian:bookworm", "distro": "bookworm"},
    "python": {"version": "3.11"},
    "framework": {
        "name": "pytorch",
        "source": {"git": "https://github.com/pytorch/pytorch", "ref": "v2.5.1"},
    },
}


def cuda_recipe(cuda="12.4.1", driver="550.54.15", arch=("8.0", "9.0"), **over) -> dict:
    d = copy.deepcopy(BASE)
    d["base"] = {"image": "ubuntu:22.04", "distro": "jammy"}
    d["python"] = {"version": "3.10"}
    d["toolchain"] = {
        "cuda": {"version": cuda, "install": "runfile", "runfile": runfile(cuda, driver)},
        "nccl": {"version": "2.21.5", "install": "source"},
    }
    d["build"] = {"cuda_arch": list(arch)}
    for k, v in over.items():
        d[k] = v
    return d


def spec(d: dict) -> Spec:
    return Spec.model_validate(d)


def refused(d: dict) -> RecipeError:
    with pytest.raises(RecipeError) as ei:
        preflight(spec(d), source="recipes/t.yaml")
    return ei.value


# --- versions -------------------------------------------------------------------------------------


def test_versions_compare_numerically():
    assert vkey("12.4") == (12, 4, 0, 0)
    assert vcmp("12.10", "12.9") == 1
    assert vcmp("12.4", "12.4.0") == 0
    assert vcmp("570.26", "570.124.06") == -1
    with pytest.raises(ValueError):
        vkey("12.x")


# --- arch table -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "cuda", "ok"),
    [
        ("7.0", "13.0", False),
        ("7.0", "12.9", True),
        ("7.5", "13.0", True),
        ("9.0", "11.7", False),
        ("9.0", "11.8", True),
        ("9.0a", "11.8", False),
        ("9.0a", "12.0", True),
        ("10.0", "12.4", False),
        ("10.0", "12.8", True),
        ("12.0", "12.8", True),
        ("12.0", "12.6.3", False),
        ("12.1", "12.8", False),
        ("12.1", "12.9", True),
        ("10.1", "13.0", False),
        ("11.0", "13.0", True),
        ("5.0", "12.9", True),
        ("5.2", "13.0", False),
        ("6.1", "13.0", False),
        ("7.2", "13.0", False),
        ("3.5", "11.8", True),
        ("3.5", "12.0", False),
        ("3.7", "12.1", False),
        ("8.6+PTX", "11.1", True),
        ("8.6+PTX", "11.0", False),
        ("9.0+PTX", "11.7", False),
        ("12.0+PTX", "12.8", True),
        ("8.7", "11.4", False),
        ("8.9", "11.8", True),
        ("10.0f", "12.8", False),
        ("10.0f", "12.9", True),
    ],
)
def test_arch_range(arch, cuda, ok):
    assert arch_supported(arch, cuda)[0] is ok


def test_arch_unknown_and_malformed():
    assert arch_supported("4.0", "12.4")[0] is False
    with pytest.raises(ValueError):
        compat.parse_arch("sm_90")


def test_cuda_range_for_archs():
    assert cuda_range_for_archs(["7.0", "9.0"]) == ("11.8", "13.0")
    assert cuda_range_for_archs(["10.0", "12.0+PTX"]) == ("12.8", None)
    assert cuda_range_for_archs(["3.5", "10.0"]) is None  # no toolkit compiles both


@pytest.mark.parametrize(
    ("arch", "cc", "runs"),
    [
        ("8.0", "8.6", True),  # same major, newer minor: cubin compatible
        ("8.6", "8.0", False),
        ("8.0", "9.0", False),
        ("8.0+PTX", "9.0", True),  # PTX JIT forward
        ("9.0a", "9.0", True),
        ("9.0a", "10.0", False),
        ("9.0a+PTX", "10.0", False),
        ("10.0f", "10.3", True),
        ("12.0", "12.0", True),
    ],
)
def test_arch_runs_on(arch, cc, runs):
    assert arch_runs_on(arch, cc) is runs


# --- drivers --------------------------------------------------------------------------------------


def test_min_driver_table_lookups():
    assert min_driver("12.4") == "550.54.14"
    assert min_driver("12.4.1") == "550.54.15"
    assert min_driver("12.8.1") == "570.124.06"
    assert min_driver("11.2.2") == "460.32.03"
    assert min_driver("13.0.2") == "580.95.05"
    assert min_driver("12.4.9") == "550.54.15"  # unknown patch: newest known older one
    assert min_driver("12.7") is None
    # Every entry parses and drivers rise with the toolkit.
    versions = sorted(compat.MIN_DRIVER, key=vkey)
    drivers = [vkey(compat.MIN_DRIVER[v]) for v in versions]
    assert drivers == sorted(drivers)


def test_driver_supports_full_minimum():
    ok, why = driver_supports("550.54.15", "12.4.1")
    assert ok and "minimum" in why


def test_driver_supports_minor_version_compat():
    ok, why = driver_supports("535.104.05", "12.4")
    assert ok and "minor-version compatibility" in why and "550.54.14" in why


def test_driver_too_old_names_minimum():
    ok, why = driver_supports("520.61.05", "12.1")
    assert not ok and "525.60.13" in why
    ok, why = driver_supports("575.57.08", "13.0")
    assert not ok and "580.65.06" in why
    ok, why = driver_supports("450.80.02", "11.8")
    assert ok and "minor-version" in why
    assert driver_supports("garbage", "12.4")[0] is False


def test_driver_unknown_major():
    ok, why = driver_supports("999.1", "14.0")
    assert not ok and "MIN_DRIVER" in why


def test_minor_compat_floor():
    assert compat.MINOR_COMPAT_FLOOR == {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}


# --- other tables ---------------------------------------------------------------------------------


def test_cudnn_cuda_majors():
    assert cudnn_cuda_majors("8.9.2.26") == {11, 12}
    assert cudnn_cuda_majors("8.7.0.84") == {10, 11}
    assert cudnn_cuda_majors("9.1.0.70") == {11, 12}
    assert cudnn_cuda_majors("9.11.0") == {12}
    assert cudnn_cuda_majors("9.19.0.56") == {12, 13}


def test_python_by_distro():
    assert compat.PYTHON_BY_DISTRO == {"bookworm": "3.11", "trixie": "3.13", "jammy": "3.10", "noble": "3.12"}


def test_torch_release_pins():
    pins = compat.TORCH_RELEASE_PINS
    assert pins["2.1"]["nccl"] == "2.18.1" and pins["2.1"]["cudnn"] == "8.9.2.26"
    assert pins["2.3"]["nccl"] == "2.20.5"
    assert pins["2.5"]["nccl"] == "2.21.5" and pins["2.5"]["cudnn"] == "9.1.0.70"
    assert pins["2.7"]["nccl"] == "2.26.2"


def test_torch_version_from_recipe():
    assert torch_version(spec(BASE)) == "2.5"
    d = copy.deepcopy(BASE)
    d["framework"]["source"]["ref"] = "main"
    assert torch_version(spec(d)) is None
    d["framework"]["version"] = "2.3.1"
    assert torch_version(spec(d)) == "2.3"


def test_nvcc_max_gcc():
    assert compat.nvcc_max_gcc("11.8") == 11
    assert compat.nvcc_max_gcc("12.1") == 12
    assert compat.nvcc_max_gcc("12.8.1") == 14


# --- preflight ------------------------------------------------------------------------------------


def test_preflight_cpu_recipe_passes():
    assert preflight(spec(BASE), source="r.yaml") == []


@pytest.mark.parametrize(("image", "named"), [("buildctl/base:bookworm", "bookworm"), ("ubuntu:22.04", "jammy"),
                                              ("docker.io/library/debian:trixie-slim", "trixie")])
def test_preflight_refuses_a_base_image_named_for_another_distro(image, named):
    """The jammy recipe given buildctl/base:bookworm: refused before any Docker call (before: apt failed
    after the image step started, `Unable to locate package python3.10-venv`)."""
    d = cuda_recipe()
    d["base"] = {"image": image, "distro": "noble" if named == "jammy" else "jammy"}
    d["python"] = {"version": "3.12" if named == "jammy" else "3.10"}
    e = refused(d)
    assert e.field == "base.image" and f"{image} is {named}" in e.problem
    assert f"--base-image buildctl/base:{d['base']['distro']}" in e.fix and "\n" not in str(e)


def test_preflight_takes_a_base_image_whose_name_says_nothing_or_the_same_distro():
    for image in ("corp/base:1", "buildctl/base:bookworm", "debian:bookworm", "registry:5000/debian:bookworm"):
        assert preflight(spec({**BASE, "base": {"image": image, "distro": "bookworm"}}), source="r.yaml") == []


def test_preflight_cuda_recipe_passes():
    assert preflight(spec(cuda_recipe()), source="r.yaml") == []


def test_preflight_arch_too_new_for_cuda():
    e = refused(cuda_recipe(arch=("8.0", "10.0")))
    assert e.field == "build.cuda_arch"
    assert "10.0" in e.problem and "12.8" in e.problem
    assert "drop 10.0" in e.fix and "CUDA >= 12.8" in e.fix
    assert "\n" not in str(e)


def test_preflight_arch_removed():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("7.0", "9.0"))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["nccl"]["version"] = "2.27.7"
    e = refused(d)
    assert e.field == "build.cuda_arch" and "removed in CUDA 13.0" in e.problem
    assert "drop 7.0" in e.fix and "< 13.0" in e.fix


def test_preflight_arch_9_with_11_7():
    e = refused(cuda_recipe(cuda="11.7.1", driver="515.48.07", arch=("9.0",)))
    assert e.field == "build.cuda_arch" and "11.8" in str(e)


def test_preflight_ptx_accepted():
    assert preflight(spec(cuda_recipe(arch=("8.0", "9.0+PTX"))), source="r.yaml") == []


def test_preflight_python_not_shipped_by_distro():
    d = copy.deepcopy(BASE)
    d["python"] = {"version": "3.12"}
    e = refused(d)
    assert e.field == "python.version"
    assert "bookworm ships Python 3.11" in e.problem
    assert "noble" in e.fix and "'3.11'" in e.fix


def test_preflight_python_unshipped_anywhere():
    d = copy.deepcopy(BASE)
    d["python"] = {"version": "3.9"}
    e = refused(d)
    assert "jammy 3.10" in e.fix


def test_preflight_python_image_brings_its_own():
    d = copy.deepcopy(BASE)
    d["base"]["image"] = "python:3.12-slim-bookworm"
    d["python"] = {"version": "3.12"}
    assert preflight(spec(d), source="r.yaml") == []


def test_preflight_nccl_redist_cuda_major_mismatch():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["nccl"] = {
        "version": "2.28.3",
        "install": "redist",
        "archive": {"url": "https://example.com/nccl_2.28.3-1+cuda12.9_x86_64.txz", "sha256": SHA},
    }
    e = refused(d)
    assert e.field == "toolchain.nccl.archive" and "cuda13" in e.fix


def test_preflight_nccl_redist_version_mismatch():
    d = cuda_recipe()
    d["toolchain"]["nccl"] = {
        "version": "2.21.5",
        "install": "redist",
        "archive": {"url": "https://example.com/nccl_2.20.5-1+cuda12.4_x86_64.txz", "sha256": SHA},
    }
    e = refused(d)
    assert e.field == "toolchain.nccl.version"


def test_preflight_nccl_too_old_for_cuda13():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    e = refused(d)  # nccl 2.21.5
    assert e.field == "toolchain.nccl.version" and "2.27.7" in e.fix


def test_preflight_nccl_cu12_pip_with_cuda13():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12", "packages": ["numpy", "nvidia-nccl-cu12==2.27.7"]}
    d["toolchain"]["nccl"] = {"version": "2.27.7", "install": "pip"}
    e = refused(d)
    assert e.field == "python.packages" and "nvidia-nccl-cu13" in e.fix


def test_preflight_cudnn_cuda_major():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["nccl"]["version"] = "2.27.7"
    d["toolchain"]["cudnn"] = {
        "version": "8.9.2.26",
        "install": "archive",
        "archive": {
            "url": "https://example.com/cudnn-linux-x86_64-8.9.2.26_cuda12-archive.tar.xz",
            "sha256": SHA,
        },
    }
    e = refused(d)
    assert e.field == "toolchain.cudnn.version" and "CUDA 11/12" in e.problem


def test_preflight_cudnn_archive_major():
    d = cuda_recipe()
    d["toolchain"]["cudnn"] = {
        "version": "9.1.0.70",
        "install": "archive",
        "archive": {
            "url": "https://example.com/cudnn-linux-x86_64-9.1.0.70_cuda11-archive.tar.xz",
            "sha256": SHA,
        },
    }
    e = refused(d)
    assert e.field == "toolchain.cudnn.archive"


def test_preflight_cudnn_ok():
    d = cuda_recipe()
    d["toolchain"]["cudnn"] = {
        "version": "9.1.0.70",
        "install": "archive",
        "archive": {
            "url": "https://example.com/cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz",
            "sha256": SHA,
        },
    }
    assert preflight(spec(d), source="r.yaml") == []


def test_preflight_runfile_version_mismatch():
    d = cuda_recipe()
    d["toolchain"]["cuda"]["runfile"] = runfile("12.1.1", "530.30.02")
    e = refused(d)
    assert e.field == "toolchain.cuda.runfile"


def test_preflight_gcc_too_new_for_nvcc():
    d = cuda_recipe(cuda="11.8.0", driver="520.61.05", arch=("8.0",))
    d["base"] = {"image": "debian:bookworm", "distro": "bookworm"}
    d["python"] = {"version": "3.11"}
    e = refused(d)
    assert e.field == "toolchain.cuda.version" and "gcc 12" in e.problem
    assert "CUDA >= 12.0" in e.fix and "jammy" in e.fix


def test_preflight_gcc_override_warns():
    d = cuda_recipe(cuda="11.8.0", driver="520.61.05", arch=("8.0",))
    d["base"] = {"image": "debian:bookworm", "distro": "bookworm"}
    d["python"] = {"version": "3.11"}
    d["build"]["env"] = {"CUDAHOSTCXX": "/usr/bin/g++-11"}
    warnings = preflight(spec(d), source="r.yaml")
    assert any(w.startswith("build.env:") for w in warnings)


def test_preflight_cuda_pip_release_mismatch():
    d = cuda_recipe(cuda="13.0", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["cuda"] = {"version": "13.0", "install": "pip", "pip_release": "13.2.86"}
    d["toolchain"]["nccl"]["version"] = "2.27.7"
    e = refused(d)
    assert e.field == "toolchain.cuda.pip_release"


def test_preflight_warnings_pins_and_duplicates():
    d = cuda_recipe(arch=("8.0", "8.0", "9.0a+PTX"))
    d["toolchain"]["nccl"]["version"] = "2.20.5"  # torch 2.5 pins 2.21.5
    warnings = preflight(spec(d), source="r.yaml")
    assert any("listed twice" in w for w in warnings)
    assert any("arch-specific PTX" in w for w in warnings)
    assert any(w.startswith("toolchain.nccl.version:") and "2.21.5" in w for w in warnings)
    assert all("\n" not in w for w in warnings)


def test_preflight_warns_missing_nccl_for_new_torch():
    d = cuda_recipe()
    del d["toolchain"]["nccl"]
    d["framework"]["source"]["ref"] = "v2.7.0"
    warnings = preflight(spec(d), source="r.yaml")
    assert any(w.startswith("toolchain.nccl:") for w in warnings)


def test_preflight_torch_python_range_warns():
    d = copy.deepcopy(BASE)
    d["base"] = {"image": "debian:trixie", "distro": "trixie"}
    d["python"] = {"version": "3.13"}
    d["framework"]["source"]["ref"] = "v2.3.0"
    warnings = preflight(spec(d), source="r.yaml")
    assert any(w.startswith("python.version:") for w in warnings)


def test_preflight_rocm():
    d = copy.deepcopy(BASE)
    d["toolchain"] = {"rocm": {"version": "6.2", "arch": ["gfx942", "gfx9999"]}}
    warnings = preflight(spec(d), source="r.yaml")
    assert any("gfx9999" in w for w in warnings)
    d["python"]["packages"] = ["nvidia-nccl-cu12"]
    assert refused(d).field == "python.packages"


def test_preflight_demofw_skips_torch_checks():
    d = copy.deepcopy(BASE)
    d["framework"] = {"name": "demofw", "source": {"path": "examples/demofw"}}
    assert preflight(spec(d), source="r.yaml") == []


# --- can_run --------------------------------------------------------------------------------------

H100 = GpuInfo(0, "NVIDIA H100", "9.0", 80 * 1024**3)
A10 = GpuInfo(1, "NVIDIA A10", "8.6", 24 * 1024**3)
B200 = GpuInfo(2, "NVIDIA B200", "10.0", 180 * 1024**3)


def test_can_run_ok():
    ok, why = can_run(spec(cuda_recipe()), [H100, A10], "550.54.15")
    assert ok, why


def test_can_run_no_driver():
    ok, why = can_run(spec(cuda_recipe()), [], None)
    assert not ok and "CPU (gloo) only" in why


def test_can_run_driver_too_old():
    ok, why = can_run(spec(cuda_recipe()), [H100], "470.82.01")
    assert not ok and "525.60.13" in why


def test_can_run_arch_missing():
    ok, why = can_run(spec(cuda_recipe(cuda="12.8.1", driver="570.124.06")), [B200], "570.124.06")
    assert not ok and "10.0" in why and "build.cuda_arch" in why


def test_can_run_cpu_recipe():
    ok, why = can_run(spec(BASE), [], None)
    assert ok and "CPU" in why


def test_placeholder_sha256_refused_for_a_build_only():
    d = cuda_recipe()
    d["toolchain"]["cuda"]["runfile"]["sha256"] = "0" * 64
    s = spec(d)
    preflight(s, source="recipes/t.yaml")  # render runs preflight and must pass: it marks the placeholder
    with pytest.raises(RecipeError) as ei:
        refuse_placeholders(s, source="recipes/t.yaml")
    e = ei.value
    assert e.field == "toolchain.cuda.runfile.sha256" and "--set toolchain.cuda.runfile.sha256=" in e.fix
    assert [field for field, _, _ in placeholders(s)] == ["toolchain.cuda.runfile.sha256"]
    assert placeholders(spec(cuda_recipe())) == []


def test_placeholder_source_digest_does_not_stop_the_builder_image():
    """`--until image` builds the toolchain only: a framework source still to be pinned does not stop it,
    a toolchain download's placeholder still does."""
    d = cuda_recipe()
    d["framework"]["source"] = {"tarball": {"url": "https://github.com/pytorch/pytorch/releases/download/v2.15.0/"
                                                   "pytorch-v2.15.0.tar.gz", "sha256": "0" * 64}}
    s = spec(d)
    refuse_placeholders(s, source="recipes/t.yaml", image_only=True)
    with pytest.raises(RecipeError) as ei:
        refuse_placeholders(s, source="recipes/t.yaml")
    assert ei.value.field == "framework.source.tarball.sha256"
    d["toolchain"]["cuda"]["runfile"]["sha256"] = "0" * 64
    with pytest.raises(RecipeError) as ei:
        refuse_placeholders(spec(d), source="recipes/t.yaml", image_only=True)
    assert ei.value.field == "toolchain.cuda.runfile.sha256"


def test_preflight_cudnn_pip_too_old_for_cuda13():
    d = cuda_recipe(cuda="13.0.2", driver="580.95.05", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["nccl"]["version"] = "2.27.7"
    d["toolchain"]["cudnn"] = {"version": "9.1.0.70", "install": "pip"}
    e = refused(d)
    assert e.field == "toolchain.cudnn.version" and "9.12" in e.fix


def test_preflight_newer_minor_than_table_is_quiet():
    d = cuda_recipe(cuda="13.2", arch=("9.0",))
    d["base"] = {"image": "ubuntu:24.04", "distro": "noble"}
    d["python"] = {"version": "3.12"}
    d["toolchain"]["cuda"] = {"version": "13.2", "install": "pip", "pip_release": "13.2.86"}
    d["toolchain"]["nccl"] = {"version": "2.28.9", "install": "pip"}
    d["framework"] = {"name": "demofw", "source": {"path": "examples/demofw"}}
    assert preflight(spec(d), source="r.yaml") == []
    d["toolchain"]["cuda"] = {"version": "12.7", "install": "base-image"}
    d["toolchain"]["nccl"] = {"version": "2.21.5", "install": "pip"}  # (source needs the runfile stage)
    assert any("not a known toolkit" in w for w in preflight(spec(d), source="r.yaml"))


def test_shipped_recipes_pass_preflight():
    """Every recipe in recipes/ passes (a pinned-download placeholder is refused by a build, not here)."""
    from buildctl import recipe

    for path in recipe.list_recipes():
        preflight(recipe.load(str(path)), source=str(path))
