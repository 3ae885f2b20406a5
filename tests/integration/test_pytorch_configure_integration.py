"""The real PyTorch 2.6.0 configure of `pytorch2.6-cpu-trixie`, on every CI run.

`invoke build --recipe pytorch2.6-cpu-trixie --until configure` downloads Debian's PyTorch sources
(27 MB), applies Debian's patch series and the recipe's own patch, regenerates the flatbuffers
header, and runs PyTorch's own `setup.py build --cmake-only` in the builder image. What a user checks
before spending hours on the compile is asserted on the CMake summary it prints: the venv's Python
and NumPy, the release version, OpenBLAS, gloo, and the CPU kernels CMake will build; and the configure
gate (issue 34) found every fact the recipe pins as CMake decided it.

Cost: about 3-5 minutes on 2 cores with a cold layer cache (apt installs ~300 packages into the
builder image), under a minute warm. The full compile is an evidence run (docs/evidence/), not a test.
Engine hygiene: the build-dir volume is removed unless it existed before (a user's own build of the
same key); the builder image stays as the layer cache, as after any build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from docker import errors as derr

from buildctl.host import base_images

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")


@pytest.fixture(scope="module")
def trixie_base(docker_client) -> str:
    base_images.ensure_base_image(docker_client, "trixie", host=base_images.HostRun(os.environ), on_line=lambda line: print(line, file=sys.stderr))
    return base_images.default_tag("trixie")


def test_pytorch_cpu_recipe_configures_for_real(docker_client, trixie_base, tmp_path):
    exe = Path(sys.executable).with_name("invoke")
    before = {v.name for v in docker_client.volumes.list(filters={"label": "buildctl=1"})}
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts")}
    proc = subprocess.run(
        [str(exe), "-r", str(ROOT), "build", "--recipe", "pytorch2.6-cpu-trixie", "--until", "configure",
         "--json", "--network", NETWORK, "--ca-cert", CA_BUNDLE],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=40 * 60)
    try:
        assert proc.returncode == 0, proc.stderr[-4000:]
        data = json.loads(proc.stdout)
        facts = data["configure"]
        assert data["until"] == "configure" and data["wheels"] == []
        assert facts["Python executable"] == "/opt/venv/bin/python"
        assert facts["NumPy include"].startswith("/opt/venv/lib/python3.13/site-packages/numpy/")
        assert facts["TORCH_VERSION"] == "2.6.0"  # Debian's version patch left out: the recipe's version
        assert facts["Build type"] == "Release"
        assert facts["BLAS"] == "open"
        assert facts["USE_DISTRIBUTED"] == "1" and facts["USE_GLOO"] == "1"
        assert facts["USE_CUDA"] == "0" and facts["USE_MKLDNN"] == "0"
        assert "AVX2" in facts["CPU capability"].split()
        # The configure gate (issue 34): every fact the recipe pins is what PyTorch's CMake decided.
        gate = data["gate"]
        assert gate["ok"] is True and gate["mismatches"] == 0, [r for r in gate["rows"] if r["status"] == "mismatch"]
        rows = {r["fact"]: r for r in gate["rows"]}
        for fact in ("USE_CUDA", "USE_DISTRIBUTED", "USE_GLOO", "USE_MPI", "USE_MKLDNN", "BLAS", "Python", "NumPy",
                     "build type", "compiler launcher"):
            assert rows[fact]["status"] == "ok", rows[fact]
        assert (rows["BLAS"]["asked"], rows["BLAS"]["decided"]) == ("OpenBLAS", "open")
        log = (Path(data["out_dir"]) / "build.log").read_text()
        assert "buildctl: skipped patch 2000-version.patch" in log
        assert "buildctl: applied patch pytorch-2.6-debian-wheel-layout.patch" in log
    finally:
        volume = (json.loads(proc.stdout).get("build_volume") if proc.stdout.startswith("{") else None)
        if volume and volume not in before:
            try:
                docker_client.volumes.get(volume).remove(force=True)
            except derr.NotFound:
                pass
