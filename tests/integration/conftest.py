"""Session fixtures of tests/integration: the real Docker engine (tests/conftest.py is shared with unit).

There is no skipping: without a reachable engine `docker_client` errors with buildctl's one-line
EngineError, and so does every test that uses it.

* `docker_client`: one `docker.DockerClient` for the session (from `buildctl.engine.connect`).
* `base_image`: the tag of the bookworm base image (buildctl/base:bookworm), made once with
  debootstrap when the engine does not have it yet, reused otherwise.
* `trixie_base_image`: the same for trixie (buildctl/base:trixie; the ROCm-from-Debian recipes).
* `debian_torch`: Debian trixie's python3-torch in that base image (DEBIAN_TORCH), for `verify --image`
  and the extension recipes.
* `test_labels`: labels unique to this session; everything created with them (containers,
  volumes, images) is removed when the session ends. Pass them as `labels=` to the engine calls.
* TEST_NAMESPACE: the session's BUILDCTL_NAMESPACE (set by tests/conftest.py); what buildctl created
  in it is removed when the session ends (`remove_namespace_objects`; test_shared_cache_integration
  imports both from here).
* Every test here is marked `integration` (`-m "not integration"` selects tests/unit).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from docker import errors as derr

from buildctl import engine
from buildctl.errors import BuildctlError
from buildctl.host import base_images

BASE_DISTRO = "bookworm"
TEST_NAMESPACE = os.environ["BUILDCTL_NAMESPACE"]  # tests/conftest.py set it, for the whole session
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _remove_test_namespace() -> Iterator[None]:
    """At the end of the session: remove the containers, volumes and images labelled with the
    session's namespace (nothing to do when no engine was reachable: nothing was created)."""
    yield
    try:
        client = engine.connect(environ=os.environ)
    except BuildctlError:
        return
    with contextlib.closing(client):
        remove_namespace_objects(client, TEST_NAMESPACE)


def remove_namespace_objects(client: docker.DockerClient, namespace: str) -> None:
    """Remove the containers, volumes and images labelled with `namespace` (what its builds made)."""
    selector = {"label": [f"buildctl.namespace={namespace}"]}
    for c in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(derr.NotFound, derr.APIError):
            c.remove(force=True, v=True)
    for v in client.volumes.list(filters=selector):
        with contextlib.suppress(derr.NotFound, derr.APIError):
            v.remove(force=True)
    for img in client.images.list(filters=selector):
        with contextlib.suppress(derr.NotFound, derr.APIError):
            client.images.remove(img.id, force=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = engine.connect(environ=os.environ)
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    """Tag of the bookworm base image; made (debootstrap, a few minutes) only if the engine lacks it."""

    def show(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    base_images.ensure_base_image(docker_client, BASE_DISTRO, host=base_images.HostRun(os.environ), on_line=show)
    return base_images.default_tag(BASE_DISTRO)


@pytest.fixture(scope="session")
def trixie_base_image(docker_client: docker.DockerClient) -> str:
    """Tag of the trixie base image; made (debootstrap, a few minutes) only if the engine lacks it."""
    base_images.ensure_base_image(docker_client, "trixie", host=base_images.HostRun(os.environ), on_line=lambda line: print(line, file=sys.stderr, flush=True))
    return base_images.default_tag("trixie")


DEBIAN_TORCH = "buildctl-test/debian-torch:trixie"
DEBIAN_TORCH_DOCKERFILE = """\
FROM buildctl/base:trixie
ENV DEBIAN_FRONTEND=noninteractive
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends python3-torch && rm -rf /var/lib/apt/lists/*
"""


@pytest.fixture(scope="session")
def debian_torch(docker_client: docker.DockerClient, trixie_base_image: str) -> str:
    """The image id of Debian's python3-torch 2.6.0 in buildctl/base:trixie (apt over http://deb.debian.org,
    six minutes cold; the engine's layer cache makes it seconds after). A torch neither pip nor buildctl
    built: `invoke verify --image` probes it, extension recipes build against it. A stable tag, no session
    label (reruns reuse it), labelled buildctl.role=test-image so that it can be found."""
    with tempfile.TemporaryDirectory(prefix="buildctl-test-debian-torch-") as ctx:
        Path(ctx, "Dockerfile").write_text(DEBIAN_TORCH_DOCKERFILE)
        return engine.build_image(
            docker_client,
            engine.ImageSpec(
                Path(ctx), DEBIAN_TORCH, network_mode="host", labels={"buildctl.role": "test-image"}
            ),
            on_line=lambda line: print(line, file=sys.stderr, flush=True),
        )


@pytest.fixture(scope="session")
def test_labels(docker_client: docker.DockerClient) -> Iterator[dict[str, str]]:
    labels = {"buildctl.test": uuid.uuid4().hex[:12]}
    yield labels
    selector = {"label": [f"{k}={v}" for k, v in labels.items()]}
    for c in docker_client.containers.list(all=True, filters=selector):
        try:
            c.remove(force=True, v=True)
        except derr.NotFound:
            pass
    for v in docker_client.volumes.list(filters=selector):
        try:
            v.remove(force=True)
        except derr.NotFound:
            pass
    for img in docker_client.images.list(filters=selector):
        try:
            docker_client.images.remove(img.id, force=True)
        except derr.NotFound:
            pass


def default_sigint() -> None:
    """preexec_fn for a child a test interrupts: SIGINT as in a terminal. A test run started in the
    background by a shell without job control (`pytest ... &` in a script, many CI wrappers) inherits
    SIGINT ignored, and Python then never turns it into KeyboardInterrupt: the child runs on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def containers_made_since(client: docker.DockerClient, since: float, *, image: str | None = None,
                          labels: tuple[str, ...] = ()) -> list[str]:
    """Ids of the containers created from `since` on (of `image` or an image made FROM it, and with every
    one of `labels`, where given): the test's own. The engine is shared with other runs, and one that was
    killed can leave such a container behind; a user checks that what they ran went away, not that the
    engine is empty."""
    filters = {**({"ancestor": image} if image else {}), **({"label": list(labels)} if labels else {})}
    return [c["Id"] for c in client.api.containers(all=True, filters=filters) if c["Created"] >= int(since)]
