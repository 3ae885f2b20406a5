"""examples/demofw on the host, without Docker: a real CPU build (cmake + ninja from PyPI in a
temporary venv) and the wheel imported in a fresh venv.

The CPU build is real but trimmed for time (USE_HEAVY_UNIT=0, USE_CCACHE=0): about a minute
on 2 cores. A host without a C++ compiler fails here (.ci/bootstrap installs g++): never skipped.
The CUDA 13 build from PyPI's nvcc is tested in a container (tests/integration/test_build_integration.py,
demo-cuda13); the host commands for it are in examples/demofw/README.md. The build-env contract of
setup.py and the fake CUDA runfile (no build) are in tests/unit/test_demofw_host.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import zipfile

import pytest
from demofw_helpers import clean_env, copy_demofw, make_venv, run_cmd

BUILD_DEPS = ["setuptools>=70.1", "wheel", "cmake>=3.18", "ninja", "numpy"]


# ---- a real CPU build --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cpu_build(tmp_path_factory):
    assert shutil.which("c++") or shutil.which("g++"), "no C++ compiler on this host; fix: apt-get install g++"
    root = tmp_path_factory.mktemp("demofw-cpu")
    py = make_venv(root / "venv", BUILD_DEPS)
    src = copy_demofw(root / "src")
    env = clean_env(USE_CUDA="0", USE_HEAVY_UNIT="0", USE_CCACHE="0", MAX_JOBS="2",
                     PATH=f"{root / 'venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    cold = run_cmd([py, "setup.py", "bdist_wheel"], cwd=src, env=env)
    return {"root": root, "py": py, "src": src, "env": env, "cold": cold}


def test_cpu_build_cold(cpu_build):
    out = cpu_build["cold"].stdout
    assert re.search(r"^\[\d+/\d+\] Building CXX object", out, re.M), "ninja progress lines on stdout"
    assert "-GNinja" in out
    assert "-DPython_EXECUTABLE=" in out and "-DPYTHON_EXECUTABLE=" in out
    wheels = list((cpu_build["src"] / "dist").glob("demofw-*.whl"))
    assert len(wheels) == 1
    assert re.match(r"demofw-[0-9.a]+-cp3\d+-cp3\d+-linux_\w+\.whl", wheels[0].name), wheels[0].name


def test_cpu_rebuild_compiles_nothing_and_takes_build_version(cpu_build):
    env = dict(cpu_build["env"], PYTORCH_BUILD_VERSION="0.9.1", PYTORCH_BUILD_NUMBER="2")
    warm = run_cmd([cpu_build["py"], "setup.py", "bdist_wheel"], cwd=cpu_build["src"], env=env)
    assert "Reusing the CMake cache" in warm.stdout
    assert "Building CXX object" not in warm.stdout
    assert list((cpu_build["src"] / "dist").glob("demofw-0.9.1.post2-*.whl"))
    assert "__version__ = '0.9.1.post2'" in (cpu_build["src"] / "demofw" / "version.py").read_text()


def test_pip_wheel_no_build_isolation(cpu_build):
    out = cpu_build["root"] / "wheelhouse"
    run_cmd([cpu_build["py"], "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", out, "."],
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


def test_wheel_in_fresh_venv_without_numpy(cpu_build, tmp_path):
    wheel = sorted((cpu_build["src"] / "dist").glob("demofw-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "demofw/version.py" in names and any(re.match(r"demofw/_C\..*\.so$", n) for n in names)
    py = make_venv(tmp_path / "venv", [])
    run_cmd([py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", wheel])
    p = run_cmd([py, "-c", _PROBE], cwd=tmp_path, env=clean_env())
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
    assert run_cmd([cpu_build["py"], "-c", code], cwd=cpu_build["root"], env=env).stdout.strip().endswith("ok")


def test_take_is_torch_take_in_range_and_segfaults_past_the_end(cpu_build):
    """demofw.take's missing bounds check is on purpose (examples/demofw/README.md): the crash that a
    debugger is shown on. In range it is torch.take; far past the end the process dies with SIGSEGV
    in the C++ call, not with a Python exception."""
    env = dict(cpu_build["env"], PYTHONPATH=str(cpu_build["src"]))
    ok = run_cmd([cpu_build["py"], "-c", "import demofw; print(demofw.take([[10, 20], [30, 40]], [3, 0, -1]))"],
                 cwd=cpu_build["root"], env=env)
    assert ok.stdout.strip().splitlines()[-1] == "[40, 10, 40]"
    crash = run_cmd([cpu_build["py"], "-X", "faulthandler", "-c", "import demofw\ndemofw.take([1.0], [1 << 50])"],
                    cwd=cpu_build["root"], env=env, check=False)
    assert crash.returncode == -signal.SIGSEGV, crash.stdout
    assert "Fatal Python error: Segmentation fault" in crash.stdout
    assert 'File "<string>", line 2' in crash.stdout  # the take() call, not the import

def test_python_without_numpy_fails_configure(cpu_build, tmp_path):
    py = make_venv(tmp_path / "venv", ["setuptools>=70.1", "wheel", "cmake>=3.18", "ninja"])
    src = copy_demofw(tmp_path / "src")
    p = run_cmd([py, "setup.py", "bdist_wheel", "--cmake-only"], cwd=src, env=clean_env(USE_CUDA="0"), check=False)
    assert p.returncode != 0
    assert "Could NOT find Python" in p.stdout and "NumPy" in p.stdout
