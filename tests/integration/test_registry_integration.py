"""Images carried between engines by registry.share / registry.fetch, against the real registry and
engines A and B of .ci/services.sh.

* An image built on A is pushed under its image key; B, which has never seen it, pulls it by that key
  and gets the same image id under its own local tag.
* A key the registry has never seen: fetch says it will build, returns None, and B is unchanged.
* A registry that does not answer: one warning line each way, nothing raised.
"""

from __future__ import annotations

import socket
import uuid

import pytest
import requests
from docker import errors as derr

from buildctl import registry

pytestmark = pytest.mark.integration
pytest_plugins = ["services"]

RUN = uuid.uuid4().hex[:10]
RECIPE = f"regtest-{RUN}"


def _delete(registry_addr: str, name: str, tag: str) -> None:
    url = f"http://{registry_addr}/v2/{name}/manifests/"
    head = requests.head(url + tag, timeout=30, headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    digest = head.headers.get("Docker-Content-Digest")
    if head.ok and digest:
        requests.delete(url + digest, timeout=30).raise_for_status()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_image_built_on_a_is_pulled_by_b_by_its_key(services, docker_client, base_image, engine_b,
                                                        test_labels, tmp_path):
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo {RUN} > /marker\n")
    local_a, local_b = f"buildctl-test/{RECIPE}:a", f"buildctl-test/{RECIPE}:b"
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

        # a key nobody pushed: B builds it itself
        assert registry.fetch(engine_b, services.registry, RECIPE, "0" * 16, "runtime", local_b, lines.append) is None
        assert lines[-1].endswith("building it here") and "warning" not in lines[-1]
    finally:
        for client, ref in ((docker_client, local_a), (engine_b, local_b), (engine_b, f"{repo}:{tag}")):
            try:
                client.images.remove(ref, force=True)
            except derr.NotFound:
                pass
        _delete(services.registry, repo.split("/", 1)[1], tag)


def test_a_registry_that_does_not_answer_costs_a_warning_not_the_build(docker_client, base_image, test_labels):
    dead = f"127.0.0.1:{_closed_port()}"
    lines: list[str] = []
    local = f"buildctl-test/{RECIPE}:dead"
    docker_client.images.get(base_image).tag(local)
    try:
        assert registry.fetch(docker_client, dead, RECIPE, "1" * 16, "builder", "x:y", lines.append) is None
        assert registry.share(docker_client, dead, RECIPE, "1" * 16, "builder", local, lines.append) is False
    finally:
        docker_client.images.remove(local)
    assert len(lines) == 2 and all(line.startswith(f"buildctl: warning: registry {dead}:") for line in lines), lines
    assert all("\n" not in line for line in lines)
