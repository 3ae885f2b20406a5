"""Images carried between engines by registry.share / registry.fetch, against the real registry and
engines A and B of .ci/services.sh.

* An image built on A is pushed under its image key; B, which has never seen it, pulls it by that key
  and gets the same image id under its own local tag; pushed back by B, A pulls it by its key.
  (Both, and the warning below, are part of the engine matrix: A is Docker 26 or Podman there.)
* A key the registry has never seen: fetch says it will build, returns None, and B is unchanged.
* A registry that does not answer: one warning line each way, nothing raised.
* The whole chain on two engines: `invoke build --registry R --cache-url REDIS` of demo-cpu on engine A
  builds and pushes the builder and runtime images; the same command on engine B (which has only the
  base image, loaded from A) pulls both instead of building them, compiles from A's objects in Redis
  and verifies: one artifact key, one wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import TEST_NAMESPACE, remove_namespace_objects
from docker import errors as derr
from registry_helpers import delete_from_registry

from buildctl.engine import registry

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]

RUN = uuid.uuid4().hex[:10]
RECIPE = f"regtest-{RUN}"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.engines
def test_an_image_built_on_a_is_pulled_by_b_by_its_key(services, docker_client, base_image, engine_b,
                                                        test_labels, tmp_path):
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {RUN} > /marker\n")
    local_a, local_b, local_back = (f"buildctl-test/{RECIPE}:{t}" for t in ("a", "b", "back"))
    key = registry.image_key({"Dockerfile": (tmp_path / "Dockerfile").read_text()}, RUN)
    lines: list[str] = []
    image, _ = docker_client.images.build(path=str(tmp_path), tag=local_a, labels=test_labels, rm=True,
                                          network_mode="none")
    repo, tag = registry.remote_ref(services.registry, RECIPE, key, "builder")
    try:
        assert registry.share(docker_client, services.registry, RECIPE, key, "builder", local_a, lines.append)
        assert lines[-1] == f"buildctl: builder image {key} pushed to registry {services.registry}"
        with pytest.raises(derr.ImageNotFound):
            engine_b.images.get(local_b)
        pulled = registry.fetch(engine_b, services.registry, RECIPE, key, "builder", local_b, lines.append)
        assert pulled == image.id == engine_b.images.get(local_b).id
        assert lines[-1] == f"buildctl: builder image {key} pulled from registry {services.registry}"

        # and back: B pushes it as the runtime image, A pulls that by its key (both ways on every engine)
        assert registry.share(engine_b, services.registry, RECIPE, key, "runtime", local_b, lines.append)
        assert registry.fetch(docker_client, services.registry, RECIPE, key, "runtime", local_back, lines.append) \
            == image.id == docker_client.images.get(local_back).id
        assert lines[-1] == f"buildctl: runtime image {key} pulled from registry {services.registry}"

        # a key nobody pushed: B builds it itself
        assert registry.fetch(engine_b, services.registry, RECIPE, "0" * 16, "runtime", local_b, lines.append) is None
        assert lines[-1].endswith("building it here") and "warning" not in lines[-1]
    finally:
        for client, ref in ((docker_client, local_a), (docker_client, local_back), (engine_b, local_b),
                            (engine_b, f"{repo}:{tag}")):
            try:
                client.images.remove(ref, force=True)
            except derr.NotFound:
                pass
        delete_from_registry(services.registry, repo.split("/", 1)[1], tag)
        delete_from_registry(services.registry, repo.split("/", 1)[1], f"{key}-runtime")


@pytest.mark.engines
def test_a_registry_that_does_not_answer_costs_a_warning_not_the_build(docker_client, base_image, test_labels):
    dead = f"127.0.0.1:{_closed_port()}"
    lines: list[str] = []
    local = f"buildctl-test/{RECIPE}:dead"
    docker_client.images.get(base_image).tag(*local.rsplit(":", 1))  # repository and tag apart: Podman refuses "repo:tag" as a repository
    try:
        assert registry.fetch(docker_client, dead, RECIPE, "1" * 16, "builder", "x:y", lines.append) is None
        assert registry.share(docker_client, dead, RECIPE, "1" * 16, "builder", local, lines.append) is False
    finally:
        docker_client.images.remove(local)
    assert len(lines) == 2 and all(line.startswith(f"buildctl: warning: registry {dead}:") for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_a_credential_helper_that_is_not_installed_costs_a_warning_not_the_build(
        docker_client, base_image, tmp_path, monkeypatch):
    """A Docker config naming a credsStore whose docker-credential-* helper is absent (a config copied from
    Docker Desktop): docker-py raises DockerException before any request; each way is one warning line."""
    from buildctl import engine

    (tmp_path / "config.json").write_text('{"credsStore": "buildctl-test-not-installed"}')
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    client = engine.connect(environ=os.environ)  # docker-py reads the config when the client is made
    where = f"127.0.0.1:{_closed_port()}/ci"
    local = f"buildctl-test/{RECIPE}:creds"
    docker_client.images.get(base_image).tag(local)
    lines: list[str] = []
    try:
        assert registry.fetch(client, where, RECIPE, "2" * 16, "builder", "x:y", lines.append) is None
        assert registry.share(client, where, RECIPE, "2" * 16, "builder", local, lines.append) is False
        repo, tag = registry.remote_ref(where, RECIPE, "2" * 16, "builder")
        with pytest.raises(derr.ImageNotFound):  # the registry's name for it is not left behind
            docker_client.images.get(f"{repo}:{tag}")
    finally:
        docker_client.images.remove(local)
        client.close()
    assert len(lines) == 2 and all(line.startswith(f"buildctl: warning: registry {where}:") for line in lines), lines
    assert all("docker-credential-buildctl-test-not-installed not installed" in line for line in lines), lines


ROOT = Path(__file__).resolve().parents[2]
CA_BUNDLE = os.environ.get("BUILDCTL_TEST_CA_CERT", "/etc/ssl/certs/ca-certificates.crt")
NETWORK = os.environ.get("BUILDCTL_TEST_NETWORK", "host")


def test_engine_b_pulls_the_images_engine_a_built_and_compiles_from_its_objects(
        tmp_path, services, docker_client, engine_b, base_on_b):
    src = tmp_path / "demofw"
    shutil.copytree(ROOT / "examples" / "demofw", src,
                    ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "*.so"))
    marker = TEST_NAMESPACE.replace("-", "_") + "_registry"
    for f in src.rglob("*.cpp"):  # objects Redis has never seen
        f.write_text(f.read_text() + f"\nnamespace {{ [[maybe_unused]] constexpr int {marker} = 0; }}\n")
    namespace = f"{TEST_NAMESPACE}-reg"
    exe = Path(sys.executable).with_name("invoke")

    def build(engine_url: str, root: Path) -> tuple[str, dict]:
        cmd = [str(exe), "-r", str(ROOT), "build", "--recipe", "demo-cpu", "--set", f"framework.source.path={src}",
               "--network", NETWORK, "--ca-cert", CA_BUNDLE, "--registry", services.registry,
               "--cache-url", services.redis_url]
        env = {**os.environ, "DOCKER_HOST": engine_url, "BUILDCTL_ARTIFACTS": str(root),
               "BUILDCTL_NAMESPACE": namespace, "COLUMNS": "200"}
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30 * 60,
                              stdin=subprocess.DEVNULL)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, output[-6000:]
        return output, json.loads(next(root.glob("demo-cpu/*/manifest.json")).read_text())

    image_key = None
    try:
        out_a, a = build(services.engine_a, tmp_path / "root-a")
        image_key = a["runtime"]["image_key"]
        assert f"builder image {image_key} pushed to registry {services.registry}" in out_a
        assert f"runtime image {image_key} pushed to registry {services.registry}" in out_a

        out_b, b = build(services.engine_b, tmp_path / "root-b")
        assert f"builder image {image_key} pulled from registry {services.registry}" in out_b
        assert f"runtime image {image_key} pulled from registry {services.registry}" in out_b
        # no image step ran on B (verification, after it, builds the bare image of the `portable` check on a
        # fresh engine: its apt-get is no image step)
        assert "==> verify" in out_b and "apt-get install" not in out_b.split("==> verify")[0]
        assert b["key"] == a["key"] and b["wheels"][0]["file"] == a["wheels"][0]["file"]
        cache_b = b["compile_cache"]
        assert cache_b["remote"]["hits"] > 0 and cache_b["misses"] == 0, cache_b
        assert b["engine"]["server_version"]  # built and verified on B
        assert services.redis_url.rpartition("@")[0].rpartition(":")[2] not in out_a + out_b
    finally:
        for client in (docker_client, engine_b):
            remove_namespace_objects(client, namespace)
        for target in ("builder", "runtime") if image_key else ():
            repo, tag = registry.remote_ref(services.registry, "demo-cpu", image_key, target)
            delete_from_registry(services.registry, repo.split("/", 1)[1], tag)
