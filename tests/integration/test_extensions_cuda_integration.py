"""CUDA extensions against a prebuilt torch from an index (issue 44), through the real CLI, in minutes.

The "torch" is a stand-in wheel (torch 2.99.0, `torch.version.cuda` 13.2; 2.98.0 says 12.8) that needs a
dependency of its own to import and, like PyPI's, pins its CUDA runtime (PyPI's nvidia-cuda-runtime 13.2.86), both served with a PEP 503 index by a local web server: the recipe's
`framework.source.prebuilt: {pypi: torch==2.99.0, index_url: ...}` installs it with that dependency into the
builder's venv and the runtime image's. nvcc is PyPI's (nvidia-cuda-nvcc 13.2.86, as demo-cuda13's), cuobjdump
too. The extension is tests/fixtures/extensions/demokernel: one kernel compiled for each arch asked, linked
against the shared CUDA runtime, and a host function its CPU smoke test calls. What is asserted:

- the build: the wheel labelled for its torch (`0.1.0+pt299cu132`), pinned (`Requires-Dist: torch==2.99.0`),
  SASS for sm_80 and sm_90 and libcudart.so.13 in its checks, verified in a fresh container of the runtime
  image (torch and its dependency there: the import and the smoke check pass);
- an extension that compiles for 8.0 only, in a recipe asking 8.0;9.0: refused before publish, in one line;
- torch 2.98.0 (CUDA 12.8) with nvcc 13.2: refused before the extension compiles, in one line with the fix;
- a wheel without a pin on torch, verified beside the set (`invoke verify --beside`): refused in one line.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE
from publish_helpers import serve_folder
from test_extensions_integration import CA_BUNDLE, LOCAL, invoke, source_tarball

from buildctl import engine
from buildctl.pipeline import engine_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "tests" / "fixtures" / "extensions" / "demokernel"
RECIPE = "ext-demokernel-cuda"

RECIPE_YAML = """\
description: a CUDA kernel against a prebuilt stand-in torch from a local index (CI)
labels: [cuda, extensions, test]
base:
  image: {base}
  distro: bookworm
python:
  version: "3.11"
framework:
  name: pytorch
  source:
    prebuilt:
      pypi: torch=={torch}
      index_url: {index}
toolchain:
  cuda:
    version: "13.2"
    install: pip
    pip_release: "13.2.86"
build:
  cuda_arch: ["8.0", "9.0"]
verify:
  allreduce: false
extensions:
  - name: buildctl-test-demokernel
    module: demokernel
    source:
      tarball:
        url: {url}
        sha256: {sha256}
    env: {{DEMOKERNEL_ARCHS: "{archs}"}}
    smoke: |
      import demokernel
      assert demokernel.host_axpy(2.0, 1.0, 3.0) == 5.0, "host_axpy(2, 1, 3) != 5"
"""

TORCH_INIT = '''"""A stand-in torch: the facts buildctl reads of a torch, and a dependency it needs to import."""
import buildctl_test_torchdep  # noqa: F401  (as PyPI's torch needs typing_extensions and nvidia-*)
from . import _C, cuda, version
__version__ = version.__version__
'''


def _record(files: dict[str, bytes], info: str) -> bytes:
    rows = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
            for n, d in files.items()]
    return ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()


def _wheel(folder: Path, name: str, version: str, modules: dict[str, str], requires: tuple[str, ...] = ()) -> None:
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {path: text.encode() for path, text in modules.items()}
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: buildctl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/RECORD"] = _record(files, info)
    project = folder / "simple" / name
    project.mkdir(parents=True, exist_ok=True)
    file = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(project / file, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in sorted(project.glob("*.whl")))
    (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")


def _torch(folder: Path, version: str, cuda: str, *cuda_wheels: str) -> None:
    # as PyPI's CUDA torch: torch.__version__ carries +cuNNN, the distribution's version does not (2.14.1+cu130
    # and 2.14.1); the pin is the distribution's, which pip compares
    label = "+cu" + cuda.replace(".", "")
    _wheel(folder, "torch", version, {
        "torch/__init__.py": TORCH_INIT,
        "torch/version.py": f"__version__ = {version + label!r}\ncuda = {cuda!r}\nhip = None\ngit_version = 'stand-in'\n",
        "torch/_C.py": "_GLIBCXX_USE_CXX11_ABI = True\n",
        # PyPI's torch lists the archs it has kernels for; the verification compares the recipe's with them
        "torch/cuda.py": "def get_arch_list():\n    return ['sm_80', 'sm_90', 'sm_100', 'sm_120']\n",
    }, requires=("buildctl-test-torchdep==1.0", *cuda_wheels))


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """The local index: torch 2.99.0 (CUDA 13.2) and 2.98.0 (CUDA 12.8), the dependency torch needs, a wheel that
    names no torch, and the extension's source."""
    folder = tmp_path_factory.mktemp("cuda-ext-index")
    _torch(folder, "2.99.0", "13.2", "nvidia-cuda-runtime==13.2.86")  # as PyPI's torch pins its CUDA runtime
    _torch(folder, "2.98.0", "12.8")
    _wheel(folder, "buildctl-test-torchdep", "1.0", {"buildctl_test_torchdep.py": ""})
    _wheel(folder, "buildctl-test-unpinned", "1.0", {"unpinned.py": "import torch\n"})
    sha = source_tarball(KERNEL, folder / "demokernel-0.1.0.tar.gz")
    with serve_folder(folder) as url:
        yield {"url": url, "simple": f"{url}simple/", "sha256": sha}


