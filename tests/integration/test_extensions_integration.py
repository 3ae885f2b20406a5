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

The stack on a framework built in the same recipe (issue 36), without the hours of a torch: demo-cpu with
two extensions (tests/fixtures/extensions/demoext-a, demoext-b: the second imports the first at run time and
only the recipe's `requires:` says so), one more build for the module, through the real CLI:

* the manifest records both, built against the demofw of this build (its version and wheel sha256); a's
  Requires-Dist pins demofw, b's pins demofw and the demoext-a built beside it;
* the build's verification imported both and ran their smoke checks against demofw's own ops;
* published to a folder index, `pip install buildctl-test-demoext-b` in a fresh container (the runtime
  image, pip --isolated, PyPI the extra index) brings exactly our demofw and demoext-a, each the artifact's
  file; demoext_b runs on them, and does not load without demoext-a.

Costs (2 cores shared with a PyTorch build, so high): about 4 min after another demo-cpu build in the
session (CI: test_build_integration's), whose compile cache it shares (32 of 34 objects hit): its images
2 min (the builder's apt layer, which lists binutils once the recipe has extensions, is not demo-cpu's),
demofw 0.4 min, the extensions 0.3 min, verification 1 min, publish and pip 0.2 min, removing the build
volume 0.3 min. Alone, with a cold compile cache: 21 min here, 16 of them the demofw compile.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
from conftest import DEBIAN_TORCH, TEST_NAMESPACE, containers_made_since
from packaging.utils import parse_wheel_filename
from publish_helpers import serve_folder

from buildctl import engine
from buildctl.pipeline import engine_names

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
    """An sdist-like NAME.tar.gz of `folder`, its files under NAME/ (fixed order, times and owners: the same
    bytes every run); its sha256."""
    top = dest.name.removesuffix(".tar.gz")
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            info = tarfile.TarInfo(f"{top}/{path.relative_to(folder)}")
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
    volume = engine_names.work_volume_name(RECIPE, payload["key"], TEST_NAMESPACE)
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
    # labelled for the torch it fits (issue 44: PyG's scheme, one index holding a set per torch)
    assert row["name"] == "buildctl-test-tinyop" and row["module"] == "tinyop" and row["version"] == "0.1.0+pt26cpu"
    assert row["frontend"] == "setuptools" and \
        row["file"] == "buildctl_test_tinyop-0.1.0+pt26cpu-cp313-cp313-linux_x86_64.whl"
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
    started = time.time()
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
    assert containers_made_since(docker_client, started, labels=(f"{engine.RECIPE_LABEL}={RECIPE}",)) == []
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
    return engine.run_container(
        client,
        engine.ContainerSpec(
            image,
            ["/bin/sh", "-c", PIP_SCRIPT.format(venv=venv)],
            network_mode="host",
            env={"INDEX": index, "EXTRA": extra, **LOCAL},
        ),
    )


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
    runtime = engine_names.image_tag(RECIPE, ext_build["payload"]["key"], TEST_NAMESPACE, "runtime")
    # With PyPI as the extra index, as teams install: Debian's torch declares setuptools and sympy, which
    # come from PyPI; PyPI's torch 2.15 (newer) and 2.6.0 (a better tag) are one index away.
    pypi = "--extra-index-url https://pypi.org/simple"
    with serve_folder(folder) as url:
        res = _pip_in_fresh_container(docker_client, runtime, f"{url}simple/", extra=pypi)
        assert res.exit_code == 0, res.log[-3000:]
        # ours, beside the image's torch, which pip kept
        assert _result(res.log) == {"torch": TORCH, "torch_file": "/usr/lib/python3/dist-packages/torch/__init__.py",
                                    "tinyop": "0.1.0+pt26cpu", "add_one": [2.0, 2.0]}
        # a venv without that torch: the pin refuses every other (PyPI has no 2.6.0+debian)
        res = _pip_in_fresh_container(docker_client, runtime, f"{url}simple/", extra=pypi, system_torch=False)
    assert res.exit_code != 0
    assert f"No matching distribution found for torch=={TORCH}" in res.log, res.log[-2000:]


# --- the stack on our own framework (issue 36) -------------------------------------------------------------
# demofw built from source by the recipe, then two extensions against it in the same build: demoext-a
# (tests/fixtures/extensions/demoext-a: a C module that imports demofw when it loads) and demoext-b (one that
# imports demoext_a when it loads, and does not say so in its setup.py: the recipe's `requires:` does). The
# path of PyTorch + torch-scatter + torch-sparse (recipes/pytorch2.6-cpu-trixie-pyg.yaml) in minutes.

DEMOFW = ROOT / "examples" / "demofw"
DEMOEXT = ROOT / "tests" / "fixtures" / "extensions"
STACK = "demo-cpu-extensions"
EXT_A, EXT_B = "buildctl-test-demoext-a", "buildctl-test-demoext-b"
# The verification wheelhouse of the demo recipes, shared with test_build_integration
VERIFY_CACHE = ROOT / ".cache" / "buildctl-test" / "verify-wheelhouse"
STACK_YAML = """\
description: demofw from source, then two extensions built against it, the second importing the first
labels: [demo, cpu, extensions, test]
extends: {demo_cpu}
framework:
  source:
    path: {src}
extensions:
  - name: {a}
    module: demoext_a
    source:
      tarball:
        url: {url}demoext-a-0.1.0.tar.gz
        sha256: {sha_a}
    smoke: |
      import demofw, demoext_a
      x, y = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]
      assert demoext_a.axpy(2.0, x, y) == demofw.add(demofw.mul(2.0, x), y), "axpy disagrees with demofw"
      assert demoext_a.demofw_version == demofw.__version__, "demoext_a loaded another demofw"
  - name: {b}
    module: demoext_b
    requires: [{a}]
    source:
      tarball:
        url: {url}demoext-b-0.1.0.tar.gz
        sha256: {sha_b}
    smoke: |
      import demofw, demoext_b
      x, y, z = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.0, 1.0, 2.0]
      want = demofw.sum(demofw.mul(demofw.add(demofw.mul(2.0, x), y), z))
      assert demoext_b.axpy_dot(2.0, x, y, z) == want, "axpy_dot disagrees with demofw"
"""


@pytest.fixture(scope="module")
def stack_build(tmp_path_factory, docker_client, base_image) -> dict:
    """`invoke build` of demo-cpu with the two extensions (a snapshot of examples/demofw, the sources served
    as tarballs); its payload, manifest and report."""
    work = tmp_path_factory.mktemp("extension-stack")
    src = work / "demofw"
    shutil.copytree(DEMOFW, src, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    served = work / "served"
    served.mkdir()
    sha_a = source_tarball(DEMOEXT / "demoext-a", served / "demoext-a-0.1.0.tar.gz")
    sha_b = source_tarball(DEMOEXT / "demoext-b", served / "demoext-b-0.1.0.tar.gz")
    env = {"BUILDCTL_ARTIFACTS": str(work / "artifacts"), "BUILDCTL_CACHE": str(VERIFY_CACHE), "PYTHONUNBUFFERED": "1",
           **LOCAL}
    with serve_folder(served) as url:
        recipe = work / f"{STACK}.yaml"
        recipe.write_text(STACK_YAML.format(demo_cpu=ROOT / "recipes" / "demo-cpu.yaml", src=src, url=url, a=EXT_A,
                                            b=EXT_B, sha_a=sha_a, sha_b=sha_b))
        proc = invoke("build", "--recipe", str(recipe), "--network", "host", "--ca-cert", CA_BUNDLE, "--json",
                      env=env, cwd=work)
    payload = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    assert proc.returncode == 0 and payload.get("ok"), f"build failed (exit {proc.returncode}):\n{proc.stderr[-5000:]}"
    artifact = Path(payload["artifact"])
    yield {"payload": payload, "work": work, "env": env, "artifact": artifact,
           "manifest": json.loads((artifact / "manifest.json").read_text()),
           "report": json.loads((artifact / "report.json").read_text())}
    engine.remove_volume(docker_client, engine_names.work_volume_name(STACK, payload["key"], TEST_NAMESPACE))


def _framework_wheel(manifest: dict) -> tuple[str, str]:
    """(file, version) of the demofw wheel the stack's build made."""
    files = {row["file"] for row in manifest["extensions"]["extensions"]}
    [wheel] = [w["file"] for w in manifest["wheels"] if w["file"] not in files]
    return wheel, str(parse_wheel_filename(wheel)[1])


def test_the_stack_records_both_extensions_against_the_demofw_it_built_and_pins_them(stack_build):
    manifest, artifact = stack_build["manifest"], stack_build["artifact"]
    demofw_file, demofw = _framework_wheel(manifest)
    assert demofw_file.startswith("demofw-") and demofw.startswith("0.1.0+cpu"), demofw_file
    sha = {w["file"]: w["sha256"] for w in manifest["wheels"]}
    against = manifest["extensions"]["built_against"]
    # the demofw of this build, by version and by its wheel's sha256
    assert against["framework"] == "demofw" and against["from"] == "this build" and against["version"] == demofw
    assert against["wheel_sha256"] == sha[demofw_file]
    rows = manifest["extensions"]["extensions"]
    assert [(r["name"], r["module"], r["version"], r["frontend"]) for r in rows] == [
        (EXT_A, "demoext_a", "0.1.0", "setuptools"), (EXT_B, "demoext_b", "0.1.0", "setuptools")]
    # each row's pins on the framework and on the set (b's on the demoext-a built here), as its wheel has them
    assert [r["requires"] for r in rows] == [[f"demofw=={demofw}"], [f"demofw=={demofw}", f"{EXT_A}==0.1.0"]]
    assert sorted(sha) == sorted([demofw_file, *(r["file"] for r in rows)])
    # Requires-Dist as pip reads it: a's `demofw` (its setup.py) pinned to this demofw; b (whose setup.py names
    # nothing) given the pin and, from the recipe's `requires:`, the demoext-a built here
    requires = {r["name"]: [ln for ln in _wheel_metadata(artifact / r["file"]).splitlines()
                            if ln.startswith("Requires-Dist:")] for r in rows}
    assert requires == {EXT_A: [f"Requires-Dist: demofw=={demofw}"],
                        EXT_B: [f"Requires-Dist: demofw=={demofw}", f"Requires-Dist: {EXT_A}==0.1.0"]}


def test_the_stack_verified_both_extensions_in_a_fresh_container(stack_build):
    report = stack_build["report"]
    assert report["ok"] is True, [c for c in report["checks"] if not c["ok"]]
    checks = {c["name"]: c for c in report["checks"]}
    for name in (EXT_A, EXT_B):
        assert checks[f"extension {name}"]["ok"] is True, checks[f"extension {name}"]
    found = report["probe"]["extensions"]
    assert found["torch"] is None  # demofw: the ABI rows (torch's symbols, C++11 ABI, CUDA libraries) do not apply
    _, demofw = _framework_wheel(stack_build["manifest"])
    results = {r["name"]: r for r in found["results"]}
    for name in (EXT_A, EXT_B):
        r = results[name]
        assert r["ok"] and r["import"]["ok"] and r["smoke"]["ok"], r
        assert r["requires"] == [f"demofw=={demofw}"] and r["abi"] == [], r


STACK_PIP = """\
set -e
pip() {{ python -m pip --isolated --disable-pip-version-check "$@"; }}
pip install -q --no-cache-dir --cert /etc/ssl/certs/ca-certificates.crt --index-url "$INDEX" \\
  --extra-index-url https://pypi.org/simple --report /tmp/report.json {b}
cd /tmp
python -c '
import json, sys
import demofw, demoext_b
loaded = "demoext_a" in sys.modules  # demoext_b loads it
import demoext_a
x, y, z = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [1.0, 1.0, 2.0]
got = [{{"name": i["metadata"]["name"], "version": i["metadata"]["version"], "requested": i["requested"],
        "url": i["download_info"]["url"], "sha256": i["download_info"].get("archive_info", {{}}).get("hashes", {{}})}}
       for i in json.load(open("/tmp/report.json"))["install"]]
print("RESULT " + json.dumps({{"installed": got, "b_loaded_a": loaded, "a_file": demoext_a.__file__,
    "a_demofw": demoext_a.demofw_version, "demofw": demofw.__version__, "axpy_dot": demoext_b.axpy_dot(2.0, x, y, z),
    "want": demofw.sum(demofw.mul(demofw.add(demofw.mul(2.0, x), y), z))}}))'
pip uninstall -q -y {a}
python -c 'import demoext_b' 2>&1 | tail -n 1 | sed "s/^/WITHOUT_A /"
"""


def test_the_stack_publishes_as_one_set_and_pip_brings_ours_from_the_index(stack_build, docker_client):
    """Published to a folder index; in a fresh container of the recipe's runtime image (python, an empty
    venv, no pip configuration: `--isolated` leaves out its environment too), `pip install` of demoext-b
    alone, PyPI the extra index, brings the set's demoext-a and demofw from our index and nothing else."""
    work, env, manifest = stack_build["work"], stack_build["env"], stack_build["manifest"]
    folder = work / "index"
    published = invoke("publish", "--artifact", str(stack_build["artifact"]), "--to", str(folder), "--json", env=env,
                       cwd=work, timeout=300)
    assert published.returncode == 0, published.stderr
    sha = {w["file"]: w["sha256"] for w in manifest["wheels"]}
    assert sorted(w["file"] for w in json.loads(published.stdout)["wheels"]) == sorted(sha)
    runtime = engine_names.image_tag(STACK, stack_build["payload"]["key"], TEST_NAMESPACE, "runtime")
    script = STACK_PIP.format(a=EXT_A, b=EXT_B)
    with serve_folder(folder) as url:
        res = engine.run_container(
            docker_client,
            engine.ContainerSpec(
                runtime,
                ["/bin/sh", "-c", script],
                network_mode="host",
                env={"INDEX": f"{url}simple/", **LOCAL},
            ),
        )
    assert res.exit_code == 0, res.log[-4000:]
    got = _result(res.log)
    demofw_file, demofw = _framework_wheel(manifest)
    by_file = {str(parse_wheel_filename(f)[0]): f for f in sha}
    # exactly the set, each file the artifact's (its sha256) from our index; only demoext-b was asked for
    assert sorted((i["name"], i["version"], i["requested"]) for i in got["installed"]) == [
        (EXT_A, "0.1.0", False), (EXT_B, "0.1.0", True), ("demofw", demofw, False)]
    for i in got["installed"]:
        wheel = by_file[i["name"]]
        assert unquote(i["url"]) == f"{url}files/{i['name']}/{wheel}" and i["sha256"] == {"sha256": sha[wheel]}, i
    # demoext_b runs on the demoext_a it loads, which runs on this demofw
    assert got["b_loaded_a"] is True and got["a_file"].startswith("/opt/venv/") and got["a_demofw"] == demofw
    assert got["axpy_dot"] == got["want"] == 39.0
    # and without demoext-a, demoext_b does not load: the recipe's `requires:` is what brought it
    without = next(ln for ln in res.log.splitlines() if ln.startswith("WITHOUT_A "))
    assert "No module named 'demoext_a'" in without, without
