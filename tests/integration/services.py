"""Real servers for the scale-out tests as session fixtures (import the fixtures you use into a test module).

The servers are those of .ci/services.sh: engine B (a second dockerd), engine B over ssh (a local sshd),
redis-server, docker-registry, pypiserver and a build cluster (an sccache-dist scheduler and two servers). `.ci/run` starts them before pytest
(`eval "$(bash .ci/services.sh start)"`) and stops them after; their addresses reach the tests as
BUILDCTL_SVC_* variables. A session started without them (`pytest tests/integration/test_services_integration.py`)
starts them here and stops them at its end. Nothing is skipped: a service that does not start fails
the tests that use it, with the script's output.

* `services`: the addresses and the index credentials (a `Services`). Its engine A is this session's
  engine (DOCKER_HOST, as for `docker_client`; else the one the services were started beside): in the
  engine matrix (docs/engines.md) the tests of two engines pair Docker 26 or Podman with engine B.
* `private_cluster`: an sccache-dist scheduler and a server of one test's own, which it may kill.
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
    dist_scheduler: str  # the build cluster's scheduler, its client token in the URL

    @staticmethod
    def from_env(env) -> Services:
        engine_a = os.environ.get("DOCKER_HOST") or env["BUILDCTL_SVC_ENGINE_A"]
        return Services(engine_a, env["BUILDCTL_SVC_ENGINE_B"], env["BUILDCTL_SVC_ENGINE_B_SSH"],
                        env["BUILDCTL_SVC_REDIS_URL"], env["BUILDCTL_SVC_REGISTRY"], env["BUILDCTL_SVC_INDEX_URL"],
                        env["BUILDCTL_SVC_INDEX_SIMPLE_URL"], env["BUILDCTL_SVC_INDEX_USERNAME"],
                        env["BUILDCTL_SVC_INDEX_PASSWORD"], Path(env["BUILDCTL_SERVICES_DIR"]),
                        env["BUILDCTL_SVC_ENGINE_A"], env["BUILDCTL_SVC_DIST_SCHEDULER"])


VARIABLES = ("BUILDCTL_SVC_ENGINE_A", "BUILDCTL_SVC_ENGINE_B", "BUILDCTL_SVC_ENGINE_B_SSH", "BUILDCTL_SVC_REDIS_URL",
             "BUILDCTL_SVC_REGISTRY", "BUILDCTL_SVC_INDEX_URL", "BUILDCTL_SVC_INDEX_SIMPLE_URL",
             "BUILDCTL_SVC_INDEX_USERNAME", "BUILDCTL_SVC_INDEX_PASSWORD", "BUILDCTL_SERVICES_DIR",
             "BUILDCTL_SVC_DIST_SCHEDULER")


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
              services: Services) -> str:
    """Engine B with the very base image of engine A (docker save | docker load, from the engine that
    made it: Podman would save it as localhost/buildctl/base:…), left there: engine B serves the two
    engine-matrix sessions that run at once, and when one removed the image it had loaded, the other's
    build on B, in progress, failed "base image … is not in the engine" (CI of e53f267)."""
    try:
        engine_b.images.get(base_image)
    except docker.errors.ImageNotFound:
        save = subprocess.Popen(["docker", "-H", services.base_engine, "save", base_image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", services.engine_b, "load", "-q"], stdin=save.stdout, check=True,
                       capture_output=True, timeout=600)
        assert save.wait() == 0
    assert engine_b.images.get(base_image).id == docker_client.images.get(base_image).id
    return base_image


# ---------------------------------------------------------------------------------------------- a private cluster

@dataclass
class PrivateCluster:
    """An sccache-dist scheduler and its build servers of one test's own (a test may kill them; the session's
    cluster stays up), as .ci/services.sh starts its own: on the loopback, token client auth, the servers
    as root (bubblewrap). `url` carries the client token."""

    url: str
    scheduler: subprocess.Popen
    servers: list[subprocess.Popen]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _registered(port: int) -> int:
    """How many servers the scheduler lists (its status: three little-endian u64)."""
    import struct
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/scheduler/status", timeout=3) as reply:
        return struct.unpack("<QQQ", reply.read())[0]


def write_private(path: Path, text: str) -> Path:
    """A file only its owner reads (0600 from its creation): it holds a key or a token."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def write_scheduler_config(folder: Path, *, port: int, client_token: str, key: str) -> Path:
    """The scheduler's config: the client token and the key servers' tokens are signed with stand here, mode
    0600, and on no command line (issue 43)."""
    return write_private(folder / "scheduler.toml",
                         f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\ntoken = "{client_token}"\n'
                         f'[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n')


