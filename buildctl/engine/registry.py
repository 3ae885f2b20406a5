"""Builder and runtime images shared between engines through a registry (site `registry`).

An image is named after what it is made from: the rendered build context and the base image's id
(`image_key`), not the source, so every build of one recipe and toolchain on any engine asks the
registry for the same reference, `<registry>/buildctl-<recipe>:<image key>-<target>`. The engine that
builds it first pushes it; the others pull it instead of building it again.

Credentials follow Docker's convention: `docker login <registry>` on the engine's client side; the
engine reads them from the client's config (docker-py does), and buildctl never sees, prints or stores
them. A registry that does not answer costs a warning line, never the build: the image is built as if
no registry were set.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from buildctl import urls

if TYPE_CHECKING:  # docker-py is imported by the pull and the push: a build computes image_key without it
    import docker

LineSink = Callable[[str], None]
# docker-py also warns (two lines on stderr) of the missing helper that its DockerException then names.
warnings.filterwarnings("ignore", message=r".* not installed or not available in PATH", category=UserWarning,
                        module=r"docker\.credentials")
KEYED_FILES_EXCLUDED = ("recipe.resolved.yaml",)  # the resolved recipe names the source; the image does not use it

def image_key(files: Mapping[str, str], base_image_id: str) -> str:
    """What an image is made from: every rendered file it is built from, and the base image."""
    h = hashlib.sha256()
    for name in sorted(files):
        if name not in KEYED_FILES_EXCLUDED:
            h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    h.update(f"base {base_image_id}".encode())
    return h.hexdigest()[:16]


def remote_ref(registry: str, recipe: str, key: str, target: str) -> tuple[str, str]:
    """(repository, tag) of a recipe's image in the registry."""
    return f"{registry}/buildctl-{recipe.lower()}", f"{key}-{target}"


def _failures() -> tuple[type[Exception], ...]:
    """What a pull or push can raise: APIError from the engine, DockerException before any request (a
    credsStore or credHelpers helper that is missing or fails), requests' errors when the engine
    connection drops."""
    import docker.errors
    import requests

    return docker.errors.DockerException, requests.exceptions.RequestException


def _stream_error(lines) -> str | None:
    """The engine reports a failed push or pull in the stream, not as an HTTP error."""
    for item in lines:
        if isinstance(item, dict) and item.get("error"):
            return str(item.get("error")).strip().splitlines()[0][:300]
    return None


def fetch(client: docker.DockerClient, registry: str, recipe: str, key: str, target: str, local_tag: str,
          on_line: LineSink) -> str | None:
    """Pull the image from the registry and tag it `local_tag`; its id, or None when the registry does not
    have it (built here then) or does not answer (one warning line)."""
    import docker.errors

    repo, tag = remote_ref(registry, recipe, key, target)
    try:
        err = _stream_error(client.api.pull(repo, tag=tag, stream=True, decode=True))
    except docker.errors.NotFound:
        on_line(f"buildctl: registry {registry}: no {target} image {key} yet; building it here")
        return None
    except _failures() as e:
        err = str(getattr(e, "explanation", None) or e).splitlines()[0][:300]
    if err:
        if "not found" in err or "manifest unknown" in err:
            on_line(f"buildctl: registry {registry}: no {target} image {key} yet; building it here")
        else:
            on_line(f"buildctl: warning: registry {registry}: pull of the {target} image failed ({err}); "
                    "building it here")
        return None
    image = client.images.get(f"{repo}:{tag}")
    image.tag(*local_tag.rsplit(":", 1))
    on_line(f"buildctl: {target} image {key} pulled from registry {registry}")
    return image.id


def share(client: docker.DockerClient, registry: str, recipe: str, key: str, target: str, local_tag: str,
          on_line: LineSink) -> bool:
    """Push the image `local_tag` to the registry under its image key; a failure is one warning line."""
    repo, tag = remote_ref(registry, recipe, key, target)
    try:
        client.images.get(local_tag).tag(repo, tag=tag)
        err = _stream_error(client.images.push(repo, tag=tag, stream=True, decode=True))
    except _failures() as e:
        err = str(getattr(e, "explanation", None) or e).splitlines()[0][:300]
    finally:
        try:  # the registry's name for it is not needed locally: the local tag stays
            client.images.remove(f"{repo}:{tag}", noprune=True)
        except _failures():
            pass
    if err:
        on_line(f"buildctl: warning: registry {registry}: push of the {target} image failed ({err}); "
                "other engines will build it themselves (fix: `docker login` to the registry, or check it answers)")
        return False
    on_line(f"buildctl: {target} image {key} pushed to registry {registry}")
    return True


@dataclass(frozen=True)
class Shared:
    """One build's use of the site registry: its address, the images' key and the pull policy."""

    client: Any
    registry: str
    recipe: str
    image_key: str
    pull: str
    on_line: LineSink

    @classmethod
    def of(cls, spec, client, image_key: str, on_line: LineSink) -> Shared | None:
        """None without a registry (or for an artifact that records no image key)."""
        if not spec.site.registry or not image_key:
            return None
        return cls(client, urls.check_registry_address(spec.site.registry, "site.registry"), spec.name, image_key,
                   spec.site.pull or "missing", on_line)

    def fetch(self, target: str, local_tag: str) -> str | None:
        """The image pulled and tagged `local_tag`; None when it is to be built here: the registry lacks
        it, or `--pull never` (local images only). Whether the engine has it already is the caller's to
        ask (`--pull missing`)."""
        if self.pull == "never":
            return None
        return fetch(self.client, self.registry, self.recipe, self.image_key, target, local_tag, self.on_line)

    def share(self, target: str, local_tag: str) -> bool:
        return share(self.client, self.registry, self.recipe, self.image_key, target, local_tag, self.on_line)
