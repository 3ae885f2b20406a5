"""Extensions built against a torch, checked, refused beside a foreign one, published as a pinned set.

The torch is Debian trixie's python3-torch 2.6.0 (the `debian_torch` image: no torch is compiled here),
the recipe's framework `prebuilt: base-image`. The extension is tests/fixtures/extensions/tinyop (one op
registered with TORCH_LIBRARY, one translation unit, about a minute to compile), served as a tarball by a
local web server: the build path of PyG's extensions (setuptools + torch.utils.cpp_extension, pip wheel
--no-build-isolation), which recipes/ext-torch2.6-debian.yaml takes with torch-scatter (the evidence
run, docs/extensions.md). One build for the module, through the real CLI:

* the manifest records what the extension was built against (torch 2.6.0+debian, C++11 ABI 1, no CUDA)
  and its wheel requires exactly that torch (Requires-Dist: torch==2.6.0+debian);
* the build's verification ran the extension in a fresh container (import, smoke, ABI per .so);
* `invoke verify --beside torchvision==0.21.0` (PyPI's, built for torch 2.6.0+cu124 with the old C++
  ABI) fails with one line naming why: the mismatch users meet as "operator torchvision::nms does not
  exist";
* published to a folder index, pip (with PyPI as the extra index) installs the extension beside the
  image's torch and keeps it; a venv without that torch is refused by pip (no torch==2.6.0+debian).

Costs (2 cores, cold): the Debian torch image 6 min (shared with test_verify_image_integration), the
recipe's images 3 min, the compile and verification 2 min, the rest 2 min.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import DEBIAN_TORCH
from publish_helpers import serve_folder

from buildctl import engine
from buildctl.build import engine_names
from buildctl.store import artifacts

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TINYOP = ROOT / "tests" / "fixtures" / "extensions" / "tinyop"
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
RECIPE = "ext-tinyop-debian"
TORCH = "2.6.0+debian"
# Settings of the caller's shell that would change the build
UNSET = ("BUILDCTL_NO_VERIFY", "BUILDCTL_JOBS", "BUILDCTL_MEMORY", "BUILDCTL_KEEP_CONTAINER", "BUILDCTL_PUBLISH_TO",
         "BUILDCTL_PUBLISH_USERNAME", "BUILDCTL_PUBLISH_PASSWORD")
LOCAL = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def invoke(*args: str, env: dict[str, str], cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("invoke")
    full = {k: v for k, v in os.environ.items() if k not in UNSET}
    return subprocess.run([str(exe), "-r", str(ROOT), *args], capture_output=True, text=True, cwd=cwd,
                          env={**full, **env}, timeout=timeout)


def source_tarball(folder: Path, dest: Path) -> str:
    """tinyop-0.1.0.tar.gz of `folder` (fixed order, times and owners: the same bytes every run); its sha256."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            info = tarfile.TarInfo(f"tinyop-0.1.0/{path.relative_to(folder)}")
            data = path.read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    dest.write_bytes(buf.getvalue())
    return hashlib.sha256(buf.getvalue()).hexdigest()


RECIPE_YAML = """\
description: tinyop against Debian trixie's python3-torch (the CI's extension set)
labels: [cpu, extensions, test]
base:
  image: {image}
  distro: trixie
python:
  version: "3.13"
packages:
  build: [libtorch-dev]
framework:
  name: pytorch
  source:
    prebuilt: base-image
verify:
  allreduce: false
extensions:
  - name: buildctl-test-tinyop
    module: tinyop
    source:
      tarball:
        url: {url}
        sha256: {sha256}
    smoke: |
      import torch, tinyop
      x = torch.arange(6.0).reshape(2, 3)
      assert torch.equal(tinyop.add_one(x), x + 1), "tinyop.add_one(x) != x + 1"
      assert torch.equal(torch.ops.tinyop.add_one(x), x + 1), "the registered op disagrees"
"""


@pytest.fixture(scope="module")
def ext_build(tmp_path_factory, docker_client, debian_torch) -> dict:
    """`invoke build --recipe ext-tinyop-debian.yaml --json`; its payload, manifest and report."""
    work = tmp_path_factory.mktemp("extensions-integration")
    served = work / "served"
    served.mkdir()
    sha = source_tarball(TINYOP, served / "tinyop-0.1.0.tar.gz")
    env = {"BUILDCTL_ARTIFACTS": str(work / "artifacts"), "PYTHONUNBUFFERED": "1", **LOCAL}
    with serve_folder(served) as url:
        recipe = work / f"{RECIPE}.yaml"
        recipe.write_text(RECIPE_YAML.format(image=DEBIAN_TORCH, url=f"{url}tinyop-0.1.0.tar.gz", sha256=sha))
        proc = invoke("build", "--recipe", str(recipe), "--network", "host", "--ca-cert", CA_BUNDLE, "--json",
                      env=env, cwd=work)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    assert proc.returncode == 0 and payload.get("ok"), f"build failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
    artifact = Path(payload["artifact"])
    yield {"payload": payload, "work": work, "env": env, "recipe": recipe, "artifact": artifact,
           "manifest": json.loads((artifact / "manifest.json").read_text()),
           "report": json.loads((artifact / "report.json").read_text())}
    volume = engine_names.work_volume_name(RECIPE, payload["key"], artifacts.namespace())
    engine.remove_volume(docker_client, volume)


def _wheel_metadata(wheel: Path) -> str:
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        [meta] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return zf.read(meta).decode()


