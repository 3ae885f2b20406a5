"""examples/demofw on the host, without Docker: the build-env contract of its setup.py, a
real CPU build (cmake + ninja from PyPI in a temporary venv), the wheel imported in a fresh
venv, and the fake CUDA runfile fixture.

The CPU build is real but trimmed for time (USE_HEAVY_UNIT=0, USE_CCACHE=0): about a minute
on 2 cores. The CUDA variant needs ~500 MB of NVIDIA wheels and runs only with
DEMOFW_TEST_CUDA=1 (see examples/demofw/README.md for the commands it runs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMOFW = REPO / "examples" / "demofw"
RUNFILE_DIR = REPO / "tests" / "fixtures" / "fake-cuda-runfile"

BUILD_DEPS = ["setuptools>=70.1", "wheel", "cmake>=3.18", "ninja", "numpy"]
CUDA_PKGS = [
    "nvidia-cuda-nvcc==13.2.86",
    "nvidia-cuda-crt==13.2.86",
    "nvidia-nvvm==13.2.86",
    "nvidia-cuda-runtime==13.2.86",
    "nvidia-cuda-cccl==13.2.86",
    "nvidia-nccl-cu13==2.28.9",
]

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                               reason="no C++ compiler on this host")


def _clean_env(**extra: str) -> dict:
    """The host environment without build switches that would leak into setup.py."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("BUILD_", "USE_", "CMAKE_", "TORCH_", "NCCL_", "PYTORCH_", "CUDA"))
           and k not in ("DEBUG", "REL_WITH_DEB_INFO", "MAX_JOBS", "VIRTUAL_ENV", "PYTHONPATH")}
    env.update(extra)
    return env


def _run(cmd, cwd=None, env=None, check=True, timeout=600) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout[-6000:]}")
    return p


def _venv(path: Path, packages: list[str]) -> Path:
    _run([sys.executable, "-m", "venv", path])
    py = path / "bin" / "python"
    if packages:
        _run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages], timeout=900)
    return py


def _copy_source(dst: Path) -> Path:
    shutil.copytree(DEMOFW, dst, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__",
                                                               "_C*.so", "version.py"))
    return dst


# ---- setup.py contract, without compiling ---------------------------------------------------------

_PRELUDE = f"import sys; sys.path.insert(0, {str(DEMOFW)!r})\n"


def _helper(tmp_path: Path, code: str, **env: str) -> str:
    """Run `code` with examples/demofw's tools/ importable, from an empty directory."""
    script = _PRELUDE + code
    return _run([sys.executable, "-c", script], cwd=tmp_path, env=_clean_env(**env)).stdout.strip()


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "Release"),
    ({"DEBUG": "1"}, "Debug"),
    ({"DEBUG": "yes", "REL_WITH_DEB_INFO": "1"}, "Debug"),
    ({"DEBUG": "0", "REL_WITH_DEB_INFO": "ON"}, "RelWithDebInfo"),
    ({"REL_WITH_DEB_INFO": "y"}, "RelWithDebInfo"),
    ({"DEBUG": "1", "CMAKE_BUILD_TYPE": "MinSizeRel"}, "MinSizeRel"),
])
def test_build_type_precedence(tmp_path, env, expected):
    out = _helper(tmp_path, "from tools.setup_helpers.env import build_type; print(build_type.build_type_string)", **env)
    assert out == expected


_CAPTURE_ARGS = """
import json, sys
from tools.setup_helpers import cmake as m
calls = []
m.CMake._get_cmake_command = staticmethod(lambda: 'cmake')
m.CMake.run = lambda self, args, env: calls.append(args)
c = m.CMake(sys.argv[1])
import os
c.generate('9.9.9', True, True, dict(os.environ), False, '/src/demofw', '/src', 'Release')
c.build(dict(os.environ), 'Release')
print(json.dumps(calls))
"""


def _captured_cmake_calls(tmp_path: Path, **env: str) -> list[list[str]]:
    script = _CAPTURE_ARGS.replace("sys.argv[1]", repr(str(tmp_path / "build")))
    return json.loads(_helper(tmp_path, script, **env).splitlines()[-1])


