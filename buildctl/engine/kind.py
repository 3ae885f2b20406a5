"""Which engine answers on the Docker Engine API (Docker or Podman) and what it can do that the API's
own answers do not say; asked once per client.

Podman serves the Docker API (`podman system service`) with differences that buildctl handles where
they matter (build.py, run.py, connection.engine_facts), each citing its cause:
* /version names Podman only among its Components ("Podman Engine"); ServerVersion is Podman's own.
* /info never says rootless and always says MemoryLimit: true, also where Podman cannot limit memory
  (rootless on cgroup v1: "Resource limits are not supported and ignored on cgroups V1 rootless
  systems"). The libpod API on the same socket (/libpod/info) says both: host.security.rootless and
  host.cgroupControllers (the controllers the engine's user may use).
* DeviceRequests (`--gpus`) are accepted and ignored (containers/podman#22645): no GPUs through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import docker
import requests
from docker import errors as derr

from buildctl.engine.failures import api_error, connection_lost
from buildctl.errors import InputError

DOCKER = "Docker"
PODMAN = "Podman"


@dataclass(frozen=True)
class EngineKind:
    name: str  # DOCKER or PODMAN
    version: str  # the engine's own version (Podman's, for Podman)
    rootless: bool
    memory_limits: bool  # a container's memory limit is enforced (and an OOM kill reported)
    gpu_requests: bool  # `--gpus` (DeviceRequests) reaches the NVIDIA runtime
    why_no_memory_limits: str = ""

    @property
    def podman(self) -> bool:
        return self.name == PODMAN


def kind_of(client: docker.DockerClient) -> EngineKind:
    """The engine behind `client` (cached on it: one engine per client)."""
    known = getattr(client, "_buildctl_engine_kind", None)
    if known is None:
        known = _ask(client)
        client._buildctl_engine_kind = known  # type: ignore[attr-defined]
    return known


def _ask(client: docker.DockerClient) -> EngineKind:
    try:
        version = client.version()
        info = client.info()
        podman = next((c for c in version.get("Components") or [] if c.get("Name") == "Podman Engine"), None)
        if podman is not None:
            return _podman(client, str(podman.get("Version") or version.get("Version") or ""),
                           str((podman.get("Details") or {}).get("APIVersion") or podman.get("Version")))
    except derr.APIError as e:
        raise api_error(e, "asking which engine this is") from e
    except requests.exceptions.RequestException as e:
        raise connection_lost(e, "asking which engine this is", client) from e
    security = " ".join(str(s) for s in info.get("SecurityOptions") or [])
    memory = info.get("MemoryLimit") is not False
    return EngineKind(DOCKER, str(version.get("Version") or ""), rootless="name=rootless" in security,
                      memory_limits=memory, gpu_requests="nvidia" in (info.get("Runtimes") or {}),
                      why_no_memory_limits="" if memory else "the engine reports no memory limit support")


def _podman(client: docker.DockerClient, version: str, libpod_api: str) -> EngineKind:
    # the libpod API is served under its own version prefix only (/v4.3.1/libpod/info)
    url = f"{client.api.base_url}/v{libpod_api}/libpod/info"
    libpod = client.api._result(client.api._get(url), json=True)
    host = libpod.get("host") or {}
    rootless = bool((host.get("security") or {}).get("rootless"))
    memory = "memory" in (host.get("cgroupControllers") or [])
    cgroups = host.get("cgroupVersion") or "?"
    if memory:
        why = ""
    elif rootless and cgroups == "v1":
        why = "rootless Podman on cgroup v1 ignores resource limits"
    else:
        why = f"Podman on cgroup {cgroups} has no memory controller for its user (not delegated to it)"
    return EngineKind(PODMAN, version, rootless=rootless, memory_limits=memory, gpu_requests=False,
                      why_no_memory_limits=why)


def refuse_memory_limit(kind: EngineKind, limit: str | int) -> None:
    """InputError when `kind` would ignore a memory limit (the container would run unlimited and an OOM
    kill would go unreported); nothing otherwise."""
    if not kind.memory_limits:
        raise InputError(
            f"--memory {limit}: this {kind.name} engine cannot limit a container's memory "
            f"({kind.why_no_memory_limits}), the limit would be ignored; fix: build without --memory "
            "(BUILDCTL_MEMORY), or use an engine that limits memory (rootful, or cgroup v2 with delegation)"
        )