def test_the_manifest_records_what_the_extension_was_built_against_and_pins_it(ext_build):
    manifest = ext_build["manifest"]
    ext = manifest["extensions"]
    against = ext["built_against"]
    assert against["version"] == TORCH and against["cxx11_abi"] is True and against["cuda"] is None
    assert against["framework"] == "torch" and against["from"] == "the base image" and against["wheel_sha256"] is None
    [row] = ext["extensions"]
    assert row["name"] == "buildctl-test-tinyop" and row["module"] == "tinyop" and row["version"] == "0.1.0"
    assert row["frontend"] == "setuptools" and row["file"] == "buildctl_test_tinyop-0.1.0-cp313-cp313-linux_x86_64.whl"
    assert f"torch=={TORCH}" in row["requires"]
    # the framework was not built: the artifact's wheels are the extension's alone, and it requires this torch
    assert [w["file"] for w in manifest["wheels"]] == [row["file"]]
    metadata = _wheel_metadata(ext_build["artifact"] / row["file"])
    assert f"Requires-Dist: torch=={TORCH}" in metadata.splitlines()


def test_the_build_verified_the_extension_in_a_fresh_container(ext_build):
    report = ext_build["report"]
    assert report["ok"] is True and report["wheel"] is None  # the torch of the image, probed as it is
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["extension buildctl-test-tinyop"]["ok"] is True, checks["extension buildctl-test-tinyop"]
    assert report["probe"]["extensions"]["torch"]["version"] == TORCH


def test_pypi_torchvision_beside_this_torch_is_refused_in_one_line(ext_build, docker_client):
    proc = invoke("verify", "--recipe", str(ext_build["recipe"]), "--beside", "torchvision==0.21.0", "--json",
                  env=ext_build["env"], cwd=ext_build["work"], timeout=900)
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["extension buildctl-test-tinyop"]["ok"] is True  # ours still fits
    beside = checks["beside torchvision"]
    assert beside["ok"] is False and "\n" not in beside["detail"], beside
    # why, in the user's terms: the old C++ ABI, CUDA that this torch lacks, the torch it was built for
    for why in ("C++11 ABI 0", "1 in torch", "CUDA", TORCH):
        assert why in beside["detail"], beside["detail"]
    assert docker_client.containers.list(all=True, filters={"label": f"{engine.RECIPE_LABEL}={RECIPE}"}) == []
    # a question about the set, answered beside it: the artifact's own verification stands
    artifact = ext_build["artifact"]
    assert json.loads((artifact / "report.json").read_text())["ok"] is True
    assert json.loads((artifact / "beside" / "torchvision-0.21.0" / "report.json").read_text())["ok"] is False


PIP_SCRIPT = """\
set -e
{venv} /tmp/v
/tmp/v/bin/python -m pip install -q --no-cache-dir --disable-pip-version-check --index-url "$INDEX" $EXTRA buildctl-test-tinyop
cd /tmp && /tmp/v/bin/python -c '
import importlib.metadata as m, json, torch, tinyop
x = torch.ones(2)
print("RESULT " + json.dumps({{"torch": torch.__version__, "torch_file": torch.__file__,
    "tinyop": m.version("buildctl-test-tinyop"), "add_one": tinyop.add_one(x).tolist()}}))'
"""


def _pip_in_fresh_container(client, image: str, index: str, *, extra: str = "", system_torch: bool = True):
    venv = "python3 -m venv --system-site-packages" if system_torch else "python3 -m venv"
    return engine.run_container(client, image, ["/bin/sh", "-c", PIP_SCRIPT.format(venv=venv)], network_mode="host",
                                env={"INDEX": index, "EXTRA": extra, **LOCAL})


def _result(log: str) -> dict:
    line = next(ln for ln in reversed(log.splitlines()) if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_the_published_set_installs_beside_its_torch_and_only_there(ext_build, docker_client):
    work, env = ext_build["work"], ext_build["env"]
    folder = work / "index"
    published = invoke("publish", "--artifact", str(ext_build["artifact"]), "--to", str(folder), "--json", env=env,
                       cwd=work, timeout=300)
    assert published.returncode == 0, published.stderr
    assert [w["file"] for w in json.loads(published.stdout)["wheels"]] == [ext_build["manifest"]["wheels"][0]["file"]]
    # the recipe's runtime image: Debian's torch and python3-venv, nothing of the build
    runtime = engine_names.image_tag(RECIPE, ext_build["payload"]["key"], artifacts.namespace(), "runtime")
    # With PyPI as the extra index, as teams install: Debian's torch declares setuptools and sympy, which
    # come from PyPI; PyPI's torch 2.15 (newer) and 2.6.0 (a better tag) are one index away.
    pypi = "--extra-index-url https://pypi.org/simple"
    with serve_folder(folder) as url:
        res = _pip_in_fresh_container(docker_client, runtime, f"{url}simple/", extra=pypi)
        assert res.exit_code == 0, res.log[-3000:]
        # ours, beside the image's torch, which pip kept
        assert _result(res.log) == {"torch": TORCH, "torch_file": "/usr/lib/python3/dist-packages/torch/__init__.py",
                                    "tinyop": "0.1.0", "add_one": [2.0, 2.0]}
        # a venv without that torch: the pin refuses every other (PyPI has no 2.6.0+debian)
        res = _pip_in_fresh_container(docker_client, runtime, f"{url}simple/", extra=pypi, system_torch=False)
    assert res.exit_code != 0
    assert f"No matching distribution found for torch=={TORCH}" in res.log, res.log[-2000:]