def test_env_forwarding_to_cmake(tmp_path):
    generate, build = _captured_cmake_calls(
        tmp_path, USE_CUDA="1", BUILD_TEST="0", CMAKE_CXX_COMPILER_LAUNCHER="ccache", USE_FANCY="ON",
        TORCH_CUDA_ARCH_LIST="8.0;9.0", _GLIBCXX_USE_CXX11_ABI="0", CUDACXX="/opt/nvcc", MAX_JOBS="3",
        UNRELATED="x")
    assert "-DUSE_CUDA=1" in generate
    assert "-DUSE_FANCY=ON" in generate
    assert "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache" in generate
    assert "-DTORCH_CUDA_ARCH_LIST=8.0;9.0" in generate
    assert "-DGLIBCXX_USE_CXX11_ABI=0" in generate
    assert "-DCUDA_NVCC_EXECUTABLE=/opt/nvcc" in generate  # low-priority alias
    assert "-DBUILD_TEST=True" in generate  # setup.py overrides BUILD_TEST like PyTorch
    assert f"-DPython_EXECUTABLE={sys.executable}" in generate
    assert f"-DPYTHON_EXECUTABLE={sys.executable}" in generate
    assert "-DCMAKE_INSTALL_PREFIX=/src/demofw" in generate
    assert "-DTORCH_BUILD_VERSION=9.9.9" in generate
    assert not any("UNRELATED" in a for a in generate)
    assert build[-3:] == ["--", "-j", "3"]


def test_cmake_install_prefix_in_env_is_refused(tmp_path):
    script = _PRELUDE + _CAPTURE_ARGS.replace("sys.argv[1]", repr(str(tmp_path / "build")))
    p = _run([sys.executable, "-c", script], cwd=tmp_path, env=_clean_env(CMAKE_INSTALL_PREFIX="/x"), check=False)
    assert p.returncode == 1
    assert "CMAKE_INSTALL_PREFIX should not be specified" in p.stdout


@pytest.mark.parametrize(("env", "expected"), [
    ({"PYTORCH_BUILD_VERSION": "2.1.0", "PYTORCH_BUILD_NUMBER": "1"}, "2.1.0"),
    ({"PYTORCH_BUILD_VERSION": "2.1.0", "PYTORCH_BUILD_NUMBER": "3"}, "2.1.0.post3"),
])
def test_version_from_env(tmp_path, env, expected):
    out = _helper(tmp_path, "from tools.generate_demofw_version import get_version; print(get_version())", **env)
    assert out == expected


def test_version_from_version_txt(tmp_path):
    src = _copy_source(tmp_path / "src")  # not a git checkout: no +git suffix
    code = f"from tools.generate_demofw_version import get_version; print(get_version({str(src)!r}))"
    out = _run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src)!r})\n" + code],
               cwd=tmp_path, env=_clean_env(GIT_DIR=str(tmp_path / "no-git"))).stdout.strip()
    assert out == (DEMOFW / "version.txt").read_text().strip()


def test_build_version_without_number_fails(tmp_path):
    script = _PRELUDE + "from tools.generate_demofw_version import get_version; get_version()"
    p = _run([sys.executable, "-c", script], cwd=tmp_path, env=_clean_env(PYTORCH_BUILD_VERSION="1.0"), check=False)
    assert p.returncode != 0 and "PYTORCH_BUILD_NUMBER must be set" in p.stdout