def _build(index: dict, work: Path, *, torch: str = "2.99.0", archs: str = "") -> tuple[subprocess.CompletedProcess,
                                                                                        dict, dict]:
    env = {"BUILDCTL_ARTIFACTS": str(work / "artifacts"), "PYTHONUNBUFFERED": "1", **LOCAL}
    recipe = work / f"{RECIPE}.yaml"
    recipe.write_text(RECIPE_YAML.format(base="buildctl/base:bookworm", torch=torch, index=index["simple"],
                                         url=f"{index['url']}demokernel-0.1.0.tar.gz", sha256=index["sha256"],
                                         archs=archs))
    proc = invoke("build", "--recipe", str(recipe), "--network", "host", "--ca-cert", CA_BUNDLE, "--json",
                  env=env, cwd=work)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc, payload, env


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory, docker_client, base_image, index) -> dict:
    work = tmp_path_factory.mktemp("cuda-ext")
    proc, payload, env = _build(index, work)
    assert proc.returncode == 0 and payload.get("ok"), f"build failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
    artifact = Path(payload["artifact"])
    yield {"payload": payload, "work": work, "env": env, "artifact": artifact,
           "manifest": json.loads((artifact / "manifest.json").read_text()),
           "report": json.loads((artifact / "report.json").read_text())}
    engine.remove_volume(docker_client, engine_names.work_volume_name(RECIPE, payload["key"], TEST_NAMESPACE))


def test_the_kernel_is_built_for_each_arch_labelled_pinned_and_verified_beside_the_index_torch(cuda_build):
    manifest, report = cuda_build["manifest"], cuda_build["report"]
    [row] = manifest["extensions"]["extensions"]
    assert row["version"] == "0.1.0+pt299cu132"
    assert row["file"] == "buildctl_test_demokernel-0.1.0+pt299cu132-cp311-cp311-linux_x86_64.whl"
    assert "torch==2.99.0" in row["requires"]
    against = manifest["extensions"]["built_against"]
    assert against["version"] == "2.99.0+cu132" and against["cuda"] == "13.2" and against["from"] == "index torch==2.99.0"
    with zipfile.ZipFile(cuda_build["artifact"] / row["file"]) as zf:
        assert "demokernel/_kernel.so" in zf.namelist()
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True and checks["extension buildctl-test-demokernel"]["ok"] is True, checks
    assert report["probe"]["extensions"]["torch"]["version"] == "2.99.0+cu132"  # the index's torch, in the runtime image


def test_each_wheel_was_checked_before_publish(cuda_build, docker_client):
    """The build's own lines: SASS per arch and libcudart.so.13 for the .so (cuda_checks.py wheel)."""
    log = (cuda_build["artifact"] / "build.log").read_text()
    assert "demokernel/_kernel.so: SASS 80,90, PTX -, libcudart.so.13" in log, log[-3000:]
    assert "nvcc 13.2 for torch's CUDA 13.2" in log


