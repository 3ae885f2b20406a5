"""What goes wrong in the engine, said in one line with the fix: a taken container name, an API error, a
lost connection, an image buildctl will not pull. (A failed step is errors.StepFailed.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from docker import errors as derr

from buildctl import urls
from buildctl.errors import EngineError, one_line
from buildctl.secrets import mask_url

NO_SPACE = re.compile(r"no space left on device", re.IGNORECASE)
CLEAN_FIX = ("fix: free space with `invoke clean` (or, while no build runs, `docker system prune` / `docker builder "
             "prune`: they remove the images of a running build's finished stages)")


class ContainerNameInUse(EngineError):
    """run_container was given a fixed name that another container holds."""


def api_error(e: derr.APIError, doing: str, mask: Callable[[str], str] = lambda s: s) -> EngineError:
    """The EngineError for an engine API error met while `doing` something (a full disk, no GPU runtime)."""
    why = mask(one_line(e.explanation or str(e), 300))
    if NO_SPACE.search(why):
        return EngineError(f"the Docker engine ran out of disk space while {doing}: {why}; {CLEAN_FIX}")
    if "could not select device driver" in why and "gpu" in why:
        return EngineError(
            f"the Docker engine cannot give containers GPUs while {doing}; fix: install the NVIDIA "
            "Container Toolkit (nvidia-ctk runtime configure --runtime=docker) and restart dockerd"
        )
    return EngineError(f"docker failed while {doing}: {why}")


LOCAL = "local"  # how the engine of an unset DOCKER_HOST (the default socket) is named


def display_name(url: str) -> str:
    """An engine as bundles, messages, logs, JSON and the multi-build table name it (the one masking of
    engine addresses): its URL (DOCKER_HOST's, where the caller means the default engine) with any login
    masked, or `local` ("": the default socket). An address that tools read in different ways (a login
    holding '/', '?' or '#') is not shown at all: masking cannot tell its login from its host."""
    if not url:
        return LOCAL
    if "://" in url and url.split("://", 1)[0].lower() != "unix" and urls.problem(url):
        return f"{url.split('://', 1)[0]}://(address not shown)"
    if "://" not in url and "@" in url:  # `alice:PASSWORD@host`: no scheme, so no parse tells the login apart
        return "(address not shown)"
    return mask_url(url)


def address_of(client: Any) -> str:
    """The address of the engine `client` talks to: the one connect() opened it at ("": the default socket);
    for a client made otherwise, its API's base URL (a local socket: "")."""
    known = getattr(client, "_buildctl_engine_url", None)
    if isinstance(known, str):
        return known
    base = str(getattr(getattr(client, "api", None), "base_url", "") or "")
    return "" if base.startswith("http+docker://") else base.replace("http://", "tcp://", 1)


def connection_lost(e: BaseException, doing: str, client: Any, left: str | None = None) -> EngineError:
    """The EngineError for a connection to the engine of `client` that broke while `doing` something; `left`:
    a container that may still run there (a named build container is removed by the next build of its
    key, which resumes from the build directory)."""
    where = display_name(address_of(client))
    still = (f"; container {left} may still run there: once it stops, the next `invoke build` of this recipe "
             "removes it and resumes from the build directory") if left else ""
    return EngineError(
        f"lost the connection to the Docker engine ({where}) while {doing}: {one_line(str(e), 200)}{still}; "
        "fix: check that the engine answers (`docker info`), then run the same command again"
    )


def pull_hint(ref: str) -> str:
    """The message for image `ref` missing from the engine: buildctl never pulls."""
    return (
        f"image {ref} is not in the engine and buildctl never pulls; fix: make it with "
        "`invoke base-image` (debootstrap), `docker load` it, or `docker pull` it yourself"
    )
