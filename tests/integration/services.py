"""Real servers for the scale-out tests as session fixtures (import the fixtures you use into a test module).

The servers are those of .ci/services.sh: engine B (a second dockerd), engine B over ssh (a local sshd),
redis-server, docker-registry and pypiserver. `.ci/run` starts them before pytest
(`eval "$(bash .ci/services.sh start)"`) and stops them after; their addresses reach the tests as
BUILDCTL_SVC_* variables. A session started without them (`pytest tests/integration/test_services_integration.py`)
starts them here and stops them at its end. Nothing is skipped: a service that does not start fails
the tests that use it, with the script's output.

* `services`: the addresses and the index credentials (a `Services`). Its engine A is this session's
  engine (DOCKER_HOST, as for `docker_client`; else the one the services were started beside): in the
  engine matrix (docs/engines.md) the tests of two engines pair Docker 26 or Podman with engine B.
* `engine_b`, `engine_b_ssh`: docker-py clients from `buildctl.engine.connect` for engine B, directly
  (unix://) and through ssh:// (buildctl's own ssh transport).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from buildctl import engine

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "services.sh"
START_TIMEOUT = 15 * 60  # a cold machine installs the Debian packages first


@dataclass(frozen=True)
class Services:
    engine_a: str
    engine_b: str
    engine_b_ssh: str
    redis_url: str
    registry: str  # host:port
    index_url: str  # the upload URL (pypiserver's root)
    index_simple_url: str
    index_username: str
    index_password: str
    dir: Path  # state and logs
    base_engine: str  # the engine the services were started beside: bash .ci/bootstrap made the base images there

    @staticmethod
    def from_env(env) -> Services:
        engine_a = os.environ.get("DOCKER_HOST") or env["BUILDCTL_SVC_ENGINE_A"]
        return Services(engine_a, env["BUILDCTL_SVC_ENGINE_B"], env["BUILDCTL_SVC_ENGINE_B_SSH"],
                        env["BUILDCTL_SVC_REDIS_URL"], env["BUILDCTL_SVC_REGISTRY"], env["BUILDCTL_SVC_INDEX_URL"],
                        env["BUILDCTL_SVC_INDEX_SIMPLE_URL"], env["BUILDCTL_SVC_INDEX_USERNAME"],
                        env["BUILDCTL_SVC_INDEX_PASSWORD"], Path(env["BUILDCTL_SERVICES_DIR"]),
                        env["BUILDCTL_SVC_ENGINE_A"])


VARIABLES = ("BUILDCTL_SVC_ENGINE_A", "BUILDCTL_SVC_ENGINE_B", "BUILDCTL_SVC_ENGINE_B_SSH", "BUILDCTL_SVC_REDIS_URL",
             "BUILDCTL_SVC_REGISTRY", "BUILDCTL_SVC_INDEX_URL", "BUILDCTL_SVC_INDEX_SIMPLE_URL",
             "BUILDCTL_SVC_INDEX_USERNAME", "BUILDCTL_SVC_INDEX_PASSWORD", "BUILDCTL_SERVICES_DIR")


def parse_exports(text: str) -> dict[str, str]:
    """The `export K=V` lines that `.ci/services.sh start|env` prints."""
    out = {}
    for line in text.splitlines():
        if line.startswith("export "):
            key, _, value = shlex.split(line[len("export "):])[0].partition("=")
            out[key] = value
    return out


def _script(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=START_TIMEOUT,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    if all(os.environ.get(v) for v in VARIABLES):
        yield Services.from_env(os.environ)
        return
    started = _script("start")
    if started.returncode != 0:
        pytest.fail(f".ci/services.sh start failed (exit {started.returncode}):\n{started.stderr[-4000:]}",
                    pytrace=False)
    try:
        yield Services.from_env(parse_exports(started.stdout))
    finally:
        _script("stop")


@pytest.fixture(scope="session")
def engine_b(services: Services) -> Iterator[docker.DockerClient]:
    client = engine.connect(environ={"DOCKER_HOST": services.engine_b})
    yield client
    client.close()


@pytest.fixture(scope="session")
def engine_b_ssh(services: Services) -> Iterator[docker.DockerClient]:
    client = engine.connect(environ={"DOCKER_HOST": services.engine_b_ssh})
    yield client
    client.close()


@pytest.fixture
def base_on_b(base_image: str, docker_client: docker.DockerClient, engine_b: docker.DockerClient,
              services: Services) -> Iterator[str]:
    """Engine B with the very base image of engine A (docker save | docker load, from the engine that
    made it: Podman would save it as localhost/buildctl/base:…); removed again at the end when it was
    loaded here (and no other image still uses it)."""
    try:
        engine_b.images.get(base_image)
        loaded = False
    except docker.errors.ImageNotFound:
        save = subprocess.Popen(["docker", "-H", services.base_engine, "save", base_image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", services.engine_b, "load", "-q"], stdin=save.stdout, check=True,
                       capture_output=True, timeout=600)
        assert save.wait() == 0
        loaded = True
    assert engine_b.images.get(base_image).id == docker_client.images.get(base_image).id
    yield base_image
    if loaded:
        try:
            engine_b.images.remove(base_image)
        except docker.errors.APIError:
            pass