def test_an_arch_the_recipe_asks_but_the_wheel_lacks_is_refused(tmp_path, base_image, index, docker_client):
    proc, payload, _ = _build(index, tmp_path, archs="8.0")
    assert proc.returncode == 1 and not payload.get("ok")
    assert "demokernel/_kernel.so: no device code for SASS sm_90 (TORCH_CUDA_ARCH_LIST 8.0;9.0)" in proc.stderr, \
        proc.stderr[-3000:]
    if payload.get("key"):
        engine.remove_volume(docker_client, engine_names.work_volume_name(RECIPE, payload["key"], TEST_NAMESPACE))


def test_a_torch_of_another_cuda_major_than_the_nvcc_is_refused_before_anything_compiles(tmp_path, base_image, index,
                                                                                         docker_client):
    proc, payload, _ = _build(index, tmp_path, torch="2.98.0")
    assert proc.returncode == 1 and not payload.get("ok")
    assert "nvcc is CUDA 13.2, torch 2.98.0+cu128 was built with CUDA 12.8: another major; fix: set " \
           "toolchain.cuda.version to 12.x" in proc.stderr, proc.stderr[-3000:]
    assert "buildctl: extension buildctl-test-demokernel" not in proc.stderr
    if payload.get("key"):
        engine.remove_volume(docker_client, engine_names.work_volume_name(RECIPE, payload["key"], TEST_NAMESPACE))


def test_a_wheel_without_a_pin_on_torch_is_refused_beside_the_set(cuda_build, index):
    env = {**cuda_build["env"], "PIP_EXTRA_INDEX_URL": index["simple"]}
    proc = invoke("verify", "--recipe", str(cuda_build["work"] / f"{RECIPE}.yaml"), "--beside",
                  "buildctl-test-unpinned==1.0", "--json", env=env, cwd=cuda_build["work"], timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    beside = checks["beside buildctl-test-unpinned"]
    assert beside["ok"] is False and "\n" not in beside["detail"]
    assert "no Requires-Dist on torch" in beside["detail"], beside["detail"]


def _pip_picks(folder: Path, *requirements: str) -> dict[str, str]:
    """What pip (this Python's) would install from `folder` alone, as {name: version} (its --report)."""
    report = folder / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                           "--ignore-installed", "--no-index", "--find-links", str(folder), "--report", str(report),
                           *requirements], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def test_one_index_serves_a_set_per_torch_and_pip_takes_the_one_whose_pin_fits(tmp_path):
    """Two sets, labelled as the build labels them, side by side (no engine: pip's resolver on stand-in wheels).
    pip orders the labels as strings (pt29cu128 above pt214cu130), meets the pin, backtracks: never a second
    torch. Asked for an extension alone, it takes the highest label's set: name the torch."""
    folder = tmp_path / "index"
    for torch, label in (("2.14.1", "pt214cu130"), ("2.9.1", "pt29cu128")):
        _torch(folder, torch, "13.0" if label.endswith("130") else "12.8")
        _wheel(folder, "torch-scatter", f"2.1.2+{label}", {"torch_scatter.py": ""}, requires=(f"torch=={torch}",))
        _wheel(folder, "torch-sparse", f"0.6.18+{label}", {"torch_sparse.py": ""},
               requires=(f"torch=={torch}", f"torch-scatter==2.1.2+{label}"))
    _wheel(folder, "buildctl-test-torchdep", "1.0", {"buildctl_test_torchdep.py": ""})
    flat = tmp_path / "flat"
    flat.mkdir()
    for wheel in folder.glob("simple/*/*.whl"):
        (flat / wheel.name).write_bytes(wheel.read_bytes())
    assert _pip_picks(flat, "torch==2.14.1", "torch-scatter") == {
        "torch": "2.14.1", "torch-scatter": "2.1.2+pt214cu130", "buildctl-test-torchdep": "1.0"}
    assert _pip_picks(flat, "torch==2.9.1", "torch-sparse") == {
        "torch": "2.9.1", "torch-sparse": "0.6.18+pt29cu128", "torch-scatter": "2.1.2+pt29cu128",
        "buildctl-test-torchdep": "1.0"}
    assert _pip_picks(flat, "torch-scatter")["torch"] == "2.9.1"  # the highest label, not the newest torch
