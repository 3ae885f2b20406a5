"""Looking up, listing and removing the objects buildctl makes in the engine (their labels and names:
labels.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import docker
from docker import errors as derr

from buildctl.engine.failures import api_error
from buildctl.engine.labels import LABEL, LABEL_VALUE, buildctl_labels, short_name
from buildctl.errors import EngineError


def image_exists(client: docker.DockerClient, ref: str) -> bool:
    """Whether the engine has image `ref` (a name or id)."""
    return inspect_image(client, ref) is not None


def inspect_image(client: docker.DockerClient, ref: str) -> dict | None:
    """The engine's inspection of image `ref` (a name or id), None when it has no such image."""
    try:
        return client.api.inspect_image(ref)
    except derr.NotFound:
        return None
    except derr.APIError as e:
        raise api_error(e, f"looking up image {ref}") from e


def volume_exists(client: docker.DockerClient, name: str) -> bool:
    """Whether the engine has volume `name`."""
    try:
        client.api.inspect_volume(name)
        return True
    except derr.NotFound:
        return False
    except derr.APIError as e:
        raise api_error(e, f"looking up volume {name}") from e


def remove_volume(client: docker.DockerClient, name: str) -> bool:
    """Remove a volume; False when there was none. A volume in use is an EngineError with the fix."""
    try:
        client.api.remove_volume(name)
        return True
    except derr.NotFound:
        return False
    except derr.APIError as e:
        if e.status_code == 409:
            raise EngineError(
                f"volume {name} is in use by a container; fix: remove the container first "
                f"(docker ps -a --filter volume={name})"
            ) from e
        raise api_error(e, f"removing volume {name}") from e


def labelled(client: docker.DockerClient, kind: str, selector: Mapping[str, str],
             **params: Any) -> list[dict]:
    """The engine's listing (its raw dicts) of the containers (all), images or volumes (`kind`) that
    carry every label of `selector`; image tags as Docker names them (`short_name`).

    Docker ANDs label filters. Podman 4.3's Docker API ORs them for volumes (a selector then lists other
    namespaces' volumes, which a clean would remove) and finds no image at all given two: the engine is
    asked for the first label only, and every label is checked here.
    """
    (key, value), *_ = selector.items()
    filters = {"label": [f"{key}={value}"]}
    try:
        if kind == "containers":
            rows = client.api.containers(all=True, filters=filters, **params)
        elif kind == "images":
            rows = client.api.images(filters=filters, **params)
        else:
            rows = client.api.volumes(filters=filters, **params).get("Volumes") or []
    except derr.APIError as e:
        raise api_error(e, f"listing {kind}") from e
    rows = [r for r in rows if _carries(r.get("Labels"), selector)]
    for r in rows:
        if "RepoTags" in r:
            r["RepoTags"] = [short_name(t) for t in r.get("RepoTags") or []]
    return rows


def _carries(labels: Mapping[str, str] | None, selector: Mapping[str, str]) -> bool:
    return all((labels or {}).get(k) == v for k, v in selector.items())


def list_buildctl_containers(
    client: docker.DockerClient, labels: Mapping[str, str] | None = None
) -> list[Any]:
    """All containers (running or not) labelled buildctl=1 and, when given, with these labels too
    (checked here, as in `labelled`)."""
    want = buildctl_labels(labels)
    try:
        found = client.containers.list(all=True, filters={"label": [f"{LABEL}={LABEL_VALUE}"]})
    except derr.APIError as e:
        raise api_error(e, "listing containers") from e
    return [c for c in found if _carries(c.labels, want)]


def list_buildctl_volumes(client: docker.DockerClient, labels: Mapping[str, str] | None = None) -> list[Any]:
    """All volumes labelled buildctl=1 and, when given, with these labels too (checked here, as in
    `labelled`: Podman's Docker API would list volumes with any one of them)."""
    want = buildctl_labels(labels)
    try:
        found = client.volumes.list(filters={"label": [f"{LABEL}={LABEL_VALUE}"]})
    except derr.APIError as e:
        raise api_error(e, "listing volumes") from e
    return [v for v in found if _carries(v.attrs.get("Labels"), want)]
