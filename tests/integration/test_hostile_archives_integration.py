"""Hostile archives and bundles against the real engine: each case refused cleanly (see
tests/unit/test_hostile_archives.py for the cases without an engine, and what the code did before).

A container that leaves a symlink (or a terabyte-sized sparse file) in /work/out, and bundles that
need an image build.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import containers_made_since
from repro_helpers import INVOKE, REPO, one_line_exit_2, run_repro

from buildctl import archive, engine
from buildctl.engine import transfer
from buildctl.errors import InputError

BASE_IMAGE = "buildctl/base:bookworm"

integration = pytest.mark.integration


@integration
@pytest.mark.parametrize("script,problem", [
    ("mkdir -p /work/out && echo w > /work/out/x.whl && ln -s /root /work/out/escape",
     "member 'out/escape': a symbolic link to '/root'"),
    ("mkdir -p /work/out && truncate -s 1T /work/out/x.whl", "member 'out/x.whl': 1099511627776 bytes, over"),
], ids=["symlink", "sparse-terabyte"])
def test_hostile_output_of_a_real_container_is_refused(script, problem, docker_client, base_image, test_labels,
                                                       tmp_path, monkeypatch):
    """A build container (a hostile setup.py) leaves a symlink, or a 1 TiB sparse file, in /work/out.
    Before: the symlink was skipped with a log line and the rest kept; the sparse file was streamed onto
    the host disk in full. Now: the whole output is refused, nothing written, the container removed."""
    monkeypatch.setattr(transfer, "OUTPUT_CAPS", archive.Caps(total_bytes=1 << 30, members=100, file_bytes=1 << 30))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(InputError) as info:
        engine.run_container(
            docker_client,
            engine.ContainerSpec(
                base_image, ["sh", "-c", script], outputs={"/work/out": out}, labels=test_labels
            ),
        )
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("the output /work/out of container ") and problem in msg, msg
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert engine.list_buildctl_containers(docker_client, test_labels) == []


def _image_bundle(tmp_path: Path, name: str, dockerfile: str, step: str = "wheel") -> Path:
    bundle = tmp_path / name
    (bundle / "context").mkdir(parents=True)
    (bundle / "context" / "Dockerfile").write_text(dockerfile)
    data = {"schema_version": 1, "recipe": name, "created": "2025-06-01T00:00:00+00:00", "step": step,
            "exit_code": 1, "image_id": None, "target": "builder", "command": None, "env": {"MAX_JOBS": "1"},
            "volumes": {f"buildctl-work-{name}-0123456789abcdef": "/work"}, "network": "host", "memory": None,
            "source": {"kind": "path", "git": None, "ref": None, "carried": False}, "diagnosis": None,
            "first_error": []}
    (bundle / "bundle.json").write_text(json.dumps(data))
    return bundle


@integration
def test_bundle_from_an_unset_arg_image_is_refused_without_pulling(tmp_path, docker_client):
    """Before: `FROM ${UNSET}<image>` escaped the never-pull check and the build pulled the image."""
    absent = f"buildctl-test-absent-{uuid.uuid4().hex[:8]}"
    bundle = _image_bundle(tmp_path, "hostile-from", f"FROM ${{UNSET}}{absent}\n", step="compile")
    data = json.loads((bundle / "bundle.json").read_text())
    data["command"] = ["true"]
    (bundle / "bundle.json").write_text(json.dumps(data))
    one_line_exit_2(run_repro(bundle), f"takes the image {absent}, which is not in the engine, and buildctl never pulls")


WHEELLESS_BUILDER = f"""FROM {BASE_IMAGE} AS builder
RUN printf '#!/bin/sh\\nmkdir -p /work/out\\necho torch=2.0 > /work/out/versions.txt\\necho built, but no wheel\\n' \\
      > /usr/local/bin/buildctl-build && chmod +x /usr/local/bin/buildctl-build
"""


@integration
def test_wheel_step_bundle_replays_and_shell_shows_its_summary_first(tmp_path, docker_client, base_image):
    """Before: a bundle of the `wheel` step ("the build produced no wheel") crashed the replay with a
    TypeError (its command is None). Now it reruns the build command and looks for the wheel again;
    and --shell shows what it will run before it runs it (here with no terminal, so docker run -it fails)."""
    started = time.time()
    name = f"hostile-wheel-{uuid.uuid4().hex[:8]}"
    bundle = _image_bundle(tmp_path, name, WHEELLESS_BUILDER)
    try:
        proc = run_repro(bundle, "--json")
        assert proc.returncode == 1, proc.stderr
        out = json.loads(proc.stdout)
        assert out["reproduced"] is True and out["step"] == "wheel" and out["exit_code"] == 1, out
        assert proc.stderr.splitlines()[:2] == [
            f"bundle {bundle}: {name} failed in step wheel (exit 1); the replay runs:",
            f"  image:   docker build --target builder of the bundle's context/ (network host; from the engine's "
            f"{BASE_IMAGE})"]
        assert "  command: /usr/local/bin/buildctl-build, then a look for the wheel in /work/out" in proc.stderr

        proc = subprocess.run([str(INVOKE), "repro", str(bundle), "--shell"], cwd=REPO, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert proc.returncode != 0
        assert proc.stderr.index("  command: bash, interactive") < proc.stderr.index("not a TTY"), proc.stderr
    finally:
        for img in docker_client.images.list(name=f"buildctl-repro/{name}"):
            docker_client.images.remove(img.id, force=True)
    left = [v.name for v in docker_client.volumes.list() if v.name.startswith(f"buildctl-work-{name}")]
    assert left == []
    assert containers_made_since(docker_client, started, image=base_image, labels=("buildctl.step=repro",)) == []
