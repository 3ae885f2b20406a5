"""Docker Engine API: connect, build an image (streamed), run a container (streamed, always removed).

Everything buildctl creates in the engine carries the label `buildctl=1` (plus the caller's labels),
so that `invoke clean` and the tests can find it. Nothing is ever pulled implicitly: a missing image
is an error with the fix, because buildctl targets hosts without a registry.

The modules, one job each: connection (DOCKER_HOST, connection errors, engine facts), kind (Docker or
Podman, and what its Docker API does not say), ssh (the ssh:// transport), build (image builds),
dockerfile (the images a Dockerfile names), run (containers), transfer (files in and out of a
container), objects (labels, owners, listing and removal), signals, lines (streamed output), failures
(the errors and their one-line messages). This module is their public API:
`from buildctl import engine; engine.run_container(...)`. The engines tested and their differences:
docs/engines.md.
"""

from buildctl.engine.build import build_image
from buildctl.engine.connection import (
    API_TIMEOUT,
    CONNECT_TIMEOUT,
    connect,
    engine_facts,
    engine_on_this_machine,
    explain_connect_error,
    facts_at,
)
from buildctl.engine.dockerfile import base_image_refs
from buildctl.engine.failures import (
    ContainerNameInUse,
    api_error,
    connection_lost,
    display_name,
    one_line,
    pull_hint,
)
from buildctl.engine.kind import DOCKER, PODMAN, EngineKind, kind_of, refuse_memory_limit
from buildctl.engine.lines import LineSink
from buildctl.engine.objects import (
    BASE_IMAGE_LABEL,
    DISTRO_LABEL,
    IMAGE_REPOSITORIES,
    KEEP_LABEL,
    LABEL,
    LABEL_VALUE,
    NAMESPACE_LABEL,
    OWNER_LABEL,
    RECIPE_LABEL,
    buildctl_labels,
    image_exists,
    image_facts,
    is_buildctl_image,
    labelled,
    list_buildctl_containers,
    list_buildctl_volumes,
    network_mode_for,
    process_owner,
    process_start,
    remove_volume,
    short_name,
)
from buildctl.engine.run import ContainerResult, container_state, remove_container, run_container
from buildctl.engine.signals import terminate_as_interrupt
from buildctl.errors import EngineError, StepFailed

__all__ = [
    "API_TIMEOUT", "BASE_IMAGE_LABEL", "DISTRO_LABEL", "CONNECT_TIMEOUT", "ContainerNameInUse", "ContainerResult", "DOCKER",
    "EngineError", "EngineKind", "IMAGE_REPOSITORIES", "KEEP_LABEL", "LABEL", "LABEL_VALUE", "LineSink",
    "NAMESPACE_LABEL", "OWNER_LABEL", "PODMAN", "RECIPE_LABEL", "StepFailed", "api_error", "base_image_refs",
    "build_image", "buildctl_labels", "connect", "connection_lost", "container_state", "display_name",
    "engine_facts", "engine_on_this_machine", "explain_connect_error", "facts_at", "image_exists", "image_facts",
    "is_buildctl_image", "kind_of", "labelled", "list_buildctl_containers", "list_buildctl_volumes",
    "network_mode_for", "one_line", "process_owner", "process_start", "pull_hint", "refuse_memory_limit",
    "remove_container", "remove_volume", "run_container", "short_name", "terminate_as_interrupt",
]