def server_token(exe: str, scheduler_config: Path, address: str) -> str:
    """The JWT a build server at `address` shows the scheduler, signed with the key of the scheduler's config
    (`--config PATH`: the key stands on no command line)."""
    return subprocess.run([exe, "auth", "generate-jwt-hs256-server-token", "--config", str(scheduler_config),
                           "--server", address], capture_output=True, text=True, check=True).stdout.strip()


def start_private_cluster(folder: Path, servers: int = 1, wait_s: float = 60) -> PrivateCluster:
    import secrets
    import sys
    import time

    exe = str(Path(sys.executable).with_name("sccache-dist"))
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "info"}
    key = subprocess.run([exe, "auth", "generate-jwt-hs256-key"], capture_output=True, text=True, check=True).stdout.strip()
    token = secrets.token_hex(16)
    port = _free_port()
    config = write_scheduler_config(folder, port=port, client_token=token, key=key)
    # every server's port and token first: nothing is started when one of them cannot be made
    server_ports = [_free_port() for _ in range(servers)]
    server_tokens = [server_token(exe, config, f"127.0.0.1:{server_port}") for server_port in server_ports]
    log = (folder / "scheduler.log").open("ab")
    scheduler = subprocess.Popen([exe, "scheduler", "--config", str(config)], env=env, stdout=log,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    procs = []
    for i, (server_port, token_of_server) in enumerate(zip(server_ports, server_tokens, strict=True)):
        for sub in ("toolchains", "build"):
            (folder / f"server-{i}" / sub).mkdir(parents=True, exist_ok=True)
        write_private(
            folder / f"server-{i}.toml",
            f'cache_dir = "{folder}/server-{i}/toolchains"\npublic_addr = "127.0.0.1:{server_port}"\n'
            f'scheduler_url = "http://127.0.0.1:{port}"\n[builder]\ntype = "overlay"\nbuild_dir = "{folder}/server-{i}/build"\n'
            f'bwrap_path = "/usr/bin/bwrap"\n[scheduler_auth]\ntype = "jwt_token"\ntoken = "{token_of_server}"\n')
        with (folder / f"server-{i}.log").open("ab") as server_log:
            procs.append(subprocess.Popen([*sudo, "env", "SCCACHE_NO_DAEMON=1", "SCCACHE_LOG=info", exe, "server", "--config",
                                           str(folder / f"server-{i}.toml")], stdout=server_log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
    deadline = time.monotonic() + wait_s
    while True:  # bounded: until every server registered (it heartbeats at its start)
        try:
            if _registered(port) >= servers:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or scheduler.poll() is not None or any(p.poll() is not None for p in procs):
            stop_private_cluster(PrivateCluster("", scheduler, procs))  # nothing of it is left running
            raise RuntimeError(f"the private sccache-dist cluster did not come up; logs in {folder}")
        time.sleep(0.2)
    return PrivateCluster(f"http://:{token}@127.0.0.1:{port}", scheduler, procs)


def stop_private_cluster(cluster: PrivateCluster) -> None:
    for proc in (*cluster.servers, cluster.scheduler):
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)


@pytest.fixture
def private_cluster(tmp_path) -> Iterator[PrivateCluster]:
    """A scheduler and one build server of this test's own (start_private_cluster); stopped afterwards."""
    cluster = start_private_cluster(tmp_path / "private-cluster")
    yield cluster
    stop_private_cluster(cluster)
