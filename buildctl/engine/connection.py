"""Reaching the engine: connect through DOCKER_HOST (unix://, tcp://, ssh://), explain a failed connection
in one line with the fix, and the facts about the engine a manifest records."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

import docker
import requests
from docker import errors as derr

from buildctl import urls
from buildctl.engine.failures import api_error, connection_lost, display_name, one_line
from buildctl.engine.kind import kind_of
from buildctl.engine.lazy import CONNECT_TIMEOUT
from buildctl.engine.ssh import SshBridge
from buildctl.errors import EngineError, InputError
from buildctl.secrets import Masker, mask_url, url_secrets

NO_LOGIN_FIX = ("ssh://USER@HOST with a key (ssh-add, or IdentityFile in ~/.ssh/config), or tcp://HOST:2376 with "
                "DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH")
API_TIMEOUT = 600  # seconds for one ordinary API call (a big put_archive included); streams have none


def connect(url: str | None = None, *, environ: Mapping[str, str]) -> docker.DockerClient:
    """A client for the engine at `url` (unix://, tcp://, ssh://); without one, the engine DOCKER_HOST of
    `environ` (the command's: its DOCKER_TLS_*/DOCKER_CERT_PATH too) names, or the local default (as the
    docker CLI). The client knows the address it was opened at (failures.address_of).

    ssh:// goes through the `ssh` binary and the remote's `docker system dial-stdio` (no paramiko).
    Failures are EngineError one-liners with the fix, the address's login masked (shown_engine).
    """
    env = dict(environ)
    if url:
        env["DOCKER_HOST"] = url
    host = env.get("DOCKER_HOST", "").strip()
    try:
        return _connect(host, env)
    except EngineError as e:  # whatever a message below quotes (docker-py's own words too), masked once here
        raise EngineError(_masker(host)(str(e))) from e.__cause__


shown_engine = display_name  # an engine address as every message shows it


def _masker(host: str) -> Masker:
    return Masker(url_secrets(host))


def check_address(host: str) -> None:
    """Refuse an engine address that carries a password or token (InputError, the address masked): the
    Engine API authenticates by TLS client certificates and ssh by keys, so one there would only be
    shown, logged, or (ssh) put on ssh's command line. An ssh:// user name alone is an account."""
    if "://" not in host or host.split("://", 1)[0].lower() == "unix":
        return
    why = urls.problem(host)
    if why:  # a login tools read as a host name, or the like: never quoted
        raise InputError(
            f"the engine address (value not shown): {why.split('; fix: ')[0]}; an engine address carries no "
            f"password or token at all; fix: {NO_LOGIN_FIX}")
    login = urls.login(host)
    if login is None:
        return
    if host.split("://", 1)[0].lower() == "ssh":
        if re.fullmatch(r"[A-Za-z0-9._-]+", login):
            return
        raise InputError(
            f"the engine {shown_engine(host)}: an ssh:// address carries a user name, never a password or "
            f"token (ssh takes none from a URL, and this one would stand in ssh's command line); fix: {NO_LOGIN_FIX}")
    raise InputError(
        f"the engine {shown_engine(host)}: an engine address carries no login, password or token (the Docker API "
        f"takes TLS client certificates, ssh:// a key); fix: {NO_LOGIN_FIX}")


def _connect(host: str, env: dict[str, str]) -> docker.DockerClient:
    scheme = host.split("://", 1)[0].lower() if "://" in host else ""
    if host and scheme not in ("unix", "tcp", "ssh", "http", "https"):
        raise EngineError(
            f"DOCKER_HOST={shown_engine(host)!r} is not an engine address; fix: use unix:///path/docker.sock, "
            "tcp://host:2376 or ssh://user@host, or unset it"
        )
    check_address(host)
    if scheme == "unix":
        sock = host[len("unix://") :]
        if not os.path.exists(sock):
            raise EngineError(_no_socket(sock, explicit=True))
    bridge: SshBridge | None = None
    try:
        if scheme == "ssh":
            if not shutil.which("ssh"):
                raise EngineError(
                    f"cannot reach the Docker engine at {shown_engine(host)}: the ssh client is missing; "
                    "fix: apt-get install openssh-client"
                )
            bridge = SshBridge(host)
            client = docker.DockerClient(base_url=f"unix://{bridge.path}", timeout=CONNECT_TIMEOUT)
            client._buildctl_ssh_bridge = bridge  # type: ignore[attr-defined]  # lives as long as the client
            _close = client.close

            def close() -> None:
                _close()
                bridge.close()

            client.close = close  # type: ignore[method-assign]
        else:
            client = docker.DockerClient.from_env(timeout=CONNECT_TIMEOUT, environment=env)
        client.ping()
    except (derr.DockerException, requests.exceptions.RequestException, OSError) as e:
        detail = bridge.last_error if bridge is not None else ""
        if bridge is not None:
            bridge.close()
        raise EngineError(explain_connect_error(e, host, env, detail)) from e
    client.api.timeout = API_TIMEOUT
    client._buildctl_engine_url = host  # type: ignore[attr-defined]  # what messages name it by (address_of)
    return client


def _no_socket(sock: str, explicit: bool) -> str:
    if not explicit and not (shutil.which("dockerd") or shutil.which("docker")):
        return (
            f"no Docker engine installed: {sock} does not exist and there is no dockerd; fix: install one "
            "(apt-get install docker.io) and start dockerd, or set DOCKER_HOST to a remote engine"
        )
    where = "DOCKER_HOST" if explicit else "the default socket"
    return (
        f"the Docker engine is not running: {sock} ({where}) does not exist; fix: start dockerd "
        "(systemctl start docker, or `dockerd &` as root) or set DOCKER_HOST to a running engine"
    )


def _exception_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or any(e is s for s in seen) or len(seen) > 30:
            continue
        seen.append(e)
        todo.extend([e.__cause__, e.__context__, getattr(e, "reason", None), *e.args])
    return seen


def explain_connect_error(exc: BaseException, host: str, env: Mapping[str, str], ssh_detail: str = "") -> str:
    """The one-line EngineError message, with the fix, for a failed connection to the engine at `host`
    (its login masked, also where an error quotes it); `env`: the environment it was made from (a proxy)."""
    return _masker(host)(_explained(exc, host, env, ssh_detail))


def _explained(exc: BaseException, host: str, env: Mapping[str, str], ssh_detail: str) -> str:
    chain = _exception_chain(exc)
    text = " ".join(str(e) for e in chain)
    where = shown_engine(host) if host else "unix:///var/run/docker.sock"
    scheme = where.split("://", 1)[0].lower()

    def has(kind: type[BaseException], words: str) -> bool:
        return any(isinstance(e, kind) for e in chain) or words.lower() in text.lower()

    if scheme == "ssh":
        why = ssh_detail or one_line(str(exc), 200)
        try:
            words = " ".join(SshBridge.ssh_words(host))
        except EngineError:
            words = where[len("ssh://") :]
        return (
            f"cannot reach the Docker engine over ssh at {where}: {one_line(why, 200)}; fix: make "
            f"`ssh {words} docker system dial-stdio` work (keys or agent, known_hosts, docker CLI on the "
            "remote, remote user in the docker group)"
        )
    if scheme == "unix":
        sock = where[len("unix://") :]
        if has(PermissionError, "Permission denied"):
            return (
                f"permission denied on the Docker socket {sock}; fix: add your user to the docker group "
                "(sudo usermod -aG docker $USER, then log in again) or use sudo"
            )
        if has(FileNotFoundError, "No such file or directory"):
            return _no_socket(sock, explicit=bool(host))
        if has(ConnectionRefusedError, "Connection refused"):
            return (
                f"the Docker engine is not running: nothing listens on {sock}; fix: start dockerd "
                "(systemctl start docker, or `dockerd &` as root) or set DOCKER_HOST"
            )
    if has(requests.exceptions.SSLError, "SSL"):
        return (
            f"TLS to the Docker engine at {where} failed: {one_line(str(exc), 160)}; fix: check "
            "DOCKER_TLS_VERIFY / DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem)"
        )
    if has(ConnectionRefusedError, "Connection refused"):
        return (
            f"the Docker engine at {where} is unreachable: connection refused; fix: start dockerd listening "
            "there (dockerd -H tcp://0.0.0.0:2376 --tlsverify …) or correct DOCKER_HOST"
        )
    proxy = next(
        (env[k] for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy") if env.get(k)), None
    )
    http_error = re.search(r"\b([45]\d\d) (?:Client|Server) Error", text)
    if proxy and http_error and scheme in ("tcp", "http", "https"):
        return (
            f"the Docker engine at {where} answered through the HTTP proxy {mask_url(proxy)} with "
            f"HTTP {http_error.group(1)}; fix: add the engine's host to NO_PROXY"
        )
    if http_error:
        return (
            f"something at {where} answered HTTP {http_error.group(1)} but is not a Docker "
            "engine (a proxy in between?); fix: correct DOCKER_HOST, or add the host to NO_PROXY"
        )
    if (
        "Name or service not known" in text
        or "nodename nor servname" in text
        or "Temporary failure in name" in text
    ):
        return f"the Docker engine at {where} is unreachable: unknown host name; fix: correct DOCKER_HOST"
    if has(TimeoutError, "timed out"):
        return (
            f"the Docker engine at {where} did not answer within {CONNECT_TIMEOUT}s; fix: check the host, "
            "port and firewall, or correct DOCKER_HOST"
        )
    return (
        f"cannot connect to the Docker engine at {where}: {one_line(str(exc), 200)}; fix: check that "
        "`docker info` works with the same DOCKER_HOST"
    )


def engine_on_this_machine(client: docker.DockerClient) -> bool:
    """Whether the engine runs on this machine: a local socket or loopback address, not behind ssh://."""
    if getattr(client, "_buildctl_ssh_bridge", None) is not None:
        return False
    base = str(client.api.base_url)
    if base.startswith("http+docker://localhost"):
        return True
    host = re.sub(r"^\w+://", "", base).split("/")[0].rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "127.0.0.1", "::1")


def facts_at(url: str | None, *, environ: Mapping[str, str],
             base_images: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """engine_facts of the engine at `url` (None: DOCKER_HOST's of `environ`, the command's), over a connection
    of its own; with `base_images` ({ref: distro}), also whether each is present, pullable or missing."""
    client = connect(url or None, environ=environ)
    try:
        facts = engine_facts(client)
        if base_images:
            from buildctl.engine.pull import base_image_states

            facts["base_images"] = base_image_states(client, base_images)
        return facts
    finally:
        client.close()


def engine_facts(client: docker.DockerClient) -> dict[str, Any]:
    """Facts about the engine for manifests and diagnostics."""
    try:
        version = client.version()
        info = client.info()
    except derr.APIError as e:
        raise api_error(e, "reading the engine's version") from e
    except requests.exceptions.RequestException as e:
        raise connection_lost(e, "reading the engine's version", client) from e
    root = info.get("DockerRootDir")
    local = engine_on_this_machine(client)
    free = None
    if local and root and os.path.isdir(root):
        with contextlib.suppress(OSError):
            free = shutil.disk_usage(root).free
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    kind = kind_of(client)
    return {
        "kind": kind.name,
        "server_version": version.get("Version"),
        "api_version": version.get("ApiVersion"),
        "client_api_version": client.api.api_version,
        "min_api_version": version.get("MinAPIVersion"),
        "os": info.get("OperatingSystem"),
        "os_type": version.get("Os") or info.get("OSType"),
        "arch": version.get("Arch") or info.get("Architecture"),
        "kernel": version.get("KernelVersion") or info.get("KernelVersion"),
        "storage_driver": info.get("Driver"),
        "docker_root_dir": root,
        "cgroup_version": info.get("CgroupVersion"),
        "cpus": info.get("NCPU"),
        "memory_bytes": info.get("MemTotal"),
        "runtimes": runtimes,
        # Podman lists every runtime its containers.conf names, installed or not, and ignores --gpus
        "nvidia_runtime": kind.gpu_requests,
        "rootless": kind.rootless,
        "memory_limits": kind.memory_limits,
        "memory_limits_note": kind.why_no_memory_limits,
        "local": local,
        "free_bytes": free,
    }
