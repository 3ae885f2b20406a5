"""The names of a build's engine objects: image tags, the compile container, the build-dir and compile-cache
volumes. One name per key and namespace, so a retry resumes its build directory and two builds never
share one."""

from __future__ import annotations

import hashlib
import json

from buildctl.recipe.schema import Spec
from buildctl.store import artifacts


def _ns(namespace: str) -> str:
    """The namespace's part of an engine object's name: none for the default namespace (the names
    buildctl always used, so existing build directories and caches stay in use)."""
    return "" if namespace == artifacts.DEFAULT_NAMESPACE else f"{namespace}-"


def image_tag(recipe: str, key: str, namespace: str, target: str = "builder") -> str:
    """The tag of a build's builder image (or, target='runtime', its runtime image)."""
    return f"buildctl/{recipe}:{_ns(namespace)}{'runtime-' if target == 'runtime' else ''}{key}"


def compile_container_name(recipe: str, key: str, namespace: str) -> str:
    """One name per key and namespace: the engine refuses a second compile into the same build directory."""
    return f"buildctl-compile-{_ns(namespace)}{recipe}-{key}"


def work_volume_name(recipe: str, key: str, namespace: str) -> str:
    return f"buildctl-work-{_ns(namespace)}{recipe}-{key}"


def rebuild_volume_name(recipe: str, key: str, namespace: str) -> str:
    """--check-reproducible's second build directory (mounted at another path, never resumed)."""
    return f"buildctl-rebuild-{_ns(namespace)}{recipe}-{key}"


def volume_names(spec: Spec, key: str, namespace: str) -> tuple[str, str]:
    """The build-dir volume (per artifact key: a retry or a rerun after a failure resumes it; two
    different builds never share a tree) and the compile-cache volume (per toolchain image: builds
    with the same compilers share it, so a changed source recompiles only what changed); both in
    `namespace`."""
    tc = spec.toolchain
    compilers = json.dumps([spec.base.image, spec.base.distro, *(m.model_dump(mode="json") if m else None
                                                                 for m in (tc.cuda, tc.rocm, tc.ascend))],
                           sort_keys=True)
    toolchain = hashlib.sha256(compilers.encode()).hexdigest()[:12]
    # ccache hashes compiler contents (CCACHE_COMPILERCHECK=content), so sharing never mixes toolchains.
    return work_volume_name(spec.name, key, namespace), f"buildctl-cache-{_ns(namespace)}{spec.build.cache}-{toolchain}"
