"""The pull policy against the real engine: `--pull never` refuses an absent base image in one line
before anything is created, and `missing` leaves a present image alone (the engine's events say no
pull happened). No registry is reachable from the test machines, so no test needs one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from docker import errors as derr

from buildctl.engine import pull
from buildctl.errors import EngineError

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration


def invoke(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`invoke ARGS` of this checkout, run in tmp_path (its build/ and artifacts/ land there)."""
    env = {**os.environ, "BUILDCTL_DEBUG": "", "COLUMNS": "400", "BUILDCTL_ARTIFACTS": str(tmp_path / "artifacts"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(ROOT), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=env)


def session_containers(client) -> set[str]:
    """The containers of this test session's namespace (conftest sets BUILDCTL_NAMESPACE)."""
    selector = {"label": [f"buildctl.namespace={os.environ['BUILDCTL_NAMESPACE']}"]}
    return {c.id for c in client.containers.list(all=True, filters=selector)}


def image_events(client, since: float) -> list[tuple[str, str]]:
    """(action, image name) of the engine's image events from `since` until now (fractional seconds)."""
    events = client.events(since=f"{since:.3f}", until=f"{time.time():.3f}", decode=True, filters={"type": "image"})
    return [(e["Action"], e["Actor"]["Attributes"].get("name", "")) for e in events]


def test_pull_never_refuses_an_absent_image_in_one_line_and_creates_nothing(tmp_path, docker_client):
    absent = f"buildctl-test/pull-absent:{uuid.uuid4().hex[:12]}"
    with pytest.raises(derr.ImageNotFound):
        docker_client.images.get(absent)
    before = session_containers(docker_client)
    proc = invoke(tmp_path, "build", "--recipe", "demo-cpu", "--base-image", absent, "--pull", "never")
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: base image {absent} is not in the engine, and --pull never forbids pulling it; fix: "
                      f"`docker pull {absent}` where a registry is reachable, `docker load -i FILE` of a saved copy, "
                      "or `invoke base-image --distro bookworm` and --base-image buildctl/base:bookworm"], proc.stderr
    assert "Traceback" not in proc.stderr
    assert session_containers(docker_client) == before
    assert not (tmp_path / "artifacts").exists()


def test_missing_leaves_a_present_base_image_alone(docker_client, base_image):
    """The local base image and a registry-named tag of it (a pull of which could only fail: .invalid
    never resolves): `missing` uses both as they are; `always` does go to the registry for the second."""
    registry_named = f"registry.invalid/buildctl-test/base:{uuid.uuid4().hex[:12]}"
    image = docker_client.images.get(base_image)
    since = time.time()
    image.tag(registry_named)
    try:
        assert pull.ensure_images(docker_client, [base_image, registry_named], "missing", distro="bookworm") == []
        events = image_events(docker_client, since)
        assert ("tag", registry_named) in events  # the window holds what this test did...
        assert not [e for e in events if e[0] == "pull" and e[1] in (base_image, registry_named)]  # ...and no pull
        assert docker_client.images.get(registry_named).id == docker_client.images.get(base_image).id == image.id
        with pytest.raises(EngineError, match=r"^the pull of base image registry\.invalid/.* failed \(.*registry\.invalid"):
            pull.ensure_images(docker_client, [registry_named], "always", distro="bookworm")
    finally:
        docker_client.images.remove(registry_named)
