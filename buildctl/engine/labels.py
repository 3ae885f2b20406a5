"""The labels and names of the objects buildctl makes in the engine: `buildctl=1` (what `invoke clean`
selects), the recipe and namespace, its own image names, the process that owns a container, their
network mode. Read without the engine: a build that finds its artifact reads them and never loads
docker-py (engine/lazy.py).

Labels say what selects an object, never alone whose it is: an image built FROM one of buildctl's
inherits every label of it, and a container gets its image's labels. What `invoke clean` takes for
buildctl's is what buildctl itself gave: its image names (`is_buildctl_image`), the name a base image
was made under, and the owner label of a container it started, checked against the image's."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

LABEL = "buildctl"
LABEL_VALUE = "1"
# On containers: the process that made one (host:boot-id:pid-namespace:pid:start time) and whether it is kept on purpose, so
# that `invoke clean` can tell an orphan (its process is gone) from a running build.
OWNER_LABEL = "buildctl.owner"
KEEP_LABEL = "buildctl.keep"
# The recipe an object was made for, and the namespace of the build (see artifacts.namespace).
RECIPE_LABEL = "buildctl.recipe"
NAMESPACE_LABEL = "buildctl.namespace"
# On an image `invoke base-image` made: the name it was made under. An image built FROM it inherits the
# label but not the name, so the two agree only on the base image itself.
BASE_IMAGE_LABEL = "buildctl.base-image"
DISTRO_LABEL = "buildctl.distro"  # what `invoke base-image` debootstrapped
# buildctl's own image names: builds' builder and runtime images, verification images and base images
# (buildctl/...), replays (buildctl-repro/...).
IMAGE_REPOSITORIES = ("buildctl/", "buildctl-repro/")


def buildctl_labels(extra: Mapping[str, str] | None = None, *, recipe: str | None = None,
           namespace: str | None = None) -> dict[str, str]:
    """The labels of an engine object buildctl makes: buildctl=1 (what `invoke clean` selects), the
    recipe and namespace when given, then `extra`."""
    own = {LABEL: LABEL_VALUE, **({RECIPE_LABEL: recipe} if recipe is not None else {}),
           **({NAMESPACE_LABEL: namespace} if namespace is not None else {})}
    return {**own, **{str(k): str(v) for k, v in (extra or {}).items()}}


def is_buildctl_image(tags: list[str], labels: Mapping[str, str] | None) -> bool:
    """Whether a tagged image is one buildctl made: one of its names is buildctl's own, or it is a base
    image under the name `invoke base-image` gave it. An untagged one says nothing of its maker (the
    artifacts root's records do: artifacts.is_own_image)."""
    names = [short_name(t) for t in tags]  # Podman answers docker.io/buildctl/x:1 for buildctl/x:1
    return any(t.startswith(IMAGE_REPOSITORIES) for t in names) or (labels or {}).get(BASE_IMAGE_LABEL) in names


def process_start(pid: int) -> str | None:
    """The start time of process `pid` in clock ticks since boot (/proc/PID/stat field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def pid_namespace() -> str:
    """This process's PID namespace (the inode of /proc/self/ns/pid), "?" when it cannot be read: a pid
    means a process only within its namespace (CI jobs in containers share one engine and one host name)."""
    try:
        link = os.readlink("/proc/self/ns/pid")
    except OSError:
        return "?"
    inode = link.rpartition("[")[2].rstrip("]")
    return inode if inode.isdigit() else "?"


def boot_id() -> str:
    """This kernel's boot id (/proc/sys/kernel/random/boot_id: random per host and per boot, the same in
    every container of the host), "?" when it cannot be read. A PID namespace's inode is unique only
    within one boot of one kernel: the initial namespace has the same number on every Linux host."""
    try:
        text = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "?"
    return text if text and all(c in "0123456789abcdef-" for c in text) else "?"


def process_owner() -> str:
    """host:boot-id:pid-namespace:pid:start of this process: a pid of another host (even under the same
    host name), of another namespace, or reused by another process, does not match."""
    return f"{socket.gethostname()}:{boot_id()}:{pid_namespace()}:{os.getpid()}:{process_start(os.getpid()) or 0}"


def network_mode_for(mode: str | None) -> str | None:
    """The engine's network mode for a site's `network` setting: "default" (or none) is the engine's own, None."""
    return None if mode in (None, "", "default") else mode


def short_name(ref: str) -> str:
    """An image reference as Docker names it. Podman's Docker API answers with qualified names:
    docker.io/buildctl/x:1 for an image built as buildctl/x:1, localhost/buildctl/base:bookworm for
    one it loaded (docker load); buildctl's own names (its tags, its last-use stamps) are Docker's."""
    for prefix in ("docker.io/library/", "docker.io/", "localhost/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref
