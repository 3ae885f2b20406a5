"""A wheel linked against another NCCL than the recipe pins must fail verification, naming both.

The build is real: demo-cuda13 with the NCCL wheel swapped for 2.27.7 (what a stale image or a
wrong NCCL_LIB_DIR does), while the recipe still pins 2.28.9 in its verify expectations. The wheel
builds and is published; verification reads ncclGetVersion() of the library the wheel loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVOKE = str(Path(sys.executable).parent / "invoke")
CA = "/etc/ssl/certs/ca-certificates.crt"


@pytest.mark.integration
def test_wheel_with_other_nccl_than_pinned_fails_verification(tmp_path, base_image):
    env = {**os.environ, "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts")}
    cmd = [INVOKE, "-r", str(REPO), "build", "--recipe", "demo-cuda13",
           "--set", "toolchain.nccl.version=2.27.7", "--set", "verify.expect.nccl=2.28.9",
           "--network", "host", "--ca-cert", CA, "--json"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=2400)
    assert proc.returncode == 1, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    # The build itself succeeded and was published: the failure is the verification's.
    artifact = Path(data["artifact"])
    assert (artifact / "manifest.json").is_file() and data["manifest"]["toolchain"]["nccl"] == "2.27.7"
    assert "2.27.7" in data["error"] and "2.28.9" in data["error"], data["error"]
    # The cause is named, and recorded beside the artifact.
    assert data["diagnosis"]["id"] == "nccl-version"
    assert json.loads((artifact / "diagnosis.json").read_text())["id"] == "nccl-version"
    report = json.loads((artifact / "report.json").read_text())
    nccl = next(c for c in report["checks"] if c["name"].lower() == "nccl")
    assert nccl["ok"] is False
    assert nccl["expected"] == "2.28.9" and nccl["actual"] == "2.27.7"
