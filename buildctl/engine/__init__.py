"""Docker Engine API: connect, build an image (streamed), run a container (streamed, always removed).

Everything buildctl creates in the engine carries the label `buildctl=1` (plus the caller's labels),
so that `invoke clean` and the tests can find it. Nothing is ever pulled implicitly: a missing image
is an error with the fix, because buildctl targets hosts without a registry.

The modules, one job each: connection (DOCKER_HOST, connection errors, engine facts), kind (Docker or
Podman, and what its Docker API does not say), ssh (the ssh:// transport), build (image builds),
dockerfile (the images a Dockerfile names), run (containers), transfer (files in and out of a
container), labels (labels, buildctl's names, owners), objects (looking up, listing and removal),
lazy (the connection a build holds: docker-py when a stage needs it), signals, lines (streamed output),
failures (the errors and their one-line messages). This module is their public API:
`from buildctl import engine; engine.run_container(...)`. The engines tested and their differences:
docs/engines.md.

A name is imported from its module when it is first used: a build that finds its artifact uses labels,
lazy and signals alone, and never loads docker-py (tests/unit/test_import_budget.py).
"""

from __future__ import annotations

import importlib

from buildctl.errors import EngineError as EngineError  # re-exported: the engine's failures
from buildctl.errors import StepFailed as StepFailed

# Each module and the names of the API it holds.
_MODULES = {
    "build": ("ImageSpec", "build_image"),
    "connection": ("API_TIMEOUT", "connect", "engine_facts", "engine_on_this_machine", "explain_connect_error",
                   "facts_at"),
    "dockerfile": ("base_image_refs",),
    "failures": ("ContainerNameInUse", "address_of", "api_error", "connection_lost", "display_name", "one_line",
                 "pull_hint"),
    "kind": ("DOCKER", "PODMAN", "EngineKind", "kind_of", "refuse_memory_limit"),
    "labels": ("BASE_IMAGE_LABEL", "DISTRO_LABEL", "IMAGE_REPOSITORIES", "KEEP_LABEL", "LABEL", "LABEL_VALUE",
               "NAMESPACE_LABEL", "OWNER_LABEL", "RECIPE_LABEL", "buildctl_labels", "is_buildctl_image",
               "network_mode_for", "boot_id", "pid_namespace", "process_owner", "process_start", "short_name"),
    "lazy": ("CONNECT_TIMEOUT", "EngineConnection"),
    "lines": ("LineSink",),
    "objects": ("image_exists", "inspect_image", "labelled", "list_buildctl_containers", "list_buildctl_volumes",
                "remove_volume", "volume_exists"),
    "run": ("ContainerResult", "ContainerSpec", "container_state", "remove_container", "run_container"),
    "signals": ("terminate_as_interrupt",),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str):
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


__all__ = sorted([*_HOME, "EngineError", "StepFailed"])