# ---- a real CPU build --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory):
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler on this host")
    root = tmp_path_factory.mktemp("demofw-cpu")
    py = _venv(root / "venv", BUILD_DEPS)
    src = _copy_source(root / "src")
    env = _clean_env(USE_CUDA="0", USE_HEAVY_UNIT="0", USE_CCACHE="0", MAX_JOBS="2",
                     PATH=f"{root / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    cold = _run([py, "setup.py", "bdist_wheel"], cwd=src, env=env)
    return {"root": root, "py": py, "src": src, "env": env, "cold": cold}


@needs_cxx
def test_cpu_build_cold(cpu_build):
    out = cpu_build["cold"].stdout
    assert re.search(r"^\[\d+/\d+\] Building CXX object", out, re.M), "ninja progress lines on stdout"
    assert "-GNinja" in out
    assert "-DPython_EXECUTABLE=" in out and "-DPYTHON_EXECUTABLE=" in out
    wheels = list((cpu_build["src"] / "dist").glob("demofw-*.whl"))
    assert len(wheels) == 1
    assert re.match(r"demofw-[0-9.a]+-cp3\d+-cp3\d+-linux_\w+\.whl", wheels[0].name), wheels[0].name


@needs_cxx
def test_cpu_rebuild_compiles_nothing_and_takes_build_version(cpu_build):
    env = dict(cpu_build["env"], PYTORCH_BUILD_VERSION="0.9.1", PYTORCH_BUILD_NUMBER="2")
    warm = _run([cpu_build["py"], "setup.py", "bdist_wheel"], cwd=cpu_build["src"], env=env)
    assert "Reusing the CMake cache" in warm.stdout
    assert "Building CXX object" not in warm.stdout
    assert list((cpu_build["src"] / "dist").glob("demofw-0.9.1.post2-*.whl"))
    assert "__version__ = '0.9.1.post2'" in (cpu_build["src"] / "demofw" / "version.py").read_text()


@needs_cxx
def test_pip_wheel_no_build_isolation(cpu_build):
    out = cpu_build["root"] / "wheelhouse"
    _run([cpu_build["py"], "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, "."],
         cwd=cpu_build["src"], env=cpu_build["env"])
    assert list(out.glob("demofw-*.whl"))


_PROBE = r"""
import json, demofw, demofw.version as v
cfg = demofw.__config__.show()
out = {
    "version": demofw.__version__, "v.version": v.__version__, "cuda": v.cuda, "debug": v.debug,
    "git_version": v.git_version, "hip": v.hip, "show": cfg,
    "settings": demofw.__config__.build_settings(),
    "arch_list": demofw.cuda.get_arch_list(), "is_available": demofw.cuda.is_available(),
    "cudnn": demofw.backends.cudnn.version(), "abi": demofw._C._GLIBCXX_USE_CXX11_ABI,
    "add_scalar": demofw.add(2, 3), "add_list": demofw.add([[1, 2], [3, 4]], [10, 20]),
    "sum": demofw.sum([1.5, 2.5]), "sort": demofw.sort([3, 1, 2]),
}
try:
    demofw.cuda.nccl.version()
    out["nccl"] = "no error"
except RuntimeError as e:
    out["nccl"] = "RuntimeError: " + str(e)
print(json.dumps(out))
"""


@needs_cxx
def test_wheel_in_fresh_venv_without_numpy(cpu_build, tmp_path):
    wheel = sorted((cpu_build["src"] / "dist").glob("demofw-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "demofw/version.py" in names and any(re.match(r"demofw/_C\..*\.so$", n) for n in names)
    py = _venv(tmp_path / "venv", [])
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", wheel])
    p = _run([py, "-c", _PROBE], cwd=tmp_path, env=_clean_env())
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["version"] == r["v.version"]
    assert r["cuda"] is None and r["hip"] is None and r["debug"] is False
    assert r["arch_list"] == [] and r["is_available"] is False
    assert r["cudnn"] is None and r["abi"] is True
    assert r["add_scalar"] == 5 and r["add_list"] == [[11, 22], [13, 24]]
    assert r["sum"] == 4.0 and r["sort"] == [1, 2, 3]
    assert r["nccl"].startswith("RuntimeError: ") and "NCCL" in r["nccl"]
    lines = r["show"].splitlines()
    assert lines[0] == "demofw built with:"
    assert re.match(r"  - GCC \d+\.\d+$", lines[1])
    assert "  - C++ Version: 201703" in lines
    assert sum(1 for line in lines if line.startswith("  - Build settings: ")) == 1
    s = r["settings"]
    assert s["BUILD_TYPE"] == "Release" and s["USE_CUDA"] == "OFF" and s["USE_NCCL"] == "OFF"
    assert s["USE_HEAVY_UNIT"] == "OFF" and s["GLIBCXX_USE_CXX11_ABI"] == "1"
    for key in ("CXX_COMPILER", "CXX_FLAGS", "CUDA_VERSION", "TORCH_CUDA_ARCH_LIST", "USE_SYSTEM_NCCL",
                "NCCL_VERSION", "TORCH_VERSION"):
        assert key in s, key


@needs_cxx
def test_numpy_ops_match(cpu_build):
    code = r"""
import numpy as np, demofw
x = np.random.rand(50, 7); y = np.random.rand(7)
assert np.allclose(demofw.add(x, y), x + y)
assert np.allclose(demofw.mul(x[:, ::2], 2), x[:, ::2] * 2)
assert demofw.add(np.arange(4, dtype=np.int8), 1).dtype == np.int8
assert np.isclose(demofw.std(x), x.std()) and demofw.argmax(x) == x.argmax()
print("ok")
"""
    env = dict(cpu_build["env"], PYTHONPATH=str(cpu_build["src"]))
    assert _run([cpu_build["py"], "-c", code], cwd=cpu_build["root"], env=env).stdout.strip().endswith("ok")


@needs_cxx
def test_python_without_numpy_fails_configure(cpu_build, tmp_path):
    py = _venv(tmp_path / "venv", ["setuptools>=70.1", "wheel", "cmake>=3.18", "ninja"])
    src = _copy_source(tmp_path / "src")
    p = _run([py, "setup.py", "bdist_wheel", "--cmake-only"], cwd=src, env=_clean_env(USE_CUDA="0"), check=False)
    assert p.returncode != 0
    assert "Could NOT find Python" in p.stdout and "NumPy" in p.stdout


# ---- CUDA 13 from PyPI (opt-in: ~500 MB of wheels) ----------------------------------------------------

@pytest.mark.skipif(os.environ.get("DEMOFW_TEST_CUDA") != "1", reason="set DEMOFW_TEST_CUDA=1 (downloads the CUDA 13 wheels)")
@needs_cxx
def test_cuda13_pip_build(tmp_path):
    py = _venv(tmp_path / "venv", BUILD_DEPS + CUDA_PKGS)
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    cu = site / "nvidia" / "cu13"
    home = tmp_path / "cuda"
    home.mkdir()
    for name, target in (("bin", "bin"), ("include", "include"), ("lib", "lib"), ("lib64", "lib"), ("nvvm", "nvvm")):
        (home / name).symlink_to(cu / target)
    src = _copy_source(tmp_path / "src")
    env = _clean_env(USE_CUDA="1", TORCH_CUDA_ARCH_LIST="8.0;9.0", USE_NCCL="1", USE_SYSTEM_NCCL="1",
                     NCCL_INCLUDE_DIR=str(site / "nvidia" / "nccl" / "include"),
                     NCCL_LIB_DIR=str(site / "nvidia" / "nccl" / "lib"), NCCL_VERSION="2",
                     CUDA_HOME=str(home), USE_HEAVY_UNIT="0", USE_CCACHE="0", MAX_JOBS="2",
                     PATH=f"{py.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    _run([py, "setup.py", "bdist_wheel"], cwd=src, env=env, timeout=1200)
    probe = _run([py, "-c", _PROBE], cwd=tmp_path, env=dict(env, PYTHONPATH=str(src)))
    r = json.loads(probe.stdout.strip().splitlines()[-1])
    assert r["cuda"] == "13.2"
    assert r["arch_list"] == ["sm_80", "sm_90"]
    assert "  - CUDA Runtime 13.2" in r["show"].splitlines()
    assert r["settings"]["USE_NCCL"] == "ON" and r["settings"]["NCCL_VERSION"] == "2.28.9"
    assert r["settings"]["TORCH_CUDA_ARCH_LIST"] == "8.0;9.0"
    v = _run([py, "-c", "import demofw; print(demofw.cuda.nccl.version())"], cwd=tmp_path,
             env=dict(env, PYTHONPATH=str(src))).stdout.strip().splitlines()[-1]
    assert v == "(2, 28, 9)"


# ---- the fake CUDA runfile -------------------------------------------------------------------------------

@pytest.fixture
def runfile(tmp_path):
    out = _run(["sh", RUNFILE_DIR / "make_runfile.sh", "12.1.1", tmp_path]).stdout.strip().splitlines()[-1]
    path = Path(out)
    assert path.name == "cuda_12.1.1_530.30.02_linux.run"
    return path


def _runfile_env(tmp_path, **extra):
    return _clean_env(FAKE_CUDA_INSTALLER_LOG=str(tmp_path / "cuda-installer.log"), **extra)


@pytest.mark.parametrize(("args", "message"), [
    (["--toolkit"], "Interactive installation is not supported"),
    (["--silent", "--driver"], "installs no NVIDIA driver"),
    (["--silent"], "pass --toolkit"),
    (["--silent", "--toolkit", "--samples"], "Unknown option: --samples"),
    (["--silent", "--toolkit", "--tmpdir=/nonexistent-dir"], "Cannot use temporary directory"),
    (["--silent", "--toolkit", "--toolkitpath=relative/dir"], "must be an absolute path"),
])
def test_runfile_refusals(runfile, tmp_path, args, message):
    p = _run(["sh", runfile, *args], env=_runfile_env(tmp_path), check=False)
    assert p.returncode == 1
    assert message in p.stdout


def test_runfile_installs_toolkit_and_nvcc_version(runfile, tmp_path):
    dest = tmp_path / "cuda-12.1"
    _run(["sh", runfile, "--silent", "--toolkit", "--override", f"--toolkitpath={dest}", "--no-opengl-libs",
          "--no-man-page", "--no-drm", f"--tmpdir={tmp_path}"], env=_runfile_env(tmp_path))
    for rel in ("bin/nvcc", "include/cuda.h", "include/cuda_runtime_api.h", "lib64/libcudart_static.a",
                "version.json"):
        assert (dest / rel).exists(), rel
    v = _run([dest / "bin" / "nvcc", "--version"], env=_clean_env()).stdout
    assert "Cuda compilation tools, release 12.1, V12.1.105" in v
    assert "#define CUDA_VERSION 12010" in (dest / "include" / "cuda.h").read_text()
    assert not [p for p in tmp_path.glob("cuda-installer.*") if p.is_dir()], "scratch dir removed"
    # no real nvcc to delegate to: a clear nvcc-style failure
    p = _run([dest / "bin" / "nvcc", "-c", "x.cu"], env=_clean_env(FAKE_CUDA_REAL_NVCC=""), check=False)
    if "no real nvcc" in p.stdout:
        assert p.returncode == 1
    # delegation: every other argument goes to the real nvcc
    fake_real = tmp_path / "real-nvcc"
    fake_real.write_text('#!/bin/sh\necho "real nvcc called with: $*"\n')
    fake_real.chmod(0o755)
    p = _run([dest / "bin" / "nvcc", "-c", "k.cu", "-o", "k.o"], env=_clean_env(FAKE_CUDA_REAL_NVCC=str(fake_real)))
    assert p.stdout.strip() == "real nvcc called with: -c k.cu -o k.o"


def test_runfile_compiler_check_without_override(runfile, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    gcc = bindir / "gcc"
    gcc.write_text("#!/bin/sh\necho 99.1.0\n")
    gcc.chmod(0o755)
    env = _runfile_env(tmp_path, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    p = _run(["sh", runfile, "--silent", "--toolkit", f"--toolkitpath={tmp_path / 'c'}"], env=env, check=False)
    assert p.returncode == 1 and "Failed to verify gcc version" in p.stdout
    assert "unsupported compiler version: 99.1.0" in (tmp_path / "cuda-installer.log").read_text()
    _run(["sh", runfile, "--silent", "--toolkit", "--override", f"--toolkitpath={tmp_path / 'c'}"], env=env)
    assert (tmp_path / "c" / "bin" / "nvcc").exists()


def test_runfile_is_posix_sh(runfile):
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("no dash to check POSIX sh syntax")
    _run([dash, "-n", runfile])
    _run([dash, "-n", RUNFILE_DIR / "make_runfile.sh"])
