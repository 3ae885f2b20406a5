"""examples/demofw on the host, without Docker and without compiling: the build-env contract of
its setup.py, and the fake CUDA runfile fixture.

The real CPU build (and the opt-in CUDA 13 one) is in tests/integration/test_demofw_host_integration.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from demofw_helpers import DEMOFW, REPO, clean_env, copy_demofw, run_cmd

RUNFILE_DIR = REPO / "tests" / "fixtures" / "fake-cuda-runfile"


# ---- setup.py contract, without compiling ---------------------------------------------------------

_PRELUDE = f"import sys; sys.path.insert(0, {str(DEMOFW)!r})\n"


def _helper(tmp_path: Path, code: str, **env: str) -> str:
    """Run `code` with examples/demofw's tools/ importable, from an empty directory."""
    script = _PRELUDE + code
    return run_cmd([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(**env)).stdout.strip()


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
    p = run_cmd([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(CMAKE_INSTALL_PREFIX="/x"), check=False)
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
    src = copy_demofw(tmp_path / "src")  # not a git checkout: no +git suffix
    code = f"from tools.generate_demofw_version import get_version; print(get_version({str(src)!r}))"
    out = run_cmd([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src)!r})\n" + code],
               cwd=tmp_path, env=clean_env(GIT_DIR=str(tmp_path / "no-git"))).stdout.strip()
    assert out == (DEMOFW / "version.txt").read_text().strip()


def test_build_version_without_number_fails(tmp_path):
    script = _PRELUDE + "from tools.generate_demofw_version import get_version; get_version()"
    p = run_cmd([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(PYTORCH_BUILD_VERSION="1.0"), check=False)
    assert p.returncode != 0 and "PYTORCH_BUILD_NUMBER must be set" in p.stdout


# ---- the fake CUDA runfile -------------------------------------------------------------------------------

@pytest.fixture
def runfile(tmp_path):
    out = run_cmd(["sh", RUNFILE_DIR / "make_runfile.sh", "12.1.1", tmp_path]).stdout.strip().splitlines()[-1]
    path = Path(out)
    assert path.name == "cuda_12.1.1_530.30.02_linux.run"
    return path


def _runfile_env(tmp_path, **extra):
    return clean_env(FAKE_CUDA_INSTALLER_LOG=str(tmp_path / "cuda-installer.log"), **extra)


@pytest.mark.parametrize(("args", "message"), [
    (["--toolkit"], "Interactive installation is not supported"),
    (["--silent", "--driver"], "installs no NVIDIA driver"),
    (["--silent"], "pass --toolkit"),
    (["--silent", "--toolkit", "--samples"], "Unknown option: --samples"),
    (["--silent", "--toolkit", "--tmpdir=/nonexistent-dir"], "Cannot use temporary directory"),
    (["--silent", "--toolkit", "--toolkitpath=relative/dir"], "must be an absolute path"),
])
def test_runfile_refusals(runfile, tmp_path, args, message):
    p = run_cmd(["sh", runfile, *args], env=_runfile_env(tmp_path), check=False)
    assert p.returncode == 1
    assert message in p.stdout


def test_runfile_installs_toolkit_and_nvcc_version(runfile, tmp_path):
    dest = tmp_path / "cuda-12.1"
    run_cmd(["sh", runfile, "--silent", "--toolkit", "--override", f"--toolkitpath={dest}", "--no-opengl-libs",
          "--no-man-page", "--no-drm", f"--tmpdir={tmp_path}"], env=_runfile_env(tmp_path))
    for rel in ("bin/nvcc", "include/cuda.h", "include/cuda_runtime_api.h", "lib64/libcudart_static.a",
                "version.json"):
        assert (dest / rel).exists(), rel
    v = run_cmd([dest / "bin" / "nvcc", "--version"], env=clean_env()).stdout
    assert "Cuda compilation tools, release 12.1, V12.1.105" in v
    assert "#define CUDA_VERSION 12010" in (dest / "include" / "cuda.h").read_text()
    assert not [p for p in tmp_path.glob("cuda-installer.*") if p.is_dir()], "scratch dir removed"
    # no real nvcc to delegate to: a clear nvcc-style failure
    p = run_cmd([dest / "bin" / "nvcc", "-c", "x.cu"], env=clean_env(FAKE_CUDA_REAL_NVCC=""), check=False)
    if "no real nvcc" in p.stdout:
        assert p.returncode == 1
    # delegation: every other argument goes to the real nvcc
    fake_real = tmp_path / "real-nvcc"
    fake_real.write_text('#!/bin/sh\necho "real nvcc called with: $*"\n')
    fake_real.chmod(0o755)
    p = run_cmd([dest / "bin" / "nvcc", "-c", "k.cu", "-o", "k.o"], env=clean_env(FAKE_CUDA_REAL_NVCC=str(fake_real)))
    assert p.stdout.strip() == "real nvcc called with: -c k.cu -o k.o"


def test_runfile_compiler_check_without_override(runfile, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    gcc = bindir / "gcc"
    gcc.write_text("#!/bin/sh\necho 99.1.0\n")
    gcc.chmod(0o755)
    env = _runfile_env(tmp_path, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    p = run_cmd(["sh", runfile, "--silent", "--toolkit", f"--toolkitpath={tmp_path / 'c'}"], env=env, check=False)
    assert p.returncode == 1 and "Failed to verify gcc version" in p.stdout
    assert "unsupported compiler version: 99.1.0" in (tmp_path / "cuda-installer.log").read_text()
    run_cmd(["sh", runfile, "--silent", "--toolkit", "--override", f"--toolkitpath={tmp_path / 'c'}"], env=env)
    assert (tmp_path / "c" / "bin" / "nvcc").exists()


def test_runfile_is_posix_sh(runfile):
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("no dash to check POSIX sh syntax")
    run_cmd([dash, "-n", runfile])
    run_cmd([dash, "-n", RUNFILE_DIR / "make_runfile.sh"])
